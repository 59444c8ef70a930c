// ModelScenarioYaml: a model workload written back as a scenario file (scenario/scenario.h).
#include <sstream>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/dtype.h"
#include "scenario/internal/model_styles.h"
#include "scenario/scenario.h"

namespace spmdsim {
namespace {

void EmitAxes(YAML::Emitter& out, const char* key, const std::vector<std::string>& axes) {
  if (axes.empty()) return;
  out << YAML::Key << key << YAML::Value << YAML::Flow << axes;
}

void EmitParallel(YAML::Emitter& out, const ModelParallelism& p) {
  out << YAML::Key << "parallel" << YAML::Value << YAML::BeginMap;
  EmitAxes(out, "data_axes", p.data_axes);
  out << YAML::Key << "zero_stage" << YAML::Value << p.zero_stage;
  if (!p.zero_axes.empty()) EmitAxes(out, "zero_axes", p.zero_axes);
  EmitAxes(out, "tensor_axes", p.tensor_axes);
  out << YAML::Key << "sequence_parallel" << YAML::Value << p.sequence_parallel;
  EmitAxes(out, "context_axes", p.context_axes);
  EmitAxes(out, "pipeline_axes", p.pipeline_axes);
  out << YAML::Key << "schedule" << YAML::Value << std::string(PipelineScheduleName(p.schedule));
  out << YAML::Key << "virtual_stages" << YAML::Value << p.virtual_stages;
  if (p.pipeline_transfers != PipelineTransfers::kStack)
    out << YAML::Key << "pipeline_transfers" << YAML::Value << std::string(PipelineTransfersName(p.pipeline_transfers));
  if (p.first_stage_layers >= 0) out << YAML::Key << "first_stage_layers" << YAML::Value << p.first_stage_layers;
  if (p.last_stage_layers >= 0) out << YAML::Key << "last_stage_layers" << YAML::Value << p.last_stage_layers;
  if (p.embedding_in_split) out << YAML::Key << "account_for_embedding" << YAML::Value << true;
  if (p.loss_in_split) out << YAML::Key << "account_for_loss" << YAML::Value << true;
  EmitAxes(out, "expert_axes", p.expert_axes);
  out << YAML::EndMap;
}

// `activation:`, or MaxText's mlp_activations list.
void EmitActivation(YAML::Emitter& out, const ModelConfig& c, ModelKeyFamily family) {
  out << YAML::Key << std::string(ModelKeyIn(family, "activation")) << YAML::Value;
  if (family != ModelKeyFamily::kMaxText) {
    out << std::string(ActivationName(c.activation));
  } else {
    out << YAML::Flow
        << (c.activation == Activation::kSwiglu ? std::vector<std::string>{"silu", "linear"}
                                                : std::vector<std::string>{"gelu"});
  }
}

// `recompute:`, or NeMo's recompute_granularity (null for none).
void EmitRecompute(YAML::Emitter& out, const ModelConfig& c, ModelKeyFamily family) {
  out << YAML::Key << std::string(ModelKeyIn(family, "recompute")) << YAML::Value;
  if (family == ModelKeyFamily::kNemo && c.recompute == Recompute::kNone) {
    out << YAML::Null;
  } else {
    out << std::string(RecomputeName(c.recompute));
  }
}

void EmitModel(YAML::Emitter& out, const ModelConfig& c, ModelKeyFamily family) {
  const auto named = [&](std::string_view field) { return std::string(ModelKeyIn(family, field)); };
  out << YAML::BeginMap;
  out << YAML::Key << "kind" << YAML::Value << std::string(WorkloadKindName(WorkloadKind::kModel));
  out << YAML::Key << named("name") << YAML::Value << c.name;
  for (auto [field, value] : {std::pair<std::string_view, int64_t>{"vocab", c.vocab}, {"d_model", c.d_model},
                              {"layers", c.layers}, {"heads", c.heads}, {"kv_heads", c.kv_heads},
                              {"head_dim", c.head_dim}, {"d_ff", c.d_ff}, {"seq", c.seq},
                              {"global_batch", c.global_batch}, {"micro_batch", c.micro_batch}}) {
    if ((field == "kv_heads" || field == "head_dim") && value == 0) continue;
    out << YAML::Key << named(field) << YAML::Value << value;
  }
  EmitActivation(out, c, family);
  out << YAML::Key << "norm" << YAML::Value << std::string(NormName(c.norm));
  out << YAML::Key << "position" << YAML::Value << std::string(PositionEmbeddingName(c.position));
  out << YAML::Key << "tied_embeddings" << YAML::Value << c.tied_embeddings;
  out << YAML::Key << "dropout" << YAML::Value << c.dropout;
  out << YAML::Key << "flash_attention" << YAML::Value << c.flash_attention;
  out << YAML::Key << "dtype" << YAML::Value << std::string(DTypeName(c.dtype));
  if (c.moe.experts > 0) {
    out << YAML::Key << "moe" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "experts" << YAML::Value << c.moe.experts;
    out << YAML::Key << "top_k" << YAML::Value << c.moe.top_k;
    out << YAML::Key << "capacity_factor" << YAML::Value << c.moe.capacity_factor;
    if (c.moe.d_ff > 0) out << YAML::Key << "d_ff" << YAML::Value << c.moe.d_ff;
    out << YAML::Key << "every" << YAML::Value << c.moe.every;
    if (c.moe.first_dense > 0) out << YAML::Key << "first_dense" << YAML::Value << c.moe.first_dense;
    if (c.moe.shared_d_ff > 0) out << YAML::Key << "shared_d_ff" << YAML::Value << c.moe.shared_d_ff;
    if (c.moe.shared_expert_overlap) out << YAML::Key << "shared_expert_overlap" << YAML::Value << true;
    out << YAML::Key << "router" << YAML::Value << std::string(MoeRouterName(c.moe.router));
    out << YAML::EndMap;
  }
  if (c.is_mla()) {
    const MlaConfig& a = c.mla;
    out << YAML::Key << "mla" << YAML::Value << YAML::BeginMap;
    for (auto [key, value] : {std::pair<const char*, int64_t>{"q_lora_rank", a.q_lora_rank},
                              {"kv_lora_rank", a.kv_lora_rank}, {"qk_head_dim", a.qk_head_dim},
                              {"qk_rope_head_dim", a.qk_rope_head_dim}, {"v_head_dim", a.v_head_dim}})
      out << YAML::Key << key << YAML::Value << value;
    out << YAML::Key << "recompute_up_proj" << YAML::Value << a.recompute_up_proj;
    out << YAML::EndMap;
  }
  if (c.attention_window.window > 0) {
    out << YAML::Key << "attention_window" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "window" << YAML::Value << c.attention_window.window;
    out << YAML::Key << "global_every" << YAML::Value << c.attention_window.global_every;
    out << YAML::EndMap;
  }
  if (c.mtp_layers > 0) out << YAML::Key << "mtp_layers" << YAML::Value << c.mtp_layers;
  EmitParallel(out, c.parallel);
  EmitRecompute(out, c, family);
  if (c.stack != SoftwareStack::kAuto) out << YAML::Key << "stack" << YAML::Value << std::string(StackName(c.stack));
  out << YAML::EndMap;
}

}  // namespace

std::string ModelScenarioYaml(const std::string& name, const std::string& description, const std::string& topology,
                              const std::vector<std::pair<std::string, int64_t>>& mesh_axes, const ModelConfig& config,
                              const std::string& comment, bool allow_split_physical_axes,
                              ModelKeyFamily family) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << name;
  out << YAML::Key << "description" << YAML::Value << description;
  out << YAML::Key << "topology" << YAML::Value << YAML::BeginMap << YAML::Key << "preset" << YAML::Value << topology
      << YAML::EndMap;
  out << YAML::Key << "mesh" << YAML::Value << YAML::BeginMap << YAML::Key << "axes" << YAML::Value << YAML::Flow
      << YAML::BeginMap;
  for (const auto& [axis, size] : mesh_axes) out << YAML::Key << axis << YAML::Value << size;
  out << YAML::EndMap;
  if (allow_split_physical_axes) out << YAML::Key << "allow_split_physical_axes" << YAML::Value << true;
  out << YAML::EndMap;
  out << YAML::Key << "workloads" << YAML::Value << YAML::BeginSeq;
  EmitModel(out, config, family);
  out << YAML::EndSeq << YAML::EndMap;
  std::string text;
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);) text += "# " + line + "\n";
  return text + out.c_str() + "\n";
}

}  // namespace spmdsim
