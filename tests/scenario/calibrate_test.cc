// Calibrate (scenario/calibrate.h) in-process: the profile fitted on NeMo's GPT-3 175B run on 128 H100, every run
// predicted without and with it, and the table and JSON `spmdsim calibrate` prints.
#include "scenario/calibrate.h"

#include <cmath>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "scenario/calibration_file.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

const std::string kRuns = std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/calibration/nemo-gpt3-175b-runs.yaml";

TEST(Calibrate, FitsOnTheFittedRunsAndPredictsTheHeldOutOnes) {
  const Calibration c = Calibrate(LoadCalibrationRuns(kRuns), {.max_figures = 1});
  ASSERT_EQ(c.runs.size(), 2u);
  EXPECT_EQ(c.profile.fitted, std::vector<std::string>{"compute_scale"});
  const CalibratedRun& fitted = c.runs[0];
  const CalibratedRun& held = c.runs[1];
  EXPECT_EQ(fitted.name, "gpt3-175b-128");
  EXPECT_FALSE(fitted.holdout);
  EXPECT_TRUE(held.holdout);
  EXPECT_DOUBLE_EQ(held.measured_seconds, 8.49);
  // One figure on one run: the fitted run is predicted (almost) exactly, closer than without the profile.
  EXPECT_LT(std::fabs(fitted.calibrated_seconds / fitted.measured_seconds - 1),
            std::fabs(fitted.uncalibrated_seconds / fitted.measured_seconds - 1));
  EXPECT_NEAR(fitted.calibrated_seconds / fitted.measured_seconds, 1, 1e-3);
}

TEST(Calibrate, TableAndJsonSayTheSame) {
  const Calibration c = Calibrate(LoadCalibrationRuns(kRuns), {.max_figures = 1});
  const std::string table = CalibrationTable(c);
  EXPECT_THAT(table, HasSubstr("calibration on NVIDIA H100 80GB HBM3 (stack megatron): fitted compute_scale"));
  EXPECT_THAT(table, HasSubstr("| gpt3-175b-128 | fitted | 8.309 s |"));
  EXPECT_THAT(table, HasSubstr("| gpt3-175b-2048 | held out | 8.49 s |"));
  EXPECT_THAT(table, HasSubstr("held-out mean |gap|"));
  const nlohmann::json j = CalibrationJson(c);
  EXPECT_EQ(j["device_kind"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(j["stack"], "megatron");
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][1]["holdout"], true);
  EXPECT_DOUBLE_EQ(j["runs"][1]["calibrated_seconds"].get<double>(), c.runs[1].calibrated_seconds);
  EXPECT_DOUBLE_EQ(j["figures"]["compute_scale"].get<double>(), c.profile.figures.compute_scale);
}

}  // namespace
}  // namespace spmdsim
