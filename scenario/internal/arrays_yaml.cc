// `arrays:` of a scenario file (scenario/internal/scenario_parsers.h).
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/strings.h"
#include "partition/named_sharding.h"
#include "scenario/internal/scenario_parsers.h"

namespace spmdsim {
namespace {

// `data:` (zeros, ones, iota, random, npy, or a path ending in .npy) onto init->kind (and init->path for a
// path); returns the kind's name for messages.
std::string ParseDataKind(const YamlContext& ctx, const YamlMap& m, ArrayInit* init) {
  std::string data = "zeros";
  if (m.Has("data")) {
    std::string d = ctx.String(m.Get("data"), m.Key("data"));
    data = d.size() > 4 && d.substr(d.size() - 4) == ".npy" ? "npy" : d;
    if (data == "npy" && d != "npy") {
      if (m.Has("file")) ctx.Fail(m.Get("file"), m.Key("file"), "give the .npy path in `data` or `file`, not both");
      init->path = d;
    }
    if (data != "npy") data = ctx.Choice(m.Get("data"), m.Key("data"), {"zeros", "ones", "iota", "random", "npy"});
  }
  init->kind = data == "zeros" ? ArrayInit::Kind::kZeros
               : data == "ones" ? ArrayInit::Kind::kOnes
               : data == "iota" ? ArrayInit::Kind::kIota
               : data == "random" ? ArrayInit::Kind::kRandom
                                  : ArrayInit::Kind::kNpy;
  return data;
}

// seed, distribution and scale apply to random data only; file to npy only.
void CheckInitKeys(const YamlContext& ctx, const YamlMap& m, const ArrayInit& init, const std::string& data) {
  for (const char* k : {"seed", "distribution", "scale"})
    if (m.Has(k) && init.kind != ArrayInit::Kind::kRandom)
      ctx.Fail(m.Get(k), m.Key(k), fmt::format("'{}' applies to data: random only (data is {})", k, data));
  if (m.Has("file") && init.kind != ArrayInit::Kind::kNpy)
    ctx.Fail(m.Get("file"), m.Key("file"), fmt::format("'file' applies to data: npy only (data is {})", data));
}

void ParseRandomInit(const YamlContext& ctx, const YamlMap& m, ArrayInit* init) {
  int64_t seed = m.Int("seed", 0);
  if (seed < 0) ctx.Fail(m.Get("seed"), m.Key("seed"), "expected an integer >= 0");
  init->random.seed = static_cast<uint64_t>(seed);
  if (m.Has("distribution"))
    init->random.distribution =
        ctx.Choice(m.Get("distribution"), m.Key("distribution"), {"normal", "uniform"}) == "normal"
            ? RandomDistribution::kNormal
            : RandomDistribution::kUniform;
  if (m.Has("scale")) init->random.scale = ctx.NumberIn(m.Get("scale"), m.Key("scale"), 0, 1e30);
}

// Reads the array's .npy file (resolved against `base_dir`) and reconciles its dtype with `dtype:`.
void LoadNpyInit(const YamlContext& ctx, const YamlMap& m, const std::string& base_dir, ScenarioArray* a) {
  YAML::Node where = m.Has("file") ? m.Get("file") : m.Get("data");
  if (m.Has("file")) a->init.path = ctx.String(m.Get("file"), m.Key("file"));
  if (a->init.path.empty()) ctx.Fail(m.Get("data"), m.Key("data"), "data: npy needs `file: <path>.npy`");
  std::filesystem::path p(a->init.path);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  a->init.path = p.lexically_normal().string();
  try {
    a->init.npy = ReadNpyHeader(a->init.path);
  } catch (const Error& e) {
    ctx.Rethrow(where, m.Key(m.Has("file") ? "file" : "data"), e);
  }
  const DType file_dtype = a->init.npy->dtype;
  if (m.Has("dtype") && file_dtype != a->dtype && !(a->dtype == DType::kBF16 && file_dtype == DType::kF32))
    ctx.Fail(m.Get("dtype"), m.Key("dtype"),
             fmt::format("the array is {} but {} holds {}", DTypeName(a->dtype), a->init.path, DTypeName(file_dtype)));
  if (!m.Has("dtype")) a->dtype = file_dtype;
}

// `shape:` (checked against the limits and an .npy file's shape), or the .npy file's shape.
void ParseArrayShape(const YamlContext& ctx, const YAML::Node& node, const YamlMap& m, ScenarioArray* a) {
  if (m.Has("shape")) {
    YAML::Node sh = m.Get("shape");
    if (sh.IsSequence() && sh.size() == 0) {
      a->shape = {};
    } else {
      a->shape = ctx.IntList(sh, m.Key("shape"));
    }
    if (static_cast<int64_t>(a->shape.size()) > kMaxScenarioRank)
      ctx.Fail(sh, m.Key("shape"), fmt::format("rank {} is above the limit {}", a->shape.size(), kMaxScenarioRank));
    int64_t n = 1;
    for (int64_t d : a->shape) {
      if (d < 0) ctx.Fail(sh, m.Key("shape"), fmt::format("dimension {} is negative", d));
      if (d > 0 && n > kMaxScenarioElements / d)
        ctx.Fail(sh, m.Key("shape"), fmt::format("more than 2^40 elements; shape {}", PyTuple(a->shape)));
      n *= d;
    }
    if (a->init.npy && a->init.npy->shape != a->shape)
      ctx.Fail(sh, m.Key("shape"),
               fmt::format("shape {} differs from the shape {} stored in {}", PyTuple(a->shape),
                           PyTuple(a->init.npy->shape), a->init.path));
  } else if (a->init.npy) {
    a->shape = a->init.npy->shape;
  } else {
    ctx.Fail(node, m.Key("shape"), "missing required key (a list of dimensions such as [8, 16])");
  }
}

// `logical_axes:` as "('batch', None)" text or a list of names and nulls.
LogicalAxes ParseLogicalAxesNode(const YamlContext& ctx, const YAML::Node& node, const std::string& key) {
  LogicalAxes axes;
  if (node.IsScalar()) {
    try {
      axes = ParseLogicalAxes(node.Scalar());
    } catch (const Error& e) {
      ctx.Rethrow(node, key, e);
    }
  } else {
    ctx.RequireSequence(node, key);
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node& n = node[i];
      if (n.IsNull()) axes.push_back(LogicalAxis::None());
      else axes.emplace_back(ctx.String(n, fmt::format("{}[{}]", key, i)));
    }
  }
  return axes;
}

// `semantic_axes:` as text or a list of short names, nulls and lists (composites).
SemanticAxes ParseSemanticAxesNode(const YamlContext& ctx, const YAML::Node& node, const std::string& key) {
  SemanticAxes axes;
  if (node.IsScalar()) {
    try {
      axes = ParseSemanticAxes(node.Scalar());
    } catch (const Error& e) {
      ctx.Rethrow(node, key, e);
    }
  } else {
    ctx.RequireSequence(node, key);
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node& n = node[i];
      std::string k = fmt::format("{}[{}]", key, i);
      if (n.IsNull()) axes.emplace_back();
      else if (n.IsSequence()) axes.push_back(SemanticAxis::Composite(ctx.StringList(n, k)));
      else axes.emplace_back(SemanticAxisFromShortName(ctx.String(n, k)));
    }
  }
  return axes;
}

// Where the array's spec came from, for messages about it.
struct SpecSource {
  YAML::Node node;
  std::string key;
};

// The array's spec from at most one of `spec`, `logical_axes` (through the logical axis rules) and
// `semantic_axes` (through rules.partition_axis); P() when none is given.
SpecSource ParseArraySpec(const YamlContext& ctx, const YAML::Node& node, const std::string& key, const YamlMap& m,
                          const Scenario& s, ScenarioArray* a) {
  int given = (m.Has("spec") ? 1 : 0) + (m.Has("logical_axes") ? 1 : 0) + (m.Has("semantic_axes") ? 1 : 0);
  if (given > 1) ctx.Fail(node, key, "give at most one of spec, logical_axes, semantic_axes");
  SpecSource source{node, m.Key("spec")};
  if (m.Has("spec")) {
    source.node = m.Get("spec");
    a->spec = ParseSpecNode(ctx, source.node, source.key);
  } else if (m.Has("logical_axes")) {
    source = {m.Get("logical_axes"), m.Key("logical_axes")};
    a->logical_axes = ParseLogicalAxesNode(ctx, source.node, source.key);
    try {
      a->spec = LogicalToMeshAxes(*a->logical_axes, s.rules.logical_axis_rules);
    } catch (const Error& e) {
      ctx.Rethrow(source.node, source.key, e);
    }
  } else if (m.Has("semantic_axes")) {
    source = {m.Get("semantic_axes"), m.Key("semantic_axes")};
    if (!s.rules.partition_axis)
      ctx.Fail(source.node, source.key, "semantic_axes need rules.partition_axis (eformer PartitionAxis settings)");
    a->semantic_axes = ParseSemanticAxesNode(ctx, source.node, source.key);
    try {
      a->spec = s.rules.partition_axis->ResolveSpec(*a->semantic_axes, s.rules.runtime_mode);
    } catch (const Error& e) {
      ctx.Rethrow(source.node, source.key, e);
    }
  }
  return source;
}

}  // namespace

ScenarioArray ParseArray(const YamlContext& ctx, const YAML::Node& node, const std::string& key, const Scenario& s,
                         const std::string& base_dir) {
  YamlMap m(ctx, node, key,
            {"name", "shape", "dtype", "spec", "logical_axes", "semantic_axes", "data", "seed", "distribution",
             "scale", "file"});
  ScenarioArray a;
  a.location = ctx.Location(node);
  a.name = ctx.String(m.Need("name"), m.Key("name"));
  if (a.name.empty()) ctx.Fail(m.Get("name"), m.Key("name"), "an array needs a non-empty name");
  a.dtype = m.Has("dtype") ? ctx.ArrayDType(m.Get("dtype"), m.Key("dtype")) : DType::kF32;

  const std::string data = ParseDataKind(ctx, m, &a.init);
  CheckInitKeys(ctx, m, a.init, data);
  if (a.init.kind == ArrayInit::Kind::kRandom) ParseRandomInit(ctx, m, &a.init);
  if (a.init.kind == ArrayInit::Kind::kNpy) LoadNpyInit(ctx, m, base_dir, &a);
  ParseArrayShape(ctx, node, m, &a);
  const SpecSource source = ParseArraySpec(ctx, node, key, m, s, &a);
  try {
    NamedSharding(s.mesh.mesh, a.spec).CheckShape(a.shape);
  } catch (const Error& e) {
    ctx.Rethrow(source.node, source.key, e);
  }
  return a;
}

}  // namespace spmdsim
