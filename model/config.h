// The `model` workload's configuration: a decoder-only transformer language model and the mesh axes each kind of
// parallelism runs over (docs/model.md), and ValidatedModel, the configuration checked once against a mesh.
//
// Everything downstream takes a ValidatedModel and trusts it: the analytic accounting (model/accounting.h), the
// simulated step (model/step.h), the data run (workloads/workloads.h RunModel) and plan (model/plan.h). Nothing
// re-validates.
//
// Example (GPT-3 175B as in Korthikanti et al. 2022, Table 5, on 64 A100s, TP 8 x PP 8 interleaved 3):
//   ModelConfig c = GptModel(12288, 96, 96, 4 * 12288);
//   c.global_batch = 64;
//   c.parallel = {.tensor_axes = {"tensor"}, .sequence_parallel = true, .pipeline_axes = {"pipe"},
//                 .schedule = PipelineSchedule::kInterleaved1F1B, .virtual_stages = 3};
//   c.recompute = Recompute::kSelective;
//   ValidatedModel m = ValidateModel(c, MakeDeviceMesh(a100_topology, {{"pipe", 8}, {"tensor", 8}}));
//   m.degrees().pipeline == 8, m.degrees().micro_batches == 64
//
// Errors: ValidateModel throws Error(kInvalidArgument) with one line naming the field and what would be valid
// ("heads = 96 is not divisible by the tensor-parallel degree 7 (axes tensor)"), Error(kNotFound) for an axis the
// mesh lacks (listing its axes).
// Thread safety: values; a ValidatedModel is immutable and may be shared between threads.
#ifndef SPMDSIM_MODEL_CONFIG_H_
#define SPMDSIM_MODEL_CONFIG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/enum_names.h"
#include "common/error.h"
#include "mesh/mesh.h"
#include "model/stack.h"

namespace spmdsim {

enum class Activation { kGelu, kSwiglu };
enum class Norm { kLayerNorm, kRmsNorm };
enum class PositionEmbedding { kRope, kLearned };
enum class PipelineSchedule { kGpipe, k1F1B, kInterleaved1F1B };
// How pipeline sends and receives run (docs/model.md, "Blocking pipeline transfers"): as the model's stack runs
// them (StackSpec::blocking_p2p), each waiting for its transfer (Megatron-LM of 2022, DeepSpeed's pipeline
// engine), or eager sends overlapped with the sender's compute (Megatron-Core).
enum class PipelineTransfers { kStack, kBlocking, kOverlapped };
// Megatron's activation recompute (Korthikanti et al. 2022): selective recomputes the attention core (the
// softmax and its dropout, whose memory grows with seq^2); full recomputes the whole layer from its input.
// kMinimal is MaxText's remat_policy "minimal" (jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims): the
// layer's input and the outputs of its projections are kept, the elementwise ops and the attention core are
// recomputed; the step prices it as no recompute (the elementwise work is small; the attention core of flash
// attention is recomputed in every setting).
enum class Recompute { kNone, kSelective, kFull, kMinimal };
// Megatron's --moe-router-load-balancing-type.
enum class MoeRouter { kAuxLoss, kSinkhorn, kNone };

// Each enum's names, as a scenario file writes them: the one table that reports print from and the scenario
// reader and writer use (NameOf / ParseName / NamesOf, common/enum_names.h).
inline constexpr EnumName<Activation> kActivationNames[] = {{Activation::kGelu, "gelu"},
                                                            {Activation::kSwiglu, "swiglu"}};
inline constexpr EnumName<Norm> kNormNames[] = {{Norm::kLayerNorm, "layernorm"}, {Norm::kRmsNorm, "rmsnorm"}};
inline constexpr EnumName<PositionEmbedding> kPositionEmbeddingNames[] = {{PositionEmbedding::kRope, "rope"},
                                                                          {PositionEmbedding::kLearned, "learned"}};
inline constexpr EnumName<PipelineSchedule> kPipelineScheduleNames[] = {
    {PipelineSchedule::kGpipe, "gpipe"}, {PipelineSchedule::k1F1B, "1f1b"},
    {PipelineSchedule::kInterleaved1F1B, "interleaved"}};
inline constexpr EnumName<PipelineTransfers> kPipelineTransfersNames[] = {
    {PipelineTransfers::kStack, "stack"}, {PipelineTransfers::kBlocking, "blocking"},
    {PipelineTransfers::kOverlapped, "overlapped"}};
inline constexpr EnumName<Recompute> kRecomputeNames[] = {{Recompute::kNone, "none"},
                                                          {Recompute::kSelective, "selective"},
                                                          {Recompute::kFull, "full"},
                                                          {Recompute::kMinimal, "minimal"}};
inline constexpr EnumName<MoeRouter> kMoeRouterNames[] = {
    {MoeRouter::kAuxLoss, "aux_loss"}, {MoeRouter::kSinkhorn, "sinkhorn"}, {MoeRouter::kNone, "none"}};

// NameOf over the tables above.
inline std::string_view ActivationName(Activation a) { return NameOf(kActivationNames, a); }
inline std::string_view NormName(Norm n) { return NameOf(kNormNames, n); }
inline std::string_view PositionEmbeddingName(PositionEmbedding p) { return NameOf(kPositionEmbeddingNames, p); }
inline std::string_view PipelineScheduleName(PipelineSchedule s) { return NameOf(kPipelineScheduleNames, s); }
inline std::string_view PipelineTransfersName(PipelineTransfers t) { return NameOf(kPipelineTransfersNames, t); }
inline std::string_view RecomputeName(Recompute r) { return NameOf(kRecomputeNames, r); }
inline std::string_view MoeRouterName(MoeRouter r) { return NameOf(kMoeRouterNames, r); }

// Mixture of experts (Megatron-Core MoE / Switch / GShard / DeepSeekMoE). Dense model when experts == 0.
// Layer l is MoE when l >= first_dense and (l + 1) % every == 0.
struct MoeConfig {
  int64_t experts = 0;           // routed experts per MoE layer (0: no MoE)
  int64_t top_k = 2;             // routed experts each token is sent to
  double capacity_factor = 1.0;  // tokens an expert may take = capacity_factor * tokens * top_k / experts (> 0)
  int64_t d_ff = 0;              // each routed expert's hidden size (0: the model's d_ff)
  int64_t every = 1;             // every k-th layer is MoE (layers k-1, 2k-1, ...; 1: all)
  int64_t first_dense = 0;       // the first k layers are dense (DeepSeek-V3: 3; Megatron's moe_layer_freq
                                 // [0]*k + [1]*...)
  // Shared experts beside the routed ones (DeepSeekMoE; Megatron's moe_shared_expert_intermediate_size): one
  // dense MLP of this hidden size (all shared experts together) that every token goes through; 0: none. It is
  // tensor-parallel like a dense MLP.
  int64_t shared_d_ff = 0;
  // Megatron's moe_shared_expert_overlap: the shared expert computes while the dispatch / combine all_to_all
  // is in flight (its tensor-parallel collectives on the second stream).
  bool shared_expert_overlap = false;
  MoeRouter router = MoeRouter::kAuxLoss;
};

// Multi-head latent attention (DeepSeek-V2 / V3; Megatron-Core's MLASelfAttention). On when kv_lora_rank > 0;
// `heads` then counts the attention heads and head_dim / kv_heads are unused. Per token: queries
// q = up_q(norm(down_q(x))) ([q_lora_rank] compressed; q_lora_rank 0: q = W_q x directly), keys and values
// from the compressed kv = norm(down_kv(x)) [kv_lora_rank] by up_kv, each head's q and k the concatenation of a
// `qk_head_dim` part and a decoupled rotary part of `qk_rope_head_dim` (k's rotary part shared by every head,
// computed by down_kv beside the compressed kv), values of `v_head_dim`.
struct MlaConfig {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_head_dim = 128;
  int64_t qk_rope_head_dim = 64;
  int64_t v_head_dim = 128;
  // Megatron's recompute_modules "mla_up_proj": the up projections and rotary embedding are recomputed in the
  // backward instead of keeping q, k, v (DeepSeek-V3 on H100 in NVIDIA's recipe).
  bool recompute_up_proj = false;
};

// Sliding-window attention (Mistral 7B; Gemma 2 / 3 alternate local and global layers): a windowed layer's query
// attends to at most `window` keys, itself and the window - 1 before it.
struct AttentionWindow {
  int64_t window = 0;        // 0: every layer attends to the whole causal prefix
  int64_t global_every = 0;  // every k-th layer (k-1, 2k-1, ...) stays global (Gemma 2: 2, Gemma 3: 6); 0: none
};

// Which mesh axes play which role. Degrees are the products of the axes' sizes. Every mesh axis larger than 1
// must have exactly one role (an axis without one would make its devices compute the same thing twice).
struct ModelParallelism {
  std::vector<std::string> data_axes{};      // data parallel (gradient reduction; ZeRO / FSDP shard over them)
  int zero_stage = 0;                        // 0 none, 1 optimizer states, 2 + gradients, 3 + parameters (= FSDP)
  // ZeRO-3 only. true: each layer's weights are gathered for its forward, freed, and gathered again for its
  // backward (PyTorch FSDP's FULL_SHARD, DeepSpeed ZeRO-3, MaxText's FSDP). false: kept from the forward to the
  // backward, one gather per micro-batch and the whole unsharded weights held meanwhile (PyTorch FSDP's
  // SHARD_GRAD_OP / fully_shard(reshard_after_forward=False); the Llama 3 paper's "do not reshard after forward").
  bool reshard_after_forward = true;
  // The data axes ZeRO / FSDP shards over (empty: all of them); the other data axes hold replicas (hybrid
  // sharding: PyTorch's HSDP, MaxText's data parallelism over DCN across slices). Gradients reduce-scatter over
  // these and all-reduce over the others.
  std::vector<std::string> zero_axes{};
  std::vector<std::string> tensor_axes{};    // Megatron tensor parallelism (heads and d_ff split)
  bool sequence_parallel = false;            // Megatron SP over tensor_axes (norms / dropout split on seq)
  std::vector<std::string> context_axes{};   // context parallelism: seq split, ring attention
  std::vector<std::string> pipeline_axes{};  // pipeline stages (layers split evenly unless set below)
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  PipelineTransfers pipeline_transfers = PipelineTransfers::kStack;
  int64_t virtual_stages = 1;                // model chunks per stage (interleaved only; > 1 there)
  // Uneven stages, as Megatron-Core splits them (PipelineLayerLayout, model/pipeline.h). Either the layers of the
  // first and / or last stage (--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers; -1:
  // unset; the other stages share the rest evenly), or the embedding and / or the loss counted as one layer
  // each of the even split, the stage holding it building one layer fewer (--account-for-embedding-in-pipeline-
  // split / --account-for-loss-in-pipeline-split: Llama 3 405B's 126 layers over 16 stages). Not both.
  int64_t first_stage_layers = -1;
  int64_t last_stage_layers = -1;
  bool embedding_in_split = false;
  bool loss_in_split = false;
  // Expert parallelism: experts split over these axes; data axes, optionally with every tensor axis too
  // (Megatron-Core's MoE parallel folding with expert_tensor_parallel_size 1: experts are then not split over
  // tensor ranks, each rank routing its sequence-parallel share of the tokens).
  std::vector<std::string> expert_axes{};
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
  MlaConfig mla{};
  AttentionWindow attention_window{};
  // Multi-token prediction (DeepSeek-V3; Megatron-Core's mtp_num_layers): this many extra modules on the last
  // pipeline stage, each norms the hidden state and the embedding of the next token, projects the two [2h -> h],
  // runs one transformer layer shaped like the model's last one and the shared output head and loss.
  int64_t mtp_layers = 0;
  ModelParallelism parallel{};
  Recompute recompute = Recompute::kNone;
  // The software stack it is trained with (model/stack.h; kAuto: DefaultStack of the mesh's topology). Prices
  // the step's kernels, launches and some collectives; the data run ignores it.
  SoftwareStack stack = SoftwareStack::kAuto;
  // The data run (non-abstract; docs/model.md, "Running with data"): tokens and weights from `seed`, and the
  // numpy.isclose tolerance of the loss and every weight gradient against the one-device run.
  uint64_t seed = 0;
  double rtol = 1e-4, atol = 1e-6;
  bool check = true;

  int64_t effective_kv_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t effective_head_dim() const { return head_dim > 0 ? head_dim : d_model / heads; }
  int64_t expert_d_ff() const { return moe.d_ff > 0 ? moe.d_ff : d_ff; }
  bool is_moe_layer(int64_t layer) const {
    return moe.experts > 0 && layer >= moe.first_dense && (layer + 1) % moe.every == 0;
  }
  bool is_mla() const { return mla.kv_lora_rank > 0; }
  // Whether the expert axes include the tensor axes (routed experts not split over tensor ranks).
  bool experts_over_tensor() const {
    for (const std::string& axis : parallel.expert_axes)
      for (const std::string& tensor : parallel.tensor_axes)
        if (axis == tensor) return true;
    return false;
  }
  // Whether layer `layer` attends within the sliding window (not for MTP layers: those are global).
  bool is_windowed_layer(int64_t layer) const {
    return attention_window.window > 0 &&
           (attention_window.global_every == 0 || (layer + 1) % attention_window.global_every != 0);
  }
};

// Shapes of two published families, every other field at its default (callers set batch, parallelism, ...):
// GPT as Megatron-LM trains it (MHA, GeLU, LayerNorm, learned positions, tied embeddings, vocab 51200, seq 2048;
// Brown et al. 2020, Korthikanti et al. 2022) and a Llama-style decoder (GQA, SwiGLU, RMSNorm, RoPE, vocab 32000;
// Touvron et al. 2023).
ModelConfig GptModel(int64_t d_model, int64_t layers, int64_t heads, int64_t d_ff);
ModelConfig LlamaModel(int64_t d_model, int64_t layers, int64_t heads, int64_t kv_heads, int64_t d_ff, int64_t seq);
// DeepSeek-V3 671B as published (deepseek-ai/DeepSeek-V3 config.json; technical report, section 2; NVIDIA NeMo's
// DeepSeekV3Config): 61 layers of h 7168, MLA (128 heads, q_lora 1536, kv_lora 512, qk 128 + rope 64, v 128),
// the first 3 dense (d_ff 18432), then 256 routed experts (top-8, d_ff 2048) beside 1 shared (2048), SwiGLU,
// RMSNorm, vocab 129280 untied, seq 4096, 1 MTP module; the shared expert overlapping the all_to_all.
ModelConfig DeepSeekV3Model();

// The degrees of each role on a mesh (products of the axes' sizes; 1 for a role without axes).
struct ParallelDegrees {
  int64_t data = 1, tensor = 1, context = 1, pipeline = 1, expert = 1;
  int64_t zero = 1;              // the data degree ZeRO shards over: zero_axes' product (data when none named)
  // Tensor ranks each routed expert is split over: `tensor`, or 1 when the expert axes include the tensor axes
  // (Megatron's expert_tensor_parallel_size).
  int64_t expert_tensor = 1;
  // Ranks holding the same shard of a routed expert (its gradients are reduced over them): the devices of a
  // stage, data x context x tensor, over expert x expert_tensor.
  int64_t expert_data = 1;
  int64_t micro_batches = 1;     // per optimizer step per data-parallel rank: global_batch / (micro_batch * data)
};

// A ModelConfig checked against a mesh, with the degrees it implies. Made only by ValidateModel. Copies share the
// mesh.
class ValidatedModel {
 public:
  const ModelConfig& config() const { return config_; }
  const Mesh& mesh() const { return *mesh_; }
  const std::shared_ptr<const Mesh>& shared_mesh() const { return mesh_; }
  const ParallelDegrees& degrees() const { return degrees_; }

  // The same model with `micro_batches` micro-batches per data-parallel rank (global_batch changed to match);
  // everything else as validated. REQUIRES: micro_batches >= 1, a multiple of the pipeline degree when the
  // schedule is interleaved (what ValidateModel would check).
  ValidatedModel WithMicroBatches(int64_t micro_batches) const;

 private:
  friend ValidatedModel ValidateModel(ModelConfig config, std::shared_ptr<const Mesh> mesh);
  ValidatedModel(ModelConfig config, std::shared_ptr<const Mesh> mesh, ParallelDegrees degrees)
      : config_(std::move(config)), mesh_(std::move(mesh)), degrees_(degrees) {}

  ModelConfig config_;
  std::shared_ptr<const Mesh> mesh_;
  ParallelDegrees degrees_;
};

// An invalid model: an Error whose field() is the key path of the value at fault, as a scenario file spells it
// ("heads", "global_batch", "parallel.tensor_axes", "moe.experts"), so that a reader can point at its line.
class ModelConfigError : public Error {
 public:
  ModelConfigError(ErrorCode code, std::string message, std::string field)
      : Error(code, std::move(message)), field_(std::move(field)) {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

// Checks every field and its fit with the mesh (REQUIRES: mesh not null). Throws ModelConfigError
// (kInvalidArgument) with one line naming the field (and kNotFound for an axis the mesh lacks, listing its axes).
ValidatedModel ValidateModel(ModelConfig config, std::shared_ptr<const Mesh> mesh);
// Same, with a copy of `mesh`.
ValidatedModel ValidateModel(ModelConfig config, const Mesh& mesh);

// The stack the model is priced with (ChooseStack over its `stack` and degrees) and why. REQUIRES: the mesh has a
// topology.
StackChoice ModelStackChoice(const ValidatedModel& model);

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_CONFIG_H_
