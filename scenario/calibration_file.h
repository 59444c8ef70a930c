// Calibration files (docs/scenarios.md, "Calibration profiles"): the measured runs `spmdsim calibrate` fits on,
// and the profile it writes, which a scenario (`topology.calibration: FILE`) and `spmdsim plan --calibration`
// name.
//
// Runs file:                                   Profile file:
//   runs:                                        calibration:
//     - name: gpt3-128                             device_kind: NVIDIA H100 80GB HBM3
//       scenario: gpt3-175b-dgx-h100-128.yaml      stack: megatron
//       measured_seconds: 8.309                    compute_scale: 0.995
//     - name: gpt3-2048                            comm_scale: 1
//       scenario: gpt3-2048.yaml                   host_launch_scale: 1
//       measured_seconds: 8.49                     fitted: [compute_scale]
//       holdout: true                              runs: [gpt3-128]
//                                                  rms_log_error_before: 0.0047
//                                                  rms_log_error_after: 0.0000
// A run's scenario path is relative to the runs file; the run is the scenario's first `kind: model` workload
// on its topology, with its collective options. `holdout: true` runs are predicted, not fitted.
//
// Errors: Error(kInvalidArgument, kind "ScenarioError") "<file>:<line>:<col>: <key>: <message>" for a bad file;
// the errors of LoadScenario for a run's scenario.
#ifndef SPMDSIM_SCENARIO_CALIBRATION_FILE_H_
#define SPMDSIM_SCENARIO_CALIBRATION_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "model/calibration.h"
#include "model/step.h"

namespace spmdsim {

struct CalibrationRunsFile {
  std::vector<CalibrationRun> fit;      // the runs to fit on
  std::vector<CalibrationRun> holdout;  // the runs to predict only
};

// Reads a runs file and the scenarios it names.
CalibrationRunsFile LoadCalibrationRuns(const std::string& path);
CalibrationRunsFile ParseCalibrationRuns(std::string_view text, const std::string& path);

// Reads a profile file.
CalibrationProfile LoadCalibrationProfile(const std::string& path);
CalibrationProfile ParseCalibrationProfile(std::string_view text, const std::string& path);

// The profile file's text; `comment` becomes its leading comment lines.
std::string CalibrationProfileYaml(const CalibrationProfile& profile, const std::string& comment = "");

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_CALIBRATION_FILE_H_
