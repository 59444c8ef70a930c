// Calibration files (scenario/calibration_file.h): runs files, profiles, and a scenario naming a profile.
#include "scenario/calibration_file.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "scenario/scenario.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char kScenario[] = R"y(topology: {preset: "dgx-h100:1"}
mesh: {axes: {data: 2, tensor: 4}}
workloads:
  - {kind: model, d_model: 1024, heads: 16, layers: 4, d_ff: 4096, global_batch: 8,
     parallel: {data_axes: [data], tensor_axes: [tensor]}}
)y";

TEST(CalibrationYaml, ProfileRoundTripsThroughItsText) {
  CalibrationProfile p;
  p.device_kind = "NVIDIA H100 80GB HBM3";
  p.stack = SoftwareStack::kMegatron;
  p.figures.compute_scale = 0.93;
  p.figures.comm_scale = 1.2;
  p.fitted = {"compute_scale", "comm_scale"};
  p.runs = {"a", "b"};
  p.rms_log_error_before = 0.1;
  p.rms_log_error_after = 0.01;
  const CalibrationProfile q = ParseCalibrationProfile(CalibrationProfileYaml(p, "a comment"), "p.yaml");
  EXPECT_EQ(q.device_kind, p.device_kind);
  EXPECT_EQ(q.stack, p.stack);
  EXPECT_DOUBLE_EQ(q.figures.compute_scale, 0.93);
  EXPECT_DOUBLE_EQ(q.figures.comm_scale, 1.2);
  EXPECT_EQ(q.fitted, p.fitted);
  EXPECT_EQ(q.runs, p.runs);
}

TEST(CalibrationYaml, BadFilesNameFileLineAndKey) {
  EXPECT_THAT(ErrorOf([] { ParseCalibrationProfile("calibration: {device_kind: x, stack: megatron, compute_scale: -1}",
                                                   "p.yaml"); }),
              HasSubstr("p.yaml:1:"));
  EXPECT_THAT(ErrorOf([] { ParseCalibrationProfile("calibration: {device_kind: x, stack: deepspeed}", "p.yaml"); }),
              HasSubstr("calibration.stack"));
  EXPECT_THAT(ErrorOf([] { ParseCalibrationProfile("calibration: {stack: megatron}", "p.yaml"); }),
              HasSubstr("device_kind"));
  EXPECT_THAT(ErrorOf([] { ParseCalibrationRuns("runs: []", "r.yaml"); }), HasSubstr("at least one measured run"));
  EXPECT_THAT(ErrorOf([] { ParseCalibrationRuns("runs: [{scenario: nowhere.yaml, measured_seconds: 1}]",
                                                ::testing::TempDir() + "r.yaml"); }),
              HasSubstr("runs[0].scenario"));
  EXPECT_THAT(ErrorOf([] { ParseCalibrationRuns("runs: [{scenario: s.yaml, measured_seconds: 0}]", "r.yaml"); }),
              HasSubstr("runs[0].measured_seconds"));
}

TEST(CalibrationYaml, RunsFileLoadsItsScenariosAndHoldouts) {
  Write("cal_s.yaml", kScenario);
  const std::string runs = Write("cal_runs.yaml", R"y(runs:
  - {name: a, scenario: cal_s.yaml, measured_seconds: 0.5}
  - {name: b, scenario: cal_s.yaml, measured_seconds: 0.6, holdout: true}
)y");
  const CalibrationRunsFile f = LoadCalibrationRuns(runs);
  ASSERT_EQ(f.fit.size(), 1u);
  ASSERT_EQ(f.holdout.size(), 1u);
  EXPECT_EQ(f.fit[0].name, "a");
  EXPECT_DOUBLE_EQ(f.holdout[0].measured_seconds, 0.6);
}

TEST(CalibrationYaml, AScenarioNamesAProfileOfItsDeviceAndStack) {
  CalibrationProfile p;
  p.device_kind = "NVIDIA H100 80GB HBM3";
  p.stack = SoftwareStack::kMegatron;
  p.figures.compute_scale = 0.9;
  Write("cal_profile.yaml", CalibrationProfileYaml(p));
  std::string text = kScenario;
  text.replace(text.find("}\n"), 2, ", calibration: cal_profile.yaml}\n");
  const Scenario s = ParseScenario(text, ::testing::TempDir() + "with_profile.yaml");
  ASSERT_TRUE(s.topology.calibration.has_value());
  EXPECT_DOUBLE_EQ(s.topology.calibration->figures.compute_scale, 0.9);
  // Another device kind, or another stack, is refused where the file names them.
  std::string a100 = text;
  a100.replace(a100.find("dgx-h100:1"), 10, "dgx-a100:1");
  EXPECT_THAT(ErrorOf([&] { ParseScenario(a100, ::testing::TempDir() + "a100.yaml"); }),
              HasSubstr("topology.calibration: the profile was fitted on NVIDIA H100 80GB HBM3"));
  std::string fsdp = text;
  fsdp.replace(fsdp.find("global_batch: 8,"), 16, "global_batch: 8, stack: pytorch-fsdp,");
  EXPECT_THAT(ErrorOf([&] { ParseScenario(fsdp, ::testing::TempDir() + "fsdp.yaml"); }),
              HasSubstr("stack: topology.calibration was fitted on NVIDIA H100 80GB HBM3 with stack megatron; the "
                        "model runs on NVIDIA H100 80GB HBM3 with stack pytorch-fsdp"));
}

}  // namespace
}  // namespace spmdsim
