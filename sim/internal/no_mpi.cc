// The MPI entry points of sim/multiprocess.h in a build without MPI (SPMDSIM_WITH_MPI off).
#include <cstdio>
#include <cstdlib>

#include "common/error.h"
#include "sim/multiprocess.h"

namespace spmdsim {

bool MpiBuiltIn() { return false; }

std::shared_ptr<ProcessGroup> ProcessGroupFromMpi(const void*) {
  Throw(ErrorCode::kUnimplemented, "this spmdsim was built without MPI (CMake option SPMDSIM_WITH_MPI)");
}

MpiSession::MpiSession(int*, char***) {}
MpiSession::~MpiSession() = default;

void MpiSession::Abort(int code) const {
  std::fflush(stdout);
  std::fflush(stderr);
  std::exit(code);
}

}  // namespace spmdsim
