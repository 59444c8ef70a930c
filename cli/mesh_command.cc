// `spmdsim mesh`: lay a named mesh on a topology the way JAX's mesh_utils does, and show it.
//
//   spmdsim mesh --topology tpu-v4:2x2x4 --mesh data=4,model=4
//   spmdsim mesh --topology tpu-v4:2x2x2 --slices 2 --mesh data=1,model=8 --dcn data=2,model=1 --json
//   spmdsim mesh --topology tpu-v3:4x4 --num-partitions 4 --host 1        (T5X default_mesh, host 1's chunk)
//   spmdsim mesh --topology tpu-v4:4x4x4 --submesh 2,2,1,1                (T5X get_mesh)
//
// Structure: flags fill a MeshCommandOptions; BuildMesh turns them into a Mesh (one branch per mode); the
// printers (human or --json) only see the Mesh. A new mode is a field, a flag and a branch in BuildMesh.
#include <algorithm>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/error_context.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "mesh/mesh.h"
#include "mesh/mesh_utils.h"
#include "mesh/t5x_mesh.h"
#include "mesh/topology.h"
#include "scenario/scenario.h"

namespace spmdsim::cli {
namespace {

// Above this many devices the grid and the device table are abbreviated unless --full.
constexpr int64_t kFullOutputLimit = 512;
constexpr int64_t kSummaryRows = 8;
constexpr int64_t kSummaryTableRows = 32;

struct MeshCommandOptions {
  std::string topology;  // a preset with dimensions: "tpu-v4:2x2x4"
  int slices = 1;
  std::string mesh;      // "data=4,model=2": create_device_mesh (ICI axes when --dcn is given)
  std::string dcn;       // "data=2,model=1": create_hybrid_device_mesh, same axes as --mesh
  bool allow_split_physical_axes = false;
  bool contiguous_submeshes = false;
  bool process_is_granule = false;
  bool json = false;
  bool full = false;
  // T5X (t5x/partitioning.py): axes ('data', 'model').
  std::string submesh;         // "2,2,1,1": get_mesh(model_parallel_submesh)
  int num_partitions = 0;      // > 0: default_mesh(num_partitions) (get_gpu_mesh / get_cpu_mesh off TPU)
  bool no_tile_by_host = false;  // get_mesh(..., tile_by_host_if_needed=False)
  std::optional<int> host;     // print what this host holds (T5X LocalChunker)
};

// How the mesh was built, for the human output.
struct BuiltMesh {
  BuiltMesh(Mesh built_mesh, std::string built_how) : mesh(std::move(built_mesh)), how(std::move(built_how)) {}
  Mesh mesh;
  std::string how;  // "create_device_mesh((4, 4))", ...
  std::vector<std::string> details;  // more lines about how (T5X get_mesh's steps)
  nlohmann::json details_json = nullptr;
};

// "2,2,1,1" -> {2, 2, 1, 1}.
t5x::HardwareMesh ParseSubmesh(const std::string& text) {
  t5x::HardwareMesh out;
  for (const std::string& part : Split(text, ',')) {
    out.push_back(static_cast<int>(ParseIntIn(part, "--submesh entry", 1, std::numeric_limits<int>::max())));
  }
  return out;
}

// T5X: get_mesh / default_mesh / get_gpu_mesh / get_cpu_mesh.
BuiltMesh BuildT5xMesh(const MeshCommandOptions& o, const std::shared_ptr<const Topology>& topology) {
  if (!o.mesh.empty() || !o.dcn.empty() || o.allow_split_physical_axes || o.contiguous_submeshes ||
      o.process_is_granule) {
    Throw(ErrorCode::kInvalidArgument,
          "--submesh / --num-partitions build T5X's ('data', 'model') mesh; they do not combine with --mesh, "
          "--dcn, --allow-split-physical-axes, --contiguous-submeshes or --process-is-granule");
  }
  if (o.num_partitions < 0)
    Throw(ErrorCode::kInvalidArgument, "--num-partitions must be >= 1, got {}", o.num_partitions);
  t5x::HardwareMesh submesh;
  std::string how;
  if (!o.submesh.empty()) {
    submesh = ParseSubmesh(o.submesh);
    how = o.num_partitions > 0
              ? fmt::format("t5x default_mesh({}, model_parallel_submesh={}) = get_mesh({})", o.num_partitions,
                            PyTuple(submesh), PyTuple(submesh))
              : fmt::format("t5x get_mesh({})", PyTuple(submesh));
  } else if (topology->platform() != Platform::kTpu && o.no_tile_by_host) {
    Throw(ErrorCode::kInvalidArgument,
          "--no-tile-by-host applies to get_mesh; default_mesh on {} uses get_{}_mesh (give --submesh HOSTS,DEVICES "
          "for get_mesh)",
          PlatformName(topology->platform()), PlatformName(topology->platform()));
  } else if (topology->platform() == Platform::kCpu) {
    return {t5x::GetCpuMesh(topology), fmt::format("t5x default_mesh({}) = get_cpu_mesh()", o.num_partitions)};
  } else if (topology->platform() == Platform::kGpu) {
    return {t5x::GetGpuMesh(o.num_partitions, topology),
            fmt::format("t5x default_mesh({0}) = get_gpu_mesh({0})", o.num_partitions)};
  } else {
    submesh = t5x::DefaultSubmesh(o.num_partitions, *topology);  // t5x's multi-line message: main prints one line
    how = fmt::format("t5x default_mesh({}) = get_mesh({})", o.num_partitions, PyTuple(submesh));
  }
  if (o.no_tile_by_host) how.insert(how.size() - 1, ", tile_by_host_if_needed=False");
  t5x::GetMeshSteps steps;
  Mesh mesh = t5x::GetMesh(submesh, topology, 0, !o.no_tile_by_host, &steps);
  BuiltMesh built{std::move(mesh), how};
  built.details.push_back(fmt::format("hardware mesh {} ({}), per-host bounds {}",
                                      PyTuple(steps.global_hardware_mesh),
                                      steps.global_hardware_mesh.size() == 4 ? "x, y, z, cores" : "hosts, devices",
                                      PyTuple(steps.local_hardware_mesh)));
  if (!steps.z_major_swap.empty()) {
    built.details.push_back(fmt::format("{} plane made Z-major: hardware axes reordered, submesh read as {}",
                                        steps.z_major_swap == "yz" ? "YZ" : "XZ", PyTuple(steps.submesh_after_swap)));
  }
  built.details.push_back(steps.tiled_by_host
                              ? "device order tiled by host (data hosts, data devices, model hosts, model devices)"
                              : "device order (data, model) per hardware axis, not tiled by host");
  built.details_json = {{"function", how},
                        {"global_hardware_mesh", steps.global_hardware_mesh},
                        {"local_hardware_mesh", steps.local_hardware_mesh},
                        {"z_major_swap", steps.z_major_swap},
                        {"submesh", submesh},
                        {"tiled_by_host", steps.tiled_by_host}};
  return built;
}

BuiltMesh BuildMesh(const MeshCommandOptions& o, const std::shared_ptr<const Topology>& topology) {
  if (!o.submesh.empty() || o.num_partitions != 0) return BuildT5xMesh(o, topology);
  if (o.no_tile_by_host)
    Throw(ErrorCode::kInvalidArgument, "--no-tile-by-host applies to --submesh / --num-partitions");
  if (!o.dcn.empty() && o.mesh.empty()) {
    Throw(ErrorCode::kInvalidArgument, "--dcn needs --mesh with the same axis names (the ICI part of each axis)");
  }
  if (o.process_is_granule && o.dcn.empty()) {
    Throw(ErrorCode::kInvalidArgument, "--process-is-granule applies to hybrid meshes only; give --dcn too");
  }
  if (o.contiguous_submeshes && !o.dcn.empty()) {
    Throw(ErrorCode::kInvalidArgument,
          "--contiguous-submeshes applies to create_device_mesh only; create_hybrid_device_mesh (--dcn) has no "
          "such option");
  }
  MeshOptions options;
  options.allow_split_physical_axes = o.allow_split_physical_axes;
  options.contiguous_submeshes = o.contiguous_submeshes;
  options.process_is_granule = o.process_is_granule;

  if (o.mesh.empty()) {
    // Default: one axis `devices` over every device; with several slices the slices are its major part.
    const int64_t n = topology->num_devices();
    const int64_t k = topology->num_slices();
    if (k > 1) {
      return {MakeDeviceMesh(topology, {{"devices", n / k}}, {{"devices", k}}, options),
              fmt::format("create_hybrid_device_mesh(({},), ({},))", n / k, k)};
    }
    return {MakeDeviceMesh(topology, {{"devices", n}}, {}, options), fmt::format("create_device_mesh(({},))", n)};
  }
  auto ici = ParseNamedSizes(o.mesh, "--mesh");
  std::vector<int64_t> ici_sizes;
  for (const auto& [name, size] : ici) ici_sizes.push_back(size);
  if (o.dcn.empty()) {
    return {MakeDeviceMesh(topology, ici, {}, options), fmt::format("create_device_mesh({})", PyTuple(ici_sizes))};
  }
  auto dcn = ParseNamedSizes(o.dcn, "--dcn");
  std::vector<std::string> ici_names, dcn_names;
  std::vector<int64_t> dcn_sizes;
  for (const auto& [name, size] : ici) ici_names.push_back(name);
  for (const auto& [name, size] : dcn) {
    dcn_names.push_back(name);
    dcn_sizes.push_back(size);
  }
  if (ici_names != dcn_names) {
    Throw(ErrorCode::kInvalidArgument,
          "--dcn axes {} must be the --mesh axes {} in the same order (use size 1 for an axis without a DCN part)",
          PyTuple(dcn_names), PyTuple(ici_names));
  }
  return {MakeDeviceMesh(topology, ici, dcn, options),
          fmt::format("create_hybrid_device_mesh({}, {})", PyTuple(ici_sizes), PyTuple(dcn_sizes))};
}

// "45 GB/s", "450 GB/s", "12.5 GB/s".
std::string FormatBandwidth(double bytes_per_s) {
  if (bytes_per_s >= 1e9) return fmt::format("{:g} GB/s", bytes_per_s / 1e9);
  return fmt::format("{:g} MB/s", bytes_per_s / 1e6);
}

nlohmann::json TopologyJson(const Topology& t) {
  nlohmann::json links = nlohmann::json::object();
  for (const auto& [link_class, spec] : t.links()) {
    links[std::string(LinkClassName(link_class))] = {
        {"latency_s", spec.latency_s}, {"bandwidth_Bps", spec.bandwidth_Bps}, {"source", spec.source}};
  }
  return {{"preset", t.preset()},
          {"spec", t.ToString()},
          {"platform", std::string(PlatformName(t.platform()))},
          {"device_kind", t.device_kind()},
          {"num_devices", t.num_devices()},
          {"num_processes", t.num_processes()},
          {"num_slices", t.num_slices()},
          {"chips_per_dim", t.chips_per_dim()},
          {"cores_per_chip", t.cores_per_chip()},
          {"wraparound", t.wraparound()},
          {"links", links}};
}

nlohmann::json MeshJson(const Mesh& mesh, const Topology& t) {
  nlohmann::json devices = nlohmann::json::array();
  for (int64_t p = 0; p < mesh.size(); ++p) {
    const Device& d = t.device(mesh.DeviceAt(p));
    devices.push_back({{"id", d.id},
                       {"coords", mesh.CoordsOfPosition(p)},
                       {"chip_coords", d.coords},
                       {"core_on_chip", d.core_on_chip},
                       {"process_index", d.process_index},
                       {"slice_index", d.slice_index}});
  }
  return {{"axis_names", mesh.axis_names()},
          {"shape", mesh.shape()},
          {"device_ids", mesh.device_ids()},
          {"devices", devices},
          {"topology", TopologyJson(t)}};
}

void PrintTopology(const Topology& t) {
  fmt::print("topology: {} ({}, {}): {} devices, {} host{}, {} slice{}\n", t.ToString(), PlatformName(t.platform()),
             t.device_kind(), t.num_devices(), t.num_processes(), t.num_processes() == 1 ? "" : "s", t.num_slices(),
             t.num_slices() == 1 ? "" : "s");
  if (t.platform() == Platform::kTpu) {
    const auto& w = t.wraparound();
    fmt::print("  chips per slice {}, {} core(s) per chip, host block {}, wraparound x:{} y:{} z:{}\n",
               fmt::join(t.chips_per_dim(), "x"), t.cores_per_chip(), fmt::join(t.host_block(), "x"),
               w[0] ? "yes" : "no", w[1] ? "yes" : "no", w[2] ? "yes" : "no");
  }
  for (const auto& [link_class, spec] : t.links()) {
    fmt::print("  link {:<11} {:>10} one-way, latency {}\n", LinkClassName(link_class),
               FormatBandwidth(spec.bandwidth_Bps), FormatSeconds(spec.latency_s, SecondsStyle::kAsWritten));
  }
}

// One 2-D (or 1-D) slice of the grid: rows along axis `r`, columns along axis `c` (c < 0: a single row).
void PrintGrid(const Mesh& mesh, std::vector<int64_t> index, int r, int c, int64_t max_rows) {
  const auto& names = mesh.axis_names();
  const int64_t rows = r >= 0 ? mesh.shape()[r] : 1;
  const int64_t cols = c >= 0 ? mesh.shape()[c] : 1;
  const int width = static_cast<int>(std::to_string(mesh.topology()->num_devices() - 1).size()) + 1;
  std::string row_label_head = r >= 0 ? names[r] : "";
  const int label = static_cast<int>(row_label_head.size() + std::to_string(rows - 1).size()) + 2;
  if (c >= 0) fmt::print("  {:>{}} {} ->\n", "", label, names[c]);
  for (int64_t i = 0; i < std::min(rows, max_rows); ++i) {
    if (r >= 0) index[r] = i;
    std::string line = r >= 0 ? fmt::format("{}={}", names[r], i) : std::string();
    line = fmt::format("  {:>{}}", line, label);
    for (int64_t j = 0; j < cols; ++j) {
      if (c >= 0) index[c] = j;
      line += fmt::format("{:>{}}", mesh.DeviceAt(mesh.PositionOf(index)), width);
    }
    fmt::print("{}\n", line);
  }
  if (rows > max_rows) fmt::print("  ... {} more rows of {}\n", rows - max_rows, names[r]);
}

void PrintMesh(const BuiltMesh& built, bool full) {
  const Mesh& mesh = built.mesh;
  const Topology& t = *mesh.topology();
  fmt::print("\nmesh: {} = {}\n", mesh.ToString(), built.how);
  for (const std::string& line : built.details) fmt::print("  {}\n", line);
  const bool abbreviate = mesh.size() > kFullOutputLimit && !full;
  const int rank = mesh.rank();
  if (rank == 0) {
    fmt::print("  device {}\n", mesh.DeviceAt(0));
  } else if (rank == 1) {
    std::vector<int64_t> index(1, 0);
    if (abbreviate) {
      fmt::print("  {} devices along {}; first {}: {} ... (--full prints all)\n", mesh.size(), mesh.axis_names()[0],
                 kFullOutputLimit / 4,
                 fmt::join(mesh.device_ids().begin(), mesh.device_ids().begin() + kFullOutputLimit / 4, " "));
    } else {
      fmt::print("  {}: {}\n", mesh.axis_names()[0], fmt::join(mesh.device_ids(), " "));
    }
  } else {
    // 2-D slices over the last two axes, labelled by the leading coordinates.
    const int r = rank - 2, c = rank - 1;
    const int64_t per_slice = mesh.shape()[r] * mesh.shape()[c];
    const int64_t num_slices = mesh.size() / per_slice;
    if (abbreviate) {
      fmt::print("  {} devices; showing the first {} rows of the first of {} grid(s) (--full prints all)\n",
                 mesh.size(), kSummaryRows, num_slices);
    }
    for (int64_t s = 0; s < (abbreviate ? 1 : num_slices); ++s) {
      std::vector<int64_t> index(rank, 0);
      int64_t rest = s;
      for (int d = rank - 3; d >= 0; --d) {
        index[d] = rest % mesh.shape()[d];
        rest /= mesh.shape()[d];
      }
      if (rank > 2) {
        std::vector<std::string> labels;
        for (int d = 0; d < rank - 2; ++d) labels.push_back(fmt::format("{}={}", mesh.axis_names()[d], index[d]));
        fmt::print("  [{}]\n", fmt::join(labels, ", "));
      }
      PrintGrid(mesh, index, r, c, abbreviate ? kSummaryRows : mesh.shape()[r]);
    }
  }

  fmt::print("\ndevices (mesh order):\n");
  fmt::print("  {:>5}  {:<16} {:<10} {:>4} {:>7} {:>5}\n", "id", "mesh coords", "chip", "core", "process", "slice");
  const int64_t rows = abbreviate ? kSummaryTableRows : mesh.size();
  for (int64_t p = 0; p < rows; ++p) {
    const Device& d = t.device(mesh.DeviceAt(p));
    fmt::print("  {:>5}  {:<16} {:<10} {:>4} {:>7} {:>5}\n", d.id, PyTuple(mesh.CoordsOfPosition(p)),
               fmt::format("({})", fmt::join(d.coords, ",")), d.core_on_chip, d.process_index, d.slice_index);
  }
  if (rows < mesh.size()) fmt::print("  ... {} more devices (--full prints all)\n", mesh.size() - rows);
}

// What host `host` holds of the mesh (T5X LocalChunker): its block of the mesh, its chunk along each axis,
// and the shard / replica numbers t5x gives it.
nlohmann::json LocalChunkJson(const t5x::LocalChunker& chunker) {
  const Mesh& global = chunker.global_mesh();
  nlohmann::json axes = nlohmann::json::object();
  for (int a = 0; a < global.rank(); ++a) {
    const std::string& name = global.axis_names()[a];
    axes[name] = {{"num_chunks", chunker.num_chunks()[a]},
                  {"chunk_id", chunker.chunk_ids()[a]},
                  {"shard_id", chunker.GetShardId({name})},
                  {"replica_id", chunker.GetReplicaId({name})}};
  }
  return {{"host", chunker.host()},
          {"local_shape", chunker.local_mesh().shape()},
          {"local_device_ids", chunker.local_mesh().device_ids()},
          {"axes", axes}};
}

void PrintLocalChunk(const t5x::LocalChunker& chunker) {
  const Mesh& global = chunker.global_mesh();
  const Mesh& local = chunker.local_mesh();
  fmt::print("\nhost {} (T5X LocalChunker): local mesh {}, devices {}\n", chunker.host(), local.ToString(),
             fmt::join(local.device_ids(), " "));
  for (int a = 0; a < global.rank(); ++a) {
    const std::string& name = global.axis_names()[a];
    fmt::print("  {:<8} chunk {} of {}; an array sharded over '{}' gets shard_id {}, replica_id {}\n", name,
               chunker.chunk_ids()[a], chunker.num_chunks()[a], name, chunker.GetShardId({name}),
               chunker.GetReplicaId({name}));
  }
}

// --topology names a scenario file (rather than a preset) when it ends in .yaml/.yml or is an existing file.
bool IsScenarioFile(const std::string& text) {
  const auto ends_with = [&](std::string_view suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  std::error_code ec;  // a name too long for a path is a preset, not an error here
  return ends_with(".yaml") || ends_with(".yml") || std::filesystem::is_regular_file(text, ec);
}

ExitCode RunMeshCommand(const MeshCommandOptions& o) {
  std::shared_ptr<const Topology> topology;
  std::optional<Scenario> scenario;
  if (IsScenarioFile(o.topology)) {
    if (o.slices != 1) Throw(ErrorCode::kInvalidArgument, "--slices applies to presets; a scenario file gives its own");
    scenario = LoadScenario(o.topology);
    topology = scenario->topology.topology;
  } else {
    topology = std::make_shared<const Topology>(Topology::Parse(o.topology, o.slices));
  }
  const bool mesh_flags = !o.mesh.empty() || !o.dcn.empty() || !o.submesh.empty() || o.num_partitions > 0;
  std::optional<BuiltMesh> maybe_built;
  try {
    if (scenario && !mesh_flags) {
      maybe_built.emplace(scenario->mesh.mesh, fmt::format("{} (scenario {})", scenario->mesh.description,
                                                           scenario->path));
    } else {
      maybe_built = BuildMesh(o, topology);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotImplementedError) throw;
    // Name the flag the library's message calls allow_split_physical_axes.
    RethrowWithContext(e, e.message() + " (flag: --allow-split-physical-axes)");
  }
  const BuiltMesh& built = *maybe_built;
  std::optional<t5x::LocalChunker> chunker;
  if (o.host) chunker.emplace(built.mesh, *o.host);
  if (o.json) {
    nlohmann::json out = MeshJson(built.mesh, *topology);
    if (!built.details_json.is_null()) out["t5x"] = built.details_json;
    if (chunker) out["local_chunk"] = LocalChunkJson(*chunker);
    fmt::print("{}\n", out.dump());
    return ExitCode::kOk;
  }
  PrintTopology(*topology);
  PrintMesh(built, o.full);
  if (chunker) PrintLocalChunk(*chunker);
  return ExitCode::kOk;
}

}  // namespace

void AddMeshCommand(CLI::App& app, ExitCode& exit_code) {
  auto options = std::make_shared<MeshCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "mesh",
      "Lay a named device mesh on a topology as JAX's mesh_utils.create_device_mesh / create_hybrid_device_mesh "
      "do, and print it (grid of device ids, then one row per device).\n"
      "Without --mesh: one axis named `devices` over all devices (with --slices K > 1: the hybrid mesh "
      "(N/K,) x (K,), slices major).\n"
      "Axes go from least to most communication-heavy: the last axis gets the best links.");
  cmd->add_option("--topology", options->topology,
                  "preset with dimensions: tpu-v2:2x2, tpu-v3:4x4, tpu-v4:2x2x4, tpu-v5e:4x4, tpu-v5p:2x2x2, "
                  "tpu-v6e:4x4, dgx-h100:4 (hosts of 8), dgx-a100:2, gpu:2x8 (HOSTSxGPUS), cpu:8; or a scenario file "
                  "(.yaml): its topology, and its mesh unless --mesh/--dcn/--submesh/--num-partitions is given")
      ->required();
  cmd->add_option("--slices", options->slices, "number of identical TPU slices joined by DCN")
      ->check(IntIn(1, std::numeric_limits<int>::max()));
  cmd->add_option("--mesh", options->mesh, "named axis sizes, e.g. data=4,model=4 (create_device_mesh)");
  cmd->add_option("--dcn", options->dcn,
                  "DCN part of each --mesh axis, same names in the same order, e.g. data=2,model=1 "
                  "(create_hybrid_device_mesh: result size per axis = mesh x dcn)");
  cmd->add_flag("--allow-split-physical-axes", options->allow_split_physical_axes,
                "let one physical axis serve several mesh axes when no exact assignment exists");
  cmd->add_flag("--contiguous-submeshes", options->contiguous_submeshes,
                "make each host's devices a contiguous block (only JAX's few supported shapes)");
  cmd->add_flag("--process-is-granule", options->process_is_granule,
                "with --dcn: group devices by process instead of by slice");
  cmd->add_option("--submesh", options->submesh,
                  "T5X get_mesh: the model-parallel submesh X,Y,Z,CORES on TPU (HOSTS,DEVICES elsewhere), e.g. "
                  "2,2,1,1; the mesh is ('data', 'model') with 'model' over one submesh");
  cmd->add_option("--num-partitions", options->num_partitions,
                  "T5X default_mesh(N): its submesh table on TPU v2/v3/v4, get_gpu_mesh(N) on GPU, get_cpu_mesh() "
                  "on CPU; with --submesh, the submesh wins as in t5x")
      ->check(IntIn(1, std::numeric_limits<int>::max()));
  cmd->add_flag("--no-tile-by-host", options->no_tile_by_host,
                "T5X get_mesh(..., tile_by_host_if_needed=False)");
  cmd->add_option("--host", options->host,
                  "also print what this host (process index) holds: T5X LocalChunker's chunk per axis, shard and "
                  "replica ids (works with every mesh)")
      ->check(IntIn(0, std::numeric_limits<int>::max()));
  cmd->add_flag("--json", options->json,
                "print one JSON object: axis_names, shape, device_ids (row-major), devices, topology");
  cmd->add_flag("--full", options->full, "print the whole grid and device table even above 512 devices");
  cmd->callback([options, &exit_code] { exit_code = RunMeshCommand(*options); });
}

}  // namespace spmdsim::cli
