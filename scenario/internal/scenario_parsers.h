// Internal: the node-taking parsers of a scenario file, one unit per section: topology_yaml.cc (`topology:`,
// `mesh:`, and `topology.calibration` with LoadCalibrationProfile), rules_yaml.cc (`rules:` and PartitionSpec
// values), arrays_yaml.cc (`arrays:`), workloads_yaml.cc (`workloads:` onto the engines' Config structs,
// workloads/workloads.h), hlo_yaml.cc (`kind: hlo`). They build the values of scenario/scenario_types.h, below
// scenario/scenario.h, whose scenario.cc reads the file's top level with them. Users call LoadScenario /
// ParseScenario (scenario/scenario.h).
#ifndef SPMDSIM_SCENARIO_INTERNAL_SCENARIO_PARSERS_H_
#define SPMDSIM_SCENARIO_INTERNAL_SCENARIO_PARSERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "partition/partition_spec.h"
#include "scenario/internal/scenario_yaml.h"
#include "scenario/scenario_types.h"

namespace spmdsim {

// Bounds that keep a scenario within what one machine can simulate, and the parser out of overflow.
inline constexpr int64_t kMaxScenarioDevices = 1 << 16;
inline constexpr int64_t kMaxScenarioRank = 16;
inline constexpr int64_t kMaxScenarioElements = int64_t{1} << 40;

// `topology:`: a preset with overrides, efficiency and stragglers.
ScenarioTopology ParseTopology(const YamlContext& ctx, const YAML::Node& node);
// `mesh:` on the topology: create_device_mesh, create_hybrid_device_mesh or T5X's default_mesh / get_mesh.
ScenarioMesh ParseMesh(const YamlContext& ctx, const YAML::Node& node, const std::shared_ptr<const Topology>& topology);
// `rules:`: logical axis rules, eformer's PartitionAxis and runtime mode, regex partition rules.
ScenarioRules ParseRules(const YamlContext& ctx, const YAML::Node& node);
// One item of `arrays:`; `s` holds the mesh and rules its spec is resolved with, `base_dir` the folder relative
// .npy paths are resolved against (the file's header is read here, its data when the array is made).
ScenarioArray ParseArray(const YamlContext& ctx, const YAML::Node& node, const std::string& key, const Scenario& s,
                         const std::string& base_dir);

// A PartitionSpec from YAML: "P('data', None)" / "PartitionSpec(...)" text, or a list whose entries are an axis
// name, null, or a list of names ([data, null, [model, fsdp]]). Throws a located ScenarioError.
PartitionSpec ParseSpecNode(const YamlContext& ctx, const YAML::Node& node, const std::string& key);

// Parses one item of `workloads:`; `s` holds everything above it (topology, mesh, rules, arrays) for
// validation (mesh axes, array names). Throws as scenario.h describes.
ScenarioWorkload ParseWorkload(const YamlContext& ctx, const YAML::Node& node, const std::string& key,
                               const Scenario& s);

// `kind: hlo` (hlo_yaml.cc): reads and verifies the module file (relative paths: the scenario's folder).
HloConfig ParseHloWorkload(const YamlContext& ctx, const YamlMap& m, const Scenario& s);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_INTERNAL_SCENARIO_PARSERS_H_
