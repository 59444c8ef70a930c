// `spmdsim calibrate`: the fitted and held-out table, the profile it writes, and a plan that names it.
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run_spmdsim.h"

namespace spmdsim {
namespace {

using ::spmdsim::testing_cli::RunSpmdsim;
using ::testing::HasSubstr;

const std::string kRuns = std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/calibration/nemo-gpt3-175b-runs.yaml";

TEST(CalibrateCommand, FitsOnTheRunsAndReportsTheHeldOutError) {
  const std::string profile = ::testing::TempDir() + "nemo.calibration.yaml";
  const auto r = RunSpmdsim("calibrate " + kRuns + " --write " + profile);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("calibration on NVIDIA H100 80GB HBM3 (stack megatron): fitted compute_scale"));
  EXPECT_THAT(r.out, HasSubstr("| gpt3-175b-128 | fitted | 8.309 s |"));
  EXPECT_THAT(r.out, HasSubstr("| gpt3-175b-2048 | held out | 8.49 s |"));
  EXPECT_THAT(r.out, HasSubstr("held-out mean |gap|"));
  std::ifstream in(profile);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("device_kind: NVIDIA H100 80GB HBM3"));
  // plan names the profile; on another device it is refused.
  const std::string scenario = std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/gpt3-175b-dgx-h100-128.yaml";
  const auto plan = RunSpmdsim("plan " + scenario + " --calibration " + profile +
                               " --no-placement --max-context 1 --top 1 --write '' --json --topology dgx-h100:4 "
                               "--global-batch 32");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  const auto a100 = RunSpmdsim("plan " + scenario + " --calibration " + profile + " --topology dgx-a100:16 --write ''");
  EXPECT_NE(a100.exit_code, 0);
  EXPECT_THAT(a100.err, HasSubstr("was fitted on NVIDIA H100 80GB HBM3"));
}

TEST(CalibrateCommand, JsonAndBadInput) {
  const auto r = RunSpmdsim("calibrate " + kRuns + " --json --figures 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["fitted"].size(), 1u);
  EXPECT_EQ(j["runs"].size(), 2u);
  const auto comm = RunSpmdsim("calibrate " + kRuns + " --fit comm_scale");
  ASSERT_EQ(comm.exit_code, 0) << comm.err;
  EXPECT_THAT(comm.out, HasSubstr("fitted comm_scale\n  compute_scale 1.0000,"));
  // The shipped DeepSeek-V3 runs file: each figure alone, fitted on 512 GPUs, predicts the 1024-GPU run.
  const std::string deepseek = std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/calibration/deepseek-v3-runs.yaml";
  for (const char* figure : {"compute_scale", "comm_scale"}) {
    const auto ds = RunSpmdsim("calibrate " + deepseek + " --fit " + figure);
    ASSERT_EQ(ds.exit_code, 0) << ds.err;
    EXPECT_THAT(ds.out, HasSubstr(std::string("fitted ") + figure));
    EXPECT_THAT(ds.out, HasSubstr("| deepseek-v3-1024 | held out | 52.04 s |"));
  }
  const auto unknown = RunSpmdsim("calibrate " + kRuns + " --fit bandwidth");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("unknown figure 'bandwidth'; the figures are compute_scale, comm_scale"));
  const auto both = RunSpmdsim("calibrate " + kRuns + " --fit comm_scale --figures 1");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("excludes"));
  const auto missing = RunSpmdsim("calibrate /nonexistent/runs.yaml");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/runs.yaml"));
}

}  // namespace
}  // namespace spmdsim
