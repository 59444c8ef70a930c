// Scenario files: one YAML document that describes a machine, a mesh on it, sharding rules, named arrays and
// the workloads to run (docs/scenarios.md documents every key, its type and default).
//
// Example (scenarios/cpu8-quick.yaml, shortened):
//   topology: {preset: "cpu:8"}
//   mesh: {axes: {data: 2, model: 4}}
//   arrays:
//     - {name: x, shape: [8, 16], dtype: float32, spec: "P('data', None)", data: random, seed: 1}
//   workloads:
//     - {kind: collectives, ops: [all_reduce], axes: [model], sizes: [1KiB, 1MiB]}
// LoadScenario("scenarios/cpu8-quick.yaml") -> a Scenario whose mesh is Mesh('data': 2, 'model': 4) over cpu:8.
//
// Errors: every problem in a file throws Error(kInvalidArgument, kind "ScenarioError") whose message starts
// with "<file>:<line>:<column>: <key path>: " and says what was found and what is valid; unknown keys get a
// did-you-mean. Errors raised by the libraries a value is handed to (a bad PartitionSpec, a mesh that does not
// fit the topology) are rethrown with the same prefix. Nothing else escapes: any other exception from the YAML
// library or the standard library is turned into such an error (fuzz/scenario_fuzzer.cc checks this).
#ifndef SPMDSIM_SCENARIO_SCENARIO_H_
#define SPMDSIM_SCENARIO_SCENARIO_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/config.h"
#include "scenario/scenario_types.h"

namespace spmdsim {

// A ready-to-run scenario file (YAML text) with one `kind: model` workload: `config` on `topology` (the Parse
// form, e.g. "dgx-h100:16") with a mesh of `mesh_axes` (in mesh order). Every field of the config is written, so
// LoadScenario gives back the same ModelConfig. `comment` becomes the file's leading comment lines;
// `allow_split_physical_axes` is written to the mesh when set (JAX's create_device_mesh flag). The model's fields
// are written under `family`'s names (spmdsim's d_model, MaxText's base_emb_dim, NeMo's hidden_size; the parallel
// layout always as `parallel:` roles).
std::string ModelScenarioYaml(const std::string& name, const std::string& description, const std::string& topology,
                              const std::vector<std::pair<std::string, int64_t>>& mesh_axes, const ModelConfig& config,
                              const std::string& comment = "", bool allow_split_physical_axes = false,
                              ModelKeyFamily family = ModelKeyFamily::kSpmdsim);

// The config of the first `kind: model` workload; throws Error(kInvalidArgument) naming the file when there is none.
const ModelConfig& FirstModelWorkload(const Scenario& s);

// Parses and validates a scenario. `path` is used in messages and to resolve relative .npy paths.
Scenario LoadScenario(const std::string& path);
// Same, from text; `path` names the text in messages and is the base for relative paths.
Scenario ParseScenario(std::string_view text, const std::string& path);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_SCENARIO_H_
