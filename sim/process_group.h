// ProcessGroup: the ranks (MPI processes) that share one simulation, and where each mesh position runs
// (PlaceDevices). Made by ProcessGroupFromMpi or MpiSession::world() (sim/multiprocess.h, which includes this
// header); given to a Runtime as RuntimeOptions::process_group. docs/multiprocess.md has the design.
//
// Thread safety: a ProcessGroup may be shared by several Runtimes used one after another (not concurrently:
// their messages would interleave); its calls are serialised by its transport's mutex. RankLost() is
// thread-safe.
#ifndef SPMDSIM_SIM_PROCESS_GROUP_H_
#define SPMDSIM_SIM_PROCESS_GROUP_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mesh/mesh.h"

namespace spmdsim {

namespace internal {
class Transport;
}  // namespace internal

// The ranks a Runtime spans. Made by ProcessGroupFromMpi or MpiSession::world().
class ProcessGroup {
 public:
  explicit ProcessGroup(std::shared_ptr<internal::Transport> transport);
  ~ProcessGroup();
  int rank() const;
  int size() const;
  // Every rank's `value`, by rank (e.g. peak memory for a report). Every rank must call it. Throws
  // Error(kDeadlineExceeded) when a rank sends nothing within `timeout`.
  std::vector<int64_t> AllGather(int64_t value, std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // Every rank's `bytes` (any length, e.g. a serialised record), by rank. Every rank must call it; same errors.
  std::vector<std::string> AllGatherBytes(const std::string& bytes,
                                          std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  internal::Transport& transport() const { return *transport_; }

 private:
  std::shared_ptr<internal::Transport> transport_;
};

// The rank that runs each mesh position when `num_ranks` ranks share the mesh: by the topology's hosts
// (Device::process_index) when num_ranks divides the number of hosts (rank r takes hosts
// [r*H/K, (r+1)*H/K)) and every rank gets a device, else contiguous blocks of positions (rank r takes
// [r*N/K, (r+1)*N/K)).
// Example: Mesh::Iota({8}) on 3 ranks (no topology): positions 0-1 -> 0, 2-4 -> 1, 5-7 -> 2.
// REQUIRES: 1 <= num_ranks <= mesh.size(); throws Error(kInvalidArgument) otherwise.
std::vector<int> PlaceDevices(const Mesh& mesh, int num_ranks);

// Whether a step across ranks in this process gave up on a rank: a rank sent nothing before a deadline (a Run's
// status exchange or data, ProcessGroup::AllGather, ShareArrays) or MPI reported a failure. MPI_Finalize would
// then wait for that rank for ever: end the job with MPI_Abort instead (MpiSession's destructor does).
bool RankLost();

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_PROCESS_GROUP_H_
