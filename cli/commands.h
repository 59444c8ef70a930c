// The subcommands of the `spmdsim` executable. Each lives in its own file (cli/<name>_command.cc) and adds
// itself to the app; main.cc calls every Add*Command below.
//
// Contract for a command: parse with CLI11, do the work, print the result on stdout; report bad input by
// throwing spmdsim::Error (main prints "spmdsim <command>: <message>" on stderr and exits 1). Usage errors
// (unknown flags) exit 2 through CLI11.
#ifndef SPMDSIM_CLI_COMMANDS_H_
#define SPMDSIM_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace spmdsim::cli {

void AddMeshCommand(CLI::App& app);
void AddShardCommand(CLI::App& app);  // cli/shard_command.cc
void AddRulesCommand(CLI::App& app);    // cli/rules_command.cc
void AddResolveCommand(CLI::App& app);  // cli/resolve_command.cc
void AddAnalyzeCommand(CLI::App& app);  // cli/analyze_command.cc
void AddRunCommand(CLI::App& app);      // cli/run_command.cc

}  // namespace spmdsim::cli

#endif  // SPMDSIM_CLI_COMMANDS_H_
