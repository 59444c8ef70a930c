// The process exit codes of the `spmdsim` executable (docs/architecture.md, "Errors"). Commands return one;
// main returns it. Nothing else in spmdsim exits the process.
#ifndef SPMDSIM_COMMON_EXIT_CODE_H_
#define SPMDSIM_COMMON_EXIT_CODE_H_

#include "common/error.h"

namespace spmdsim {

enum class ExitCode : int {
  kOk = 0,           // done (spmdsim run: every workload ran and every check passed)
  kBadInput = 1,     // invalid input (a flag value, a file): spmdsim::Error, one line on stderr
  kUsage = 2,        // unknown command or flag, missing argument (CLI11)
  kInternal = 3,     // a bug in spmdsim (any other exception)
  kCheckFailed = 4,  // spmdsim run: everything ran, and at least one numeric check failed
};

constexpr int ToInt(ExitCode code) { return static_cast<int>(code); }

// The exit code of a command that failed with spmdsim::Error of `code`: kInternal (a bug in spmdsim) exits 3,
// every other code is bad input (1). The one mapping from errors to exit codes.
constexpr ExitCode ExitCodeFor(ErrorCode code) {
  return code == ErrorCode::kInternal ? ExitCode::kInternal : ExitCode::kBadInput;
}

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_EXIT_CODE_H_
