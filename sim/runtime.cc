#include "sim/runtime.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <thread>

#include <fmt/format.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include "common/strings.h"
#include "sim/internal/core.h"
#include "sim/internal/cross_rank.h"
#include "sim/internal/run_state.h"
#include "sim/internal/transport.h"
#include "sim/internal/watchdog.h"
#include "sim/internal/worker.h"
#include "sim/process_group.h"

namespace spmdsim {

DeviceError::DeviceError(ErrorCode code, std::string message, ErrorKind kind, int64_t position, int device_id,
                         std::exception_ptr original)
    : Error(code, std::move(message), kind),
      position_(position),
      device_id_(device_id),
      original_(std::move(original)) {}

DeviceError DeviceError::FromDevice(const Mesh& mesh, int64_t position, std::exception_ptr original) {
  ErrorCode code = ErrorCode::kAborted;
  ErrorKind kind = ErrorKind::kNone;
  std::string what;
  try {
    std::rethrow_exception(original);
  } catch (const Error& e) {
    code = e.code();
    kind = e.kind();
    what = e.what();
  } catch (const std::bad_alloc&) {  // e.g. under an address-space limit
    code = ErrorCode::kResourceExhausted;
    what = "the host ran out of memory (std::bad_alloc)";
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  const int device_id = mesh.DeviceAt(position);
  return DeviceError(code,
                     fmt::format("device {} (position {}, coords {}) failed: {}", device_id, position,
                                 PyTuple(mesh.CoordsOfPosition(position)), what),
                     kind, position, device_id, std::move(original));
}

namespace internal {

struct WorkerPool {
  explicit WorkerPool(int workers)
      // One thread more than the arena's slots: oneTBB counts the (absent) external thread in the limit.
      : limit(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(workers) + 1),
        arena(workers, /*reserved_for_masters=*/0) {}
  tbb::global_control limit;
  tbb::task_arena arena;
};

}  // namespace internal

using internal::DeviceState;
using internal::RunState;

Runtime::Runtime(Mesh mesh, RuntimeOptions options) {
  ValidateRuntimeOptions(mesh, options);
  int threads = options.num_threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  int rank = 0;
  std::vector<int> owner(static_cast<size_t>(mesh.size()), 0);
  if (options.process_group != nullptr && options.process_group->size() > 1) {
    rank = options.process_group->rank();
    owner = PlaceDevices(mesh, options.process_group->size());
  } else {
    options.process_group = nullptr;  // one rank: the one-process runtime
  }
  // Up front, before a slot is built or a stack mapped: stacks that cannot fit are refused naming the limit.
  internal::CheckFiberStacksFit(mesh.size(), options.fiber_stack_bytes);
  const int64_t local = std::count(owner.begin(), owner.end(), rank);
  const int workers = static_cast<int>(std::min<int64_t>(threads, local));
  core_ = std::make_shared<internal::RuntimeCore>(std::move(mesh), std::move(options), workers, std::move(owner), rank);
  pool_ = std::make_unique<internal::WorkerPool>(workers);
}


Runtime::~Runtime() {
  if (!core_) return;
  auto deadline = std::chrono::steady_clock::now() + core_->options.collective_timeout;
  // Every task enqueued must have returned before the arena goes (oneTBB would drop a task that has not
  // started yet, and its arguments with it).
  internal::RuntimeCore& core = *core_;
  MutexLock lock(core.tasks_mu);
  if (!lock.WaitUntil(core.tasks_cv, deadline, [&]() SPMDSIM_REQUIRES(core.tasks_mu) {
        return core.tasks_outstanding == 0;
      })) {
    // A device is still running on a worker thread: leave the threads and the state they use behind.
    (void)pool_.release();
  }
}

const Mesh& Runtime::mesh() const { return core_->mesh; }
int64_t Runtime::num_devices() const { return core_->mesh.size(); }
int Runtime::num_workers() const { return core_->num_workers; }
int Runtime::rank() const { return core_->rank; }
int Runtime::owner(int64_t position) const {
  if (position < 0 || position >= num_devices())
    Throw(ErrorCode::kOutOfRange, "device position {} out of range [0, {})", position, num_devices());
  return core_->owner[position];
}
const RuntimeOptions& Runtime::options() const { return core_->options; }

MemoryStats Runtime::memory_stats(int64_t position) const {
  if (position < 0 || position >= num_devices())
    Throw(ErrorCode::kOutOfRange, "device position {} out of range [0, {})", position, num_devices());
  return core_->slots[position].memory->stats();
}

void Runtime::ResetPeakMemory() {
  for (auto& s : core_->slots) s.memory->ResetPeak();
}


namespace {

// Resets every slot and block for a new Run of `fn`.
std::shared_ptr<RunState> PrepareRun(internal::RuntimeCore& core, const std::function<void(DeviceContext&)>& fn) {
  auto run = std::make_shared<RunState>();
  run->fn = fn;
  run->num_blocks = static_cast<int>(core.blocks.size());
  run->num_shares = static_cast<int>(core.shares.size());
  for (auto& s : core.slots) {
    s.state.store(DeviceState::kNotStarted, std::memory_order_relaxed);
    s.outcome = internal::Outcome::kNone;
    s.error = nullptr;
    s.resume_aborted = false;
    s.call = nullptr;
  }
  for (auto& b : core.blocks) b.closed = false;
  return run;
}

// The error of a Run that did not complete: the first device that threw (in a closed block, lowest position),
// else the Run's abort reason.
[[noreturn]] void ThrowLocalRunError(const internal::RuntimeCore& core, RunState& run, bool all_closed) {
  MutexLock lock(run.mu);
  for (const auto& bl : core.blocks) {
    if (!bl.closed) continue;
    for (int64_t p = bl.begin; p < bl.end; ++p) {
      const auto& s = core.slots[p];
      if (s.outcome == internal::Outcome::kThrew) throw DeviceError::FromDevice(core.mesh, p, s.error);
    }
  }
  std::string message = run.abort_message;
  if (!all_closed) {
    message += fmt::format(
        " [devices at positions {} are still running on their worker threads; they are unwound when they reach a "
        "collective]",
        internal::StillRunning(core));
  }
  throw Error(run.abort_code, message, run.abort_kind);  // under run.mu (lock above)
}

// Several processes: the error every rank reports. A failure an episode already settled is reported as the
// Run's abort; a failure of this rank alone is told to the others first ("rank R: ..."; the lowest failing
// rank's wins), keeping the DeviceError when it is this rank's.
[[noreturn]] void ThrowRunError(const internal::RuntimeCore& core, RunState& run, bool all_closed) {
  if (run.cross == nullptr || run.cross->settled()) ThrowLocalRunError(core, run, all_closed);
  try {
    ThrowLocalRunError(core, run, all_closed);
  } catch (const DeviceError& e) {
    const internal::CrossRank::Failure f = run.cross->SettleLocalFailure(e.code(), e.kind(), e.message());
    if (f.mine) throw DeviceError(e.code(), f.message, e.kind(), e.position(), e.device_id(), e.nested_ptr());
    throw Error(f.code, f.message, f.kind);
  } catch (const Error& e) {
    const internal::CrossRank::Failure f = run.cross->SettleLocalFailure(e.code(), e.kind(), e.message());
    throw Error(f.code, f.message, f.kind);
  }
}

}  // namespace

void Runtime::Run(const std::function<void(DeviceContext&)>& fn) {
  using Clock = std::chrono::steady_clock;
  internal::RuntimeCore& core = *core_;
  if (internal::CurrentSlot() != nullptr)
    Throw(ErrorCode::kFailedPrecondition, "Runtime::Run called from inside a virtual device");
  if (!core.run_mu.TryLock())
    Throw(ErrorCode::kFailedPrecondition, "Runtime::Run is already running on another thread");
  MutexLock one_run(core.run_mu, std::adopt_lock);
  if (core.run) {
    RunState& previous = *core.run;
    if (previous.published.load() && !internal::WaitClosed(previous, Clock::now() + core.options.collective_timeout)) {
      Throw(ErrorCode::kFailedPrecondition,
            "a device of the previous Run is still running (positions {}); it never reached a collective after the "
            "Run was aborted",
            internal::StillRunning(core));
    }
  }
  core.MapStacks();  // before any device starts: a stack that cannot be mapped is an error, not a crash
  std::shared_ptr<RunState> run = PrepareRun(core, fn);
  if (core.options.process_group != nullptr) {
    internal::Transport& transport = core.options.process_group->transport();
    run->cross = std::make_unique<internal::CrossRank>(transport, core.mesh, core.owner, transport.NextRunIndex(),
                                                       core.options.collective_timeout);
  }
  core.run = run;
  RuntimeObserver* observer = core.options.observer;
  if (observer != nullptr) observer->OnRunStart(core.mesh.size());
  {
    MutexLock lock(core.tasks_mu);
    core.tasks_outstanding += core.num_workers;
  }
  for (int w = 0; w < core.num_workers; ++w) {
    internal::Handoff handoff(new internal::TaskArgs{core_, run});
    pool_->arena.enqueue([handoff = std::move(handoff)] {
      internal::WorkerEntry(std::unique_ptr<internal::TaskArgs>(handoff.get()));
    });
  }
  run->published.store(true, std::memory_order_release);

  const bool all_closed = internal::WatchRun(core, *run);

  // Results. Only blocks that closed may be read (a stuck device's block still belongs to its worker).
  if (!run->aborted() && all_closed) {
    if (observer != nullptr) observer->OnRunEnd(true);
    return;
  }
  if (observer != nullptr) {
    // Devices may still be running (a device that never arrived); the workers stop calling the observer now.
    {
      MutexLock lock(run->observer_mu);
      run->observer_detached = true;
    }
    observer->OnRunEnd(false);
  }
  ThrowRunError(core, *run, all_closed);
}

}  // namespace spmdsim
