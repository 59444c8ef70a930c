// Calibration (model/calibration.h): fitting a few figures to measured steps, applying them, refusing what does
// not apply.
#include "model/calibration.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "mesh/mesh_utils.h"
#include "model/model.h"
#include "tests/model/small_model.h"

namespace spmdsim {
namespace {

ValidatedModel Small(const std::string& topology, int64_t data, int64_t tensor) {
  ModelConfig c = testing_model::SmallModel();
  c.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}, .sequence_parallel = true};
  return ValidateModel(c, MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse(topology)),
                                         {{"data", data}, {"tensor", tensor}}));
}

// A "measured" step that ran 20% slower on compute than documented is fitted back to compute_scale ~ 1/1.2, and
// the fitted profile then predicts another configuration of the same machine it was not fitted on.
TEST(Calibration, OneRunFitsTheComputeScaleAndPredictsAnother) {
  const ValidatedModel fit = Small("dgx-h100:2", 2, 8), held = Small("dgx-h100:2", 4, 4);
  StepCalibration slow;
  slow.compute_scale = 1 / 1.2;
  const double measured_fit = PredictModelStep(fit, {.calibration = slow}).step_seconds;
  const double measured_held = PredictModelStep(held, {.calibration = slow}).step_seconds;
  const CalibrationProfile p = FitCalibration({{"fit", fit, {}, measured_fit}});
  EXPECT_EQ(p.fitted, std::vector<std::string>{"compute_scale"});  // one run: one figure
  EXPECT_NEAR(p.figures.compute_scale, 1 / 1.2, 1e-3);
  EXPECT_EQ(p.figures.comm_scale, 1);
  EXPECT_EQ(p.device_kind, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(p.stack, SoftwareStack::kMegatron);
  EXPECT_GT(p.rms_log_error_before, 0.02);
  EXPECT_LT(p.rms_log_error_after, 1e-3);
  const double predicted = PredictModelStep(held, ApplyCalibration({}, p, held)).step_seconds;
  EXPECT_NEAR(predicted / measured_held, 1, 2e-3);
}

TEST(Calibration, SeveralRunsFitSeveralFiguresAtMostOnePerRun) {
  const ValidatedModel a = Small("dgx-h100:2", 2, 8), b = Small("dgx-h100:2", 16, 1);
  StepCalibration truth;
  truth.compute_scale = 0.9;
  truth.comm_scale = 1.5;
  const CalibrationProfile p =
      FitCalibration({{"a", a, {}, PredictModelStep(a, {.calibration = truth}).step_seconds},
                      {"b", b, {}, PredictModelStep(b, {.calibration = truth}).step_seconds}});
  EXPECT_EQ(p.fitted.size(), 2u);
  EXPECT_LT(p.rms_log_error_after, p.rms_log_error_before);
  EXPECT_LT(p.rms_log_error_after, 0.01);
  const CalibrationProfile one = FitCalibration({{"a", a, {}, 1.0}, {"b", b, {}, 1.0}}, {.max_figures = 1});
  EXPECT_EQ(one.fitted.size(), 1u);
}

// Named figures: the one asked for is fitted and the others stay at 1; a run slowed on communication alone is
// fitted back by comm_scale and not by compute_scale (which cannot carry it to a configuration with less
// communication).
TEST(Calibration, FitsExactlyTheFiguresNamed) {
  const ValidatedModel fit = Small("dgx-h100:2", 16, 1), held = Small("dgx-h100:2", 2, 8);
  StepCalibration slow_comm;
  slow_comm.comm_scale = 2;
  const double measured_fit = PredictModelStep(fit, {.calibration = slow_comm}).step_seconds;
  const double measured_held = PredictModelStep(held, {.calibration = slow_comm}).step_seconds;
  const CalibrationProfile comm = FitCalibration({{"fit", fit, {}, measured_fit}}, {.figures = {"comm_scale"}});
  EXPECT_EQ(comm.fitted, std::vector<std::string>{"comm_scale"});
  EXPECT_EQ(comm.figures.compute_scale, 1);
  EXPECT_NEAR(comm.figures.comm_scale, 2, 0.05);
  EXPECT_NEAR(PredictModelStep(held, ApplyCalibration({}, comm, held)).step_seconds / measured_held, 1, 5e-3);
  const CalibrationProfile compute = FitCalibration({{"fit", fit, {}, measured_fit}});
  EXPECT_EQ(compute.fitted, std::vector<std::string>{"compute_scale"});
  EXPECT_EQ(CalibrationFigureNames(), (std::vector<std::string>{"compute_scale", "comm_scale", "host_launch_scale"}));
  EXPECT_EQ(CalibrationFigureValue(comm.figures, "comm_scale"), comm.figures.comm_scale);
  EXPECT_EQ(CalibrationFigureValue(comm.figures, "compute_scale"), 1);
  EXPECT_THROW(CalibrationFigureValue(comm.figures, "comm"), Error);
}

TEST(Calibration, RefusesFiguresItDoesNotKnowOrCannotFit) {
  const ValidatedModel h100 = Small("dgx-h100:2", 2, 8);
  auto message = [&](const std::vector<std::string>& figures) {
    try {
      FitCalibration({{"h", h100, {}, 1.0}}, {.figures = figures});
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return e.message();
    }
    return std::string("no error");
  };
  EXPECT_THAT(message({"comm"}), ::testing::HasSubstr(
                                     "unknown figure 'comm'; the figures are compute_scale, comm_scale, "
                                     "host_launch_scale"));
  EXPECT_THAT(message({"comm_scale", "comm_scale"}), ::testing::HasSubstr("'comm_scale' named twice"));
  EXPECT_THAT(message({"comm_scale", "compute_scale"}),
              ::testing::HasSubstr("fitting 2 figures needs at least 2 fitted runs, got 1"));
}

TEST(Calibration, RefusesWhatItCannotFitOrApply) {
  const ValidatedModel h100 = Small("dgx-h100:2", 2, 8), a100 = Small("dgx-a100:2", 2, 8);
  EXPECT_THROW(FitCalibration({}), Error);
  EXPECT_THROW(FitCalibration({{"zero", h100, {}, 0}}), Error);
  try {
    FitCalibration({{"h", h100, {}, 1.0}, {"a", a100, {}, 1.0}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), ::testing::HasSubstr("one device kind and one stack"));
  }
  const CalibrationProfile p = FitCalibration({{"h", h100, {}, 1.0}});
  try {
    ApplyCalibration({}, p, a100);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_THAT(e.message(), ::testing::HasSubstr("NVIDIA A100-SXM4-80GB"));
  }
  EXPECT_THROW(PredictModelStep(h100, {.calibration = {.compute_scale = 0}}), Error);
}

}  // namespace
}  // namespace spmdsim
