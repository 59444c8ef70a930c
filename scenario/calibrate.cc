// Calibrate and what `spmdsim calibrate` prints (scenario/calibrate.h).
#include "scenario/calibrate.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/stack.h"
#include "model/step.h"

namespace spmdsim {
namespace {

double Gap(double predicted, double measured) { return predicted / measured - 1; }

}  // namespace

Calibration Calibrate(const CalibrationRunsFile& runs, const CalibrationOptions& options) {
  Calibration out{.profile = FitCalibration(runs.fit, options), .runs = {}};
  for (bool holdout : {false, true}) {
    for (const CalibrationRun& run : holdout ? runs.holdout : runs.fit) {
      out.runs.push_back(
          {.name = run.name,
           .holdout = holdout,
           .measured_seconds = run.measured_seconds,
           .uncalibrated_seconds = PredictModelStep(run.model, run.options).step_seconds,
           .calibrated_seconds =
               PredictModelStep(run.model, ApplyCalibration(run.options, out.profile, run.model)).step_seconds});
    }
  }
  return out;
}

std::string CalibrationTable(const Calibration& c) {
  const CalibrationProfile& profile = c.profile;
  std::string out = fmt::format("calibration on {} (stack {}): fitted {}\n", profile.device_kind,
                                StackName(profile.stack), fmt::join(profile.fitted, ", "));
  out += fmt::format("  compute_scale {:.4f}, comm_scale {:.4f}, host_launch_scale {:.4f}\n",
                     profile.figures.compute_scale, profile.figures.comm_scale, profile.figures.host_launch_scale);
  out += "| run | role | measured | uncalibrated | gap | calibrated | gap |\n|---|---|---|---|---|---|---|\n";
  double held = 0, held_before = 0;
  int n = 0;
  for (const CalibratedRun& r : c.runs) {
    const double before = Gap(r.uncalibrated_seconds, r.measured_seconds);
    const double after = Gap(r.calibrated_seconds, r.measured_seconds);
    out += fmt::format("| {} | {} | {:.4g} s | {:.4g} s | {:+.1f}% | {:.4g} s | {:+.1f}% |\n", r.name,
                       r.holdout ? "held out" : "fitted", r.measured_seconds, r.uncalibrated_seconds, 100 * before,
                       r.calibrated_seconds, 100 * after);
    if (r.holdout) {
      held += std::fabs(after);
      held_before += std::fabs(before);
      ++n;
    }
  }
  if (n > 0)
    out += fmt::format("held-out mean |gap|: {:.1f}% calibrated, {:.1f}% uncalibrated ({} run{})\n", 100 * held / n,
                       100 * held_before / n, n, n == 1 ? "" : "s");
  return out;
}

nlohmann::json CalibrationJson(const Calibration& c) {
  const CalibrationProfile& profile = c.profile;
  nlohmann::json j;
  j["device_kind"] = profile.device_kind;
  j["stack"] = std::string(StackName(profile.stack));
  j["figures"] = {{"compute_scale", profile.figures.compute_scale},
                  {"comm_scale", profile.figures.comm_scale},
                  {"host_launch_scale", profile.figures.host_launch_scale}};
  j["fitted"] = profile.fitted;
  j["runs"] = nlohmann::json::array();
  for (const CalibratedRun& r : c.runs) {
    j["runs"].push_back({{"name", r.name},
                         {"holdout", r.holdout},
                         {"measured_seconds", r.measured_seconds},
                         {"uncalibrated_seconds", r.uncalibrated_seconds},
                         {"calibrated_seconds", r.calibrated_seconds}});
  }
  return j;
}

}  // namespace spmdsim
