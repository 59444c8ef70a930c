// FitCalibration and ApplyCalibration (model/calibration.h).
#include "model/calibration.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

// kFigures' index of the figure named `name`; throws naming the figures for any other name.
size_t FigureIndex(std::string_view name) {
  const auto* it =
      std::find_if(std::begin(kFigures), std::end(kFigures), [&](const auto& f) { return name == f.name; });
  if (it == std::end(kFigures))
    Throw(ErrorCode::kInvalidArgument, "calibrate: unknown figure '{}'; the figures are {}", name,
          fmt::join(CalibrationFigureNames(), ", "));
  return static_cast<size_t>(it - std::begin(kFigures));
}

// The figures to fit: `options.figures` by name (validated), else the first max_figures (at most one per run).
std::vector<size_t> FiguresToFit(const CalibrationOptions& options, size_t runs) {
  std::vector<size_t> out;
  if (options.figures.empty()) {
    const size_t n = std::min(runs, static_cast<size_t>(std::max(0, options.max_figures)));
    for (size_t i = 0; i < std::min(n, std::size(kFigures)); ++i) out.push_back(i);
    return out;
  }
  for (const std::string& name : options.figures) {
    const size_t index = FigureIndex(name);
    if (std::find(out.begin(), out.end(), index) != out.end())
      Throw(ErrorCode::kInvalidArgument, "calibrate: figure '{}' named twice", name);
    out.push_back(index);
  }
  if (out.size() > runs)
    Throw(ErrorCode::kInvalidArgument, "calibrate: fitting {} figures needs at least {} fitted runs, got {}",
          out.size(), out.size(), runs);
  return out;
}

}  // namespace

std::vector<std::string> CalibrationFigureNames() {
  std::vector<std::string> names;
  for (const auto& f : kFigures) names.emplace_back(f.name);
  return names;
}

double CalibrationFigureValue(const StepCalibration& figures, std::string_view name) {
  return figures.*kFigures[FigureIndex(name)].field;
}

SoftwareStack ModelStack(const ValidatedModel& model) {
  SPMDSIM_CHECK(model.mesh().topology() != nullptr, "a calibrated model needs a topology");
  return ModelStackChoice(model).stack;
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
  const std::vector<size_t> fit = FiguresToFit(options, runs.size());
  profile.rms_log_error_before = std::sqrt(SquaredLogError(runs, {}) / static_cast<double>(runs.size()));
  StepCalibration figures;
  for (size_t i : fit) profile.fitted.push_back(kFigures[i].name);
  // Cyclic coordinate descent: one figure alone converges in one sweep; several in a few.
  const int sweeps = fit.size() <= 1 ? 1 : 4;
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    for (size_t i : fit) {
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

void CheckCalibrationFits(const CalibrationProfile& profile, std::string_view name, std::string_view device_kind,
                          SoftwareStack stack) {
  if (device_kind == profile.device_kind && stack == profile.stack) return;
  Throw(ErrorCode::kFailedPrecondition, "{} was fitted on {} with stack {}; the model runs on {} with stack {}", name,
        profile.device_kind, StackName(profile.stack), device_kind, StackName(stack));
}

ModelStepOptions ApplyCalibration(const ModelStepOptions& options, const CalibrationProfile& profile,
                                  const ValidatedModel& model) {
  SPMDSIM_CHECK(model.mesh().topology() != nullptr, "a calibrated model needs a topology");
  CheckCalibrationFits(profile, fmt::format("the calibration profile of model '{}'", model.config().name),
                       model.mesh().topology()->device_kind(), ModelStack(model));
  ModelStepOptions out = options;
  out.calibration = profile.figures;
  return out;
}

}  // namespace spmdsim
