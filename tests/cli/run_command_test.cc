// Tests of `spmdsim run` (cli/run_command.cc) through the built binary: the human report, --json, --trace,
// --html, --dump, --abstract, and the documented exit codes (docs/scenarios.md).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "scenario/npy.h"
#include "tests/cli/run_spmdsim.h"

namespace spmdsim {
namespace {

using ::spmdsim::testing_cli::RunSpmdsim;
using ::testing::HasSubstr;

std::string Scenario(const std::string& name) { return std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/" + name; }

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(RunCommand, PrintsAReportWithUnitsInEveryHeaderAndExitsZero) {
  auto r = RunSpmdsim("run " + Scenario("cpu8-quick.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("== workload tp_mlp (mlp) =="));
  EXPECT_THAT(r.out, HasSubstr("predicted [us]"));
  EXPECT_THAT(r.out, HasSubstr("comm model [us]"));
  EXPECT_THAT(r.out, HasSubstr("host_memory sent [KiB/device]"));
  EXPECT_THAT(r.out, HasSubstr("algbw [GB/s]"));
  EXPECT_THAT(r.out, HasSubstr("peak memory per device: max"));
  EXPECT_THAT(r.out, HasSubstr("check: PASSED"));
  EXPECT_EQ(r.err, "");  // no progress bar when stderr is not a terminal
}

TEST(RunCommand, WritesJsonWithTheDocumentedFields) {
  std::string json = ::testing::TempDir() + "run_report.json";
  auto r = RunSpmdsim("run --quiet --json " + json + " " + Scenario("cpu8-quick.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  nlohmann::json j = ReadJson(json);
  EXPECT_EQ(j["scenario"]["name"], "cpu8-quick");
  EXPECT_EQ(j["topology"]["num_devices"], 8);
  EXPECT_EQ(j["mesh"]["axis_names"], (std::vector<std::string>{"data", "model"}));
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_TRUE(j["all_checks_passed"].get<bool>());
  ASSERT_EQ(j["workloads"].size(), 2u);
  const auto& sweep = j["workloads"][0];
  EXPECT_EQ(sweep["kind"], "collectives");
  ASSERT_FALSE(sweep["sweep"].empty());
  for (const char* key : {"op", "axes", "group_size", "bytes", "predicted_seconds", "predicted_algbw",
                          "predicted_busbw", "measured_seconds", "algorithm", "check_passed"})
    EXPECT_TRUE(sweep["sweep"][0].contains(key)) << key;
  const auto& mlp = j["workloads"][1];
  for (const char* key : {"totals", "steps", "memory", "check", "layouts", "wall_seconds"})
    EXPECT_TRUE(mlp.contains(key)) << key;
  double sum = 0;
  for (const auto& step : mlp["steps"]) {
    for (const char* key : {"name", "kind", "predicted_seconds", "compute_seconds", "communication_seconds",
                            "communication_seconds_by_axis", "bytes_by_link"})
      EXPECT_TRUE(step.contains(key)) << key;
    sum += step["communication_seconds"].get<double>();
  }
  EXPECT_NEAR(sum, mlp["totals"]["communication_seconds"].get<double>(), 1e-12);
  EXPECT_TRUE(mlp["check"]["performed"].get<bool>());
  EXPECT_GT(mlp["memory"]["peak_bytes_max"].get<int64_t>(), 0);
}

TEST(RunCommand, JsonDashWritesOnlyJsonToStdout) {
  auto r = RunSpmdsim("run --json - " + Scenario("cpu8-quick.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["workloads"].size(), 2u);
}

TEST(RunCommand, WritesAChromeTraceWithOneTrackPerDeviceOnBothClocks) {
  std::string trace = ::testing::TempDir() + "run_trace.json";
  auto r = RunSpmdsim("run --quiet --trace " + trace + " " + Scenario("cpu8-quick.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = ReadJson(trace);
  std::set<int> sim_tracks, wall_tracks;
  int complete = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] != "workload") {
      ++complete;
      (e["pid"] == 1 ? sim_tracks : wall_tracks).insert(e["tid"].get<int>());
      EXPECT_GE(e["dur"].get<double>(), 0);
    }
  }
  EXPECT_GT(complete, 0);
  EXPECT_EQ(sim_tracks.size(), 8u);
  EXPECT_EQ(wall_tracks.size(), 8u);
}

// A model workload's trace holds its simulated step, one process per pipeline stage; --html writes its page.
TEST(RunCommand, TracesAModelsStepPerStageAndWritesItsHtmlPage) {
  const std::string trace = ::testing::TempDir() + "run_model_trace.json";
  const std::string html = ::testing::TempDir() + "run_model.html";
  auto r = RunSpmdsim("run --abstract --quiet --trace " + trace + " --html " + html + " " +
                      Scenario("llama-gqa-dgx-h100-32.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = ReadJson(trace);
  std::set<std::string> stages;
  std::map<std::string, int64_t> cats;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"].get<int>() >= 3) stages.insert(e["args"]["name"]);
    if (e["ph"] == "X" && e["pid"].get<int>() >= 3) ++cats[e["cat"]];
  }
  EXPECT_EQ(stages, (std::set<std::string>{"llama2_70b: stage 0 (device 0, mesh position 0), simulated step",
                                           "llama2_70b: stage 1 (device 8, mesh position 8), simulated step"}));
  for (const char* cat : {"compute", "communication", "exposed", "bubble", "task", "layer"})
    EXPECT_GT(cats[cat], 0) << cat;
  EXPECT_EQ(cats["task"], 2 * (2 * 32 + 1));  // per stage: 32 micro-batches forward and backward, the optimizer
  EXPECT_EQ(cats["layer"], 2 * 2 * 32 * 40);  // per stage: 40 layers, each forward and backward per micro-batch
  std::ifstream in(html);
  std::stringstream page;
  page << in.rdbuf();
  EXPECT_THAT(page.str(), HasSubstr("<svg class=\"figure timeline"));
  EXPECT_THAT(page.str(), HasSubstr("stage 1 (device 8)"));
}

TEST(RunCommand, DumpsGlobalInputsAndOutputsAsNpy) {
  std::string dir = ::testing::TempDir() + "run_dump";
  std::filesystem::remove_all(dir);
  auto r = RunSpmdsim("run --quiet --dump " + dir + " " + Scenario("cpu8-quick.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".npy") continue;
    NpyArray a = ReadNpy(entry.path().string());
    EXPECT_GT(a.num_elements(), 0);
    ++files;
  }
  EXPECT_GT(files, 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/tp_mlp/inputs"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/tp_mlp/outputs"));
}

TEST(RunCommand, AbstractModeSkipsChecksAndStillPredicts) {
  auto r = RunSpmdsim("run --abstract --json - " + Scenario("cpu8-quick.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["abstract"].get<bool>());
  for (const auto& w : j["workloads"]) {
    EXPECT_FALSE(w["check"]["performed"].get<bool>());
    EXPECT_GT(w["totals"]["predicted_seconds"].get<double>(), 0);
  }
  auto both = RunSpmdsim("run --abstract --dump /tmp/x " + Scenario("cpu8-quick.yaml"));
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_THAT(both.err, HasSubstr("--dump"));
}

TEST(RunCommand, ExitsOneWithTheLocationOnABadScenario) {
  std::string path = WriteTemp("bad.yaml", "topology: {preset: \"cpu:8\"}\nmesh: {axes: {d: 8}}\n"
                                           "workloads: [{kind: collectives, opps: [psum]}]\n");
  auto r = RunSpmdsim("run " + path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("bad.yaml:3:33: workloads[0].opps: unknown key 'opps', did you mean 'ops'?"));
  EXPECT_EQ(RunSpmdsim("run /nonexistent.yaml").exit_code, 1);
}

TEST(RunCommand, ExitsFourWhenACheckFails) {
  // psum of a replicated value over 'model' multiplies it by 4; run on one device it is the identity.
  std::string path = WriteTemp("failing.yaml", R"y(topology: {preset: "cpu:8"}
mesh: {axes: {data: 2, model: 4}}
arrays: [{name: x, shape: [8, 16], spec: "P()", data: iota}]
workloads:
  - {kind: shard_map, name: wrong, inputs: [x], steps: [{name: y, op: psum, args: [x], axes: [model]}],
     outputs: [{name: y, spec: "P()"}]}
)y");
  auto r = RunSpmdsim("run " + path);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.out, HasSubstr("check: FAILED"));
  EXPECT_THAT(r.err, HasSubstr("a numeric check failed"));
}

// JAX writes shard_map's errors over several lines; the CLI prints every error on one line of stderr.
TEST(RunCommand, PrintsShardMapErrorsOnOneLine) {
  const std::string head = R"y(topology: {preset: "cpu:8"}
mesh: {axes: {data: 2, model: 4}}
arrays: [{name: x, shape: [8, 16], spec: "P('data')", data: iota}]
workloads:
)y";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"replication",
       "  - {kind: shard_map, name: f, inputs: [x], steps: [{name: y, op: neg, args: [x]}],\n"
       "     outputs: [{name: y, spec: \"P()\"}]}\n"},
      {"out_spec rank",
       "  - {kind: shard_map, name: f, inputs: [x], steps: [{name: s, op: sum, args: [x]}],\n"
       "     outputs: [{name: s, spec: \"P('data')\"}]}\n"},
      {"out_spec axis",
       "  - {kind: shard_map, name: f, inputs: [x], steps: [{name: y, op: neg, args: [x]}],\n"
       "     outputs: [{name: y, spec: \"P('nope')\"}]}\n"},
  };
  for (const auto& [what, workload] : cases) {
    auto r = RunSpmdsim("run " + WriteTemp("one_line.yaml", head + workload));
    EXPECT_EQ(r.exit_code, 1) << what << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("shard_map")) << what;
  }
}

TEST(RunCommand, ExitsTwoOnAUsageError) {
  EXPECT_EQ(RunSpmdsim("run").exit_code, 2);
  EXPECT_EQ(RunSpmdsim("run --frobnicate " + Scenario("cpu8-quick.yaml")).exit_code, 2);
}

}  // namespace
}  // namespace spmdsim
