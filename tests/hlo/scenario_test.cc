// `kind: hlo` in a scenario file, run through the scenario layer as `spmdsim run` does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "scenario/run.h"
#include "scenario/scenario.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

const std::string kTestdata = std::string(SPMDSIM_SOURCE_DIR) + "/tests/hlo/testdata/";

std::string Scenario(const std::string& workload) {
  return "name: t\ntopology:\n  preset: \"cpu:8\"\nmesh:\n  axes: {data: 2, model: 4}\nworkloads:\n" + workload;
}

TEST(HloScenario, RunsAJaxModuleWithDataAndPredictsIt) {
  const spmdsim::Scenario s = ParseScenario(
      Scenario("  - kind: hlo\n    file: " + kTestdata + "named_sharding_mlp.txt\n    inputs: random\n"), "t.yaml");
  std::vector<WorkloadResult> r = RunScenario(s, ScenarioRunOptions{});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, WorkloadKind::kHlo);
  ASSERT_TRUE(r[0].hlo.has_value());
  EXPECT_EQ(r[0].hlo->devices, 8);
  EXPECT_EQ(r[0].hlo->measured_peak_bytes.size(), 8u);
  EXPECT_GT(r[0].totals.predicted_seconds, 0);
  EXPECT_EQ(r[0].memory.peak_bytes_max, r[0].hlo->argument_bytes + r[0].hlo->output_bytes + r[0].hlo->temp_bytes);
  EXPECT_FALSE(r[0].check.performed);
}

TEST(HloScenario, ThePodModuleRunsAbstractOnFourThousandNinetySixChips) {
  const spmdsim::Scenario s = LoadScenario(std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/hlo-tpu-v4-pod-import.yaml");
  std::vector<WorkloadResult> r = RunScenario(s, ScenarioRunOptions{.abstract = true});
  EXPECT_EQ(r[0].hlo->devices, 4096);
  EXPECT_EQ(r[0].hlo->simulated_devices, 1);
  EXPECT_GT(r[0].totals.communication_seconds, 0);
  EXPECT_TRUE(r[0].memory.fits());
}

TEST(HloScenario, ErrorsNameTheScenarioAndTheModulesFileLineAndColumn) {
  const std::string bad = (std::filesystem::temp_directory_path() / "spmdsim_bad_module.txt").string();
  std::ofstream(bad) << "HloModule m\nENTRY %e {\n  ROOT %x = f32[] frobnicate()\n}\n";
  try {
    ParseScenario(Scenario("  - kind: hlo\n    file: " + bad + "\n"), "t.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("t.yaml:8:11: workloads[0].file:"));
    EXPECT_THAT(e.message(), HasSubstr(bad + ":3:19: unknown opcode 'frobnicate'"));
  }
  try {
    const spmdsim::Scenario s = ParseScenario(
        Scenario("  - kind: hlo\n    file: " + kTestdata + "pod4096_transformer_train_step.txt\n"), "t.yaml");
    RunScenario(s, ScenarioRunOptions{.abstract = true});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("runs on 4096 devices (1 replicas x 4096 partitions); the mesh has 8"));
  }
}

}  // namespace
}  // namespace spmdsim
