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
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "model/config.h"
#include "scenario/internal/scenario_yaml.h"
#include "scenario/scenario_types.h"

namespace spmdsim {

// The keys the styles add to a model workload (all of MaxText's and NeMo's above).
const std::vector<std::string>& ModelStyleKeys();

// One field of a model workload under each key family's name (ModelKeyFamily, scenario/scenario_types.h): the one
// table the reader accepts and `plan --write` writes from. "" where a family has no name of its own (its file
// uses spmdsim's). MaxText: MaxText/configs/base.yml and models/*.yml; NeMo 2.0 / Megatron-Core:
// megatron/core/transformer/transformer_config.py (TransformerConfig) and NeMo's GPTConfig.
//   mlp_activations: MaxText writes a list, [silu, linear] for SwiGLU, [gelu] for GELU;
//   recompute_granularity: null (none), selective or full, as TransformerConfig;
//   model_name (MaxText) names the workload, as `name:` does.
struct ModelKeyNames {
  std::string_view field;  // spmdsim's key
  std::string_view maxtext;
  std::string_view nemo;
};
inline constexpr ModelKeyNames kModelKeyNames[] = {
    {"name", "model_name", ""},
    {"vocab", "vocab_size", "vocab_size"},
    {"d_model", "base_emb_dim", "hidden_size"},
    {"layers", "base_num_decoder_layers", "num_layers"},
    {"heads", "base_num_query_heads", "num_attention_heads"},
    {"kv_heads", "base_num_kv_heads", "num_query_groups"},
    {"head_dim", "head_dim", "kv_channels"},
    {"d_ff", "base_mlp_dim", "ffn_hidden_size"},
    {"seq", "max_target_length", "seq_length"},
    {"activation", "mlp_activations", ""},
    {"recompute", "", "recompute_granularity"},
};

// The name of spmdsim's model key `field` in `family` (`field` itself where the family has none).
std::string_view ModelKeyIn(ModelKeyFamily family, std::string_view field);
// Every key of kModelKeyNames' MaxText and NeMo columns that is not also spmdsim's, in table order.
const std::vector<std::string>& ModelFamilyKeys();
// The key workload `m` writes for spmdsim's model key `field` (under any family's name), or `field` when it writes
// none. Two names of one field ("d_model" and "hidden_size") are an error at the second.
std::string ModelFieldKey(const YamlContext& ctx, const YamlMap& m, std::string_view field);
// The family of workload `m`'s model keys: MaxText or NeMo when it writes a key only that family has (a
// MaxText-style or NeMo-style parallelism decides when its model keys are shared by both or spmdsim's), else
// spmdsim's. MaxText's keys together with NeMo's are an error at the second family's first key.
ModelKeyFamily ModelKeyFamilyOf(const YamlContext& ctx, const YamlMap& m);
// The valid keys of a model workload as an error lists them, short enough for one error line: spmdsim's, then
// MaxText's and NeMo's names of the model's fields, then where their parallelism keys are listed.
std::string ModelValidKeysText(const std::vector<std::string>& own_keys);

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
