// `topology:` and `mesh:` of a scenario file (scenario/internal/scenario_parsers.h).
#include <algorithm>
#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/strings.h"
#include "mesh/mesh_utils.h"
#include "mesh/t5x_mesh.h"
#include "scenario/calibration_file.h"
#include "scenario/internal/scenario_parsers.h"

namespace spmdsim {
namespace {

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

// Bounds the device count a preset's dimensions imply before anything is built (a fuzzed "cpu:999999999" must
// not allocate); Topology::Parse reports malformed dimensions.
void CheckPresetSize(const YamlContext& ctx, const YamlMap& m, const std::string& preset, int64_t slices) {
  const size_t colon = preset.find(':');
  if (colon == std::string::npos) return;
  int64_t n = slices;
  for (const std::string& part : Split(std::string_view(preset).substr(colon + 1), 'x')) {
    int64_t d = 0;
    try {
      d = ParseInt(Trim(part), "topology.preset");
    } catch (const Error&) {
      return;
    }
    if (d > kMaxScenarioDevices || (d > 0 && n > kMaxScenarioDevices / d))
      ctx.Fail(m.Get("preset"), "topology.preset",
               fmt::format("'{}' has more than {} devices; spmdsim simulates at most that many", preset,
                           kMaxScenarioDevices));
    n *= std::max<int64_t>(d, 1);
  }
  if (preset.rfind("dgx", 0) == 0 && n * 8 > kMaxScenarioDevices)
    ctx.Fail(m.Get("preset"), "topology.preset", fmt::format("'{}' has too many devices", preset));
}

// `preset` and `slices`: the topology before any override.
std::shared_ptr<Topology> ParsePreset(const YamlContext& ctx, const YamlMap& m, const std::string& preset) {
  const int64_t slices = m.Int("slices", 1);
  if (slices < 1 || slices > 1024) ctx.Fail(m.Get("slices"), "topology.slices", "expected an integer in [1, 1024]");
  std::shared_ptr<Topology> topology;
  try {
    CheckPresetSize(ctx, m, preset, slices);
    topology = std::make_shared<Topology>(Topology::Parse(preset, static_cast<int>(slices)));
  } catch (const LocatedError&) {
    throw;
  } catch (const Error& e) {
    ctx.Rethrow(m.Get(m.Has("slices") && preset.rfind("tpu", 0) != 0 ? "slices" : "preset"), "topology.preset", e);
  }
  if (topology->num_devices() > kMaxScenarioDevices)
    ctx.Fail(m.Get("preset"), "topology.preset",
             fmt::format("{} devices; spmdsim simulates at most {}", topology->num_devices(), kMaxScenarioDevices));
  return topology;
}

// `network:` (GPU presets): NICs per node, their speed, latency, oversubscription.
void ParseNetwork(const YamlContext& ctx, const YAML::Node& n, const std::string& preset, Topology* topology) {
  if (topology->platform() != Platform::kGpu)
    ctx.Fail(n, "topology.network", fmt::format("a network section applies to GPU presets; {} is not one", preset));
  YamlMap nm(ctx, n, "topology.network", {"nics_per_node", "nic_Gbps", "latency_us", "oversubscription"});
  NetworkSpec network = topology->network();
  if (nm.Has("nics_per_node")) {
    const int64_t nics = nm.Int("nics_per_node", network.nics_per_node);
    if (nics < 1 || nics > 1024)
      ctx.Fail(nm.Get("nics_per_node"), nm.Key("nics_per_node"), "expected an integer in [1, 1024]");
    network.nics_per_node = static_cast<int>(nics);
  }
  if (nm.Has("nic_Gbps")) network.nic_Bps = ctx.NumberIn(nm.Get("nic_Gbps"), nm.Key("nic_Gbps"), 0, 1e6) * 1e9 / 8;
  if (nm.Has("latency_us"))
    network.latency_s = ctx.NumberIn(nm.Get("latency_us"), nm.Key("latency_us"), 0, 1e6) * 1e-6;
  if (nm.Has("oversubscription")) {
    const double o = ctx.Number(nm.Get("oversubscription"), nm.Key("oversubscription"));
    if (!(o >= 1 && o <= 1e3))
      ctx.Fail(nm.Get("oversubscription"), nm.Key("oversubscription"),
               "expected a number in [1, 1000] (1 = non-blocking)");
    network.oversubscription = o;
  }
  network.source = "scenario file (topology.network)";
  SetAt(ctx, n, "topology.network", [&] { topology->SetNetwork(network); });
}

// `links:`: per link class, latency and bandwidth overrides.
void ParseLinks(const YamlContext& ctx, const YAML::Node& links, const std::string& preset, Topology* topology) {
  YamlMap lm(ctx, links, "topology.links", {"ici", "nvlink", "pcie", "dcn", "infiniband", "host_memory"});
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

// `wraparound:` (TPU presets): one boolean, or one per torus dimension.
void ParseWraparound(const YamlContext& ctx, const YAML::Node& w, const std::string& preset, Topology* topology) {
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

// `nvlink_sharp` (GPU presets).
void ParseNvlinkSharp(const YamlContext& ctx, const YAML::Node& node, const std::string& preset, Topology* topology) {
  const bool nvls = ctx.Bool(node, "topology.nvlink_sharp");
  if (topology->platform() != Platform::kGpu)
    ctx.Fail(node, "topology.nvlink_sharp", fmt::format("{} is not a GPU preset", preset));
  topology->SetNvlinkSharp(nvls);
}

// The device figures: `hbm_GiB`, `peak_TFLOPs`.
void ParseDeviceFigures(const YamlContext& ctx, const YamlMap& m, Topology* topology) {
  if (m.Has("hbm_GiB")) {
    double gib = ctx.NumberIn(m.Get("hbm_GiB"), "topology.hbm_GiB", 0, 1e6);
    SetAt(ctx, m.Get("hbm_GiB"), "topology.hbm_GiB",
          [&] { topology->SetMemoryBytes(static_cast<int64_t>(gib * static_cast<double>(kGiB))); });
  }
  if (m.Has("peak_TFLOPs")) {
    YamlMap pm(ctx, m.Get("peak_TFLOPs"), "topology.peak_TFLOPs", {"bf16", "f16", "f32", "f64", "int8"});
    for (const std::string& dtype : pm.keys()) {
      const double flops = ctx.NumberIn(pm.Get(dtype), pm.Key(dtype), 0, 1e9) * 1e12;
      SetAt(ctx, pm.Get(dtype), pm.Key(dtype), [&] { topology->SetPeakFlops(ParseDType(dtype), flops); });
    }
  }
}

// `stragglers:`: a list of {device, speed}.
std::vector<std::pair<int, double>> ParseStragglers(const YamlContext& ctx, const YAML::Node& s,
                                                     const Topology& topology) {
  ctx.RequireSequence(s, "topology.stragglers");
  std::vector<std::pair<int, double>> out;
  std::set<int64_t> seen;
  for (size_t i = 0; i < s.size(); ++i) {
    std::string key = fmt::format("topology.stragglers[{}]", i);
    YamlMap sm(ctx, s[i], key, {"device", "speed"});
    int64_t device = ctx.Int(sm.Need("device"), sm.Key("device"));
    if (device < 0 || device >= topology.num_devices())
      ctx.Fail(sm.Get("device"), sm.Key("device"),
               fmt::format("device {} does not exist; valid ids are 0..{}", device, topology.num_devices() - 1));
    if (!seen.insert(device).second)
      ctx.Fail(sm.Get("device"), sm.Key("device"), fmt::format("device {} is listed twice", device));
    double speed = ctx.NumberIn(sm.Need("speed"), sm.Key("speed"), 0, 1);
    out.emplace_back(static_cast<int>(device), speed);
  }
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
      if (size < 1 || size > kMaxScenarioDevices)
        ctx.Fail(it->second, key + "." + name,
                 fmt::format("axis size {} is not in [1, {}]", size, kMaxScenarioDevices));
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

// `mesh.t5x:`: T5X's default_mesh / get_mesh, the whole mesh ('data', 'model').
ScenarioMesh ParseT5xMesh(const YamlContext& ctx, const YamlMap& m, const std::shared_ptr<const Topology>& topology) {
  for (const std::string& k : m.keys())
    if (k != "t5x")
      ctx.Fail(m.Get(k), m.Key(k), "mesh.t5x builds the whole mesh ('data', 'model'); remove the other mesh keys");
  YamlMap t(ctx, m.Get("t5x"), "mesh.t5x",
            {"num_partitions", "model_parallel_submesh", "ici_mesh_shape", "dcn_mesh_shape"});
  int64_t num_partitions = t.Int("num_partitions", 1);
  if (num_partitions < 1 || num_partitions > kMaxScenarioDevices)
    ctx.Fail(t.Get("num_partitions"), t.Key("num_partitions"), "expected a positive integer");
  std::optional<t5x::HardwareMesh> submesh;
  if (t.Has("model_parallel_submesh")) {
    t5x::HardwareMesh hw;
    for (int64_t v : ctx.IntList(t.Get("model_parallel_submesh"), t.Key("model_parallel_submesh"))) {
      if (v < 1 || v > kMaxScenarioDevices)
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
  ScenarioMesh out;
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

// The MakeDeviceMesh options: the flags and an explicit `devices:` list.
MeshOptions ParseMeshOptions(const YamlContext& ctx, const YamlMap& m, const Topology& topology) {
  MeshOptions options;
  options.contiguous_submeshes = m.Bool("contiguous_submeshes", false);
  options.allow_split_physical_axes = m.Bool("allow_split_physical_axes", false);
  options.process_is_granule = m.Bool("process_is_granule", false);
  options.should_sort_granules_by_key = m.Bool("should_sort_granules_by_key", true);
  if (m.Has("devices")) {
    std::vector<int> devices;
    for (int64_t id : ctx.IntList(m.Get("devices"), "mesh.devices")) {
      if (id < 0 || id >= topology.num_devices())
        ctx.Fail(m.Get("devices"), "mesh.devices",
                 fmt::format("device {} does not exist; valid ids are 0..{}", id, topology.num_devices() - 1));
      devices.push_back(static_cast<int>(id));
    }
    options.devices = devices;
  }
  return options;
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

}  // namespace

ScenarioTopology ParseTopology(const YamlContext& ctx, const YAML::Node& node) {
  YamlMap m(ctx, node, "topology",
            {"preset", "slices", "links", "network", "nvlink_sharp", "wraparound", "hbm_GiB", "peak_TFLOPs",
             "efficiency", "stragglers", "calibration"});
  const std::string preset = ctx.String(m.Need("preset"), "topology.preset");
  std::shared_ptr<Topology> topology = ParsePreset(ctx, m, preset);
  if (m.Has("network")) ParseNetwork(ctx, m.Get("network"), preset, topology.get());
  if (m.Has("nvlink_sharp")) ParseNvlinkSharp(ctx, m.Get("nvlink_sharp"), preset, topology.get());
  if (m.Has("links")) ParseLinks(ctx, m.Get("links"), preset, topology.get());
  if (m.Has("wraparound")) ParseWraparound(ctx, m.Get("wraparound"), preset, topology.get());
  ParseDeviceFigures(ctx, m, topology.get());
  ScenarioTopology out;
  if (m.Has("efficiency")) {
    YamlMap em(ctx, m.Get("efficiency"), "topology.efficiency", {"compute", "memory"});
    if (em.Has("compute")) out.efficiency.compute_efficiency = ctx.NumberIn(em.Get("compute"), em.Key("compute"), 0, 1);
    if (em.Has("memory")) out.efficiency.memory_efficiency = ctx.NumberIn(em.Get("memory"), em.Key("memory"), 0, 1);
  }
  if (m.Has("stragglers")) out.stragglers = ParseStragglers(ctx, m.Get("stragglers"), *topology);
  if (m.Has("calibration")) out.calibration = ParseCalibrationKey(ctx, m, *topology);
  out.topology = std::move(topology);
  return out;
}

ScenarioMesh ParseMesh(const YamlContext& ctx, const YAML::Node& node,
                       const std::shared_ptr<const Topology>& topology) {
  YamlMap m(ctx, node, "mesh",
            {"axes", "dcn_axes", "devices", "contiguous_submeshes", "allow_split_physical_axes", "process_is_granule",
             "should_sort_granules_by_key", "t5x"});
  if (m.Has("t5x")) return ParseT5xMesh(ctx, m, topology);
  auto ici = ParseAxes(ctx, m.Need("axes"), "mesh.axes");
  std::vector<std::pair<std::string, int64_t>> dcn;
  if (m.Has("dcn_axes")) dcn = ParseAxes(ctx, m.Get("dcn_axes"), "mesh.dcn_axes");
  const MeshOptions options = ParseMeshOptions(ctx, m, *topology);
  ScenarioMesh out;
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

}  // namespace spmdsim
