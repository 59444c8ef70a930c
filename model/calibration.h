// Calibration: a few machine / stack figures fitted to a user's own measured steps (docs/model.md,
// "Calibration"). The uncalibrated prediction from documented figures stays the default; a profile is opt-in
// (a scenario's `topology.calibration`, `spmdsim plan --calibration`) and reports what it was fitted on and how
// well it predicts runs it was not fitted on.
//
// Fitted figures (StepCalibration, multipliers on the documented defaults), at most one per measured run, in
// this order: compute_scale (the sustained compute rate), comm_scale (collective and transfer times),
// host_launch_scale (eager host launch cost). The fit minimises the sum of squared log errors of the predicted
// steps (each a PredictModelStep) by cyclic golden-section search on each figure in [1/4, 4].
//
// Example: CalibrationProfile p = FitCalibration({{"175b-128", model_128, {}, 8.309}});
//          p.figures.compute_scale, p.fitted == {"compute_scale"}; then
//          PredictModelStep(model_2048, {.calibration = p.figures})
// Thread safety: free functions over values.
#ifndef SPMDSIM_MODEL_CALIBRATION_H_
#define SPMDSIM_MODEL_CALIBRATION_H_

#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/stack.h"
#include "model/step.h"

namespace spmdsim {

// One measured step of the user's: the configuration as it ran and the seconds it took.
struct CalibrationRun {
  std::string name;
  ValidatedModel model;
  ModelStepOptions options;  // how it is predicted (collective options, blocking p2p, ...); calibration ignored
  double measured_seconds = 0;
};

struct CalibrationProfile {
  std::string device_kind;         // the runs' device kind (a profile applies to it only)
  SoftwareStack stack = SoftwareStack::kAuto;      // the runs' stack, resolved
  StepCalibration figures;
  std::vector<std::string> fitted;  // the figures fitted, in order ("compute_scale", "comm_scale", ...)
  std::vector<std::string> runs;    // the runs fitted on
  double rms_log_error_before = 0;  // over the fitted runs: uncalibrated ...
  double rms_log_error_after = 0;   // ... and calibrated (natural log of predicted / measured)
};

struct CalibrationOptions {
  int max_figures = 3;  // fit at most this many figures (and at most one per run)
  // The figures to fit, by name ("compute_scale", "comm_scale", "host_launch_scale"), instead of the first
  // `max_figures` in order: to ask which one figure explains a family's runs (docs/model-validation.md fits
  // each alone on the DeepSeek-V3 rows). Empty: the first `max_figures`.
  std::vector<std::string> figures = {};
};

// The figures FitCalibration can fit, in its default order.
std::vector<std::string> CalibrationFigureNames();
// The value of the figure named `name` (one of CalibrationFigureNames()) in `figures`. Throws
// Error(kInvalidArgument) naming the figures for any other name.
double CalibrationFigureValue(const StepCalibration& figures, std::string_view name);

// Fits the profile. Throws Error(kInvalidArgument) when `runs` is empty, a measured time is not > 0, the runs
// mix device kinds or stacks (a profile describes one machine and one stack), or `options.figures` names an
// unknown figure, names one twice, or names more figures than there are runs.
CalibrationProfile FitCalibration(const std::vector<CalibrationRun>& runs, const CalibrationOptions& options = {});

// Whether a profile applies to a model that runs on `device_kind` with the resolved `stack`: throws
// Error(kFailedPrecondition) "<name> was fitted on <kind> with stack <stack>; the model runs on <kind> with stack
// <stack>" when either differs. `name` says which profile ("calibration profile h100.yaml").
// Example: CheckCalibrationFits(profile, "calibration profile h100.yaml", "NVIDIA A100-SXM4-80GB",
//                               SoftwareStack::kMegatron) throws for a profile fitted on H100s.
void CheckCalibrationFits(const CalibrationProfile& profile, std::string_view name, std::string_view device_kind,
                          SoftwareStack stack);

// `options` with the profile's figures, for `model`. Throws what CheckCalibrationFits throws when the profile
// was fitted on another device kind or stack than `model` runs on.
ModelStepOptions ApplyCalibration(const ModelStepOptions& options, const CalibrationProfile& profile,
                                  const ValidatedModel& model);

// The resolved stack a model runs on (its `stack`, or the topology's default).
SoftwareStack ModelStack(const ValidatedModel& model);

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_CALIBRATION_H_
