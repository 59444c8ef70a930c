#include "partition/logical_axis_rules.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim {
namespace {

// Flax's str() of a rule value inside an f-string: data, None, ('a', 'b'), UNCONSTRAINED.
std::string PyStr(const PartitionSpec::Entry& entry) {
  if (entry.has_axes() && !entry.is_tuple()) return entry.axes()[0];
  return entry.ToString();
}

// Flax `_logical_to_mesh_axes`: the assignment per dimension; nullopt where a named dimension is unassigned.
std::vector<std::optional<PartitionSpec::Entry>> AssignMeshAxes(std::span<const LogicalAxis> names,
                                                                std::span<const LogicalAxisRule> rules) {
  std::vector<std::string> duplicates;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i].is_name()) continue;
    bool first = true;
    for (size_t j = 0; j < i; ++j) first = first && !(names[j] == names[i]);
    if (!first) continue;
    bool repeated = false;
    for (size_t j = i + 1; j < names.size(); ++j) repeated = repeated || names[j] == names[i];
    if (repeated) duplicates.push_back(names[i].name());
  }
  if (!duplicates.empty()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Unsupported: Dimensions {} occur more than once in array names.", PyTuple(duplicates));
  }

  std::vector<std::optional<PartitionSpec::Entry>> result(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].kind() == LogicalAxis::Kind::kNone) result[i] = PartitionSpec::Entry::None();
    if (names[i].kind() == LogicalAxis::Kind::kUnconstrained) result[i] = PartitionSpec::Entry::Unconstrained();
  }
  for (const LogicalAxisRule& rule : rules) {
    auto it = std::find(names.begin(), names.end(), LogicalAxis(rule.logical_name));
    if (it == names.end()) continue;
    size_t pos = static_cast<size_t>(it - names.begin());
    if (result[pos].has_value()) continue;
    bool free = true;
    for (const auto& assigned : result) {
      if (!assigned.has_value()) continue;
      for (const std::string& axis : rule.mesh_axes.axes()) {
        if (std::find(assigned->axes().begin(), assigned->axes().end(), axis) != assigned->axes().end()) free = false;
      }
    }
    if (free) result[pos] = rule.mesh_axes;
  }
  return result;
}

PartitionSpec::Entry ParseRuleValue(std::string_view value, std::string_view item) {
  value = Trim(value);
  if (value.empty() || value == "none" || value == "None") return PartitionSpec::Entry::None();
  if (value == "UNCONSTRAINED") return PartitionSpec::Entry::Unconstrained();
  std::vector<std::string> axes;
  for (const std::string& part : Split(value, '+')) {
    std::string axis(Trim(part));
    if (axis.empty()) {
      Throw(ErrorCode::kInvalidArgument,
            "rule '{}': empty mesh axis in '{}' (write a+b for a tuple, nothing or none for None)", item, value);
    }
    axes.push_back(std::move(axis));
  }
  return PartitionSpec::Entry::Axes(std::move(axes));
}

thread_local LogicalAxisRules current_rules;

}  // namespace

LogicalAxis LogicalAxis::Unconstrained() {
  LogicalAxis axis;
  axis.kind_ = Kind::kUnconstrained;
  return axis;
}

std::string LogicalAxis::ToString() const {
  switch (kind_) {
    case Kind::kNone: return "None";
    case Kind::kUnconstrained: return "UNCONSTRAINED";
    case Kind::kName: return PyRepr(name_);
  }
  return "";
}

std::string LogicalAxesToString(std::span<const LogicalAxis> axes) {
  std::vector<std::string> parts;
  for (const LogicalAxis& axis : axes) parts.push_back(axis.ToString());
  if (parts.size() == 1) return fmt::format("({},)", parts[0]);
  return fmt::format("({})", fmt::join(parts, ", "));
}

LogicalAxes ParseLogicalAxes(std::string_view text) {
  LogicalAxes axes;
  if (Trim(text).empty()) return axes;
  for (const std::string& part : Split(text, ',')) {
    std::string_view name = Trim(part);
    if (name.empty()) {
      Throw(ErrorCode::kInvalidArgument,
            "logical axis names '{}': empty name (use _ for an unnamed dimension)", text);
    }
    if (name == "_" || name == "None") {
      axes.push_back(LogicalAxis::None());
    } else if (name == "UNCONSTRAINED") {
      axes.push_back(LogicalAxis::Unconstrained());
    } else {
      axes.emplace_back(std::string(name));
    }
  }
  return axes;
}

std::string LogicalAxisRulesToString(std::span<const LogicalAxisRule> rules) {
  std::vector<std::string> parts;
  for (const LogicalAxisRule& rule : rules) {
    parts.push_back(fmt::format("({}, {})", PyRepr(rule.logical_name), rule.mesh_axes.ToString()));
  }
  if (parts.size() == 1) return fmt::format("({},)", parts[0]);
  return fmt::format("({})", fmt::join(parts, ", "));
}

LogicalAxisRules ParseLogicalAxisRules(std::string_view text) {
  LogicalAxisRules rules;
  for (const std::string& raw_line : Split(text, '\n')) {
    std::string_view line = raw_line;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    if (Trim(line).empty()) continue;
    for (const std::string& raw_item : Split(line, ',')) {
      std::string_view item = Trim(raw_item);
      if (item.empty()) continue;  // a trailing comma
      size_t eq = item.find('=');
      if (eq == std::string_view::npos) {
        Throw(ErrorCode::kInvalidArgument,
              "rule '{}': expected name=mesh_axes (e.g. batch=data, embed=, joined=data+model)", item);
      }
      std::string name(Trim(item.substr(0, eq)));
      if (name.empty()) Throw(ErrorCode::kInvalidArgument, "rule '{}': empty logical axis name", item);
      rules.push_back({std::move(name), ParseRuleValue(item.substr(eq + 1), item)});
    }
  }
  return rules;
}

PartitionSpec LogicalToMeshAxes(std::span<const LogicalAxis> names, std::span<const LogicalAxisRule> rules) {
  std::vector<PartitionSpec::Entry> entries;
  for (auto& assigned : AssignMeshAxes(names, rules)) {
    entries.push_back(assigned.value_or(PartitionSpec::Entry::None()));
  }
  return PartitionSpec(std::move(entries));
}

PartitionSpec LogicalToMeshAxes(std::span<const LogicalAxis> names) {
  return LogicalToMeshAxes(names, GetLogicalAxisRules());
}

std::vector<std::pair<std::string, std::optional<PartitionSpec>>> LogicalToMesh(
    std::span<const std::pair<std::string, std::optional<LogicalAxes>>> tree, std::span<const LogicalAxisRule> rules) {
  std::vector<std::pair<std::string, std::optional<PartitionSpec>>> out;
  out.reserve(tree.size());
  for (const auto& [path, names] : tree) {
    if (names.has_value()) {
      out.emplace_back(path, LogicalToMeshAxes(*names, rules));
    } else {
      out.emplace_back(path, std::nullopt);
    }
  }
  return out;
}

std::optional<PartitionSpec> LogicalConstraintSpec(const std::optional<LogicalAxes>& names, RulesFallback fallback,
                                                   const LogicalAxisRules* rules) {
  const LogicalAxisRules& in_effect = rules != nullptr ? *rules : GetLogicalAxisRules();
  if (in_effect.empty() || !names.has_value()) return std::nullopt;
  auto assigned = AssignMeshAxes(*names, in_effect);
  bool unmatched = std::any_of(assigned.begin(), assigned.end(), [](const auto& a) { return !a.has_value(); });
  if (unmatched && fallback == RulesFallback::kRaiseError) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "Axis names {} did not match a rule",
              LogicalAxesToString(*names));
  }
  if (unmatched && fallback == RulesFallback::kNoConstraint) return std::nullopt;
  std::vector<PartitionSpec::Entry> entries;
  for (auto& a : assigned) entries.push_back(a.value_or(PartitionSpec::Entry::None()));
  return PartitionSpec(std::move(entries));
}

LogicalAxisRules CompositeRules(std::span<const LogicalAxisRule> rule1, std::span<const LogicalAxisRule> rule2) {
  if (rule1.empty()) return LogicalAxisRules(rule2.begin(), rule2.end());
  if (rule2.empty()) return LogicalAxisRules(rule1.begin(), rule1.end());
  LogicalAxisRules merged;
  auto find = [&merged](const std::string& name) {
    return std::find_if(merged.begin(), merged.end(), [&](const auto& r) { return r.logical_name == name; });
  };
  for (const LogicalAxisRule& rule : rule1) {
    auto it = find(rule.logical_name);
    if (it == merged.end()) {
      merged.push_back(rule);
    } else {
      it->mesh_axes = rule.mesh_axes;  // a dict keeps the first position and the last value
    }
  }
  for (const LogicalAxisRule& rule : rule2) {
    auto it = find(rule.logical_name);
    if (it == merged.end()) {
      merged.push_back(rule);
      continue;
    }
    if (!(it->mesh_axes == rule.mesh_axes)) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "Inconsistent logical axis annotations for {}: {} vs {}", rule.logical_name, PyStr(it->mesh_axes),
                PyStr(rule.mesh_axes));
    }
  }
  return merged;
}

const LogicalAxisRules& GetLogicalAxisRules() { return current_rules; }

void SetLogicalAxisRules(LogicalAxisRules rules) { current_rules = std::move(rules); }

ScopedLogicalAxisRules::ScopedLogicalAxisRules(LogicalAxisRules rules)
    : previous_(std::exchange(current_rules, std::move(rules))) {}

ScopedLogicalAxisRules::~ScopedLogicalAxisRules() { current_rules = std::move(previous_); }

LogicalAxisRules StandardLogicalAxisRules(int activation_partitioning_dims, int parameter_partitioning_dims,
                                          std::span<const LogicalAxisRule> additional_rules) {
  using E = PartitionSpec::Entry;
  // t5x/partitioning.py, standard_logical_axis_rules: the rules common to all four sets, then the 'embed' rule(s).
  LogicalAxisRules rules = {{"batch", E::Axis("data")}, {"vocab", E::Axis("model")}};
  const int a = activation_partitioning_dims;
  const int p = parameter_partitioning_dims;
  LogicalAxisRules tail = {{"mlp", E::Axis("model")},
                           {"heads", E::Axis("model")},
                           {"kv", E::None()},
                           {"joined_kv", E::Axis("model")}};
  if (a == 1 && p == 1) {
    rules.push_back({"embed", E::None()});  // 1-D/1-D lists 'embed' third
    rules.insert(rules.end(), tail.begin(), tail.end());
  } else if ((a == 2 || a == 1) && (p == 1 || p == 2)) {
    rules.insert(rules.end(), tail.begin(), tail.end());
    if (a == 2) rules.push_back({"embed", E::Axis("model")});
    if (p == 2) rules.push_back({"embed", E::Axis("data")});
  } else {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "`activation_partitioning_dims` = {} `parameter_partitioning_dims` = {} is not supported.", a, p);
  }
  for (const char* replicated : {"relpos_buckets", "abspos_buckets", "length", "layers", "stack", "mlp_activations"}) {
    rules.push_back({replicated, E::None()});
  }
  rules.insert(rules.end(), additional_rules.begin(), additional_rules.end());
  return rules;
}

LogicalAxisRules MultisliceLogicalAxisRules(std::span<const LogicalAxisRule> rules) {
  LogicalAxisRules out(rules.begin(), rules.end());
  for (LogicalAxisRule& rule : out) {
    if (rule.logical_name == "batch") rule.mesh_axes = PartitionSpec::Entry::Axes({"replica", "data"});
  }
  return out;
}

}  // namespace spmdsim
