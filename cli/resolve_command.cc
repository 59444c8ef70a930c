// `spmdsim resolve`: eformer PartitionAxis resolution of semantic axes for a runtime mode.
//
//   spmdsim resolve --axes batch,query_length,head,head_dim --mode train
//   spmdsim resolve --axes batch,query_length,embed --mode decode --set decode_query_sequence_axis=dp
//   spmdsim resolve --preset HiddenStateSharding --shape 2,1,4096          # mode = dimension 1: decode when 1
//   spmdsim resolve --axes batch,length,embed --mode 1 --shape 8,1,4096 --mesh dp=2,fsdp=4,tp=2 --correct keep-most
//   spmdsim resolve --axes my_axis,_ --mode train --register my_axis=head_axis --json
//
// --axes: short names (batch length query_length kv_length embed head kv_head mlp_intermediate vocab expert
// expert_gate head_dim kv_head_dim bias_head_seq bias_kv_seq dp fsdp tp sp ep), eformer tokens (__BATCH__) or
// registered names; `_` is an unsharded dimension and `a+b` a composite.
// --set field=value: value is a mesh axis, a+b for a tuple, none, or another field's name (replaced by that
// field's value once the other --set values and the defaults are in place).
// --register name=rule[:generation_rule]: eformer PartitionAxis.register (rule: a field name, a semantic name, a
// mesh axis, a+b, or none).
// --mesh (with --shape): also apply eformer's correction (or --correct keep-most / none), as PartitionManager.shard.
// JSON: {"spec": [...], "spec_repr": "P(...)", "mode": "train", "axes": [...]} plus, with --mesh,
// "corrected": [...], "corrections": [{"dim","from","to","reason","message"}].
#include <cctype>
#include <memory>
#include <span>
#include <variant>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/error_context.h"
#include "common/shape.h"
#include "common/strings.h"
#include "mesh/mesh.h"
#include "partition/correction.h"
#include "partition/partition_axis.h"
#include "partition/partition_manager.h"

namespace spmdsim::cli {
namespace {


struct ResolveArgs {
  std::string axes;
  std::string preset;
  std::string mode;
  std::vector<std::string> sets;
  std::vector<std::string> registers;
  std::string shape;
  std::string mesh;
  std::string correct = "eformer";
  bool json = false;
};

std::pair<std::string, std::string> SplitAssignment(const std::string& item, std::string_view flag,
                                                    std::string_view example) {
  size_t eq = item.find('=');
  if (eq == std::string::npos || Trim(std::string_view(item).substr(0, eq)).empty()) {
    Throw(ErrorCode::kInvalidArgument, "{} '{}': expected {}", flag, item, example);
  }
  return {std::string(Trim(std::string_view(item).substr(0, eq))), std::string(item.substr(eq + 1))};
}

// --set: plain values first, then values naming a field take that field's value.
PartitionAxis BuildPartitionAxis(const std::vector<std::string>& sets) {
  std::vector<std::pair<std::string, AxisRule>> plain;
  std::vector<std::pair<std::string, std::string>> references;
  for (const std::string& item : sets) {
    auto [field, value] = SplitAssignment(item, "--set", "field=value, e.g. head_axis=tp or batch_axis=fsdp+dp");
    if (!PartitionAxis::FindField(field).has_value()) {
      // Let PartitionAxis raise its TypeError naming the valid fields.
      PartitionAxis({{field, AxisRule::None()}});
    }
    std::string_view v = Trim(value);
    if (PartitionAxis::FindField(v).has_value()) {
      references.emplace_back(field, std::string(v));
    } else {
      plain.emplace_back(field, AxisRule::Parse(v));
    }
  }
  if (references.empty()) return PartitionAxis(plain);
  PartitionAxis first(plain);
  for (const auto& [field, other] : references) plain.emplace_back(field, first.Get(other));
  return PartitionAxis(plain);
}

// Short names inside a rule become eformer tokens (tp -> __TENSOR_PARALLEL__); field names and others stay.
AxisRule WithTokens(const AxisRule& rule) {
  if (rule.is_name()) return AxisRule(SemanticAxisFromShortName(rule.name()));
  if (!rule.is_sequence()) return rule;
  std::vector<AxisRule> items;
  for (const AxisRule& item : rule.items()) items.push_back(WithTokens(item));
  return rule.kind() == AxisRule::Kind::kList ? AxisRule::List(std::move(items)) : AxisRule::Tuple(std::move(items));
}

void Register(const std::string& item) {
  auto [name, value] = SplitAssignment(item, "--register", "name=rule or name=rule:generation_rule");
  std::optional<AxisRule> generation;
  if (size_t colon = value.find(':'); colon != std::string::npos) {
    generation = WithTokens(AxisRule::Parse(std::string_view(value).substr(colon + 1)));
    value = value.substr(0, colon);
  }
  PartitionAxis::Register(name, WithTokens(AxisRule::Parse(value)), generation, /*override=*/true);
}

std::string ShortName(const std::string& token) {
  for (const auto& [short_name, t] : SemanticAxisShortNames()) {
    if (t == token) return std::string(short_name);
  }
  return token;
}

std::string AxisLabel(const SemanticAxis& axis) {
  if (axis.is_name()) return ShortName(axis.name());
  if (axis.is_composite()) {
    std::vector<std::string> parts;
    for (const auto& n : axis.names()) parts.push_back(ShortName(n));
    return fmt::format("{}", fmt::join(parts, "+"));
  }
  return "_";
}

// The semantic axes and runtime mode of --axes / --preset and --mode. REQUIRES: exactly one of --axes and --preset.
DynamicShardingAxes ChooseAxes(const ResolveArgs& args) {
  DynamicShardingAxes dynamic;
  if (!args.preset.empty()) {
    dynamic = FindDynamicShardingPreset(args.preset);
  } else {
    dynamic.axes = ParseSemanticAxes(args.axes);
  }
  if (!args.mode.empty()) {
    std::string_view mode = Trim(args.mode);
    bool is_index = !mode.empty() && (std::isdigit(static_cast<unsigned char>(mode[0])) || mode[0] == '-');
    dynamic.mode = is_index ? ModeOrDim(static_cast<int>(ParseInt(mode, "--mode"))) : ModeOrDim(ParseRuntimeMode(mode));
  } else if (args.preset.empty()) {
    Throw(ErrorCode::kInvalidArgument, "--mode is required with --axes: train, prefill, decode, insert or a "
                                       "dimension index (decode when that dimension of --shape is 1)");
  }
  return dynamic;
}

// manager.Resolve, with the valid semantic axis names added to an unknown name's message.
PartitionSpec ResolveNamingAxes(const PartitionManager& manager, const DynamicShardingAxes& dynamic, RuntimeMode mode) {
  try {
    return manager.Resolve(dynamic.axes, mode);
  } catch (const Error& e) {
    if (e.message().rfind("Unknown semantic axis name", 0) != 0) throw;
    std::vector<std::string_view> names;
    for (const auto& [short_name, token] : SemanticAxisShortNames()) names.push_back(short_name);
    RethrowWithContext(e, fmt::format("{} (semantic axes: {}, _ for unsharded, a+b for a composite, or a "
                                      "--register-ed name)", e.message(), fmt::join(names, ", ")));
  }
}

void PrintResolveJson(const DynamicShardingAxes& dynamic, RuntimeMode mode, const PartitionSpec& spec,
                      const std::optional<CorrectionReport>& report) {
  nlohmann::json j;
  j["spec"] = SpecJson(spec);
  j["spec_repr"] = spec.ToString();
  j["mode"] = std::string(RuntimeModeName(mode));
  j["axes"] = nlohmann::json::array();
  for (const auto& axis : dynamic.axes) j["axes"].push_back(AxisLabel(axis));
  if (report.has_value()) {
    j["corrected"] = SpecJson(report->corrected);
    j["corrected_repr"] = report->corrected.ToString();
    j["correct"] = std::string(CorrectionModeName(report->mode));
    j["corrections"] = nlohmann::json::array();
    for (const Correction& c : report->corrections) {
      j["corrections"].push_back({{"dim", c.dim},
                                  {"from", EntryJson(c.from)},
                                  {"to", c.to ? EntryJson(*c.to) : nlohmann::json(nullptr)},
                                  {"reason", std::string(CorrectionReasonName(c.reason))},
                                  {"message", c.message}});
    }
  }
  fmt::print("{}\n", j.dump());
}

void PrintResolved(const DynamicShardingAxes& dynamic, RuntimeMode mode, const PartitionSpec& spec,
                   const std::optional<CorrectionReport>& report) {
  fmt::print("mode: {}{}\n", RuntimeModeName(mode),
             std::holds_alternative<int>(dynamic.mode)
                 ? fmt::format(" (dimension {} of the shape is {})", std::get<int>(dynamic.mode),
                               mode == RuntimeMode::kDecode ? "1" : "not 1")
                 : "");
  for (size_t d = 0; d < dynamic.axes.size(); ++d) {
    fmt::print("  dim {}  {:<20} -> {}\n", d, AxisLabel(dynamic.axes[d]), spec[static_cast<int>(d)].ToString());
  }
  fmt::print("spec: {}\n", spec.ToString());
  if (report.has_value()) {
    fmt::print("corrected ({}): {}\n", CorrectionModeName(report->mode), report->corrected.ToString());
    for (const Correction& c : report->corrections) {
      fmt::print("  dim {}: {} -> {} ({})\n", c.dim, c.from.ToString(), c.to ? c.to->ToString() : "removed",
                 c.message);
    }
  }
}

ExitCode RunResolveCommand(const ResolveArgs& args) {
  if (args.axes.empty() == args.preset.empty()) {
    Throw(ErrorCode::kInvalidArgument, "give exactly one of --axes (e.g. batch,length,embed) or --preset NAME");
  }
  for (const std::string& item : args.registers) Register(item);
  PartitionManager manager(BuildPartitionAxis(args.sets));
  const DynamicShardingAxes dynamic = ChooseAxes(args);
  std::optional<std::vector<int64_t>> shape;
  if (!args.shape.empty()) shape = ParseShape(args.shape, "--shape");
  std::optional<std::span<const int64_t>> shape_span;
  if (shape.has_value()) shape_span = std::span<const int64_t>(*shape);
  RuntimeMode mode = InferRuntimeMode(dynamic.mode, shape_span);
  const PartitionSpec spec = ResolveNamingAxes(manager, dynamic, mode);

  std::optional<CorrectionReport> report;
  if (!args.mesh.empty()) {
    if (!shape.has_value()) Throw(ErrorCode::kInvalidArgument, "--mesh needs --shape (the array to correct for)");
    CorrectionOptions options;
    options.mode = ParseCorrectionMode(args.correct);
    options.log = false;
    report = manager.Shard(BuildCliMesh(args.mesh), *shape, dynamic.axes, mode, options).report;
  }
  if (args.json) {
    PrintResolveJson(dynamic, mode, spec, report);
  } else {
    PrintResolved(dynamic, mode, spec, report);
  }
  return ExitCode::kOk;
}

}  // namespace

void AddResolveCommand(CLI::App& app, ExitCode& exit_code) {
  auto args = std::make_shared<ResolveArgs>();
  CLI::App* cmd = app.add_subcommand(
      "resolve",
      "eformer PartitionAxis: resolve semantic axes (batch, query_length, head, ...) to a PartitionSpec for a "
      "runtime mode, with eformer's defaults unless --set changes a field.");
  cmd->add_option("--axes", args->axes,
                  "semantic axes, one per dimension: batch,query_length,head,head_dim (_ unsharded, a+b composite)");
  cmd->add_option("--preset", args->preset,
                  "an eformer DynamicShardingAxes preset instead of --axes (HiddenStateSharding, AttnQSharding, "
                  "AttnKVSharding, RowWise, ColumnWise, ...)");
  cmd->add_option("--mode", args->mode,
                  "train, prefill, decode, insert, or a dimension index (decode when that --shape dimension is 1)");
  cmd->add_option("--set", args->sets, "field=value (repeatable): a mesh axis, a+b, none, or another field's name");
  cmd->add_option("--register", args->registers,
                  "name=rule[:generation_rule] (repeatable): register a custom semantic axis");
  cmd->add_option("--shape", args->shape, "the array's shape, e.g. 8,1,4096");
  cmd->add_option("--mesh", args->mesh, "with --shape: correct for this mesh, e.g. dp=2,fsdp=4,tp=2");
  cmd->add_option("--correct", args->correct, "correction with --mesh: eformer (default), keep-most, none");
  cmd->add_flag("--json", args->json, "print JSON: {\"spec\": [...], ...}");
  cmd->callback([args, &exit_code] { exit_code = RunResolveCommand(*args); });
}

}  // namespace spmdsim::cli
