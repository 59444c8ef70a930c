// The model workload run with data (docs/model.md, "Running with data"): the loss and every weight gradient of
// each parallel layout equal the same model on one device.
#include <cmath>
#include <memory>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "workloads/internal/model_program.h"
#include "workloads/internal/program.h"
#include "workloads/workloads.h"
#include "tests/model/small_model.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

// A mesh over cpu:N, N the product of the axes' sizes.
constexpr auto Cpu = testing_model::CpuMesh;

// A small Llama-like model: GQA, swiglu, rmsnorm.
ModelConfig Small() {
  ModelConfig c;
  c.name = "small";
  c.vocab = 64;
  c.d_model = 32;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.d_ff = 64;
  c.activation = Activation::kSwiglu;
  c.norm = Norm::kRmsNorm;
  c.seq = 8;
  c.global_batch = 4;
  c.micro_batch = 1;
  c.seed = 7;
  return c;
}

WorkloadResult RunStep(const ModelConfig& c, const Mesh& mesh) {
  WorkloadContext ctx;
  ctx.mesh = mesh;
  return RunModel(ctx, ValidateModel(c, ctx.mesh));
}

void ExpectChecked(const WorkloadResult& r, size_t values) {
  EXPECT_TRUE(r.check.performed) << r.check.compared;
  EXPECT_TRUE(r.check.passed) << r.check.compared;
  for (const CheckedValue& v : r.check.values) EXPECT_TRUE(v.passed) << v.worst;
  EXPECT_EQ(r.check.values.size(), values);
  ASSERT_TRUE(r.model_step.has_value());  // the prediction is still there
  EXPECT_EQ(r.totals.predicted_seconds, r.model_step->step_seconds);
}

// loss + embed + head + final norm + layers x (norm1, wq, wk, wv, wo, norm2, w1, w2 [, w3] [, 2 biases]).
// A MoE layer adds its router to the same weights.
size_t Values(const ModelConfig& c) {
  size_t per_layer = 8 + (c.activation == Activation::kSwiglu ? 1 : 0) + (c.norm == Norm::kLayerNorm ? 2 : 0);
  size_t moe_layers = 0;
  for (int64_t l = 0; l < c.layers; ++l) moe_layers += c.is_moe_layer(l) ? 1 : 0;
  const size_t shared = c.moe.shared_d_ff > 0 ? (c.activation == Activation::kSwiglu ? 3 : 2) : 0;
  return 1 + 1 + (c.tied_embeddings ? 0 : 1) + (c.position == PositionEmbedding::kLearned ? 1 : 0) +
         (c.norm == Norm::kLayerNorm ? 2 : 1) + c.layers * per_layer + moe_layers * (1 + shared);
}

TEST(ModelData, OneDeviceEqualsItself) {
  ModelConfig c = Small();
  c.micro_batch = c.global_batch;  // one micro-batch, as the reference: the same arithmetic in the same order
  WorkloadResult r = RunStep(c, Cpu({{"data", 1}}));
  ExpectChecked(r, Values(c));
  EXPECT_EQ(r.check.max_abs_error, 0);
}

TEST(ModelData, DataParallelGradientsEqualOneDevice) {
  ModelConfig c = Small();
  c.parallel.data_axes = {"data"};
  ExpectChecked(RunStep(c, Cpu({{"data", 4}})), Values(c));
}

TEST(ModelData, GradientAccumulationEqualsOneDevice) {
  ModelConfig c = Small();  // 4 micro-batches of 1 sequence
  ExpectChecked(RunStep(c, Cpu({{"data", 1}})), Values(c));
}

TEST(ModelData, TensorParallelGradientsEqualOneDevice) {
  ModelConfig c = Small();
  c.parallel.tensor_axes = {"tensor"};
  ExpectChecked(RunStep(c, Cpu({{"tensor", 2}})), Values(c));
}

TEST(ModelData, SequenceParallelGradientsEqualOneDevice) {
  ModelConfig c = Small();
  c.parallel.tensor_axes = {"tensor"};
  c.parallel.sequence_parallel = true;
  ExpectChecked(RunStep(c, Cpu({{"tensor", 2}})), Values(c));
}

TEST(ModelData, PipelineGradientsEqualOneDevice) {
  ModelConfig c = Small();
  c.parallel.pipeline_axes = {"pipe"};
  ExpectChecked(RunStep(c, Cpu({{"pipe", 2}})), Values(c));
}

// Four stages and fewer micro-batches than stages (the pipeline never fills), tensor parallel inside each stage.
TEST(ModelData, DeepPipelineGradientsEqualOneDevice) {
  ModelConfig c = Small();
  c.layers = 4;
  c.global_batch = 2;
  c.parallel = {.tensor_axes = {"tensor"}, .pipeline_axes = {"pipe"}};
  ExpectChecked(RunStep(c, Cpu({{"pipe", 4}, {"tensor", 2}})), Values(c));
}

TEST(ModelData, DataPipelineTensorSequenceParallelEqualOneDevice) {
  ModelConfig c = Small();
  c.global_batch = 8;
  c.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .pipeline_axes = {"pipe"}};
  ExpectChecked(RunStep(c, Cpu({{"data", 2}, {"pipe", 2}, {"tensor", 2}})), Values(c));
}

TEST(ModelData, GptLikeLayoutsEqualOneDevice) {
  ModelConfig c = Small();
  c.activation = Activation::kGelu;
  c.norm = Norm::kLayerNorm;
  c.position = PositionEmbedding::kLearned;
  c.kv_heads = 0;
  c.tied_embeddings = true;
  c.layers = 4;
  c.global_batch = 8;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 3, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .pipeline_axes = {"pipe"}};
  ExpectChecked(RunStep(c, Cpu({{"data", 2}, {"pipe", 2}, {"tensor", 2}})), Values(c));
}

// Context parallelism: the sequence split over the context axis, keys and values all_gathered for attention.
TEST(ModelData, ContextParallelGradientsEqualOneDevice) {
  ModelConfig c = Small();
  c.parallel.context_axes = {"context"};
  ExpectChecked(RunStep(c, Cpu({{"context", 2}})), Values(c));
}

TEST(ModelData, ContextTensorSequenceDataParallelEqualOneDevice) {
  ModelConfig c = Small();
  c.seq = 16;
  c.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .context_axes = {"context"}};
  ExpectChecked(RunStep(c, Cpu({{"data", 2}, {"context", 2}, {"tensor", 2}})), Values(c));
}

TEST(ModelData, ContextPipelineLearnedPositionsEqualOneDevice) {
  ModelConfig c = Small();
  c.position = PositionEmbedding::kLearned;
  c.norm = Norm::kLayerNorm;
  c.parallel = {.context_axes = {"context"}, .pipeline_axes = {"pipe"}};
  ExpectChecked(RunStep(c, Cpu({{"pipe", 2}, {"context", 2}})), Values(c));
}

// Mixture of experts: top-2 of 4 experts every second layer, experts split over the expert (data) axis and
// exchanged with all_to_all.
ModelConfig SmallMoe() {
  ModelConfig c = Small();
  c.moe = {.experts = 4, .top_k = 2, .d_ff = 48, .every = 2};
  c.global_batch = 8;
  return c;
}

TEST(ModelData, ExpertParallelGradientsEqualOneDevice) {
  ModelConfig c = SmallMoe();
  c.parallel = {.data_axes = {"data"}, .expert_axes = {"data"}};
  WorkloadResult r = RunStep(c, Cpu({{"data", 4}}));
  ExpectChecked(r, Values(c));
}

TEST(ModelData, ExpertTensorSequenceParallelEqualOneDevice) {
  ModelConfig c = SmallMoe();
  c.activation = Activation::kGelu;
  c.moe.top_k = 1;
  c.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .expert_axes = {"data"}};
  ExpectChecked(RunStep(c, Cpu({{"data", 2}, {"tensor", 2}})), Values(c));
}

TEST(ModelData, ExpertContextParallelEqualOneDevice) {
  ModelConfig c = SmallMoe();
  c.parallel = {.data_axes = {"data"}, .context_axes = {"context"}, .expert_axes = {"data"}};
  ExpectChecked(RunStep(c, Cpu({{"data", 2}, {"context", 2}})), Values(c));
}

TEST(ModelData, ExpertPipelineDataParallelEqualOneDevice) {
  ModelConfig c = SmallMoe();
  c.layers = 4;
  c.parallel = {.data_axes = {"data", "expert"}, .pipeline_axes = {"pipe"}, .expert_axes = {"expert"}};
  ExpectChecked(RunStep(c, Cpu({{"data", 2}, {"pipe", 2}, {"expert", 2}})), Values(c));
}

// DeepSeekMoE's layer kinds the data run has: the first layer dense, a shared expert beside the routed ones.
TEST(ModelData, SharedExpertAndDenseFirstLayersEqualOneDevice) {
  ModelConfig c = SmallMoe();
  c.layers = 3;
  c.moe.every = 1;
  c.moe.first_dense = 1;
  c.moe.shared_d_ff = 32;
  c.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .expert_axes = {"data"}};
  ExpectChecked(RunStep(c, Cpu({{"data", 2}, {"tensor", 2}})), Values(c));
}

// Sliding-window attention (Gemma 2: every second layer global): a window mask beside the causal one, the same on
// every layout.
TEST(ModelData, SlidingWindowLayersEqualOneDevice) {
  ModelConfig c = Small();
  c.layers = 4;
  c.attention_window = {.window = 3, .global_every = 2};
  c.global_batch = 8;
  c.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .pipeline_axes = {"pipe"}};
  ExpectChecked(RunStep(c, Cpu({{"data", 2}, {"pipe", 2}, {"tensor", 2}})), Values(c));
  // The window changes the loss: it is not ignored.
  auto loss = [](const ModelConfig& config) {
    const std::vector<std::string> axes = {"data"};
    const internal::ModelProgram p = internal::BuildModelProgram(ValidateModel(config, Mesh::Iota({1}, axes)));
    return internal::RunProgramOnOneDevice(p.program, axes)[0].ToDoubles()[0];
  };
  ModelConfig one = c;
  one.parallel = {};
  ModelConfig global = one;
  global.attention_window = {};
  EXPECT_GT(std::fabs(loss(one) - loss(global)), 1e-6);
}

// The one-device program's gradients are those of its loss: central differences of the loss in the element of
// each weight with the largest gradient (float32 loss, eps 1e-2: agreement to ~1%).
TEST(ModelData, OneDeviceGradientsAreDerivativesOfTheLoss) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(fmt::format("variant {}", variant));
    const Norm norm = variant == 1 ? Norm::kLayerNorm : Norm::kRmsNorm;
    ModelConfig c = variant == 2 ? SmallMoe() : Small();
    c.norm = norm;
    if (variant == 1) c.position = PositionEmbedding::kLearned;  // else rope
    c.micro_batch = c.global_batch;
    // Every expert chosen: the loss is smooth in the router (with top 2 of 4 a step of 1e-2, even 1e-3, flips
    // some token's choice); the top-k selection itself is checked by the layouts above.
    if (variant == 2) c.moe.top_k = c.moe.experts;
    if (variant == 2) c.moe.shared_d_ff = 32;                            // a shared expert beside them
    if (variant == 0) c.attention_window = {.window = 3, .global_every = 2};  // layer 0 windowed
    const std::vector<std::string> axes = {"data"};
    internal::ModelProgram p = internal::BuildModelProgram(ValidateModel(c, Mesh::Iota({1}, axes)));
    const std::vector<Array> base = internal::RunProgramOnOneDevice(p.program, axes);
    ASSERT_EQ(p.labels[0].names[0], "loss");
    const double loss = base[0].ToDoubles()[0];
    EXPECT_NEAR(loss, std::log(64.0), 1.0);  // near uniform predictions at initialisation
    std::vector<std::string> weights = {"embed", "head", "final_norm.scale", "layers.0.norm1.scale",
                                        "layers.0.attn.wq", "layers.0.attn.wk", "layers.1.attn.wv",
                                        "layers.1.attn.wo", "layers.0.norm2.scale", "layers.1.mlp.w1",
                                        "layers.0.mlp.w2", "layers.1.mlp.w3"};
    if (norm == Norm::kLayerNorm) {
      weights.insert(weights.end(), {"final_norm.bias", "layers.1.norm1.bias", "positions"});
    }
    if (variant == 2) {  // layer 1 is MoE
      std::erase_if(weights, [](const std::string& w) { return w.starts_with("layers.1.mlp"); });
      weights.insert(weights.end(), {"layers.1.moe.router", "layers.1.moe.w1", "layers.1.moe.w2", "layers.1.moe.w3",
                                     "layers.1.moe.shared.w1", "layers.1.moe.shared.w2", "layers.1.moe.shared.w3"});
    }
    for (const std::string& w : weights) {
      SCOPED_TRACE(w);
      size_t in = 0, out = 0;
      while (in < p.program.inputs.size() && p.program.inputs[in].name != w) ++in;
      while (out < p.labels.size() && p.labels[out].names[0] != "grad/" + w) ++out;
      ASSERT_LT(in, p.program.inputs.size());
      ASSERT_LT(out, p.labels.size());
      const std::vector<double> grad = base[out].ToDoubles();
      size_t at = 0;
      for (size_t i = 0; i < grad.size(); ++i)
        if (std::abs(grad[i]) > std::abs(grad[at])) at = i;
      ASSERT_GT(std::abs(grad[at]), 1e-3);
      const Array original = p.program.inputs[in].value;
      auto loss_with = [&](double delta) {
        std::vector<double> v = original.ToDoubles();
        v[at] += delta;
        std::vector<float> f(v.begin(), v.end());
        p.program.inputs[in].value = Array::FromVector<float>(f, original.shape());
        return internal::RunProgramOnOneDevice(p.program, axes)[0].ToDoubles()[0];
      };
      const double eps = 1e-2;
      const double numeric = (loss_with(eps) - loss_with(-eps)) / (2 * eps);
      p.program.inputs[in].value = original;
      EXPECT_NEAR(numeric, grad[at], 0.02 * std::abs(grad[at]));
    }
  }
}

// The comparison sees the values: with no tolerance at all, a tensor-parallel run's different summation order
// fails it.
TEST(ModelData, CheckFailsWithoutTolerance) {
  ModelConfig c = Small();
  c.parallel.tensor_axes = {"tensor"};
  c.rtol = 0;
  c.atol = 0;
  WorkloadResult r = RunStep(c, Cpu({{"tensor", 2}}));
  EXPECT_TRUE(r.check.performed);
  EXPECT_FALSE(r.check.passed);
  EXPECT_GT(r.check.max_abs_error, 0);
  EXPECT_LT(r.check.max_abs_error, 1e-5);
}

// A pipeline is SPMD code: stage index from axis_index, activations and gradients sent with ppermute.
TEST(ModelData, PipelineStagesExchangeWithPpermute) {
  ModelConfig c = Small();
  c.parallel.pipeline_axes = {"pipe"};
  const internal::ModelProgram p = internal::BuildModelProgram(ValidateModel(c, Cpu({{"pipe", 2}})));
  int sends = 0, stage_index = 0;
  for (const ProgramStep& s : p.program.steps) {
    if (s.op == "ppermute") {
      ++sends;
      EXPECT_EQ(s.axes, std::vector<std::string>{"pipe"});
      EXPECT_EQ(s.pairs.size(), 1u);
    }
    if (s.op == "axis_index") ++stage_index;
  }
  // 4 micro-batches on 2 stages: 5 ticks each way, a send after every tick but the last.
  EXPECT_EQ(sends, 8);
  EXPECT_EQ(stage_index, 1);
  for (const internal::ModelOutputLabel& l : p.labels) {
    if (l.names[0].starts_with("grad/layers.")) {
      EXPECT_TRUE(l.stacked && l.names.size() == 2);
    }
  }
}

TEST(ModelData, AbstractRunsOnlyPredict) {
  WorkloadContext ctx;
  ctx.mesh = Cpu({{"data", 2}});
  ctx.abstract = true;
  ModelConfig c = Small();
  c.parallel.data_axes = {"data"};
  WorkloadResult r = RunModel(ctx, ValidateModel(c, ctx.mesh));
  EXPECT_FALSE(r.check.performed);
  ASSERT_TRUE(r.model_step.has_value());
}

TEST(ModelData, RefusesWhatItCannotRunWithData) {
  ModelConfig big = Small();
  big.vocab = 32000;
  big.d_model = 4096;
  big.d_ff = 16384;
  big.heads = 32;
  big.kv_heads = 0;
  big.seq = 2048;
  try {
    RunStep(big, Cpu({{"data", 1}}));
    ADD_FAILURE() << "a 4096-wide model ran with data";
  } catch (const Error& e) {
    // Before: RESOURCE_EXHAUSTED, though nothing ran out. After: FAILED_PRECONDITION, "too big to run with data".
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_THAT(e.message(), HasSubstr("too big to run with data"));
    EXPECT_THAT(e.message(), HasSubstr("--abstract"));
  }
  // What the data run does not express: each refused with UNIMPLEMENTED and a pointer to --abstract.
  std::vector<std::tuple<std::string, ModelConfig, Mesh>> refused;
  ModelConfig mla = Small();
  mla.kv_heads = 0;
  mla.mla = {.q_lora_rank = 16, .kv_lora_rank = 8, .qk_head_dim = 8, .qk_rope_head_dim = 4, .v_head_dim = 8};
  refused.emplace_back("multi-head latent attention", mla, Cpu({{"data", 1}}));
  ModelConfig mtp = Small();
  mtp.mtp_layers = 1;
  refused.emplace_back("multi-token prediction", mtp, Cpu({{"data", 1}}));
  ModelConfig uneven = Small();
  uneven.layers = 3;
  uneven.parallel = {.pipeline_axes = {"pipe"}, .first_stage_layers = 1};
  refused.emplace_back("the stages must hold as many", uneven, Cpu({{"pipe", 2}}));
  for (const auto& [what, config, mesh] : refused) {
    try {
      RunStep(config, mesh);
      ADD_FAILURE() << what << " ran with data";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnimplemented) << what;
      EXPECT_THAT(e.message(), HasSubstr(what));
      EXPECT_THAT(e.message(), HasSubstr("--abstract"));
    }
  }
  ModelConfig mqa = Small();
  mqa.kv_heads = 1;  // one KV head, replicated over tensor ranks: accounted, not run
  mqa.parallel.tensor_axes = {"tensor"};
  try {
    RunStep(mqa, Cpu({{"tensor", 2}}));
    ADD_FAILURE() << "replicated KV heads ran with data";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_THAT(e.message(), HasSubstr("--abstract"));
  }
}

}  // namespace
}  // namespace spmdsim
