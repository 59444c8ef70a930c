// The subcommands of the `spmdsim` executable. Each lives in its own file (cli/<name>_command.cc) and adds
// itself to the app; main.cc calls every Add*Command below.
//
// Contract for a command: parse with CLI11, do the work, print the result on stdout with fmt::print, and store
// the exit code its work returns in `exit_code` (main returns it; a command never exits the process). Bad input
// is reported by throwing spmdsim::Error (main prints "spmdsim <command>: <message>" on stderr and returns
// ExitCode::kBadInput). Usage errors (unknown flags) return ExitCode::kUsage through main.
#ifndef SPMDSIM_CLI_COMMANDS_H_
#define SPMDSIM_CLI_COMMANDS_H_

#include <memory>

#include <CLI/CLI.hpp>

#include "common/exit_code.h"
#include "sim/multiprocess.h"

namespace spmdsim::cli {

void AddMeshCommand(CLI::App& app, ExitCode& exit_code);
void AddShardCommand(CLI::App& app, ExitCode& exit_code);  // cli/shard_command.cc
void AddRulesCommand(CLI::App& app, ExitCode& exit_code);    // cli/rules_command.cc
void AddResolveCommand(CLI::App& app, ExitCode& exit_code);  // cli/resolve_command.cc
void AddAnalyzeCommand(CLI::App& app, ExitCode& exit_code);  // cli/analyze_command.cc
void AddPlanCommand(CLI::App& app, ExitCode& exit_code);     // cli/plan_command.cc
void AddCalibrateCommand(CLI::App& app, ExitCode& exit_code);  // cli/calibrate_command.cc
// `processes`: the ranks of an `mpirun -np K spmdsim run` (docs/multiprocess.md), or nullptr.
void AddRunCommand(CLI::App& app, ExitCode& exit_code,
                   std::shared_ptr<ProcessGroup> processes = nullptr);  // cli/run_command.cc

}  // namespace spmdsim::cli

#endif  // SPMDSIM_CLI_COMMANDS_H_
