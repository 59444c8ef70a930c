// `spmdsim calibrate`: a calibration profile fitted on a runs file's measured steps (model/calibration.h), every
// run predicted without and with it, and what the command prints (docs/model.md, "Calibration").
//
// Example:
//   const CalibrationRunsFile runs = LoadCalibrationRuns("scenarios/calibration/nemo-gpt3-175b-runs.yaml");
//   const Calibration c = Calibrate(runs, {.max_figures = 1});
//   c.profile.figures.compute_scale;        // the fitted figure
//   c.runs[1].calibrated_seconds;            // the held-out run, predicted with it
//   CalibrationTable(c);                     // the table `spmdsim calibrate` prints; CalibrationJson: --json
// Errors: FitCalibration's (model/calibration.h). Thread safety: free functions over values.
#ifndef SPMDSIM_SCENARIO_CALIBRATE_H_
#define SPMDSIM_SCENARIO_CALIBRATE_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/calibration.h"
#include "scenario/calibration_file.h"

namespace spmdsim {

// One run of the file: its measured step and its predictions.
struct CalibratedRun {
  std::string name;
  bool holdout = false;             // predicted only, not fitted on
  double measured_seconds = 0;
  double uncalibrated_seconds = 0;  // PredictModelStep with the documented figures
  double calibrated_seconds = 0;    // ... with the profile's
};

struct Calibration {
  CalibrationProfile profile;
  std::vector<CalibratedRun> runs;  // the fitted runs, then the held-out ones, each in file order
};

// Fits the profile on `runs.fit` and predicts every run without and with it.
Calibration Calibrate(const CalibrationRunsFile& runs, const CalibrationOptions& options);

// What `spmdsim calibrate` prints: the profile's figures and a Markdown table of every run (measured,
// uncalibrated and calibrated step, each gap), then the held-out runs' mean |gap| calibrated and uncalibrated.
std::string CalibrationTable(const Calibration& calibration);
// The same as JSON (--json): {"device_kind", "stack", "figures": {"compute_scale", "comm_scale",
// "host_launch_scale"}, "fitted", "runs": [{"name", "holdout", "measured_seconds", "uncalibrated_seconds",
// "calibrated_seconds"}]}.
nlohmann::json CalibrationJson(const Calibration& calibration);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_CALIBRATE_H_
