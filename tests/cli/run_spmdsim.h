// Runs the built `spmdsim` executable from a test and captures its exit code, stdout and stderr.
// The test target defines SPMDSIM_CLI_BINARY as $<TARGET_FILE:spmdsim> (tests/cli/CMakeLists.txt).
#ifndef SPMDSIM_TESTS_CLI_RUN_SPMDSIM_H_
#define SPMDSIM_TESTS_CLI_RUN_SPMDSIM_H_

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace spmdsim::testing_cli {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `spmdsim <args>` through the shell. stderr goes to a file private to this process and call, so tests
// running in parallel never read each other's.
inline CommandResult RunSpmdsim(const std::string& args) {
  static std::atomic<int> counter{0};
  std::string err_path = ::testing::TempDir() + "spmdsim_stderr_" + std::to_string(getpid()) + "_" +
                         std::to_string(counter++) + ".txt";
  std::string command = std::string(SPMDSIM_CLI_BINARY) + " " + args + " 2>" + err_path;
  CommandResult run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed: " << command;
    return run;
  }
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), n);
  int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream ss;
  ss << err.rdbuf();
  run.err = ss.str();
  std::remove(err_path.c_str());
  return run;
}

}  // namespace spmdsim::testing_cli

#endif  // SPMDSIM_TESTS_CLI_RUN_SPMDSIM_H_
