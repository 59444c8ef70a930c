// FitCalibration and ApplyCalibration (model/calibration.h).
#include "model/calibration.h"

#include <cmath>
#include <functional>

#include "common/error.h"

namespace spmdsim {
namespace {

using Figure = double StepCalibration::*;
constexpr struct {
  const char* name;
  Figure field;
} kFigures[] = {{"compute_scale", &StepCalibration::compute_scale},
                {"comm_scale", &StepCalibration::comm_scale},
                {"host_launch_scale", &StepCalibration::host_launch_scale}};

// Sum over the runs of log(predicted / measured)^2.
double SquaredLogError(const std::vector<CalibrationRun>& runs, const StepCalibration& figures) {
  double sum = 0;
  for (const CalibrationRun& run : runs) {
    ModelStepOptions options = run.options;
    options.calibration = figures;
    const double predicted = PredictModelStep(run.model, options).step_seconds;
    const double e = std::log(predicted / run.measured_seconds);
    sum += e * e;
  }
  return sum;
}

// Golden-section search of `objective` over log(x) in [log(1/4), log(4)].
double GoldenSection(const std::function<double(double)>& objective) {
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double a = std::log(0.25), b = std::log(4.0);
  double c = b - phi * (b - a), d = a + phi * (b - a);
  double fc = objective(std::exp(c)), fd = objective(std::exp(d));
  for (int i = 0; i < 40 && b - a > 1e-4; ++i) {
    if (fc < fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - phi * (b - a);
      fc = objective(std::exp(c));
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + phi * (b - a);
      fd = objective(std::exp(d));
    }
  }
  return std::exp((a + b) / 2);
}

}  // namespace

SoftwareStack ModelStack(const ValidatedModel& model) {
  SPMDSIM_CHECK(model.mesh().topology() != nullptr, "a calibrated model needs a topology");
  return ResolveStack(model.config().stack, *model.mesh().topology());
}

CalibrationProfile FitCalibration(const std::vector<CalibrationRun>& runs, const CalibrationOptions& options) {
  if (runs.empty()) Throw(ErrorCode::kInvalidArgument, "calibrate: no measured runs to fit");
  CalibrationProfile profile;
  for (const CalibrationRun& run : runs) {
    if (!(run.measured_seconds > 0) || !std::isfinite(run.measured_seconds))
      Throw(ErrorCode::kInvalidArgument, "calibrate: run '{}': measured seconds must be > 0, got {}", run.name,
            run.measured_seconds);
    if (run.model.mesh().topology() == nullptr)
      Throw(ErrorCode::kInvalidArgument, "calibrate: run '{}' has no topology to predict on", run.name);
    const std::string kind(run.model.mesh().topology()->device_kind());
    const SoftwareStack stack = ModelStack(run.model);
    if (profile.runs.empty()) {
      profile.device_kind = kind;
      profile.stack = stack;
    } else if (kind != profile.device_kind || stack != profile.stack) {
      Throw(ErrorCode::kInvalidArgument,
            "calibrate: run '{}' is {} with stack {}, run '{}' {} with stack {}: a profile describes one device "
            "kind and one stack; calibrate them separately",
            run.name, kind, StackName(stack), profile.runs.front(), profile.device_kind, StackName(profile.stack));
    }
    profile.runs.push_back(run.name);
  }
  const int n = static_cast<int>(std::min<size_t>(runs.size(), static_cast<size_t>(std::max(0, options.max_figures))));
  const int count = std::min(n, static_cast<int>(std::size(kFigures)));
  profile.rms_log_error_before = std::sqrt(SquaredLogError(runs, {}) / static_cast<double>(runs.size()));
  StepCalibration figures;
  for (int i = 0; i < count; ++i) profile.fitted.push_back(kFigures[i].name);
  // Cyclic coordinate descent: one figure alone converges in one sweep; several in a few.
  const int sweeps = count <= 1 ? 1 : 4;
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    for (int i = 0; i < count; ++i) {
      const Figure field = kFigures[i].field;
      figures.*field = GoldenSection([&](double x) {
        StepCalibration trial = figures;
        trial.*field = x;
        return SquaredLogError(runs, trial);
      });
    }
  }
  profile.figures = figures;
  profile.rms_log_error_after = std::sqrt(SquaredLogError(runs, figures) / static_cast<double>(runs.size()));
  return profile;
}

ModelStepOptions ApplyCalibration(const ModelStepOptions& options, const CalibrationProfile& profile,
                                  const ValidatedModel& model) {
  SPMDSIM_CHECK(model.mesh().topology() != nullptr, "a calibrated model needs a topology");
  const std::string kind(model.mesh().topology()->device_kind());
  const SoftwareStack stack = ModelStack(model);
  if (kind != profile.device_kind || stack != profile.stack) {
    Throw(ErrorCode::kFailedPrecondition,
          "calibration profile fitted on {} with stack {} does not apply to model '{}' on {} with stack {}",
          profile.device_kind, StackName(profile.stack), model.config().name, kind, StackName(stack));
  }
  ModelStepOptions out = options;
  out.calibration = profile.figures;
  return out;
}

}  // namespace spmdsim
