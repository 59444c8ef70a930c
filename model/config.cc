// ValidateModel and the names of the model's enums (model/config.h).
#include "model/config.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/user_text.h"

namespace spmdsim {

std::string_view ActivationName(Activation a) { return a == Activation::kGelu ? "gelu" : "swiglu"; }
std::string_view NormName(Norm n) { return n == Norm::kLayerNorm ? "layernorm" : "rmsnorm"; }
std::string_view PositionEmbeddingName(PositionEmbedding p) { return p == PositionEmbedding::kRope ? "rope" : "learned"; }
std::string_view PipelineScheduleName(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGpipe: return "gpipe";
    case PipelineSchedule::k1F1B: return "1f1b";
    case PipelineSchedule::kInterleaved1F1B: return "interleaved";
  }
  return "?";
}
std::string_view RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}
std::string_view MoeRouterName(MoeRouter r) {
  switch (r) {
    case MoeRouter::kAuxLoss: return "aux_loss";
    case MoeRouter::kSinkhorn: return "sinkhorn";
    case MoeRouter::kNone: return "none";
  }
  return "?";
}

namespace {

// Throws ModelConfigError naming `field` (the key path of the value at fault, for the scenario's line:col).
template <typename... Args>
[[noreturn]] void Invalid(const ModelConfig& c, std::string_view field, fmt::format_string<Args...> format,
                          Args&&... args) {
  throw ModelConfigError(ErrorCode::kInvalidArgument,
                         fmt::format("model '{}': {}", c.name, fmt::format(format, std::forward<Args>(args)...)),
                         std::string(field));
}

void RequirePositive(const ModelConfig& c, std::string_view field, int64_t value) {
  if (value <= 0) Invalid(c, field, "{} must be a positive integer, got {}", field, value);
}

// Degree of one role; its axes must exist and not repeat another role's.
int64_t RoleDegree(const ModelConfig& c, const Mesh& mesh, std::string_view role, const std::vector<std::string>& axes,
                   std::set<std::string>* used) {
  for (const std::string& axis : axes) {
    if (!mesh.HasAxis(axis)) {
      throw ModelConfigError(ErrorCode::kNotFound,
                             fmt::format("model '{}': {} names mesh axis '{}', which the mesh lacks{}; its axes: {}",
                                         c.name, role, axis, DidYouMeanSuffix(axis, mesh.axis_names()),
                                         fmt::join(mesh.axis_names(), ", ")),
                             fmt::format("parallel.{}", role));
    }
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
    Invalid(c, "kv_heads", "heads = {} is not divisible by kv_heads = {} (GQA groups must be equal)", c.heads, c.kv_heads);
  if (c.head_dim < 0) Invalid(c, "head_dim", "head_dim must be >= 0 (0: d_model / heads), got {}", c.head_dim);
  if (c.head_dim == 0 && c.d_model % c.heads != 0)
    Invalid(c, "heads", "heads = {} does not divide d_model = {}; give head_dim explicitly", c.heads, c.d_model);
  if (c.dtype != DType::kBF16 && c.dtype != DType::kF16 && c.dtype != DType::kF8E4M3FN && c.dtype != DType::kF8E5M2)
    Invalid(c, "dtype", "dtype must be a compute dtype: bfloat16, float16, float8_e4m3fn, float8_e5m2 (got {})",
            DTypeName(c.dtype));
  const MoeConfig& m = c.moe;
  if (m.experts < 0) Invalid(c, "moe.experts", "moe.experts must be >= 0 (0: dense), got {}", m.experts);
  if (m.experts > 0) {
    if (m.top_k < 1 || m.top_k > m.experts)
      Invalid(c, "moe.top_k", "moe.top_k must be in [1, experts = {}], got {}", m.experts, m.top_k);
    if (!(m.capacity_factor > 0)) Invalid(c, "moe.capacity_factor", "moe.capacity_factor must be > 0, got {}", m.capacity_factor);
    if (m.d_ff < 0) Invalid(c, "moe.d_ff", "moe.d_ff must be >= 0 (0: the model's d_ff), got {}", m.d_ff);
    if (m.every < 1 || m.every > c.layers)
      Invalid(c, "moe.every", "moe.every must be in [1, layers = {}], got {}", c.layers, m.every);
  }
}

void ValidateParallel(const ModelConfig& c, const Mesh& mesh, ParallelDegrees* d) {
  const ModelParallelism& p = c.parallel;
  std::set<std::string> used;
  d->data = RoleDegree(c, mesh, "data_axes", p.data_axes, &used);
  d->tensor = RoleDegree(c, mesh, "tensor_axes", p.tensor_axes, &used);
  d->context = RoleDegree(c, mesh, "context_axes", p.context_axes, &used);
  d->pipeline = RoleDegree(c, mesh, "pipeline_axes", p.pipeline_axes, &used);
  for (const std::string& axis : p.expert_axes) {
    if (!mesh.HasAxis(axis))
      throw ModelConfigError(ErrorCode::kNotFound,
                             fmt::format("model '{}': expert_axes names mesh axis '{}', which the mesh lacks{}; its "
                                         "axes: {}", c.name, axis, DidYouMeanSuffix(axis, mesh.axis_names()),
                                         fmt::join(mesh.axis_names(), ", ")),
                             "parallel.expert_axes");
    if (std::find(p.data_axes.begin(), p.data_axes.end(), axis) == p.data_axes.end())
      Invalid(c, "parallel.expert_axes", "expert axis '{}' must also be a data axis (experts are split over data-parallel ranks, as in "
              "Megatron); data_axes: {}", axis, AxesText(p.data_axes));
  }
  d->expert = mesh.AxesSize(p.expert_axes);
  std::vector<std::string> unassigned;
  for (const std::string& axis : mesh.axis_names())
    if (mesh.AxisSize(axis) > 1 && used.count(axis) == 0) unassigned.push_back(axis);
  if (!unassigned.empty())
    Invalid(c, "parallel", "mesh axes {} have no role; give each axis larger than 1 to data_axes, tensor_axes, context_axes or "
            "pipeline_axes", AxesText(unassigned));
  if (p.zero_stage < 0 || p.zero_stage > 3) Invalid(c, "parallel.zero_stage", "zero_stage must be 0, 1, 2 or 3 (3 = FSDP), got {}", p.zero_stage);
  const int64_t t = d->tensor;
  if (p.sequence_parallel && p.tensor_axes.empty()) Invalid(c, "parallel.sequence_parallel", "sequence_parallel needs tensor_axes");
  if (c.heads % t != 0)
    Invalid(c, "heads", "heads = {} is not divisible by the tensor-parallel degree {} (axes {})", c.heads, t, AxesText(p.tensor_axes));
  const int64_t kv = c.effective_kv_heads();
  if (kv % t != 0 && t % kv != 0)
    Invalid(c, "kv_heads", "kv_heads = {} and the tensor-parallel degree {} must divide one another", kv, t);
  if (c.d_ff % t != 0) Invalid(c, "d_ff", "d_ff = {} is not divisible by the tensor-parallel degree {}", c.d_ff, t);
  if (c.moe.experts > 0 && c.expert_d_ff() % t != 0)
    Invalid(c, "moe.d_ff", "moe.d_ff = {} is not divisible by the tensor-parallel degree {}", c.expert_d_ff(), t);
  const int64_t seq_split = (p.sequence_parallel ? t : 1) * (d->context > 1 ? 2 * d->context : 1);
  if (c.seq % seq_split != 0)
    Invalid(c, "seq", "seq = {} is not divisible by {} ({}2 x context degree {}: ring attention's load-balanced chunks)",
            c.seq, seq_split, p.sequence_parallel ? fmt::format("tensor degree {} (sequence parallel) x ", t) : "",
            d->context);
  if (p.virtual_stages < 1) Invalid(c, "parallel.virtual_stages", "virtual_stages must be >= 1, got {}", p.virtual_stages);
  if (p.schedule != PipelineSchedule::kInterleaved1F1B && p.virtual_stages != 1)
    Invalid(c, "parallel.virtual_stages", "virtual_stages = {} needs schedule: interleaved", p.virtual_stages);
  if (p.schedule == PipelineSchedule::kInterleaved1F1B && p.virtual_stages < 2)
    Invalid(c, "parallel.schedule", "schedule interleaved needs virtual_stages >= 2 (with 1 it is 1f1b)");
  if (c.layers % (d->pipeline * p.virtual_stages) != 0)
    Invalid(c, "layers", "layers = {} is not divisible by pipeline stages x virtual stages = {} x {}", c.layers, d->pipeline,
            p.virtual_stages);
  if (c.global_batch % (c.micro_batch * d->data) != 0)
    Invalid(c, "global_batch", "global_batch = {} is not divisible by micro_batch x data-parallel degree = {} x {}", c.global_batch,
            c.micro_batch, d->data);
  d->micro_batches = c.global_batch / (c.micro_batch * d->data);
  if (p.schedule == PipelineSchedule::kInterleaved1F1B && d->micro_batches % d->pipeline != 0)
    Invalid(c, "global_batch", "the interleaved schedule needs the micro-batches per step ({}) to be a multiple of the pipeline "
            "stages ({}), as Megatron-LM requires", d->micro_batches, d->pipeline);
  if (!p.expert_axes.empty() && c.moe.experts == 0) Invalid(c, "parallel.expert_axes", "expert_axes need moe.experts > 0");
  if (c.moe.experts > 0 && c.moe.experts % d->expert != 0)
    Invalid(c, "moe.experts", "moe.experts = {} is not divisible by the expert-parallel degree {} (axes {})", c.moe.experts,
            d->expert, AxesText(p.expert_axes));
}

}  // namespace

ValidatedModel ValidateModel(ModelConfig config, std::shared_ptr<const Mesh> mesh) {
  SPMDSIM_CHECK(mesh != nullptr, "ValidateModel needs a mesh");
  ValidateShape(config);
  ParallelDegrees degrees;
  ValidateParallel(config, *mesh, &degrees);
  return ValidatedModel(std::move(config), std::move(mesh), degrees);
}

ValidatedModel ValidateModel(ModelConfig config, const Mesh& mesh) {
  return ValidateModel(std::move(config), std::make_shared<const Mesh>(mesh));
}

ValidatedModel ValidatedModel::WithMicroBatches(int64_t micro_batches) const {
  SPMDSIM_CHECK(micro_batches >= 1, "micro-batches must be >= 1");
  SPMDSIM_CHECK(config_.parallel.schedule != PipelineSchedule::kInterleaved1F1B || micro_batches % degrees_.pipeline == 0,
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

}  // namespace spmdsim
