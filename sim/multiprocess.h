// Several processes (MPI ranks) running one simulation: each rank runs the virtual devices it owns, and
// collectives whose groups span ranks exchange data over MPI (Open MPI). docs/multiprocess.md has the design.
//
// Example (every rank runs the same program, e.g. `mpirun -np 2 prog`):
//   MpiSession mpi(&argc, &argv);                      // MPI_Init_thread unless MPI is already initialised
//   RuntimeOptions options;
//   options.process_group = mpi.world();               // or ProcessGroupFromMpi(&my_comm)
//   Runtime runtime(Mesh::Iota({8}, {"x"}), options);  // rank 0 runs positions 0-3, rank 1 positions 4-7
//   runtime.Run([&](DeviceContext& d) { out[d.position()] = d.Psum(x, "x"); });  // only local positions run
//
// Contract: every rank builds its Runtime with the same mesh and options and calls Run the same number of
// times with the same program; results on a rank's devices are bitwise those of the one-process run. A Run
// that fails on any rank throws on every rank with the same message, which names the rank and the device.
//
// Thread safety: a ProcessGroup may be shared by several Runtimes used one after another (not concurrently:
// their messages would interleave). MPI is entered from the Run's thread and from the runtime's workers, so
// MpiSession asks for MPI_THREAD_MULTIPLE and every MPI call is serialised by the group's mutex.
// nothing in this header includes mpi.h; without SPMDSIM_WITH_MPI the MPI entry points throw kUnimplemented.
#ifndef SPMDSIM_SIM_MULTIPROCESS_H_
#define SPMDSIM_SIM_MULTIPROCESS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mesh/mesh.h"
#include "sim/array.h"
#include "sim/process_group.h"

namespace spmdsim {

// Whether this build has MPI (CMake option SPMDSIM_WITH_MPI).
bool MpiBuiltIn();

// A group over an MPI communicator: `mpi_comm` points to an MPI_Comm (mpi.h), which is duplicated (the
// caller keeps its own). REQUIRES: MPI initialised with at least MPI_THREAD_SERIALIZED.
std::shared_ptr<ProcessGroup> ProcessGroupFromMpi(const void* mpi_comm);

// MPI for a program's lifetime: initialises MPI (MPI_THREAD_MULTIPLE) when the process was launched by an
// MPI launcher (mpirun/srun set OMPI_COMM_WORLD_SIZE or PMI_SIZE) and finalises it on destruction. Without a
// launcher (or without MPI in the build) it does nothing and world() is nullptr: the one-process runtime.
// Before MPI_Finalize every rank meets at a barrier. A rank that gave up on another in a step across ranks
// (RankLost(): a deadline passed, or MPI reported the rank gone) waits there 5 s at most: when a rank is still
// missing then, the destructor ends the job with MPI_Abort(MPI_COMM_WORLD, 1) instead of finalising (MPI_Finalize
// would wait for the lost rank for ever). The process then exits with code 1, and the launcher ends the other
// ranks, a stopped one included; whatever it printed before (its error) is flushed first.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  // MPI_COMM_WORLD as a group, or nullptr when MPI is not in use (see above). A group of one rank runs as one
  // process (RuntimeOptions::process_group).
  const std::shared_ptr<ProcessGroup>& world() const { return world_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ends every rank's process at once (MPI_Abort) with `code`; a plain exit when MPI is not in use.
  [[noreturn]] void Abort(int code) const;

 private:
  bool initialised_ = false;
  int rank_ = 0;
  int size_ = 1;
  std::shared_ptr<ProcessGroup> world_;
};

// Where ShareArrays sends the elements (the shapes always go to every rank).
enum class ShareData {
  kEveryRank,   // every rank holds every position's arrays
  kRankZero,    // rank 0 holds every position's arrays; other ranks hold abstract stand-ins for remote ones
  kShapesOnly,  // every rank holds abstract stand-ins (dtype, shape, varying axes; no elements) for remote ones
};

// After a Run across ranks: fills every other rank's positions of `by_position` (indexed by mesh position,
// each entry the arrays that position's device produced; this rank's entries filled, possibly empty) with the
// arrays their owners hold: their dtype, shape and varying axes always, their elements as `data` says.
// kEveryRank copies everything to every rank: only for results a program gathers anyway, not for the devices'
// working set. A no-op for a one-process runtime. Every rank must call it at the same point with the same `data`.
// Throws Error(kDeadlineExceeded) when a rank sends nothing within 2x collective_timeout.
class Runtime;
void ShareArrays(const Runtime& runtime, std::vector<std::vector<Array>>& by_position,
                 ShareData data = ShareData::kEveryRank);
}  // namespace spmdsim

#endif  // SPMDSIM_SIM_MULTIPROCESS_H_
