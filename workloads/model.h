// The `model` workload: a decoder-only transformer language model trained with every kind of parallelism
// mapped to mesh axes (docs/workloads.md, "model").
//
// This header holds the configuration (ModelConfig), its validation against a mesh (ValidateModel), the
// ANALYTIC accounting of one training step (AccountModel): parameter count, FLOPs per step, per-device memory
// by category, and the pipeline bubble; and the simulated step (PredictModelStep, docs/model.md): every
// device's program of forward, backward, recompute, pipeline transfers, gradient reduction and optimizer on
// compute and communication streams, priced by the cost model. RunModel (workloads/workloads.h) also runs small
// models with data (workloads/engines/model_program.h).
//
// Example (GPT-3 175B as in Korthikanti et al. 2022, Table 5, on 64 A100s, TP 8 x PP 8 interleaved 3):
//   ModelConfig c{.vocab = 51200, .d_model = 12288, .layers = 96, .heads = 96, .d_ff = 4 * 12288, .seq = 2048,
//                 .global_batch = 64, .micro_batch = 1};
//   c.parallel = {.tensor_axes = {"tensor"}, .sequence_parallel = true, .pipeline_axes = {"pipe"},
//                 .schedule = PipelineSchedule::kInterleaved1F1B, .virtual_stages = 3};
//   c.recompute = Recompute::kSelective;
//   Mesh mesh = MakeDeviceMesh(a100_topology, {{"pipe", 8}, {"tensor", 8}});
//   ModelAccounting a = AccountModel(c, mesh);   // a.params ~ 1.75e11, a.memory.per_stage[0] ...
//
// Errors: ValidateModel throws Error(kInvalidArgument) with one line naming the field and what would be valid
// ("heads = 96 is not divisible by the tensor-parallel degree 7 (axes tensor)").
// Thread safety: free functions over values; safe to call concurrently.
#ifndef SPMDSIM_WORKLOADS_MODEL_H_
#define SPMDSIM_WORKLOADS_MODEL_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "cost/collective_model.h"
#include "cost/roofline.h"
#include "mesh/mesh.h"

namespace spmdsim {

enum class Activation { kGelu, kSwiglu };
enum class Norm { kLayerNorm, kRmsNorm };
enum class PositionEmbedding { kRope, kLearned };
enum class PipelineSchedule { kGpipe, k1F1B, kInterleaved1F1B };
// Megatron's activation recompute (Korthikanti et al. 2022): selective recomputes the attention core (the
// softmax and its dropout, whose memory grows with seq^2); full recomputes the whole layer from its input.
enum class Recompute { kNone, kSelective, kFull };
// Megatron's --moe-router-load-balancing-type.
enum class MoeRouter { kAuxLoss, kSinkhorn, kNone };

std::string_view ActivationName(Activation a);       // "gelu", "swiglu"
std::string_view NormName(Norm n);                   // "layernorm", "rmsnorm"
std::string_view PositionEmbeddingName(PositionEmbedding p);  // "rope", "learned"
std::string_view PipelineScheduleName(PipelineSchedule s);    // "gpipe", "1f1b", "interleaved"
std::string_view RecomputeName(Recompute r);         // "none", "selective", "full"
std::string_view MoeRouterName(MoeRouter r);         // "aux_loss", "sinkhorn", "none"

// Mixture of experts (Megatron-Core MoE / Switch / GShard). Dense model when experts == 0.
struct MoeConfig {
  int64_t experts = 0;           // experts per MoE layer (0: no MoE)
  int64_t top_k = 2;             // experts each token is routed to
  double capacity_factor = 1.0;  // tokens an expert may take = capacity_factor * tokens * top_k / experts (> 0)
  int64_t d_ff = 0;              // each expert's hidden size (0: the model's d_ff)
  int64_t every = 1;             // every k-th layer is MoE (layers k-1, 2k-1, ...; 1: all)
  MoeRouter router = MoeRouter::kAuxLoss;
};

// Which mesh axes play which role. Degrees are the products of the axes' sizes. Every mesh axis larger than 1
// must have exactly one role (an axis without one would make its devices compute the same thing twice).
struct ModelParallelism {
  std::vector<std::string> data_axes{};      // data parallel (gradient reduction; ZeRO / FSDP shard over them)
  int zero_stage = 0;                        // 0 none, 1 optimizer states, 2 + gradients, 3 + parameters (= FSDP)
  std::vector<std::string> tensor_axes{};    // Megatron tensor parallelism (heads and d_ff split)
  bool sequence_parallel = false;            // Megatron SP over tensor_axes (norms / dropout split on seq)
  std::vector<std::string> context_axes{};   // context parallelism: seq split, ring attention
  std::vector<std::string> pipeline_axes{};  // pipeline stages (layers split evenly)
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;                // model chunks per stage (interleaved only; > 1 there)
  std::vector<std::string> expert_axes{};    // expert parallelism: experts split; a subset of data_axes
};

struct ModelConfig {
  std::string name = "model";
  int64_t vocab = 32000;
  int64_t d_model = 1024;
  int64_t layers = 8;
  int64_t heads = 16;
  int64_t kv_heads = 0;          // 0: = heads (MHA); 1: MQA; in between: GQA (heads % kv_heads == 0)
  int64_t head_dim = 0;          // 0: d_model / heads
  int64_t d_ff = 4096;
  Activation activation = Activation::kGelu;
  Norm norm = Norm::kLayerNorm;
  PositionEmbedding position = PositionEmbedding::kRope;
  bool tied_embeddings = false;
  bool dropout = false;          // dropout after attention scores, attention and MLP (GPT: yes; Llama: no)
  bool flash_attention = true;   // attention scores never stored (Dao et al. 2022); false: materialised
  int64_t seq = 2048;
  int64_t global_batch = 8;      // sequences per optimizer step
  int64_t micro_batch = 1;       // sequences per micro-batch per data-parallel rank
  DType dtype = DType::kBF16;    // compute dtype: bf16, f16 or an fp8; master weights and Adam moments fp32
  MoeConfig moe{};
  ModelParallelism parallel{};
  Recompute recompute = Recompute::kNone;
  // The data run (non-abstract; docs/model.md, "Running with data"): tokens and weights from `seed`, and the
  // numpy.isclose tolerance of the loss and every weight gradient against the one-device run.
  uint64_t seed = 0;
  double rtol = 1e-4, atol = 1e-6;
  bool check = true;

  int64_t effective_kv_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t effective_head_dim() const { return head_dim > 0 ? head_dim : d_model / heads; }
  int64_t expert_d_ff() const { return moe.d_ff > 0 ? moe.d_ff : d_ff; }
  bool is_moe_layer(int64_t layer) const { return moe.experts > 0 && (layer + 1) % moe.every == 0; }
};

// Shapes of two published families, every other field at its default (callers set batch, parallelism, ...):
// GPT as Megatron-LM trains it (MHA, GeLU, LayerNorm, learned positions, tied embeddings, vocab 51200, seq 2048;
// Brown et al. 2020, Korthikanti et al. 2022) and a Llama-style decoder (GQA, SwiGLU, RMSNorm, RoPE, vocab 32000;
// Touvron et al. 2023).
ModelConfig GptModel(int64_t d_model, int64_t layers, int64_t heads, int64_t d_ff);
ModelConfig LlamaModel(int64_t d_model, int64_t layers, int64_t heads, int64_t kv_heads, int64_t d_ff, int64_t seq);

// The degrees of each role on a mesh (products of the axes' sizes; 1 for a role without axes).
struct ParallelDegrees {
  int64_t data = 1, tensor = 1, context = 1, pipeline = 1, expert = 1;
  int64_t micro_batches = 1;     // per optimizer step per data-parallel rank: global_batch / (micro_batch * data)
};

// Checks every field and its fit with the mesh; returns the degrees. Throws Error(kInvalidArgument) with one
// line naming the field (and Error(kNotFound) for an axis the mesh lacks, listing its axes).
ParallelDegrees ValidateModel(const ModelConfig& config, const Mesh& mesh);

// --- analytic accounting ---------------------------------------------------------------------------------------

struct ModelParams {
  double total = 0;              // every parameter (all experts)
  double active = 0;             // used per token (top_k of the experts)
  double embedding = 0;          // input embedding (+ learned positions)
  double output = 0;             // output projection (0 when tied)
  double per_dense_layer = 0;    // attention + MLP + norms of one dense layer
  double per_moe_layer = 0;      // attention + experts + router + norms of one MoE layer
};

struct ModelFlops {
  // FLOPs of one optimizer step over the global batch, every device together (2 per multiply-add).
  double forward = 0;
  double backward = 0;           // 2 x forward (gradients of inputs and of weights)
  double recompute = 0;          // forward work done again: selective the attention core, full the whole layer
  double model = 0;              // forward + backward (what MFU counts)
  double hardware = 0;           // model + recompute
  // For GPT (MHA, gelu, d_ff = 4h) `model` equals Korthikanti et al. 2022's 72 B s l h^2 (1 + s / 6h + V / 12 l h)
  // (attention counted non-causal, as there); tested.
};

// Memory of one device in bytes, by category.
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

// Forward FLOPs per token of one layer's attention core (Q K^T and P V over all seq keys, as Megatron and
// Korthikanti et al. count them): 4 * seq * heads * head_dim.
double AttentionCoreFlopsPerToken(const ModelConfig& config);

// The pipeline bubble over ideal compute: (p - 1) / m for GPipe and 1F1B, (p - 1) / (v m) interleaved
// (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters").
double PipelineBubbleFraction(PipelineSchedule schedule, int64_t stages, int64_t micro_batches, int64_t virtual_stages);

// Micro-batch chunks (each 1/v of a stage's layers) whose activations stage `stage` of `stages` holds at once,
// as Megatron-LM's schedules run them (megatron/core/pipeline_parallel/schedules.py): GPipe m chunks; 1F1B
// min(p - stage, m); interleaved min((p - stage - 1) * 2 + (v - 1) * p + 1, m v).
int64_t InFlightChunks(PipelineSchedule schedule, int64_t stages, int64_t stage, int64_t micro_batches,
                       int64_t virtual_stages);

// The whole accounting. REQUIRES: ValidateModel passes (it is called first; its errors propagate).
ModelAccounting AccountModel(const ModelConfig& config, const Mesh& mesh);

// Parameters one device holds for one layer (tensor-parallel share; a MoE layer's experts split over the expert
// degree), before any ZeRO sharding.
double LayerParamsPerDevice(const ModelConfig& config, const ParallelDegrees& degrees, bool moe_layer);
// Parameters of the input embedding (and learned positions) or of the output projection on one device.
double VocabParamsPerDevice(const ModelConfig& config, const ParallelDegrees& degrees);

// --- the simulated training step (docs/model.md) -----------------------------------------------------------------

// One forward or backward of one micro-batch through one model chunk, in the order a pipeline stage runs them.
struct PipelineTask {
  bool forward = true;
  int64_t micro_batch = 0;
  int64_t chunk = 0;  // virtual stage index on this device (0 unless interleaved)
  bool operator==(const PipelineTask&) const = default;
};

// The order stage `stage` of `stages` runs its tasks, as Megatron-LM's schedules do
// (megatron/core/pipeline_parallel/schedules.py): GPipe all forwards then all backwards; 1F1B min(p - s - 1, m)
// warm-up forwards, then one forward and one backward alternately, then the remaining backwards; interleaved
// 1F1B the same over m v chunk-tasks with (p - s - 1) 2 + (v - 1) p warm-up forwards, micro-batches taken in
// groups of p per chunk. REQUIRES (ValidateModel checks it): interleaved needs m % p == 0.
std::vector<PipelineTask> PipelineOrder(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                        int64_t micro_batches, int64_t virtual_stages);

struct ModelStepOptions {
  // Simulate one device per pipeline stage instead of every device. Exact for this workload: the devices of a
  // stage run the same program on the same shapes, no device is slower, and every collective is charged the
  // cost of its slowest group, so each member of a group starts and ends it at the same time
  // (tests compare both).
  bool reduced = true;
  // With more micro-batches m than m1 + m2 (p pipeline stages, m1 = max(2 p, 4) plus (m - that) mod p, m2 =
  // m1 + p), simulate m1 and m2 micro-batches and extend the line: after the pipeline has filled, each further
  // group of p micro-batches adds the same time (tests compare it with the whole simulation).
  bool extrapolate = true;
  // Fraction of a device's compute lost while its own communication is in flight (NCCL runs one CTA per channel
  // on an SM). < 0: the device's default (docs/model.md); 0: none.
  double comm_slowdown = -1;
  RooflineOptions roofline{};       // the user's compute / HBM efficiency knobs (default 1)
  // Stragglers: device id -> speed factor (> 0; 0.5 computes at half speed). Devices are then no longer
  // interchangeable: every device is simulated (`reduced` is ignored).
  std::map<int, double> speed_factors{};
  CollectiveOptions collectives{};
  // Pipeline transfers as Megatron-LM of 2022 ran them: every send and receive waits for its transfer
  // (batch_isend_irecv, wait, torch.cuda.synchronize), a send and the next receive as one exchange; the sender
  // resumes when the receiver has the data. false: eager sends, overlapped with the sender's compute (Megatron
  // core's overlapped p2p). docs/model.md, "Blocking pipeline transfers".
  bool blocking_p2p = false;
};

// The predicted step. Times are those of the device that finishes last (the first such in mesh order).
struct ModelStepTimes {
  double step_seconds = 0;
  double compute_seconds = 0;        // its compute stream busy (slowdown included)
  double exposed_comm_seconds = 0;   // its compute stream waiting for collectives
  double hidden_comm_seconds = 0;    // collectives it ran while computing (total - exposed, >= 0)
  double bubble_seconds = 0;         // its compute stream waiting for pipeline receives
  double model_flops = 0;            // ModelFlops::model (forward + backward, no recompute)
  double tokens_per_second = 0;
  double mfu = 0;                    // model_flops / (step_seconds x devices x matrix peak of the dtype)
  double comm_slowdown = 0;          // the fraction used
  std::map<std::string, double> compute_by_phase;   // forward, backward, recompute, head, optimizer
  std::map<std::string, double> comm_by_kind;       // tensor, data, pipeline, context, expert (run time)
  std::map<std::string, double> exposed_by_kind;    // the same, exposed
  int64_t simulated_devices = 0;
  int64_t timeline_ops = 0;
};

// Builds every simulated device's program for one optimizer step (forward, backward, recompute, pipeline
// transfers, gradient reduction, optimizer) and runs it on a StepTimeline (cost/timeline.h), each op priced by
// the ComputeModel and each collective by the CollectiveModel of the mesh's topology.
// Throws what ValidateModel throws, and Error(kFailedPrecondition) when the mesh has no topology.
ModelStepTimes PredictModelStep(const ModelConfig& config, const Mesh& mesh, const ModelStepOptions& options = {});

}  // namespace spmdsim

#endif  // SPMDSIM_WORKLOADS_MODEL_H_
