// Internals of sim/runtime.h: one Run's state shared by its worker threads, the watchdog and the Run's own
// thread: the blocks of devices the workers run, the cross-thread barrier, the abort, and the current
// collective's plan. Not for users; docs/runtime.md explains the design.
//
// Thread safety and ordering:
//  - A Block's summary is written by its worker before it arrives at the cross-thread barrier
//    (fetch_add acq_rel) and read by the last worker to arrive, which publishes the plan with a release
//    store of the barrier's epoch; the other workers acquire that epoch before reading the plan.
//  - RunState::abort moves once from kNone to a reason (compare-exchange, under `mu`); the winner writes the
//    code, message and time under `mu` right after the exchange, so readers take `mu` too.
//  - Fields guarded by a mutex say so with SPMDSIM_GUARDED_BY (common/thread_annotations.h; checked by the
//    `clang` preset).
#ifndef SPMDSIM_SIM_INTERNAL_RUN_STATE_H_
#define SPMDSIM_SIM_INTERNAL_RUN_STATE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_annotations.h"
#include "sim/device_context.h"
#include "sim/internal/collective_call.h"
#include "sim/internal/cross_rank.h"
#include "sim/internal/plan.h"

namespace spmdsim::internal {

// A contiguous range of devices run by one worker thread.
struct alignas(64) Block {
  int64_t begin = 0;
  int64_t end = 0;
  // Summary of the last pass, for the barrier's leader.
  const CollectiveCall* ref = nullptr;  // the first waiting device's call
  int64_t ref_position = -1;
  int64_t waiting = 0;
  int64_t finished = 0;
  bool mismatch = false;                // some waiting device's call differs from ref
  bool closed = false;                  // every device finished; set once per Run
  std::atomic<uint64_t> progress{0};    // devices resumed so far (written by the block's worker, read by the watchdog)
};
static_assert(sizeof(Block) == 64, "one block per cache line: workers write their own blocks");

// Why a Run stopped early (the first reason wins; kept for debugging, the error says the rest).
enum class AbortReason : int {
  kNone = 0,
  kDeviceFailed,  // a device threw (here or, across ranks, on another rank)
  kMismatch,      // devices called different collectives
  kEarlyReturn,   // devices returned while others waited
  kDeadline,      // a device, or a rank, never arrived
  kHostError,     // the host could not compute a collective (its memory)
  kAcrossRanks,   // the protocol between ranks decided it (CrossRank::Failure: any of the above, or a lost rank)
};

// Sense-free barrier over blocks: arrivals add the number of blocks they bring; the arrival that completes
// the count runs the leader's section and then bumps the epoch, which the others spin on.
struct CrossBarrier {
  alignas(64) std::atomic<int64_t> arrived{0};
  alignas(64) std::atomic<uint64_t> epoch{0};
};
static_assert(sizeof(CrossBarrier) == 128, "arrivals and the epoch on two cache lines");

struct RunState {
  std::function<void(DeviceContext&)> fn;
  std::atomic<bool> published{false};          // set (release) once the Run's setup is complete
  int num_blocks = 0;
  int num_shares = 0;
  alignas(64) std::atomic<int> next_share{0};  // shares are claimed by the worker tasks that start first
  CrossBarrier barrier;
  alignas(64) std::atomic<int> abort{0};       // AbortReason
  ErrorCode abort_code SPMDSIM_GUARDED_BY(mu) = ErrorCode::kAborted;
  std::string abort_message SPMDSIM_GUARDED_BY(mu);
  ErrorKind abort_kind SPMDSIM_GUARDED_BY(mu) = ErrorKind::kNone;  // another rank's failure: its Error::kind()
  std::chrono::steady_clock::time_point abort_time SPMDSIM_GUARDED_BY(mu);
  // The current collective, written by the leader between barrier phases.
  Plan plan;
  bool plan_parallel = false;
  bool done = false;
  std::unique_ptr<CrossRank> cross;            // several processes: the protocol between ranks, else null
  uint64_t sequence = 0;                       // collectives so far
  std::atomic<uint64_t> episodes{0};           // barrier episodes completed (watchdog's progress signal)
  std::atomic<bool> release{true};             // the last barrier's verdict: resume the devices normally
  std::atomic<bool> executing{false};          // a leader section or a parallel phase is under way (watchdog)
  // Observer calls from workers are made under observer_mu and stop once Run has detached the observer
  // (an aborted Run that returns while devices still run).
  Mutex observer_mu;
  bool observer_detached SPMDSIM_GUARDED_BY(observer_mu) = false;
  std::vector<const CollectiveCall*> calls;    // leader's scratch
  // Completion: blocks closed (every device finished); also guards the abort's details.
  Mutex mu;
  std::condition_variable cv;
  int closed_blocks SPMDSIM_GUARDED_BY(mu) = 0;

  bool aborted() const { return abort.load(std::memory_order_acquire) != 0; }
  // First reason wins; returns whether this call set it.
  bool SetAbort(AbortReason reason, ErrorCode code, std::string message, ErrorKind kind = ErrorKind::kNone)
      SPMDSIM_EXCLUDES(mu);
  // The same with a failure the protocol between ranks reported (CrossRank::failure()).
  bool SetAbort(const CrossRank::Failure& failure) SPMDSIM_EXCLUDES(mu);
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_RUN_STATE_H_
