// spmdsim calibrate RUNS.yaml [--figures N | --fit NAME,...] [--write PROFILE] [--json]
//
// Fits at most a few machine / stack figures (model/calibration.h) to the user's measured steps listed in a runs
// file (scenario/calibration_file.h), prints every run's measured, uncalibrated and calibrated step (the runs
// marked `holdout: true` are predicted, not fitted: the profile's held-out error; scenario/calibrate.h computes and
// formats them) and writes the profile a scenario (`topology.calibration:`) or `spmdsim plan --calibration` can
// name (docs/model.md, "Calibration").
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "scenario/calibrate.h"
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

ExitCode RunCalibrate(const CalibrateFlags& flags) {
  const Calibration calibration =
      Calibrate(LoadCalibrationRuns(flags.file), {.max_figures = flags.figures, .figures = flags.fit});
  if (flags.json) {
    fmt::print("{}\n", CalibrationJson(calibration).dump(2));
  } else {
    fmt::print("{}", CalibrationTable(calibration));
  }
  if (!flags.write.empty()) {
    std::ofstream out(flags.write, std::ios::trunc);
    if (!out) Throw(ErrorCode::kInvalidArgument, "--write: cannot write '{}'", flags.write);
    out << CalibrationProfileYaml(calibration.profile, fmt::format("Written by `spmdsim calibrate {}`.", flags.file));
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
  cmd->callback([flags, &exit_code] { exit_code = RunCalibrate(*flags); });
}

}  // namespace spmdsim::cli
