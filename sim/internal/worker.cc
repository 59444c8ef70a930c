#include "sim/internal/worker.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/strings.h"
#include "sim/internal/cross_rank.h"
#include "sim/internal/execute.h"
#include "sim/internal/fiber.h"
#include "sim/internal/plan.h"

namespace spmdsim::internal {
namespace {

// How long a waiting worker spins before it yields in a Run across ranks (the spin of one process is ~50 us).
constexpr std::chrono::microseconds kCrossRankSpin{2};

// Below this many bytes of output a collective's results are computed by the leader alone.
constexpr int64_t kParallelBytes = 64 * kKiB;

// --- Prefetching the next devices ------------------------------------------------------------------------
//
// At thousands of devices the cost of a device-wait is memory, not instructions: the lines of a suspended
// device's stack that the switch restores (its saved registers and the frames above them) and its
// DeviceContext are cold, and each stack is on its own page (a TLB miss too). A worker resumes the devices of
// its block in position order, so it asks for the lines of the device kPrefetchAhead positions ahead while it
// runs the current one. (perf on a 4096-device barrier: ~2/3 of the time was the first load from the resumed
// stack and the first load from the DeviceContext.)

constexpr int64_t kPrefetchAhead = 4;
constexpr int kPrefetchStackLines = 4;  // the saved context (64 B) and the frames of a wait above it

inline void PrefetchDevice(const DeviceSlot& s) {
  const void* saved = s.fiber;  // where the suspended device's registers were saved, below its frames
  if (saved != nullptr) {
    for (int line = 0; line < kPrefetchStackLines; ++line)
      __builtin_prefetch(static_cast<const char*>(saved) + 64 * line, /*rw=*/1, /*locality=*/3);
  }
  __builtin_prefetch(&s.context(), /*rw=*/0, /*locality=*/3);
}

// --- Workers -----------------------------------------------------------------------------------------------

class Worker {
 public:
  Worker(RuntimeCore& core, RunState& run)
      : core_(core),
        run_(run),
        mesh_(core.mesh),
        canary_base_(core.stacks.guarded() ? nullptr : core.stacks.canary_base()),
        stack_stride_(core.stacks.stride()) {}

  void Main() {
    int share = run_.next_share.fetch_add(1, std::memory_order_relaxed);
    if (share >= run_.num_shares) return;  // a late task: every share is already taken
    AddShare(share);
    // A completed barrier releases every waiting device (the next Pass resumes kWaiting devices; no loop
    // over the slots marks them ready). Whether they are released normally is the leader's verdict, the
    // same for every worker: so every device runs each step up to the one where something failed, and
    // which devices fail in that step does not depend on how the workers were scheduled.
    for (;;) {
      for (int block : blocks_) RunPass(core_.blocks[block]);
      if (run_.aborted() || !Barrier(/*lead=*/true)) break;
      if (run_.done) {
        CloseBlocks();
        return;
      }
      if (run_.plan_parallel && !(ExecuteShare(), Barrier(/*lead=*/false))) break;
    }
    Unwind();
  }

 private:
  // Takes one worker's share of the blocks; returns how many blocks it holds.
  int64_t AddShare(int share) {
    for (int b : core_.shares[share]) {
      blocks_.push_back(b);
      const Block& bl = core_.blocks[b];
      for (int64_t p = bl.begin; p < bl.end; ++p) core_.slots[p].run = &run_;  // stacks: mapped by Run
    }
    return static_cast<int64_t>(core_.shares[share].size());
  }

  void StartFiber(DeviceSlot& s) {
    s.fiber = fc::make_fcontext(s.stack.context.sp, s.stack.context.size, &DeviceEntry);
#if defined(SPMDSIM_TSAN)
    s.tsan_fiber = __tsan_create_fiber(0);
#endif
    Observe([&](RuntimeObserver& o) { o.OnDeviceStart(s.position); });
  }

  // Calls the observer, unless Run has already given up on this Run (an abort whose devices are still running
  // when Run returns: from then on the observer may be gone). Serialised with that hand-back by observer_mu.
  template <typename F>
  void Observe(F&& call) {
    RuntimeObserver* observer = core_.options.observer;
    if (observer == nullptr) return;
    MutexLock lock(run_.observer_mu);
    if (!run_.observer_detached) call(*observer);
  }

  // The thread's current device (what arrays made now are charged to) is set here and cleared once a pass
  // is over (end of Pass and of Unwind), not after every device: between two devices the worker makes no arrays.
  //
  // kCanary: the device's stack has no guard page (StackPool); its canary is checked after every switch out.
  template <bool kCanary>
  [[gnu::always_inline]] void Resume(DeviceSlot& s) {  // inlined into Pass, as it was before the split
    s.state.store(DeviceState::kRunning, std::memory_order_relaxed);
    SetCurrentSlot(&s);
    SwitchIntoDevice(s);
    if constexpr (kCanary) CheckStackCanary(s, CanaryOf(s.position));
    if (s.state.load(std::memory_order_relaxed) == DeviceState::kFinished) {
      SetCurrentSlot(nullptr);
#if defined(SPMDSIM_TSAN)
      __tsan_destroy_fiber(s.tsan_fiber);
      s.tsan_fiber = nullptr;
#endif
      if (s.outcome == Outcome::kThrew) {
        run_.SetAbort(AbortReason::kDeviceFailed, ErrorCode::kAborted, "a device failed");
      }
      Observe([&](RuntimeObserver& o) { o.OnDeviceFinish(s.position, s.outcome != Outcome::kReturned); });
    }
  }

  const char* CanaryOf(int64_t position) const {
    return canary_base_ + stack_stride_ * static_cast<size_t>(position);
  }

  // Pass, with the canary checks only when the stacks have no guard pages: the guarded hot path has no branch.
  void RunPass(Block& bl) { canary_base_ == nullptr ? Pass<false>(bl) : Pass<true>(bl); }

  // Runs every ready device of the block until it waits or finishes, and summarises the block.
  template <bool kCanary>
  void Pass(Block& bl) {
    bl.ref = nullptr;
    bl.ref_position = -1;
    bl.waiting = 0;
    bl.finished = 0;
    bl.mismatch = false;
    for (int64_t p = bl.begin; p < bl.end; ++p) {
      DeviceSlot& s = core_.slots[p];
      if (p + kPrefetchAhead < bl.end) {
        PrefetchDevice(core_.slots[p + kPrefetchAhead]);
        if constexpr (kCanary) __builtin_prefetch(CanaryOf(p + kPrefetchAhead), /*rw=*/0, /*locality=*/3);
      }
      DeviceState st = s.state.load(std::memory_order_relaxed);
      // Devices not started yet are started even if another device already failed in this first step:
      // every device runs the step in which the first failure happens (see Main).
      if (st == DeviceState::kNotStarted) {
        StartFiber(s);
        st = DeviceState::kReady;
      }
      if (st == DeviceState::kReady || st == DeviceState::kWaiting) {  // kWaiting: released by the barrier
        Resume<kCanary>(s);
        st = s.state.load(std::memory_order_relaxed);
        // The watchdog's sign of life: a device got to its next collective or finished (one uncontended
        // store on the block's own line).
        bl.progress.store(bl.progress.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      }
      if (st == DeviceState::kWaiting) {
        ++bl.waiting;
        if (bl.ref == nullptr) {
          bl.ref = s.call;
          bl.ref_position = p;
        } else if (bl.ref != s.call && !bl.mismatch && !SameCall(*bl.ref, *s.call)) {
          bl.mismatch = true;
        }
      } else {
        ++bl.finished;
      }
    }
    SetCurrentSlot(nullptr);
  }

  // The cross-thread barrier. Returns false when the Run was aborted.
  bool Barrier(bool lead) {
    CrossBarrier& bar = run_.barrier;
    const uint64_t epoch = bar.epoch.load(std::memory_order_acquire);
    if (Arrive(static_cast<int64_t>(blocks_.size()))) return Lead(epoch, lead);
    // Back-off by elapsed time: spin ~50 us (a pass over a few thousand devices), then yield the core up to
    // ~2 ms, then sleep in 50 us steps (a device computing for long; sleeping earlier costs a wake-up
    // latency per episode on a loaded machine).
    using Clock = std::chrono::steady_clock;
    Clock::time_point start{};
    for (uint64_t spin = 1;; ++spin) {
      if (bar.epoch.load(std::memory_order_acquire) != epoch) return run_.release.load(std::memory_order_relaxed);
      if (run_.aborted()) {
        // An abort seen after the barrier completed (a device of a faster worker failed in the next step)
        // does not change the leader's verdict.
        if (bar.epoch.load(std::memory_order_acquire) != epoch) return run_.release.load(std::memory_order_relaxed);
        return false;
      }
      if ((spin & 63) != 0) {
        __builtin_ia32_pause();
        continue;
      }
      const Clock::time_point now = Clock::now();
      if (spin == 64) start = now;
      const auto waited = now - start;
      // Across ranks, the leader's episode waits for the other ranks: a worker that only waits gives its core
      // to them (and to the leader) after a short spin instead of spinning ~50 us.
      if (waited < (run_.cross != nullptr ? kCrossRankSpin : std::chrono::microseconds(50))) continue;
      // A share no thread has claimed yet (oneTBB did not give us all the threads we asked for) is taken
      // over here, so the Run completes with any number of threads.
      if (lead && run_.next_share.load(std::memory_order_relaxed) < run_.num_shares) {
        int share = run_.next_share.fetch_add(1, std::memory_order_relaxed);
        if (share < run_.num_shares) {
          const int64_t count = AddShare(share);
          for (int b : core_.shares[share]) RunPass(core_.blocks[b]);
          if (Arrive(count)) return Lead(epoch, lead);
          continue;
        }
      }
      if (waited < std::chrono::milliseconds(2)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  bool Arrive(int64_t blocks) {
    return run_.barrier.arrived.fetch_add(blocks, std::memory_order_acq_rel) + blocks == run_.num_blocks;
  }

  bool Lead(uint64_t epoch, bool lead) {
    run_.barrier.arrived.store(0, std::memory_order_relaxed);
    run_.executing.store(true, std::memory_order_relaxed);  // the watchdog: collective work under way
    if (lead) LeaderSection();
    const bool release = !run_.aborted();
    // A parallel phase follows a collective's barrier: the work is still under way until its own barrier.
    run_.executing.store(lead && release && run_.plan_parallel, std::memory_order_relaxed);
    run_.release.store(release, std::memory_order_relaxed);  // published by the epoch's release store
    run_.episodes.fetch_add(1, std::memory_order_relaxed);
    run_.barrier.epoch.store(epoch + 1, std::memory_order_release);
    return release;
  }

  // What the blocks' summaries say about this barrier.
  struct Arrivals {
    int64_t waiting = 0;
    int64_t finished = 0;
    const CollectiveCall* ref = nullptr;  // a waiting device's call
    bool mismatch = false;                // some waiting device's call differs from ref
  };
  Arrivals Summarize() const {
    Arrivals a;
    for (const Block& bl : core_.blocks) {
      a.waiting += bl.waiting;
      a.finished += bl.finished;
      a.mismatch = a.mismatch || bl.mismatch;
      if (bl.ref == nullptr) continue;
      if (a.ref == nullptr) {
        a.ref = bl.ref;
      } else if (!a.mismatch && !SameCall(*a.ref, *bl.ref)) {
        a.mismatch = true;
      }
    }
    return a;
  }

  // The barrier's leader: decides the barrier (every device returned, or all wait at the same collective; else
  // the Run's abort), plans the collective and, when it is small, computes it.
  void LeaderSection() {
    run_.plan_parallel = false;
    if (run_.aborted()) return;
    const Arrivals arrivals = Summarize();
    if (arrivals.waiting == 0) {
      if (run_.cross != nullptr && !AgreeAcrossRanks(nullptr, CrossRank::Verdict::kDone)) return;
      run_.done = true;
      return;
    }
    if (arrivals.finished > 0) {
      ReportEarlyReturn();
      return;
    }
    if (arrivals.mismatch) {
      ReportMismatch();
      return;
    }
    const CollectiveCall& ref = *arrivals.ref;
    if (run_.cross != nullptr && !AgreeAcrossRanks(&ref, CrossRank::Verdict::kProceed)) return;
    const GroupInfo* groups = ref.op == OpKind::kBarrier ? nullptr : &core_.Groups(ref.axes);  // a barrier: no plan
    if (!PlanCollective(ref, groups)) return;
    if (core_.options.observer != nullptr) {
      std::vector<std::string> names;
      const CollectiveEvent event = MakeEvent(mesh_, ref, groups, run_.sequence, &names);
      Observe([&](RuntimeObserver& o) { o.OnCollective(event); });
    }
    ++run_.sequence;
    run_.plan_parallel = run_.num_shares > 1 && run_.plan.num_units > 1 && run_.plan.bytes_written >= kParallelBytes;
    if (!run_.plan_parallel) ExecutePlan(run_.plan, 0, run_.plan.num_units);
  }

  // Across ranks: the episode's verdict; false (the Run aborted with the ranks' failure) unless it is `expected`.
  bool AgreeAcrossRanks(const CollectiveCall* ref, CrossRank::Verdict expected) {
    CrossRank& cross = *run_.cross;
    if (cross.Agree(ref) == expected) return true;
    run_.SetAbort(cross.failure());
    return false;
  }

  // Builds the Run's plan of `ref` (groups: null for a barrier). False: the Run's abort is set (the results do not
  // fit the host, or a step across ranks failed).
  bool PlanCollective(const CollectiveCall& ref, const GroupInfo* groups) {
    try {
      if (groups == nullptr) {
        run_.plan.Clear();
        return true;
      }
      const int64_t n = mesh_.size();
      run_.calls.resize(n);
      for (int64_t p = 0; p < n; ++p) run_.calls[p] = core_.slots[p].call;
      if (run_.cross != nullptr) return BuildAcrossRanks(ref, *groups);
      BuildPlan(*groups, run_.calls, &run_.plan);
      return true;
    } catch (const std::bad_alloc&) {
      run_.SetAbort(AbortReason::kHostError, ErrorCode::kResourceExhausted,
                    fmt::format("the host ran out of memory computing {}", DescribeCall(mesh_, ref)));
    } catch (const Error& e) {  // the results' host buffers do not fit (Buffer::Allocate)
      run_.SetAbort(AbortReason::kHostError, e.code(),
                    fmt::format("{} (computing {})", e.message(), DescribeCall(mesh_, ref)));
    }
    return false;
  }

  // Several processes: the Plan of the local positions' results. A reduction over groups that span ranks
  // computes those groups by a chain of partial folds (CrossRank::ChainReduce) and the others with the Plan;
  // other collectives first fetch the remote inputs they read. False: the Run's abort is set.
  bool BuildAcrossRanks(const CollectiveCall& ref, const GroupInfo& groups) {
    CrossRank& cross = *run_.cross;
    const bool reduction = ref.op == OpKind::kPsum || ref.op == OpKind::kPmean || ref.op == OpKind::kPmax ||
                           ref.op == OpKind::kPmin || ref.op == OpKind::kPsumScatter;
    bool ok = true;
    if (!reduction) {
      ok = cross.FetchInputs(ref, groups, run_.calls);
      if (ok) BuildPlan(groups, run_.calls, &run_.plan, &ref, &cross.local());
    } else {
      BuildPlan(groups, run_.calls, &run_.plan, &ref, &cross.local(), &cross.SpanningGroups(groups));
      ok = cross.ChainReduce(ref, groups, run_.calls, run_.plan);
    }
    if (!ok) run_.SetAbort(cross.failure());
    return ok;
  }

  void ReportEarlyReturn() {
    std::vector<int64_t> finished;
    std::map<std::string, std::vector<int64_t>> waiting;
    for (int64_t p : core_.local_positions) {
      const DeviceSlot& s = core_.slots[p];
      if (s.state.load(std::memory_order_relaxed) == DeviceState::kWaiting) {
        waiting[DescribeCall(mesh_, *s.call)].push_back(p);
      } else {
        finished.push_back(p);
      }
    }
    std::vector<std::string> parts;
    for (const auto& [call, positions] : waiting)
      parts.push_back(fmt::format("{} wait at {}", DescribeDevices(mesh_, positions), call));
    run_.SetAbort(AbortReason::kEarlyReturn, ErrorCode::kFailedPrecondition,
                  fmt::format("devices returned while others wait at a collective: {} returned; {}",
                              DescribeDevices(mesh_, finished), fmt::join(parts, "; ")));
  }

  void ReportMismatch() {
    // Distinct calls in order of their first device.
    std::vector<std::pair<const CollectiveCall*, std::vector<int64_t>>> kinds;
    for (int64_t p : core_.local_positions) {
      const CollectiveCall* call = core_.slots[p].call;
      auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return SameCall(*k.first, *call); });
      if (it == kinds.end()) {
        kinds.push_back({call, {p}});
      } else {
        it->second.push_back(p);
      }
    }
    std::vector<std::string> parts;
    for (const auto& [call, positions] : kinds)
      parts.push_back(fmt::format("{} called {}", DescribeDevices(mesh_, positions), DescribeCall(mesh_, *call)));
    run_.SetAbort(AbortReason::kMismatch, ErrorCode::kInvalidArgument,
                  fmt::format("devices called different collectives at the same step (every device must call the "
                              "same collective with the same axes, parameters, shape and dtype): {}",
                              fmt::join(parts, "; ")));
  }

  void ExecuteShare() {
    const int64_t units = run_.plan.num_units;
    for (int b : blocks_) {
      int64_t begin = units * b / run_.num_blocks;
      int64_t end = units * (b + 1) / run_.num_blocks;
      ExecutePlan(run_.plan, begin, end);
    }
  }

  // Releases every device of this worker's blocks (and of any block no thread claimed) and closes them.
  void Unwind() {
    for (;;) {
      int share = run_.next_share.fetch_add(1, std::memory_order_relaxed);
      if (share >= run_.num_shares) break;
      AddShare(share);
    }
    bool again = true;
    while (again) {
      again = false;
      for (int block : blocks_) {
        const Block& bl = core_.blocks[block];
        for (int64_t p = bl.begin; p < bl.end; ++p) {
          DeviceSlot& s = core_.slots[p];
          switch (s.state.load(std::memory_order_relaxed)) {
            case DeviceState::kNotStarted:
              s.outcome = Outcome::kAborted;
              s.state.store(DeviceState::kFinished, std::memory_order_relaxed);
              break;
            case DeviceState::kWaiting:
              s.resume_aborted = true;
              [[fallthrough]];
            case DeviceState::kReady:
              canary_base_ == nullptr ? Resume<false>(s) : Resume<true>(s);
              again = true;  // a device that swallowed DeviceAborted may wait again
              break;
            default:
              break;
          }
        }
      }
    }
    SetCurrentSlot(nullptr);
    CloseBlocks();
  }

  void CloseBlocks() {
    MutexLock lock(run_.mu);
    for (int b : blocks_) {
      core_.blocks[b].closed = true;
      ++run_.closed_blocks;
    }
    if (run_.closed_blocks == run_.num_blocks) run_.cv.notify_all();
  }

  RuntimeCore& core_;
  RunState& run_;
  const Mesh& mesh_;
  const char* const canary_base_;  // StackPool::canary_base() when the stacks have no guard pages, else null
  const size_t stack_stride_;
  std::vector<int> blocks_;
};


}  // namespace

void WorkerEntry(std::unique_ptr<TaskArgs> args) {
  RunState& run = *args->run;
  // Wait until Run has enqueued every task (so that oneTBB's writes to the task object happen before this
  // thread's reads of it, for ThreadSanitizer's benefit too).
  while (!run.published.load(std::memory_order_acquire)) std::this_thread::yield();
  EnterWorkerThread();
  Worker(*args->core, run).Main();
  RuntimeCore& core = *args->core;
  MutexLock lock(core.tasks_mu);
  if (--core.tasks_outstanding == 0) core.tasks_cv.notify_all();
}

}  // namespace spmdsim::internal
