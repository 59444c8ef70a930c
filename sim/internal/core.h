// Internals of sim/runtime.h: a Runtime's devices and what stays across its Runs: the slots, the blocks and
// shares the workers take, the fiber stacks, the groups of every tuple of axes used so far, and the current
// Run. Shared by the runtime's parts: the worker loop (worker.h), the watchdog (watchdog.h) and Runtime itself
// (sim/runtime.cc). Not for users; docs/runtime.md explains the design.
//
// Thread safety: the fields are written by the constructor and by Runtime::Run's thread between Runs (MapStacks,
// `run` under run_mu); the workers of a Run read them and write only their own blocks' slots (sim/internal/slot.h)
// and blocks (sim/internal/run_state.h). Groups() may be called from any thread. Fields guarded by a mutex say
// so with SPMDSIM_GUARDED_BY (common/thread_annotations.h; checked by the `clang` preset).
#ifndef SPMDSIM_SIM_INTERNAL_CORE_H_
#define SPMDSIM_SIM_INTERNAL_CORE_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/thread_annotations.h"
#include "mesh/mesh.h"
#include "sim/internal/collective_call.h"
#include "sim/internal/fiber_stack.h"
#include "sim/internal/run_state.h"
#include "sim/internal/slot.h"
#include "sim/runtime_options.h"

namespace spmdsim::internal {

// Throws Error(kResourceExhausted), before anything is mapped, when the fiber stacks of `devices` devices of
// `fiber_stack_bytes` each (RuntimeOptions::fiber_stack_bytes, x kSanitizerStackFactor) cannot fit: their address
// space (with a guard page each) beyond what the process's address-space limit (ulimit -v) leaves, or the one page
// of its stack every device touches beyond the host's available memory. The message names the devices, the bytes
// and the limit. Nothing is checked when the spare pool already holds stacks of that shape.
// Example: 65536 devices of 1 MiB stacks need 64.25 GiB of address space: refused under `ulimit -v 8388608`.
void CheckFiberStacksFit(int64_t devices, size_t fiber_stack_bytes);

struct RuntimeCore {
  // `owner`: the rank of every position (all 0 in one process); this process is `rank`.
  RuntimeCore(Mesh mesh, RuntimeOptions options, int num_workers, std::vector<int> owner, int rank);
  ~RuntimeCore();

  // Maps every device's fiber stack in `stacks` (kept across Runs; under ASan, clears their poison every Run).
  // Called by Run on its own thread before any device starts. Throws Error(kResourceExhausted) naming the
  // number of devices and the bytes their stacks need when they cannot be mapped (an address-space limit).
  void MapStacks();

  // The groups of a collective's axes, made once per Runtime (the barrier's leader asks; any thread may).
  const GroupInfo& Groups(const AxesKey& key) SPMDSIM_EXCLUDES(groups_mu);  // cached; any thread

  Mesh mesh;
  RuntimeOptions options;
  int num_workers;
  std::vector<int> owner;                  // rank of each position
  int rank = 0;
  std::vector<int64_t> local_positions;    // the positions this process runs, ascending
  std::vector<DeviceSlot> slots;           // every position (only local ones run)
  // Blocks: contiguous runs of local positions; a share (one worker's part) is one or more blocks. In one
  // process every share is one block.
  std::vector<Block> blocks;
  std::vector<std::vector<int>> shares;
  StackPool stacks;                // every slot's stack (Run's thread only)
  Mutex run_mu;                    // held by Runtime::Run for its whole duration
  // Worker tasks enqueued and not yet returned (a task oneTBB starts after its Run ended returns at once).
  Mutex tasks_mu;
  std::condition_variable tasks_cv;
  int tasks_outstanding SPMDSIM_GUARDED_BY(tasks_mu) = 0;
  std::shared_ptr<RunState> run SPMDSIM_GUARDED_BY(run_mu);  // the current (or last) Run
  Mutex groups_mu;
  std::map<AxesKey, std::unique_ptr<GroupInfo>> groups SPMDSIM_GUARDED_BY(groups_mu);
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_CORE_H_
