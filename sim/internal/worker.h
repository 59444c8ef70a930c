// Internals of sim/runtime.h: the worker loop. Each of a Runtime's W worker tasks claims a block of devices,
// runs them round-robin (a pass), arrives at the Run's cross-thread barrier, and, as the last to arrive, checks
// the devices' calls and plans the collective that the workers then execute. Not for users; docs/runtime.md
// ("Scheduling") has the design and the measurements behind it.
//
// Thread safety: see sim/internal/run_state.h (a block belongs to the worker that claimed it; the barrier orders
// the leader's section before every worker's next pass).
#ifndef SPMDSIM_SIM_INTERNAL_WORKER_H_
#define SPMDSIM_SIM_INTERNAL_WORKER_H_

#include <atomic>
#include <memory>

#include "sim/internal/core.h"
#include "sim/internal/run_state.h"

namespace spmdsim::internal {

// What a worker task needs, handed to it through oneTBB.
struct TaskArgs {
  std::shared_ptr<RuntimeCore> core;
  std::shared_ptr<RunState> run;
};

// The pointer to a task's arguments, stored in the oneTBB task object. oneTBB hands the object to the
// worker through libtbb's own atomics, which ThreadSanitizer does not see (libtbb is not instrumented);
// storing the pointer with release and loading it with acquire makes the hand-over visible to it (and is a
// plain move on x86).
class Handoff {
 public:
  explicit Handoff(TaskArgs* args) { args_.store(args, std::memory_order_release); }
  Handoff(Handoff&& other) noexcept {
    args_.store(other.args_.load(std::memory_order_acquire), std::memory_order_release);
  }
  Handoff(const Handoff&) = delete;
  TaskArgs* get() const { return args_.load(std::memory_order_acquire); }

 private:
  std::atomic<TaskArgs*> args_{nullptr};
};


// The body of one worker task: waits until Run has published the Run, runs blocks until every device has
// finished (or the Run is aborted and its devices unwound), then tells the core that the task returned.
void WorkerEntry(std::unique_ptr<TaskArgs> args);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_WORKER_H_
