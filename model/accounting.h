// The model workload's ANALYTIC accounting of one training step (docs/model.md, "Accounting"): parameter count,
// FLOPs per step, per-device memory by category and pipeline stage, and the pipeline bubble.
//
// Example: ModelAccounting a = AccountModel(ValidateModel(GptModel(12288, 96, 96, 4 * 12288), mesh));
//          a.params.total ~ 1.75e11; a.stages[0].memory.total() is stage 0's bytes per device.
// Thread safety: free functions over values; safe to call concurrently.
#ifndef SPMDSIM_MODEL_ACCOUNTING_H_
#define SPMDSIM_MODEL_ACCOUNTING_H_

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace spmdsim {

struct ModelParams {
  double total = 0;              // every parameter (all experts)
  double active = 0;             // used per token (top_k of the experts)
  double embedding = 0;          // input embedding (+ learned positions)
  double output = 0;             // output projection (0 when tied)
  double per_dense_layer = 0;    // attention + MLP + norms of one dense layer
  double per_moe_layer = 0;      // attention + routed and shared experts + router + norms of one MoE layer
  double mtp = 0;                // the multi-token-prediction modules (their embedding and head are shared)
  // DeepSeek-V3 (MLA, 1 shared + 256 routed experts top-8, 3 dense layers, 61 layers): total 671B, active 37B
  // (DeepSeek-V3 technical report, section 2; tested), MTP 11.6B (their 14B counts the shared embedding and
  // head once more).
};

// The FLOP convention (docs/model.md, "FLOPs and MFU"): 2 per multiply-add; causal attention counted as half of
// the full score matrix (Q K^T and P V over the keys at or before each query), as MaxText
// (maxtext_utils.calculate_tflops_training_per_device: noncausal_attention_flops / 2) and Megatron-LM
// (training.py num_floating_point_operations: seq_length / hidden_size / 2, "only half of the attention matrix is
// non-zero") count it; the backward is 2 x the forward; the input embedding (a lookup) and the optimizer are not
// counted. MFU divides this count; the simulated step executes at least it (ModelStepTimes::hardware_flops).
struct ModelFlops {
  // FLOPs of one optimizer step over the global batch, every device together (2 per multiply-add).
  double forward = 0;
  double backward = 0;           // 2 x forward (gradients of inputs and of weights)
  double recompute = 0;          // forward work done again: selective the attention core (none with flash
                                 // attention, which keeps no scores), full the whole layer
  double model = 0;              // forward + backward (what MFU counts)
  double hardware = 0;           // model + recompute
  // For GPT (MHA, gelu, d_ff = 4h) `model` equals 72 B s l h^2 (1 + s / 12h + V / 12 l h): Korthikanti et al.
  // 2022's formula with the causal attention term halved (theirs, s / 6h, counts the whole score matrix); tested.
  // MTP modules count as Megatron-Core's num_floating_point_operations counts them: one more layer and one more
  // head each.
};

// Memory of one device in bytes, by category. double: modelled shares (a tensor's share of a ZeRO / FSDP data
// degree, activation estimates) are fractional; whole buffers are int64_t elsewhere (docs/architecture.md,
// "Byte counts").
struct DeviceMemory {
  double parameters = 0;         // compute-dtype weights (2 bytes each; ZeRO-3 shards them over data)
  double gradients = 0;          // 2 bytes each (ZeRO-2/3 shard them)
  double optimizer = 0;          // fp32 master weights + Adam m, v: 12 bytes each (ZeRO-1/2/3 shard them)
  double activations = 0;        // stored for the backward, all in-flight micro-batches, + one working layer
  double communication = 0;      // collective / pipeline buffers (docs/workloads.md lists them)
  double total() const { return parameters + gradients + optimizer + activations + communication; }
};

struct StageMemory {
  int64_t stage = 0;
  int64_t layers = 0;            // transformer layers on the stage (all its virtual chunks)
  int64_t in_flight = 0;         // micro-batch chunks whose activations the stage holds at its peak
  DeviceMemory memory;
};

struct ModelAccounting {
  ParallelDegrees degrees;
  ModelParams params;
  ModelFlops flops;
  double tokens_per_step = 0;
  // Per-layer activation bytes of ONE micro-batch on one device (the Korthikanti et al. quantities, generalised
  // to GQA / SwiGLU / d_ff; docs/workloads.md), for a dense layer under the configured recompute.
  double activation_bytes_per_layer = 0;
  std::vector<StageMemory> stages;  // one per pipeline stage
  int64_t peak_stage = 0;           // the stage with the most memory
  double peak_bytes = 0;
  double capacity_bytes = 0;        // the topology's memory per device
  bool fits() const { return peak_bytes <= capacity_bytes; }
  double bubble_fraction = 0;       // pipeline idle time over ideal compute time
};

// Bytes of activations one transformer layer stores for the backward, per micro-batch of `b` sequences, on one
// device of the tensor group `t` (context degree `c`). Korthikanti et al. 2022 (section 4) for GPT:
//   no recompute, no TP:      s b h (34 + 5 a s / h)
//   TP t without SP:          s b h (10 + 24 / t + 5 a s / (h t))
//   TP t with SP:             s b h (34 + 5 a s / h) / t
//   selective recompute:      the 5 a s^2 b term dropped     full recompute: 2 s b h (/ t with SP)
// Generalised term by term to kv_heads, head_dim, d_ff, swiglu, no dropout and flash attention (which keeps
// only the softmax statistics, 4 bytes per query row and head).
double LayerActivationBytes(const ModelConfig& config, int64_t b, int64_t t, int64_t c, bool moe_layer);

// Forward FLOPs per token of one layer's causal attention core: Q K^T and P V over the keys at or before the
// token, on average half of them (MaxText's and Megatron-LM's count, ModelFlops): 2 * seq * heads * head_dim; MLA
// seq * heads * (qk + rope + v head dims); a layer in a sliding window over min(window, seq) / 2 keys instead
// (MaxText's Gemma 2 count). `layer` >= layers: an MTP layer (shaped like the last one).
double AttentionCoreFlopsPerToken(const ModelConfig& config, int64_t layer = 0);

// The whole accounting.
ModelAccounting AccountModel(const ValidatedModel& model);

// Parameters one device holds for one layer (tensor-parallel share; a MoE layer's routed experts split over the
// expert degree and the expert tensor degree), before any ZeRO sharding; ExpertParamsPerDevice the routed
// experts' part of it (0 for a dense layer), whose gradients reduce over `expert_data` ranks instead of
// data x context.
double LayerParamsPerDevice(const ModelConfig& config, const ParallelDegrees& degrees, bool moe_layer);
double ExpertParamsPerDevice(const ModelConfig& config, const ParallelDegrees& degrees, bool moe_layer);
// Parameters of one multi-token-prediction module on one device (the last stage), its layer included and its
// routed experts' part in `experts` when not null.
double MtpParamsPerDevice(const ModelConfig& config, const ParallelDegrees& degrees, double* experts = nullptr);
// Parameters of the input embedding (and learned positions) or of the output projection on one device.
double VocabParamsPerDevice(const ModelConfig& config, const ParallelDegrees& degrees);

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_ACCOUNTING_H_
