// Internals of sim/runtime.h: device slots, worker blocks, the cross-thread barrier and one Run's state, shared
// by the runtime's parts: the fibers (fiber_stack.h, fiber.h), the worker loop (worker.h), the watchdog
// (watchdog.h) and Runtime itself (sim/runtime.cc). Not for users; docs/runtime.md explains the design.
//
// Thread safety and ordering:
//  - A DeviceSlot's non-atomic fields are touched only by the worker thread that owns the slot's block and
//    by the device's own fiber, which runs on that thread (the worker switches into the fiber and back), so
//    they need no synchronisation; `state` and `waiting_op` are atomics because the watchdog (the thread in
//    Runtime::Run) reads them.
//  - A Block's summary is written by its worker before it arrives at the cross-thread barrier
//    (fetch_add acq_rel) and read by the last worker to arrive, which publishes the plan with a release
//    store of the barrier's epoch; the other workers acquire that epoch before reading the plan.
//  - RunState::abort moves once from kNone to a reason (compare-exchange, under `mu`); the winner writes the
//    code, message and time under `mu` right after the exchange, so readers take `mu` too.
//  - Fields guarded by a mutex say so with SPMDSIM_GUARDED_BY (common/thread_annotations.h; checked by the
//    `clang` preset).
#ifndef SPMDSIM_SIM_INTERNAL_CORE_H_
#define SPMDSIM_SIM_INTERNAL_CORE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_annotations.h"
#include "mesh/mesh.h"
#include "sim/device_context.h"
#include "sim/internal/collectives.h"
#include "sim/internal/cross_rank.h"
#include "sim/internal/fiber_stack.h"
#include "sim/memory.h"
#include "sim/observer.h"
#include "sim/runtime.h"

namespace spmdsim::internal {

// Thrown inside a device's fiber to unwind it when the Run is aborted (another device failed, the devices
// disagreed, or the deadline passed). Not derived from std::exception so that `catch (const std::exception&)`
// in user code lets it through.
struct DeviceAborted {};

enum class DeviceState : uint8_t {
  kNotStarted,  // fiber not yet entered in this Run
  kReady,       // will be resumed in the worker's next pass
  kRunning,     // the worker has switched into it
  kWaiting,     // at a collective (call points at its CollectiveCall); once the barrier completes, the
                // worker's next pass resumes it (wait_episode < RunState::episodes tells the two apart)
  kFinished,    // returned (or was unwound); `outcome` says how
};

enum class Outcome : uint8_t { kNone, kReturned, kThrew, kAborted };

// Hot fields first: a barrier touches only the first cache line of the slot.
struct alignas(64) DeviceSlot {
  std::atomic<DeviceState> state{DeviceState::kNotStarted};
  std::atomic<OpKind> waiting_op{OpKind::kBarrier};
  bool resume_aborted = false;          // set before resuming a waiting fiber that must unwind
  Outcome outcome = Outcome::kNone;
  std::atomic<uint32_t> wait_episode{0};  // RunState::episodes (low bits) when it last began to wait
  const CollectiveCall* call = nullptr; // on the fiber's stack (or kBarrierCall) while it waits
  void* fiber = nullptr;                // the device's saved context (an fcontext) while it is switched out
  void* worker = nullptr;               // the worker's saved context while the device runs
  struct RunState* run = nullptr;       // the Run this fiber belongs to
  DeviceMemory* memory_raw = nullptr;   // == memory.get()
  int64_t position = 0;
  // The device's DeviceContext lives in the slot (constructed by RuntimeCore), next to the hot line.
  alignas(DeviceContext) std::byte context_storage[sizeof(DeviceContext)];
  DeviceContext& context() { return *std::launder(reinterpret_cast<DeviceContext*>(context_storage)); }
  const DeviceContext& context() const {
    return *std::launder(reinterpret_cast<const DeviceContext*>(context_storage));
  }
  // Cold.
  alignas(64) std::shared_ptr<DeviceMemory> memory;
  std::exception_ptr error;
  FiberStack stack;
  void* asan_fake_stack = nullptr;      // the device's saved ASan fake stack while switched out
  void* tsan_fiber = nullptr;
  // ASan: the bounds of the worker thread's stack, learnt when the fiber is entered.
  const void* worker_stack_bottom = nullptr;
  size_t worker_stack_size = 0;
  void* worker_tsan_fiber = nullptr;    // TSan: the worker thread's own fiber
};

// The slot of the device whose code runs on this thread (set by the worker around every switch into a device,
// cleared once a pass is over), or nullptr. CurrentDevice() and CurrentDeviceMemory() read it.
DeviceSlot* CurrentSlot();
void SetCurrentSlot(DeviceSlot* slot);

// The layout the comment above claims: the hot fields (state .. position) share the slot's first cache line;
// the cold part starts on a line of its own. (offsetof on a non-standard-layout type: supported by GCC and
// Clang, which only warn.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(alignof(DeviceSlot) == 64);
static_assert(offsetof(DeviceSlot, position) + sizeof(int64_t) <= 64, "a barrier must touch one line of the slot");
static_assert(offsetof(DeviceSlot, memory) % 64 == 0);
#pragma GCC diagnostic pop

// "0-3, 5, 7-8"
std::string PositionRanges(const std::vector<int64_t>& positions);
// "positions 0-2 (device ids 4, 5, 6)"; device ids are listed only when they are not the positions.
std::string DescribeDevices(const Mesh& mesh, const std::vector<int64_t>& positions);

// The call every device makes at a Barrier: one shared object, so comparing two barrier calls is comparing
// two pointers and a waiting device keeps nothing on its stack.
extern const CollectiveCall kBarrierCall;

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

enum class AbortReason : int { kNone = 0, kDeviceFailed, kMismatch, kEarlyReturn, kDeadline, kHostError };

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
  bool plan_has_result = false;
  DType result_dtype = DType::kF32;
  std::vector<int64_t> result_shape;
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
  bool SetAbort(AbortReason reason, ErrorCode code, std::string message, ErrorKind kind = ErrorKind::kNone) SPMDSIM_EXCLUDES(mu);
};

struct RuntimeCore {
  // `owner`: the rank of every position (all 0 in one process); this process is `rank`.
  RuntimeCore(Mesh mesh, RuntimeOptions options, int num_workers, std::vector<int> owner, int rank);
  ~RuntimeCore();

  // Maps every device's fiber stack in `stacks` (kept across Runs; under ASan, clears their poison every Run).
  // Called by Run on its own thread before any device starts. Throws Error(kResourceExhausted) naming the
  // number of devices and the bytes their stacks need when they cannot be mapped (an address-space limit).
  void MapStacks();

  // Called by DeviceContext on the device's fiber.
  Array Collective(DeviceSlot& slot, CollectiveCall& call);
  void WaitAtBarrier(DeviceSlot& slot);
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
