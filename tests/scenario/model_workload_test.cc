// The `kind: model` workload in scenario files: its keys onto ModelConfig, its located errors, and the analytic
// report `spmdsim run` prints for it.
#include <string>
#include <variant>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "model/validation_band.h"
#include "scenario/report.h"
#include "scenario/run.h"
#include "scenario/scenario.h"
#include "tests/scenario/parse_error.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

const std::string kHeader = R"y(topology: {preset: "dgx-h100:2"}
mesh: {axes: {data: 2, pipe: 2, tensor: 4}}
workloads:
)y";

using ::spmdsim::testing_scenario::ErrorOf;

TEST(ModelWorkload, ParsesEveryKeyOntoTheConfig) {
  Scenario s = ParseScenario(kHeader + R"y(  - kind: model
    name: llama_gqa
    vocab: 32000
    d_model: 1024
    layers: 8
    heads: 16
    kv_heads: 4
    head_dim: 64
    d_ff: 2816
    activation: swiglu
    norm: rmsnorm
    position: rope
    tied_embeddings: true
    dropout: false
    flash_attention: true
    seq: 1024
    global_batch: 16
    micro_batch: 2
    dtype: float8_e4m3fn
    moe: {experts: 4, top_k: 1, capacity_factor: 1.5, d_ff: 1024, every: 2, router: sinkhorn}
    parallel: {data_axes: [data], zero_stage: 1, zero_axes: [data], tensor_axes: [tensor], sequence_parallel: true,
               pipeline_axes: [pipe], schedule: interleaved, virtual_stages: 2, expert_axes: [data]}
    recompute: selective
    stack: pytorch-fsdp
)y", "t.yaml");
  ASSERT_EQ(s.workloads.size(), 1u);
  const ModelConfig& c = std::get<ValidatedModel>(s.workloads[0].config).config();
  EXPECT_EQ(s.workloads[0].kind, WorkloadKind::kModel);
  EXPECT_EQ(c.name, "llama_gqa");
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.activation, Activation::kSwiglu);
  EXPECT_EQ(c.norm, Norm::kRmsNorm);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.dtype, DType::kF8E4M3FN);
  EXPECT_EQ(c.moe.experts, 4);
  EXPECT_EQ(c.moe.router, MoeRouter::kSinkhorn);
  EXPECT_DOUBLE_EQ(c.moe.capacity_factor, 1.5);
  EXPECT_EQ(c.parallel.zero_stage, 1);
  EXPECT_EQ(c.parallel.schedule, PipelineSchedule::kInterleaved1F1B);
  EXPECT_EQ(c.parallel.virtual_stages, 2);
  EXPECT_EQ(c.parallel.expert_axes, std::vector<std::string>{"data"});
  EXPECT_EQ(c.recompute, Recompute::kSelective);
  EXPECT_EQ(c.stack, SoftwareStack::kPytorchFsdp);
  EXPECT_EQ(c.parallel.zero_axes, std::vector<std::string>{"data"});
}

// The keys of the models people train now: MLA, shared experts, dense first layers, MTP, sliding windows,
// uneven stages, experts over the tensor axes; and what a written-back model (ModelScenarioYaml) reads as.
TEST(ModelWorkload, ParsesTheKeysOfMlaMoeMtpWindowsAndUnevenStages) {
  const std::string text = kHeader + R"y(  - kind: model
    name: deepseek_like
    d_model: 1024
    layers: 7
    heads: 16
    d_ff: 2048
    activation: swiglu
    norm: rmsnorm
    global_batch: 16
    mla: {q_lora_rank: 256, kv_lora_rank: 128, qk_head_dim: 64, qk_rope_head_dim: 32, v_head_dim: 64,
          recompute_up_proj: true}
    moe: {experts: 16, top_k: 4, d_ff: 512, first_dense: 1, shared_d_ff: 512, shared_expert_overlap: true}
    mtp_layers: 1
    attention_window: {window: 512, global_every: 2}
    parallel: {data_axes: [data], tensor_axes: [tensor], sequence_parallel: true, pipeline_axes: [pipe],
               first_stage_layers: 3, last_stage_layers: 4, expert_axes: [data, tensor]}
)y";
  Scenario s = ParseScenario(text, "t.yaml");
  const ValidatedModel& m = std::get<ValidatedModel>(s.workloads[0].config);
  const ModelConfig& c = m.config();
  EXPECT_EQ(c.mla.q_lora_rank, 256);
  EXPECT_EQ(c.mla.kv_lora_rank, 128);
  EXPECT_EQ(c.mla.qk_head_dim, 64);
  EXPECT_EQ(c.mla.qk_rope_head_dim, 32);
  EXPECT_EQ(c.mla.v_head_dim, 64);
  EXPECT_TRUE(c.mla.recompute_up_proj);
  EXPECT_EQ(c.moe.first_dense, 1);
  EXPECT_EQ(c.moe.shared_d_ff, 512);
  EXPECT_TRUE(c.moe.shared_expert_overlap);
  EXPECT_EQ(c.mtp_layers, 1);
  EXPECT_EQ(c.attention_window.window, 512);
  EXPECT_EQ(c.attention_window.global_every, 2);
  EXPECT_EQ(c.parallel.first_stage_layers, 3);
  EXPECT_EQ(c.parallel.last_stage_layers, 4);
  EXPECT_EQ(m.degrees().expert, 8);
  EXPECT_EQ(m.degrees().expert_tensor, 1);
  // Written back and read again: the same model.
  const Scenario back = ParseScenario(
      ModelScenarioYaml("back", "", "dgx-h100:2", {{"data", 2}, {"pipe", 2}, {"tensor", 4}}, c), "back.yaml");
  const ModelConfig& b = std::get<ValidatedModel>(back.workloads[0].config).config();
  EXPECT_EQ(b.mla.kv_lora_rank, 128);
  EXPECT_TRUE(b.mla.recompute_up_proj);
  EXPECT_EQ(b.moe.shared_d_ff, 512);
  EXPECT_EQ(b.moe.first_dense, 1);
  EXPECT_EQ(b.mtp_layers, 1);
  EXPECT_EQ(b.attention_window.global_every, 2);
  EXPECT_EQ(b.parallel.last_stage_layers, 4);
  EXPECT_EQ(b.parallel.expert_axes, c.parallel.expert_axes);
  ModelConfig llama = c;
  llama.mla = {};
  llama.moe = {};
  llama.mtp_layers = 0;
  llama.layers = 6;
  llama.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .pipeline_axes = {"pipe"},
                    .embedding_in_split = true, .loss_in_split = true};
  const Scenario accounted = ParseScenario(
      ModelScenarioYaml("back", "", "dgx-h100:2", {{"data", 2}, {"pipe", 2}, {"tensor", 4}}, llama), "back.yaml");
  const ModelConfig& a = std::get<ValidatedModel>(accounted.workloads[0].config).config();
  EXPECT_TRUE(a.parallel.embedding_in_split && a.parallel.loss_in_split);
  EXPECT_EQ(a.parallel.first_stage_layers, -1);
}

TEST(ModelWorkload, ErrorsNameFileLineAndField) {
  const std::string ok_parallel = "parallel: {data_axes: [data], tensor_axes: [tensor], pipeline_axes: [pipe]}";
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, heads: 6, d_model: 768, global_batch: 8, " + ok_parallel + "}\n"),
              HasSubstr("t.yaml:4:26: workloads[0].heads: model 'model': heads = 6 is not divisible by the "
                        "tensor-parallel degree 4"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, activation: relu}\n"),
              HasSubstr("t.yaml:4:31: workloads[0].activation:"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, parallel: {tensor_axes: [tensr]}}\n"),
              HasSubstr("did you mean 'tensor'"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, parallel: {schedule: zero_bubble}}\n"),
              HasSubstr("workloads[0].parallel.schedule"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, dtype: float32}\n"),
              HasSubstr("workloads[0].dtype: the compute dtype must be bfloat16"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, global_batch: 8, parallel: {data_axes: [data], tensor_axes: "
                                "[tensor]}}\n"),
              HasSubstr("mesh axes (pipe) have no role"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, moe: {top_k: 2}}\n"), HasSubstr("workloads[0].moe.experts"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, parallel: {fsdp: true, zero_stage: 1}}\n"),
              HasSubstr("fsdp: true is zero_stage 3"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, parallel: {zero_stage: 1, reshard_after_forward: false}}\n"),
              HasSubstr("reshard_after_forward: false applies to zero_stage 3 (fsdp: true) only; zero_stage is 1"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, stack: deepspeed}\n"),
              HasSubstr("workloads[0].stack"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, global_batch: 8, parallel: {data_axes: [data], zero_axes: [pipe], "
                                "tensor_axes: [tensor], pipeline_axes: [pipe]}}\n"),
              HasSubstr("zero axis 'pipe' must also be a data axis"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, mla: {q_lora_rank: 64}}\n"),
              HasSubstr("workloads[0].mla.kv_lora_rank"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, attention_window: {global_every: 2}}\n"),
              HasSubstr("workloads[0].attention_window.window"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, parallel: {first_stage_layers: -2}}\n"),
              HasSubstr("workloads[0].parallel.first_stage_layers"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, global_batch: 8, layers: 7, " +
                      "parallel: {data_axes: [data], tensor_axes: [tensor], pipeline_axes: [pipe], "
                      "first_stage_layers: 3, last_stage_layers: 3}}\n"),
              HasSubstr("t.yaml:4:44: workloads[0].layers: model 'model': layers = 7 minus first_stage_layers"));
}

// Before: every cross-field error at the workload's first line ("t.yaml:4:5: workloads[0]: model 'model': ...").
// After: at the line and column of the field at fault, named by its key path; a rule broken by a default (the key
// not written) at the deepest mapping written on the way.
TEST(ModelWorkload, CrossFieldErrorsPointAtTheFieldsOwnLine) {
  const std::string model = kHeader + R"y(  - kind: model
    d_model: 768
    heads: 12
    d_ff: 3072
    global_batch: 5
    parallel:
      data_axes: [data]
      tensor_axes: [tensor]
      pipeline_axes: [pipe]
)y";
  EXPECT_THAT(ErrorOf(model),
              HasSubstr("t.yaml:8:19: workloads[0].global_batch: model 'model': global_batch = 5 is not divisible by "
                        "micro_batch x data-parallel degree = 1 x 2"));
  std::string bad_ff = model;
  bad_ff.replace(bad_ff.find("d_ff: 3072"), 10, "d_ff: 3070")
      .replace(bad_ff.find("global_batch: 5"), 15, "global_batch: 8");
  EXPECT_THAT(ErrorOf(bad_ff),
              HasSubstr("t.yaml:7:11: workloads[0].d_ff: model 'model': d_ff = 3070 is not divisible"));
  std::string bad_axis = model;
  bad_axis.replace(bad_axis.find("global_batch: 5"), 15, "global_batch: 8")
      .replace(bad_axis.find("[pipe]"), 6, "[data]");
  EXPECT_THAT(ErrorOf(bad_axis), HasSubstr("t.yaml:12:22: workloads[0].parallel.pipeline_axes: model 'model': "
                                           "pipeline_axes: mesh axis 'data' already has another role"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, global_batch: 8, parallel: {data_axes: [data], context_axes: "
                                "[pipe], tensor_axes: [tensor]}, seq: 10}\n"),
              HasSubstr("workloads[0].seq: model 'model': seq = 10 is not divisible by 4"));
  // A rule broken by a default: heads = 16 (default) does not divide d_model 1000; the key is not written, so the
  // error sits at the deepest mapping written on the way, the workload's.
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, d_model: 1000, global_batch: 8, parallel: {data_axes: [data], "
                                "pipeline_axes: [pipe], tensor_axes: [tensor]}}\n"),
              HasSubstr("t.yaml:4:5: workloads[0]: model 'model': heads = 16 does not divide d_model = 1000"));
}

TEST(ModelWorkload, RunPrintsTheAnalyticAccountingAndTheSimulatedStep) {
  Scenario s = ParseScenario(kHeader + R"y(  - kind: model
    heads: 16
    d_model: 1024
    layers: 8
    global_batch: 16
    parallel: {data_axes: [data], tensor_axes: [tensor], sequence_parallel: true, pipeline_axes: [pipe]}
)y", "t.yaml");
  ScenarioRunOptions abstract;
  abstract.abstract = true;  // 3.9e13 FLOPs per step: too large to run with data
  std::vector<WorkloadResult> results = RunScenario(s, abstract);
  ASSERT_EQ(results.size(), 1u);
  std::string human = HumanReport(s, results[0]);
  EXPECT_THAT(human, HasSubstr("analytic accounting"));
  EXPECT_THAT(human, HasSubstr("training step (simulated, 2 device programs"));
  EXPECT_THAT(human, HasSubstr("communication by kind: data"));
  EXPECT_THAT(human, HasSubstr("parallel degrees: data 2, tensor 4, context 1, pipeline 2"));
  EXPECT_THAT(human, HasSubstr("pipeline bubble 0.125"));  // (p - 1) / m = 1 / 8
  EXPECT_THAT(human, HasSubstr(": fits"));
  EXPECT_GT(results[0].totals.predicted_seconds, 0);
  nlohmann::json j = JsonReport(s, results, false, 0, ExitCode::kOk);
  const nlohmann::json& step = j["workloads"][0]["model_step"];
  EXPECT_DOUBLE_EQ(step["step_seconds"].get<double>(), results[0].totals.predicted_seconds);
  EXPECT_GT(step["mfu"].get<double>(), 0);
  // The step's error band over the published runs of its class (docs/model.md, "Error bands").
  const ValidationBand band = FindValidationBand({"H100", "megatron", "TP/PP/CP"});
  EXPECT_THAT(human, HasSubstr(" per step (" + ValidationBandText(band) + "), "));
  const nlohmann::json& v = step["validation"];
  EXPECT_EQ(v["class"], "H100 x megatron x TP/PP/CP");
  EXPECT_EQ(v["rows"].get<int64_t>(), band.rows);
  EXPECT_EQ(v["enforced_rows"].get<int64_t>(), band.enforced_rows);
  EXPECT_DOUBLE_EQ(v["min_gap"].get<double>(), band.min_gap);
  EXPECT_DOUBLE_EQ(v["max_gap"].get<double>(), band.max_gap);
  EXPECT_DOUBLE_EQ(v["mean_gap"].get<double>(), band.mean_gap);
  EXPECT_EQ(v["source"], "docs/model-validation.md");
  EXPECT_EQ(v["text"], ValidationBandText(band));
  const nlohmann::json& m = j["workloads"][0]["model"];
  EXPECT_TRUE(m["analytic"].get<bool>());
  EXPECT_EQ(m["stages"].size(), 2u);
  EXPECT_EQ(m["degrees"]["micro_batches"].get<int64_t>(), 8);
  EXPECT_TRUE(m["fits"].get<bool>());
}

// A class no published run is of says so, and its gaps are null.
TEST(ModelWorkload, StepOfAClassWithoutPublishedRunsSaysItIsNotValidated) {
  Scenario s = ParseScenario(R"y(topology: {preset: "dgx-b200:1"}
mesh: {axes: {data: 8}}
workloads:
  - {kind: model, d_model: 1024, layers: 2, global_batch: 8, parallel: {data_axes: [data]}}
)y", "t.yaml");
  std::vector<WorkloadResult> results = RunScenario(s, {.abstract = true});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_THAT(HumanReport(s, results[0]),
              HasSubstr(" per step (not validated: no published run of class B200 x megatron x data-only), "));
  const nlohmann::json v = JsonReport(s, results, false, 0, ExitCode::kOk)["workloads"][0]["model_step"]["validation"];
  EXPECT_EQ(v["rows"].get<int64_t>(), 0);
  EXPECT_TRUE(v["min_gap"].is_null());
  EXPECT_TRUE(v["max_gap"].is_null());
  EXPECT_TRUE(v["mean_gap"].is_null());
}

TEST(ModelWorkload, SmallModelRunsWithDataAndPrintsItsCheck) {
  Scenario s = ParseScenario(kHeader + R"y(  - kind: model
    vocab: 64
    d_model: 32
    layers: 2
    heads: 4
    d_ff: 64
    seq: 8
    global_batch: 4
    seed: 5
    rtol: 1e-3
    atol: 1e-5
    parallel: {data_axes: [data], tensor_axes: [tensor], sequence_parallel: true, pipeline_axes: [pipe]}
)y", "t.yaml");
  const auto& c = std::get<ValidatedModel>(s.workloads[0].config).config();
  EXPECT_EQ(c.seed, 5u);
  EXPECT_DOUBLE_EQ(c.rtol, 1e-3);
  EXPECT_DOUBLE_EQ(c.atol, 1e-5);
  std::vector<WorkloadResult> results = RunScenario(s, {});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].check.performed);
  EXPECT_TRUE(results[0].check.passed);
  const std::string human = HumanReport(s, results[0]);
  EXPECT_THAT(human, HasSubstr("check: PASSED"));
  EXPECT_THAT(human, HasSubstr("weight gradients vs the same model on one device"));
  EXPECT_THAT(human, HasSubstr("training step (simulated"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, check: 3}\n"), HasSubstr("workloads[0].check"));
}

TEST(ModelWorkload, ReportsResourceExhaustedWhenItDoesNotFit) {
  Scenario s = ParseScenario(R"y(topology: {preset: "dgx-h100:1"}
mesh: {axes: {data: 8}}
workloads:
  - {kind: model, d_model: 12288, heads: 96, layers: 96, d_ff: 49152, global_batch: 8,
     parallel: {data_axes: [data]}}
)y", "t.yaml");
  ScenarioRunOptions abstract;
  abstract.abstract = true;
  std::vector<WorkloadResult> results = RunScenario(s, abstract);
  EXPECT_THAT(HumanReport(s, results[0]), HasSubstr("RESOURCE_EXHAUSTED"));
}

// The 2022 Megatron-DeepSpeed stack and blocking pipeline transfers asked for in a file; the report says which
// stack priced the step and why.
TEST(ModelWorkload, PipelineTransfersAndTheStackAreKeysAndTheReportNamesTheStack) {
  const std::string model = R"y(  - {kind: model, d_model: 1024, heads: 16, layers: 8, d_ff: 4096, global_batch: 8,
     parallel: {data_axes: [data], tensor_axes: [tensor], pipeline_axes: [pipe], pipeline_transfers: blocking},
     stack: megatron-deepspeed-2022}
)y";
  Scenario s = ParseScenario(kHeader + model, "t.yaml");
  const ModelConfig& c = std::get<ValidatedModel>(s.workloads[0].config).config();
  EXPECT_EQ(c.parallel.pipeline_transfers, PipelineTransfers::kBlocking);
  EXPECT_EQ(c.stack, SoftwareStack::kMegatronDeepSpeed2022);
  EXPECT_THAT(ModelScenarioYaml("back", "", "dgx-h100:2", {{"data", 2}, {"pipe", 2}, {"tensor", 4}}, c),
              HasSubstr("pipeline_transfers: blocking"));
  EXPECT_THAT(ErrorOf(kHeader + "  - {kind: model, parallel: {pipeline_transfers: async}}\n"),
              HasSubstr("workloads[0].parallel.pipeline_transfers"));
  ScenarioRunOptions abstract;
  abstract.abstract = true;
  std::vector<WorkloadResult> results = RunScenario(s, abstract);
  EXPECT_THAT(HumanReport(s, results[0]),
              HasSubstr("software stack: megatron-deepspeed-2022 (set by the model's stack:)"));
  EXPECT_THAT(WorkloadJson(results[0]).dump(), HasSubstr("\"stack\":\"megatron-deepspeed-2022\""));
}

}  // namespace
}  // namespace spmdsim
