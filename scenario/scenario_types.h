// The values a scenario file is read into (docs/scenarios.md documents every key): the machine, the mesh on it, the
// sharding rules, the named arrays and the workloads, each parsed onto its engine's Config struct. Reading a file
// is scenario/scenario.h (LoadScenario / ParseScenario), which includes this header; the file's readers
// (scenario/internal/) build these values and sit below scenario.h.
//
// Example (scenarios/cpu8-quick.yaml): Scenario{name "cpu8-quick", topology cpu:8, mesh Mesh('data': 2, 'model': 4),
// arrays [x: float32[8, 16] P('data', None) random], workloads [collectives all_reduce over model]}.
#ifndef SPMDSIM_SCENARIO_SCENARIO_TYPES_H_
#define SPMDSIM_SCENARIO_SCENARIO_TYPES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/enum_names.h"
#include "cost/roofline.h"
#include "mesh/mesh.h"
#include "mesh/topology.h"
#include "model/calibration.h"
#include "ops/random.h"
#include "partition/logical_axis_rules.h"
#include "partition/match_rules.h"
#include "partition/named_sharding.h"
#include "partition/partition_axis.h"
#include "partition/partition_spec.h"
#include "scenario/npy.h"
#include "sim/array.h"
#include "workloads/hlo_workload.h"
#include "workloads/workloads.h"

namespace spmdsim {

// Where a value sits in its file (1-based line and column, as editors count).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  std::string ToString() const;  // "scenarios/a.yaml:12:5"
};

// The machine: a preset with overrides applied, plus what the topology itself does not hold.
struct ScenarioTopology {
  std::shared_ptr<const Topology> topology;
  RooflineOptions efficiency;                      // compute / memory efficiency factors, default 1
  std::vector<std::pair<int, double>> stragglers;  // (device id, speed factor), factor in (0, 1]
  // `calibration: FILE`: a profile of `spmdsim calibrate` (scenario/calibration_file.h), fitted on this
  // topology's device kind and every model workload's stack; none: the documented figures.
  std::optional<CalibrationProfile> calibration;
};

// How the mesh was built, for reports.
struct ScenarioMesh {
  enum class Builder { kCreateDeviceMesh, kHybrid, kT5xGetMesh, kT5xDefaultMesh };
  Builder builder = Builder::kCreateDeviceMesh;
  Mesh mesh;
  std::string description;  // "create_device_mesh data=2,model=4", "hybrid ici data=1,model=16 dcn data=2,model=1"
};

struct ScenarioRules {
  LogicalAxisRules logical_axis_rules;              // Flax/T5X (logical name, mesh axes) pairs
  std::optional<PartitionAxis> partition_axis;      // eformer PartitionAxis, when `partition_axis` is given
  RuntimeMode runtime_mode = RuntimeMode::kTrain;   // eformer runtime mode for semantic axes
  std::vector<PartitionRule> partition_rules;       // eformer regex rules
  MatchOptions match_options;                       // min_size and strict for the regex rules
};

// How an array's elements are made.
struct ArrayInit {
  enum class Kind { kZeros, kOnes, kIota, kRandom, kNpy };
  Kind kind = Kind::kZeros;
  RandomFill random;                                // kRandom: seed, scale, normal or uniform (ops/random.h)
  std::string path;                                 // kNpy: resolved against the scenario's folder
  std::optional<NpyHeader> npy;                     // kNpy: the file's header (read at load time; the data
                                                    // when the array or its blocks are made)
};
std::string_view ArrayInitKindName(ArrayInit::Kind kind);  // "zeros", "ones", "iota", "random", "npy"

// One named global array.
struct ScenarioArray {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;  // an array dtype (common/dtype.h)
  PartitionSpec spec;             // given, or resolved from logical_axes / semantic_axes with the rules
  std::optional<LogicalAxes> logical_axes;
  std::optional<SemanticAxes> semantic_axes;
  ArrayInit init;
  SourceLocation location;
};

// A shard_map input taken from the scenario's `arrays:` (its data is made at run time, abstract or not).
struct ShardMapInputRef {
  std::string array;   // the scenario array's name (also the value's name in the program)
  PartitionSpec spec;  // in_spec: `spec:` of the input, else the array's spec
};

// One item of `workloads:`, parsed onto its engine's Config struct (workloads/workloads.h).
//
// The names a scenario gives a model workload's fields (docs/scenarios.md, "Model keys"): spmdsim's own (d_model,
// layers, heads, ...), MaxText's (base_emb_dim, base_num_decoder_layers, base_num_query_heads, ...) or NeMo 2.0 /
// Megatron-Core's (hidden_size, num_layers, num_attention_heads, ...). A model is written back (`plan --write`)
// in the family it was read in.
enum class ModelKeyFamily { kSpmdsim, kMaxText, kNemo };
inline constexpr EnumName<ModelKeyFamily> kModelKeyFamilyNames[] = {
    {ModelKeyFamily::kSpmdsim, "spmdsim"}, {ModelKeyFamily::kMaxText, "MaxText"}, {ModelKeyFamily::kNemo, "NeMo"}};

// Example: the YAML item
//   - {kind: mlp, name: tp_mlp, batch: 8, d_model: 64, d_ff: 256,
//      sharding: {batch_axes: [data], tensor_axes: [model]}}
// becomes ScenarioWorkload{kind WorkloadKind::kMlp, name "tp_mlp", config = MlpConfig{.batch = 8, .d_model = 64,
// .d_ff = 256, .sharding = {batch_axes {"data"}, tensor_axes {"model"}}}}; every other field keeps the Config's
// default.
// docs/scenarios.md lists every key per kind with its type and default.
struct ScenarioWorkload {
  WorkloadKind kind = WorkloadKind::kShardMap;  // its `kind:` (workloads/workloads.h kWorkloadKindNames)
  std::string name;  // unique within the scenario (default: the kind, then kind_2, kind_3, ...)
  SourceLocation location;
  std::variant<CollectivesConfig, ShardMapConfig, MlpConfig, TransformerBlockConfig, PartitionConfig, ValidatedModel,
               HloConfig>
      config;  // a model is validated against the scenario's mesh when the file is read
  // shard_map only: config.inputs is filled from these when the workload runs.
  std::vector<ShardMapInputRef> shard_map_inputs;
  // model only: the key family its fields were written in, and the fields the file left to their defaults as
  // "field: value" ("activation: gelu"), which the report lists (a Llama-shaped model without `activation:`
  // computes GELU, not SwiGLU).
  ModelKeyFamily model_keys = ModelKeyFamily::kSpmdsim;
  std::vector<std::string> model_defaults;
};

struct Scenario {
  std::string path;         // as given to LoadScenario
  std::string name;         // `name:` or the file's stem
  std::string description;  // `description:` or ""
  ScenarioTopology topology;
  ScenarioMesh mesh;
  ScenarioRules rules;
  std::vector<ScenarioArray> arrays;
  std::vector<ScenarioWorkload> workloads;

  // The array named `name`; throws Error(kNotFound) listing the names.
  const ScenarioArray& array(std::string_view name) const;
};

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_SCENARIO_TYPES_H_
