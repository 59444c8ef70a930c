// `spmdsim analyze`: the memory a set of named arrays takes on a mesh under their PartitionSpecs -- total and sharded
// parameters, the bytes of every device, the largest and smallest device, a balance score, the replication factor
// of every array (what eformer's analyze_sharding_strategy promises; see partition/memory_analysis.h for the
// definitions).
//
//   spmdsim analyze --mesh dp=2,tp=4 --array "w:1024,4096:f32:P(None,'tp')" --array "b:4096:f32:P()"
//   spmdsim analyze --mesh data=4,model=2 --topology tpu-v4:2x2x2 --file arrays.yaml --correct keep-most --json
//
// A separate command rather than a mode of `spmdsim shard`: shard lays out ONE array and draws it; analyze sums
// MANY arrays per device and draws nothing.
//
// --file: an arrays file (scenario/arrays_file.h): YAML, a list of arrays or a map with an `arrays:` list, each
//     {name: w, shape: [1024, 4096], dtype: bf16, spec: "P(None, 'tp')"}
// dtype defaults to f32; spec is Python text as for --spec, or a list with one entry per dimension (null, an axis,
// or a list of axes), as in the JSON output; a missing spec is P().
// JSON: {"mesh", "arrays": [{"name","shape","dtype","spec","requested_spec","corrections","shard_shape",
// "elements","bytes","bytes_per_device","blocks","replication","sharded"}], "total_parameters",
// "sharded_parameters", "total_bytes", "devices": [ids, mesh order], "bytes_per_device": [same order],
// "largest": {"device","bytes"}, "smallest": {"device","bytes"}, "balance_score", "memory_efficiency",
// "replication_factor", "hosts": [{"process_index","bytes"}], "capacity_bytes", "fits", "devices_over_capacity"}.
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
#include "common/file.h"
#include "common/shape.h"
#include "common/strings.h"
#include "mesh/mesh.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "partition/correction.h"
#include "partition/memory_analysis.h"
#include "partition/partition_spec.h"
#include "scenario/arrays_file.h"

namespace spmdsim::cli {
namespace {


struct AnalyzeArgs {
  std::string topology;
  int slices = 1;
  std::string dcn;
  std::string mesh;
  std::vector<std::string> arrays;
  std::string file;
  std::string correct = "none";
  bool json = false;
};

// The arrays from --file or the --array flags, with unique names.
std::vector<NamedArray> LoadArrays(const AnalyzeArgs& args) {
  if (args.arrays.empty() == args.file.empty()) {
    Throw(ErrorCode::kInvalidArgument, "give the arrays with --array name:shape:dtype:spec (repeatable) or --file "
                                       "arrays.yaml, not both");
  }
  std::vector<NamedArray> arrays;
  if (!args.file.empty()) {
    arrays = LoadArraysFile(args.file);
  } else {
    for (const std::string& text : args.arrays) arrays.push_back(ParseNamedArray(text));
  }
  for (size_t i = 0; i < arrays.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (arrays[i].name == arrays[j].name) {
        Throw(ErrorCode::kInvalidArgument, "array name '{}' is given twice; names must be unique", arrays[i].name);
      }
    }
  }
  return arrays;
}

// Corrects every array's spec in `mode` (none: nothing; AnalyzeMemory raises JAX's errors, naming the array);
// an unknown mesh axis gets a did-you-mean after JAX's message.
std::vector<CorrectionReport> CorrectArrays(CorrectionMode mode, const Mesh& mesh, std::vector<NamedArray>* arrays) {
  CorrectionOptions options;
  options.mode = mode;
  options.log = false;
  std::vector<CorrectionReport> reports;
  if (mode == CorrectionMode::kNone) return reports;
  for (NamedArray& array : *arrays) {
    options.element_bytes = DTypeSize(array.dtype);
    try {
      reports.push_back(CorrectSpec(array.spec, mesh, array.shape, options));
    } catch (const SpecError& e) {
      std::vector<SpecProblem> problems = e.problems();
      for (auto& p : problems) p.message = fmt::format("array '{}': {}", array.name, p.message);
      const std::string hint = UnknownAxisHint(problems);
      if (hint.empty()) throw SpecError(std::move(problems));
      RethrowWithContext(e, problems.front().message + hint);
    }
    array.spec = reports.back().corrected;
  }
  return reports;
}

nlohmann::json AnalyzeJson(const AnalyzeArgs& args, const Mesh& mesh, CorrectionMode mode,
                           const std::vector<NamedArray>& arrays, const std::vector<PartitionSpec>& requested,
                           const std::vector<CorrectionReport>& reports, const MemoryAnalysis& analysis) {
  nlohmann::json j;
  nlohmann::json mesh_axes = nlohmann::json::array();
  for (int i = 0; i < mesh.rank(); ++i) mesh_axes.push_back({mesh.axis_names()[i], mesh.shape()[i]});
  j["mesh"] = {{"axes", mesh_axes},
               {"topology", mesh.topology() != nullptr && !args.topology.empty() ? mesh.topology()->ToString() : ""}};
  j["correct"] = std::string(CorrectionModeName(mode));
  j["arrays"] = nlohmann::json::array();
  for (size_t i = 0; i < arrays.size(); ++i) {
    const ArrayMemory& m = analysis.arrays[i];
    nlohmann::json a{{"name", m.name},
                     {"shape", m.shape},
                     {"dtype", DTypeShortName(arrays[i].dtype)},
                     {"spec", SpecJson(m.spec)},
                     {"requested_spec", SpecJson(requested[i])},
                     {"shard_shape", m.shard_shape},
                     {"elements", m.elements},
                     {"bytes", m.global_bytes},
                     {"bytes_per_device", m.bytes_per_device},
                     {"blocks", m.num_shards},
                     {"replication", m.replication},
                     {"sharded", m.sharded}};
    a["corrections"] = nlohmann::json::array();
    if (!reports.empty()) {
      for (const Correction& c : reports[i].corrections) {
        a["corrections"].push_back({{"dim", c.dim},
                                    {"from", EntryJson(c.from)},
                                    {"to", c.to ? EntryJson(*c.to) : nlohmann::json(nullptr)},
                                    {"reason", std::string(CorrectionReasonName(c.reason))},
                                    {"message", c.message}});
      }
    }
    j["arrays"].push_back(std::move(a));
  }
  j["total_parameters"] = analysis.total_parameters;
  j["sharded_parameters"] = analysis.sharded_parameters;
  j["total_bytes"] = analysis.total_bytes;
  j["devices"] = analysis.device_of_position;
  j["bytes_per_device"] = analysis.bytes_per_position;
  j["largest"] = {{"device", analysis.max_device}, {"bytes", analysis.max_bytes}};
  j["smallest"] = {{"device", analysis.min_device}, {"bytes", analysis.min_bytes}};
  j["balance_score"] = analysis.balance_score;
  j["memory_efficiency"] = analysis.memory_efficiency;
  j["replication_factor"] = analysis.replication_factor;
  j["hosts"] = nlohmann::json::array();
  for (size_t h = 0; h < analysis.processes.size(); ++h) {
    j["hosts"].push_back({{"process_index", analysis.processes[h]}, {"bytes", analysis.bytes_per_process[h]}});
  }
  j["capacity_bytes"] = analysis.capacity_bytes;
  j["fits"] = analysis.fits();
  j["devices_over_capacity"] = analysis.devices_over_capacity;
  return j;
}

ExitCode RunAnalyze(const AnalyzeArgs& args) {
  const Mesh mesh = BuildCliMesh(args.mesh, args.topology, args.slices, args.dcn);
  std::vector<NamedArray> arrays = LoadArrays(args);
  std::vector<PartitionSpec> requested;
  for (const NamedArray& array : arrays) requested.push_back(array.spec);
  const CorrectionMode mode = ParseCorrectionMode(args.correct);
  const std::vector<CorrectionReport> reports = CorrectArrays(mode, mesh, &arrays);
  MemoryAnalysis analysis;
  try {
    analysis = AnalyzeMemory(arrays, mesh);
  } catch (const Error& e) {
    RethrowWithAxisHint(e);
  }
  if (args.topology.empty()) {  // the row-major CPU mesh's memory size is a placeholder, not a capacity to check
    analysis.capacity_bytes = 0;
    analysis.devices_over_capacity.clear();
  }
  if (args.json) {
    fmt::print("{}\n", AnalyzeJson(args, mesh, mode, arrays, requested, reports, analysis).dump());
    return ExitCode::kOk;
  }

  fmt::print("mesh                {}{}\n", mesh.ToString(),
                           mesh.topology() != nullptr && !args.topology.empty()
                               ? " on " + mesh.topology()->ToString()
                               : " (devices numbered row-major)");
  for (size_t i = 0; i < reports.size(); ++i) {
    for (const Correction& c : reports[i].corrections) {
      fmt::print("corrected {} dim {}: {} -> {}  [{}]\n", arrays[i].name, c.dim, c.from.ToString(),
                               c.to ? c.to->ToString() : "(removed)", CorrectionReasonName(c.reason));
    }
  }
  fmt::print("{}", FormatMemoryAnalysis(analysis));
  return ExitCode::kOk;
}

}  // namespace

void AddAnalyzeCommand(CLI::App& app, ExitCode& exit_code) {
  auto args = std::make_shared<AnalyzeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "analyze",
      "Memory of named arrays on a mesh: total and sharded parameters, bytes of every device, largest and smallest "
      "device, balance score, replication per array (eformer's analyze_sharding_strategy, filled in). For one "
      "array's layout and picture use `spmdsim shard`.");
  cmd->add_option("--mesh", args->mesh, "mesh axes, major first: dp=2,fsdp=4,tp=2")->required();
  cmd->add_option("--array", args->arrays,
                  "name:shape:dtype:spec (repeatable), e.g. \"w:1024,4096:bf16:P(None, 'tp')\"");
  cmd->add_option("--file", args->file,
                  "YAML list of arrays {name, shape: [..], dtype (default f32), spec: \"P(..)\" or [null, tp, [a, b]]}"
                  " (or a map with an 'arrays' list)");
  cmd->add_option("--topology", args->topology, "topology preset (tpu-v4:2x2x4, dgx-h100:2, cpu:8, ...)");
  cmd->add_option("--slices", args->slices, "number of identical TPU slices (with --topology)")
      ->check(IntIn(1, std::numeric_limits<int>::max()));
  cmd->add_option("--dcn", args->dcn, "DCN part of each --mesh axis: create_hybrid_device_mesh (with --topology)");
  cmd->add_option("--correct", args->correct,
                  "none (default: JAX's errors, naming the array), eformer, keep-most: correct every spec first");
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->callback([args, &exit_code] { exit_code = RunAnalyze(*args); });
}

}  // namespace spmdsim::cli
