// Internal: a `kind: model` workload's parallelism and batch written the way MaxText or NeMo (Megatron) configs
// write them, mapped onto the role-based ModelConfig (docs/model-styles.md has the table).
//
//   MaxText: ici_<axis>_parallelism / dcn_<axis>_parallelism for its mesh axes (data, pipeline = 'stage', fsdp,
//            fsdp_transpose, sequence, context, tensor, tensor_transpose, tensor_sequence, expert; -1 fills, with
//            MaxText's defaults ici_fsdp_parallelism: -1 and dcn_data_parallelism: -1), per_device_batch_size,
//            gradient_accumulation_steps, num_pipeline_microbatches, remat_policy, logical_axis_rules
//   NeMo:    tensor_model_parallel_size, pipeline_model_parallel_size, virtual_pipeline_model_parallel_size,
//            context_parallel_size, expert_model_parallel_size, micro_batch_size, global_batch_size,
//            sequence_parallel, use_distributed_optimizer, activations_checkpoint_granularity
//
// Example: on tpu-v5p:4x4x4 without a `mesh:` section,
//   - {kind: model, ici_fsdp_parallelism: 64, per_device_batch_size: 1, remat_policy: none, ...}
// builds MaxText's mesh (fsdp: 64) and gives data_axes [fsdp], zero_stage 3, global_batch 64, micro_batch 1,
// recompute none: the same ModelConfig as the role-based workload with those values.
#ifndef SPMDSIM_SCENARIO_INTERNAL_MODEL_STYLES_H_
#define SPMDSIM_SCENARIO_INTERNAL_MODEL_STYLES_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "model/config.h"
#include "scenario/internal/scenario_yaml.h"
#include "scenario/scenario_types.h"

namespace spmdsim {

// The keys the styles add to a model workload (all of MaxText's and NeMo's above).
const std::vector<std::string>& ModelStyleKeys();

// For a scenario without `mesh:`: the mesh the first model workload's MaxText or NeMo sizes describe, built as
// MaxText builds it (create_device_mesh over MaxText's axes in its order, create_hybrid_device_mesh with dcn
// sizes over several slices or hosts) or as Megatron-core orders its ranks (tp fastest, then cp, ep, dp, pp:
// mesh axes pipe, data, expert, context, tensor). Axes of size 1 are left out. nullopt when no model workload
// uses a style. Throws located errors (sizes that do not multiply to the devices, two -1s, ...).
std::optional<ScenarioMesh> MeshFromModelStyle(const YamlContext& ctx, const YAML::Node& workloads,
                                               const std::shared_ptr<const Topology>& topology);

// Sets `c`'s parallel roles, global_batch, micro_batch and recompute from the style keys of the workload `m`
// (nothing for a role-based workload), and its stack, unless `stack:` is written: maxtext for MaxText's keys,
// megatron for NeMo's. The scenario's mesh must have each style axis larger than 1 under its
// name (MaxText's axis names; NeMo's pipe, data, expert, context, tensor) and size. A style key together with
// the role key it replaces (`parallel`, `global_batch`, `micro_batch`, `recompute`), or MaxText keys with NeMo
// keys, is an error at the key.
void ApplyModelStyle(const YamlContext& ctx, const YamlMap& m, const Scenario& s, ModelConfig* c);

// The style key that stands for a role field of ModelConfigError::field() in workload `m` ("parallel.tensor_axes"
// -> "tensor_model_parallel_size"), or "" when the workload is role-based or has no such key.
std::string StyleKeyForField(const YamlMap& m, const std::string& field);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_INTERNAL_MODEL_STYLES_H_
