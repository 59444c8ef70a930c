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
  return rows;
}

}  // namespace spmdsim
