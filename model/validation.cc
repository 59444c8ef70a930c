#include "model/validation.h"

#include <memory>
#include <string>

#include <fmt/format.h>

#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "model/step.h"

namespace spmdsim {
namespace {

Mesh MeshOn(const std::string& topology, const std::vector<std::pair<std::string, int64_t>>& axes) {
  return MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse(topology)), axes);
}

// Korthikanti et al. 2022, Table 5: fp16, dropout, no flash attention (2022), TP 8 in a DGX A100, PP over
// nodes; full recompute without SP, or SP + selective recompute.
void AddKorthikanti(std::vector<ModelValidationRow>* rows) {
  struct Published {
    const char* name;
    int64_t h, layers, heads, d_ff, pp, v, gpus, global_batch, micro_batch;
    double full, selective;
  };
  const Published published[] = {
      {"22B", 6144, 48, 64, 4 * 6144, 1, 1, 8, 4, 4, 1.42, 1.10},
      {"175B", 12288, 96, 96, 4 * 12288, 8, 3, 64, 64, 1, 18.13, 13.75},
      {"530B", 20480, 105, 128, 81920, 35, 3, 280, 280, 1, 49.05, 37.83},
      {"1T", 25600, 128, 160, 102400, 64, 1, 512, 512, 1, 94.42, 71.49},
  };
  for (const Published& p : published) {
    for (bool selective : {false, true}) {
      ModelConfig c = GptModel(p.h, p.layers, p.heads, p.d_ff);
      c.name = p.name;
      c.dtype = DType::kF16;
      c.dropout = true;
      c.flash_attention = false;
      c.global_batch = p.global_batch;
      c.micro_batch = p.micro_batch;
      c.recompute = selective ? Recompute::kSelective : Recompute::kFull;
      c.parallel.tensor_axes = {"tensor"};
      c.parallel.sequence_parallel = selective;
      std::vector<std::pair<std::string, int64_t>> axes = {{"tensor", 8}};
      if (p.pp > 1) {
        axes.insert(axes.begin(), {"pipe", p.pp});
        c.parallel.pipeline_axes = {"pipe"};
        c.parallel.schedule = p.v > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::k1F1B;
        c.parallel.virtual_stages = p.v;
      }
      // Megatron-LM of 2022: blocking pipeline transfers (docs/model.md, "Blocking pipeline transfers").
      const ModelStepTimes t =
          PredictModelStep(ValidateModel(c, MeshOn(fmt::format("dgx-a100:{}", p.gpus / 8), axes)), {.blocking_p2p = true});
      ModelValidationRow row;
      row.name = fmt::format("GPT {} on {} A100 (TP 8, PP {}{}), {}", p.name, p.gpus, p.pp,
                             p.v > 1 ? fmt::format(" x {} virtual", p.v) : "",
                             selective ? "SP + selective recompute" : "full recompute");
      row.reference = selective ? p.selective : p.full;
      row.source = "Korthikanti et al. 2022, Table 5";
      row.predicted = t.step_seconds;
      row.tolerance = kModelValidationTolerance;
      row.note = fmt::format("MFU {:.1f}%; compute {:.3g} s, exposed comm {:.3g} s, bubble {:.3g} s", 100 * t.mfu,
                             t.compute_seconds, t.exposed_comm_seconds, t.bubble_seconds);
      rows->push_back(std::move(row));
    }
  }
}

// NVIDIA dgxc-benchmarking, NeMo Megatron GPT-3 175B: TP 4, PP 8, virtual 12, micro-batch 1, global batch
// 2 x GPUs, SP, flash attention (Transformer Engine), distributed optimizer (ZeRO-1), no recompute, no dropout.
void AddNvidiaH100(std::vector<ModelValidationRow>* rows) {
  struct Published {
    int64_t gpus;
    DType dtype;
    double seconds;
  };
  const Published published[] = {{128, DType::kBF16, 8.309}, {256, DType::kBF16, 8.408}, {512, DType::kBF16, 8.42},
                                 {1024, DType::kBF16, 8.453}, {2048, DType::kBF16, 8.49},
                                 {128, DType::kF8E4M3FN, 5.626}, {2048, DType::kF8E4M3FN, 5.96}};
  for (const Published& p : published) {
    ModelConfig c = GptModel(12288, 96, 96, 4 * 12288);
    c.name = "gpt3-175b";
    c.dtype = p.dtype;
    c.dropout = false;
    c.flash_attention = true;
    c.global_batch = 2 * p.gpus;
    c.micro_batch = 1;
    c.parallel.data_axes = {"data"};
    c.parallel.zero_stage = 1;
    c.parallel.tensor_axes = {"tensor"};
    c.parallel.sequence_parallel = true;
    c.parallel.pipeline_axes = {"pipe"};
    c.parallel.schedule = PipelineSchedule::kInterleaved1F1B;
    c.parallel.virtual_stages = 12;
    const Mesh mesh = MeshOn(fmt::format("dgx-h100:{}", p.gpus / 8), {{"data", p.gpus / 32}, {"pipe", 8}, {"tensor", 4}});
    const ModelStepTimes t = PredictModelStep(ValidateModel(c, mesh));
    ModelValidationRow row;
    row.name = fmt::format("GPT-3 175B on {} H100 (TP 4, PP 8 x 12 virtual, DP {}), {}", p.gpus, p.gpus / 32,
                           p.dtype == DType::kBF16 ? "bf16" : "fp8");
    row.reference = p.seconds;
    row.source = "NVIDIA dgxc-benchmarking, nemo_megatron/README_175b.md";
    row.predicted = t.step_seconds;
    row.tolerance = kModelValidationTolerance;
    row.note = fmt::format("MFU {:.1f}%; compute {:.3g} s, exposed comm {:.3g} s, bubble {:.3g} s", 100 * t.mfu,
                           t.compute_seconds, t.exposed_comm_seconds, t.bubble_seconds);
    if (p.dtype != DType::kBF16) {
      row.enforced = false;
      row.note += "; not enforced: Transformer Engine's fp8 cast / transpose / amax kernels are not modelled";
    }
    rows->push_back(std::move(row));
  }
}

// The DeepSeek-V3 and Llama 3 rows are shown but not held to a tolerance until sustained compute and the measured
// collective figures are priced: their gap and where it lies are in docs/model-validation.md.
constexpr const char* kPendingPricing = "held once sustained compute and the measured collective figures are priced";

// MFU, the last device's compute by phase, and the busiest stage (compute + exposed communication): where the
// time goes when the stages differ.
std::string BreakdownNote(const ModelStepTimes& t) {
  const auto& phase = t.compute_by_phase;
  std::string note = fmt::format(
      "MFU {:.1f}%; last device: compute {:.3g} s (forward {:.3g}, backward {:.3g}, recompute {:.3g}, head {:.3g}, "
      "optimizer {:.3g}), exposed comm {:.3g} s, bubble {:.3g} s",
      100 * t.mfu, t.compute_seconds, phase.at("forward"), phase.at("backward"), phase.at("recompute"),
      phase.at("head"), phase.at("optimizer"), t.exposed_comm_seconds, t.bubble_seconds);
  const ModelStageTimes* busiest = nullptr;
  for (const ModelStageTimes& s : t.stages)
    if (busiest == nullptr || s.compute_seconds + s.exposed_comm_seconds >
                                  busiest->compute_seconds + busiest->exposed_comm_seconds)
      busiest = &s;
  if (busiest != nullptr && t.stages.size() > 1) {
    const auto& k = busiest->exposed_by_kind;
    note += fmt::format("; busiest stage {}: compute {:.3g} s, exposed comm {:.3g} s (tensor {:.3g}, expert {:.3g}, "
                        "data {:.3g}), pipeline wait {:.3g} s",
                        busiest->stage, busiest->compute_seconds, busiest->exposed_comm_seconds, k.at("tensor"),
                        k.at("expert"), k.at("data"), busiest->bubble_seconds);
  }
  return note;
}

// NVIDIA dgxc-benchmarking v25.05.04/05, deepseek_v3/pretraining (README.md, launch.sh; NeMo 25.04.01 container,
// NeMo commit 7a8f1cc7, scripts/performance/llm/pretrain_deepseek_v3.py, recipes/deepseek_v3.py): DeepSeek-V3
// with its MTP module (pretrain_recipe's use_mtp), bf16, seq 4096, micro-batch 1, global batch 8 x GPUs, TP 2 +
// SP, PP 8 (first stage 7 layers, last 6, as 64 // PP - 1 and - 2) or 16 (3, 2), EP 64 over the data x tensor
// ranks with expert tensor parallelism 1, VP 1, distributed optimizer, recompute of the MLA up projections only,
// token drop with capacity factor 1 padded to capacity, the shared expert overlapping the all_to_all.
void AddDeepSeekV3(std::vector<ModelValidationRow>* rows) {
  struct Published {
    int64_t gpus, pp, first, last;
    double seconds;
  };
  for (const Published& p : {Published{512, 8, 7, 6, 48.948}, Published{1024, 16, 3, 2, 52.04}}) {
    ModelConfig c = DeepSeekV3Model();
    c.global_batch = 8 * p.gpus;
    c.micro_batch = 1;
    c.mla.recompute_up_proj = true;
    const int64_t data = p.gpus / (2 * p.pp);
    c.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                  .pipeline_axes = {"pipe"}, .first_stage_layers = p.first, .last_stage_layers = p.last,
                  .expert_axes = {"data", "tensor"}};
    const Mesh mesh = MeshOn(fmt::format("dgx-h100:{}", p.gpus / 8), {{"pipe", p.pp}, {"data", data}, {"tensor", 2}});
    const ModelStepTimes t = PredictModelStep(ValidateModel(c, mesh));
    ModelValidationRow row;
    row.name = fmt::format("DeepSeek-V3 671B on {} H100 (TP 2 + SP, PP {} with first / last stage {} / {} layers, "
                           "EP 64 over DP {} x TP 2, MTP), bf16", p.gpus, p.pp, p.first, p.last, data);
    row.reference = p.seconds;
    row.source = "NVIDIA dgxc-benchmarking v25.05.05, deepseek_v3/pretraining/README.md";
    row.predicted = t.step_seconds;
    row.note = BreakdownNote(t);
    row.enforced = false;
    row.note += "; not enforced yet: " + std::string(kPendingPricing);
    rows->push_back(std::move(row));
  }
}

// Llama 3 405B (Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3: Table 4 and the pipeline
// improvements): 8192 H100, TP 8, CP 1, PP 16, DP 64, seq 8192, 16M tokens per step (2048 sequences, 32 per data
// rank, micro-batch 1), bf16, no activation recompute, an interleaved schedule whose first chunk holds only the
// embedding and last chunk only the loss (126 layers + 2 over 16 stages x 8 chunks of one), asynchronous p2p.
// The paper gives 430 TFLOPS per GPU, not the step: the measured step is this model's FLOPs (Megatron /
// Korthikanti's count, attention over all keys) / (8192 x 430e12).
void AddLlama3(std::vector<ModelValidationRow>* rows) {
  ModelConfig c = LlamaModel(16384, 126, 128, 8, 53248, 8192);
  c.name = "llama3-405b";
  c.vocab = 128256;
  c.global_batch = 2048;
  c.micro_batch = 1;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .pipeline_axes = {"pipe"}, .schedule = PipelineSchedule::kInterleaved1F1B, .virtual_stages = 8,
                .embedding_in_split = true, .loss_in_split = true};
  const ValidatedModel model = ValidateModel(c, MeshOn("dgx-h100:1024", {{"data", 64}, {"pipe", 16}, {"tensor", 8}}));
  const ModelStepTimes t = PredictModelStep(model);
  ModelValidationRow row;
  row.name = "Llama 3 405B on 8192 H100 (TP 8 + SP, PP 16 x 8 virtual with the embedding and loss as layers, DP 64), "
             "bf16";
  row.reference = t.model_flops / (8192 * 430e12);
  row.source = "Llama 3 paper (Dubey et al. 2024), Table 4: 430 TFLOPS/GPU";
  row.predicted = t.step_seconds;
  row.note = BreakdownNote(t);
  row.enforced = false;
  row.note += "; not enforced yet: " + std::string(kPendingPricing);
  rows->push_back(std::move(row));
}

}  // namespace

std::string FormatModelValidationTable(const std::vector<ModelValidationRow>& rows) {
  std::string out = "| row | measured | predicted | gap | enforced (tolerance) | source | note |\n"
                    "|---|---|---|---|---|---|---|\n";
  for (const ModelValidationRow& r : rows) {
    out += fmt::format("| {} | {:.4g} s | {:.4g} s | {:+.1f}% | {} | {} | {} |\n", r.name, r.reference, r.predicted,
                       100 * r.gap(),
                       r.enforced ? fmt::format("yes ({:.0f}%), {}", 100 * r.tolerance, r.within() ? "within" : "FAILS")
                                  : "no",
                       r.source, r.note);
  }
  return out;
}

std::vector<ModelValidationRow> ComputeModelValidationRows() {
  std::vector<ModelValidationRow> rows;
  AddKorthikanti(&rows);
  AddNvidiaH100(&rows);
  AddDeepSeekV3(&rows);
  AddLlama3(&rows);
  return rows;
}

}  // namespace spmdsim
