#include "scenario/internal/scenario_parsers.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/enum_names.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "model/calibration.h"
#include "model/stack.h"
#include "partition/named_sharding.h"
#include "scenario/internal/model_styles.h"
#include "scenario/scenario_types.h"

namespace spmdsim {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 32;
constexpr int64_t kMaxIterations = 1000000;

std::vector<std::string> WithCommon(std::vector<std::string> keys) {
  keys.insert(keys.begin(), {"kind", "name"});
  return keys;
}

// Mesh axis names, each checked against the mesh.
std::vector<std::string> MeshAxes(const YamlContext& ctx, const YAML::Node& node, const std::string& key,
                                  const Mesh& mesh) {
  std::vector<std::string> axes = ctx.StringList(node, key);
  std::set<std::string> seen;
  for (const std::string& axis : axes) {
    if (!mesh.HasAxis(axis)) {
      std::optional<std::string> guess = DidYouMean(axis, mesh.axis_names());
      ctx.Fail(node, key,
               fmt::format("mesh has no axis {}{}; its axes are {}", QuoteForError(axis),
                           guess ? fmt::format(" (did you mean '{}'?)", *guess) : std::string(),
                           Abbreviate(PyTuple(mesh.axis_names()))));
    }
    if (!seen.insert(axis).second) ctx.Fail(node, key, fmt::format("axis '{}' is named twice", axis));
  }
  return axes;
}

int64_t Positive(const YamlContext& ctx, const YamlMap& m, std::string_view k, int64_t fallback,
                 int64_t max = kMaxDim) {
  if (!m.Has(k)) return fallback;
  int64_t v = ctx.Int(m.Get(k), m.Key(k));
  if (v < 1 || v > max) ctx.Fail(m.Get(k), m.Key(k), fmt::format("found {}, expected an integer in [1, {}]", v, max));
  return v;
}

int64_t NonNegative(const YamlContext& ctx, const YamlMap& m, std::string_view k, int64_t fallback,
                    int64_t max = kMaxDim) {
  if (!m.Has(k)) return fallback;
  int64_t v = ctx.Int(m.Get(k), m.Key(k));
  if (v < 0 || v > max) ctx.Fail(m.Get(k), m.Key(k), fmt::format("found {}, expected an integer in [0, {}]", v, max));
  return v;
}

DType ParseDTypeAt(const YamlContext& ctx, const YamlMap& m, std::string_view k, DType fallback) {
  if (!m.Has(k)) return fallback;
  return ctx.ArrayDType(m.Get(k), m.Key(k));
}

double Tolerance(const YamlContext& ctx, const YamlMap& m, std::string_view k, double fallback) {
  if (!m.Has(k)) return fallback;
  double v = ctx.Number(m.Get(k), m.Key(k));
  if (v < 0 || v > 1e30) ctx.Fail(m.Get(k), m.Key(k), "expected a tolerance >= 0");
  return v;
}

// --- collectives --------------------------------------------------------------------------------------------

CollectivesConfig ParseCollectives(const YamlContext& ctx, const YamlMap& m, const Scenario& s) {
  CollectivesConfig c;
  if (m.Has("ops")) {
    static const std::vector<std::string> kOps = {"psum",       "all_gather", "psum_scatter",   "all_to_all",
                                                  "ppermute",   "pmean",      "pmax",           "pmin",
                                                  "all_reduce", "reduce_scatter", "alltoall", "sendrecv"};
    YAML::Node ops = m.Get("ops");
    c.ops.clear();
    if (ops.IsScalar()) {
      c.ops.push_back(ctx.Choice(ops, m.Key("ops"), kOps));
    } else {
      ctx.RequireSequence(ops, m.Key("ops"));
      for (size_t i = 0; i < ops.size(); ++i)
        c.ops.push_back(ctx.Choice(ops[i], fmt::format("{}[{}]", m.Key("ops"), i), kOps));
    }
    if (c.ops.empty()) ctx.Fail(ops, m.Key("ops"), "list at least one op");
  }
  if (m.Has("axes")) {
    YAML::Node axes = m.Get("axes");
    if (axes.IsScalar()) {
      c.axes.push_back(MeshAxes(ctx, axes, m.Key("axes"), s.mesh.mesh));
    } else {
      ctx.RequireSequence(axes, m.Key("axes"));
      for (size_t i = 0; i < axes.size(); ++i)
        c.axes.push_back(MeshAxes(ctx, axes[i], fmt::format("{}[{}]", m.Key("axes"), i), s.mesh.mesh));
    }
  }
  if (m.Has("sizes")) {
    YAML::Node sizes = m.Get("sizes");
    c.sizes.clear();
    if (sizes.IsMap()) {
      YamlMap sm(ctx, sizes, m.Key("sizes"), {"min", "max", "factor"});
      int64_t lo = ctx.Bytes(sm.Need("min"), sm.Key("min"));
      int64_t hi = ctx.Bytes(sm.Need("max"), sm.Key("max"));
      int64_t factor = Positive(ctx, sm, "factor", 2, 1 << 20);
      if (lo < 1 || hi < lo || factor < 2 || hi > kTiB)
        ctx.Fail(sizes, m.Key("sizes"),
                 fmt::format("need 0 < min <= max <= 1TiB and factor >= 2; found min {}, max {}, factor {}", lo, hi,
                             factor));
      c.sizes = SweepSizes(lo, hi, factor);
    } else {
      std::vector<std::string> list;
      if (sizes.IsScalar()) {
        c.sizes.push_back(ctx.Bytes(sizes, m.Key("sizes")));
      } else {
        ctx.RequireSequence(sizes, m.Key("sizes"));
        for (size_t i = 0; i < sizes.size(); ++i)
          c.sizes.push_back(ctx.Bytes(sizes[i], fmt::format("{}[{}]", m.Key("sizes"), i)));
      }
      for (int64_t b : c.sizes)
        if (b < 1 || b > kTiB)
          ctx.Fail(sizes, m.Key("sizes"), fmt::format("size {} is not in [1 B, 1 TiB]", b));
    }
    if (c.sizes.empty()) ctx.Fail(sizes, m.Key("sizes"), "list at least one size");
  }
  c.dtype = ParseDTypeAt(ctx, m, "dtype", c.dtype);
  c.iterations = static_cast<int>(Positive(ctx, m, "iterations", c.iterations, kMaxIterations));
  c.warmup = static_cast<int>(NonNegative(ctx, m, "warmup", c.warmup, kMaxIterations));
  c.check = m.Bool("check", c.check);
  if (m.Has("ppermute_shift")) {
    int64_t shift = ctx.Int(m.Get("ppermute_shift"), m.Key("ppermute_shift"));
    if (shift < -kMaxDim || shift > kMaxDim)
      ctx.Fail(m.Get("ppermute_shift"), m.Key("ppermute_shift"), "shift too large");
    c.ppermute_shift = static_cast<int>(shift);
  }
  // NCCL_ALGO / NCCL_PROTO for this sweep; whether they apply to each op and group is checked by the cost model.
  if (m.Has("algorithm")) {
    static const std::vector<std::string> kAlgorithms = {"auto", "ring", "tree", "nvls", "nvls_tree",
                                                         "bidirectional_ring", "halving_doubling", "direct"};
    c.algorithm = ParseAlgorithm(ctx.Choice(m.Get("algorithm"), m.Key("algorithm"), kAlgorithms));
  }
  if (m.Has("protocol")) {
    static const std::vector<std::string> kProtocols = {"auto", "ll", "ll128", "simple"};
    c.protocol = ParseProtocol(ctx.Choice(m.Get("protocol"), m.Key("protocol"), kProtocols));
  }
  return c;
}

// --- shard_map ----------------------------------------------------------------------------------------------

const std::vector<std::string>& StepKeys() {
  static const std::vector<std::string> keys = {"name",  "op",     "args",  "axes",    "equation", "axis",
                                                "split_axis", "concat_axis", "tiled", "pairs", "dims", "keepdims",
                                                "shape", "start",  "limit", "strides", "scalar",   "approximate",
                                                "dtype"};
  return keys;
}

int SmallInt(const YamlContext& ctx, const YAML::Node& node, const std::string& key) {
  int64_t v = ctx.Int(node, key);
  if (v < -64 || v > 64) ctx.Fail(node, key, fmt::format("found {}, expected an axis index in [-64, 64]", v));
  return static_cast<int>(v);
}

ProgramStep ParseStep(const YamlContext& ctx, const YAML::Node& node, const std::string& key, const Scenario& s,
                      const std::set<std::string>& defined) {
  YamlMap m(ctx, node, key, StepKeys());
  ProgramStep p;
  p.name = ctx.String(m.Need("name"), m.Key("name"));
  if (p.name.empty()) ctx.Fail(m.Get("name"), m.Key("name"), "a step needs a non-empty name");
  if (defined.count(p.name))
    ctx.Fail(m.Get("name"), m.Key("name"),
             fmt::format("'{}' is already defined (an input or an earlier step)", p.name));
  p.op = ctx.Choice(m.Need("op"), m.Key("op"), ProgramOpNames());
  if (m.Has("args")) {
    p.args = ctx.StringList(m.Get("args"), m.Key("args"));
    for (const std::string& arg : p.args) {
      if (!defined.count(arg)) {
        std::vector<std::string> names(defined.begin(), defined.end());
        std::optional<std::string> guess = DidYouMean(arg, names);
        ctx.Fail(m.Get("args"), m.Key("args"),
                 fmt::format("{} is not an input or an earlier step{}; defined so far: {}", QuoteForError(arg),
                             guess ? fmt::format(" (did you mean '{}'?)", *guess) : std::string(),
                             JoinFirst(names)));
      }
    }
  }
  if (m.Has("axes")) p.axes = MeshAxes(ctx, m.Get("axes"), m.Key("axes"), s.mesh.mesh);
  p.equation = m.String("equation", "");
  if (m.Has("axis")) p.axis = SmallInt(ctx, m.Get("axis"), m.Key("axis"));
  if (m.Has("split_axis")) p.split_axis = SmallInt(ctx, m.Get("split_axis"), m.Key("split_axis"));
  if (m.Has("concat_axis")) p.concat_axis = SmallInt(ctx, m.Get("concat_axis"), m.Key("concat_axis"));
  p.tiled = m.Bool("tiled", false);
  if (m.Has("pairs")) {
    YAML::Node pairs = m.Get("pairs");
    ctx.RequireSequence(pairs, m.Key("pairs"));
    for (size_t i = 0; i < pairs.size(); ++i) {
      std::string k = fmt::format("{}[{}]", m.Key("pairs"), i);
      std::vector<int64_t> pair = ctx.IntList(pairs[i], k);
      if (pair.size() != 2) ctx.Fail(pairs[i], k, "expected [source, destination]");
      p.pairs.emplace_back(pair[0], pair[1]);
    }
  }
  if (m.Has("dims")) {
    YAML::Node dims = m.Get("dims");
    if (dims.IsSequence() && dims.size() == 0) {
      p.dims = {};
    } else {
      ctx.RequireSequence(dims, m.Key("dims"));
      for (size_t i = 0; i < dims.size(); ++i)
        p.dims.push_back(SmallInt(ctx, dims[i], fmt::format("{}[{}]", m.Key("dims"), i)));
    }
  }
  p.keepdims = m.Bool("keepdims", false);
  auto list = [&](const char* k) {
    std::vector<int64_t> out;
    if (!m.Has(k)) return out;
    YAML::Node n = m.Get(k);
    if (n.IsSequence() && n.size() == 0) return out;
    out = ctx.IntList(n, m.Key(k));
    for (int64_t v : out)
      if (v < -kMaxDim || v > kMaxDim) ctx.Fail(n, m.Key(k), fmt::format("value {} is out of range", v));
    return out;
  };
  p.shape = list("shape");
  p.start = list("start");
  p.limit = list("limit");
  p.strides = list("strides");
  if (m.Has("scalar")) p.scalar = ctx.Number(m.Get("scalar"), m.Key("scalar"));
  p.approximate = m.Bool("approximate", true);
  p.dtype = ParseDTypeAt(ctx, m, "dtype", DType::kF32);
  return p;
}

ShardMapConfig ParseShardMap(const YamlContext& ctx, const YamlMap& m, const Scenario& s,
                             std::vector<ShardMapInputRef>* refs) {
  ShardMapConfig c;
  std::set<std::string> defined;
  YAML::Node inputs = m.Need("inputs");
  ctx.RequireSequence(inputs, m.Key("inputs"));
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string k = fmt::format("{}[{}]", m.Key("inputs"), i);
    ShardMapInputRef ref;
    YAML::Node spec_node;
    bool has_spec = false;
    if (inputs[i].IsScalar()) {
      ref.array = inputs[i].Scalar();
    } else {
      YamlMap im(ctx, inputs[i], k, {"array", "spec"});
      ref.array = ctx.String(im.Need("array"), im.Key("array"));
      if (im.Has("spec")) {
        spec_node = im.Get("spec");
        has_spec = true;
      }
    }
    const ScenarioArray* array = nullptr;
    std::vector<std::string> names;
    for (const ScenarioArray& a : s.arrays) {
      names.push_back(a.name);
      if (a.name == ref.array) array = &a;
    }
    if (array == nullptr) {
      std::optional<std::string> guess = DidYouMean(ref.array, names);
      ctx.Fail(inputs[i], k,
               fmt::format("no array named {} in `arrays:`{}; arrays: {}", QuoteForError(ref.array),
                           guess ? fmt::format(" (did you mean '{}'?)", *guess) : std::string(),
                           names.empty() ? std::string("(none)") : JoinFirst(names)));
    }
    if (!defined.insert(ref.array).second) ctx.Fail(inputs[i], k, fmt::format("input '{}' is listed twice", ref.array));
    ref.spec = array->spec;
    if (has_spec) {
      ref.spec = ParseSpecNode(ctx, spec_node, k + ".spec");
      try {
        NamedSharding(s.mesh.mesh, ref.spec).CheckShape(array->shape);
      } catch (const Error& e) {
        ctx.Rethrow(spec_node, k + ".spec", e);
      }
    }
    refs->push_back(ref);
  }
  YAML::Node steps = m.Need("steps");
  ctx.RequireSequence(steps, m.Key("steps"));
  if (steps.size() == 0) ctx.Fail(steps, m.Key("steps"), "a program needs at least one step");
  for (size_t i = 0; i < steps.size(); ++i) {
    ProgramStep step = ParseStep(ctx, steps[i], fmt::format("{}[{}]", m.Key("steps"), i), s, defined);
    defined.insert(step.name);
    c.steps.push_back(std::move(step));
  }
  YAML::Node outputs = m.Need("outputs");
  ctx.RequireSequence(outputs, m.Key("outputs"));
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string k = fmt::format("{}[{}]", m.Key("outputs"), i);
    YamlMap om(ctx, outputs[i], k, {"name", "spec"});
    ProgramOutput out;
    out.name = ctx.String(om.Need("name"), om.Key("name"));
    if (!defined.count(out.name))
      ctx.Fail(om.Get("name"), om.Key("name"), fmt::format("'{}' is not a value of the program", out.name));
    out.spec = ParseSpecNode(ctx, om.Need("spec"), om.Key("spec"));
    c.outputs.push_back(out);
  }
  if (c.outputs.empty()) ctx.Fail(outputs, m.Key("outputs"), "list at least one output");
  c.check_vma = m.Bool("check_vma", c.check_vma);
  c.check = m.Bool("check", c.check);
  c.rtol = Tolerance(ctx, m, "rtol", c.rtol);
  c.atol = Tolerance(ctx, m, "atol", c.atol);
  return c;
}

// --- mlp / transformer_block ---------------------------------------------------------------------------------

LayerSharding ParseSharding(const YamlContext& ctx, const YamlMap& m, const Scenario& s) {
  if (!m.Has("sharding")) return LayerSharding{};
  YAML::Node node = m.Get("sharding");
  if (node.IsScalar()) {
    ctx.Choice(node, m.Key("sharding"), {"rules"});
    if (s.rules.logical_axis_rules.empty())
      ctx.Fail(node, m.Key("sharding"), "sharding: rules needs rules.logical_axis_rules in the scenario");
    LayerSharding sh = LayerSharding::FromLogicalRules(s.rules.logical_axis_rules);
    for (const auto* axes : {&sh.batch_axes, &sh.fsdp_axes, &sh.tensor_axes})
      for (const std::string& axis : *axes)
        if (!s.mesh.mesh.HasAxis(axis))
          ctx.Fail(node, m.Key("sharding"),
                   fmt::format("the logical axis rules map onto mesh axis '{}', which the mesh {} lacks", axis,
                               PyTuple(s.mesh.mesh.axis_names())));
    return sh;
  }
  YamlMap sm(ctx, node, m.Key("sharding"), {"batch_axes", "fsdp_axes", "tensor_axes", "sequence_parallel"});
  LayerSharding sh;
  if (sm.Has("batch_axes")) sh.batch_axes = MeshAxes(ctx, sm.Get("batch_axes"), sm.Key("batch_axes"), s.mesh.mesh);
  if (sm.Has("fsdp_axes")) sh.fsdp_axes = MeshAxes(ctx, sm.Get("fsdp_axes"), sm.Key("fsdp_axes"), s.mesh.mesh);
  if (sm.Has("tensor_axes")) sh.tensor_axes = MeshAxes(ctx, sm.Get("tensor_axes"), sm.Key("tensor_axes"), s.mesh.mesh);
  sh.sequence_parallel = sm.Bool("sequence_parallel", false);
  if (sh.sequence_parallel && sh.tensor_axes.empty())
    ctx.Fail(sm.Get("sequence_parallel"), sm.Key("sequence_parallel"), "sequence parallelism needs tensor_axes");
  return sh;
}

template <typename Config>
void ParseLayerCommon(const YamlContext& ctx, const YamlMap& m, const Scenario& s, Config* c) {
  c->batch = Positive(ctx, m, "batch", c->batch);
  c->seq = Positive(ctx, m, "seq", c->seq);
  c->d_model = Positive(ctx, m, "d_model", c->d_model);
  c->d_ff = Positive(ctx, m, "d_ff", c->d_ff);
  c->dtype = ParseDTypeAt(ctx, m, "dtype", c->dtype);
  if (c->dtype != DType::kF32 && c->dtype != DType::kF64 && c->dtype != DType::kBF16 && c->dtype != DType::kF16)
    ctx.Fail(m.Get("dtype"), m.Key("dtype"), "layers need a floating dtype: float32, float64, bfloat16, float16");
  c->backward = m.Bool("backward", c->backward);
  c->sharding = ParseSharding(ctx, m, s);
  c->seed = static_cast<uint64_t>(NonNegative(ctx, m, "seed", 0, int64_t{1} << 62));
  c->rtol = Tolerance(ctx, m, "rtol", c->rtol);
  c->atol = Tolerance(ctx, m, "atol", c->atol);
  c->check = m.Bool("check", c->check);
  // Elements of the largest activation / weight, to keep a fuzzed file from asking for petabytes.
  int64_t biggest = std::max(c->batch * c->seq, c->d_model) * std::max(c->d_ff, c->d_model);
  if (c->batch > kMaxDim / c->seq || biggest > (int64_t{1} << 44) || biggest < 0)
    ctx.Fail(m.node(), m.path(), "the layer's sizes are too large to simulate (over 2^44 elements in one array)");
}

// --- partition ----------------------------------------------------------------------------------------------

PartitionConfig ParsePartition(const YamlContext& ctx, const YamlMap& m, const Scenario& s) {
  PartitionConfig c;
  c.logical_rules = s.rules.logical_axis_rules;
  c.regex_rules = s.rules.partition_rules;
  if (m.Has("correction")) {
    std::string mode = ctx.Choice(m.Get("correction"), m.Key("correction"), {"none", "eformer", "keep-most"});
    c.correction = ParseCorrectionMode(mode);
  }
  std::set<std::string> names;
  if (m.Bool("include_arrays", false)) {
    for (const ScenarioArray& a : s.arrays) {
      PartitionParam p;
      p.name = a.name;
      p.shape = a.shape;
      p.dtype = a.dtype;
      if (a.logical_axes) p.logical_axes = a.logical_axes;
      else p.spec = a.spec;
      names.insert(p.name);
      c.params.push_back(std::move(p));
    }
  }
  if (m.Has("params")) {
    YAML::Node params = m.Get("params");
    ctx.RequireSequence(params, m.Key("params"));
    for (size_t i = 0; i < params.size(); ++i) {
      std::string k = fmt::format("{}[{}]", m.Key("params"), i);
      YamlMap pm(ctx, params[i], k, {"name", "shape", "dtype", "spec", "logical_axes"});
      PartitionParam p;
      p.name = ctx.String(pm.Need("name"), pm.Key("name"));
      if (!names.insert(p.name).second)
        ctx.Fail(pm.Get("name"), pm.Key("name"), fmt::format("'{}' is listed twice", p.name));
      YAML::Node shape = pm.Need("shape");
      if (!(shape.IsSequence() && shape.size() == 0)) p.shape = ctx.IntList(shape, pm.Key("shape"));
      if (p.shape.size() > 16) ctx.Fail(shape, pm.Key("shape"), "rank above 16");
      for (int64_t d : p.shape)
        if (d < 0 || d > kMaxDim) ctx.Fail(shape, pm.Key("shape"), fmt::format("dimension {} is out of range", d));
      p.dtype = ParseDTypeAt(ctx, pm, "dtype", DType::kF32);
      if (pm.Has("spec") && pm.Has("logical_axes"))
        ctx.Fail(params[i], k, "give spec or logical_axes, not both");
      if (pm.Has("spec")) {
        p.spec = ParseSpecNode(ctx, pm.Get("spec"), pm.Key("spec"));
      }
      if (pm.Has("logical_axes")) {
        LogicalAxes axes;
        YAML::Node ln = pm.Get("logical_axes");
        ctx.RequireSequence(ln, pm.Key("logical_axes"));
        for (size_t j = 0; j < ln.size(); ++j) {
          if (ln[j].IsNull()) axes.push_back(LogicalAxis::None());
          else axes.emplace_back(ctx.String(ln[j], fmt::format("{}[{}]", pm.Key("logical_axes"), j)));
        }
        p.logical_axes = axes;
      }
      c.params.push_back(std::move(p));
    }
  }
  if (c.params.empty()) ctx.Fail(m.node(), m.path(), "a partition workload needs `params:` or `include_arrays: true`");
  return c;
}

// --- model --------------------------------------------------------------------------------------------------

// The value at `path` ("parallel.tensor_axes") under a workload's mapping, or the deepest mapping on the way when
// the key is not written (a default broke the rule); `key` gets the path written so far.
YAML::Node NodeAtPath(const YAML::Node& workload, const std::string& path, std::string* key) {
  YAML::Node at;
  at.reset(workload);  // reset, not =: yaml-cpp's assignment would write into the tree
  for (const std::string& part : Split(path, '.')) {
    if (part.empty() || !at.IsMap()) break;
    const YAML::Node next = static_cast<const YAML::Node&>(at)[part];
    if (!next.IsDefined()) break;
    at.reset(next);
    *key += "." + part;
  }
  return at;
}

// The value of key `k` named in `names` (the enum's own table, model/config.h), or `fallback` without the key.
template <typename Enum, size_t N>
Enum ParseEnum(const YamlContext& ctx, const YamlMap& m, std::string_view k, Enum fallback,
               const EnumName<Enum> (&names)[N]) {
  if (!m.Has(k)) return fallback;
  return *ParseName(names, ctx.Choice(m.Get(k), m.Key(k), NamesOf(names)));
}

MoeConfig ParseMoe(const YamlContext& ctx, const YamlMap& parent) {
  MoeConfig moe;
  if (!parent.Has("moe")) return moe;
  YamlMap m(ctx, parent.Get("moe"), parent.Key("moe"),
            {"experts", "top_k", "capacity_factor", "d_ff", "every", "first_dense", "shared_d_ff",
             "shared_expert_overlap", "router"});
  moe.experts = Positive(ctx, m, "experts", 0, 1 << 20);
  if (moe.experts == 0) ctx.Fail(m.node(), m.Key("experts"), "missing required key (the number of experts)");
  moe.top_k = Positive(ctx, m, "top_k", moe.top_k, moe.experts);
  if (m.Has("capacity_factor"))
    moe.capacity_factor = ctx.NumberIn(m.Get("capacity_factor"), m.Key("capacity_factor"), 0, 1e6);
  moe.d_ff = Positive(ctx, m, "d_ff", 0);
  moe.every = Positive(ctx, m, "every", moe.every, 1 << 20);
  moe.first_dense = NonNegative(ctx, m, "first_dense", 0, 1 << 20);
  moe.shared_d_ff = NonNegative(ctx, m, "shared_d_ff", 0);
  moe.shared_expert_overlap = m.Bool("shared_expert_overlap", moe.shared_expert_overlap);
  moe.router = ParseEnum(ctx, m, "router", moe.router, kMoeRouterNames);
  return moe;
}

MlaConfig ParseMla(const YamlContext& ctx, const YamlMap& parent) {
  MlaConfig a;
  if (!parent.Has("mla")) return a;
  YamlMap m(ctx, parent.Get("mla"), parent.Key("mla"),
            {"q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_rope_head_dim", "v_head_dim", "recompute_up_proj"});
  if (!m.Has("kv_lora_rank"))
    ctx.Fail(m.node(), m.Key("kv_lora_rank"), "missing required key (the compressed K/V width)");
  a.kv_lora_rank = Positive(ctx, m, "kv_lora_rank", 0, 1 << 20);
  a.q_lora_rank = NonNegative(ctx, m, "q_lora_rank", 0, 1 << 20);
  a.qk_head_dim = Positive(ctx, m, "qk_head_dim", a.qk_head_dim, 1 << 20);
  a.qk_rope_head_dim = Positive(ctx, m, "qk_rope_head_dim", a.qk_rope_head_dim, 1 << 20);
  a.v_head_dim = Positive(ctx, m, "v_head_dim", a.v_head_dim, 1 << 20);
  a.recompute_up_proj = m.Bool("recompute_up_proj", a.recompute_up_proj);
  return a;
}

AttentionWindow ParseAttentionWindow(const YamlContext& ctx, const YamlMap& parent) {
  AttentionWindow w;
  if (!parent.Has("attention_window")) return w;
  YamlMap m(ctx, parent.Get("attention_window"), parent.Key("attention_window"), {"window", "global_every"});
  if (!m.Has("window")) ctx.Fail(m.node(), m.Key("window"), "missing required key (the keys each query sees)");
  w.window = Positive(ctx, m, "window", 0, int64_t{1} << 40);
  w.global_every = NonNegative(ctx, m, "global_every", 0, 1 << 20);
  return w;
}

ModelParallelism ParseModelParallelism(const YamlContext& ctx, const YamlMap& parent, const Scenario& s) {
  ModelParallelism p;
  if (!parent.Has("parallel")) return p;
  YamlMap m(ctx, parent.Get("parallel"), parent.Key("parallel"),
            {"data_axes", "zero_stage", "fsdp", "tensor_axes", "sequence_parallel", "context_axes", "pipeline_axes",
             "schedule", "virtual_stages", "first_stage_layers", "last_stage_layers", "account_for_embedding",
             "account_for_loss", "expert_axes", "zero_axes", "reshard_after_forward", "pipeline_transfers"});
  const Mesh& mesh = s.mesh.mesh;
  for (auto [key, axes] : {std::pair{"data_axes", &p.data_axes}, {"tensor_axes", &p.tensor_axes},
                           {"context_axes", &p.context_axes}, {"pipeline_axes", &p.pipeline_axes},
                           {"expert_axes", &p.expert_axes}, {"zero_axes", &p.zero_axes}}) {
    if (m.Has(key)) *axes = MeshAxes(ctx, m.Get(key), m.Key(key), mesh);
  }
  p.zero_stage = static_cast<int>(NonNegative(ctx, m, "zero_stage", 0, 3));
  if (m.Bool("fsdp", false)) {
    if (m.Has("zero_stage") && p.zero_stage != 3)
      ctx.Fail(m.Get("fsdp"), m.Key("fsdp"),
               fmt::format("fsdp: true is zero_stage 3, but zero_stage is {}", p.zero_stage));
    p.zero_stage = 3;
  }
  p.reshard_after_forward = m.Bool("reshard_after_forward", true);
  if (!p.reshard_after_forward && p.zero_stage != 3)
    ctx.Fail(m.Get("reshard_after_forward"), m.Key("reshard_after_forward"),
             fmt::format("reshard_after_forward: false applies to zero_stage 3 (fsdp: true) only; zero_stage is {}",
                         p.zero_stage));
  p.sequence_parallel = m.Bool("sequence_parallel", false);
  p.schedule = ParseEnum(ctx, m, "schedule", p.schedule, kPipelineScheduleNames);
  p.pipeline_transfers =
      ParseEnum(ctx, m, "pipeline_transfers", p.pipeline_transfers, kPipelineTransfersNames);
  p.virtual_stages = Positive(ctx, m, "virtual_stages", 1, 1 << 20);
  p.first_stage_layers = NonNegative(ctx, m, "first_stage_layers", -1, 1 << 20);
  p.last_stage_layers = NonNegative(ctx, m, "last_stage_layers", -1, 1 << 20);
  p.embedding_in_split = m.Bool("account_for_embedding", false);
  p.loss_in_split = m.Bool("account_for_loss", false);
  return p;
}

// `activation:`, or MaxText's `mlp_activations:` ([silu, linear]: SwiGLU; [gelu]: GELU).
Activation ParseActivation(const YamlContext& ctx, const YamlMap& m, const std::string& k, Activation fallback) {
  if (k != ModelKeyIn(ModelKeyFamily::kMaxText, "activation")) return ParseEnum(ctx, m, k, fallback, kActivationNames);
  const YAML::Node node = m.Get(k);
  const std::vector<std::string> names =
      node.IsScalar() ? std::vector<std::string>{node.Scalar()} : ctx.StringList(node, m.Key(k));
  if (names == std::vector<std::string>{"silu", "linear"}) return Activation::kSwiglu;
  if (names == std::vector<std::string>{"gelu"}) return Activation::kGelu;
  ctx.Fail(node, m.Key(k),
           fmt::format("MaxText's mlp_activations [{}] has no counterpart: the model computes [silu, linear] (SwiGLU) "
                       "or [gelu] (GELU)", fmt::join(names, ", ")));
}

// `recompute:`, or NeMo's `recompute_granularity:` (null: none, selective, full).
Recompute ParseRecompute(const YamlContext& ctx, const YamlMap& m, const std::string& k, Recompute fallback) {
  if (k != ModelKeyIn(ModelKeyFamily::kNemo, "recompute")) return ParseEnum(ctx, m, k, fallback, kRecomputeNames);
  if (m.Get(k).IsNull()) return Recompute::kNone;
  return ctx.Choice(m.Get(k), m.Key(k), {"selective", "full"}) == "full" ? Recompute::kFull : Recompute::kSelective;
}

ModelConfig ParseModel(const YamlContext& ctx, const YamlMap& m, const Scenario& s) {
  ModelConfig c;
  const auto key = [&](std::string_view field) { return ModelFieldKey(ctx, m, field); };  // any family's name
  c.vocab = Positive(ctx, m, key("vocab"), c.vocab);
  c.d_model = Positive(ctx, m, key("d_model"), c.d_model);
  c.layers = Positive(ctx, m, key("layers"), c.layers, 1 << 20);
  c.heads = Positive(ctx, m, key("heads"), c.heads, 1 << 20);
  c.kv_heads = Positive(ctx, m, key("kv_heads"), 0, 1 << 20);
  c.head_dim = Positive(ctx, m, key("head_dim"), 0, 1 << 20);
  c.d_ff = Positive(ctx, m, key("d_ff"), c.d_ff);
  c.activation = ParseActivation(ctx, m, key("activation"), c.activation);
  c.norm = ParseEnum(ctx, m, "norm", c.norm, kNormNames);
  c.position = ParseEnum(ctx, m, "position", c.position, kPositionEmbeddingNames);
  c.tied_embeddings = m.Bool("tied_embeddings", c.tied_embeddings);
  c.dropout = m.Bool("dropout", c.dropout);
  c.flash_attention = m.Bool("flash_attention", c.flash_attention);
  c.seq = Positive(ctx, m, key("seq"), c.seq);
  c.global_batch = Positive(ctx, m, "global_batch", c.global_batch);
  c.micro_batch = Positive(ctx, m, "micro_batch", c.micro_batch);
  if (m.Has("dtype")) {
    // Any dtype name (fp8 included: the prediction prices it; the data run computes in float32), then the compute
    // dtypes.
    const std::string text = ctx.String(m.Get("dtype"), m.Key("dtype"));
    try {
      c.dtype = ParseDType(text);
    } catch (const Error& e) {
      ctx.Fail(m.Get("dtype"), m.Key("dtype"), e.message());
    }
    if (c.dtype != DType::kBF16 && c.dtype != DType::kF16 && c.dtype != DType::kF8E4M3FN && c.dtype != DType::kF8E5M2)
      ctx.Fail(m.Get("dtype"), m.Key("dtype"),
               "the compute dtype must be bfloat16, float16, float8_e4m3fn or float8_e5m2 (master weights are fp32)");
  }
  c.moe = ParseMoe(ctx, m);
  c.mla = ParseMla(ctx, m);
  c.attention_window = ParseAttentionWindow(ctx, m);
  c.mtp_layers = NonNegative(ctx, m, "mtp_layers", 0, 1 << 10);
  c.parallel = ParseModelParallelism(ctx, m, s);
  c.recompute = ParseRecompute(ctx, m, key("recompute"), c.recompute);
  c.stack = ParseEnum(ctx, m, "stack", c.stack, kSoftwareStackNames);
  c.seed = static_cast<uint64_t>(NonNegative(ctx, m, "seed", 0, int64_t{1} << 62));
  c.rtol = Tolerance(ctx, m, "rtol", c.rtol);
  c.atol = Tolerance(ctx, m, "atol", c.atol);
  c.check = m.Bool("check", c.check);
  return c;
}

// The `kind:` of a workload map, read first: it decides which keys are valid. (A default-constructed YAML::Node is
// a defined null without a place in the file: "found" is tracked apart.)
WorkloadKind WorkloadKindOf(const YamlContext& ctx, const YAML::Node& node, const std::string& key);

// `kind`'s name when no earlier workload has that name, else kind_2, kind_3, ...
std::string DefaultWorkloadName(WorkloadKind kind, const Scenario& s) {
  std::string name(WorkloadKindName(kind));
  for (int n = 2; std::any_of(s.workloads.begin(), s.workloads.end(),
                              [&](const ScenarioWorkload& o) { return o.name == name; });
       ++n)
    name = fmt::format("{}_{}", WorkloadKindName(kind), n);
  return name;
}

MlpConfig ParseMlp(const YamlContext& ctx, const YamlMap& m, const Scenario& s) {
  MlpConfig c;
  ParseLayerCommon(ctx, m, s, &c);
  if (m.Has("activation")) c.activation = ctx.Choice(m.Get("activation"), m.Key("activation"), {"gelu", "relu"});
  return c;
}

TransformerBlockConfig ParseTransformerBlock(const YamlContext& ctx, const YamlMap& m, const YAML::Node& node,
                                             const Scenario& s) {
  TransformerBlockConfig c;
  ParseLayerCommon(ctx, m, s, &c);
  c.heads = Positive(ctx, m, "heads", c.heads);
  if (c.d_model % c.heads != 0)
    ctx.Fail(m.Has("heads") ? m.Get("heads") : node, m.Key("heads"),
             fmt::format("heads = {} does not divide d_model = {}", c.heads, c.d_model));
  return c;
}

// The model, validated once against the scenario's mesh (the cross-field checks at the workload's line): what runs
// it trusts the result. A calibration profile prices one stack: a model on another stack is refused.
ValidatedModel ParseValidatedModel(const YamlContext& ctx, const YamlMap& m, const YAML::Node& node,
                                   const std::string& key, const Scenario& s, const std::string& name) {
  ModelConfig c = ParseModel(ctx, m, s);
  ApplyModelStyle(ctx, m, s, &c);
  c.name = name;
  std::optional<ValidatedModel> model;
  try {
    model.emplace(ValidateModel(std::move(c), s.mesh.mesh));
  } catch (const ModelConfigError& e) {  // at the field's own line:col, or the MaxText / NeMo key that set it
    if (const std::string style_key = StyleKeyForField(m, e.field()); !style_key.empty())
      ctx.Rethrow(m.Get(style_key), m.Key(style_key), e);
    if (const std::string written = ModelFieldKey(ctx, m, e.field()); written != e.field())
      ctx.Rethrow(m.Get(written), m.Key(written), e);  // the field under MaxText's or NeMo's name
    std::string field_key = key;
    const YAML::Node at = NodeAtPath(node, e.field(), &field_key);
    ctx.Rethrow(at, field_key, e);
  } catch (const Error& e) {
    ctx.Rethrow(node, key, e);
  }
  if (s.topology.calibration) {
    try {
      CheckCalibrationFits(*s.topology.calibration, "topology.calibration", s.topology.topology->device_kind(),
                           ModelStack(*model));
    } catch (const Error& e) {  // at the model's `stack:`, or the workload when it has none
      ctx.Rethrow(m.Has("stack") ? m.Get("stack") : node, m.Key("stack"), e);
    }
  }
  return std::move(*model);
}

// The model's own keys and MaxText's and NeMo's (scenario/internal/model_styles.h).
std::vector<std::string> ModelKeys() {
  std::vector<std::string> keys = {"vocab", "d_model", "layers", "heads", "kv_heads", "head_dim", "d_ff",
                                   "activation", "norm", "position", "tied_embeddings", "dropout", "flash_attention",
                                   "seq", "global_batch", "micro_batch", "dtype", "moe", "mla", "attention_window",
                                   "mtp_layers", "parallel", "recompute", "stack", "seed", "rtol", "atol", "check"};
  keys.insert(keys.end(), ModelFamilyKeys().begin(), ModelFamilyKeys().end());
  keys.insert(keys.end(), ModelStyleKeys().begin(), ModelStyleKeys().end());
  return keys;
}

// The fields that decide the model's shape and step which workload `m` leaves to their defaults, as "field: value"
// (written in its key family's names); the batch and recompute only when no MaxText / NeMo parallelism sets them.
std::vector<std::string> ModelDefaults(const YamlContext& ctx, const YamlMap& m, const ModelConfig& c) {
  const ModelKeyFamily family = ModelKeyFamilyOf(ctx, m);
  const bool style = std::any_of(m.keys().begin(), m.keys().end(), [](const std::string& k) {
    return std::find(ModelStyleKeys().begin(), ModelStyleKeys().end(), k) != ModelStyleKeys().end();
  });
  const std::string activation(ActivationName(c.activation)), recompute(RecomputeName(c.recompute));
  const std::vector<std::pair<std::string_view, std::string>> fields = {
      {"vocab", std::to_string(c.vocab)},
      {"d_model", std::to_string(c.d_model)},
      {"layers", std::to_string(c.layers)},
      {"heads", std::to_string(c.heads)},
      {"d_ff", std::to_string(c.d_ff)},
      {"activation", family == ModelKeyFamily::kMaxText
                         ? (c.activation == Activation::kSwiglu ? "[silu, linear]" : "[gelu]")
                         : activation},
      {"norm", std::string(NormName(c.norm))},
      {"position", std::string(PositionEmbeddingName(c.position))},
      {"tied_embeddings", c.tied_embeddings ? "true" : "false"},
      {"dropout", c.dropout ? "true" : "false"},
      {"seq", std::to_string(c.seq)},
      {"dtype", std::string(DTypeName(c.dtype))},
      {"global_batch", style ? "" : std::to_string(c.global_batch)},
      {"micro_batch", style ? "" : std::to_string(c.micro_batch)},
      {"recompute", style ? "" : (family == ModelKeyFamily::kNemo && recompute == "none" ? "null" : recompute)}};
  std::vector<std::string> out;
  for (const auto& [field, value] : fields) {
    if (value.empty() || m.Has(ModelFieldKey(ctx, m, field))) continue;
    out.push_back(fmt::format("{}: {}", ModelKeyIn(family, field), value));
  }
  return out;
}

// Each kind's keys besides the common ones (WithCommon).
const std::vector<std::string>& KeysOfKind(WorkloadKind kind) {
  static const std::map<WorkloadKind, std::vector<std::string>> keys = {
      {WorkloadKind::kCollectives,
       {"ops", "axes", "sizes", "dtype", "iterations", "warmup", "check", "ppermute_shift", "algorithm",
        "protocol"}},
      {WorkloadKind::kShardMap, {"inputs", "steps", "outputs", "check_vma", "check", "rtol", "atol"}},
      {WorkloadKind::kMlp,
       {"batch", "seq", "d_model", "d_ff", "dtype", "activation", "backward", "sharding", "seed", "rtol", "atol",
        "check"}},
      {WorkloadKind::kTransformerBlock,
       {"batch", "seq", "d_model", "d_ff", "heads", "dtype", "backward", "sharding", "seed", "rtol", "atol",
        "check"}},
      {WorkloadKind::kModel, ModelKeys()},
      {WorkloadKind::kHlo,
       {"file", "inputs", "device_assignment", "expected", "rtol", "atol", "overlap_collectives", "narrow_types",
        "model_flops_per_step", "tokens_per_step", "max_while_iterations", "max_while_seconds"}},
      {WorkloadKind::kPartition, {"params", "include_arrays", "correction"}},
  };
  return keys.at(kind);
}

// The config of w->kind from its map, named w->name (shard_map: its inputs go to w->shard_map_inputs).
decltype(ScenarioWorkload::config) ParseWorkloadConfig(const YamlContext& ctx, const YamlMap& m, const YAML::Node& node,
                                   const std::string& key, const Scenario& s, ScenarioWorkload* w) {
  auto named = [&](auto c) -> decltype(ScenarioWorkload::config) {
    c.name = w->name;
    return c;
  };
  switch (w->kind) {
    case WorkloadKind::kCollectives: return named(ParseCollectives(ctx, m, s));
    case WorkloadKind::kShardMap: return named(ParseShardMap(ctx, m, s, &w->shard_map_inputs));
    case WorkloadKind::kMlp: return named(ParseMlp(ctx, m, s));
    case WorkloadKind::kTransformerBlock: return named(ParseTransformerBlock(ctx, m, node, s));
    case WorkloadKind::kModel: {
      w->model_keys = ModelKeyFamilyOf(ctx, m);
      ValidatedModel model = ParseValidatedModel(ctx, m, node, key, s, w->name);
      w->model_defaults = ModelDefaults(ctx, m, model.config());
      return model;
    }
    case WorkloadKind::kHlo: return named(ParseHloWorkload(ctx, m, s));
    case WorkloadKind::kPartition: break;
  }
  return named(ParsePartition(ctx, m, s));
}

WorkloadKind WorkloadKindOf(const YamlContext& ctx, const YAML::Node& node, const std::string& key) {
  std::optional<YAML::Node> kind_node;
  for (YAML::const_iterator it = node.begin(); it != node.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == "kind") kind_node = it->second;
  const std::vector<std::string> kinds = NamesOf(kWorkloadKindNames);
  if (!kind_node) ctx.Fail(node, key + ".kind", fmt::format("missing required key; one of {}", fmt::join(kinds, ", ")));
  return *ParseName(kWorkloadKindNames, ctx.Choice(*kind_node, key + ".kind", kinds));
}

}  // namespace

ScenarioWorkload ParseWorkload(const YamlContext& ctx, const YAML::Node& node, const std::string& key,
                               const Scenario& s) {
  if (!node.IsMap()) ctx.Fail(node, key, "expected a mapping with a `kind:` key");
  ScenarioWorkload w;
  w.kind = WorkloadKindOf(ctx, node, key);
  w.location = ctx.Location(node);
  const bool model = w.kind == WorkloadKind::kModel;
  const std::vector<std::string> keys = WithCommon(KeysOfKind(w.kind));
  YamlMap m(ctx, node, key, keys, false, model ? ModelValidKeysText(keys) : std::string());
  w.name = m.String(model ? ModelFieldKey(ctx, m, "name") : "name", DefaultWorkloadName(w.kind, s));
  w.config = ParseWorkloadConfig(ctx, m, node, key, s, &w);
  if (w.name.empty()) ctx.Fail(node, key + ".name", "a workload name must not be empty");
  return w;
}

}  // namespace spmdsim
