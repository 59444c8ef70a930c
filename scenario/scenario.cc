#include "scenario/scenario.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/file.h"
#include "common/host_memory.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "mesh/mesh_utils.h"
#include "mesh/t5x_mesh.h"
#include "partition/named_sharding.h"
#include "scenario/internal/model_styles.h"
#include "scenario/internal/scenario_parsers.h"
#include "scenario/internal/scenario_yaml.h"
#include "workloads/workloads.h"

namespace spmdsim {
namespace {

Scenario ParseScenarioUnchecked(std::string_view text, const std::string& path) {
  YamlContext ctx(path);
  YAML::Node root = LoadSingleYamlDocument(text, path);
  YamlMap m(ctx, root, "", {"name", "description", "topology", "mesh", "rules", "arrays", "workloads"});
  Scenario s;
  s.path = path;
  s.name = m.Has("name") ? ctx.String(m.Get("name"), "name") : std::filesystem::path(path).stem().string();
  s.description = m.Has("description") ? ctx.String(m.Get("description"), "description") : "";
  s.topology = ParseTopology(ctx, m.Need("topology"));
  if (m.Has("mesh")) {
    s.mesh = ParseMesh(ctx, m.Get("mesh"), s.topology.topology);
  } else if (auto styled = MeshFromModelStyle(ctx, m.Get("workloads"), s.topology.topology)) {
    s.mesh = std::move(*styled);  // as MaxText or Megatron lays it out from the model's parallelism keys
  } else {
    m.Need("mesh");  // "missing required key"
  }
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
    s.workloads.push_back(std::move(w));
  }
  return s;
}

}  // namespace

Scenario ParseScenario(std::string_view text, const std::string& path) {
  try {
    return ParseScenarioUnchecked(text, path);
  } catch (const Error&) {
    throw;
  } catch (const YAML::Exception& e) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kScenarioError, "{}:{}:{}: {}", path, e.mark.line + 1,
              e.mark.column + 1, e.msg);
  } catch (const std::exception& e) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kScenarioError, "{}: cannot read the scenario: {}", path,
              e.what());
  }
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
