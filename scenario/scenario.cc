#include "scenario/scenario.h"

#include <cstring>
#include <filesystem>
#include <random>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "common/file.h"
#include "common/host_memory.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "mesh/mesh_utils.h"
#include "mesh/t5x_mesh.h"
#include "partition/named_sharding.h"
#include "scenario/calibration_yaml.h"
#include "scenario/internal/scenario_workloads.h"
#include "scenario/internal/scenario_yaml.h"
#include "workloads/workloads.h"

namespace spmdsim {
namespace {

// Bounds that keep a scenario within what one machine can simulate, and the parser out of overflow.
constexpr int64_t kMaxDevices = 1 << 16;
constexpr int64_t kMaxRank = 16;
constexpr int64_t kMaxElements = int64_t{1} << 40;

// ---------------------------------------------------------------------------------------------------------------
// topology

LinkSpec ParseLink(const YamlContext& ctx, const YAML::Node& node, const std::string& key, const LinkSpec& preset) {
  YamlMap m(ctx, node, key, {"latency_us", "bandwidth_GBps", "direction"});
  LinkSpec spec = preset;
  std::string direction = m.Has("direction") ? ctx.Choice(m.Get("direction"), m.Key("direction"),
                                                          {"one_way", "bidirectional"})
                                             : "";
  if (m.Has("bandwidth_GBps") && direction.empty())
    ctx.Fail(m.Get("bandwidth_GBps"), m.Key("bandwidth_GBps"),
             "say whether the bandwidth is one_way or bidirectional: add direction: one_way | bidirectional "
             "(published figures mix both; spmdsim stores one-way bandwidth per link)");
  std::vector<std::string> parts;
  if (m.Has("latency_us")) {
    spec.latency_s = ctx.NumberIn(m.Get("latency_us"), m.Key("latency_us"), -1e-300, 1e9) * 1e-6;
    if (spec.latency_s < 0) ctx.Fail(m.Get("latency_us"), m.Key("latency_us"), "latency must be >= 0");
    parts.push_back(fmt::format("latency {} us", spec.latency_s * 1e6));
  }
  if (m.Has("bandwidth_GBps")) {
    double gbps = ctx.NumberIn(m.Get("bandwidth_GBps"), m.Key("bandwidth_GBps"), 0, 1e9);
    spec.bandwidth_Bps = direction == "bidirectional" ? gbps * 1e9 / 2 : gbps * 1e9;
    parts.push_back(direction == "bidirectional"
                        ? fmt::format("{} GB/s bidirectional / 2 = {} GB/s one-way", gbps, gbps / 2)
                        : fmt::format("{} GB/s one-way", gbps));
  }
  if (!parts.empty()) {
    SourceLocation loc = ctx.Location(node);
    spec.source = fmt::format("scenario {}: {}", loc.ToString(), fmt::join(parts, ", "));
  }
  return spec;
}

// Runs `set` (a Topology setter); an Error it throws is rethrown at `node`'s file:line:col.
template <typename F>
void SetAt(const YamlContext& ctx, const YAML::Node& node, std::string_view key, F&& set) {
  try {
    set();
  } catch (const Error& e) {
    ctx.Rethrow(node, key, e);
  }
}

// `topology.calibration: FILE` (relative to the scenario): a profile fitted on this topology's device kind.
CalibrationProfile ParseCalibrationKey(const YamlContext& ctx, const YamlMap& m, const Topology& topology) {
  const std::string file = ctx.String(m.Get("calibration"), m.Key("calibration"));
  const std::filesystem::path base = std::filesystem::path(ctx.file()).parent_path();
  CalibrationProfile profile;
  try {
    profile = LoadCalibrationProfile(std::filesystem::path(file).is_absolute() ? file : (base / file).string());
  } catch (const Error& e) {
    ctx.Rethrow(m.Get("calibration"), m.Key("calibration"), e);
  }
  if (profile.device_kind != topology.device_kind())
    ctx.Fail(m.Get("calibration"), m.Key("calibration"),
             fmt::format("the profile was fitted on {}, this topology's devices are {}", profile.device_kind,
                         topology.device_kind()));
  return profile;
}

ScenarioTopology ParseTopology(const YamlContext& ctx, const YAML::Node& node) {
  YamlMap m(ctx, node, "topology",
            {"preset", "slices", "links", "network", "nvlink_sharp", "wraparound", "hbm_GiB", "peak_TFLOPs",
             "efficiency", "stragglers", "calibration"});
  std::string preset = ctx.String(m.Need("preset"), "topology.preset");
  int64_t slices = m.Int("slices", 1);
  if (slices < 1 || slices > 1024) ctx.Fail(m.Get("slices"), "topology.slices", "expected an integer in [1, 1024]");
  std::shared_ptr<Topology> topology;
  try {
    // Bound the device count before building (a fuzzed "cpu:999999999" must not allocate).
    std::string_view dims = preset.find(':') == std::string::npos ? "" : std::string_view(preset).substr(preset.find(':') + 1);
    if (!dims.empty()) {
      int64_t n = slices;
      for (const std::string& part : Split(dims, 'x')) {
        int64_t d = 0;
        try {
          d = ParseInt(Trim(part), "topology.preset");
        } catch (const Error&) {
          break;  // Topology::Parse reports it
        }
        if (d > kMaxDevices || (d > 0 && n > kMaxDevices / d))
          ctx.Fail(m.Get("preset"), "topology.preset",
                   fmt::format("'{}' has more than {} devices; spmdsim simulates at most that many", preset, kMaxDevices));
        n *= std::max<int64_t>(d, 1);
      }
      if (preset.rfind("dgx", 0) == 0 && n * 8 > kMaxDevices)
        ctx.Fail(m.Get("preset"), "topology.preset", fmt::format("'{}' has too many devices", preset));
    }
    topology = std::make_shared<Topology>(Topology::Parse(preset, static_cast<int>(slices)));
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kScenarioError) throw;
    ctx.Rethrow(m.Get(m.Has("slices") && preset.rfind("tpu", 0) != 0 ? "slices" : "preset"), "topology.preset", e);
  }
  if (topology->num_devices() > kMaxDevices)
    ctx.Fail(m.Get("preset"), "topology.preset",
             fmt::format("{} devices; spmdsim simulates at most {}", topology->num_devices(), kMaxDevices));

  if (m.Has("network")) {
    YAML::Node n = m.Get("network");
    if (topology->platform() != Platform::kGpu)
      ctx.Fail(n, "topology.network", fmt::format("a network section applies to GPU presets; {} is not one", preset));
    YamlMap nm(ctx, n, "topology.network", {"nics_per_node", "nic_Gbps", "latency_us", "oversubscription"});
    NetworkSpec network = topology->network();
    if (nm.Has("nics_per_node")) {
      const int64_t nics = nm.Int("nics_per_node", network.nics_per_node);
      if (nics < 1 || nics > 1024) ctx.Fail(nm.Get("nics_per_node"), nm.Key("nics_per_node"), "expected an integer in [1, 1024]");
      network.nics_per_node = static_cast<int>(nics);
    }
    if (nm.Has("nic_Gbps")) network.nic_Bps = ctx.NumberIn(nm.Get("nic_Gbps"), nm.Key("nic_Gbps"), 0, 1e6) * 1e9 / 8;
    if (nm.Has("latency_us")) network.latency_s = ctx.NumberIn(nm.Get("latency_us"), nm.Key("latency_us"), 0, 1e6) * 1e-6;
    if (nm.Has("oversubscription")) {
      const double o = ctx.Number(nm.Get("oversubscription"), nm.Key("oversubscription"));
      if (!(o >= 1 && o <= 1e3)) ctx.Fail(nm.Get("oversubscription"), nm.Key("oversubscription"), "expected a number in [1, 1000] (1 = non-blocking)");
      network.oversubscription = o;
    }
    network.source = "scenario file (topology.network)";
    SetAt(ctx, n, "topology.network", [&] { topology->SetNetwork(network); });
  }
  if (m.Has("nvlink_sharp")) {
    const bool nvls = ctx.Bool(m.Get("nvlink_sharp"), "topology.nvlink_sharp");
    if (topology->platform() != Platform::kGpu)
      ctx.Fail(m.Get("nvlink_sharp"), "topology.nvlink_sharp", fmt::format("{} is not a GPU preset", preset));
    topology->SetNvlinkSharp(nvls);
  }
  if (m.Has("links")) {
    YAML::Node links = m.Get("links");
    std::vector<std::string> names = {"ici", "nvlink", "pcie", "dcn", "infiniband", "host_memory"};
    YamlMap lm(ctx, links, "topology.links", names);
    for (const std::string& name : lm.keys()) {
      LinkClass link = ParseLinkClass(name);
      LinkSpec base = topology->links().count(link) ? topology->links().at(link) : LinkSpec{};
      LinkSpec spec = ParseLink(ctx, lm.Get(name), lm.Key(name), base);
      if (!(spec.bandwidth_Bps > 0))
        ctx.Fail(lm.Get(name), lm.Key(name),
                 fmt::format("{} has no {} link in its preset: give bandwidth_GBps and direction", preset, name));
      SetAt(ctx, lm.Get(name), lm.Key(name), [&] { topology->SetLink(link, spec); });
    }
  }
  if (m.Has("wraparound")) {
    YAML::Node w = m.Get("wraparound");
    std::array<bool, 3> wrap = {false, false, false};
    if (w.IsScalar()) {
      bool all = ctx.Bool(w, "topology.wraparound");
      wrap = {all, all, all};
    } else {
      ctx.RequireSequence(w, "topology.wraparound");
      if (w.size() < 1 || w.size() > 3)
        ctx.Fail(w, "topology.wraparound", fmt::format("found {} entries, expected 1 to 3 booleans (x, y, z)", w.size()));
      for (size_t i = 0; i < w.size(); ++i) wrap[i] = ctx.Bool(w[i], fmt::format("topology.wraparound[{}]", i));
    }
    if (topology->platform() != Platform::kTpu)
      ctx.Fail(w, "topology.wraparound", fmt::format("only TPU topologies have a torus; {} has none", preset));
    SetAt(ctx, w, "topology.wraparound", [&] { topology->SetWraparound(wrap); });
  }
  if (m.Has("hbm_GiB")) {
    double gib = ctx.NumberIn(m.Get("hbm_GiB"), "topology.hbm_GiB", 0, 1e6);
    SetAt(ctx, m.Get("hbm_GiB"), "topology.hbm_GiB",
          [&] { topology->SetMemoryBytes(static_cast<int64_t>(gib * 1073741824.0)); });
  }
  if (m.Has("peak_TFLOPs")) {
    YamlMap pm(ctx, m.Get("peak_TFLOPs"), "topology.peak_TFLOPs", {"bf16", "f16", "f32", "f64", "int8"});
    for (const std::string& dtype : pm.keys()) {
      const double flops = ctx.NumberIn(pm.Get(dtype), pm.Key(dtype), 0, 1e9) * 1e12;
      SetAt(ctx, pm.Get(dtype), pm.Key(dtype), [&] { topology->SetPeakFlops(ParseDType(dtype), flops); });
    }
  }
  ScenarioTopology out;
  if (m.Has("efficiency")) {
    YamlMap em(ctx, m.Get("efficiency"), "topology.efficiency", {"compute", "memory"});
    if (em.Has("compute")) out.efficiency.compute_efficiency = ctx.NumberIn(em.Get("compute"), em.Key("compute"), 0, 1);
    if (em.Has("memory")) out.efficiency.memory_efficiency = ctx.NumberIn(em.Get("memory"), em.Key("memory"), 0, 1);
  }
  if (m.Has("stragglers")) {
    YAML::Node s = m.Get("stragglers");
    ctx.RequireSequence(s, "topology.stragglers");
    std::set<int64_t> seen;
    for (size_t i = 0; i < s.size(); ++i) {
      std::string key = fmt::format("topology.stragglers[{}]", i);
      YamlMap sm(ctx, s[i], key, {"device", "speed"});
      int64_t device = ctx.Int(sm.Need("device"), sm.Key("device"));
      if (device < 0 || device >= topology->num_devices())
        ctx.Fail(sm.Get("device"), sm.Key("device"),
                 fmt::format("device {} does not exist; valid ids are 0..{}", device, topology->num_devices() - 1));
      if (!seen.insert(device).second)
        ctx.Fail(sm.Get("device"), sm.Key("device"), fmt::format("device {} is listed twice", device));
      double speed = ctx.NumberIn(sm.Need("speed"), sm.Key("speed"), 0, 1);
      out.stragglers.emplace_back(static_cast<int>(device), speed);
    }
  }
  if (m.Has("calibration")) out.calibration = ParseCalibrationKey(ctx, m, *topology);
  out.topology = std::move(topology);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// mesh

std::vector<std::pair<std::string, int64_t>> ParseAxes(const YamlContext& ctx, const YAML::Node& node,
                                                        const std::string& key) {
  std::vector<std::pair<std::string, int64_t>> axes;
  if (node.IsScalar()) {
    try {
      axes = ParseNamedSizes(node.Scalar(), key);
    } catch (const Error& e) {
      ctx.Rethrow(node, key, e);
    }
  } else if (node.IsMap()) {
    std::set<std::string> seen;
    for (YAML::const_iterator it = node.begin(); it != node.end(); ++it) {
      std::string name = ctx.String(it->first, key);
      if (name.empty() || !seen.insert(name).second)
        ctx.Fail(it->first, key, fmt::format("axis name '{}' is empty or repeated", name));
      int64_t size = ctx.Int(it->second, key + "." + name);
      if (size < 1 || size > kMaxDevices)
        ctx.Fail(it->second, key + "." + name, fmt::format("axis size {} is not in [1, {}]", size, kMaxDevices));
      axes.emplace_back(name, size);
    }
  } else {
    ctx.Fail(node, key, "expected a mapping of axis names to sizes, e.g. {data: 2, model: 4}, or \"data=2,model=4\"");
  }
  if (axes.empty()) ctx.Fail(node, key, "a mesh needs at least one axis");
  return axes;
}

std::string AxesText(const std::vector<std::pair<std::string, int64_t>>& axes) {
  std::vector<std::string> parts;
  for (const auto& [name, size] : axes) parts.push_back(fmt::format("{}={}", name, size));
  return fmt::format("{}", fmt::join(parts, ","));
}

ScenarioMesh ParseMesh(const YamlContext& ctx, const YAML::Node& node, const std::shared_ptr<const Topology>& topology) {
  YamlMap m(ctx, node, "mesh",
            {"axes", "dcn_axes", "devices", "contiguous_submeshes", "allow_split_physical_axes", "process_is_granule",
             "should_sort_granules_by_key", "t5x"});
  ScenarioMesh out;
  if (m.Has("t5x")) {
    for (const std::string& k : m.keys())
      if (k != "t5x")
        ctx.Fail(m.Get(k), m.Key(k), "mesh.t5x builds the whole mesh ('data', 'model'); remove the other mesh keys");
    YamlMap t(ctx, m.Get("t5x"), "mesh.t5x",
              {"num_partitions", "model_parallel_submesh", "ici_mesh_shape", "dcn_mesh_shape"});
    int64_t num_partitions = t.Int("num_partitions", 1);
    if (num_partitions < 1 || num_partitions > kMaxDevices)
      ctx.Fail(t.Get("num_partitions"), t.Key("num_partitions"), "expected a positive integer");
    std::optional<t5x::HardwareMesh> submesh;
    if (t.Has("model_parallel_submesh")) {
      std::vector<int64_t> s = ctx.IntList(t.Get("model_parallel_submesh"), t.Key("model_parallel_submesh"));
      t5x::HardwareMesh hw;
      for (int64_t v : s) {
        if (v < 1 || v > kMaxDevices)
          ctx.Fail(t.Get("model_parallel_submesh"), t.Key("model_parallel_submesh"), "entries must be positive");
        hw.push_back(static_cast<int>(v));
      }
      submesh = hw;
    }
    std::optional<std::vector<int64_t>> ici, dcn;
    if (t.Has("ici_mesh_shape")) ici = ctx.IntList(t.Get("ici_mesh_shape"), t.Key("ici_mesh_shape"));
    if (t.Has("dcn_mesh_shape")) dcn = ctx.IntList(t.Get("dcn_mesh_shape"), t.Key("dcn_mesh_shape"));
    if (ici.has_value() != dcn.has_value())
      ctx.Fail(m.Get("t5x"), "mesh.t5x", "give both ici_mesh_shape and dcn_mesh_shape, or neither");
    try {
      out.mesh = t5x::DefaultMesh(static_cast<int>(num_partitions), submesh, topology, ici, dcn);
    } catch (const Error& e) {
      ctx.Rethrow(m.Get("t5x"), "mesh.t5x", e);
    }
    out.builder = submesh || ici ? ScenarioMesh::Builder::kT5xGetMesh : ScenarioMesh::Builder::kT5xDefaultMesh;
    out.description = fmt::format("t5x default_mesh(num_partitions={}{}{})", num_partitions,
                                  submesh ? fmt::format(", model_parallel_submesh={}", PyTuple(*submesh)) : "",
                                  ici ? fmt::format(", ici={}, dcn={}", PyTuple(*ici), PyTuple(*dcn)) : "");
    return out;
  }
  auto ici = ParseAxes(ctx, m.Need("axes"), "mesh.axes");
  std::vector<std::pair<std::string, int64_t>> dcn;
  if (m.Has("dcn_axes")) dcn = ParseAxes(ctx, m.Get("dcn_axes"), "mesh.dcn_axes");
  MeshOptions options;
  options.contiguous_submeshes = m.Bool("contiguous_submeshes", false);
  options.allow_split_physical_axes = m.Bool("allow_split_physical_axes", false);
  options.process_is_granule = m.Bool("process_is_granule", false);
  options.should_sort_granules_by_key = m.Bool("should_sort_granules_by_key", true);
  if (m.Has("devices")) {
    std::vector<int64_t> ids = ctx.IntList(m.Get("devices"), "mesh.devices");
    std::vector<int> devices;
    for (int64_t id : ids) {
      if (id < 0 || id >= topology->num_devices())
        ctx.Fail(m.Get("devices"), "mesh.devices",
                 fmt::format("device {} does not exist; valid ids are 0..{}", id, topology->num_devices() - 1));
      devices.push_back(static_cast<int>(id));
    }
    options.devices = devices;
  }
  try {
    out.mesh = MakeDeviceMesh(topology, ici, dcn, options);
  } catch (const Error& e) {
    ctx.Rethrow(m.Get("axes"), "mesh", e);
  }
  out.builder = dcn.empty() ? ScenarioMesh::Builder::kCreateDeviceMesh : ScenarioMesh::Builder::kHybrid;
  out.description = dcn.empty() ? fmt::format("create_device_mesh {}", AxesText(ici))
                                : fmt::format("create_hybrid_device_mesh ici {} dcn {}", AxesText(ici), AxesText(dcn));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// rules

PartitionSpec::Entry ParseEntry(const YamlContext& ctx, const YAML::Node& node, const std::string& key) {
  if (!node.IsDefined() || node.IsNull()) return PartitionSpec::Entry::None();
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "None" || s == "none" || s == "~") return PartitionSpec::Entry::None();
    if (s == "UNCONSTRAINED" || s == "P.UNCONSTRAINED") return PartitionSpec::Entry::Unconstrained();
    return PartitionSpec::Entry::Axis(s);
  }
  if (node.IsSequence()) {
    std::vector<std::string> names = ctx.StringList(node, key);
    return PartitionSpec::Entry::Axes(names);
  }
  ctx.Fail(node, key, "expected a mesh axis name, a list of names, or null");
}

}  // namespace

PartitionSpec ParseSpecNode(const YamlContext& ctx, const YAML::Node& node, const std::string& key) {
  try {
    if (node.IsScalar()) return PartitionSpec::Parse(node.Scalar());
    if (node.IsSequence()) {
      if (node.size() > static_cast<size_t>(kMaxRank))
        ctx.Fail(node, key, fmt::format("a spec of {} entries; at most {}", node.size(), kMaxRank));
      std::vector<PartitionSpec::Entry> entries;
      for (size_t i = 0; i < node.size(); ++i) entries.push_back(ParseEntry(ctx, node[i], fmt::format("{}[{}]", key, i)));
      return PartitionSpec(entries);
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kScenarioError) throw;
    ctx.Rethrow(node, key, e);
  }
  ctx.Fail(node, key,
           "expected a PartitionSpec such as \"P('data', None)\" or a list such as [data, null, [model, fsdp]]");
}

namespace {

AxisRule ParseAxisRule(const YamlContext& ctx, const YAML::Node& node, const std::string& key, int depth = 0) {
  if (!node.IsDefined() || node.IsNull()) return AxisRule::None();
  if (node.IsScalar()) return AxisRule(node.Scalar());
  if (node.IsSequence() && depth < 4) {
    std::vector<AxisRule> items;
    for (size_t i = 0; i < node.size(); ++i)
      items.push_back(ParseAxisRule(ctx, node[i], fmt::format("{}[{}]", key, i), depth + 1));
    return AxisRule::Tuple(std::move(items));
  }
  ctx.Fail(node, key, "expected an axis name, null, or a list of them");
}

ScenarioRules ParseRules(const YamlContext& ctx, const YAML::Node& node) {
  YamlMap m(ctx, node, "rules",
            {"logical_axis_rules", "partition_axis", "runtime_mode", "partition_rules", "min_size", "strict"});
  ScenarioRules out;
  if (m.Has("logical_axis_rules")) {
    YAML::Node r = m.Get("logical_axis_rules");
    if (r.IsScalar()) {
      try {
        out.logical_axis_rules = ParseLogicalAxisRules(r.Scalar());
      } catch (const Error& e) {
        ctx.Rethrow(r, "rules.logical_axis_rules", e);
      }
    } else {
      ctx.RequireSequence(r, "rules.logical_axis_rules");
      for (size_t i = 0; i < r.size(); ++i) {
        std::string key = fmt::format("rules.logical_axis_rules[{}]", i);
        if (!r[i].IsSequence() || r[i].size() != 2)
          ctx.Fail(r[i], key, "expected a pair [logical_name, mesh_axes], e.g. [batch, data] or [embed, null]");
        out.logical_axis_rules.push_back({ctx.String(r[i][0], key + "[0]"), ParseEntry(ctx, r[i][1], key + "[1]")});
      }
    }
  }
  if (m.Has("partition_axis")) {
    YAML::Node p = m.Get("partition_axis");
    std::vector<std::string> fields;
    for (int f = 0; f < PartitionAxis::kNumFields; ++f)
      fields.emplace_back(PartitionAxis::FieldName(static_cast<PartitionAxis::Field>(f)));
    YamlMap pm(ctx, p, "rules.partition_axis", fields, /*null_ok=*/true);
    std::vector<std::pair<std::string, AxisRule>> overrides;
    for (const std::string& k : pm.keys()) overrides.emplace_back(k, ParseAxisRule(ctx, pm.Get(k), pm.Key(k)));
    try {
      out.partition_axis = PartitionAxis(overrides);
    } catch (const Error& e) {
      ctx.Rethrow(p, "rules.partition_axis", e);
    }
  }
  if (m.Has("runtime_mode")) {
    std::string mode = ctx.Choice(m.Get("runtime_mode"), "rules.runtime_mode", {"train", "prefill", "decode", "insert"});
    out.runtime_mode = ParseRuntimeMode(mode);
  }
  if (m.Has("partition_rules")) {
    YAML::Node r = m.Get("partition_rules");
    try {
      if (r.IsScalar()) {
        out.partition_rules = ParsePatternRules(r.Scalar());
      } else {
        ctx.RequireSequence(r, "rules.partition_rules");
        for (size_t i = 0; i < r.size(); ++i) {
          std::string key = fmt::format("rules.partition_rules[{}]", i);
          if (!r[i].IsSequence() || r[i].size() != 2)
            ctx.Fail(r[i], key, "expected a pair [pattern, spec], e.g. [\".*/kernel\", \"P('fsdp', 'tp')\"]");
          out.partition_rules.push_back({ctx.String(r[i][0], key + "[0]"), ParseSpecNode(ctx, r[i][1], key + "[1]")});
        }
      }
      PartitionRules compiled(out.partition_rules);  // reject bad patterns here, with the location
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kScenarioError) throw;
      ctx.Rethrow(r, "rules.partition_rules", e);
    }
  }
  out.match_options.min_size = m.Int("min_size", 0);
  if (*out.match_options.min_size < 0) ctx.Fail(m.Get("min_size"), "rules.min_size", "expected an integer >= 0");
  out.match_options.strict = m.Bool("strict", true);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// arrays

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
  init->seed = static_cast<uint64_t>(seed);
  if (m.Has("distribution"))
    init->distribution = ctx.Choice(m.Get("distribution"), m.Key("distribution"), {"normal", "uniform"}) == "normal"
                             ? ArrayInit::Distribution::kNormal
                             : ArrayInit::Distribution::kUniform;
  if (m.Has("scale")) init->scale = ctx.NumberIn(m.Get("scale"), m.Key("scale"), 0, 1e30);
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
  const DType file_dtype = ParseDType(a->init.npy->dtype);
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
    if (static_cast<int64_t>(a->shape.size()) > kMaxRank)
      ctx.Fail(sh, m.Key("shape"), fmt::format("rank {} is above the limit {}", a->shape.size(), kMaxRank));
    int64_t n = 1;
    for (int64_t d : a->shape) {
      if (d < 0) ctx.Fail(sh, m.Key("shape"), fmt::format("dimension {} is negative", d));
      if (d > 0 && n > kMaxElements / d)
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

Scenario ParseScenarioUnchecked(std::string_view text, const std::string& path) {
  YamlContext ctx(path);
  YAML::Node root = LoadSingleYamlDocument(text, path);
  YamlMap m(ctx, root, "", {"name", "description", "topology", "mesh", "rules", "arrays", "workloads"});
  Scenario s;
  s.path = path;
  s.name = m.Has("name") ? ctx.String(m.Get("name"), "name") : std::filesystem::path(path).stem().string();
  s.description = m.Has("description") ? ctx.String(m.Get("description"), "description") : "";
  s.topology = ParseTopology(ctx, m.Need("topology"));
  s.mesh = ParseMesh(ctx, m.Need("mesh"), s.topology.topology);
  if (m.Has("rules")) s.rules = ParseRules(ctx, m.Get("rules"));
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  if (m.Has("arrays")) {
    YAML::Node arrays = m.Get("arrays");
    ctx.RequireSequence(arrays, "arrays");
    std::set<std::string> names;
    for (size_t i = 0; i < arrays.size(); ++i) {
      ScenarioArray a = ParseArray(ctx, arrays[i], fmt::format("arrays[{}]", i), s, base_dir);
      if (!names.insert(a.name).second)
        ctx.Fail(arrays[i], fmt::format("arrays[{}].name", i), fmt::format("array '{}' is defined twice", a.name));
      s.arrays.push_back(std::move(a));
    }
  }
  YAML::Node workloads = m.Need("workloads");
  ctx.RequireSequence(workloads, "workloads");
  if (workloads.size() == 0) ctx.Fail(workloads, "workloads", "a scenario needs at least one workload");
  std::set<std::string> names;
  for (size_t i = 0; i < workloads.size(); ++i) {
    ScenarioWorkload w = ParseWorkload(ctx, workloads[i], fmt::format("workloads[{}]", i), s);
    if (!names.insert(w.name).second)
      ctx.Fail(workloads[i], fmt::format("workloads[{}].name", i),
               fmt::format("two workloads are named '{}'; give each a distinct name", w.name));
    if (const ValidatedModel* model = std::get_if<ValidatedModel>(&w.config);
        model != nullptr && s.topology.calibration && ModelStack(*model) != s.topology.calibration->stack) {
      ctx.Fail(workloads[i], fmt::format("workloads[{}].stack", i),
               fmt::format("runs on stack {}, but topology.calibration was fitted on stack {}",
                           StackName(ModelStack(*model)), StackName(s.topology.calibration->stack)));
    }
    s.workloads.push_back(std::move(w));
  }
  return s;
}

}  // namespace

std::string_view ArrayInitKindName(ArrayInit::Kind kind) {
  switch (kind) {
    case ArrayInit::Kind::kZeros: return "zeros";
    case ArrayInit::Kind::kOnes: return "ones";
    case ArrayInit::Kind::kIota: return "iota";
    case ArrayInit::Kind::kRandom: return "random";
    case ArrayInit::Kind::kNpy: return "npy";
  }
  return "?";
}

const ScenarioArray& Scenario::array(std::string_view name) const {
  std::vector<std::string> names;
  for (const ScenarioArray& a : arrays) {
    if (a.name == name) return a;
    names.push_back(a.name);
  }
  Throw(ErrorCode::kNotFound, "scenario has no array '{}'; its arrays are: {}", name, fmt::join(names, ", "));
}

Scenario ParseScenario(std::string_view text, const std::string& path) {
  try {
    return ParseScenarioUnchecked(text, path);
  } catch (const Error&) {
    throw;
  } catch (const YAML::Exception& e) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kScenarioError, "{}:{}:{}: {}", path, e.mark.line + 1, e.mark.column + 1,
              e.msg);
  } catch (const std::exception& e) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kScenarioError, "{}: cannot read the scenario: {}", path, e.what());
  }
}

namespace {

template <typename T>
Array FromDoubles(const std::vector<double>& values, std::vector<int64_t> shape) {
  std::vector<T> typed(values.size());
  for (size_t i = 0; i < values.size(); ++i) typed[i] = static_cast<T>(values[i]);
  return Array::FromVector<T>(typed, std::move(shape));
}

Array ArrayFromDoubles(const std::vector<double>& values, std::vector<int64_t> shape, DType dtype) {
  switch (dtype) {
    case DType::kF32: return FromDoubles<float>(values, std::move(shape));
    case DType::kF64: return FromDoubles<double>(values, std::move(shape));
    case DType::kI32: return FromDoubles<int32_t>(values, std::move(shape));
    case DType::kI64: return FromDoubles<int64_t>(values, std::move(shape));
    case DType::kBF16: {
      std::vector<bfloat16> typed(values.size());
      for (size_t i = 0; i < values.size(); ++i) typed[i] = ToBFloat16(static_cast<float>(values[i]));
      return Array::FromVector<bfloat16>(typed, std::move(shape));
    }
    case DType::kF16: {
      std::vector<float16> typed(values.size());
      for (size_t i = 0; i < values.size(); ++i) typed[i] = ToFloat16(static_cast<float>(values[i]));
      return Array::FromVector<float16>(typed, std::move(shape));
    }
    case DType::kBool: {
      std::vector<bool> typed(values.size());
      for (size_t i = 0; i < values.size(); ++i) typed[i] = values[i] != 0;
      return Array::FromVector(typed, std::move(shape));
    }
    default: break;  // not an array dtype
  }
  SPMDSIM_CHECK(false, "unknown dtype");
  return Array();
}

template <typename T>
std::vector<double> ReadTyped(const std::vector<uint8_t>& bytes) {
  std::vector<double> out(bytes.size() / sizeof(T));
  for (size_t i = 0; i < out.size(); ++i) {
    T value;
    std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(value);
  }
  return out;
}

std::vector<double> NpyToDoubles(const NpyArray& npy) {
  if (npy.dtype == "float32") return ReadTyped<float>(npy.data);
  if (npy.dtype == "float64") return ReadTyped<double>(npy.data);
  if (npy.dtype == "int32") return ReadTyped<int32_t>(npy.data);
  if (npy.dtype == "int64") return ReadTyped<int64_t>(npy.data);
  if (npy.dtype == "bool") return ReadTyped<uint8_t>(npy.data);
  if (npy.dtype == "float16") {
    std::vector<double> out(npy.data.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      float16 h;
      std::memcpy(&h.bits, npy.data.data() + 2 * i, 2);
      out[i] = ToFloat(h);
    }
    return out;
  }
  Throw(ErrorCode::kInvalidArgument, "cannot read .npy dtype {}", npy.dtype);
}

// The file's header again (it may have changed since the scenario was loaded). Error(kInvalidArgument) when
// its dtype or shape no longer match.
NpyHeader CheckedNpyHeader(const ScenarioArray& a) {
  SPMDSIM_CHECK(a.init.npy.has_value(), "npy array without a header");
  NpyHeader now = ReadNpyHeader(a.init.path);
  if (now.dtype != a.init.npy->dtype || now.shape != a.init.npy->shape)
    Throw(ErrorCode::kInvalidArgument, "{}: the file changed since the scenario was loaded: it holds {} {}, not {} {}",
          a.init.path, now.dtype, PyTuple(now.shape), a.init.npy->dtype, PyTuple(a.init.npy->shape));
  return now;
}

NpyArray ReadNpyAgain(const ScenarioArray& a) {
  CheckedNpyHeader(a);
  return ReadNpy(a.init.path);
}

// The blocks of an npy-backed array, each read from the file as runs of contiguous elements (a Fortran-order
// file is read whole and cut).
std::vector<NpyArray> ReadNpyBlocks(const ScenarioArray& a, const std::vector<std::vector<IndexRange>>& blocks) {
  const NpyHeader header = CheckedNpyHeader(a);
  const int64_t itemsize = NpyItemSize(header.dtype);
  std::vector<NpyArray> out;
  if (header.fortran_order && header.shape.size() > 1) {
    const NpyArray whole = ReadNpy(a.init.path);
    for (const auto& index : blocks) {
      NpyArray b{header.dtype, {}, {}};
      for (const IndexRange& r : index) b.shape.push_back(r.size());
      b.data.resize(static_cast<size_t>(b.num_elements() * itemsize));
      if (!b.data.empty())
        CopyBlockOut(reinterpret_cast<const std::byte*>(whole.data.data()), header.shape, index,
                     static_cast<size_t>(itemsize), reinterpret_cast<std::byte*>(b.data.data()));
      out.push_back(std::move(b));
    }
    return out;
  }
  std::ifstream in(a.init.path, std::ios::binary);
  if (!in) Throw(ErrorCode::kNotFound, "cannot read .npy file {}: cannot open it", QuoteForError(a.init.path));
  for (const auto& index : blocks) {
    NpyArray b{header.dtype, {}, {}};
    for (const IndexRange& r : index) b.shape.push_back(r.size());
    b.data.resize(static_cast<size_t>(b.num_elements() * itemsize));
    size_t filled = 0;
    const std::vector<int64_t> starts = BlockRunStarts(header.shape, index);
    const int64_t length = index.empty() ? 1 : index.back().size();
    for (size_t i = 0; i < starts.size();) {
      size_t j = i + 1;  // merge runs that follow one another in the file
      while (j < starts.size() && starts[j] == starts[j - 1] + length) ++j;
      const int64_t bytes = static_cast<int64_t>(j - i) * length * itemsize;
      in.seekg(header.data_offset + starts[i] * itemsize);
      in.read(reinterpret_cast<char*>(b.data.data() + filled), bytes);
      if (in.gcount() != bytes)
        Throw(ErrorCode::kInvalidArgument, "{}: the file ended while reading a block of the array", a.init.path);
      filled += static_cast<size_t>(bytes);
      i = j;
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace

Array MakeScenarioArray(const ScenarioArray& a, bool abstract) {
  DType dtype = a.dtype;
  if (abstract) return Array::Abstract(a.shape, dtype);
  CheckFitsHostMemory(fmt::format("array '{}' ({} {})", a.name, DTypeName(dtype), PyTuple(a.shape)),
                      ArrayBytes(a.shape, DTypeSize(dtype)));
  switch (a.init.kind) {
    case ArrayInit::Kind::kZeros: return Array::Zeros(a.shape, dtype);
    case ArrayInit::Kind::kOnes: return Array::Full(a.shape, dtype, 1.0);
    case ArrayInit::Kind::kIota: return Array::Iota(a.shape, dtype);
    case ArrayInit::Kind::kRandom:
      if (a.init.distribution == ArrayInit::Distribution::kNormal)
        return RandomArray(a.shape, dtype, a.init.seed, a.init.scale);
      else {
        std::mt19937_64 rng(a.init.seed);
        std::uniform_real_distribution<double> uniform(-a.init.scale, a.init.scale);
        std::vector<double> values(static_cast<size_t>(NumElements(a.shape)));
        for (double& v : values) v = uniform(rng);
        return ArrayFromDoubles(values, a.shape, dtype);
      }
    case ArrayInit::Kind::kNpy: return ArrayFromDoubles(NpyToDoubles(ReadNpyAgain(a)), a.shape, dtype);
  }
  SPMDSIM_CHECK(false, "unknown init");
  return Array();
}

std::vector<Array> MakeScenarioArrayBlocks(const ScenarioArray& a, const std::vector<std::vector<IndexRange>>& blocks) {
  int64_t bytes = 0;
  for (const auto& index : blocks) {
    std::vector<int64_t> shape;
    for (const IndexRange& r : index) shape.push_back(r.size());
    bytes += ArrayBytes(shape, DTypeSize(a.dtype));
  }
  CheckFitsHostMemory(fmt::format("{} block(s) of array '{}' ({} {})", blocks.size(), a.name, DTypeName(a.dtype),
                                  PyTuple(a.shape)),
                      bytes);
  std::vector<Array> out;
  switch (a.init.kind) {
    case ArrayInit::Kind::kZeros:
    case ArrayInit::Kind::kOnes:
      for (const auto& index : blocks) {
        std::vector<int64_t> shape;
        for (const IndexRange& r : index) shape.push_back(r.size());
        out.push_back(a.init.kind == ArrayInit::Kind::kZeros ? Array::Zeros(shape, a.dtype)
                                                             : Array::Full(shape, a.dtype, 1.0));
      }
      return out;
    case ArrayInit::Kind::kNpy: {
      const std::vector<NpyArray> read = ReadNpyBlocks(a, blocks);
      for (size_t b = 0; b < blocks.size(); ++b)
        out.push_back(ArrayFromDoubles(NpyToDoubles(read[b]), read[b].shape, a.dtype));
      return out;
    }
    case ArrayInit::Kind::kRandom:
      if (a.init.distribution == ArrayInit::Distribution::kNormal)
        return RandomArrayBlocks(a.shape, a.dtype, a.init.seed, a.init.scale, blocks);
      break;
    case ArrayInit::Kind::kIota: break;
  }
  // The same values, in the same order and rounded the same way (element by element), as MakeScenarioArray.
  const auto round = [](const std::vector<double>& values, DType dtype) {
    return ArrayFromDoubles(values, {static_cast<int64_t>(values.size())}, dtype);
  };
  const bool iota = a.init.kind == ArrayInit::Kind::kIota;
  const auto stream = [&](int64_t n, const ValueChunk& chunk) {
    std::mt19937_64 rng(a.init.seed);
    std::uniform_real_distribution<double> uniform(-a.init.scale, a.init.scale);
    std::vector<double> values;
    for (int64_t first = 0; first < n; first += kValueChunk) {
      values.resize(static_cast<size_t>(std::min(kValueChunk, n - first)));
      for (size_t i = 0; i < values.size(); ++i)
        values[i] = iota ? static_cast<double>(first + static_cast<int64_t>(i)) : uniform(rng);
      if (!chunk(first, values)) return;
    }
  };
  return BlocksOfValues(a.shape, a.dtype, blocks, stream, round);
}

NpyArray ToNpy(const Array& array) {
  NpyArray out;
  out.dtype = std::string(DTypeName(array.dtype()));
  out.shape = array.shape();
  const auto* bytes = static_cast<const uint8_t*>(array.raw_data());
  if (bytes == nullptr) Throw(ErrorCode::kFailedPrecondition, "cannot write an abstract array {} to .npy", array.ShapeString());
  out.data.assign(bytes, bytes + array.nbytes());
  return out;
}

Scenario LoadScenario(const std::string& path) {
  return ParseScenario(ReadFileBounded(path, kMaxTextFileBytes, "scenario file"), path);
}

const ModelConfig& FirstModelWorkload(const Scenario& s) {
  for (const ScenarioWorkload& w : s.workloads)
    if (const auto* m = std::get_if<ValidatedModel>(&w.config)) return m->config();
  Throw(ErrorCode::kInvalidArgument, "{}: no `kind: model` workload to plan (add one under workloads:)", s.path);
}

}  // namespace spmdsim
