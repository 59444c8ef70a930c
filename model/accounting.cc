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

double NormParams(const ModelConfig& c) { return c.norm == Norm::kLayerNorm ? 2.0 * c.d_model : 1.0 * c.d_model; }

double MlpParams(const ModelConfig& c, int64_t d_ff) {
  return (c.activation == Activation::kSwiglu ? 3.0 : 2.0) * c.d_model * d_ff;
}

double AttentionParams(const ModelConfig& c, int64_t kv_heads_local, int64_t t) {
  const double q = 1.0 * c.heads / t * c.effective_head_dim();
  const double kv = 1.0 * kv_heads_local * c.effective_head_dim();
  return 2.0 * c.d_model * q + 2.0 * c.d_model * kv;
}

int64_t KvHeadsPerRank(const ModelConfig& c, int64_t t) {
  const int64_t kv = c.effective_kv_heads();
  return kv >= t ? kv / t : 1;  // fewer KV heads than ranks: each rank keeps one (replicated)
}

// Forward FLOPs per token of one layer (2 per multiply-add); the causal attention core as half (ModelFlops).
double LayerForwardFlopsPerToken(const ModelConfig& c, bool moe_layer) {
  const double q = 1.0 * c.heads * c.effective_head_dim();
  const double kv = 1.0 * c.effective_kv_heads() * c.effective_head_dim();
  double flops = 2.0 * (2 * c.d_model * q + 2 * c.d_model * kv);
  flops += AttentionCoreFlopsPerToken(c);
  if (moe_layer) {
    flops += 2.0 * c.moe.top_k * MlpParams(c, c.expert_d_ff()) + 2.0 * c.d_model * c.moe.experts;
  } else {
    flops += 2.0 * MlpParams(c, c.d_ff);
  }
  return flops;
}

}  // namespace

double AttentionCoreFlopsPerToken(const ModelConfig& c) {
  return 4.0 * c.seq * c.heads * c.effective_head_dim() / 2;  // Q K^T and P V, causal: half the score matrix
}

double LayerActivationBytes(const ModelConfig& c, int64_t b, int64_t t, int64_t ctx, bool moe_layer) {
  const double h = static_cast<double>(c.d_model);
  const double tokens = static_cast<double>(c.seq) / ctx * b;
  const bool sp = c.parallel.sequence_parallel && t > 1;
  const double replicated_split = sp ? static_cast<double>(t) : 1.0;
  if (c.recompute == Recompute::kFull) return tokens * 2 * h / replicated_split;  // the layer's input only
  // Outside the tensor-parallel region (split by t only with SP): two norm inputs, the attention and MLP inputs
  // (the norms' outputs), the two dropout masks.
  double replicated = 4 * h + 2 * h + 2 * h + (c.dropout ? 2 * h : 0);
  // Inside it (split by t): Q, K, V, the output projection's input, the MLP intermediates.
  const double hd = static_cast<double>(c.effective_head_dim());
  const double q_local = 1.0 * c.heads / t * hd;
  const double kv_local = 1.0 * KvHeadsPerRank(c, t) * hd;
  double split = 2 * q_local + 4 * kv_local + 2 * q_local;
  int64_t d_ff = c.d_ff;
  double routed = 1;
  if (moe_layer) {
    d_ff = c.expert_d_ff();
    routed = c.moe.top_k * c.moe.capacity_factor;  // each token's MLP activations held top_k times (with slack)
  }
  const double mlp = (c.activation == Activation::kSwiglu ? 3 * 2.0 : 2 * 2.0) * d_ff / t;
  split += routed * mlp;
  // Attention scores per query row and local head: softmax output (2 bytes), dropout mask (1) and output (2)
  // over seq keys; flash attention keeps only its fp32 log-sum-exp; selective recompute keeps none.
  const double local_heads = 1.0 * c.heads / t;
  double scores = 0;
  if (c.recompute == Recompute::kNone) {
    scores = c.flash_attention ? 4 * local_heads : local_heads * c.seq * (c.dropout ? 5.0 : 2.0);
  }
  return tokens * (replicated / replicated_split + split + scores);
}

namespace {

ModelParams CountParams(const ModelConfig& c) {
  ModelParams p;
  const double vocab_h = 1.0 * c.vocab * c.d_model;
  p.embedding = vocab_h + (c.position == PositionEmbedding::kLearned ? 1.0 * c.seq * c.d_model : 0.0);
  p.output = c.tied_embeddings ? 0 : vocab_h;
  const double attention = AttentionParams(c, c.effective_kv_heads(), 1) + 2 * NormParams(c);
  p.per_dense_layer = attention + MlpParams(c, c.d_ff);
  p.per_moe_layer = attention + c.moe.experts * MlpParams(c, c.expert_d_ff()) + 1.0 * c.d_model * c.moe.experts;
  const double moe_active = attention + c.moe.top_k * MlpParams(c, c.expert_d_ff()) + 1.0 * c.d_model * c.moe.experts;
  p.total = p.embedding + p.output + NormParams(c);
  p.active = p.total;
  for (int64_t l = 0; l < c.layers; ++l) {
    p.total += c.is_moe_layer(l) ? p.per_moe_layer : p.per_dense_layer;
    p.active += c.is_moe_layer(l) ? moe_active : p.per_dense_layer;
  }
  return p;
}

ModelFlops CountFlops(const ModelConfig& c) {
  ModelFlops f;
  const double tokens = 1.0 * c.global_batch * c.seq;
  double layers = 0;
  for (int64_t l = 0; l < c.layers; ++l) layers += LayerForwardFlopsPerToken(c, c.is_moe_layer(l));
  const double logits = 2.0 * c.d_model * c.vocab;
  f.forward = tokens * (layers + logits);
  f.backward = 2 * f.forward;
  if (c.recompute == Recompute::kFull) f.recompute = tokens * layers;
  // Selective recompute reruns the attention core when its scores are materialised; flash attention stores none,
  // and the step recomputes nothing then (model/step.cc).
  if (c.recompute == Recompute::kSelective && !c.flash_attention)
    f.recompute = tokens * c.layers * AttentionCoreFlopsPerToken(c);
  f.model = f.forward + f.backward;
  f.hardware = f.model + f.recompute;
  return f;
}

// The layers stage `stage` holds: v chunks of L / (p v) layers, chunk j being model chunk j * p + stage.
std::vector<int64_t> StageLayers(const ModelConfig& c, int64_t p, int64_t stage) {
  const int64_t v = c.parallel.virtual_stages;
  const int64_t per_chunk = c.layers / (p * v);
  std::vector<int64_t> layers;
  for (int64_t j = 0; j < v; ++j)
    for (int64_t i = 0; i < per_chunk; ++i) layers.push_back((j * p + stage) * per_chunk + i);
  return layers;
}

// Bytes per parameter (ZeRO, Rajbhandari et al. 2020, mixed precision with Adam: K = 12): 2-byte weights and
// gradients, fp32 master weights + two fp32 moments; the sharded parts divided by the ZeRO group.
void AddParamBytes(double params, double zero_group, int zero_stage, DeviceMemory* m) {
  m->parameters += 2 * params / (zero_stage >= 3 ? zero_group : 1);
  m->gradients += 2 * params / (zero_stage >= 2 ? zero_group : 1);
  m->optimizer += 12 * params / (zero_stage >= 1 ? zero_group : 1);
}

StageMemory StageMemoryOf(const ModelConfig& c, const ParallelDegrees& d, int64_t stage) {
  StageMemory s;
  s.stage = stage;
  const int64_t t = d.tensor, p = d.pipeline, v = c.parallel.virtual_stages;
  const int zero = c.parallel.zero_stage;
  const double dense_group = static_cast<double>(d.data * d.context);
  const double expert_group = static_cast<double>(d.data / d.expert * d.context);
  const std::vector<int64_t> layers = StageLayers(c, p, stage);
  s.layers = static_cast<int64_t>(layers.size());
  // Parameters on one device of this stage.
  const double attention = AttentionParams(c, KvHeadsPerRank(c, t), t) + 2 * NormParams(c);
  double dense = 0, expert = 0, zero3_layer = 0;
  for (int64_t l : layers) {
    if (c.is_moe_layer(l)) {
      dense += attention + 1.0 * c.d_model * c.moe.experts;
      expert += 1.0 * c.moe.experts / d.expert * MlpParams(c, c.expert_d_ff()) / t;
    } else {
      dense += attention + MlpParams(c, c.d_ff) / t;
    }
  }
  zero3_layer = (dense + expert) / std::max<int64_t>(s.layers, 1);
  const double vocab_shard = 1.0 * PaddedVocab(c, t) / t * c.d_model;
  if (stage == 0) {
    dense += vocab_shard + (c.position == PositionEmbedding::kLearned ? 1.0 * c.seq * c.d_model : 0.0);
  }
  if (stage == p - 1) {
    dense += NormParams(c);
    // Untied: the output projection; tied: shared with the input embedding, but a separate copy on the last
    // stage when there is more than one (Megatron keeps both in sync by an all-reduce).
    if (!c.tied_embeddings || p > 1) dense += vocab_shard;
  }
  AddParamBytes(dense, dense_group, zero, &s.memory);
  AddParamBytes(expert, expert_group, zero, &s.memory);
  // Activations: the in-flight chunks, each holding its share (1 / v) of the stage's layers.
  s.in_flight = InFlightChunks(c.parallel.schedule, p, stage, d.micro_batches, v);
  double per_micro_batch = 0;
  for (int64_t l : layers) per_micro_batch += LayerActivationBytes(c, c.micro_batch, t, d.context, c.is_moe_layer(l));
  s.memory.activations = per_micro_batch / v * s.in_flight;
  if (c.recompute == Recompute::kFull) {
    // The layer being recomputed holds its full activations during its backward.
    ModelConfig working = c;
    working.recompute = Recompute::kNone;
    s.memory.activations += LayerActivationBytes(working, c.micro_batch, t, d.context, false);
  }
  const double tokens = 1.0 * c.seq / d.context * c.micro_batch;
  const bool sp = c.parallel.sequence_parallel && t > 1;
  // The loss: fp32 logits of one micro-batch, vocabulary split by t (Korthikanti et al.: 4 s b v / t).
  if (stage == p - 1) s.memory.activations += 4 * tokens * PaddedVocab(c, t) / t;
  // Communication buffers (docs/workloads.md): pipeline send + receive in both directions, the all-gathered
  // sequence-parallel input of a layer, ZeRO-3's gathered current + prefetched layer, EP dispatch + combine.
  const double activation = 2 * tokens * c.d_model;
  if (p > 1) s.memory.communication += 4 * activation / (sp ? t : 1);
  if (sp) s.memory.communication += activation;
  if (zero >= 3 && dense_group > 1) s.memory.communication += 2 * 2 * zero3_layer;
  if (c.moe.experts > 0 && d.expert > 1)
    s.memory.communication += 2 * activation * c.moe.top_k * c.moe.capacity_factor / (sp ? t : 1);
  return s;
}

}  // namespace

double LayerParamsPerDevice(const ModelConfig& c, const ParallelDegrees& d, bool moe_layer) {
  const double attention = AttentionParams(c, KvHeadsPerRank(c, d.tensor), d.tensor) + 2 * NormParams(c);
  if (!moe_layer) return attention + MlpParams(c, c.d_ff) / d.tensor;
  return attention + 1.0 * c.d_model * c.moe.experts +
         1.0 * c.moe.experts / d.expert * MlpParams(c, c.expert_d_ff()) / d.tensor;
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
  for (int64_t stage = 0; stage < a.degrees.pipeline; ++stage) {
    a.stages.push_back(StageMemoryOf(config, a.degrees, stage));
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
