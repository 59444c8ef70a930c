// One description of the layer (model/layer_ops.h), two builders: the simulated step prices its ops
// (model/internal/step_pricer.h) and the data run turns them into program steps
// (workloads/internal/model_layer_program.h). For every model family the suite runs, each layer's forward and
// backward emit the same collectives (op, mesh axes, bytes) and the same matrix FLOPs in both, but for the
// differences the data run states, each applied here by name (docs/model.md, "One description of the layer").
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "model/layer_ops.h"
#include "model/model.h"
#include "workloads/internal/model_program.h"
#include "workloads/internal/program.h"
#include "workloads/workloads.h"
#include "tests/model/small_model.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

// A mesh over cpu:N, N the product of the axes' sizes.
constexpr auto Cpu = testing_model::CpuMesh;

// --- the families ---

// A small Llama-style model: GQA, swiglu, rmsnorm, rope, flash attention.
ModelConfig Llama() {
  ModelConfig c;
  c.name = "llama";
  c.vocab = 64;
  c.d_model = 32;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.d_ff = 64;
  c.activation = Activation::kSwiglu;
  c.norm = Norm::kRmsNorm;
  c.seq = 8;
  c.global_batch = 8;
  return c;
}

// GPT as Megatron trains it: MHA, gelu, layernorm, learned positions, tied embeddings, dropout.
ModelConfig Gpt() {
  ModelConfig c = Llama();
  c.name = "gpt";
  c.kv_heads = 0;
  c.activation = Activation::kGelu;
  c.norm = Norm::kLayerNorm;
  c.position = PositionEmbedding::kLearned;
  c.tied_embeddings = true;
  c.dropout = true;
  return c;
}

// Top-2 of 4 experts every second layer.
ModelConfig Moe() {
  ModelConfig c = Llama();
  c.name = "moe";
  c.moe = {.experts = 4, .top_k = 2, .d_ff = 48, .every = 2};
  return c;
}

struct Family {
  std::string name;
  ModelConfig config;
  std::vector<std::pair<std::string, int64_t>> mesh;
  bool data_run = true;  // false: refused by the data run (CheckModelRunsWithData), `refused` saying why
  std::string refused;
};

using MeshAxes = std::vector<std::pair<std::string, int64_t>>;

Family Both(std::string name, ModelConfig c, MeshAxes mesh) {
  return Family{std::move(name), std::move(c), std::move(mesh), true, ""};
}

// Dense families: GPT- and Llama-style (MHA, GQA, MQA), each norm, activation and position embedding, flash and
// unfused attention, SP on and off, selective and full recompute, ZeRO-3, context and pipeline parallelism,
// sliding windows, fp8.
std::vector<Family> DenseFamilies() {
  std::vector<Family> f;
  ModelConfig gpt = Gpt();
  gpt.flash_attention = false;
  gpt.recompute = Recompute::kSelective;
  gpt.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true};
  f.push_back(Both("gpt unfused attention, TP + SP, selective recompute", gpt, {{"data", 2}, {"tensor", 2}}));
  ModelConfig gpt_zero = Gpt();
  gpt_zero.recompute = Recompute::kFull;
  gpt_zero.parallel = {.data_axes = {"data"}, .zero_stage = 3, .tensor_axes = {"tensor"}};
  f.push_back(Both("gpt flash, ZeRO-3, TP without SP, full recompute", gpt_zero, {{"data", 2}, {"tensor", 2}}));
  ModelConfig llama = Llama();
  llama.recompute = Recompute::kSelective;
  llama.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true};
  f.push_back(Both("llama GQA, TP + SP", llama, {{"data", 2}, {"tensor", 2}}));
  ModelConfig llama_tp = Llama();
  llama_tp.parallel = {.tensor_axes = {"tensor"}};
  f.push_back(Both("llama TP without SP", llama_tp, {{"tensor", 2}}));
  ModelConfig mqa = Llama();
  mqa.kv_heads = 1;
  mqa.parallel = {.data_axes = {"data"}};
  f.push_back(Both("mqa, data parallel", mqa, {{"data", 2}}));
  ModelConfig cp = Llama();
  cp.seq = 16;
  cp.parallel = {.tensor_axes = {"tensor"}, .sequence_parallel = true, .context_axes = {"context"}};
  f.push_back(Both("llama context parallel, TP + SP", cp, {{"context", 2}, {"tensor", 2}}));
  ModelConfig cp_learned = Gpt();
  cp_learned.flash_attention = false;
  cp_learned.parallel = {.data_axes = {"data"}, .context_axes = {"context"}};
  f.push_back(Both("gpt unfused attention, context parallel", cp_learned, {{"data", 2}, {"context", 2}}));
  ModelConfig pipe = Llama();
  pipe.layers = 4;
  pipe.parallel = {.tensor_axes = {"tensor"}, .sequence_parallel = true, .pipeline_axes = {"pipe"}};
  f.push_back(Both("llama pipeline, TP + SP", pipe, {{"pipe", 2}, {"tensor", 2}}));
  ModelConfig window = Llama();
  window.layers = 4;
  window.attention_window = {.window = 3, .global_every = 2};
  window.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true};
  f.push_back(Both("sliding-window layers", window, {{"data", 2}, {"tensor", 2}}));
  // fp8: the step adds Transformer Engine's casts (memory-bound, no matrix FLOPs); the data run computes float32.
  ModelConfig fp8 = Llama();
  fp8.dtype = DType::kF8E4M3FN;
  fp8.recompute = Recompute::kFull;
  fp8.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true};
  f.push_back(Both("llama fp8, TP + SP, full recompute", fp8, {{"data", 2}, {"tensor", 2}}));
  return f;
}

// MoE families: with and without shared experts (overlapped or not), a dense first layer, a capacity factor,
// experts over one data axis beside pipeline stages; experts over the tensor ranks and DeepSeek's MLA with MTP,
// which only the step runs.
std::vector<Family> MoeFamilies() {
  std::vector<Family> f;
  auto step_only = [&f](std::string name, ModelConfig c, MeshAxes mesh, std::string refused) {
    f.push_back(Family{std::move(name), std::move(c), std::move(mesh), false, std::move(refused)});
  };
  ModelConfig moe = Moe();
  moe.activation = Activation::kGelu;
  moe.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                  .expert_axes = {"data"}};
  f.push_back(Both("moe, experts over data, TP + SP", moe, {{"data", 2}, {"tensor", 2}}));
  ModelConfig shared = Moe();
  shared.layers = 3;
  shared.moe.every = 1;
  shared.moe.first_dense = 1;
  shared.moe.shared_d_ff = 32;
  shared.moe.shared_expert_overlap = true;
  shared.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                     .expert_axes = {"data"}};
  f.push_back(Both("moe, shared experts overlapped, a dense first layer", shared, {{"data", 2}, {"tensor", 2}}));
  ModelConfig shared_cp = Moe();
  shared_cp.moe.shared_d_ff = 32;
  shared_cp.moe.top_k = 1;
  shared_cp.moe.capacity_factor = 1.25;
  shared_cp.parallel = {.data_axes = {"data"}, .context_axes = {"context"}, .expert_axes = {"data"}};
  f.push_back(Both("moe, shared experts, top-1 with capacity, context parallel", shared_cp,
                   {{"data", 2}, {"context", 2}}));
  ModelConfig moe_pipe = Moe();
  moe_pipe.layers = 4;
  moe_pipe.parallel = {.data_axes = {"data", "expert"}, .pipeline_axes = {"pipe"}, .expert_axes = {"expert"}};
  f.push_back(Both("moe, pipeline, experts over one data axis", moe_pipe, {{"data", 2}, {"pipe", 2}, {"expert", 2}}));
  // Only the step runs these.
  ModelConfig folded = Moe();
  folded.moe.shared_d_ff = 32;
  folded.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                     .expert_axes = {"data", "tensor"}};
  step_only("moe, experts over the tensor ranks", folded, {{"data", 2}, {"tensor", 2}},
            "splits experts over data axes only");
  ModelConfig mla = Llama();
  mla.kv_heads = 0;
  mla.mla = {.q_lora_rank = 16, .kv_lora_rank = 8, .qk_head_dim = 8, .qk_rope_head_dim = 4, .v_head_dim = 8,
             .recompute_up_proj = true};
  mla.moe = {.experts = 4, .top_k = 2, .d_ff = 16, .first_dense = 1, .shared_d_ff = 16};
  mla.mtp_layers = 1;
  mla.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                  .expert_axes = {"data"}};
  step_only("DeepSeek-style: MLA, MoE with a shared expert, MTP", mla, {{"data", 2}, {"tensor", 2}},
            "multi-head latent attention");
  return f;
}

// The families of the shipped scenarios and of tests/workloads/model_data_test.cc.
std::vector<Family> Families() {
  std::vector<Family> f = DenseFamilies();
  for (Family& moe : MoeFamilies()) f.push_back(std::move(moe));
  return f;
}

// --- what each side emits per layer and phase ---

// One collective: its op (nccl-tests' name, cost/collective_model.h), mesh axes and bytes.
struct Comm {
  std::string op;
  std::vector<std::string> axes;
  double bytes = 0;
  bool operator<(const Comm& o) const {
    return std::tie(op, axes, bytes) < std::tie(o.op, o.axes, o.bytes);
  }
};

struct Emitted {
  std::vector<Comm> collectives;
  double flops = 0;             // matrix FLOPs: matmuls and the attention core
  std::vector<Comm> gathers;    // ZeRO-3 weight gathers (bytes: the parameters)
};

void PrintTo(const Comm& c, std::ostream* os) {
  *os << fmt::format("{} over ({}) {} B", c.op, fmt::join(c.axes, ","), c.bytes);
}

const std::vector<std::string>& AxesOf(const ModelConfig& c, LayerGroup group) {
  static const std::vector<std::string> kNone;
  switch (group) {
    case LayerGroup::kTensor: return c.parallel.tensor_axes;
    case LayerGroup::kContext: return c.parallel.context_axes;
    case LayerGroup::kExpert: return c.parallel.expert_axes;
    case LayerGroup::kZero: return c.parallel.data_axes;  // no zero_axes, no context axes with ZeRO-3 here
  }
  return kNone;
}

const std::vector<LayerOp>& Ops(const LayerOps& ops, int64_t layer, LayerPhase phase) {
  return phase == LayerPhase::kForward ? ops.Forward(layer) : ops.Backward(layer);
}

// The data run's float32 rows of the attention core materialised: Q K^T and P V (forward), their four gradients
// (backward), every query of this context rank against every key.
double MaterialisedCoreFlops(const ModelConfig& c, const ParallelDegrees& d, bool backward) {
  const double b = static_cast<double>(c.micro_batch), heads = static_cast<double>(c.heads / d.tensor);
  const double q = static_cast<double>(c.seq / d.context), s = static_cast<double>(c.seq);
  return (backward ? 4 : 2) * 2.0 * b * heads * q * s * static_cast<double>(c.effective_head_dim());
}

// What the data run emits for layer `layer`'s `phase`, derived from the step's ops by the data run's stated
// differences (docs/model.md, "Running with data" and "One description of the layer"), one rule each.
Emitted ExpectedDataRun(const ValidatedModel& model, const LayerOps& ops, int64_t layer, LayerPhase phase) {
  const ModelConfig& c = model.config();
  const ParallelDegrees& d = model.degrees();
  const double float32 = 4.0 / ops.shapes().act_size;  // float32 data whatever the dtype
  // Dense dispatch: every token's row goes to every expert, not top_k x capacity of them.
  const double dense = c.moe.experts > 0 ? c.moe.experts / (c.moe.top_k * c.moe.capacity_factor) : 1;
  const double tokens_x_experts_x_d = static_cast<double>(ops.shapes().tokens) * c.moe.experts * c.d_model;
  Emitted e;
  for (const LayerOp& op : Ops(ops, layer, phase)) {
    if (op.phase == LayerPhase::kRecompute) continue;  // the data run keeps the forward's values
    if (op.kind == LayerOpKind::kGatherWeights) {
      // Gathered once per step where first used, the norms left replicated: checked apart.
      e.gathers.push_back({"all_gather", AxesOf(c, op.group), op.params});
      continue;
    }
    if (op.kind == LayerOpKind::kStart) {
      const double bytes = op.bytes * float32 * (op.group == LayerGroup::kExpert ? dense : 1);
      e.collectives.push_back({std::string(CollectiveOpName(op.op)), AxesOf(c, op.group), bytes});
      continue;
    }
    if (op.kind == LayerOpKind::kFlashAttention) {  // materialised with its mask
      e.flops += MaterialisedCoreFlops(c, d, phase == LayerPhase::kBackward);
      continue;
    }
    const bool experts_gemm =
        op.block == LayerBlock::kExperts && (op.id == LayerOpId::kUp || op.id == LayerOpId::kDown);
    e.flops += op.Flops() * (experts_gemm ? dense : 1);
    // The gates' combine is a contraction over the experts (forward), and so are its two gradients.
    if (op.id == LayerOpId::kUnpermute) e.flops += (phase == LayerPhase::kForward ? 2 : 4) * tokens_x_experts_x_d;
  }
  // The gates' gradients are partial sums over the tensor ranks (the experts' d_ff is split): psum'd.
  if (ops.moe(layer) && phase == LayerPhase::kBackward && !c.parallel.tensor_axes.empty()) {
    e.collectives.push_back({"all_reduce", c.parallel.tensor_axes,
                             4.0 * static_cast<double>(ops.shapes().tokens) * c.moe.experts});
  }
  std::sort(e.collectives.begin(), e.collectives.end());
  return e;
}

bool Contracts(const std::string& equation) {
  const size_t arrow = equation.find("->");
  const std::string out = equation.substr(arrow + 2);
  for (char ch : equation.substr(0, arrow))
    if (ch != ',' && out.find(ch) == std::string::npos) return true;
  return false;
}

std::string NcclName(const std::string& program_op) {
  if (program_op == "psum") return "all_reduce";
  if (program_op == "psum_scatter") return "reduce_scatter";
  return program_op;  // all_gather, all_to_all
}

// What the data run's program executes, per stage-layer and phase (its first tick; every tick runs the same
// steps), from the abstract run's steps.
std::map<std::pair<int64_t, LayerPhase>, Emitted> DataRun(const ValidatedModel& model) {
  const internal::ModelProgram program = internal::BuildModelProgram(model);
  std::map<std::string, std::string> equations;
  for (const ProgramStep& s : program.program.steps) equations[s.name] = s.equation;
  WorkloadContext ctx;
  ctx.mesh = model.mesh();
  ctx.abstract = true;
  const WorkloadResult r = internal::RunProgram(ctx, program.program, WorkloadKind::kModel);
  static const std::regex kLayerStep(R"(^(fwd|bwd)/(?:t(\d+)/)?l(\d+)/.*)");
  static const std::regex kWeightGather(R"(^fwd/(?:layers|stages)\.(\d+)\..*_all_gather$)");
  std::map<std::pair<int64_t, LayerPhase>, Emitted> out;
  for (const StepResult& s : r.steps) {
    std::smatch m;
    const bool collective = s.kind == StepKind::kCollective && !s.axes.empty();
    if (std::regex_match(s.name, m, kWeightGather)) {
      out[{std::stoll(m[1]), LayerPhase::kForward}].gathers.push_back({NcclName(s.op), s.axes, s.message_bytes / 4});
      continue;
    }
    if (!std::regex_match(s.name, m, kLayerStep) || (m[2].matched && m[2] != "0")) continue;
    Emitted& e = out[{std::stoll(m[3]), m[1] == "fwd" ? LayerPhase::kForward : LayerPhase::kBackward}];
    if (collective) e.collectives.push_back({NcclName(s.op), s.axes, s.message_bytes});
    if (s.op == "einsum" && Contracts(equations.at(s.name))) e.flops += s.flops;
  }
  for (auto& [_, e] : out) std::sort(e.collectives.begin(), e.collectives.end());
  return out;
}

void ExpectSameCollectives(const std::vector<Comm>& want, const std::vector<Comm>& got, const std::string& where) {
  ASSERT_EQ(want.size(), got.size()) << where << "\nwant: " << ::testing::PrintToString(want)
                                     << "\ngot:  " << ::testing::PrintToString(got);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].op, got[i].op) << where;
    EXPECT_EQ(want[i].axes, got[i].axes) << where;
    EXPECT_NEAR(want[i].bytes, got[i].bytes, 1e-9 * want[i].bytes) << where << " " << want[i].op;
  }
}

// The step prices exactly the description: its executed FLOPs are the ops' on every device, every micro-batch.
void ExpectStepPricesTheDescription(const ValidatedModel& model, const std::string& family) {
  const ModelConfig& c = model.config();
  const ParallelDegrees& d = model.degrees();
  const LayerOps ops(model);
  const std::vector<LayerRange> layout = PipelineLayerLayout(c, d.pipeline);
  double want = 0;
  for (int64_t stage = 0; stage < d.pipeline; ++stage) {
    double device = 0;
    for (size_t k = static_cast<size_t>(stage); k < layout.size(); k += static_cast<size_t>(d.pipeline)) {
      for (int64_t l = layout[k].first; l < layout[k].first + layout[k].count; ++l)
        device += LayerOpFlops(ops.Forward(l)) + LayerOpFlops(ops.Backward(l));
    }
    if (stage == d.pipeline - 1) {
      const double head = LayerOpFlops(ops.LossForward()) + LayerOpFlops(ops.LossBackward());
      device += head;
      for (int64_t k = 0; k < c.mtp_layers; ++k) {
        device += head + LayerOpFlops(ops.MtpInputForward()) + LayerOpFlops(ops.MtpInputBackward()) +
                  LayerOpFlops(ops.Forward(c.layers + k)) + LayerOpFlops(ops.Backward(c.layers + k));
      }
    }
    want += device * static_cast<double>(d.micro_batches) * static_cast<double>(model.mesh().size()) /
            static_cast<double>(d.pipeline);
  }
  ModelStepOptions options;
  options.extrapolate = false;
  EXPECT_NEAR(PredictModelStep(model, options).hardware_flops, want, 1e-9 * want) << family;
}

TEST(LayerEquivalence, StepAndDataRunEmitTheSameCollectivesAndFlopsPerLayer) {
  for (const Family& f : Families()) {
    SCOPED_TRACE(f.name);
    const ValidatedModel model = ValidateModel(f.config, Cpu(f.mesh));
    ExpectStepPricesTheDescription(model, f.name);
    if (!f.data_run) {
      try {
        internal::CheckModelRunsWithData(model);
        ADD_FAILURE() << f.name << " runs with data now: compare its layers here";
      } catch (const Error& e) {
        EXPECT_THAT(e.message(), HasSubstr(f.refused));
      }
      continue;
    }
    const LayerOps ops(model);
    const std::map<std::pair<int64_t, LayerPhase>, Emitted> data = DataRun(model);
    const int64_t layers = f.config.layers / model.degrees().pipeline;
    for (int64_t j = 0; j < layers; ++j) {
      for (LayerPhase phase : {LayerPhase::kForward, LayerPhase::kBackward}) {
        const std::string where = fmt::format("{}: layer {} {}", f.name, j, LayerPhaseName(phase));
        const Emitted want = ExpectedDataRun(model, ops, j, phase);
        const auto it = data.find({j, phase});
        ASSERT_NE(it, data.end()) << where;
        ExpectSameCollectives(want.collectives, it->second.collectives, where);
        EXPECT_NEAR(want.flops, it->second.flops, 1e-12 * want.flops) << where;
      }
    }
  }
}

// ZeRO-3: the step gathers each layer's weights before its forward and backward, every micro-batch; the data run
// gathers each weight matrix once per step where first used and keeps the norms replicated.
TEST(LayerEquivalence, TheDataRunGathersTheZeroThreeWeightsOnce) {
  for (const Family& f : Families()) {
    if (!f.data_run || f.config.parallel.zero_stage < 3) continue;
    SCOPED_TRACE(f.name);
    const ValidatedModel model = ValidateModel(f.config, Cpu(f.mesh));
    const LayerOps ops(model);
    const std::map<std::pair<int64_t, LayerPhase>, Emitted> data = DataRun(model);
    const double norms = 2.0 * (f.config.norm == Norm::kLayerNorm ? 2 : 1) * f.config.d_model;
    for (int64_t j = 0; j < f.config.layers; ++j) {
      const Emitted want = ExpectedDataRun(model, ops, j, LayerPhase::kForward);
      ASSERT_EQ(want.gathers.size(), 1u);
      double params = 0;
      for (const Comm& g : data.at({j, LayerPhase::kForward}).gathers) {
        EXPECT_EQ(g.axes, want.gathers[0].axes);
        params += g.bytes;
      }
      EXPECT_DOUBLE_EQ(params, want.gathers[0].bytes - norms) << "layer " << j;
      EXPECT_EQ(data.count({j, LayerPhase::kBackward}) ? data.at({j, LayerPhase::kBackward}).gathers.size() : 0u, 0u);
    }
  }
}

// The description follows the schedule's op names and phases: a layer's forward has no recompute, its backward
// reruns what the recompute setting says.
TEST(LayerEquivalence, TheBackwardCarriesItsRecompute) {
  for (const Family& f : Families()) {
    SCOPED_TRACE(f.name);
    const ValidatedModel model = ValidateModel(f.config, Cpu(f.mesh));
    const LayerOps ops(model);
    for (const LayerOp& op : ops.Forward(0)) EXPECT_EQ(op.phase, LayerPhase::kForward) << op.name;
    double recomputed = 0;
    for (const LayerOp& op : ops.Backward(0))
      if (op.phase == LayerPhase::kRecompute) recomputed += op.Flops();
    if (f.config.recompute == Recompute::kFull) {
      EXPECT_DOUBLE_EQ(recomputed, LayerOpFlops(ops.Forward(0)));
    } else if (f.config.recompute == Recompute::kSelective && !f.config.flash_attention) {
      EXPECT_GT(recomputed, 0);
    } else if (!f.config.mla.recompute_up_proj) {
      EXPECT_EQ(recomputed, 0);
    }
  }
}

}  // namespace
}  // namespace spmdsim
