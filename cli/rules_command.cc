// `spmdsim rules`: Flax / T5X logical axis rules -- print a rule set, or resolve logical axis names with it.
//
//   spmdsim rules --standard 1,2                                   # T5X standard_logical_axis_rules(1, 2)
//   spmdsim rules --standard 2,2 --multislice --names batch,length,embed
//   spmdsim rules --rules "batch=data,embed=,mlp=model,joined=data+model" --names batch,_,mlp --json
//   spmdsim rules --rules-file rules.txt --names embed,mlp --fallback error
//
// Rules text: name=mesh_axes items separated by commas or newlines, `#` comments; `name=` / `name=none` map to
// None, `a+b` to ('a', 'b'), UNCONSTRAINED to P.UNCONSTRAINED. With --standard, --rules / --rules-file are
// T5X's additional_rules (appended). Names: `_` is an unnamed dimension.
// JSON: {"spec": [null | "axis" | ["a", "b"], ...], "spec_repr": "P(...)", "names": [...], "rules": [[name, entry]...]}
// (without --names: only "rules"); UNCONSTRAINED is written "UNCONSTRAINED"; a constraint that --fallback none
// drops is "spec": null.
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/file.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "partition/logical_axis_rules.h"

namespace spmdsim::cli {
namespace {

struct RulesArgs {
  std::string rules;
  std::string rules_file;
  std::string standard;  // "A,P"
  bool multislice = false;
  std::string names;
  bool names_given = false;
  std::string fallback = "unsharded";
  bool json = false;
};

nlohmann::json RuleNameJson(const LogicalAxis& n) {
  if (n.is_name()) return n.name();
  if (n.kind() == LogicalAxis::Kind::kUnconstrained) return "UNCONSTRAINED";
  return nullptr;
}

// "1,2" -> (1, 2).
std::pair<int, int> ParseStandard(const std::string& text) {
  std::vector<std::string> parts = Split(text, ',');
  if (parts.size() != 2) {
    Throw(ErrorCode::kInvalidArgument,
          "--standard {}: expected ACTIVATION_DIMS,PARAMETER_DIMS, each 1 or 2 (e.g. --standard 1,2)",
          QuoteForError(text));
  }
  // Any int: StandardLogicalAxisRules says, as T5X does, which values are valid.
  constexpr int64_t kMin = std::numeric_limits<int>::min(), kMax = std::numeric_limits<int>::max();
  return {static_cast<int>(ParseIntIn(parts[0], "--standard activation dims", kMin, kMax)),
          static_cast<int>(ParseIntIn(parts[1], "--standard parameter dims", kMin, kMax))};
}

RulesFallback ParseFallback(const std::string& text) {
  if (text == "unsharded") return RulesFallback::kAxisIsUnsharded;
  if (text == "error") return RulesFallback::kRaiseError;
  if (text == "none") return RulesFallback::kNoConstraint;
  Throw(ErrorCode::kInvalidArgument, "--fallback '{}': valid values are unsharded, error, none", text);
}

// The rules the flags give, and a description of where they come from (for the human output).
struct ChosenRules {
  LogicalAxisRules rules;
  std::string source;
};

ChosenRules ChooseRules(const RulesArgs& args) {
  if (args.rules.empty() && args.rules_file.empty() && args.standard.empty()) {
    Throw(ErrorCode::kInvalidArgument, "give the rules: --rules TEXT, --rules-file PATH or --standard A,P");
  }
  if (!args.rules.empty() && !args.rules_file.empty()) {
    Throw(ErrorCode::kInvalidArgument, "--rules and --rules-file: give one of them");
  }
  LogicalAxisRules given;
  if (!args.rules.empty()) given = ParseLogicalAxisRules(args.rules);
  if (!args.rules_file.empty()) {
    given = ParseLogicalAxisRules(ReadFileBounded(args.rules_file, kMaxTextFileBytes, "--rules-file"));
  }
  ChosenRules out{given, "given rules"};
  if (!args.standard.empty()) {
    auto [a, p] = ParseStandard(args.standard);
    out.rules = StandardLogicalAxisRules(a, p, given);
    out.source = fmt::format("T5X standard_logical_axis_rules({}, {}){}", a, p,
                             given.empty() ? "" : fmt::format(" + {} additional", given.size()));
  }
  if (args.multislice) {
    out.rules = MultisliceLogicalAxisRules(out.rules);
    out.source += ", multi-slice ('batch' -> ('replica', 'data'))";
  }
  return out;
}

void PrintRulesJson(const LogicalAxisRules& rules, const std::optional<LogicalAxes>& names,
                    const std::optional<PartitionSpec>& spec) {
  nlohmann::json j;
  j["rules"] = nlohmann::json::array();
  for (const auto& rule : rules) j["rules"].push_back({rule.logical_name, EntryJson(rule.mesh_axes)});
  if (names.has_value()) {
    nlohmann::json names_json = nlohmann::json::array();
    for (const auto& n : *names) names_json.push_back(RuleNameJson(n));
    j["names"] = names_json;
    if (spec.has_value()) {
      j["spec"] = nlohmann::json::array();
      for (const auto& e : spec->entries()) j["spec"].push_back(EntryJson(e));
      j["spec_repr"] = spec->ToString();
    } else {
      j["spec"] = nullptr;
    }
  }
  fmt::print("{}\n", j.dump());
}

// Why the logical axis `name` resolved to `entry` under `rules`: the rule that gave it, or why none did.
std::string WhyResolved(const LogicalAxis& name, const PartitionSpec::Entry& entry, const LogicalAxisRules& rules) {
  if (name.kind() == LogicalAxis::Kind::kUnconstrained) return "passed through";
  if (!name.is_name()) return "unnamed";
  bool has_rule = false;
  for (size_t r = 0; r < rules.size(); ++r) {
    if (rules[r].logical_name != name.name()) continue;
    has_rule = true;
    if (rules[r].mesh_axes == entry) return fmt::format("rule {}", r);
  }
  return has_rule ? "its rules' mesh axes were already used" : "no rule for this name";
}

ExitCode RunRulesCommand(const RulesArgs& args) {
  const ChosenRules chosen = ChooseRules(args);
  LogicalAxisRules rules = chosen.rules;
  RulesFallback fallback = ParseFallback(args.fallback);

  std::optional<LogicalAxes> names;
  std::optional<PartitionSpec> spec;
  if (args.names_given) {
    names = ParseLogicalAxes(args.names);
    spec = LogicalConstraintSpec(names, fallback, &rules);
    // With no rules at all Flax applies no constraint; resolution itself gives all None.
    if (!spec.has_value() && rules.empty()) spec = LogicalToMeshAxes(*names, rules);
  }

  if (args.json) {
    PrintRulesJson(rules, names, spec);
    return ExitCode::kOk;
  }

  fmt::print("rules: {} ({} rule{}, highest priority first)\n", chosen.source, rules.size(),
             rules.size() == 1 ? "" : "s");
  for (size_t r = 0; r < rules.size(); ++r) {
    fmt::print("  {:>2}  {:<18} -> {}\n", r, rules[r].logical_name, rules[r].mesh_axes.ToString());
  }
  if (!names.has_value()) return ExitCode::kOk;
  fmt::print("names: {}\n", LogicalAxesToString(*names));
  if (!spec.has_value()) {
    fmt::print("spec: none (a name matched no rule and --fallback none applies no constraint)\n");
    return ExitCode::kOk;
  }
  fmt::print("spec: {}\n", spec->ToString());
  for (size_t d = 0; d < names->size(); ++d) {
    const LogicalAxis& name = (*names)[d];
    const PartitionSpec::Entry& entry = (*spec)[static_cast<int>(d)];
    fmt::print("  dim {}  {:<18} -> {:<20} ({})\n", d, name.ToString(), entry.ToString(),
               WhyResolved(name, entry, rules));
  }
  return ExitCode::kOk;
}

}  // namespace

void AddRulesCommand(CLI::App& app, ExitCode& exit_code) {
  auto args = std::make_shared<RulesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "rules",
      "Flax / T5X logical axis rules: print a rule set (T5X standard_logical_axis_rules or your own) and resolve "
      "logical dimension names to mesh axes with Flax's logical_to_mesh_axes (priority order; each mesh axis used "
      "once; names without a rule are None).");
  cmd->add_option("--rules", args->rules,
                  "rules, highest priority first: \"batch=data,embed=,mlp=model,joined=data+model\" (name= is None, "
                  "a+b a tuple); with --standard: T5X's additional_rules");
  cmd->add_option("--rules-file", args->rules_file, "file with the same syntax, one rule per line, # comments");
  cmd->add_option("--standard", args->standard,
                  "T5X standard rules for ACTIVATION_DIMS,PARAMETER_DIMS (each 1 or 2), e.g. 1,2");
  cmd->add_flag("--multislice", args->multislice,
                "T5X multi-slice rewrite: every 'batch' rule maps to ('replica', 'data')");
  cmd->add_option("--names,--logical", args->names,
                  "the array's logical dimension names, e.g. batch,length,embed (_ for an unnamed dimension)")
      ->each([args](const std::string&) { args->names_given = true; });
  cmd->add_option("--fallback", args->fallback,
                  "a name no rule matches: unsharded (default, None), error (Flax's ValueError), none (no constraint)");
  cmd->add_flag("--json", args->json, "print JSON: {\"spec\": [...], \"rules\": [...]}");
  cmd->callback([args, &exit_code] { exit_code = RunRulesCommand(*args); });
}

}  // namespace spmdsim::cli
