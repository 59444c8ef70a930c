// spmdsim calibrate RUNS.yaml [--figures N | --fit NAME,...] [--write PROFILE] [--json]
//
// Fits at most a few machine / stack figures (model/calibration.h) to the user's measured steps listed in a runs
// file (scenario/calibration_file.h), prints every run's measured, uncalibrated and calibrated step (the runs
// marked `holdout: true` are predicted, not fitted: the profile's held-out error) and writes the profile a
// scenario (`topology.calibration:`) or `spmdsim plan --calibration` can name (docs/model.md, "Calibration").
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "scenario/calibration_file.h"

namespace spmdsim::cli {
namespace {

struct CalibrateFlags {
  std::string file;
  int figures = 3;
  std::vector<std::string> fit;
  std::string write;
  bool json = false;
};

double Gap(double predicted, double measured) { return predicted / measured - 1; }

std::string Table(const CalibrationProfile& profile, const std::vector<CalibratedRun>& results) {
  std::string out = fmt::format("calibration on {} (stack {}): fitted {}\n", profile.device_kind,
                                StackName(profile.stack), fmt::join(profile.fitted, ", "));
  out += fmt::format("  compute_scale {:.4f}, comm_scale {:.4f}, host_launch_scale {:.4f}\n",
                     profile.figures.compute_scale, profile.figures.comm_scale, profile.figures.host_launch_scale);
  out += "| run | role | measured | uncalibrated | gap | calibrated | gap |\n|---|---|---|---|---|---|---|\n";
  double held = 0, held_before = 0;
  int n = 0;
  for (const CalibratedRun& r : results) {
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

nlohmann::json Json(const CalibrationProfile& profile, const std::vector<CalibratedRun>& results) {
  nlohmann::json j;
  j["device_kind"] = profile.device_kind;
  j["stack"] = std::string(StackName(profile.stack));
  j["figures"] = {{"compute_scale", profile.figures.compute_scale},
                  {"comm_scale", profile.figures.comm_scale},
                  {"host_launch_scale", profile.figures.host_launch_scale}};
  j["fitted"] = profile.fitted;
  j["runs"] = nlohmann::json::array();
  for (const CalibratedRun& r : results) {
    j["runs"].push_back({{"name", r.name},
                         {"holdout", r.holdout},
                         {"measured_seconds", r.measured_seconds},
                         {"uncalibrated_seconds", r.uncalibrated_seconds},
                         {"calibrated_seconds", r.calibrated_seconds}});
  }
  return j;
}

ExitCode Calibrate(const CalibrateFlags& flags) {
  const CalibrationOutcome outcome =
      CalibrateRuns(LoadCalibrationRuns(flags.file), {.max_figures = flags.figures, .figures = flags.fit});
  const CalibrationProfile& profile = outcome.profile;
  if (flags.json) {
    fmt::print("{}\n", Json(profile, outcome.runs).dump(2));
  } else {
    fmt::print("{}", Table(profile, outcome.runs));
  }
  if (!flags.write.empty()) {
    std::ofstream out(flags.write, std::ios::trunc);
    if (!out) Throw(ErrorCode::kInvalidArgument, "--write: cannot write '{}'", flags.write);
    out << CalibrationProfileYaml(profile, fmt::format("Written by `spmdsim calibrate {}`.", flags.file));
    if (!out) Throw(ErrorCode::kInvalidArgument, "--write: failed writing '{}'", flags.write);
    if (!flags.json) fmt::print("wrote the profile to {} (topology.calibration: {})\n", flags.write, flags.write);
  }
  return ExitCode::kOk;
}

}  // namespace

void AddCalibrateCommand(CLI::App& app, ExitCode& exit_code) {
  auto flags = std::make_shared<CalibrateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Fit a few machine / stack figures to measured steps of your own runs and report the held-out "
                   "error (docs/model.md, \"Calibration\")");
  cmd->add_option("file", flags->file, "runs file: scenarios with their measured step seconds")->required();
  CLI::Option* figures = cmd->add_option("--figures", flags->figures,
                  "fit at most this many figures: compute_scale, then comm_scale, then host_launch_scale (default "
                  "3; never more than the fitted runs)")
      ->check(IntIn(1, 3));
  cmd->add_option("--fit", flags->fit,
                  "fit exactly these figures (comma-separated: compute_scale, comm_scale, host_launch_scale), e.g. "
                  "--fit comm_scale to ask whether communication alone explains the runs")
      ->delimiter(',')
      ->excludes(figures);
  cmd->add_option("--write", flags->write, "write the profile here (YAML; topology.calibration: names it)");
  cmd->add_flag("--json", flags->json, "print JSON instead of the table");
  cmd->callback([flags, &exit_code] { exit_code = Calibrate(*flags); });
}

}  // namespace spmdsim::cli
