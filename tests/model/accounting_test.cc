#include "model/model.h"

#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "tests/model/small_model.h"
#include "workloads/workloads.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

using testing_model::MeshOn;

// A GPT layer as Korthikanti et al. 2022 model it: MHA, gelu, d_ff = 4h, dropout, scores materialised.
ModelConfig Gpt(int64_t h, int64_t heads, int64_t layers, int64_t seq) {
  ModelConfig c;
  c.vocab = 51200;
  c.d_model = h;
  c.heads = heads;
  c.layers = layers;
  c.d_ff = 4 * h;
  c.seq = seq;
  c.dropout = true;
  c.flash_attention = false;
  c.position = PositionEmbedding::kLearned;
  c.tied_embeddings = true;  // Megatron's GPT shares the input and output embedding
  c.dtype = DType::kF16;
  return c;
}

// Korthikanti et al. 2022, section 4: activation bytes per layer (s, b, h, a, t as in the paper).
TEST(ModelActivations, MatchKorthikantiPerLayerFormulas) {
  const double s = 2048, b = 1, h = 12288, a = 96;
  ModelConfig c = Gpt(12288, 96, 96, 2048);
  // No parallelism, no recompute: s b h (34 + 5 a s / h).
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 1, 1, 1, false), s * b * h * (34 + 5 * a * s / h));
  // Tensor parallel t = 8 without SP: s b h (10 + 24 / t + 5 a s / (h t)).
  const double t = 8;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 1, 8, 1, false), s * b * h * (10 + 24 / t + 5 * a * s / (h * t)));
  // TP + SP: s b h (34 + 5 a s / h) / t.
  c.parallel.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 1, 8, 1, false), s * b * h * (34 + 5 * a * s / h) / t);
  // TP + SP + selective recompute: 34 s b h / t.
  c.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 1, 8, 1, false), 34 * s * b * h / t);
  // Full recompute: the layer input only, 2 s b h (/ t with SP).
  c.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 1, 8, 1, false), 2 * s * b * h / t);
  c.parallel.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 1, 8, 1, false), 2 * s * b * h);
  // Selective without SP: s b h (10 + 24 / t).
  c.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 1, 8, 1, false), s * b * h * (10 + 24 / t));
  // Linear in the micro-batch.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 4, 8, 1, false), 4 * s * b * h * (10 + 24 / t));
}

TEST(ModelActivations, GeneraliseToGqaSwigluAndFlash) {
  ModelConfig c;
  c.d_model = 4096;
  c.heads = 32;
  c.kv_heads = 8;
  c.d_ff = 14336;
  c.seq = 4096;
  c.activation = Activation::kSwiglu;
  c.flash_attention = true;
  const double s = 4096, h = 4096, hd = 128;
  // Replicated 8h (two norm inputs, attention and MLP inputs); Q 2q, K V 4kv, O input 2q; swiglu 6 d_ff;
  // flash keeps 4 bytes of softmax statistics per query row and head.
  const double per_token = 8 * h + (2 * 32 * hd + 4 * 8 * hd + 2 * 32 * hd) + 6 * 14336 + 4 * 32;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 1, 1, 1, false), s * per_token);
  // TP 16 > kv_heads 8: each rank keeps one KV head.
  c.heads = 32;
  const double per_token_tp16 = 8 * h + (2 * 2 * hd + 4 * 1 * hd + 2 * 2 * hd) + 6 * 14336 / 16.0 + 4 * 2;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 1, 16, 1, false), s * per_token_tp16);
  // Context parallelism splits the sequence.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(c, 1, 1, 4, false), s / 4 * per_token);
}

TEST(PipelineBubble, PublishedFractions) {
  // Narayanan et al. 2021: (p - 1) / m for GPipe and 1F1B, divided by v when interleaved.
  EXPECT_DOUBLE_EQ(PipelineBubbleFraction(PipelineSchedule::k1F1B, 8, 64, 1), 7.0 / 64);
  EXPECT_DOUBLE_EQ(PipelineBubbleFraction(PipelineSchedule::kGpipe, 4, 8, 1), 3.0 / 8);
  EXPECT_DOUBLE_EQ(PipelineBubbleFraction(PipelineSchedule::kInterleaved1F1B, 8, 64, 3), 7.0 / 64 / 3);
  EXPECT_DOUBLE_EQ(PipelineBubbleFraction(PipelineSchedule::k1F1B, 1, 4, 1), 0);
}

TEST(PipelineBubble, InFlightChunksFollowMegatronSchedules) {
  // 1F1B: stage i holds p - i micro-batches (capped at m).
  EXPECT_EQ(InFlightChunks(PipelineSchedule::k1F1B, 8, 0, 64, 1), 8);
  EXPECT_EQ(InFlightChunks(PipelineSchedule::k1F1B, 8, 7, 64, 1), 1);
  EXPECT_EQ(InFlightChunks(PipelineSchedule::k1F1B, 8, 0, 4, 1), 4);
  EXPECT_EQ(InFlightChunks(PipelineSchedule::kGpipe, 8, 3, 16, 1), 16);
  // Interleaved, stage 0: (p - 1) * 2 + (v - 1) * p + 1 = v p + p - 1 chunks of L / (p v) layers, i.e.
  // Korthikanti et al.'s L (1 + (p - 1) / (p v)) layers of activations.
  EXPECT_EQ(InFlightChunks(PipelineSchedule::kInterleaved1F1B, 8, 0, 64, 3), 3 * 8 + 8 - 1);
  EXPECT_EQ(InFlightChunks(PipelineSchedule::kInterleaved1F1B, 8, 7, 64, 3), 2 * 8 + 1);
  EXPECT_EQ(InFlightChunks(PipelineSchedule::kInterleaved1F1B, 4, 0, 4, 2), 8);  // capped at m v
}

TEST(ModelAccounting, Gpt22bParamsAndFlopsMatchThePaper) {
  ModelConfig c = Gpt(6144, 64, 48, 2048);
  c.global_batch = 4;
  c.micro_batch = 4;
  c.parallel.tensor_axes = {"tensor"};
  c.parallel.sequence_parallel = true;
  c.recompute = Recompute::kSelective;
  ModelAccounting a = AccountModel(ValidateModel(c, MeshOn("dgx-a100:1", {{"tensor", 8}})));
  // 12 l h^2 + 4 l h (norms) + V h + s h: "22B".
  EXPECT_NEAR(a.params.total / 1e9, 22.0, 0.2);
  EXPECT_DOUBLE_EQ(a.params.total, a.params.active);
  // Megatron-LM's count (megatron/training/training.py, num_floating_point_operations, for GPT: 12 B s l h^2
  // (2 + s / (2h) + 4 + V / (2 l h))) = 72 B s l h^2 (1 + s / 12h + V / 12 l h): Korthikanti et al. 2022's
  // 72 B s l h^2 (1 + s / 6h + V / 12 l h) with the causal attention term halved, as MaxText counts it too.
  const double B = 4, s = 2048, l = 48, h = 6144, V = 51200;
  EXPECT_NEAR(a.flops.model / (12 * B * s * l * h * h * (2 + s / (2 * h) + 4 + V / (2 * l * h))), 1.0, 1e-12);
  EXPECT_NEAR(a.flops.model / (72 * B * s * l * h * h * (1 + s / (12 * h) + V / (12 * l * h))), 1.0, 1e-12);
  // Before: the whole score matrix (the paper's s / 6h), 2.7% more at this length.
  EXPECT_NEAR(72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)) / a.flops.model, 1.027, 0.001);
  // Selective recompute adds the causal attention core's forward: 2 B s^2 h per layer.
  EXPECT_NEAR(a.flops.recompute, 2 * B * s * s * h * l, 1);
  c.recompute = Recompute::kFull;
  a = AccountModel(ValidateModel(c, MeshOn("dgx-a100:1", {{"tensor", 8}})));
  // Full recompute: 96 B s l h^2 (1 + s / 12h + V / 16 l h) hardware FLOPs.
  EXPECT_NEAR(a.flops.hardware / (96 * B * s * l * h * h * (1 + s / (12 * h) + V / (16 * l * h))), 1.0, 1e-12);
}

TEST(ModelAccounting, ZeroStagesShardWhatThePaperSays) {
  // Rajbhandari et al. 2020, Figure 1: 2 + 2 + 12 bytes per parameter, sharded over N_d by stage.
  ModelConfig c;
  c.vocab = 1024;
  c.d_model = 512;
  c.layers = 4;
  c.heads = 8;
  c.d_ff = 2048;
  c.seq = 128;
  c.global_batch = 8;
  c.parallel.data_axes = {"data"};
  Mesh mesh = MeshOn("dgx-h100:1", {{"data", 8}});
  const double psi = AccountModel(ValidateModel(c, mesh)).params.total;
  DeviceMemory m0 = AccountModel(ValidateModel(c, mesh)).stages[0].memory;
  EXPECT_DOUBLE_EQ(m0.parameters, 2 * psi);
  EXPECT_DOUBLE_EQ(m0.gradients, 2 * psi);
  EXPECT_DOUBLE_EQ(m0.optimizer, 12 * psi);
  c.parallel.zero_stage = 1;
  DeviceMemory m1 = AccountModel(ValidateModel(c, mesh)).stages[0].memory;
  EXPECT_DOUBLE_EQ(m1.optimizer, 12 * psi / 8);
  EXPECT_DOUBLE_EQ(m1.gradients, 2 * psi);
  c.parallel.zero_stage = 2;
  EXPECT_DOUBLE_EQ(AccountModel(ValidateModel(c, mesh)).stages[0].memory.gradients, 2 * psi / 8);
  c.parallel.zero_stage = 3;
  DeviceMemory m3 = AccountModel(ValidateModel(c, mesh)).stages[0].memory;
  EXPECT_DOUBLE_EQ(m3.parameters, 2 * psi / 8);
  EXPECT_GT(m3.communication, 0);  // the gathered layers
  // Not resharded after the forward (PyTorch FSDP's SHARD_GRAD_OP): every layer's gathered weights are held until
  // its backward, so the peak holds all of them; gradients and optimizer states stay sharded.
  c.parallel.reshard_after_forward = false;
  DeviceMemory kept = AccountModel(ValidateModel(c, mesh)).stages[0].memory;
  EXPECT_DOUBLE_EQ(kept.parameters, 2 * psi);
  EXPECT_DOUBLE_EQ(kept.gradients, 2 * psi / 8);
  EXPECT_DOUBLE_EQ(kept.optimizer, 12 * psi / 8);
  c.parallel.zero_stage = 1;
  try {
    ValidateModel(c, mesh);
    ADD_FAILURE() << "reshard_after_forward: false with zero_stage 1 was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("reshard_after_forward: false applies to zero_stage 3 (FSDP) only"));
  }
}

TEST(ModelAccounting, PipelineStagesHoldTheirLayersAndInFlightActivations) {
  ModelConfig c = Gpt(12288, 96, 96, 2048);
  c.global_batch = 64;
  c.parallel.tensor_axes = {"tensor"};
  c.parallel.sequence_parallel = true;
  c.parallel.pipeline_axes = {"pipe"};
  c.parallel.schedule = PipelineSchedule::kInterleaved1F1B;
  c.parallel.virtual_stages = 3;
  c.recompute = Recompute::kSelective;
  ModelAccounting a = AccountModel(ValidateModel(c, MeshOn("dgx-a100:8", {{"pipe", 8}, {"tensor", 8}})));
  ASSERT_EQ(a.stages.size(), 8u);
  EXPECT_EQ(a.degrees.micro_batches, 64);
  EXPECT_EQ(a.stages[0].layers, 12);
  // Stage 0 holds L (1 + (p - 1) / (p v)) layers' activations of 34 s b h / t each (Korthikanti et al.: the
  // first stage of 1F1B holds p micro-batches of L / p layers, interleaving adds (p - 1) / (p v)).
  const double per_layer = 34.0 * 2048 * 12288 / 8;
  EXPECT_NEAR(a.stages[0].memory.activations, per_layer * 96 * (1 + 7.0 / 24), 1);
  // The last stage holds 1 chunk per virtual stage ((p - p) * 2 + (v - 1) p + 1 = 17 chunks of 4 layers) and
  // the fp32 logits 4 s b V / t.
  EXPECT_NEAR(a.stages[7].memory.activations, per_layer * 17 * 4 + 4.0 * 2048 * 51200 / 8, 1);
  EXPECT_DOUBLE_EQ(a.bubble_fraction, 7.0 / 64 / 3);
  EXPECT_EQ(a.peak_stage, 0);
  EXPECT_TRUE(a.fits());
  EXPECT_NEAR(a.params.total / 1e9, 175, 1.5);
}

TEST(ModelAccounting, MoeCountsActiveExpertsAndSplitsThemOverExpertAxes) {
  ModelConfig c;
  c.vocab = 32000;
  c.d_model = 1024;
  c.heads = 16;
  c.layers = 4;
  c.d_ff = 4096;
  c.seq = 512;
  c.global_batch = 16;
  c.activation = Activation::kSwiglu;
  c.moe = {.experts = 8, .top_k = 2, .capacity_factor = 1.25, .d_ff = 2048, .every = 2};
  c.parallel.data_axes = {"data"};
  c.parallel.expert_axes = {"data"};
  ModelAccounting a = AccountModel(ValidateModel(c, MeshOn("dgx-h100:1", {{"data", 8}})));
  const double expert = 3.0 * 1024 * 2048;
  EXPECT_DOUBLE_EQ(a.params.total - a.params.active, 2 * (8 - 2) * expert);  // 2 MoE layers, 6 idle experts each
  EXPECT_DOUBLE_EQ(a.params.per_moe_layer - a.params.per_dense_layer, 8 * expert + 1024 * 8 - 3.0 * 1024 * 4096);
  EXPECT_EQ(a.degrees.expert, 8);
  EXPECT_GT(a.stages[0].memory.communication, 0);  // dispatch / combine buffers
}

TEST(ModelAccounting, DoesNotFitIsReported) {
  ModelConfig c = Gpt(12288, 96, 96, 2048);
  c.global_batch = 8;
  WorkloadContext ctx;
  ctx.mesh = MeshOn("dgx-a100:1", {{"data", 8}});
  ctx.abstract = true;  // far too large to run with data
  c.parallel.data_axes = {"data"};
  WorkloadResult r = RunModel(ctx, ValidateModel(c, ctx.mesh));
  ASSERT_TRUE(r.model.has_value());
  EXPECT_FALSE(r.model->fits());  // 175B x 16 bytes on one 80 GB GPU
  EXPECT_FALSE(r.memory.fits());
  EXPECT_TRUE(r.steps.empty());
  ASSERT_TRUE(r.model_step.has_value());     // the step is still predicted, labelled as not fitting
  EXPECT_EQ(r.totals.predicted_seconds, r.model_step->step_seconds);
  EXPECT_FALSE(r.check.performed);
}

void ExpectInvalid(const ModelConfig& c, const Mesh& mesh, const std::string& text) {
  try {
    ValidateModel(c, mesh);
    ADD_FAILURE() << "no error, expected: " << text;
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr(text));
    EXPECT_EQ(std::string(e.message()).find('\n'), std::string::npos);
  }
}

TEST(ValidateModel, RejectsWhatDoesNotDivide) {
  Mesh mesh = MeshOn("dgx-h100:2", {{"data", 2}, {"pipe", 2}, {"tensor", 4}});
  ModelConfig c;
  c.heads = 12;
  c.d_model = 768;
  c.layers = 6;
  c.global_batch = 8;
  c.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .pipeline_axes = {"pipe"}};
  EXPECT_NO_THROW(ValidateModel(c, mesh));
  ModelConfig bad = c;
  bad.heads = 6;
  bad.d_model = 768;
  ExpectInvalid(bad, mesh, "heads = 6 is not divisible by the tensor-parallel degree 4");
  bad = c;
  bad.layers = 5;
  ExpectInvalid(bad, mesh, "layers = 5 is not divisible by pipeline stages x virtual stages = 2 x 1");
  bad = c;
  bad.global_batch = 7;
  ExpectInvalid(bad, mesh, "global_batch = 7 is not divisible by micro_batch x data-parallel degree = 1 x 2");
  bad = c;
  bad.kv_heads = 5;
  ExpectInvalid(bad, mesh, "heads = 12 is not divisible by kv_heads = 5");
  bad = c;
  bad.kv_heads = 6;
  ExpectInvalid(bad, mesh, "kv_heads = 6 and the tensor-parallel degree 4 must divide one another");
  bad = c;
  bad.parallel.pipeline_axes = {};
  ExpectInvalid(bad, mesh, "mesh axes (pipe) have no role");
  bad = c;
  bad.parallel.tensor_axes = {"data"};
  ExpectInvalid(bad, mesh, "tensor_axes: mesh axis 'data' already has another role");
  bad = c;
  bad.parallel.schedule = PipelineSchedule::kInterleaved1F1B;
  ExpectInvalid(bad, mesh, "schedule interleaved needs virtual_stages >= 2");
  bad.parallel.virtual_stages = 3;
  bad.layers = 8;
  ExpectInvalid(bad, mesh, "layers = 8 is not divisible by pipeline stages x virtual stages = 2 x 3");
  bad = c;
  bad.parallel.virtual_stages = 2;
  ExpectInvalid(bad, mesh, "virtual_stages = 2 needs schedule: interleaved");
  bad = c;
  bad.parallel.sequence_parallel = true;
  bad.seq = 2046;
  ExpectInvalid(bad, mesh, "seq = 2046 is not divisible by 4");
  bad = c;
  bad.parallel.expert_axes = {"data"};
  ExpectInvalid(bad, mesh, "expert_axes need moe.experts > 0");
  bad.moe.experts = 3;
  ExpectInvalid(bad, mesh, "moe.experts = 3 is not divisible by the expert-parallel degree 2");
  bad = c;
  bad.dtype = DType::kF32;
  ExpectInvalid(bad, mesh, "dtype must be a compute dtype");
  bad = c;
  bad.parallel.data_axes = {"dta"};
  try {
    ValidateModel(bad, mesh);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.message(), HasSubstr("data, pipe, tensor"));
  }
}

// --- models people train now: MLA, shared experts, dense first layers, MTP, sliding windows, uneven stages ---

// DeepSeek-V3 technical report (section 2 and its abstract): 671B total parameters, 37B activated per token, and
// the Hugging Face checkpoint's 685B = 671B + 14B of MTP module (which counts the shared embedding and head again).
TEST(ModelAccounting, DeepSeekV3HasItsPublishedParameterCounts) {
  ModelConfig c = DeepSeekV3Model();
  c.parallel.data_axes = {"data"};
  const ModelAccounting a = AccountModel(ValidateModel(c, MeshOn("dgx-h100:1", {{"data", 8}})));
  // MLA per layer (DeepSeek-V2 section 2.1): W_DQ [h, 1536], W_UQ [1536, 128 x 192], W_DKV + W_KR [h, 512 + 64],
  // W_UK + W_UV [512, 128 x 256], W_O [128 x 128, h], RMSNorm scales of 1536 and 512 and two of h.
  const double h = 7168, V = 129280, expert = 3 * h * 2048;
  const double mla = h * 1536 + 1536 * 128 * 192 + h * 576 + 512 * 128 * 256 + 128 * 128 * h + 1536 + 512;
  const double dense = mla + 2 * h + 3 * h * 18432;
  EXPECT_DOUBLE_EQ(a.params.per_dense_layer, dense);
  // A MoE layer: 256 routed + 1 shared SwiGLU experts of 2048 and the router [h, 256]; 8 routed are active.
  const double moe = mla + 2 * h + 257 * expert + h * 256, moe_active = mla + 2 * h + 9 * expert + h * 256;
  EXPECT_DOUBLE_EQ(a.params.per_moe_layer, moe);
  // The MTP module: enorm, hnorm, its final norm, eh_proj [2h, h] and a MoE layer.
  EXPECT_DOUBLE_EQ(a.params.mtp, 3 * h + 2 * h * h + moe);
  const double main = 2 * V * h + h + 3 * dense + 58 * moe, main_active = 2 * V * h + h + 3 * dense + 58 * moe_active;
  EXPECT_DOUBLE_EQ(a.params.total, main + a.params.mtp);
  EXPECT_DOUBLE_EQ(a.params.active, main_active + 3 * h + 2 * h * h + moe_active);
  EXPECT_NEAR(main / 1e9, 671, 0.5);         // "671B total parameters"
  EXPECT_NEAR(main_active / 1e9, 37, 0.6);   // "37B activated for each token"
  EXPECT_NEAR((a.params.mtp + 2 * V * h) / 1e9, 14, 0.6);  // the checkpoint's "14B of MTP module weights"
}

// Llama 3 405B (the paper's Table 3: 126 layers, h 16384, d_ff 53248, 128 heads, 8 KV heads, vocab 128000 + 256).
TEST(ModelAccounting, Llama3405bHasItsPublishedParameterCount) {
  ModelConfig c = LlamaModel(16384, 126, 128, 8, 53248, 8192);
  c.vocab = 128256;
  c.parallel.data_axes = {"data"};
  const ModelAccounting a = AccountModel(ValidateModel(c, MeshOn("dgx-h100:1", {{"data", 8}})));
  EXPECT_NEAR(a.params.total / 1e9, 405.8, 0.1);
}

// Megatron-Core's num_floating_point_operations (megatron/training/training.py, its MLA branch): the projections
// q_lora (h + heads (qk + rope)) + kv_lora (h + heads (qk + v)) + h rope + heads v h multiply-adds per token (its
// "+ 1" per q / kv element is the norms, which this model prices as memory-bound ops and does not count), and the
// core heads (qk + rope) + heads v per key, halved for the causal mask, as this model counts it (ModelFlops).
TEST(ModelAccounting, MlaFlopsFollowMegatron) {
  ModelConfig c = DeepSeekV3Model();
  c.moe = {};
  c.mtp_layers = 0;
  c.layers = 1;
  c.global_batch = 1;
  const ModelAccounting a = AccountModel(ValidateModel(c, MeshOn("cpu:1", {{"data", 1}})));
  const double h = 7168, s = 4096, heads = 128;
  const double projections = 1536 * (h + heads * 192) + 512 * (h + heads * 256) + h * 64 + heads * 128 * h;
  const double core = s * heads * (192 + 128) / 2;
  const double mlp = 3 * h * 18432, logits = h * 129280;
  EXPECT_NEAR(a.flops.forward / (2 * s * (projections + core + mlp + logits)), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(AttentionCoreFlopsPerToken(c), 2 * core);
}

TEST(ModelAccounting, SlidingWindowLayersAttendToTheirWindow) {
  ModelConfig c = testing_model::SmallModel();  // seq 2048, 16 heads of 128, 8 layers
  c.attention_window = {.window = 512, .global_every = 2};
  // Causal: half the keys of the sequence or of the window (MaxText's Gemma 2 count).
  const double full = 4.0 * 2048 * 16 * 128 / 2, windowed = 4.0 * 512 * 16 * 128 / 2;
  EXPECT_DOUBLE_EQ(AttentionCoreFlopsPerToken(c, 0), windowed);
  EXPECT_DOUBLE_EQ(AttentionCoreFlopsPerToken(c, 1), full);  // every second layer global (Gemma 2)
  c.parallel.data_axes = {"data"};
  ModelConfig global = c;
  global.attention_window = {};
  const Mesh mesh = MeshOn("dgx-h100:1", {{"data", 8}});
  const double tokens = 1.0 * c.global_batch * c.seq;
  EXPECT_NEAR(AccountModel(ValidateModel(global, mesh)).flops.forward -
                  AccountModel(ValidateModel(c, mesh)).flops.forward,
              tokens * 4 * (full - windowed), 1);
  // A window wider than the sequence changes nothing.
  c.attention_window = {.window = 4096};
  EXPECT_DOUBLE_EQ(AttentionCoreFlopsPerToken(c, 0), full);
}

// The layers of every virtual stage, as Megatron-Core builds them (get_num_layers_to_build,
// get_transformer_layer_offset): the offsets below are those functions' values for the same arguments.
TEST(PipelineLayout, FollowsMegatronCoreUnevenStages) {
  ModelConfig c;
  c.layers = 61;
  c.parallel.first_stage_layers = 7;
  c.parallel.last_stage_layers = 6;
  std::vector<LayerRange> layout = PipelineLayerLayout(c, 8);  // NVIDIA's DeepSeek-V3 on 512 H100
  ASSERT_EQ(layout.size(), 8u);
  EXPECT_EQ(layout[0], (LayerRange{0, 7}));
  EXPECT_EQ(layout[1], (LayerRange{7, 8}));
  EXPECT_EQ(layout[6], (LayerRange{47, 8}));
  EXPECT_EQ(layout[7], (LayerRange{55, 6}));
  c.parallel.first_stage_layers = 3;
  c.parallel.last_stage_layers = 2;
  layout = PipelineLayerLayout(c, 16);  // on 1024 H100
  EXPECT_EQ(layout[0], (LayerRange{0, 3}));
  EXPECT_EQ(layout[14], (LayerRange{55, 4}));
  EXPECT_EQ(layout[15], (LayerRange{59, 2}));
  // Interleaved and uneven: 14 layers, p 3, v 2, first 4, last 2: chunks of 2, 4, 1 layers per virtual round
  // (Megatron's offsets 0, 2, 6, 7, 9, 13).
  c.layers = 14;
  c.parallel.first_stage_layers = 4;
  c.parallel.last_stage_layers = 2;
  c.parallel.schedule = PipelineSchedule::kInterleaved1F1B;
  c.parallel.virtual_stages = 2;
  layout = PipelineLayerLayout(c, 3);
  const std::vector<LayerRange> expected = {{0, 2}, {2, 4}, {6, 1}, {7, 2}, {9, 4}, {13, 1}};
  EXPECT_EQ(layout, expected);
  // Llama 3 405B: 126 layers with the embedding and the loss counted, 16 stages x 8 chunks of one layer: the
  // first chunk holds only the embedding, the last only the loss.
  c.layers = 126;
  c.parallel.first_stage_layers = c.parallel.last_stage_layers = -1;
  c.parallel.virtual_stages = 8;
  c.parallel.embedding_in_split = c.parallel.loss_in_split = true;
  layout = PipelineLayerLayout(c, 16);
  ASSERT_EQ(layout.size(), 128u);
  EXPECT_EQ(layout.front(), (LayerRange{0, 0}));
  EXPECT_EQ(layout[1], (LayerRange{0, 1}));
  EXPECT_EQ(layout[126], (LayerRange{125, 1}));
  EXPECT_EQ(layout.back(), (LayerRange{126, 0}));
}

TEST(ModelAccounting, UnevenStagesHoldTheirOwnLayersAndTheMtpModule) {
  ModelConfig c = DeepSeekV3Model();
  c.global_batch = 4096;
  c.mla.recompute_up_proj = true;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .pipeline_axes = {"pipe"}, .first_stage_layers = 7, .last_stage_layers = 6,
                .expert_axes = {"data", "tensor"}};
  const ValidatedModel m = ValidateModel(c, MeshOn("dgx-h100:64", {{"pipe", 8}, {"data", 32}, {"tensor", 2}}));
  EXPECT_EQ(m.degrees().expert, 64);
  EXPECT_EQ(m.degrees().expert_tensor, 1);
  EXPECT_EQ(m.degrees().expert_data, 1);  // every rank of a stage holds its own 4 experts
  const ModelAccounting a = AccountModel(m);
  ASSERT_EQ(a.stages.size(), 8u);
  EXPECT_EQ(a.stages[0].layers, 7);
  EXPECT_EQ(a.stages[3].layers, 8);
  EXPECT_EQ(a.stages[7].layers, 6);
  // A routed expert's weights on one device: 4 of the 256, whole (not split over the tensor ranks), with their
  // fp32 master weights and moments unsharded (16 bytes each).
  const ParallelDegrees& d = a.degrees;
  EXPECT_DOUBLE_EQ(ExpertParamsPerDevice(c, d, true), 4 * 3.0 * 7168 * 2048);
  // The last stage: 6 layers, the MTP module, the output layer and an embedding copy; more than a middle
  // stage's 8 layers' parameters.
  EXPECT_GT(a.stages[7].memory.parameters, a.stages[3].memory.parameters);
  EXPECT_TRUE(a.fits()) << a.peak_bytes / 1e9;
}

TEST(ValidateModel, RejectsWhatTheNewLayersAndStagesCannotDo) {
  Mesh mesh = MeshOn("dgx-h100:2", {{"data", 2}, {"pipe", 2}, {"tensor", 4}});
  ModelConfig c;
  c.heads = 16;
  c.d_model = 1024;
  c.layers = 6;
  c.global_batch = 8;
  c.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .pipeline_axes = {"pipe"}};
  ModelConfig bad = c;
  bad.layers = 7;
  bad.parallel.first_stage_layers = 3;
  EXPECT_NO_THROW(ValidateModel(bad, mesh));  // 3 + 4
  bad.parallel.last_stage_layers = 3;
  ExpectInvalid(bad, mesh, "layers = 7 minus first_stage_layers and last_stage_layers leaves 1 for the other 0 stages");
  bad.parallel.embedding_in_split = true;
  ExpectInvalid(bad, mesh, "not both");
  bad = c;
  bad.parallel.embedding_in_split = true;
  ExpectInvalid(bad, mesh, "layers = 6 + 1 (embedding / loss counted as layers) = 7 is not divisible by");
  bad.parallel.loss_in_split = true;
  EXPECT_NO_THROW(ValidateModel(bad, mesh));  // 8 slots over 2 stages
  bad = c;
  bad.parallel.pipeline_axes = {};
  bad.parallel.data_axes = {"data", "pipe"};
  bad.parallel.first_stage_layers = 2;
  ExpectInvalid(bad, mesh, "uneven pipeline stages need pipeline_axes of 2 stages or more");
  bad = c;
  bad.mla.kv_lora_rank = 64;
  bad.kv_heads = 4;
  ExpectInvalid(bad, mesh, "kv_heads and head_dim do not apply with mla");
  bad.kv_heads = 0;
  bad.mla.q_lora_rank = 6;
  ExpectInvalid(bad, mesh, "mla.q_lora_rank = 6 is not divisible by the tensor-parallel degree 4");
  bad.mla.q_lora_rank = 8;
  bad.position = PositionEmbedding::kLearned;
  ExpectInvalid(bad, mesh, "mla needs position: rope");
  bad = c;
  bad.attention_window = {.window = 0, .global_every = 2};
  ExpectInvalid(bad, mesh, "attention_window.global_every needs a window > 0");
  bad = c;
  bad.moe = {.experts = 4, .first_dense = 7};
  ExpectInvalid(bad, mesh, "moe.first_dense must be in [0, layers = 6], got 7");
  bad = c;
  bad.moe = {.experts = 8};
  bad.parallel.expert_axes = {"data", "tensor"};
  ExpectInvalid(bad, mesh, "experts over the tensor axes need sequence_parallel");
  bad.parallel.expert_axes = {"pipe"};
  ExpectInvalid(bad, mesh, "expert axis 'pipe' must be a data axis");
  Mesh cp = MeshOn("dgx-h100:1", {{"context", 2}, {"tensor", 4}});
  bad = c;
  bad.parallel = {.tensor_axes = {"tensor"}, .context_axes = {"context"}};
  bad.attention_window = {.window = 128};
  ExpectInvalid(bad, cp, "attention_window with context_axes is not modelled");
}

}  // namespace
}  // namespace spmdsim
