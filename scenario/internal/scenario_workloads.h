// Internal: the node-taking parsers of a scenario file (scenario/scenario.cc and scenario_workloads.cc), the
// `workloads:` list onto the engines' Config structs (workloads/workloads.h) and PartitionSpec values. Users
// call LoadScenario / ParseScenario (scenario/scenario.h).
#ifndef SPMDSIM_SCENARIO_INTERNAL_SCENARIO_WORKLOADS_H_
#define SPMDSIM_SCENARIO_INTERNAL_SCENARIO_WORKLOADS_H_

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "partition/partition_spec.h"
#include "scenario/internal/scenario_yaml.h"
#include "scenario/scenario.h"

namespace spmdsim {

// A PartitionSpec from YAML: "P('data', None)" / "PartitionSpec(...)" text, or a list whose entries are an axis
// name, null, or a list of names ([data, null, [model, fsdp]]). Throws a located ScenarioError.
PartitionSpec ParseSpecNode(const YamlContext& ctx, const YAML::Node& node, const std::string& key);

// Parses one item of `workloads:`; `s` holds everything above it (topology, mesh, rules, arrays) for
// validation (mesh axes, array names). Throws as scenario.h describes.
ScenarioWorkload ParseWorkload(const YamlContext& ctx, const YAML::Node& node, const std::string& key,
                               const Scenario& s);

// `kind: hlo` (scenario/hlo_yaml.cc): reads and verifies the module file (relative paths: the scenario's folder).
HloConfig ParseHloWorkload(const YamlContext& ctx, const YamlMap& m, const Scenario& s);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_INTERNAL_SCENARIO_WORKLOADS_H_
