// The predicted step never implies more than the device sustains (docs/model.md, "FLOPs and MFU"): every model
// workload of every shipped scenario, and the configurations `spmdsim plan` ranks for two of them, have MFU at most
// the device's sustained matrix rate and execute at least the model FLOPs; the report, the JSON and the plan say
// so when a prediction breaks it.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/accounting.h"
#include "model/plan.h"
#include "model/step.h"
#include "scenario/plan.h"
#include "scenario/report.h"
#include "scenario/run.h"
#include "scenario/scenario.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ScenarioPath(const std::string& name) { return std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/" + name; }

// Every scenarios/*.yaml, sorted.
std::vector<std::filesystem::path> ShippedScenarios() {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(ScenarioPath("")))
    if (entry.path().extension() == ".yaml") out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

void ExpectSane(const ModelStepTimes& t, const std::string& what) {
  EXPECT_GT(t.mfu, 0) << what;
  EXPECT_LE(t.mfu, t.sustained_fraction * (1 + 1e-9)) << what << ": MFU " << t.mfu;
  EXPECT_GE(t.hardware_flops, t.model_flops * (1 - 1e-9)) << what;
  // The one warning a sane step may carry: its device's matmul rate is borrowed (TPU v5p: v5e's) and the step
  // claims more than the best published run on the device.
  for (const std::string& warning : t.warnings) {
    EXPECT_FALSE(t.sustained_borrowed_from.empty()) << what << ": " << warning;
    EXPECT_THAT(warning, HasSubstr("is borrowed from")) << what;
  }
}

TEST(Sanity, NoShippedScenarioPredictsMoreThanTheDeviceSustains) {
  int models = 0;
  for (const std::filesystem::path& path : ShippedScenarios()) {
    const Scenario s = LoadScenario(path.string());
    const WorkloadContext context = ScenarioWorkloadContext(s, {.abstract = true, .num_threads = 2});
    for (const ScenarioWorkload& w : s.workloads) {
      if (!std::holds_alternative<ValidatedModel>(w.config)) continue;
      const WorkloadResult r = RunScenarioWorkload(s, w, context);
      ASSERT_TRUE(r.model_step.has_value() && r.model.has_value()) << path;
      ExpectSane(*r.model_step, path.filename().string() + " " + w.name);
      // The simulation runs at least what the accounting counts with recompute (the same convention).
      EXPECT_GE(r.model_step->hardware_flops, r.model->flops.hardware * (1 - 1e-9)) << path;
      ++models;
    }
  }
  EXPECT_GE(models, 11);  // the model workloads of the shipped scenarios
}

TEST(Sanity, NoConfigurationThePlanRanksPredictsMoreThanTheDeviceSustains) {
  for (const char* name : {"llama3-8b-dgx-h100-16.yaml", "llama3-8b-tpu-v5p-64.yaml"}) {
    const Scenario s = LoadScenario(ScenarioPath(name));
    PlanOptions options;
    options.top = 1000000;  // every evaluated configuration
    options.threads = 2;
    options.micro_batches = {1, 2};
    options.virtual_stages = {2, 4};
    const PlanResult plan = PlanModel(FirstModelWorkload(s), s.topology.topology, options);
    ASSERT_GT(plan.best.size(), 10u) << name;
    for (const PlanEntry& e : plan.best) ExpectSane(e.step, std::string(name) + ": " + e.Describe());
    // The scenario's own layout is among those searched: the plan finds it or something faster.
    const ModelStepTimes own = PredictModelStep(std::get<ValidatedModel>(s.workloads[0].config));
    EXPECT_LE(plan.best.front().step.step_seconds, own.step_seconds * (1 + 1e-12)) << name;
  }
}

// Before: MFU 103.9% (model FLOPs counted the whole causal score matrix, the flash-attention kernel was priced for
// half of it, and TPU matmuls ran at the datasheet peak). After: one convention, and v5e's measured XLA matmul rate
// (docs/cost-model.md), which v5p borrows: below it, but above the best MFU published for v5p (71.47%, MaxText),
// which the warning for a borrowed rate says (issue 34).
TEST(Sanity, TheV5pLlama3Step8192IsBelowTheBorrowedRateAndWarnsAboveThePublishedMfu) {
  const Scenario s = LoadScenario(ScenarioPath("llama3-8b-tpu-v5p-64.yaml"));
  const ValidatedModel& model = std::get<ValidatedModel>(s.workloads[0].config);
  const ModelConfig& c = model.config();
  const ModelStepTimes t = PredictModelStep(model);
  EXPECT_FALSE(t.sustained_measured);
  EXPECT_EQ(t.sustained_borrowed_from, "TPU v5 lite");
  EXPECT_NEAR(t.sustained_fraction, 181.823 / 197, 1e-12);
  EXPECT_LT(t.mfu, t.sustained_fraction);
  EXPECT_GT(t.mfu, 0.7147);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_THAT(t.warnings[0], HasSubstr("is above 71.5%, the best MFU MaxText publishes for TPU v5p (32B on v5p-128)"));
  EXPECT_THAT(t.warnings[0], HasSubstr("matmul rate is borrowed from TPU v5 lite (92.3% of the peak"));
  // The same step counted as before: the other half of the score matrix, forward and backward, in every layer.
  const double other_half = 3.0 * c.global_batch * c.seq * c.layers * AttentionCoreFlopsPerToken(c);
  const double mfu_before = t.mfu * (t.model_flops + other_half) / t.model_flops;
  EXPECT_NEAR(mfu_before / t.mfu, 1.125, 0.001);  // 12.5% more FLOPs counted at seq 8192
}

// A step whose simulated work is less than the model FLOPs (MoE layers that keep 5% of the routed tokens:
// capacity_factor 0.05, while the model counts every token's top_k experts) implies more than the device sustains:
// the report, the JSON and the plan say so.
TEST(Sanity, APredictionAboveTheSustainedRateIsFlagged) {
  const Scenario s = ParseScenario(R"y(topology: {preset: "dgx-h100:1"}
mesh: {axes: {data: 8}}
workloads:
  - kind: model
    d_model: 1024
    heads: 8
    layers: 4
    d_ff: 16384
    seq: 1024
    global_batch: 64
    moe: {experts: 8, top_k: 8, capacity_factor: 0.05, every: 1}
    parallel: {data_axes: [data]}
)y", "t.yaml");
  const WorkloadResult r = RunScenarioWorkload(s, s.workloads[0], ScenarioWorkloadContext(s, {.abstract = true}));
  ASSERT_TRUE(r.model_step.has_value());
  const ModelStepTimes& t = *r.model_step;
  EXPECT_GT(t.mfu, t.sustained_fraction);
  EXPECT_LT(t.hardware_flops, t.model_flops);
  ASSERT_EQ(t.warnings.size(), 1u);
  // The H100's matmul rate held at its 700 W power cap (DeviceComputeSpec::sustained_matmul_fraction).
  EXPECT_THAT(t.warnings[0], HasSubstr("is above the 71.6% of the peak that NVIDIA H100 80GB HBM3 sustains (its "
                                       "documented matmul rate): the predicted step is faster than the device can run "
                                       "it"));
  EXPECT_THAT(HumanReport(s, r), HasSubstr("WARNING: MFU "));
  EXPECT_THAT(HumanReport(s, r),
              HasSubstr("compute at the device's documented sustained matmul rate, 71.6% of the peak"));
  const nlohmann::json j = WorkloadJson(r);
  EXPECT_EQ(j["model_step"]["warnings"].size(), 1u);
  EXPECT_NEAR(j["model_step"]["sustained_fraction"].get<double>(), 708.5 / 989, 1e-12);
  PlanOptions options;
  options.top = 3;
  options.threads = 2;
  const PlanResult plan = PlanModel(std::get<ValidatedModel>(s.workloads[0].config).config(), s.topology.topology,
                                    options);
  ASSERT_FALSE(plan.best.empty());
  EXPECT_THAT(PlanReport(plan, std::get<ValidatedModel>(s.workloads[0].config).config()),
              HasSubstr("WARNING (rank 1): MFU"));
  EXPECT_FALSE(PlanJson(plan)["best"][0]["warnings"].empty());
}

TEST(Sanity, TheReportStatesTheConventionAndTheRateTpusArePricedAt) {
  // v5p: v5e's measured matmul rate, borrowed, and the warning above v5p's best published MFU (issue 34).
  const Scenario s = LoadScenario(ScenarioPath("llama3-8b-tpu-v5p-64.yaml"));
  const WorkloadResult r = RunScenarioWorkload(s, s.workloads[0], ScenarioWorkloadContext(s, {.abstract = true}));
  const std::string report = HumanReport(s, r);
  EXPECT_THAT(report, HasSubstr("causal attention counted as half, as MaxText and Megatron-LM count it"));
  EXPECT_THAT(report, HasSubstr("compute at 92.3% of the peak, TPU v5 lite's measured matmul rate (borrowed: none is "
                                "published for this device, the prediction may be fast)"));
  EXPECT_THAT(report, HasSubstr("WARNING: MFU 85.3% is above 71.5%"));
  EXPECT_EQ(WorkloadJson(r)["model_step"]["sustained_borrowed_from"], "TPU v5 lite");
  EXPECT_FALSE(WorkloadJson(r)["model_step"]["sustained_measured"].get<bool>());
  // v4: no measured rate documented; the report says plainly that compute runs at the datasheet peak.
  const Scenario v4 = ParseScenario(R"y(topology: {preset: "tpu-v4:2x2x2"}
mesh: {axes: {data: 8}}
workloads:
  - {kind: model, d_model: 1024, heads: 8, layers: 4, d_ff: 4096, seq: 1024, global_batch: 16,
     parallel: {data_axes: [data]}}
)y", "v4.yaml");
  const WorkloadResult r4 = RunScenarioWorkload(v4, v4.workloads[0], ScenarioWorkloadContext(v4, {.abstract = true}));
  EXPECT_THAT(HumanReport(v4, r4), HasSubstr("compute at 100.0% of the datasheet peak (no measured matmul rate is "
                                             "documented for this device: the prediction is an upper bound)"));
}

TEST(ShortStepName, KeepsTheFunctionAndTheLastScopesOfALongOpName) {
  const std::string name =
      "jit(step)/transpose(jvp())/while/body/closed_call/checkpoint/rematted_computation/bsd,dnh->bsnh";
  EXPECT_EQ(ShortStepName(name), "jit(step)/.../checkpoint/rematted_computation/bsd,dnh->bsnh");
  EXPECT_LE(ShortStepName(name).size(), 64u);
  EXPECT_EQ(ShortStepName(name, 28), "jit(step)/.../bsd,dnh->bsnh");
  EXPECT_EQ(ShortStepName("fwd/h"), "fwd/h");  // short names stay as they are
  EXPECT_EQ(ShortStepName(std::string(100, 'x'), 20), std::string(17, 'x') + "...");
}

}  // namespace
}  // namespace spmdsim
