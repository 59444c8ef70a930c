#include "model/validation.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "model/accounting.h"
#include "model/calibration.h"
#include "model/step.h"
#include "model/validation_band.h"

namespace spmdsim {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

Mesh MeshOn(const std::string& topology, const std::vector<std::pair<std::string, int64_t>>& axes) {
  return MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse(topology)), axes);
}

// One published run as the model predicts it.
struct ValidationCase {
  std::string name;
  std::string source;
  double reference = 0;
  ValidatedModel model;
  ModelStepOptions options;
};

std::string StepNote(const ModelStepTimes& t) {
  return fmt::format("MFU {:.1f}%; compute {:.3g} s, exposed comm {:.3g} s, bubble {:.3g} s", 100 * t.mfu,
                     t.compute_seconds, t.exposed_comm_seconds, t.bubble_seconds);
}

// Korthikanti et al. 2022, Table 5: fp16, dropout, no flash attention (2022), TP 8 in a DGX A100, PP over
// nodes; full recompute without SP, or SP + selective recompute. Megatron-LM of 2022 (the megatron stack's
// kernels without Transformer Engine's fp8; DP 1 so its gradient dtype does not enter) with blocking pipeline
// transfers.
struct KorthikantiRun {
  const char* name;
  int64_t h, layers, heads, d_ff, pp, v, gpus, global_batch, micro_batch;
  double full, selective;
};
constexpr KorthikantiRun kKorthikanti[] = {
    {"22B", 6144, 48, 64, 4 * 6144, 1, 1, 8, 4, 4, 1.42, 1.10},
    {"175B", 12288, 96, 96, 4 * 12288, 8, 3, 64, 64, 1, 18.13, 13.75},
    {"530B", 20480, 105, 128, 81920, 35, 3, 280, 280, 1, 49.05, 37.83},
    {"1T", 25600, 128, 160, 102400, 64, 1, 512, 512, 1, 94.42, 71.49},
};

ValidationCase KorthikantiCase(const KorthikantiRun& p, bool selective) {
  ModelConfig c = GptModel(p.h, p.layers, p.heads, p.d_ff);
  c.name = p.name;
  c.dtype = DType::kF16;
  c.dropout = true;
  c.flash_attention = false;
  c.stack = SoftwareStack::kMegatron;
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
  ValidationCase out{
      fmt::format("GPT {} on {} A100 (TP 8, PP {}{}), {}", p.name, p.gpus, p.pp,
                  p.v > 1 ? fmt::format(" x {} virtual", p.v) : "",
                  selective ? "SP + selective recompute" : "full recompute"),
      "Korthikanti et al. 2022, Table 5", selective ? p.selective : p.full,
      ValidateModel(c, MeshOn(fmt::format("dgx-a100:{}", p.gpus / 8), axes)), {}};
  // Megatron-LM of 2022: blocking pipeline transfers (docs/model.md, "Blocking pipeline transfers").
  out.options.blocking_p2p = true;
  return out;
}

// NVIDIA dgxc-benchmarking v25.02 (NeMo 24.12), NeMo Megatron GPT-3 175B as its launch scripts run it
// (nemo_megatron/gpt3_175b_hydra.yaml and configure.sh at that release): TP 4, PP 8 with
// virtual_pipeline_model_parallel_size 6 (the README's table header says VP 12; the configuration that ran says
// 6), micro-batch 1, global batch 2 x GPUs, SP, hidden and attention dropout 0.1, Transformer Engine's cuDNN
// fused attention (NVTE_FUSED_ATTN=1), the distributed optimizer (ZeRO-1) with overlapped gradient reduce-scatter
// and weight all-gather in bf16 (grad_sync_dtype: bf16; fp8 runs keep fp8 weights: fp8_params), no recompute,
// NVLink SHARP off (NCCL_NVLS_ENABLE=0). The stack is Megatron-Core with Transformer Engine.
struct NvidiaRun {
  int64_t gpus;
  DType dtype;
  double seconds;
};
constexpr NvidiaRun kNvidiaH100[] = {{128, DType::kBF16, 8.309},       {256, DType::kBF16, 8.408},
                                     {512, DType::kBF16, 8.42},        {1024, DType::kBF16, 8.453},
                                     {2048, DType::kBF16, 8.49},       {128, DType::kF8E4M3FN, 5.626},
                                     {2048, DType::kF8E4M3FN, 5.96}};

ValidationCase NvidiaCase(const NvidiaRun& p) {
  ModelConfig c = GptModel(12288, 96, 96, 4 * 12288);
  c.name = "gpt3-175b";
  c.dtype = p.dtype;
  c.dropout = true;
  c.flash_attention = true;
  c.stack = SoftwareStack::kMegatron;
  c.global_batch = 2 * p.gpus;
  c.micro_batch = 1;
  c.parallel.data_axes = {"data"};
  c.parallel.zero_stage = 1;
  c.parallel.tensor_axes = {"tensor"};
  c.parallel.sequence_parallel = true;
  c.parallel.pipeline_axes = {"pipe"};
  c.parallel.schedule = PipelineSchedule::kInterleaved1F1B;
  c.parallel.virtual_stages = 6;
  const Mesh mesh = MeshOn(fmt::format("dgx-h100:{}", p.gpus / 8), {{"data", p.gpus / 32}, {"pipe", 8}, {"tensor", 4}});
  ValidationCase out{fmt::format("GPT-3 175B on {} H100 (TP 4, PP 8 x 6 virtual, DP {}), {}", p.gpus, p.gpus / 32,
                                 p.dtype == DType::kBF16 ? "bf16" : "fp8"),
                     "NVIDIA dgxc-benchmarking, nemo_megatron/README_175b.md", p.seconds, ValidateModel(c, mesh), {}};
  out.options.collectives.allow_nvls = false;  // NCCL_NVLS_ENABLE=0 in the recipe's configure.sh
  return out;
}

// One row: a measurement, the predicted step and its note; every row builder below fills it through this.
ModelValidationRow RowFrom(std::string name, std::string source, double reference, const ValidatedModel& model,
                           const ModelStepTimes& t, std::string note, bool enforced) {
  ModelValidationRow row;
  const ModelAccounting accounting = AccountModel(model);
  row.peak_bytes = accounting.peak_bytes;
  row.peak_stage = accounting.peak_stage;
  row.capacity_bytes = accounting.capacity_bytes;
  row.name = std::move(name);
  row.validation_class = ClassifyModelRun(model).Key();
  row.reference = reference;
  row.source = std::move(source);
  row.predicted = t.step_seconds;
  row.note = std::move(note);
  row.enforced = enforced;
  return row;
}

ModelValidationRow RowOf(const ValidationCase& v) {
  const ModelStepTimes t = PredictModelStep(v.model, v.options);
  return RowFrom(v.name, v.source, v.reference, v.model, t, StepNote(t), /*enforced=*/true);
}

void AddKorthikanti(std::vector<ModelValidationRow>* rows) {
  for (const KorthikantiRun& p : kKorthikanti)
    for (bool selective : {false, true}) rows->push_back(RowOf(KorthikantiCase(p, selective)));
}

void AddNvidiaH100(std::vector<ModelValidationRow>* rows) {
  for (const NvidiaRun& p : kNvidiaH100) rows->push_back(RowOf(NvidiaCase(p)));
}

// Calibration held out: fit `figure` alone on the first case, predict the rest.
void AddHoldout(const std::string& family, const std::vector<ValidationCase>& cases,
                std::vector<CalibrationHoldoutRow>* rows, const std::string& figure = "compute_scale") {
  const CalibrationProfile profile =
      FitCalibration({{cases.front().name, cases.front().model, cases.front().options, cases.front().reference}},
                     {.figures = {figure}});
  for (size_t i = 1; i < cases.size(); ++i) {
    const ValidationCase& v = cases[i];
    CalibrationHoldoutRow row;
    row.family = family;
    row.fitted_on = cases.front().name;
    row.name = v.name;
    row.reference = v.reference;
    row.uncalibrated = PredictModelStep(v.model, v.options).step_seconds;
    row.calibrated = PredictModelStep(v.model, ApplyCalibration(v.options, profile, v.model)).step_seconds;
    row.figure = figure;
    row.scale = CalibrationFigureValue(profile.figures, figure);
    rows->push_back(std::move(row));
  }
}

// Why the DeepSeek-V3 rows are shown but not held to the tolerance (docs/model-validation.md): the model is
// faster than both by more than 10%, and the mechanism missing is not one of the documented machine or stack
// figures.
constexpr const char* kDeepSeekMissing =
    "not enforced: the busiest stage is its compute plus the exposed expert all_to_all (NCCL pairwise over 8 "
    "nodes at one NIC per GPU); the ~25% the model misses is not identified without a profile of the run "
    "(candidates: NCCL all_to_all with 64 peers below the single-NIC rate at ~2 MB per peer, MoE permutation and "
    "grouped-GEMM kernels below the dense figures, token imbalance past capacity padding)";
constexpr const char* kLlamaNote =
    "the measurement is derived (430 TFLOPS/GPU over this model's FLOP count, not a timed step; the paper does not "
    "give its FLOP convention: with the causal count of the attention core the step would be 3.9% shorter); FSDP "
    "as the paper runs it (weights, gradients and optimizer states sharded over the 64 data ranks, the weights not "
    "resharded after the forward: an all-gather and a reduce-scatter per micro-batch, beside the compute); Meta's "
    "kernels priced as Megatron-Core's";

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
struct DeepSeekRun {
  int64_t gpus, pp, first, last;
  double seconds;
};
constexpr DeepSeekRun kDeepSeekV3[] = {{512, 8, 7, 6, 48.948}, {1024, 16, 3, 2, 52.04}};

ValidationCase DeepSeekV3Case(const DeepSeekRun& p) {
  ModelConfig c = DeepSeekV3Model();
  c.global_batch = 8 * p.gpus;
  c.micro_batch = 1;
  c.mla.recompute_up_proj = true;
  const int64_t data = p.gpus / (2 * p.pp);
  c.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .pipeline_axes = {"pipe"}, .first_stage_layers = p.first, .last_stage_layers = p.last,
                .expert_axes = {"data", "tensor"}};
  const Mesh mesh = MeshOn(fmt::format("dgx-h100:{}", p.gpus / 8), {{"pipe", p.pp}, {"data", data}, {"tensor", 2}});
  return {fmt::format("DeepSeek-V3 671B on {} H100 (TP 2 + SP, PP {} with first / last stage {} / {} layers, "
                      "EP 64 over DP {} x TP 2, MTP), bf16", p.gpus, p.pp, p.first, p.last, data),
          "NVIDIA dgxc-benchmarking v25.05.05, deepseek_v3/pretraining/README.md", p.seconds,
          ValidateModel(c, mesh), {}};
}

// A row with the breakdown of where its time goes (stages that differ) and a note on its configuration; a row
// not enforced says there what the model lacks.
ModelValidationRow BreakdownRowOf(const ValidationCase& v, const char* note, bool enforced) {
  const ModelStepTimes t = PredictModelStep(v.model, v.options);
  return RowFrom(v.name, v.source, v.reference, v.model, t, BreakdownNote(t) + "; " + note, enforced);
}

void AddDeepSeekV3(std::vector<ModelValidationRow>* rows) {
  for (const DeepSeekRun& p : kDeepSeekV3) rows->push_back(BreakdownRowOf(DeepSeekV3Case(p), kDeepSeekMissing, false));
}

// Llama 3 405B (Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3: Table 4 and the pipeline
// improvements): 8192 H100, TP 8, CP 1, PP 16, DP 64, seq 8192, 16M tokens per step (2048 sequences, 32 per data
// rank, micro-batch 1), bf16, no activation recompute, an interleaved schedule whose first chunk holds only the
// embedding and last chunk only the loss (126 layers + 2 over 16 stages x 8 chunks of one), asynchronous p2p.
// Section 3.3.2: FSDP shards the optimizer states and gradients, and the model shards are not resharded after the
// forward (no second all-gather in the backward): ZeRO-3 with reshard_after_forward false, PyTorch FSDP's
// SHARD_GRAD_OP.
// The paper gives 430 TFLOPS per GPU, not the step: the measured step is this model's FLOPs counted as Korthikanti
// et al. count them, the attention core over all keys (spmdsim's count, ModelFlops, halves it for the causal
// mask: the other half added back, forward and backward) / (8192 x 430e12).
double KorthikantiFlops(const ValidatedModel& model) {
  const ModelConfig& c = model.config();
  double cores = 0;
  for (int64_t l = 0; l < c.layers; ++l) cores += AttentionCoreFlopsPerToken(c, l);
  return AccountModel(model).flops.model + 3.0 * static_cast<double>(c.global_batch * c.seq) * cores;
}

ValidationCase Llama3Case() {
  ModelConfig c = LlamaModel(16384, 126, 128, 8, 53248, 8192);
  c.name = "llama3-405b";
  c.vocab = 128256;
  c.global_batch = 2048;
  c.micro_batch = 1;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 3, .reshard_after_forward = false,
                .tensor_axes = {"tensor"}, .sequence_parallel = true, .pipeline_axes = {"pipe"},
                .schedule = PipelineSchedule::kInterleaved1F1B, .virtual_stages = 8, .embedding_in_split = true,
                .loss_in_split = true};
  ValidationCase v{"Llama 3 405B on 8192 H100 (TP 8 + SP, PP 16 x 8 virtual with the embedding and loss as layers, "
                   "DP 64), bf16",
                   "Llama 3 paper (Dubey et al. 2024), Table 4: 430 TFLOPS/GPU", 0,
                   ValidateModel(c, MeshOn("dgx-h100:1024", {{"data", 64}, {"pipe", 16}, {"tensor", 8}})), {}};
  v.reference = KorthikantiFlops(v.model) / (8192 * 430e12);
  return v;
}

void AddLlama3(std::vector<ModelValidationRow>* rows) {
  rows->push_back(BreakdownRowOf(Llama3Case(), kLlamaNote, /*enforced=*/true));
}

// A row of the checks on runs the model was not built around: shown beside the validation table, not enforced.
ModelValidationRow UnseenRowOf(std::string name, std::string source, double reference, const ValidatedModel& model) {
  const ModelStepTimes t = PredictModelStep(model);
  return RowFrom(std::move(name), std::move(source), reference, model, t, StepNote(t), /*enforced=*/false);
}

// MosaicML llm-foundry, scripts/train/benchmarking/README.md, "H100 80GB BF16" (MPT on the MosaicML platform,
// 2023): GPT-style MPT models (MHA, GeLU MLP of 4h, LayerNorm, learned positions as the table's NumParams count
// them, tied embeddings, vocab 50368), Triton flash attention, amp_bf16 under Composer's FSDP (FULL_SHARD; its
// DEFAULT mixed precision: bf16 weights and gradient reduction), activation checkpointing as the table says. The
// measured step is the global batch's tokens over the table's throughput (tokens/s). DGX H100 stands in for the
// platform's H100 nodes.
struct FoundryRun {
  const char* size;
  int64_t d_model, layers, heads, seq, gpus, micro_batch, global_batch;
  bool checkpointing;
  double tokens_per_second;
};
constexpr FoundryRun kFoundryH100[] = {
    {"1B", 2048, 24, 16, 2048, 8, 14, 112, false, 363645},  {"3B", 2560, 32, 20, 2048, 64, 6, 1152, false, 1441663},
    {"7B", 4096, 32, 32, 2048, 8, 6, 48, false, 85144},      {"7B", 4096, 32, 32, 4096, 8, 16, 256, true, 68893},
    {"13B", 5120, 40, 40, 2048, 8, 2, 16, false, 38336},     {"13B", 5120, 40, 40, 2048, 64, 2, 128, false, 307209},
    {"30B", 7168, 48, 64, 2048, 8, 3, 504, true, 16022},     {"70B", 8192, 80, 64, 2048, 64, 8, 2048, true, 66523},
};

ModelValidationRow FoundryRow(const FoundryRun& p) {
  ModelConfig c = GptModel(p.d_model, p.layers, p.heads, 4 * p.d_model);
  c.name = fmt::format("mpt-{}", p.size);
  c.vocab = 50368;
  c.seq = p.seq;
  c.flash_attention = true;
  c.stack = SoftwareStack::kPytorchFsdp;
  c.global_batch = p.global_batch;
  c.micro_batch = p.micro_batch;
  c.recompute = p.checkpointing ? Recompute::kFull : Recompute::kNone;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 3};
  const ValidatedModel model = ValidateModel(c, MeshOn(fmt::format("dgx-h100:{}", p.gpus / 8), {{"data", p.gpus}}));
  return UnseenRowOf(fmt::format("MPT {} on {} H100 (FSDP, seq {}, micro-batch {}{})", p.size, p.gpus, p.seq,
                                 p.micro_batch, p.checkpointing ? ", activation checkpointing" : ""),
                     "MosaicML llm-foundry, scripts/train/benchmarking/README.md",
                     static_cast<double>(p.global_batch * p.seq) / p.tokens_per_second, model);
}

// NVIDIA dgxc-benchmarking (llama3.1/README_8b.md, README_70b.md: NeMo 24.09 on DGX H100): Llama 3.1 8B with
// TP 1, PP 1, CP 2, micro-batch 1, global batch 16 x GPUs; 70B with TP 4, PP 4 x 5 virtual, CP 2, micro-batch 1,
// global batch 2 x GPUs; seq 8192, bf16 or fp8, the Megatron-Core stack (SP with TP, distributed optimizer).
struct NemoLlamaRun {
  const char* size;
  int64_t gpus;
  DType dtype;
  double seconds;
};
constexpr NemoLlamaRun kNemoLlama[] = {
    {"8B", 8, DType::kBF16, 12.91},        {"8B", 128, DType::kBF16, 13.10},
    {"8B", 8, DType::kF8E4M3FN, 9.67},     {"8B", 128, DType::kF8E4M3FN, 9.82},
    {"70B", 64, DType::kBF16, 14.72},      {"70B", 2048, DType::kBF16, 14.98},
    {"70B", 64, DType::kF8E4M3FN, 11.01},  {"70B", 2048, DType::kF8E4M3FN, 11.39},
};

ModelValidationRow NemoLlamaRow(const NemoLlamaRun& p) {
  const bool big = std::string_view(p.size) == "70B";
  ModelConfig c = big ? LlamaModel(8192, 80, 64, 8, 28672, 8192) : LlamaModel(4096, 32, 32, 8, 14336, 8192);
  c.name = fmt::format("llama3.1-{}", p.size);
  c.vocab = 128256;
  c.dtype = p.dtype;
  c.flash_attention = true;
  c.stack = SoftwareStack::kMegatron;
  c.micro_batch = 1;
  c.global_batch = (big ? 2 : 16) * p.gpus;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 1, .context_axes = {"context"}};
  std::vector<std::pair<std::string, int64_t>> axes = {{"data", p.gpus / (big ? 32 : 2)}, {"context", 2}};
  if (big) {
    c.parallel.tensor_axes = {"tensor"};
    c.parallel.sequence_parallel = true;
    c.parallel.pipeline_axes = {"pipe"};
    c.parallel.schedule = PipelineSchedule::kInterleaved1F1B;
    c.parallel.virtual_stages = 5;
    axes = {{"data", p.gpus / 32}, {"pipe", 4}, {"context", 2}, {"tensor", 4}};
  }
  const ValidatedModel model = ValidateModel(c, MeshOn(fmt::format("dgx-h100:{}", p.gpus / 8), axes));
  return UnseenRowOf(fmt::format("Llama 3.1 {} on {} H100 ({}CP 2, DP {}), {}", p.size, p.gpus,
                                 big ? "TP 4, PP 4 x 5 virtual, " : "", p.gpus / (big ? 32 : 2),
                                 p.dtype == DType::kBF16 ? "bf16" : "fp8"),
                     fmt::format("NVIDIA dgxc-benchmarking, llama3.1/README_{}.md", big ? "70b" : "8b"), p.seconds,
                     model);
}

// MaxText's published TPU tables, with the decoder and scripts MaxText had when they were measured (its default
// decoder changed in February 2024): base.yml of late 2023 (base_emb_dim 2560, 8 heads of head_dim 256, MLP 8192,
// 16 layers, vocab 32768, mlp_activations relu, logits_via_embedding (tied), attention and MLP in parallel off one
// RMSNorm, rotary) scaled by global_parameter_scale as its get_individual_scales does (16B: 5120 wide, 32 heads,
// MLP 32768, 32 layers), seq 2048, flash attention, FSDP over the slice (ici_fsdp_parallelism -1) with tensor
// parallelism where the script sets ici_tensor_parallelism, data parallelism over the slices (dcn_data_parallelism).
//   v5e (configs/v5e/README.md, first published 2023-10-27, and its {16b,32b,64b,128b}.sh): per-device batch
//   6 / 4 / 2 / 1, tensor 1 / 1 / 1 / 16, remat full, 1-32 v5e-256 slices.
//   v5p (configs/v5p/README.md of 2023-12-15 and its {32b,64b,128b,256b}.sh of that day): per-device batch
//   8 / 4 / 2 / 2, tensor 4 / 4 / 8 / 8, remat "minimal" (Recompute::kMinimal: matmul outputs saved), 1 or 2
//   slices. Not here: 512B and 1024B (tensor 16 on an 8x8x8 slice, which JAX's device-mesh rule places only with
//   allow_split_physical_axes, a later option).
// ReLU is priced as the model's non-gated GELU (the same two matmuls; the activation itself is elementwise), the
// parallel block as two sequential blocks (the second norm and the second tensor-parallel reduction are the
// difference, docs/model-validation.md).
// The measured step is MaxText's per-device FLOPs of the step as its calculate_training_tflops counted them on
// the table's date (6 x every parameter x tokens + 12 x heads x layers x head_dim x seq^2 x batch: the attention
// halved for causality from 2023-11-08 on, so in the v5p tables and not in the v5e ones), over the reported
// TFLOP/s per chip.
struct MaxTextRun {
  const char* size;
  int64_t d_model, layers, heads, d_ff, per_device_batch;
  const char* topology;  // one slice
  const char* accelerator;
  int64_t chips, tensor;
  bool remat_full;
  bool causal_flops;
  int64_t slices;
  double tflops_per_chip;
};

// MaxText's get_individual_scales: the doublings of (embed, heads and MLP, layers) for a power-of-two scale.
struct MaxTextDims {
  int64_t d_model, layers, heads, d_ff;
};
MaxTextDims MaxText2023Dims(int scale_log2) {
  const int base = scale_log2 / 3, rem = scale_log2 % 3;
  const int heads = base + (rem > 0 ? 1 : 0), embed = base + (rem > 1 ? 1 : 0);
  return {int64_t{2560} << embed, int64_t{16} << base, int64_t{8} << heads, int64_t{8192} << heads};
}

std::vector<MaxTextRun> MaxTextRuns() {
  std::vector<MaxTextRun> runs;
  struct V5e {
    const char* size;
    int scale_log2;
    int64_t batch, tensor;
    double tflops[6];  // 1, 2, 4, 8, 16, 32 slices
  };
  constexpr V5e kV5e[] = {{"16B", 4, 6, 1, {120, 117, 117, 115, 111, 108}},
                          {"32B", 5, 4, 1, {132, 128, 126, 125, 123, 119}},
                          {"64B", 6, 2, 1, {118, 112, 110, 108, 105, 99}},
                          {"128B", 7, 1, 16, {110, 110, 108, 104, 100, 91}}};
  for (const V5e& r : kV5e) {
    const MaxTextDims d = MaxText2023Dims(r.scale_log2);
    for (int i = 0; i < 6; ++i)
      runs.push_back({r.size, d.d_model, d.layers, d.heads, d.d_ff, r.batch, "tpu-v5e:16x16", "v5e-256", 256,
                      r.tensor, true, false, int64_t{1} << i, r.tflops[i]});
  }
  struct V5p {
    const char* size;
    int scale_log2;
    int64_t batch;
    const char* topology;
    const char* accelerator;
    int64_t chips, tensor;
    bool remat_full;
    double tflops[2];  // 1, 2 slices
  };
  constexpr V5p kV5p[] = {{"32B", 5, 8, "tpu-v5p:4x4x4", "v5p-128", 64, 4, false, {328, 319}},
                          {"64B", 6, 4, "tpu-v5p:4x4x4", "v5p-128", 64, 4, false, {323, 309}},
                          {"128B", 7, 2, "tpu-v5p:4x4x8", "v5p-256", 128, 8, false, {315, 305}},
                          {"128B", 7, 2, "tpu-v5p:4x8x8", "v5p-512", 256, 8, false, {316, 274}},
                          {"256B", 8, 2, "tpu-v5p:8x8x8", "v5p-1024", 512, 8, false, {308, 289}}};
  for (const V5p& r : kV5p) {
    const MaxTextDims d = MaxText2023Dims(r.scale_log2);
    for (int i = 0; i < 2; ++i)
      runs.push_back({r.size, d.d_model, d.layers, d.heads, d.d_ff, r.batch, r.topology, r.accelerator, r.chips,
                      r.tensor, r.remat_full, true, int64_t{1} << i, r.tflops[i]});
  }
  return runs;
}

ModelConfig MaxText2023Config(const MaxTextRun& p) {
  ModelConfig c = LlamaModel(p.d_model, p.layers, p.heads, p.heads, p.d_ff, 2048);
  c.name = fmt::format("maxtext-{}", p.size);
  c.vocab = 32768;
  c.head_dim = 256;
  c.activation = Activation::kGelu;
  c.tied_embeddings = true;
  c.flash_attention = true;
  c.stack = SoftwareStack::kMaxText;
  c.micro_batch = p.per_device_batch * p.tensor;  // the batch of one data (fsdp) rank: its tensor group's chips
  c.global_batch = p.per_device_batch * p.chips * p.slices;
  c.recompute = p.remat_full ? Recompute::kFull : Recompute::kMinimal;
  c.parallel = {.data_axes = {"data", "fsdp"}, .zero_stage = 3, .zero_axes = {"fsdp"}};
  if (p.tensor > 1) {
    // MaxText's logical rule ['activation_embed', 'tensor'] of 2023: the residual stream between the blocks is
    // split over the tensor axis, as Megatron's sequence parallelism splits it.
    c.parallel.tensor_axes = {"tensor"};
    c.parallel.sequence_parallel = true;
  }
  return c;
}

ModelValidationRow MaxTextRow(const MaxTextRun& p) {
  const ModelConfig c = MaxText2023Config(p);
  std::vector<std::pair<std::string, int64_t>> ici = {{"data", 1}, {"fsdp", p.chips / p.tensor}};
  std::vector<std::pair<std::string, int64_t>> dcn = {{"data", p.slices}, {"fsdp", 1}};
  if (p.tensor > 1) {
    ici.push_back({"tensor", p.tensor});
    dcn.push_back({"tensor", 1});
  }
  const ValidatedModel model = ValidateModel(
      c, MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse(p.topology, static_cast<int>(p.slices))), ici,
                        dcn));
  const double tokens = static_cast<double>(p.per_device_batch * c.seq);  // per chip
  const double attention = 12.0 * p.heads * p.layers * 256 * static_cast<double>(c.seq) * tokens;
  const double maxtext_flops =
      6 * AccountModel(model).params.total * tokens + (p.causal_flops ? attention / 2 : attention);
  return UnseenRowOf(fmt::format("MaxText {} on {} x {} (FSDP {}{}{}, batch {} per chip)", p.size, p.slices,
                                 p.accelerator, p.chips / p.tensor,
                                 p.tensor > 1 ? fmt::format(", TP {}", p.tensor) : "",
                                 p.slices > 1 ? fmt::format(", data {} over DCN", p.slices) : "", p.per_device_batch),
                     fmt::format("MaxText/configs/{}/README.md", std::string_view(p.accelerator).substr(0, 3)),
                     maxtext_flops / (p.tflops_per_chip * 1e12), model);
}

// The validation cases by family, for the mechanism ablation.
std::vector<std::pair<std::string, std::vector<ValidationCase>>> CaseFamilies() {
  std::vector<std::pair<std::string, std::vector<ValidationCase>>> families(5);
  families[0].first = "Korthikanti A100 (8 rows)";
  for (const KorthikantiRun& p : kKorthikanti)
    for (bool selective : {false, true}) families[0].second.push_back(KorthikantiCase(p, selective));
  families[1].first = "NeMo H100 bf16 (5 rows)";
  families[2].first = "NeMo H100 fp8 (2 rows)";
  for (const NvidiaRun& p : kNvidiaH100) families[p.dtype == DType::kBF16 ? 1 : 2].second.push_back(NvidiaCase(p));
  families[3].first = "DeepSeek-V3 H100 (2 rows)";
  for (const DeepSeekRun& p : kDeepSeekV3) families[3].second.push_back(DeepSeekV3Case(p));
  families[4].first = "Llama 3 405B H100 (1 row)";
  families[4].second.push_back(Llama3Case());
  return families;
}

}  // namespace

std::vector<LayerValidationRow> ComputeLayerValidationRows() {
  struct Published {
    const char* name;
    Recompute recompute;
    bool sequence_parallel;
    double forward_ms, backward_ms;
  };
  // Korthikanti et al. 2022, Table 4: one layer of the 22B model (the Table 5 configuration: TP 8 on a DGX A100,
  // micro-batch 4, seq 2048, fp16).
  const Published published[] = {
      {"no recompute", Recompute::kNone, false, 7.7, 11.9},
      {"sequence parallel", Recompute::kNone, true, 7.2, 11.8},
      {"full recompute", Recompute::kFull, false, 7.7, 19.5},
      {"selective recompute", Recompute::kSelective, false, 7.7, 13.2},
      {"selective recompute + sequence parallel", Recompute::kSelective, true, 7.2, 13.1},
  };
  std::vector<LayerValidationRow> rows;
  for (const Published& p : published) {
    ModelConfig c = GptModel(6144, 48, 64, 4 * 6144);
    c.name = "22B";
    c.dtype = DType::kF16;
    c.dropout = true;
    c.flash_attention = false;
    c.global_batch = 4;
    c.micro_batch = 4;
    c.recompute = p.recompute;
    c.parallel.tensor_axes = {"tensor"};
    c.parallel.sequence_parallel = p.sequence_parallel;
    const ModelLayerTimes t = PredictModelLayer(ValidateModel(c, MeshOn("dgx-a100:1", {{"tensor", 8}})));
    rows.push_back({fmt::format("GPT 22B layer on 8 A100 (TP 8), {}", p.name), p.forward_ms * 1e-3,
                    p.backward_ms * 1e-3, t.forward_seconds, t.backward_seconds});
  }
  return rows;
}

std::string FormatLayerValidationTable(const std::vector<LayerValidationRow>& rows) {
  std::string out =
      "| layer | measured forward | predicted | gap | measured backward | predicted | gap | measured total | "
      "predicted | gap |\n|---|---|---|---|---|---|---|---|---|---|\n";
  auto gap = [](double predicted, double reference) { return 100 * (predicted / reference - 1); };
  for (const LayerValidationRow& r : rows) {
    out += fmt::format("| {} | {:.1f} ms | {:.2f} ms | {:+.1f}% | {:.1f} ms | {:.2f} ms | {:+.1f}% | {:.1f} ms | "
                       "{:.2f} ms | {:+.1f}% |\n",
                       r.name, 1e3 * r.forward, 1e3 * r.predicted_forward, gap(r.predicted_forward, r.forward),
                       1e3 * r.backward, 1e3 * r.predicted_backward, gap(r.predicted_backward, r.backward),
                       1e3 * (r.forward + r.backward), 1e3 * (r.predicted_forward + r.predicted_backward),
                       gap(r.predicted_forward + r.predicted_backward, r.forward + r.backward));
  }
  return out;
}

std::string OneDeviceLayerPredictions() {
  // scripts/measure-sustained-compute.py's `layer`: h 4096, 32 heads, d_ff 4h, seq 2048, micro-batch 4, bf16,
  // GeLU, LayerNorm, causal flash attention, no dropout, on one H100.
  std::string out = "| stack | forward | backward | total | measured |\n|---|---|---|---|---|\n";
  for (SoftwareStack stack : {SoftwareStack::kPytorchFsdp, SoftwareStack::kMegatron, SoftwareStack::kMaxText}) {
    ModelConfig c = GptModel(4096, 1, 32, 4 * 4096);
    c.name = "layer";
    c.position = PositionEmbedding::kRope;
    c.flash_attention = true;
    c.global_batch = 4;
    c.micro_batch = 4;
    c.stack = stack;
    const ModelLayerTimes t = PredictModelLayer(ValidateModel(c, MeshOn("gpu:1x1", {{"data", 1}})));
    out += fmt::format("| {} | {:.2f} ms | {:.2f} ms | {:.2f} ms | not yet run |\n", StackName(stack),
                       1e3 * t.forward_seconds, 1e3 * t.backward_seconds, 1e3 * t.total());
  }
  return out;
}

std::vector<CalibrationHoldoutRow> ComputeCalibrationHoldoutRows() {
  std::vector<CalibrationHoldoutRow> rows;
  std::vector<ValidationCase> korthikanti;
  korthikanti.push_back(KorthikantiCase(kKorthikanti[0], /*selective=*/true));  // fitted on: 22B
  korthikanti.push_back(KorthikantiCase(kKorthikanti[0], false));
  for (size_t i = 1; i < std::size(kKorthikanti); ++i)
    for (bool selective : {false, true}) korthikanti.push_back(KorthikantiCase(kKorthikanti[i], selective));
  AddHoldout("Korthikanti et al. 2022 (A100, fp16)", korthikanti, &rows);
  std::vector<ValidationCase> nvidia;
  for (const NvidiaRun& p : kNvidiaH100) nvidia.push_back(NvidiaCase(p));  // fitted on: 128 GPUs, bf16
  AddHoldout("NVIDIA NeMo GPT-3 175B (H100)", nvidia, &rows);
  std::vector<ValidationCase> deepseek;
  for (const DeepSeekRun& p : kDeepSeekV3) deepseek.push_back(DeepSeekV3Case(p));  // fitted on: 512 GPUs
  for (const char* figure : {"compute_scale", "comm_scale"})
    AddHoldout("DeepSeek-V3 671B (H100)", deepseek, &rows, figure);
  return rows;
}

std::string FormatCalibrationHoldoutTable(const std::vector<CalibrationHoldoutRow>& rows) {
  std::string out = "| family | fitted on | figure | held-out row | measured | uncalibrated | gap | calibrated | "
                    "gap |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const CalibrationHoldoutRow& r : rows) {
    out += fmt::format("| {} | {} | {} {:.3f} | {} | {:.4g} s | {:.4g} s | {:+.1f}% | {:.4g} s | {:+.1f}% |\n",
                       r.family, r.fitted_on, r.figure, r.scale, r.name, r.reference, r.uncalibrated,
                       100 * (r.uncalibrated / r.reference - 1), r.calibrated, 100 * (r.calibrated / r.reference - 1));
  }
  return out;
}

double MeanSignedGap(const std::vector<ModelValidationRow>& rows) {
  double sum = 0;
  for (const ModelValidationRow& r : rows) sum += r.gap();
  return rows.empty() ? 0 : sum / static_cast<double>(rows.size());
}

double EnforcedMeanSignedGap(const std::vector<ModelValidationRow>& rows) {
  std::vector<ModelValidationRow> enforced;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(enforced),
               [](const ModelValidationRow& r) { return r.enforced; });
  return MeanSignedGap(enforced);
}

std::string ModelValidationSummary(const std::vector<ModelValidationRow>& rows) {
  int within = 0, enforced = 0;
  double abs_sum = 0;
  const ModelValidationRow* worst = nullptr;
  for (const ModelValidationRow& r : rows) {
    within += std::fabs(r.gap()) <= kModelValidationTolerance;
    enforced += r.enforced;
    abs_sum += std::fabs(r.gap());
    if (worst == nullptr || std::fabs(r.gap()) > std::fabs(worst->gap())) worst = &r;
  }
  const std::string enforced_mean =
      enforced > 0 ? fmt::format(" (enforced rows {:+.1f}%)", 100 * EnforcedMeanSignedGap(rows)) : "";
  return fmt::format("{} rows: {} within {:.0f}% ({} enforced), mean signed gap {:+.1f}%{}, mean |gap| {:.1f}%, "
                     "worst {:+.1f}% ({})",
                     rows.size(), within, 100 * kModelValidationTolerance, enforced, 100 * MeanSignedGap(rows),
                     enforced_mean, 100 * abs_sum / static_cast<double>(std::max<size_t>(rows.size(), 1)),
                     worst != nullptr ? 100 * worst->gap() : 0.0, worst != nullptr ? worst->name : "");
}

namespace {

// GPT-3 175B (h 12288, 96 heads, seq 2048, micro-batch 1) on TP 8, fp16 with dropout and no flash attention as
// Korthikanti et al. ran it, under `recompute` with or without SP.
double Gpt3LayerActivations(Recompute recompute, bool sp) {
  ModelConfig c = GptModel(12288, 96, 96, 4 * 12288);
  c.dtype = DType::kF16;
  c.dropout = true;
  c.flash_attention = false;
  c.recompute = recompute;
  c.parallel.sequence_parallel = sp;
  return LayerActivationBytes(c, 1, 8, 1, false);
}

// The ZeRO paper's model (Figure 1: Psi = 7.5B, N_d = 64, K = 12): a GPT of about that size on 64 data ranks,
// its model states per device (parameters, gradients, optimizer) scaled to 7.5B parameters.
double ZeroModelStates(int zero_stage) {
  ModelConfig c = GptModel(4096, 36, 32, 4 * 4096);
  c.global_batch = 64;
  c.parallel = {.data_axes = {"data"}, .zero_stage = zero_stage};
  const ModelAccounting a = AccountModel(ValidateModel(c, MeshOn("dgx-a100:8", {{"data", 64}})));
  const DeviceMemory& m = a.stages[0].memory;
  return (m.parameters + m.gradients + m.optimizer) / a.params.total * 7.5e9;
}

}  // namespace

std::vector<MemoryValidationRow> ComputeMemoryValidationRows() {
  const double sbh = 2048.0 * 12288, as_h = 5.0 * 96 * 2048 / 12288, t = 8;
  const char* korthikanti = "Korthikanti et al. 2022, section 4 (Table 2)";
  const char* zero = "Rajbhandari et al. 2020 (ZeRO), Figure 1";
  return {
      {"GPT-3 175B layer activations, TP 8, no recompute: s b h (10 + 24 / t + 5 a s / (h t))", korthikanti,
       sbh * (10 + 24 / t + as_h / t), Gpt3LayerActivations(Recompute::kNone, false)},
      {"GPT-3 175B layer activations, TP 8 + SP, no recompute: s b h (34 + 5 a s / h) / t", korthikanti,
       sbh * (34 + as_h) / t, Gpt3LayerActivations(Recompute::kNone, true)},
      {"GPT-3 175B layer activations, TP 8 + SP, selective recompute: 34 s b h / t", korthikanti, sbh * 34 / t,
       Gpt3LayerActivations(Recompute::kSelective, true)},
      {"GPT-3 175B layer activations, TP 8, full recompute: 2 s b h", korthikanti, sbh * 2,
       Gpt3LayerActivations(Recompute::kFull, false)},
      {"7.5B model states per device, 64 data ranks, baseline: 120 GB", zero, 120e9, ZeroModelStates(0)},
      {"7.5B model states per device, 64 data ranks, ZeRO-1 (P_os): 31.4 GB", zero, 31.4e9, ZeroModelStates(1)},
      {"7.5B model states per device, 64 data ranks, ZeRO-2 (P_os+g): 16.6 GB", zero, 16.6e9, ZeroModelStates(2)},
      {"7.5B model states per device, 64 data ranks, ZeRO-3 (P_os+g+p): 1.9 GB", zero, 1.9e9, ZeroModelStates(3)},
  };
}

std::string FormatMemoryValidationTable(const std::vector<MemoryValidationRow>& rows) {
  std::string out = "| quantity | published | predicted | gap | source |\n|---|---|---|---|---|\n";
  for (const MemoryValidationRow& r : rows) {
    out += fmt::format("| {} | {:.4g} GB | {:.4g} GB | {:+.1f}% | {} |\n", r.name, r.reference / 1e9,
                       r.predicted / 1e9, 100 * r.gap(), r.source);
  }
  return out;
}

std::string FormatMemoryFitTable(const std::vector<ModelValidationRow>& rows) {
  std::string out = "| row | peak stage | predicted peak per device | device memory | fits |\n|---|---|---|---|---|\n";
  for (const ModelValidationRow& r : rows) {
    out += fmt::format("| {} | {} | {:.1f} GiB | {:.1f} GiB | {} |\n", r.name, r.peak_stage, r.peak_bytes / kGiB,
                       r.capacity_bytes / kGiB, r.fits() ? "yes" : "NO (reported RESOURCE_EXHAUSTED)");
  }
  return out;
}

std::string MemoryFitSummary(const std::vector<ModelValidationRow>& rows) {
  int fit = 0;
  const ModelValidationRow* fullest = nullptr;
  for (const ModelValidationRow& r : rows) {
    fit += r.fits();
    if (fullest == nullptr || r.peak_bytes / r.capacity_bytes > fullest->peak_bytes / fullest->capacity_bytes)
      fullest = &r;
  }
  return fmt::format("{} published runs: {} fit their GPUs' memory as predicted; the fullest, {}, at {:.1f} of {:.1f} "
                     "GiB ({:.0f}%)",
                     rows.size(), fit, fullest != nullptr ? fullest->name : "",
                     fullest != nullptr ? fullest->peak_bytes / kGiB : 0.0,
                     fullest != nullptr ? fullest->capacity_bytes / kGiB : 0.0,
                     fullest != nullptr ? 100 * fullest->peak_bytes / fullest->capacity_bytes : 0.0);
}

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

std::string MechanismAblationTable() {
  struct Setting {
    const char* name;
    void (*apply)(ModelStepOptions*);
  };
  const Setting settings[] = {
      {"every mechanism on (the prediction)", [](ModelStepOptions*) {}},
      {"burst clock (no sustained clock, no slowest-device pace)",
       [](ModelStepOptions* o) { o->clock = ClockRegime::kBurst; }},
      {"no slowest-device pace", [](ModelStepOptions* o) { o->mechanisms.slowest_device = false; }},
      {"no wave effect (communication takes no SMs)", [](ModelStepOptions* o) { o->comm_slowdown = 0; }},
      {"no host launch wait", [](ModelStepOptions* o) { o->mechanisms.host_launch = false; }},
      {"no fp8 casts", [](ModelStepOptions* o) { o->mechanisms.fp8_casts = false; }},
  };
  const auto families = CaseFamilies();
  std::string out = "| setting |";
  for (const auto& [name, cases] : families) out += " " + name + " |";
  out += "\n|---|";
  for (size_t i = 0; i < families.size(); ++i) out += "---|";
  out += "\n";
  for (const Setting& setting : settings) {
    out += fmt::format("| {} |", setting.name);
    for (const auto& [name, cases] : families) {
      double sum = 0;
      for (ValidationCase v : cases) {
        setting.apply(&v.options);
        sum += PredictModelStep(v.model, v.options).step_seconds / v.reference - 1;
      }
      out += fmt::format(" {:+.1f}% |", 100 * sum / static_cast<double>(cases.size()));
    }
    out += "\n";
  }
  return out;
}

std::vector<ModelValidationRow> ComputeUnseenCheckRows() {
  std::vector<ModelValidationRow> rows;
  for (const FoundryRun& p : kFoundryH100) rows.push_back(FoundryRow(p));
  for (const NemoLlamaRun& p : kNemoLlama) rows.push_back(NemoLlamaRow(p));
  for (const MaxTextRun& p : MaxTextRuns()) rows.push_back(MaxTextRow(p));
  return rows;
}

std::vector<ValidationBand> ComputeModelValidationBands() {
  std::vector<ValidationBandRow> band_rows;
  for (const auto& rows : {ComputeModelValidationRows(), ComputeUnseenCheckRows()})
    for (const ModelValidationRow& r : rows) band_rows.push_back({r.validation_class, r.gap(), r.enforced});
  return ComputeValidationBands(band_rows);
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
