// ValidateModel (model/config.h).
#include "model/config.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/user_text.h"

namespace spmdsim {

namespace {

// Throws ModelConfigError naming `field` (the key path of the value at fault, for the scenario's line:col).
template <typename... Args>
[[noreturn]] void Invalid(const ModelConfig& c, std::string_view field, fmt::format_string<Args...> format,
                          Args&&... args) {
  throw ModelConfigError(ErrorCode::kInvalidArgument,
                         fmt::format("model '{}': {}", c.name, fmt::format(format, std::forward<Args>(args)...)),
                         std::string(field));
}

// A mesh axis a role names that the mesh lacks (kNotFound), with a did-you-mean and the mesh's axes.
[[noreturn]] void MissingAxis(const ModelConfig& c, const Mesh& mesh, std::string_view role, const std::string& axis) {
  throw ModelConfigError(ErrorCode::kNotFound,
                         fmt::format("model '{}': {} names mesh axis '{}', which the mesh lacks{}; its axes: {}",
                                     c.name, role, axis, DidYouMeanSuffix(axis, mesh.axis_names()),
                                     fmt::join(mesh.axis_names(), ", ")),
                         fmt::format("parallel.{}", role));
}

void RequirePositive(const ModelConfig& c, std::string_view field, int64_t value) {
  if (value <= 0) Invalid(c, field, "{} must be a positive integer, got {}", field, value);
}

// Degree of one role; its axes must exist and not repeat another role's.
int64_t RoleDegree(const ModelConfig& c, const Mesh& mesh, std::string_view role, const std::vector<std::string>& axes,
                   std::set<std::string>* used) {
  for (const std::string& axis : axes) {
    if (!mesh.HasAxis(axis)) MissingAxis(c, mesh, role, axis);
    if (!used->insert(axis).second)
      Invalid(c, fmt::format("parallel.{}", role), "{}: mesh axis '{}' already has another role", role, axis);
  }
  return mesh.AxesSize(axes);
}

std::string AxesText(const std::vector<std::string>& axes) { return fmt::format("({})", fmt::join(axes, ", ")); }

void ValidateShape(const ModelConfig& c) {
  RequirePositive(c, "vocab", c.vocab);
  RequirePositive(c, "d_model", c.d_model);
  RequirePositive(c, "layers", c.layers);
  RequirePositive(c, "heads", c.heads);
  RequirePositive(c, "d_ff", c.d_ff);
  RequirePositive(c, "seq", c.seq);
  RequirePositive(c, "global_batch", c.global_batch);
  RequirePositive(c, "micro_batch", c.micro_batch);
  if (c.kv_heads < 0) Invalid(c, "kv_heads", "kv_heads must be >= 0 (0: = heads), got {}", c.kv_heads);
  if (c.heads % c.effective_kv_heads() != 0)
    Invalid(c, "kv_heads", "heads = {} is not divisible by kv_heads = {} (GQA groups must be equal)", c.heads,
            c.kv_heads);
  if (c.head_dim < 0) Invalid(c, "head_dim", "head_dim must be >= 0 (0: d_model / heads), got {}", c.head_dim);
  if (c.head_dim == 0 && !c.is_mla() && c.d_model % c.heads != 0)
    Invalid(c, "heads", "heads = {} does not divide d_model = {}; give head_dim explicitly", c.heads, c.d_model);
  if (c.dtype != DType::kBF16 && c.dtype != DType::kF16 && c.dtype != DType::kF8E4M3FN && c.dtype != DType::kF8E5M2)
    Invalid(c, "dtype", "dtype must be a compute dtype: bfloat16, float16, float8_e4m3fn, float8_e5m2 (got {})",
            DTypeName(c.dtype));
  const MoeConfig& m = c.moe;
  if (m.experts < 0) Invalid(c, "moe.experts", "moe.experts must be >= 0 (0: dense), got {}", m.experts);
  if (m.experts > 0) {
    if (m.top_k < 1 || m.top_k > m.experts)
      Invalid(c, "moe.top_k", "moe.top_k must be in [1, experts = {}], got {}", m.experts, m.top_k);
    if (!(m.capacity_factor > 0))
      Invalid(c, "moe.capacity_factor", "moe.capacity_factor must be > 0, got {}", m.capacity_factor);
    if (m.d_ff < 0) Invalid(c, "moe.d_ff", "moe.d_ff must be >= 0 (0: the model's d_ff), got {}", m.d_ff);
    if (m.every < 1 || m.every > c.layers)
      Invalid(c, "moe.every", "moe.every must be in [1, layers = {}], got {}", c.layers, m.every);
    if (m.first_dense < 0 || m.first_dense > c.layers)
      Invalid(c, "moe.first_dense", "moe.first_dense must be in [0, layers = {}], got {}", c.layers, m.first_dense);
    if (m.shared_d_ff < 0)
      Invalid(c, "moe.shared_d_ff", "moe.shared_d_ff must be >= 0 (0: no shared expert), got {}", m.shared_d_ff);
  }
  if (c.mtp_layers < 0) Invalid(c, "mtp_layers", "mtp_layers must be >= 0, got {}", c.mtp_layers);
  const AttentionWindow& w = c.attention_window;
  if (w.window < 0)
    Invalid(c, "attention_window.window", "attention_window.window must be >= 0 (0: no sliding window), got {}",
            w.window);
  if (w.global_every < 0 || w.global_every > c.layers)
    Invalid(c, "attention_window.global_every", "attention_window.global_every must be in [0, layers = {}], got {}",
            c.layers, w.global_every);
  if (w.global_every > 0 && w.window == 0)
    Invalid(c, "attention_window.global_every", "attention_window.global_every needs a window > 0");
}

// Multi-head latent attention: its widths, and the fields it replaces.
void ValidateMla(const ModelConfig& c) {
  const MlaConfig& a = c.mla;
  if (a.kv_lora_rank < 0)
    Invalid(c, "mla.kv_lora_rank", "mla.kv_lora_rank must be >= 0 (0: no MLA), got {}", a.kv_lora_rank);
  if (!c.is_mla()) return;
  if (a.q_lora_rank < 0)
    Invalid(c, "mla.q_lora_rank", "mla.q_lora_rank must be >= 0 (0: queries not compressed), got {}", a.q_lora_rank);
  if (a.qk_head_dim < 1) Invalid(c, "mla.qk_head_dim", "mla.qk_head_dim must be >= 1, got {}", a.qk_head_dim);
  if (a.v_head_dim < 1) Invalid(c, "mla.v_head_dim", "mla.v_head_dim must be >= 1, got {}", a.v_head_dim);
  if (a.qk_rope_head_dim < 2 || a.qk_rope_head_dim % 2 != 0)
    Invalid(c, "mla.qk_rope_head_dim", "mla.qk_rope_head_dim must be even and >= 2 (the rotated halves), got {}",
            a.qk_rope_head_dim);
  if (c.position != PositionEmbedding::kRope)
    Invalid(c, "position", "mla needs position: rope (its decoupled rotary part)");
  if (c.kv_heads != 0 || c.head_dim != 0)
    Invalid(c, c.kv_heads != 0 ? "kv_heads" : "head_dim",
            "kv_heads and head_dim do not apply with mla (its widths are mla.qk_head_dim, qk_rope_head_dim, "
            "v_head_dim); leave them unset");
}

bool Contains(const std::vector<std::string>& axes, const std::string& axis) {
  return std::find(axes.begin(), axes.end(), axis) != axes.end();
}

// The roles' degrees; every mesh axis larger than 1 has exactly one role.
void ValidateRoles(const ModelConfig& c, const Mesh& mesh, ParallelDegrees* d) {
  const ModelParallelism& p = c.parallel;
  std::set<std::string> used;
  d->data = RoleDegree(c, mesh, "data_axes", p.data_axes, &used);
  d->tensor = RoleDegree(c, mesh, "tensor_axes", p.tensor_axes, &used);
  d->context = RoleDegree(c, mesh, "context_axes", p.context_axes, &used);
  d->pipeline = RoleDegree(c, mesh, "pipeline_axes", p.pipeline_axes, &used);
  std::vector<std::string> unassigned;
  for (const std::string& axis : mesh.axis_names())
    if (mesh.AxisSize(axis) > 1 && used.count(axis) == 0) unassigned.push_back(axis);
  if (!unassigned.empty())
    Invalid(c, "parallel",
            "mesh axes {} have no role; give each axis larger than 1 to data_axes, tensor_axes, context_axes or "
            "pipeline_axes",
            AxesText(unassigned));
  if (p.zero_stage < 0 || p.zero_stage > 3)
    Invalid(c, "parallel.zero_stage", "zero_stage must be 0, 1, 2 or 3 (3 = FSDP), got {}", p.zero_stage);
  if (!p.reshard_after_forward && p.zero_stage != 3)
    Invalid(c, "parallel.reshard_after_forward",
            "reshard_after_forward: false applies to zero_stage 3 (FSDP) only; zero_stage is {}", p.zero_stage);
  for (const std::string& axis : p.zero_axes) {
    if (!Contains(p.data_axes, axis))
      Invalid(c, "parallel.zero_axes",
              "zero axis '{}' must also be a data axis (ZeRO shards over data-parallel ranks); data_axes: {}", axis,
              AxesText(p.data_axes));
  }
  d->zero = p.zero_axes.empty() ? d->data : mesh.AxesSize(p.zero_axes);
  if (p.sequence_parallel && p.tensor_axes.empty())
    Invalid(c, "parallel.sequence_parallel", "sequence_parallel needs tensor_axes");
}

// Expert parallelism: data axes, optionally with every tensor axis (MoE parallel folding).
void ValidateExperts(const ModelConfig& c, const Mesh& mesh, ParallelDegrees* d) {
  const ModelParallelism& p = c.parallel;
  int tensor_axes_in = 0;
  for (const std::string& axis : p.expert_axes) {
    if (!mesh.HasAxis(axis)) MissingAxis(c, mesh, "expert_axes", axis);
    if (Contains(p.tensor_axes, axis)) {
      ++tensor_axes_in;
    } else if (!Contains(p.data_axes, axis)) {
      Invalid(c, "parallel.expert_axes",
              "expert axis '{}' must be a data axis (experts are split over data-parallel ranks, as in Megatron) "
              "or a tensor axis (with all of them: expert tensor parallelism 1); data_axes: {}, tensor_axes: {}",
              axis, AxesText(p.data_axes), AxesText(p.tensor_axes));
    }
  }
  const bool folded = tensor_axes_in > 0;
  if (folded && tensor_axes_in != static_cast<int>(p.tensor_axes.size()))
    Invalid(c, "parallel.expert_axes", "expert_axes take all the tensor axes {} or none of them",
            AxesText(p.tensor_axes));
  if (folded && d->tensor > 1 && !p.sequence_parallel)
    Invalid(c, "parallel.sequence_parallel",
            "experts over the tensor axes need sequence_parallel (each tensor rank routes its own tokens)");
  d->expert = mesh.AxesSize(p.expert_axes);
  d->expert_tensor = folded ? 1 : d->tensor;
  d->expert_data = d->data * d->context * d->tensor / (d->expert * d->expert_tensor);
  if (!p.expert_axes.empty() && c.moe.experts == 0)
    Invalid(c, "parallel.expert_axes", "expert_axes need moe.experts > 0");
  if (c.moe.experts > 0 && c.moe.experts % d->expert != 0)
    Invalid(c, "moe.experts", "moe.experts = {} is not divisible by the expert-parallel degree {} (axes {})",
            c.moe.experts, d->expert, AxesText(p.expert_axes));
  if (c.moe.experts > 0 && c.expert_d_ff() % d->expert_tensor != 0)
    Invalid(c, "moe.d_ff", "moe.d_ff = {} is not divisible by the tensor-parallel degree {}", c.expert_d_ff(),
            d->expert_tensor);
  if (c.moe.experts > 0 && c.moe.shared_d_ff % d->tensor != 0)
    Invalid(c, "moe.shared_d_ff", "moe.shared_d_ff = {} is not divisible by the tensor-parallel degree {}",
            c.moe.shared_d_ff, d->tensor);
}

// What the tensor and context split need of the widths and the sequence.
void ValidateSplits(const ModelConfig& c, const ParallelDegrees& d) {
  const ModelParallelism& p = c.parallel;
  const int64_t t = d.tensor;
  if (c.heads % t != 0)
    Invalid(c, "heads", "heads = {} is not divisible by the tensor-parallel degree {} (axes {})", c.heads, t,
            AxesText(p.tensor_axes));
  if (c.is_mla()) {
    // Megatron-Core's MLA (0.12) splits the down projections' outputs over tensor ranks too.
    if (c.mla.q_lora_rank % t != 0)
      Invalid(c, "mla.q_lora_rank", "mla.q_lora_rank = {} is not divisible by the tensor-parallel degree {}",
              c.mla.q_lora_rank, t);
    if ((c.mla.kv_lora_rank + c.mla.qk_rope_head_dim) % t != 0)
      Invalid(c, "mla.kv_lora_rank",
              "mla.kv_lora_rank + mla.qk_rope_head_dim = {} is not divisible by the tensor-parallel degree {}",
              c.mla.kv_lora_rank + c.mla.qk_rope_head_dim, t);
  } else {
    const int64_t kv = c.effective_kv_heads();
    if (kv % t != 0 && t % kv != 0)
      Invalid(c, "kv_heads", "kv_heads = {} and the tensor-parallel degree {} must divide one another", kv, t);
  }
  if (c.d_ff % t != 0) Invalid(c, "d_ff", "d_ff = {} is not divisible by the tensor-parallel degree {}", c.d_ff, t);
  const int64_t seq_split = (p.sequence_parallel ? t : 1) * (d.context > 1 ? 2 * d.context : 1);
  if (c.seq % seq_split != 0)
    Invalid(c, "seq",
            "seq = {} is not divisible by {} ({}2 x context degree {}: ring attention's load-balanced chunks)", c.seq,
            seq_split, p.sequence_parallel ? fmt::format("tensor degree {} (sequence parallel) x ", t) : "", d.context);
  if (c.attention_window.window > 0 && d.context > 1)
    Invalid(c, "attention_window.window",
            "attention_window with context_axes is not modelled (ring attention over a sliding window); drop "
            "one of them");
}

// The layers of each stage, as Megatron-Core allows them (PipelineLayerLayout).
void ValidateLayout(const ModelConfig& c, int64_t stages) {
  const ModelParallelism& p = c.parallel;
  const int64_t v = p.virtual_stages, first = p.first_stage_layers, last = p.last_stage_layers;
  const bool uneven = first >= 0 || last >= 0, accounted = p.embedding_in_split || p.loss_in_split;
  if (first < -1 || last < -1)
    Invalid(c, first < -1 ? "parallel.first_stage_layers" : "parallel.last_stage_layers",
            "first_stage_layers / last_stage_layers must be >= 0 (unset: -1), got {} / {}", first, last);
  if (uneven && accounted)
    Invalid(c, "parallel.first_stage_layers",
            "give first_stage_layers / last_stage_layers or account_for_embedding / account_for_loss, not both "
            "(as Megatron-Core)");
  if ((uneven || accounted) && stages < 2)
    Invalid(c, "parallel.pipeline_axes", "uneven pipeline stages need pipeline_axes of 2 stages or more");
  if (uneven) {
    const int64_t given = (first >= 0 ? 1 : 0) + (last >= 0 ? 1 : 0);
    const int64_t middle_stages = stages - given;
    const int64_t middle = c.layers - std::max<int64_t>(first, 0) - std::max<int64_t>(last, 0);
    if (middle < 0 || (middle_stages == 0 && middle != 0) || (middle_stages > 0 && middle % middle_stages != 0))
      Invalid(c, "layers",
              "layers = {} minus first_stage_layers and last_stage_layers leaves {} for the other {} stages, "
              "which must share them evenly",
              c.layers, middle, middle_stages);
    const int64_t per_middle = middle_stages > 0 ? middle / middle_stages : 0;
    if (std::max<int64_t>(first, 0) % v != 0 || std::max<int64_t>(last, 0) % v != 0 || per_middle % v != 0)
      Invalid(c, "parallel.virtual_stages",
              "every stage's layers (first {}, middle {}, last {}) must be divisible by virtual_stages = {}", first,
              per_middle, last, v);
    return;
  }
  const int64_t slots = c.layers + (p.embedding_in_split ? 1 : 0) + (p.loss_in_split ? 1 : 0);
  if (slots % (stages * v) != 0)
    Invalid(c, "layers", "layers = {}{} is not divisible by pipeline stages x virtual stages = {} x {}", c.layers,
            accounted ? fmt::format(" + {} (embedding / loss counted as layers) = {}", slots - c.layers, slots) : "",
            stages, v);
}

void ValidatePipeline(const ModelConfig& c, ParallelDegrees* d) {
  const ModelParallelism& p = c.parallel;
  if (p.virtual_stages < 1)
    Invalid(c, "parallel.virtual_stages", "virtual_stages must be >= 1, got {}", p.virtual_stages);
  if (p.schedule != PipelineSchedule::kInterleaved1F1B && p.virtual_stages != 1)
    Invalid(c, "parallel.virtual_stages", "virtual_stages = {} needs schedule: interleaved", p.virtual_stages);
  if (p.schedule == PipelineSchedule::kInterleaved1F1B && p.virtual_stages < 2)
    Invalid(c, "parallel.schedule", "schedule interleaved needs virtual_stages >= 2 (with 1 it is 1f1b)");
  ValidateLayout(c, d->pipeline);
  if (c.global_batch % (c.micro_batch * d->data) != 0)
    Invalid(c, "global_batch", "global_batch = {} is not divisible by micro_batch x data-parallel degree = {} x {}",
            c.global_batch, c.micro_batch, d->data);
  d->micro_batches = c.global_batch / (c.micro_batch * d->data);
  if (p.schedule == PipelineSchedule::kInterleaved1F1B && d->micro_batches % d->pipeline != 0)
    Invalid(c, "global_batch",
            "the interleaved schedule needs the micro-batches per step ({}) to be a multiple of the pipeline "
            "stages ({}), as Megatron-LM requires",
            d->micro_batches, d->pipeline);
}

void ValidateParallel(const ModelConfig& c, const Mesh& mesh, ParallelDegrees* d) {
  ValidateRoles(c, mesh, d);
  ValidateExperts(c, mesh, d);
  ValidateSplits(c, *d);
  ValidatePipeline(c, d);
}

}  // namespace

ValidatedModel ValidateModel(ModelConfig config, std::shared_ptr<const Mesh> mesh) {
  SPMDSIM_CHECK(mesh != nullptr, "ValidateModel needs a mesh");
  ValidateShape(config);
  ValidateMla(config);
  ParallelDegrees degrees;
  ValidateParallel(config, *mesh, &degrees);
  return ValidatedModel(std::move(config), std::move(mesh), degrees);
}

ValidatedModel ValidateModel(ModelConfig config, const Mesh& mesh) {
  return ValidateModel(std::move(config), std::make_shared<const Mesh>(mesh));
}

ValidatedModel ValidatedModel::WithMicroBatches(int64_t micro_batches) const {
  SPMDSIM_CHECK(micro_batches >= 1, "micro-batches must be >= 1");
  SPMDSIM_CHECK(config_.parallel.schedule != PipelineSchedule::kInterleaved1F1B ||
                    micro_batches % degrees_.pipeline == 0,
                "the interleaved schedule needs micro-batches divisible by the stages");
  ValidatedModel out = *this;
  out.config_.global_batch = micro_batches * config_.micro_batch * degrees_.data;
  out.degrees_.micro_batches = micro_batches;
  return out;
}

ModelConfig GptModel(int64_t d_model, int64_t layers, int64_t heads, int64_t d_ff) {
  ModelConfig c;
  c.vocab = 51200;
  c.d_model = d_model;
  c.layers = layers;
  c.heads = heads;
  c.d_ff = d_ff;
  c.seq = 2048;
  c.activation = Activation::kGelu;
  c.norm = Norm::kLayerNorm;
  c.position = PositionEmbedding::kLearned;
  c.tied_embeddings = true;
  return c;
}

ModelConfig LlamaModel(int64_t d_model, int64_t layers, int64_t heads, int64_t kv_heads, int64_t d_ff, int64_t seq) {
  ModelConfig c;
  c.vocab = 32000;
  c.d_model = d_model;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.d_ff = d_ff;
  c.seq = seq;
  c.activation = Activation::kSwiglu;
  c.norm = Norm::kRmsNorm;
  c.position = PositionEmbedding::kRope;
  return c;
}

ModelConfig DeepSeekV3Model() {
  ModelConfig c = LlamaModel(7168, 61, 128, 0, 18432, 4096);
  c.name = "deepseek-v3";
  c.vocab = 129280;
  c.mla = {.q_lora_rank = 1536, .kv_lora_rank = 512, .qk_head_dim = 128, .qk_rope_head_dim = 64, .v_head_dim = 128};
  c.moe = {.experts = 256, .top_k = 8, .capacity_factor = 1.0, .d_ff = 2048, .every = 1, .first_dense = 3,
           .shared_d_ff = 2048, .shared_expert_overlap = true};
  c.mtp_layers = 1;
  return c;
}

StackChoice ModelStackChoice(const ValidatedModel& model) {
  SPMDSIM_CHECK(model.mesh().topology() != nullptr, "choosing a stack needs a topology");
  const ParallelDegrees& d = model.degrees();
  const StackParallelism p{model.config().parallel.zero_stage, d.zero * d.context, d.tensor, d.pipeline};
  return ChooseStack(model.config().stack, *model.mesh().topology(), p);
}

}  // namespace spmdsim
