// AccountModel: parameters, FLOPs, memory per device by category and stage (model/accounting.h).
#include "model/accounting.h"

#include <algorithm>

#include "common/error.h"
#include "model/pipeline.h"

namespace spmdsim {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Megatron pads the vocabulary to a multiple of 128 x TP (--make-vocab-size-divisible-by 128).
int64_t PaddedVocab(const ModelConfig& c, int64_t t) { return CeilDiv(c.vocab, 128 * t) * 128 * t; }

double NormParamsOf(const ModelConfig& c, double width) { return c.norm == Norm::kLayerNorm ? 2.0 * width : width; }
double NormParams(const ModelConfig& c) { return NormParamsOf(c, static_cast<double>(c.d_model)); }

double MlpParams(const ModelConfig& c, int64_t d_ff) {
  return (c.activation == Activation::kSwiglu ? 3.0 : 2.0) * c.d_model * d_ff;
}

int64_t KvHeadsPerRank(const ModelConfig& c, int64_t t) {
  const int64_t kv = c.effective_kv_heads();
  return kv >= t ? kv / t : 1;  // fewer KV heads than ranks: each rank keeps one (replicated)
}

// The multiply-adds per token of MLA's projections (= their weights), all heads: DeepSeek-V2 section 2.1
// (Megatron-Core MLASelfAttention): down_q [h, q_lora], up_q [q_lora, heads (qk + rope)] (or q [h, heads (qk +
// rope)] without q_lora), down_kv [h, kv_lora + rope], up_kv [kv_lora, heads (qk + v)], out [heads v, h].
struct MlaWeights {
  double down = 0, up = 0, out = 0;  // down_q + down_kv (or the direct q projection + down_kv), up_q + up_kv, out
};
MlaWeights MlaProjections(const ModelConfig& c) {
  const MlaConfig& a = c.mla;
  const double h = static_cast<double>(c.d_model), heads = static_cast<double>(c.heads);
  const double q_width = heads * static_cast<double>(a.qk_head_dim + a.qk_rope_head_dim);
  MlaWeights w;
  w.down = h * static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim);
  w.up = static_cast<double>(a.kv_lora_rank) * heads * static_cast<double>(a.qk_head_dim + a.v_head_dim);
  if (a.q_lora_rank > 0) {
    w.down += h * static_cast<double>(a.q_lora_rank);
    w.up += static_cast<double>(a.q_lora_rank) * q_width;
  } else {
    w.down += h * q_width;
  }
  w.out = heads * static_cast<double>(a.v_head_dim) * h;
  return w;
}

// Attention weights one tensor rank holds (t = 1: all), norms of the layer excluded. MLA: every projection split
// over t (Megatron-Core 0.12 builds the down projections column-parallel too), its q / kv norms replicated.
double AttentionParams(const ModelConfig& c, int64_t t) {
  if (c.is_mla()) {
    const MlaWeights w = MlaProjections(c);
    double norms = NormParamsOf(c, static_cast<double>(c.mla.kv_lora_rank));
    if (c.mla.q_lora_rank > 0) norms += NormParamsOf(c, static_cast<double>(c.mla.q_lora_rank));
    return (w.down + w.up + w.out) / static_cast<double>(t) + norms;
  }
  const double q = 1.0 * c.heads / t * c.effective_head_dim();
  const double kv = 1.0 * KvHeadsPerRank(c, t) * c.effective_head_dim();
  return 2.0 * c.d_model * q + 2.0 * c.d_model * kv;
}

// The weights of a MoE layer's feed-forward part besides its routed experts: the router and the shared experts
// (all of them with t = 1; one tensor rank's share: the router is replicated).
double MoeDenseParams(const ModelConfig& c, int64_t t) {
  return 1.0 * c.d_model * c.moe.experts + MlpParams(c, c.moe.shared_d_ff) / static_cast<double>(t);
}

// Forward FLOPs per token of one layer (2 per multiply-add); `layer` >= layers: an MTP layer. The causal
// attention core counted as half (ModelFlops).
double LayerForwardFlopsPerToken(const ModelConfig& c, int64_t layer) {
  const bool moe = c.is_moe_layer(std::min(layer, c.layers - 1));
  double flops = 0;
  if (c.is_mla()) {
    const MlaWeights w = MlaProjections(c);
    flops = 2.0 * (w.down + w.up + w.out);
  } else {
    flops = 2.0 * AttentionParams(c, 1);
  }
  flops += AttentionCoreFlopsPerToken(c, layer);
  if (moe) {
    flops += 2.0 * c.moe.top_k * MlpParams(c, c.expert_d_ff()) + 2.0 * MoeDenseParams(c, 1);
  } else {
    flops += 2.0 * MlpParams(c, c.d_ff);
  }
  return flops;
}

// An MTP module's own forward FLOPs per token besides its layer: the [2h -> h] projection and the logits.
double MtpExtraFlopsPerToken(const ModelConfig& c) {
  return 2.0 * 2 * c.d_model * c.d_model + 2.0 * c.d_model * c.vocab;
}

}  // namespace

double AttentionCoreFlopsPerToken(const ModelConfig& c, int64_t layer) {
  const int64_t shaped_like = std::min(layer, c.layers - 1);
  const double keys = c.is_windowed_layer(shaped_like) && layer < c.layers
                          ? static_cast<double>(std::min(c.attention_window.window, c.seq))
                          : static_cast<double>(c.seq);
  // Causal: each query sees the keys at or before it, half of them on average (ModelFlops).
  if (c.is_mla()) {  // Q K^T over qk + rope, P V over v
    const MlaConfig& a = c.mla;
    return 2.0 * keys * c.heads * static_cast<double>(a.qk_head_dim + a.qk_rope_head_dim + a.v_head_dim) / 2;
  }
  return 4.0 * keys * c.heads * c.effective_head_dim() / 2;  // Q K^T and P V
}

// Bytes per token a layer's attention keeps for the backward inside the tensor-parallel region (split by t), and
// outside it (the replicated part, split by t only with SP), beside the layer's norm inputs.
struct AttentionKept {
  double split = 0, replicated = 0;
};
AttentionKept AttentionActivations(const ModelConfig& c, int64_t t) {
  AttentionKept k;
  if (c.is_mla()) {
    const MlaConfig& a = c.mla;
    const double local_heads = 1.0 * c.heads / t;
    // q, k (qk + rope per head), v, and the output projection's input (v per head); with mla_up_proj recompute
    // q, k, v are rebuilt from the compressed inputs in the backward.
    const double qkv = 2 * local_heads * static_cast<double>(2 * (a.qk_head_dim + a.qk_rope_head_dim) + a.v_head_dim);
    k.split = (a.recompute_up_proj ? 0 : qkv) + 2 * local_heads * static_cast<double>(a.v_head_dim);
    // The compressed q and kv (+ k's rotary part) and their norms' outputs: the up projections' inputs.
    k.replicated = 2.0 * (2 * a.q_lora_rank + 2 * a.kv_lora_rank + a.qk_rope_head_dim);
    return k;
  }
  const double hd = static_cast<double>(c.effective_head_dim());
  const double q_local = 1.0 * c.heads / t * hd;
  const double kv_local = 1.0 * KvHeadsPerRank(c, t) * hd;
  k.split = 2 * q_local + 4 * kv_local + 2 * q_local;  // Q, K, V, the output projection's input
  return k;
}

double LayerActivationBytes(const ModelConfig& c, int64_t b, int64_t t, int64_t ctx, bool moe_layer) {
  const double h = static_cast<double>(c.d_model);
  const double tokens = static_cast<double>(c.seq) / ctx * b;
  const bool sp = c.parallel.sequence_parallel && t > 1;
  const double replicated_split = sp ? static_cast<double>(t) : 1.0;
  if (c.recompute == Recompute::kFull) return tokens * 2 * h / replicated_split;  // the layer's input only
  if (c.recompute == Recompute::kMinimal && !moe_layer && !c.is_mla()) {
    // MaxText's "minimal" (checkpoint_dots_with_no_batch_dims): the layer's input and the attention and MLP
    // output projections' [T, h] outputs (outside the tensor-parallel region), Q, K, V and the MLP's up
    // projections (inside it); the attention core's dots have batch dimensions and are recomputed.
    const double hd = static_cast<double>(c.effective_head_dim());
    const double q_local = 1.0 * c.heads / t * hd, kv_local = 1.0 * KvHeadsPerRank(c, t) * hd;
    const double up = (c.activation == Activation::kSwiglu ? 2 : 1) * 2.0 * c.d_ff / t;
    return tokens * (6 * h / replicated_split + 2 * q_local + 4 * kv_local + up);
  }
  // Outside the tensor-parallel region (split by t only with SP): two norm inputs, the attention and MLP inputs
  // (the norms' outputs), the two dropout masks.
  const AttentionKept attention = AttentionActivations(c, t);
  double replicated = 4 * h + 2 * h + 2 * h + (c.dropout ? 2 * h : 0) + attention.replicated;
  // Inside it (split by t): Q, K, V, the output projection's input, the MLP intermediates.
  double split = attention.split;
  const double per_ff = c.activation == Activation::kSwiglu ? 3 * 2.0 : 2 * 2.0;
  double unsplit = 0;
  if (moe_layer) {
    // Each token's routed rows held top_k times (with slack): the experts' inputs and intermediates. With the
    // experts over the tensor ranks (expert tensor parallelism 1) a rank holds the rows of its own 1 / t of the
    // tokens; else every tensor rank holds every token's rows, the intermediates split over d_ff.
    const double routed = c.moe.top_k * c.moe.capacity_factor;
    const bool folded = c.experts_over_tensor();
    split += routed * per_ff * c.expert_d_ff() / t + (folded ? routed * 2 * h / t : 0);
    unsplit += folded ? 0 : routed * 2 * h;
    split += per_ff * c.moe.shared_d_ff / t;
  } else {
    split += per_ff * c.d_ff / t;
  }
  // Attention scores per query row and local head: softmax output (2 bytes), dropout mask (1) and output (2)
  // over seq keys; flash attention keeps only its fp32 log-sum-exp; selective recompute keeps none.
  const double local_heads = 1.0 * c.heads / t;
  double scores = 0;
  if (c.recompute == Recompute::kNone) {
    scores = c.flash_attention ? 4 * local_heads : local_heads * c.seq * (c.dropout ? 5.0 : 2.0);
  }
  return tokens * (replicated / replicated_split + split + scores + unsplit);
}

namespace {

// One MTP module (Megatron-Core MultiTokenPredictionLayer): enorm and hnorm, eh_proj [2h, h], a layer shaped like
// the model's last, its final norm.
double MtpModuleParams(const ModelConfig& c, double layer) {
  return 3 * NormParams(c) + 2.0 * c.d_model * c.d_model + layer;
}

ModelParams CountParams(const ModelConfig& c) {
  ModelParams p;
  const double vocab_h = 1.0 * c.vocab * c.d_model;
  p.embedding = vocab_h + (c.position == PositionEmbedding::kLearned ? 1.0 * c.seq * c.d_model : 0.0);
  p.output = c.tied_embeddings ? 0 : vocab_h;
  const double attention = AttentionParams(c, 1) + 2 * NormParams(c);
  p.per_dense_layer = attention + MlpParams(c, c.d_ff);
  p.per_moe_layer = attention + c.moe.experts * MlpParams(c, c.expert_d_ff()) + MoeDenseParams(c, 1);
  const double moe_active = attention + c.moe.top_k * MlpParams(c, c.expert_d_ff()) + MoeDenseParams(c, 1);
  p.total = p.embedding + p.output + NormParams(c);
  p.active = p.total;
  for (int64_t l = 0; l < c.layers; ++l) {
    p.total += c.is_moe_layer(l) ? p.per_moe_layer : p.per_dense_layer;
    p.active += c.is_moe_layer(l) ? moe_active : p.per_dense_layer;
  }
  const bool last_moe = c.is_moe_layer(c.layers - 1);
  p.mtp = c.mtp_layers * MtpModuleParams(c, last_moe ? p.per_moe_layer : p.per_dense_layer);
  p.total += p.mtp;
  p.active += c.mtp_layers * MtpModuleParams(c, last_moe ? moe_active : p.per_dense_layer);
  return p;
}

ModelFlops CountFlops(const ModelConfig& c) {
  ModelFlops f;
  const double tokens = 1.0 * c.global_batch * c.seq;
  double layers = 0, cores = 0, mtp = 0;
  for (int64_t l = 0; l < c.layers + c.mtp_layers; ++l) {
    (l < c.layers ? layers : mtp) += LayerForwardFlopsPerToken(c, l);
    cores += AttentionCoreFlopsPerToken(c, l);
  }
  mtp += c.mtp_layers * MtpExtraFlopsPerToken(c);
  const double logits = 2.0 * c.d_model * c.vocab;
  f.forward = tokens * (layers + logits + mtp);
  f.backward = 2 * f.forward;
  if (c.recompute == Recompute::kFull) f.recompute = tokens * layers;
  // Selective recompute reruns the attention core when its scores are materialised; flash attention stores none,
  // and the step recomputes nothing then (model/layer_ops.h).
  if (c.recompute == Recompute::kSelective && !c.flash_attention) f.recompute = tokens * cores;
  if (c.is_mla() && c.mla.recompute_up_proj)
    f.recompute += tokens * (c.layers + c.mtp_layers) * 2.0 * MlaProjections(c).up;
  f.model = f.forward + f.backward;
  f.hardware = f.model + f.recompute;
  return f;
}

// The layers stage `stage` holds: its v chunks, chunk j being virtual stage j * p + stage (PipelineLayerLayout).
std::vector<int64_t> StageLayers(const std::vector<LayerRange>& layout, int64_t p, int64_t stage) {
  std::vector<int64_t> layers;
  for (size_t k = static_cast<size_t>(stage); k < layout.size(); k += static_cast<size_t>(p))
    for (int64_t i = 0; i < layout[k].count; ++i) layers.push_back(layout[k].first + i);
  return layers;
}

// Bytes per parameter (ZeRO, Rajbhandari et al. 2020, mixed precision with Adam: K = 12): 2-byte weights and
// gradients, fp32 master weights + two fp32 moments; the sharded parts divided by the ZeRO group. ZeRO-3 without
// resharding after the forward holds every layer's gathered weights from its forward to its backward: at the
// peak the whole weights, as ZeRO-2.
void AddParamBytes(double params, double zero_group, const ModelParallelism& p, DeviceMemory* m) {
  const bool weights_sharded = p.zero_stage >= 3 && p.reshard_after_forward;
  m->parameters += 2 * params / (weights_sharded ? zero_group : 1);
  m->gradients += 2 * params / (p.zero_stage >= 2 ? zero_group : 1);
  m->optimizer += 12 * params / (p.zero_stage >= 1 ? zero_group : 1);
}

// Parameter, gradient and optimizer bytes of one device of the stage.
void AddStageParams(const ModelConfig& c, const ParallelDegrees& d, int64_t stage, const std::vector<int64_t>& layers,
                    StageMemory* s, double* zero3_layer) {
  const int64_t p = d.pipeline;
  double dense = 0, expert = 0;
  for (int64_t l : layers) {
    const bool moe = c.is_moe_layer(l);
    expert += ExpertParamsPerDevice(c, d, moe);
    dense += LayerParamsPerDevice(c, d, moe) - ExpertParamsPerDevice(c, d, moe);
  }
  *zero3_layer = (dense + expert) / static_cast<double>(std::max<size_t>(layers.size(), 1));
  const double vocab_shard = VocabParamsPerDevice(c, d);
  if (stage == 0) {
    dense += vocab_shard + (c.position == PositionEmbedding::kLearned ? 1.0 * c.seq * c.d_model : 0.0);
  }
  if (stage == p - 1) {
    dense += NormParams(c);
    // Untied: the output projection; tied: shared with the input embedding, but a separate copy on the last
    // stage when there is more than one (Megatron keeps both in sync by an all-reduce). MTP modules also need
    // the embedding there: Megatron-Core keeps a copy on the last stage.
    if (!c.tied_embeddings || p > 1) dense += vocab_shard;
    if (c.mtp_layers > 0 && p > 1 && !c.tied_embeddings) dense += vocab_shard;
    double mtp_experts = 0;
    const double mtp = MtpParamsPerDevice(c, d, &mtp_experts);
    dense += c.mtp_layers * (mtp - mtp_experts);
    expert += c.mtp_layers * mtp_experts;
  }
  // ZeRO's group: its shard axes (all data axes unless zero_axes names fewer) and the context axes; routed
  // experts' replicas as far as ZeRO's axes reach them.
  const double shard = static_cast<double>(d.zero) / static_cast<double>(d.data);
  AddParamBytes(dense, static_cast<double>(d.zero * d.context), c.parallel, &s->memory);
  AddParamBytes(expert, std::max(1.0, static_cast<double>(d.expert_data) * shard), c.parallel, &s->memory);
}

StageMemory StageMemoryOf(const ModelConfig& c, const ParallelDegrees& d, const std::vector<LayerRange>& layout,
                          int64_t stage) {
  StageMemory s;
  s.stage = stage;
  const int64_t t = d.tensor, p = d.pipeline, v = c.parallel.virtual_stages;
  const std::vector<int64_t> layers = StageLayers(layout, p, stage);
  s.layers = static_cast<int64_t>(layers.size());
  double zero3_layer = 0;
  AddStageParams(c, d, stage, layers, &s, &zero3_layer);
  // Activations: the in-flight chunks, each holding (on average) its share 1 / v of the stage's layers.
  s.in_flight = InFlightChunks(c.parallel.schedule, p, stage, d.micro_batches, v);
  double per_micro_batch = 0;
  for (int64_t l : layers) per_micro_batch += LayerActivationBytes(c, c.micro_batch, t, d.context, c.is_moe_layer(l));
  const double tokens = 1.0 * c.seq / d.context * c.micro_batch;
  const bool sp = c.parallel.sequence_parallel && t > 1;
  if (stage == p - 1 && c.mtp_layers > 0) {
    // Each MTP module: its layer, and its two norm inputs and the concatenated [2h] projection input.
    const double layer = LayerActivationBytes(c, c.micro_batch, t, d.context, c.is_moe_layer(c.layers - 1));
    per_micro_batch += c.mtp_layers * (layer + tokens * 8.0 * c.d_model / (sp ? t : 1));
  }
  s.memory.activations = per_micro_batch / v * s.in_flight;
  if (c.recompute == Recompute::kFull) {
    // The layer being recomputed holds its full activations during its backward.
    ModelConfig working = c;
    working.recompute = Recompute::kNone;
    s.memory.activations += LayerActivationBytes(working, c.micro_batch, t, d.context, false);
  }
  // The loss: fp32 logits of one micro-batch, vocabulary split by t (Korthikanti et al.: 4 s b v / t); one more
  // per MTP module.
  if (stage == p - 1) s.memory.activations += (1 + c.mtp_layers) * 4 * tokens * PaddedVocab(c, t) / t;
  // Communication buffers (docs/workloads.md): pipeline send + receive in both directions, the all-gathered
  // sequence-parallel input of a layer, ZeRO-3's gathered current + prefetched layer, EP dispatch + combine.
  const double activation = 2 * tokens * c.d_model;
  if (p > 1) s.memory.communication += 4 * activation / (sp ? t : 1);
  if (sp) s.memory.communication += activation;
  // Without resharding after the forward the gathered weights are the stage's parameters, already counted whole.
  if (c.parallel.zero_stage >= 3 && c.parallel.reshard_after_forward && d.data * d.context > 1)
    s.memory.communication += 2 * 2 * zero3_layer;
  if (c.moe.experts > 0 && d.expert > 1)
    s.memory.communication += 2 * activation * c.moe.top_k * c.moe.capacity_factor / (sp ? t : 1);
  return s;
}

}  // namespace

double ExpertParamsPerDevice(const ModelConfig& c, const ParallelDegrees& d, bool moe_layer) {
  if (!moe_layer) return 0;
  return 1.0 * c.moe.experts / d.expert * MlpParams(c, c.expert_d_ff()) / d.expert_tensor;
}

double LayerParamsPerDevice(const ModelConfig& c, const ParallelDegrees& d, bool moe_layer) {
  const double attention = AttentionParams(c, d.tensor) + 2 * NormParams(c);
  if (!moe_layer) return attention + MlpParams(c, c.d_ff) / d.tensor;
  return attention + MoeDenseParams(c, d.tensor) + ExpertParamsPerDevice(c, d, moe_layer);
}

double MtpParamsPerDevice(const ModelConfig& c, const ParallelDegrees& d, double* experts) {
  const bool moe = c.is_moe_layer(c.layers - 1);
  if (experts != nullptr) *experts = ExpertParamsPerDevice(c, d, moe);
  // eh_proj is column-parallel (its output gathered after it): split over t.
  return 3 * NormParams(c) + 2.0 * c.d_model * c.d_model / d.tensor + LayerParamsPerDevice(c, d, moe);
}

double VocabParamsPerDevice(const ModelConfig& c, const ParallelDegrees& d) {
  return 1.0 * PaddedVocab(c, d.tensor) / d.tensor * c.d_model;
}

ModelAccounting AccountModel(const ValidatedModel& model) {
  const ModelConfig& config = model.config();
  const Mesh& mesh = model.mesh();
  ModelAccounting a;
  a.degrees = model.degrees();
  a.params = CountParams(config);
  a.flops = CountFlops(config);
  a.tokens_per_step = 1.0 * config.global_batch * config.seq;
  a.activation_bytes_per_layer =
      LayerActivationBytes(config, config.micro_batch, a.degrees.tensor, a.degrees.context, false);
  const std::vector<LayerRange> layout = PipelineLayerLayout(config, a.degrees.pipeline);
  for (int64_t stage = 0; stage < a.degrees.pipeline; ++stage) {
    a.stages.push_back(StageMemoryOf(config, a.degrees, layout, stage));
    if (a.stages.back().memory.total() > a.peak_bytes) {
      a.peak_bytes = a.stages.back().memory.total();
      a.peak_stage = stage;
    }
  }
  a.capacity_bytes = mesh.topology() != nullptr ? static_cast<double>(mesh.topology()->memory_bytes()) : 0;
  a.bubble_fraction = PipelineBubbleFraction(config.parallel.schedule, a.degrees.pipeline, a.degrees.micro_batches,
                                             config.parallel.virtual_stages);
  return a;
}

}  // namespace spmdsim
