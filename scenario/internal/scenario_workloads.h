// The `workloads:` list of a scenario file, parsed onto the engines' Config structs (workloads/workloads.h).
//
// Example: the YAML item
//   - {kind: mlp, name: tp_mlp, batch: 8, d_model: 64, d_ff: 256,
//      sharding: {batch_axes: [data], tensor_axes: [model]}}
// becomes ScenarioWorkload{kind "mlp", name "tp_mlp", config = MlpConfig{.batch = 8, .d_model = 64, .d_ff = 256,
// .sharding = {batch_axes {"data"}, tensor_axes {"model"}}}}; every other field keeps the Config's default.
// docs/scenarios.md lists every key per kind with its type and default.
#ifndef SPMDSIM_SCENARIO_INTERNAL_SCENARIO_WORKLOADS_H_
#define SPMDSIM_SCENARIO_INTERNAL_SCENARIO_WORKLOADS_H_

#include <string>
#include <variant>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "scenario/internal/scenario_yaml.h"
#include "workloads/workloads.h"

namespace spmdsim {

struct Scenario;

// A shard_map input taken from the scenario's `arrays:` (its data is made at run time, abstract or not).
struct ShardMapInputRef {
  std::string array;   // the scenario array's name (also the value's name in the program)
  PartitionSpec spec;  // in_spec: `spec:` of the input, else the array's spec
};

struct ScenarioWorkload {
  std::string kind;  // "collectives", "shard_map", "mlp", "transformer_block", "partition"
  std::string name;  // unique within the scenario (default: the kind, then kind_2, kind_3, ...)
  SourceLocation location;
  std::variant<CollectivesConfig, ShardMapConfig, MlpConfig, TransformerBlockConfig, PartitionConfig> config;
  // shard_map only: config.inputs is filled from these when the workload runs.
  std::vector<ShardMapInputRef> shard_map_inputs;
};

// The valid values of `kind`.
const std::vector<std::string>& WorkloadKinds();

// Parses one item of `workloads:`; `s` holds everything above it (topology, mesh, rules, arrays) for
// validation (mesh axes, array names). Throws as scenario.h describes.
ScenarioWorkload ParseWorkload(const YamlContext& ctx, const YAML::Node& node, const std::string& key,
                               const Scenario& s);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_INTERNAL_SCENARIO_WORKLOADS_H_
