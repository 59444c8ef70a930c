// MaxText-style and NeMo-style keys of a `kind: model` workload (scenario/internal/model_styles.h,
// docs/model-styles.md).
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mesh/mesh_utils.h"
#include "model/stack.h"
#include "scenario/internal/model_styles.h"

namespace spmdsim {
namespace {

// MaxText's mesh axes in its mesh order (MaxText/configs/base.yml `mesh_axes`; the `stage` axis is set by
// ici_pipeline_parallelism) and the role each plays in the model (the axes MaxText's default logical_axis_rules
// give the batch, the heads, the sequence, the layers and the experts).
enum class Role { kData, kFsdp, kPipeline, kContext, kTensor, kTensorSequence, kExpert, kInference };
struct MaxTextAxis {
  const char* axis;
  const char* stem;  // ici_<stem>_parallelism
  Role role;
};
constexpr MaxTextAxis kMaxTextAxes[] = {
    {"data", "data", Role::kData},           {"stage", "pipeline", Role::kPipeline},
    {"fsdp", "fsdp", Role::kFsdp},           {"fsdp_transpose", "fsdp_transpose", Role::kFsdp},
    {"sequence", "sequence", Role::kContext}, {"context", "context", Role::kContext},
    {"tensor", "tensor", Role::kTensor},     {"tensor_transpose", "tensor_transpose", Role::kTensor},
    {"tensor_sequence", "tensor_sequence", Role::kTensorSequence},
    {"expert", "expert", Role::kExpert},     {"autoregressive", "autoregressive", Role::kInference}};
constexpr const char* kMaxTextOtherKeys[] = {"per_device_batch_size", "gradient_accumulation_steps",
                                              "num_pipeline_microbatches", "remat_policy", "logical_axis_rules"};
constexpr const char* kNemoKeys[] = {"tensor_model_parallel_size", "pipeline_model_parallel_size",
                                     "virtual_pipeline_model_parallel_size", "context_parallel_size",
                                     "expert_model_parallel_size", "micro_batch_size", "global_batch_size",
                                     "sequence_parallel", "use_distributed_optimizer",
                                     "activations_checkpoint_granularity"};

enum class Style { kRoles, kMaxText, kNemo };

std::vector<std::string> MaxTextKeys() {
  std::vector<std::string> keys;
  for (const MaxTextAxis& a : kMaxTextAxes) {
    keys.push_back(fmt::format("ici_{}_parallelism", a.stem));
    keys.push_back(fmt::format("dcn_{}_parallelism", a.stem));
  }
  for (const char* k : kMaxTextOtherKeys) keys.emplace_back(k);
  return keys;
}

const std::vector<std::string>& NemoKeys() {
  static const std::vector<std::string> keys(std::begin(kNemoKeys), std::end(kNemoKeys));
  return keys;
}

// The first of `keys` the workload writes (in file order), or "".
std::string FirstKeyOf(const YamlMap& m, const std::vector<std::string>& keys) {
  for (const std::string& k : m.keys())
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) return k;
  return "";
}

Style StyleOf(const YamlContext& ctx, const YamlMap& m) {
  static const std::vector<std::string> maxtext = MaxTextKeys();
  const std::string first_maxtext = FirstKeyOf(m, maxtext), first_nemo = FirstKeyOf(m, NemoKeys());
  if (!first_maxtext.empty() && !first_nemo.empty()) {
    ctx.Fail(m.Get(first_nemo), m.Key(first_nemo),
             fmt::format("NeMo's {} with MaxText's {}: write the parallelism in one style (MaxText's ici_* / dcn_* "
                         "keys, NeMo's *_parallel_size keys, or `parallel:` roles)", first_nemo, first_maxtext));
  }
  return !first_maxtext.empty() ? Style::kMaxText : !first_nemo.empty() ? Style::kNemo : Style::kRoles;
}

// The role keys a style replaces: written together with the style's keys, the workload would say two things.
void RefuseReplacedRoleKeys(const YamlContext& ctx, const YamlMap& m, Style style) {
  const bool maxtext = style == Style::kMaxText;
  const std::vector<std::pair<std::string, std::string>> replaced = {
      {"parallel", maxtext ? "the ici_* / dcn_* parallelism keys" : "the *_parallel_size keys"},
      {"global_batch", maxtext ? "per_device_batch_size" : "global_batch_size"},
      {"micro_batch", maxtext ? "per_device_batch_size and gradient_accumulation_steps" : "micro_batch_size"},
      {"recompute", maxtext ? "remat_policy" : "activations_checkpoint_granularity"}};
  for (const auto& [key, instead] : replaced) {
    if (!m.Has(key)) continue;
    const bool batch_key = key == "global_batch" || key == "micro_batch";
    if (maxtext && batch_key && !m.Has("per_device_batch_size")) continue;  // MaxText's batch may be given as ours
    if (!maxtext && key == "global_batch" && !m.Has("global_batch_size")) continue;
    if (!maxtext && key == "micro_batch" && !m.Has("micro_batch_size")) continue;
    if (key == "recompute" && !m.Has(maxtext ? "remat_policy" : "activations_checkpoint_granularity")) continue;
    ctx.Fail(m.Get(key), m.Key(key),
             fmt::format("the workload is written in {}'s keys, where {} says this: give one of them",
                         maxtext ? "MaxText" : "NeMo", instead));
  }
}

// One mesh axis a style's sizes ask for.
struct StyleAxis {
  std::string name;
  Role role = Role::kData;
  int64_t ici = 1, dcn = 1;
  std::string key;  // the key that sets it (for errors), "" when defaulted
  int64_t size() const { return ici * dcn; }
};

// Slices (TPU) or hosts (GPU): what create_hybrid_device_mesh splits over DCN.
int64_t Granules(const Topology& t) {
  std::set<int> slices;
  for (const Device& d : t.devices()) slices.insert(d.slice_index);
  return static_cast<int64_t>(slices.size());
}

// A -1 placeholder filled so that the sizes multiply to `total` (MaxText's fill_unspecified_mesh_axes).
void FillPlaceholder(const YamlContext& ctx, const YamlMap& m, std::vector<StyleAxis>* axes,
                     int64_t StyleAxis::*field, int64_t total, const char* level, const std::string& what) {
  int64_t product = 1;
  StyleAxis* placeholder = nullptr;
  for (StyleAxis& a : *axes) {
    if (a.*field == -1) {
      if (placeholder != nullptr)
        ctx.Fail(m.node(), m.path(), fmt::format("two {} axes are -1 ({} and {}); MaxText fills one", level,
                                                 placeholder->name, a.name));
      placeholder = &a;
    } else {
      product *= a.*field;
    }
  }
  if (placeholder != nullptr) {
    if (total % product != 0)
      ctx.Fail(m.node(), m.path(), fmt::format("the {} parallelism of the other axes ({}) does not divide the {} ({})",
                                               level, product, what, total));
    placeholder->*field = total / product;
    product = total;
  }
  if (product != total)
    ctx.Fail(m.node(), m.path(),
             fmt::format("the {}_*_parallelism keys multiply to {}, but the {} is {}: set one of them to -1 to fill "
                         "it, or make them multiply to {}", level, product, what, total, total));
}

// MaxText's sizes with its defaults (ici_fsdp_parallelism: -1, dcn_data_parallelism: -1, the others 1) and the -1
// placeholders filled: ici over the devices of one slice (host on GPUs), dcn over the slices.
std::vector<StyleAxis> MaxTextSizes(const YamlContext& ctx, const YamlMap& m, const Topology& t) {
  std::vector<StyleAxis> axes;
  for (const MaxTextAxis& a : kMaxTextAxes) {
    StyleAxis s;
    s.name = a.axis;
    s.role = a.role;
    for (const bool ici : {true, false}) {
      const std::string key = fmt::format("{}_{}_parallelism", ici ? "ici" : "dcn", a.stem);
      const int64_t fallback = (ici && s.name == "fsdp") || (!ici && s.name == "data") ? -1 : 1;
      const int64_t value = m.Int(key, fallback);
      if (value < 1 && value != -1)
        ctx.Fail(m.Get(key), m.Key(key), fmt::format("found {}, expected a positive integer or -1 (fill)", value));
      (ici ? s.ici : s.dcn) = value;
      if (m.Has(key) && (s.key.empty() || value != 1)) s.key = key;
    }
    axes.push_back(s);
  }
  const int64_t granules = Granules(t);
  FillPlaceholder(ctx, m, &axes, &StyleAxis::ici, t.num_devices() / granules, "ici",
                  fmt::format("number of devices of one {} ({})", t.platform() == Platform::kGpu ? "host" : "slice",
                              t.ToString()));
  FillPlaceholder(ctx, m, &axes, &StyleAxis::dcn, granules, "dcn",
                  fmt::format("number of {}", t.platform() == Platform::kGpu ? "hosts" : "slices"));
  for (const StyleAxis& a : axes) {
    if (a.role == Role::kInference && a.size() > 1)
      ctx.Fail(m.Get(a.key), m.Key(a.key), "the autoregressive axis shards decoding (inference); a training step has "
                                           "no use for it");
  }
  return axes;
}

// NeMo's sizes as Megatron-core lays out its ranks (tp fastest, then cp, ep, dp, pp), as mesh axes in JAX's order
// (the last varies fastest): pipe, data, expert, context, tensor. Data parallelism is what remains; the expert
// degree splits it (Megatron: expert-parallel groups are carved from the data-parallel ranks).
std::vector<StyleAxis> NemoSizes(const YamlContext& ctx, const YamlMap& m, const Topology& t) {
  auto size = [&](const char* key) {
    const int64_t v = m.Int(key, 1);
    if (v < 1) ctx.Fail(m.Get(key), m.Key(key), fmt::format("found {}, expected a positive integer", v));
    return v;
  };
  const int64_t tp = size("tensor_model_parallel_size"), pp = size("pipeline_model_parallel_size");
  const int64_t cp = size("context_parallel_size"), ep = size("expert_model_parallel_size");
  const int64_t devices = t.num_devices();
  if (devices % (tp * pp * cp) != 0)
    ctx.Fail(
        m.node(), m.path(),
        fmt::format("tensor x pipeline x context parallel sizes = {} x {} x {} = {} do not divide the {} devices of "
                    "{}; data parallelism takes what remains",
                    tp, pp, cp, tp * pp * cp, devices, t.ToString()));
  const int64_t dp = devices / (tp * pp * cp);
  if (dp % ep != 0)
    ctx.Fail(m.Get("expert_model_parallel_size"), m.Key("expert_model_parallel_size"),
             fmt::format("expert_model_parallel_size {} does not divide the data-parallel size {} (Megatron carves "
                         "expert-parallel groups from the data-parallel ranks)", ep, dp));
  auto key_of = [&](const char* key) { return m.Has(key) ? std::string(key) : std::string(); };
  return {{"pipe", Role::kPipeline, pp, 1, key_of("pipeline_model_parallel_size")},
          {"data", Role::kData, dp / ep, 1, ""},
          {"expert", Role::kExpert, ep, 1, key_of("expert_model_parallel_size")},
          {"context", Role::kContext, cp, 1, key_of("context_parallel_size")},
          {"tensor", Role::kTensor, tp, 1, key_of("tensor_model_parallel_size")}};
}

// The mesh axes larger than 1 (at least one), in the style's order.
std::vector<StyleAxis> NonTrivial(std::vector<StyleAxis> axes) {
  std::vector<StyleAxis> out;
  for (StyleAxis& a : axes)
    if (a.size() > 1) out.push_back(std::move(a));
  if (out.empty()) out.push_back(axes.front());
  return out;
}

// Each style axis larger than 1 is a mesh axis of that name and size.
void CheckMeshHas(const YamlContext& ctx, const YamlMap& m, const Mesh& mesh, const std::vector<StyleAxis>& axes,
                  Style style) {
  for (const StyleAxis& a : axes) {
    if (a.size() <= 1 || (mesh.HasAxis(a.name) && mesh.AxisSize(a.name) == a.size())) continue;
    std::vector<std::string> have;
    for (int i = 0; i < mesh.rank(); ++i)
      have.push_back(fmt::format("'{}': {}", mesh.axis_names()[i], mesh.shape()[i]));
    const YAML::Node at = a.key.empty() ? m.node() : m.Get(a.key);
    ctx.Fail(at, a.key.empty() ? m.path() : m.Key(a.key),
             fmt::format("{} asks for a mesh axis '{}' of size {}; the scenario's mesh has ({}): name the axis as {} "
                         "does, or leave `mesh:` out and spmdsim builds {}'s mesh",
                         style == Style::kMaxText ? "MaxText's parallelism" : "NeMo's parallelism", a.name, a.size(),
                         fmt::join(have, ", "), style == Style::kMaxText ? "MaxText" : "Megatron",
                         style == Style::kMaxText ? "MaxText" : "Megatron"));
  }
}

void AddAxis(std::vector<std::string>* axes, const std::string& axis) {
  if (std::find(axes->begin(), axes->end(), axis) == axes->end()) axes->push_back(axis);
}

// Roles by axis (MaxText's axes, or NeMo's pipe / data / expert / context / tensor).
ModelParallelism RolesByAxis(const std::vector<StyleAxis>& axes) {
  ModelParallelism p;
  for (const StyleAxis& a : axes) {
    if (a.size() <= 1) continue;
    switch (a.role) {
      case Role::kData: AddAxis(&p.data_axes, a.name); break;
      case Role::kFsdp:
        AddAxis(&p.data_axes, a.name);
        p.zero_stage = 3;
        break;
      case Role::kExpert:
        AddAxis(&p.data_axes, a.name);
        AddAxis(&p.expert_axes, a.name);
        break;
      case Role::kPipeline: AddAxis(&p.pipeline_axes, a.name); break;
      case Role::kContext: AddAxis(&p.context_axes, a.name); break;
      case Role::kTensorSequence: p.sequence_parallel = true; [[fallthrough]];
      case Role::kTensor: AddAxis(&p.tensor_axes, a.name); break;
      case Role::kInference: break;
    }
  }
  return p;
}

// `logical_axis_rules`: a list of [logical name, mesh axes] (an axis, a list of axes, or null), or "scenario" for
// the scenario's rules.logical_axis_rules.
LogicalAxisRules ParseModelRules(const YamlContext& ctx, const YamlMap& m, const Scenario& s) {
  const YAML::Node r = m.Get("logical_axis_rules");
  const std::string key = m.Key("logical_axis_rules");
  if (r.IsScalar() && r.Scalar() == "scenario") {
    if (s.rules.logical_axis_rules.empty())
      ctx.Fail(r, key, "'scenario' takes the scenario's rules.logical_axis_rules, and it has none");
    return s.rules.logical_axis_rules;
  }
  if (!r.IsSequence())
    ctx.Fail(r, key, "expected a list of [logical_name, mesh_axes] pairs as MaxText writes them, or 'scenario'");
  LogicalAxisRules rules;
  for (size_t i = 0; i < r.size(); ++i) {
    const std::string item = fmt::format("{}[{}]", key, i);
    if (!r[i].IsSequence() || r[i].size() != 2)
      ctx.Fail(r[i], item, "expected a pair [logical_name, mesh_axes], e.g. [activation_batch, [data, fsdp]]");
    const YAML::Node axes = r[i][1];
    PartitionSpec::Entry entry = PartitionSpec::Entry::None();
    if (axes.IsScalar() && axes.Scalar() != "null") entry = PartitionSpec::Entry::Axis(axes.Scalar());
    if (axes.IsSequence()) entry = PartitionSpec::Entry::Axes(ctx.StringList(axes, item + "[1]"));
    rules.push_back({ctx.String(r[i][0], item + "[0]"), entry});
  }
  return rules;
}

// The roles the logical axis rules give the mesh axes: the batch ('activation_batch') is split over the data
// axes, the heads ('heads') over the tensor axes, the sequence ('activation_length') over the context axes, the
// layers ('layers' / 'activation_stage') over the pipeline axes, the experts ('exp') over the expert axes; the
// parameters' embed dimension ('embed') over data axes is FSDP (ZeRO-3); the sequence over a tensor axis
// ('activation_norm_length' / 'activation_length') is sequence parallelism. Mesh axes of size 1 are ignored.
ModelParallelism RolesFromRules(const YamlContext& ctx, const YamlMap& m, const LogicalAxisRules& rules,
                                const Mesh& mesh) {
  auto axes_of = [&](std::initializer_list<std::string_view> names) {
    std::vector<std::string> out;
    for (const LogicalAxisRule& r : rules) {
      if (std::find(names.begin(), names.end(), r.logical_name) == names.end()) continue;
      for (const std::string& axis : r.mesh_axes.axes())
        if (mesh.HasAxis(axis) && mesh.AxisSize(axis) > 1) AddAxis(&out, axis);
    }
    return out;
  };
  auto minus = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    std::erase_if(a, [&](const std::string& x) { return std::find(b.begin(), b.end(), x) != b.end(); });
    return a;
  };
  auto meets = [](const std::vector<std::string>& a, const std::vector<std::string>& b) {
    return std::any_of(a.begin(), a.end(),
                       [&](const std::string& x) { return std::find(b.begin(), b.end(), x) != b.end(); });
  };
  ModelParallelism p;
  p.data_axes = axes_of({"activation_batch", "batch"});
  p.expert_axes = axes_of({"exp", "activation_exp"});
  p.pipeline_axes = minus(axes_of({"layers", "activation_stage"}), p.data_axes);
  p.tensor_axes = minus(minus(axes_of({"heads"}), p.data_axes), p.pipeline_axes);
  p.context_axes = minus(minus(axes_of({"activation_length", "length"}), p.tensor_axes), p.data_axes);
  if (meets(axes_of({"embed"}), p.data_axes)) p.zero_stage = 3;
  p.sequence_parallel = meets(axes_of({"activation_norm_length", "activation_length"}), p.tensor_axes);
  for (const std::string& axis : mesh.axis_names()) {
    if (mesh.AxisSize(axis) <= 1) continue;
    const bool has_role = meets({axis}, p.data_axes) || meets({axis}, p.tensor_axes) || meets({axis}, p.context_axes) ||
                          meets({axis}, p.pipeline_axes);
    if (!has_role)
      ctx.Fail(m.Get("logical_axis_rules"), m.Key("logical_axis_rules"),
               fmt::format("mesh axis '{}' (size {}) is in no rule for activation_batch, heads, activation_length or "
                           "layers: the rules give it no part of the training step", axis, mesh.AxisSize(axis)));
  }
  return p;
}

// MaxText's remat_policy (MaxText layers/decoders.py get_remat_policy) as the model's recompute: 'none' saves
// everything; 'minimal' saves the projections and the MLP (checkpoint names query_proj ... mlpwo) and recomputes
// the attention core between them, Megatron's selective recompute; 'minimal_with_context' (formerly
// 'minimal_flash') also saves the attention output: nothing with FLOPs is recomputed; 'full' recomputes the layer.
Recompute RecomputeOfRematPolicy(const YamlContext& ctx, const YamlMap& m) {
  const std::string policy = m.String("remat_policy", "full");  // MaxText's default
  if (policy == "none" || policy == "minimal_with_context" || policy == "minimal_flash") return Recompute::kNone;
  if (policy == "minimal") return Recompute::kSelective;
  if (policy == "full") return Recompute::kFull;
  const std::vector<std::string> mapped = {"none", "minimal", "minimal_with_context", "minimal_flash", "full"};
  ctx.Fail(m.Get("remat_policy"), m.Key("remat_policy"),
           fmt::format("'{}' recomputes part of the projections or of the MLP, which the model's recompute options "
                       "(none, selective, full) cannot express{}; remat policies with a counterpart: {}",
                       policy, DidYouMeanSuffix(policy, mapped), fmt::join(mapped, ", ")));
}

std::string PairsText(const std::vector<std::pair<std::string, int64_t>>& axes) {
  std::vector<std::string> parts;
  for (const auto& [name, size] : axes) parts.push_back(fmt::format("{}={}", name, size));
  return fmt::format("{}", fmt::join(parts, ","));
}

int64_t DataDegree(const ModelParallelism& p, const Mesh& mesh) { return mesh.AxesSize(p.data_axes); }

// MaxText's batch: global = per_device_batch_size x devices x gradient_accumulation_steps; each data rank runs
// gradient_accumulation_steps x num_pipeline_microbatches (default: the pipeline stages) micro-batches.
void ApplyMaxTextBatch(const YamlContext& ctx, const YamlMap& m, const Mesh& mesh, ModelConfig* c) {
  const int64_t accumulation = m.Int("gradient_accumulation_steps", 1);
  if (accumulation < 1)
    ctx.Fail(m.Get("gradient_accumulation_steps"), m.Key("gradient_accumulation_steps"), "expected an integer >= 1");
  const int64_t stages = mesh.AxesSize(c->parallel.pipeline_axes);
  const int64_t pipeline_micro_batches = m.Int("num_pipeline_microbatches", stages);
  if (pipeline_micro_batches < 1)
    ctx.Fail(m.Get("num_pipeline_microbatches"), m.Key("num_pipeline_microbatches"), "expected an integer >= 1");
  if (m.Has("per_device_batch_size")) {
    const double per_device = ctx.NumberIn(m.Get("per_device_batch_size"), m.Key("per_device_batch_size"), 0, 1e9);
    const double global = per_device * static_cast<double>(mesh.size()) * static_cast<double>(accumulation);
    if (global != std::floor(global) || global > 1e15)
      ctx.Fail(m.Get("per_device_batch_size"), m.Key("per_device_batch_size"),
               fmt::format("{} x {} devices x {} accumulation steps = {} sequences, not a whole number", per_device,
                           mesh.size(), accumulation, global));
    c->global_batch = static_cast<int64_t>(global);
  }
  const int64_t per_rank = DataDegree(c->parallel, mesh) * accumulation * pipeline_micro_batches;
  if (c->global_batch % per_rank != 0)
    ctx.Fail(m.Has("per_device_batch_size") ? m.Get("per_device_batch_size") : m.node(), m.Key("per_device_batch_size"),
             fmt::format("the global batch of {} sequences does not split into data-parallel degree {} x {} "
                         "accumulation steps x {} pipeline micro-batches", c->global_batch,
                         DataDegree(c->parallel, mesh), accumulation, pipeline_micro_batches));
  c->micro_batch = c->global_batch / per_rank;
}

void ApplyMaxText(const YamlContext& ctx, const YamlMap& m, const Scenario& s, const std::vector<StyleAxis>& axes,
                  ModelConfig* c) {
  const Mesh& mesh = s.mesh.mesh;
  c->parallel = m.Has("logical_axis_rules") ? RolesFromRules(ctx, m, ParseModelRules(ctx, m, s), mesh)
                                            : RolesByAxis(axes);
  if (!c->parallel.pipeline_axes.empty()) c->parallel.schedule = PipelineSchedule::kGpipe;  // MaxText's pipeline
  ApplyMaxTextBatch(ctx, m, mesh, c);
  // remat_policy, or MaxText's default 'full' unless `recompute:` is written.
  if (m.Has("remat_policy") || !m.Has("recompute")) c->recompute = RecomputeOfRematPolicy(ctx, m);
}

void ApplyNemo(const YamlContext& ctx, const YamlMap& m, const std::vector<StyleAxis>& axes, ModelConfig* c) {
  c->parallel = RolesByAxis(axes);
  ModelParallelism& p = c->parallel;
  p.sequence_parallel = m.Bool("sequence_parallel", false);  // NeMo's default
  p.zero_stage = m.Bool("use_distributed_optimizer", false) ? 1 : 0;
  const YAML::Node vp = m.Get("virtual_pipeline_model_parallel_size");
  if (m.Has("virtual_pipeline_model_parallel_size") && !vp.IsNull()) {
    p.virtual_stages = ctx.Int(vp, m.Key("virtual_pipeline_model_parallel_size"));
    if (p.virtual_stages > 1) p.schedule = PipelineSchedule::kInterleaved1F1B;
  }
  if (m.Has("global_batch_size")) c->global_batch = m.Int("global_batch_size", c->global_batch);
  if (m.Has("micro_batch_size")) c->micro_batch = m.Int("micro_batch_size", c->micro_batch);
  const YAML::Node granularity = m.Get("activations_checkpoint_granularity");
  if (m.Has("activations_checkpoint_granularity") && m.Has("recompute_granularity")) {
    ctx.Fail(granularity, m.Key("activations_checkpoint_granularity"),
             "NeMo 1's activations_checkpoint_granularity and NeMo 2.0's recompute_granularity both set the "
             "recompute: give one of them");
  }
  if (m.Has("activations_checkpoint_granularity") && !granularity.IsNull()) {
    const std::string g = ctx.Choice(granularity, m.Key("activations_checkpoint_granularity"), {"selective", "full"});
    c->recompute = g == "full" ? Recompute::kFull : Recompute::kSelective;
  } else if (!m.Has("recompute_granularity") && !m.Has("recompute")) {
    c->recompute = Recompute::kNone;  // NeMo's default: null
  }
}

// The name of kModelKeyNames' row `n` in `family` ("" where it has none).
std::string_view NameIn(const ModelKeyNames& n, ModelKeyFamily family) {
  switch (family) {
    case ModelKeyFamily::kSpmdsim: return n.field;
    case ModelKeyFamily::kMaxText: return n.maxtext;
    case ModelKeyFamily::kNemo: return n.nemo;
  }
  return n.field;
}

// The first key of workload `m` (in file order) that only `family` has, or "".
std::string FirstKeyOnlyIn(const YamlMap& m, ModelKeyFamily family) {
  const ModelKeyFamily other = family == ModelKeyFamily::kMaxText ? ModelKeyFamily::kNemo : ModelKeyFamily::kMaxText;
  for (const std::string& k : m.keys()) {
    for (const ModelKeyNames& n : kModelKeyNames) {
      if (NameIn(n, family) == k && k != n.field && NameIn(n, other) != k) return k;
    }
  }
  return "";
}

}  // namespace

std::string_view ModelKeyIn(ModelKeyFamily family, std::string_view field) {
  for (const ModelKeyNames& n : kModelKeyNames) {
    if (n.field != field) continue;
    const std::string_view name = NameIn(n, family);
    return name.empty() ? field : name;
  }
  return field;
}

const std::vector<std::string>& ModelFamilyKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const ModelKeyFamily family : {ModelKeyFamily::kMaxText, ModelKeyFamily::kNemo}) {
      for (const ModelKeyNames& n : kModelKeyNames) {
        const std::string name(NameIn(n, family));
        if (!name.empty() && name != n.field && std::find(out.begin(), out.end(), name) == out.end())
          out.push_back(name);
      }
    }
    return out;
  }();
  return keys;
}

std::string ModelFieldKey(const YamlContext& ctx, const YamlMap& m, std::string_view field) {
  std::string written;
  for (const ModelKeyNames& n : kModelKeyNames) {
    if (n.field != field) continue;
    for (const std::string_view name : {n.field, n.maxtext, n.nemo}) {
      if (name.empty() || !m.Has(name) || name == written) continue;
      if (!written.empty())
        ctx.Fail(m.Get(name), m.Key(name),
                 fmt::format("'{}' and '{}' both set the model's {}: give one of them", written, name, field));
      written = name;
    }
  }
  return written.empty() ? std::string(field) : written;
}

ModelKeyFamily ModelKeyFamilyOf(const YamlContext& ctx, const YamlMap& m) {
  const std::string maxtext = FirstKeyOnlyIn(m, ModelKeyFamily::kMaxText);
  const std::string nemo = FirstKeyOnlyIn(m, ModelKeyFamily::kNemo);
  if (!maxtext.empty() && !nemo.empty()) {
    const bool nemo_second = m.Get(nemo).Mark().line >= m.Get(maxtext).Mark().line;
    const std::string& second = nemo_second ? nemo : maxtext;
    ctx.Fail(m.Get(second), m.Key(second),
             fmt::format("MaxText's '{}' with NeMo's '{}': write the model in one family's keys (spmdsim's, "
                         "MaxText's or NeMo's; docs/scenarios.md, \"Model keys\")", maxtext, nemo));
  }
  if (!maxtext.empty()) return ModelKeyFamily::kMaxText;
  if (!nemo.empty()) return ModelKeyFamily::kNemo;
  switch (StyleOf(ctx, m)) {  // model keys shared by the families (vocab_size): the parallelism's family
    case Style::kMaxText: return ModelKeyFamily::kMaxText;
    case Style::kNemo: return ModelKeyFamily::kNemo;
    case Style::kRoles: break;
  }
  return ModelKeyFamily::kSpmdsim;
}

std::string ModelValidKeysText(const std::vector<std::string>& own_keys) {
  std::vector<std::string> own;
  for (const std::string& k : own_keys) {
    const bool family_key = std::find(ModelFamilyKeys().begin(), ModelFamilyKeys().end(), k) != ModelFamilyKeys().end();
    const bool style_key = std::find(ModelStyleKeys().begin(), ModelStyleKeys().end(), k) != ModelStyleKeys().end();
    if (!family_key && !style_key) own.push_back(k);
  }
  std::vector<std::string> maxtext, nemo;
  for (const ModelKeyNames& n : kModelKeyNames) {
    if (!n.maxtext.empty() && n.maxtext != n.field) maxtext.emplace_back(n.maxtext);
    if (!n.nemo.empty() && n.nemo != n.field) nemo.emplace_back(n.nemo);
  }
  // The parallelism keys (ici_<axis>_parallelism, ..., tensor_model_parallel_size, ...) by reference: all of them
  // would not fit one error line (kMaxErrorLineChars); a misspelt one still gets its did-you-mean.
  return fmt::format("{}; MaxText's model keys: {}; NeMo's: {}; their parallelism keys: docs/model-styles.md",
                     fmt::join(own, ", "), fmt::join(maxtext, ", "), fmt::join(nemo, ", "));
}

const std::vector<std::string>& ModelStyleKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out = MaxTextKeys();
    out.insert(out.end(), NemoKeys().begin(), NemoKeys().end());
    return out;
  }();
  return keys;
}

std::optional<ScenarioMesh> MeshFromModelStyle(const YamlContext& ctx, const YAML::Node& workloads,
                                               const std::shared_ptr<const Topology>& topology) {
  if (!workloads.IsSequence()) return std::nullopt;
  for (size_t i = 0; i < workloads.size(); ++i) {
    const YAML::Node w = workloads[i];
    if (!w.IsMap() || !w["kind"].IsScalar() || w["kind"].Scalar() != WorkloadKindName(WorkloadKind::kModel)) continue;
    std::vector<std::string> keys;  // every key written: the workload's own parse checks them later
    for (YAML::const_iterator it = w.begin(); it != w.end(); ++it)
      if (it->first.IsScalar()) keys.push_back(it->first.Scalar());
    const YamlMap m(ctx, w, fmt::format("workloads[{}]", i), keys);
    const Style style = StyleOf(ctx, m);
    if (style == Style::kRoles) continue;
    const std::vector<StyleAxis> axes =
        NonTrivial(style == Style::kMaxText ? MaxTextSizes(ctx, m, *topology) : NemoSizes(ctx, m, *topology));
    std::vector<std::pair<std::string, int64_t>> ici, dcn;
    bool hybrid = false;
    for (const StyleAxis& a : axes) {
      ici.emplace_back(a.name, a.ici);
      dcn.emplace_back(a.name, a.dcn);
      hybrid = hybrid || a.dcn > 1;
    }
    ScenarioMesh out;
    try {
      out.mesh = hybrid ? MakeDeviceMesh(topology, ici, dcn) : MakeDeviceMesh(topology, ici);
    } catch (const Error& e) {
      ctx.Rethrow(w, m.path(), e);
    }
    out.builder = hybrid ? ScenarioMesh::Builder::kHybrid : ScenarioMesh::Builder::kCreateDeviceMesh;
    out.description = fmt::format("{} from {}'s parallelism of workloads[{}]: {}",
                                  hybrid ? "create_hybrid_device_mesh" : "create_device_mesh",
                                  style == Style::kMaxText ? "MaxText" : "NeMo", i, PairsText(ici));
    if (hybrid) out.description += fmt::format(" dcn {}", PairsText(dcn));
    return out;
  }
  return std::nullopt;
}

void ApplyModelStyle(const YamlContext& ctx, const YamlMap& m, const Scenario& s, ModelConfig* c) {
  const Style style = StyleOf(ctx, m);
  if (style == Style::kRoles) return;
  RefuseReplacedRoleKeys(ctx, m, style);
  const Topology& topology = *s.topology.topology;
  const std::vector<StyleAxis> axes = style == Style::kMaxText ? MaxTextSizes(ctx, m, topology)
                                                               : NemoSizes(ctx, m, topology);
  CheckMeshHas(ctx, m, s.mesh.mesh, axes, style);
  // The software stack of the style's own framework, unless `stack:` names another (model/stack.h): MaxText runs
  // on JAX / XLA, NeMo on Megatron-Core with Transformer Engine.
  if (!m.Has("stack")) c->stack = style == Style::kMaxText ? SoftwareStack::kMaxText : SoftwareStack::kMegatron;
  if (style == Style::kMaxText) {
    ApplyMaxText(ctx, m, s, axes, c);
  } else {
    ApplyNemo(ctx, m, axes, c);
  }
}

std::string StyleKeyForField(const YamlMap& m, const std::string& field) {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> kKeys = {
      {"parallel.tensor_axes",
       {"tensor_model_parallel_size", "ici_tensor_parallelism", "ici_tensor_sequence_parallelism",
        "ici_tensor_transpose_parallelism"}},
      {"parallel.pipeline_axes",
       {"pipeline_model_parallel_size", "ici_pipeline_parallelism", "dcn_pipeline_parallelism"}},
      {"parallel.context_axes", {"context_parallel_size", "ici_sequence_parallelism", "ici_context_parallelism"}},
      {"parallel.expert_axes", {"expert_model_parallel_size", "ici_expert_parallelism"}},
      {"parallel.data_axes", {"ici_fsdp_parallelism", "ici_data_parallelism", "dcn_data_parallelism"}},
      {"parallel.virtual_stages", {"virtual_pipeline_model_parallel_size"}},
      {"parallel.schedule", {"virtual_pipeline_model_parallel_size"}},
      {"parallel.sequence_parallel", {"sequence_parallel"}},
      {"global_batch", {"global_batch_size", "per_device_batch_size"}},
      {"micro_batch", {"micro_batch_size", "per_device_batch_size"}},
      {"parallel", {"logical_axis_rules"}}};
  if (StyleOf(YamlContext(""), m) == Style::kRoles) return "";
  for (const auto& [role_field, keys] : kKeys) {
    if (role_field != field) continue;
    for (const std::string& k : keys)
      if (m.Has(k)) return k;
  }
  return "";
}

}  // namespace spmdsim
