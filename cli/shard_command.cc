// `spmdsim shard`: how an array of a given shape is laid out by a PartitionSpec on a mesh -- the corrected spec and
// every correction, the shard shape, which block each device holds (JAX: devices_indices_map) with its replica id,
// the blocks per host and the bytes per device.
//
//   spmdsim shard --mesh dp=2,fsdp=4,tp=2 --shape 8,1024,4096 --spec "P(('dp','fsdp'),None,'tp')" [--topology T]
//                 [--dtype f32] [--correct none|eformer|keep-most] [--json]
//
// Without --topology the devices are numbered row-major over the mesh on a CPU host. With --topology [--slices K]
// [--dcn ...] the mesh is built as `spmdsim mesh` builds it (JAX's mesh_utils.create_device_mesh /
// create_hybrid_device_mesh), so it must use every device of the topology.
#include <algorithm>
#include <map>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/error_context.h"
#include "common/shape.h"
#include "common/strings.h"
#include "mesh/mesh.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "partition/correction.h"
#include "partition/memory_analysis.h"
#include "partition/named_sharding.h"
#include "partition/partition_spec.h"
#include "partition/sharding_picture.h"

namespace spmdsim::cli {
namespace {


struct ShardArgs {
  std::string topology;
  int slices = 1;
  std::string dcn;
  std::string mesh;
  std::string shape;
  std::string spec;
  std::string dtype = "f32";
  std::string correct = "none";
  int width = 80;
  int max_devices = 64;
  bool json = false;
};

std::string RangeText(std::span<const IndexRange> index) {
  std::vector<std::string> parts;
  for (const auto& r : index) parts.push_back(fmt::format("{}:{}", r.start, r.stop));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

// Everything the command prints, computed once. `by_process` points into `layout.shards` (kept valid by moves).
struct ShardLayout {
  Mesh mesh;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  PartitionSpec requested;
  CorrectionReport report;
  ShardingLayout layout;
  MemoryAnalysis memory;
  std::vector<std::vector<const DeviceShard*>> by_process;
};

// The distinct blocks among a host's devices.
size_t DistinctShards(const std::vector<const DeviceShard*>& shards) {
  std::vector<int64_t> ids;
  for (const DeviceShard* s : shards) ids.push_back(s->shard_id);
  std::sort(ids.begin(), ids.end());
  return static_cast<size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

ShardLayout ComputeShardLayout(const ShardArgs& args) {
  ShardLayout out;
  out.mesh = BuildCliMesh(args.mesh, args.topology, args.slices, args.dcn);
  out.shape = ParseShape(args.shape, "--shape");
  out.requested = PartitionSpec::Parse(args.spec);
  try {
    out.dtype = ParseDType(args.dtype);
  } catch (const Error& e) {
    RethrowWithContext(e, fmt::format("--dtype: {}", e.message()));
  }
  CorrectionOptions options;
  options.mode = ParseCorrectionMode(args.correct);
  options.element_bytes = DTypeSize(out.dtype);
  try {
    out.report = CorrectSpec(out.requested, out.mesh, out.shape, options);
  } catch (const Error& e) {
    RethrowWithAxisHint(e);  // JAX's message and a did-you-mean for a misspelt mesh axis
  }
  out.layout = NamedSharding(out.mesh, out.report.corrected).Layout(out.shape);
  out.memory = AnalyzeMemory({{"array", out.shape, out.dtype, out.report.corrected}}, out.mesh);
  out.by_process = out.layout.ShardsByProcess();
  return out;
}

nlohmann::json ShardJson(const ShardLayout& l) {
  const CorrectionReport& report = l.report;
  nlohmann::json j;
  j["mesh"] = nlohmann::json::object();
  nlohmann::json mesh_axes = nlohmann::json::array();
  for (int i = 0; i < l.mesh.rank(); ++i) mesh_axes.push_back({l.mesh.axis_names()[i], l.mesh.shape()[i]});
  j["mesh"]["axes"] = mesh_axes;
  j["mesh"]["topology"] = l.mesh.topology() != nullptr ? l.mesh.topology()->ToString() : "";
  j["global_shape"] = l.shape;
  j["dtype"] = DTypeShortName(l.dtype);
  j["requested_spec"] = SpecJson(l.requested);
  j["spec"] = SpecJson(report.corrected);
  j["spec_repr"] = report.corrected.ToString();
  j["correct"] = std::string(CorrectionModeName(report.mode));
  j["corrections"] = nlohmann::json::array();
  for (const Correction& c : report.corrections) {
    j["corrections"].push_back({{"dim", c.dim},
                                {"from", EntryJson(c.from)},
                                {"to", c.to ? EntryJson(*c.to) : nlohmann::json(nullptr)},
                                {"reason", std::string(CorrectionReasonName(c.reason))},
                                {"message", c.message}});
  }
  j["shard_shape"] = l.layout.shard_shape;
  j["num_shards"] = l.layout.num_shards;
  j["num_replicas"] = l.layout.num_replicas;
  j["bytes_per_device"] = report.bytes_per_device;
  if (report.eformer_bytes_per_device) j["eformer_bytes_per_device"] = *report.eformer_bytes_per_device;
  if (report.bytes_saved_vs_eformer) j["bytes_saved_vs_eformer"] = *report.bytes_saved_vs_eformer;
  j["shards"] = nlohmann::json::array();
  for (const DeviceShard& s : l.layout.shards) {
    nlohmann::json index = nlohmann::json::array();
    for (const auto& r : s.index) index.push_back({r.start, r.stop});
    j["shards"].push_back({{"device", s.device},
                           {"index", index},
                           {"replica_id", s.replica_id},
                           {"shard_id", s.shard_id},
                           {"process_index", s.process_index}});
  }
  j["hosts"] = nlohmann::json::array();
  for (size_t h = 0; h < l.by_process.size(); ++h) {
    j["hosts"].push_back({{"process_index", l.by_process[h][0]->process_index},
                          {"devices", l.by_process[h].size()},
                          {"distinct_shards", DistinctShards(l.by_process[h])},
                          {"bytes", l.memory.bytes_per_process[h]}});
  }
  return j;
}

// The mesh, shape, spec with its corrections, bytes per device and capacity.
void PrintShardSummary(const ShardArgs& args, const ShardLayout& l) {
  const CorrectionReport& report = l.report;
  fmt::print("mesh        {}{}\n", l.mesh.ToString(),
             l.mesh.topology() != nullptr && !args.topology.empty() ? " on " + l.mesh.topology()->ToString()
                                                                    : " (devices numbered row-major)");
  fmt::print("shape       {} {} ({})\n", PyTuple(l.shape), DTypeShortName(l.dtype),
             HumanBytes(NumElements(l.shape) * DTypeSize(l.dtype)));
  fmt::print("spec        {}", report.corrected.ToString());
  if (report.corrected != l.requested) fmt::print("   (requested {})", l.requested.ToString());
  fmt::print("\n");
  if (!report.corrections.empty()) {
    fmt::print("corrections ({})\n", CorrectionModeName(report.mode));
    for (const Correction& c : report.corrections) {
      fmt::print("  dim {}: {} -> {}  [{}] {}\n", c.dim, c.from.ToString(), c.to ? c.to->ToString() : "(removed)",
                 CorrectionReasonName(c.reason), c.message);
    }
  }
  fmt::print("shard shape {}   {} distinct block(s) x {} replica(s)\n", PyTuple(l.layout.shard_shape),
             l.layout.num_shards, l.layout.num_replicas);
  fmt::print("bytes/device {} ({})", report.bytes_per_device, HumanBytes(report.bytes_per_device));
  if (report.bytes_saved_vs_eformer) {
    fmt::print("   eformer: {} ({}), saved {}", *report.eformer_bytes_per_device,
               HumanBytes(*report.eformer_bytes_per_device), HumanBytes(*report.bytes_saved_vs_eformer));
  }
  if (report.mode == CorrectionMode::kKeepMost && !report.bytes_saved_vs_eformer) {
    fmt::print("   eformer: {} raises DuplicateSpecError", report.eformer_spec->ToString());
  }
  fmt::print("\n");
  if (l.memory.capacity_bytes > 0 && !args.topology.empty()) {
    fmt::print("capacity    {} per device: {}\n", HumanBytes(l.memory.capacity_bytes),
               l.memory.fits() ? "fits" : "DOES NOT FIT");
  }
}

// The block picture, each device's block and each host's share.
void PrintShardBlocks(const ShardArgs& args, const ShardLayout& l) {
  fmt::print("blocks\n");
  ShardingPictureOptions picture;
  picture.max_width = args.width;
  fmt::print("{}", ShardingPicture(l.layout, picture));
  fmt::print("devices     device [host]: index  replica\n");
  const size_t listed = std::min(l.layout.shards.size(), static_cast<size_t>(args.max_devices));
  for (size_t i = 0; i < listed; ++i) {
    const DeviceShard& s = l.layout.shards[i];
    fmt::print("  {:>5} [{}]: {}  r{}\n", s.device, s.process_index, RangeText(s.index), s.replica_id);
  }
  if (listed < l.layout.shards.size()) {
    fmt::print("  ... {} more device(s) (of {}; --max-devices N or --json lists them all)\n",
               l.layout.shards.size() - listed, l.layout.shards.size());
  }
  fmt::print("hosts\n");
  for (size_t h = 0; h < l.by_process.size(); ++h) {
    fmt::print("  host {}: {} device(s), {} distinct block(s), {}\n", l.by_process[h][0]->process_index,
               l.by_process[h].size(), DistinctShards(l.by_process[h]), HumanBytes(l.memory.bytes_per_process[h]));
  }
}

ExitCode RunShard(const ShardArgs& args) {
  const ShardLayout layout = ComputeShardLayout(args);
  if (args.json) {
    fmt::print("{}\n", ShardJson(layout).dump());
    return ExitCode::kOk;
  }
  PrintShardSummary(args, layout);
  PrintShardBlocks(args, layout);
  return ExitCode::kOk;
}

}  // namespace

void AddShardCommand(CLI::App& app, ExitCode& exit_code) {
  auto args = std::make_shared<ShardArgs>();
  CLI::App* cmd = app.add_subcommand("shard", "Lay out an array by a PartitionSpec on a mesh (JAX NamedSharding)");
  cmd->add_option("--mesh", args->mesh, "mesh axes, major first: dp=2,fsdp=4,tp=2")->required();
  cmd->add_option("--shape", args->shape, "global shape: 8,1024,4096 (empty for a scalar)")->required();
  cmd->add_option("--spec", args->spec, "PartitionSpec as in Python: \"P(('dp','fsdp'), None, 'tp')\"")->required();
  cmd->add_option("--topology", args->topology, "topology preset (tpu-v4:2x2x4, dgx-h100:2, cpu:8, ...)");
  cmd->add_option("--slices", args->slices, "number of identical TPU slices (with --topology)")
      ->check(IntIn(1, std::numeric_limits<int>::max()));
  cmd->add_option("--dcn", args->dcn, "DCN part of each --mesh axis: create_hybrid_device_mesh (with --topology)");
  cmd->add_option("--dtype", args->dtype, "element type (f32, bf16, f16, f64, i32, i8, ...)");
  cmd->add_option("--correct", args->correct,
                  "none (the default: JAX's errors for a spec that does not fit), eformer, keep-most");
  cmd->add_option("--width", args->width, "width of the block picture in characters (default 80, at least 20)")
      ->check(CLI::Range(20, 100000));
  cmd->add_option("--max-devices", args->max_devices, "devices listed in the human output (default 64)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_flag("--json", args->json, "print JSON (every device; no picture)");
  cmd->callback([args, &exit_code] { exit_code = RunShard(*args); });
}

}  // namespace spmdsim::cli
