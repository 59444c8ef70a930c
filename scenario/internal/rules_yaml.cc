// `rules:` of a scenario file and PartitionSpec values (scenario/internal/scenario_parsers.h).
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "scenario/internal/scenario_parsers.h"

namespace spmdsim {
namespace {

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
    // Either form holds at most kMaxScenarioRank entries (the rank of the largest array a scenario may declare).
    auto too_many = [&](size_t entries) {
      ctx.Fail(node, key, fmt::format("a spec of {} entries; at most {}", entries, kMaxScenarioRank));
    };
    if (node.IsScalar()) {
      PartitionSpec spec = PartitionSpec::Parse(node.Scalar());
      if (spec.size() > kMaxScenarioRank) too_many(static_cast<size_t>(spec.size()));
      return spec;
    }
    if (node.IsSequence()) {
      if (node.size() > static_cast<size_t>(kMaxScenarioRank)) too_many(node.size());
      std::vector<PartitionSpec::Entry> entries;
      for (size_t i = 0; i < node.size(); ++i)
        entries.push_back(ParseEntry(ctx, node[i], fmt::format("{}[{}]", key, i)));
      return PartitionSpec(entries);
    }
  } catch (const LocatedError&) {
    throw;
  } catch (const Error& e) {
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

// `logical_axis_rules:` as text or a list of [logical_name, mesh_axes] pairs.
LogicalAxisRules ParseLogicalRules(const YamlContext& ctx, const YAML::Node& r) {
  LogicalAxisRules out;
  if (r.IsScalar()) {
    try {
      out = ParseLogicalAxisRules(r.Scalar());
    } catch (const Error& e) {
      ctx.Rethrow(r, "rules.logical_axis_rules", e);
    }
    return out;
  }
  ctx.RequireSequence(r, "rules.logical_axis_rules");
  for (size_t i = 0; i < r.size(); ++i) {
    std::string key = fmt::format("rules.logical_axis_rules[{}]", i);
    if (!r[i].IsSequence() || r[i].size() != 2)
      ctx.Fail(r[i], key, "expected a pair [logical_name, mesh_axes], e.g. [batch, data] or [embed, null]");
    out.push_back({ctx.String(r[i][0], key + "[0]"), ParseEntry(ctx, r[i][1], key + "[1]")});
  }
  return out;
}

// `partition_axis:`: eformer PartitionAxis fields overriding its defaults.
PartitionAxis ParsePartitionAxis(const YamlContext& ctx, const YAML::Node& p) {
  std::vector<std::string> fields;
  for (int f = 0; f < PartitionAxis::kNumFields; ++f)
    fields.emplace_back(PartitionAxis::FieldName(static_cast<PartitionAxis::Field>(f)));
  YamlMap pm(ctx, p, "rules.partition_axis", fields, /*null_ok=*/true);
  std::vector<std::pair<std::string, AxisRule>> overrides;
  for (const std::string& k : pm.keys()) overrides.emplace_back(k, ParseAxisRule(ctx, pm.Get(k), pm.Key(k)));
  try {
    return PartitionAxis(overrides);
  } catch (const Error& e) {
    ctx.Rethrow(p, "rules.partition_axis", e);
  }
}

// `partition_rules:` as text or a list of [pattern, spec] pairs; the patterns are compiled here, so that a bad
// one is reported at its place.
std::vector<PartitionRule> ParsePartitionRules(const YamlContext& ctx, const YAML::Node& r) {
  std::vector<PartitionRule> out;
  try {
    if (r.IsScalar()) {
      out = ParsePatternRules(r.Scalar());
    } else {
      ctx.RequireSequence(r, "rules.partition_rules");
      for (size_t i = 0; i < r.size(); ++i) {
        std::string key = fmt::format("rules.partition_rules[{}]", i);
        if (!r[i].IsSequence() || r[i].size() != 2)
          ctx.Fail(r[i], key, "expected a pair [pattern, spec], e.g. [\".*/kernel\", \"P('fsdp', 'tp')\"]");
        out.push_back({ctx.String(r[i][0], key + "[0]"), ParseSpecNode(ctx, r[i][1], key + "[1]")});
      }
    }
    PartitionRules compiled(out);
  } catch (const LocatedError&) {
    throw;
  } catch (const Error& e) {
    ctx.Rethrow(r, "rules.partition_rules", e);
  }
  return out;
}

}  // namespace

ScenarioRules ParseRules(const YamlContext& ctx, const YAML::Node& node) {
  YamlMap m(ctx, node, "rules",
            {"logical_axis_rules", "partition_axis", "runtime_mode", "partition_rules", "min_size", "strict"});
  ScenarioRules out;
  if (m.Has("logical_axis_rules")) out.logical_axis_rules = ParseLogicalRules(ctx, m.Get("logical_axis_rules"));
  if (m.Has("partition_axis")) out.partition_axis = ParsePartitionAxis(ctx, m.Get("partition_axis"));
  if (m.Has("runtime_mode")) {
    std::string mode = ctx.Choice(m.Get("runtime_mode"), "rules.runtime_mode",
                                  {"train", "prefill", "decode", "insert"});
    out.runtime_mode = ParseRuntimeMode(mode);
  }
  if (m.Has("partition_rules")) out.partition_rules = ParsePartitionRules(ctx, m.Get("partition_rules"));
  out.match_options.min_size = m.Int("min_size", 0);
  if (*out.match_options.min_size < 0) ctx.Fail(m.Get("min_size"), "rules.min_size", "expected an integer >= 0");
  out.match_options.strict = m.Bool("strict", true);
  return out;
}

}  // namespace spmdsim
