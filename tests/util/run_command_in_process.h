// Test helper: parses `spmdsim <args>` with only the given subcommands registered, in this process, and returns
// what the command printed on stdout. Errors propagate as the command throws them (spmdsim::Error).
//
// Example:
//   std::string out = RunCommandInProcess({cli::AddShardCommand}, {"shard", "--mesh", "x=4", ...});
#ifndef SPMDSIM_TESTS_UTIL_RUN_COMMAND_IN_PROCESS_H_
#define SPMDSIM_TESTS_UTIL_RUN_COMMAND_IN_PROCESS_H_

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include "common/exit_code.h"

namespace spmdsim {

inline std::string RunCommandInProcess(std::initializer_list<void (*)(CLI::App&, ExitCode&)> add_commands,
                                       std::vector<std::string> args) {
  CLI::App app;
  ExitCode exit_code = ExitCode::kOk;
  for (auto add : add_commands) add(app, exit_code);
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  testing::internal::CaptureStdout();
  try {
    app.parse(args);
  } catch (...) {
    testing::internal::GetCapturedStdout();
    throw;
  }
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(exit_code, ExitCode::kOk) << "the command's exit code";
  return out;
}

}  // namespace spmdsim

#endif  // SPMDSIM_TESTS_UTIL_RUN_COMMAND_IN_PROCESS_H_
