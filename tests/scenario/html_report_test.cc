// The HTML reports of `spmdsim run --html` and `spmdsim plan --html` (scenario/html_report.h), in-process:
// self-contained pages whose figures show what the results hold. The page is loaded in a real browser by
// html_report_browser_test.sh; the figures alone are svg_test.cc's.
#include "scenario/html_report.h"

#include <regex>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "scenario/plan.h"
#include "scenario/run.h"
#include "scenario/scenario.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kScenario = R"y(name: html <report> & co
topology: {preset: "dgx-h100:2"}
mesh: {axes: {data: 2, pipe: 2, tensor: 4}}
workloads:
  - kind: mlp
    name: warmup
    batch: 4
    seq: 8
    d_model: 16
    d_ff: 32
    sharding: {batch_axes: [data], tensor_axes: [tensor]}
  - kind: model
    name: small
    vocab: 32000
    d_model: 1024
    layers: 4
    heads: 8
    d_ff: 4096
    seq: 1024
    global_batch: 16
    micro_batch: 1
    dtype: bfloat16
    parallel: {data_axes: [data], zero_stage: 1, tensor_axes: [tensor], sequence_parallel: true,
               pipeline_axes: [pipe]}
)y";

int64_t Count(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// Nothing is fetched: no URL but the SVG namespace, no external script, style sheet or image.
void ExpectSelfContained(const std::string& page) {
  std::string rest = page;
  rest = std::regex_replace(rest, std::regex("http://www\\.w3\\.org/2000/svg"), "");
  EXPECT_THAT(rest, Not(HasSubstr("http:")));
  EXPECT_THAT(rest, Not(HasSubstr("https:")));
  EXPECT_THAT(rest, Not(HasSubstr("<link")));
  EXPECT_THAT(rest, Not(HasSubstr(" src=")));
  EXPECT_THAT(rest, Not(HasSubstr("@import")));
}

std::string RunPage() {
  const Scenario s = ParseScenario(kScenario, "html.yaml");
  const std::vector<WorkloadResult> results = RunScenario(s, {.abstract = true, .record_trace = true});
  return RunHtmlReport(s, results, "spmdsim run html.yaml --html out.html");
}

TEST(RunHtmlReport, IsOneSelfContainedPageWithEveryFigure) {
  const std::string page = RunPage();
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  ExpectSelfContained(page);
  EXPECT_THAT(page, HasSubstr("<h1>html &lt;report&gt; &amp; co</h1>"));  // escaped
  // Per workload: timeline, memory, communication.
  EXPECT_EQ(Count(page, "<svg class=\"figure "), 6);
  EXPECT_EQ(Count(page, "<svg class=\"figure timeline"), 2);
  EXPECT_EQ(Count(page, "<svg class=\"figure bars memory"), 2);
  EXPECT_EQ(Count(page, "<svg class=\"figure bars communication"), 2);
  EXPECT_THAT(page, HasSubstr("'report-ready'"));  // the marker the script adds
}

TEST(RunHtmlReport, TheModelTimelineShowsEveryStageStreamPhaseExposureAndBubble) {
  const std::string page = RunPage();
  EXPECT_THAT(page, HasSubstr("stage 0 (device 0)"));
  EXPECT_THAT(page, HasSubstr("stage 1 (device"));
  for (const char* series : {"s-forward", "s-backward", "s-head", "s-optimizer", "s-bubble", "s-tensor", "s-data",
                             "s-pipeline"})
    EXPECT_THAT(page, HasSubstr("class=\"block " + std::string(series))) << series;
  for (const char* lane : {">compute<", ">collectives 0<", ">collectives 1<", ">sends<"})
    EXPECT_THAT(page, HasSubstr(lane)) << lane;
  // Memory by category against the H100's 81559 MiB (79.6 GiB) and communication split hidden / exposed.
  for (const char* category : {"s-parameters", "s-gradients", "s-optimizer", "s-activations"})
    EXPECT_THAT(page, HasSubstr("class=\"seg " + std::string(category))) << category;
  EXPECT_THAT(page, HasSubstr("capacity 79.6"));
  EXPECT_THAT(page, HasSubstr("class=\"seg s-hidden-under-compute"));
}

// The step time carries its error band over the published runs of its class (docs/model.md, "Error bands").
TEST(RunHtmlReport, TheStepTimeCarriesItsValidationBand) {
  const std::string page = RunPage();
  EXPECT_THAT(page, HasSubstr("<th>step time</th><td>"));
  EXPECT_THAT(page, HasSubstr(" on 16 H100 x megatron x TP/PP/CP runs (8 enforced))</td>"));
}

// A module the TPU compiler made (tests/hlo/testdata/targets): its page shows the simulated device's streams, the
// op_name scopes with their exposed and hidden communication, the collectives, and the mesh axes.
TEST(RunHtmlReport, AnHloWorkloadShowsItsStreamsScopesAndExposedAndHiddenCommunication) {
  const std::string yaml =
      std::string("name: hlo page\ntopology: {preset: 'tpu-v5e:4x4'}\nmesh: {axes: {data: 16}}\n") +
                           "workloads:\n  - kind: hlo\n    file: " + SPMDSIM_SOURCE_DIR +
                           "/tests/hlo/testdata/targets/tpu_v5e__transformer_fsdp.txt\n";
  const Scenario s = ParseScenario(yaml, "hlo.yaml");
  const std::vector<WorkloadResult> results = RunScenario(s, {.abstract = true, .record_trace = true});
  const std::string page = RunHtmlReport(s, results, "spmdsim run hlo.yaml --abstract --html out.html");
  ExpectSelfContained(page);
  EXPECT_THAT(page, HasSubstr("compiled for tpu"));
  for (const char* lane : {">compute<", ">collectives<", ">copies<"}) EXPECT_THAT(page, HasSubstr(lane)) << lane;
  for (const char* series : {"s-matmuls", "s-other-compute", "s-collectives"})
    EXPECT_THAT(page, HasSubstr("class=\"block " + std::string(series))) << series;
  EXPECT_THAT(page, HasSubstr("class=\"seg s-exposed-communication"));
  EXPECT_THAT(page, HasSubstr("class=\"seg s-hidden-communication"));
  EXPECT_THAT(page, HasSubstr("collective collective-permute"));
  EXPECT_THAT(page, Not(HasSubstr("No communication.")));
  EXPECT_THAT(page, HasSubstr(">data<"));  // communication by mesh axis
}

TEST(PlanHtmlReport, ScattersEveryEvaluatedConfigurationAndMarksTheWinners) {
  const Scenario s = ParseScenario(kScenario, "html.yaml");
  const ScenarioPlan plan = PlanScenario(s, {.topology = "dgx-h100:1", .top = 3, .threads = 2,
                                             .search_placement = false, .record_best_schedule = true});
  ASSERT_GE(plan.result.best.size(), 3u);
  EXPECT_EQ(static_cast<int64_t>(plan.result.points.size()), plan.result.evaluated);
  // The winner's step with its schedule is the search's step, from the same validated model.
  ASSERT_NE(plan.best_schedule, nullptr);
  ASSERT_NE(plan.best_schedule->schedule, nullptr);
  EXPECT_DOUBLE_EQ(plan.best_schedule->step_seconds, plan.result.best.front().step.step_seconds);
  const std::string page = PlanHtmlReport(plan, "spmdsim plan x.yaml --html y");
  ExpectSelfContained(page);
  EXPECT_EQ(Count(page, "<circle class=\"point\""), plan.result.evaluated);
  EXPECT_EQ(Count(page, "<circle class=\"point winner"), 3);
  EXPECT_EQ(Count(page, "<circle class=\"point winner best\""), 1);
  EXPECT_EQ(Count(page, "<svg class=\"figure "), 4);  // scatter, and the winner's timeline, memory, communication
  EXPECT_THAT(page, HasSubstr(plan.result.best.front().Describe()));
  // The line is the memory a configuration may use: the capacity less the default 10% headroom.
  EXPECT_THAT(page, HasSubstr("limit 71.68 GiB (10% kept free)"));
  EXPECT_THAT(page, HasSubstr("at most 71.68GiB of the 79.65GiB per device (10% kept free)"));
  const std::string none = PlanHtmlReport(ScenarioPlan{}, "spmdsim plan");
  EXPECT_EQ(Count(none, "<svg class=\"figure scatter"), 1);
}

}  // namespace
}  // namespace spmdsim
