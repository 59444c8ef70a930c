#include "sim/runtime.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <map>
#include <optional>
#include <thread>

#include <boost/context/detail/fcontext.hpp>
#include <fmt/format.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include "common/strings.h"
#include "sim/internal/core.h"

#if defined(SPMDSIM_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(SPMDSIM_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace spmdsim {


DeviceError::DeviceError(ErrorCode code, std::string message, std::string kind, int64_t position, int device_id,
                         std::exception_ptr original)
    : Error(code, std::move(message), std::move(kind)),
      position_(position),
      device_id_(device_id),
      original_(std::move(original)) {}

namespace internal {

struct WorkerPool {
  explicit WorkerPool(int workers)
      // One thread more than the arena's slots: oneTBB counts the (absent) external thread in the limit.
      : limit(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(workers) + 1),
        arena(workers, /*reserved_for_masters=*/0) {}
  tbb::global_control limit;
  tbb::task_arena arena;
};

bool RunState::SetAbort(AbortReason reason, ErrorCode code, std::string message) {
  // The message is written under `mu` by the one caller that wins the exchange; readers take `mu` too.
  std::lock_guard lock(mu);
  int expected = 0;
  if (!abort.compare_exchange_strong(expected, static_cast<int>(reason), std::memory_order_acq_rel)) return false;
  abort_code = code;
  abort_message = std::move(message);
  abort_time = std::chrono::steady_clock::now();
  cv.notify_all();
  return true;
}

namespace {

constexpr int64_t kParallelBytes = 64 * 1024;

// Sanitizer builds have much larger frames (redzones, fake stacks).
#if defined(SPMDSIM_ASAN) || defined(SPMDSIM_TSAN)
constexpr size_t kSanitizerStackFactor = 4;
#else
constexpr size_t kSanitizerStackFactor = 1;
#endif  // below this a collective's results are computed by one worker

// "0-3, 5, 7-8"
std::string PositionRanges(const std::vector<int64_t>& positions) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < positions.size();) {
    size_t j = i;
    while (j + 1 < positions.size() && positions[j + 1] == positions[j] + 1) ++j;
    parts.push_back(j == i ? fmt::format("{}", positions[i]) : fmt::format("{}-{}", positions[i], positions[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// "positions 0-2 (devices 0, 1, 2)"; device ids are listed only when they are not the positions.
std::string DescribeDevices(const Mesh& mesh, const std::vector<int64_t>& positions) {
  if (positions.empty()) return "none";
  std::string text = fmt::format("{} {}", positions.size() == 1 ? "position" : "positions", PositionRanges(positions));
  bool same = true;
  for (int64_t p : positions) same = same && mesh.DeviceAt(p) == p;
  if (!same) {
    std::vector<int> ids;
    for (int64_t p : positions) ids.push_back(mesh.DeviceAt(p));
    text += fmt::format(" (device ids {})", fmt::join(ids, ", "));
  }
  return text;
}

// --- Fiber stacks ------------------------------------------------------------------------------------------

// ASan keeps shadow memory for addresses, not mappings: frames a fiber left poisoned (a stack switched away
// from, or unwound past) would still be poisoned when the stack is reused or its addresses mapped again.
void UnpoisonStack(FiberStack& stack) {
#if defined(SPMDSIM_ASAN)
  if (stack.base != nullptr) ASAN_UNPOISON_MEMORY_REGION(stack.base, stack.mapped);
#endif
  (void)stack;
}

void EnsureStack(FiberStack& stack, size_t size) {
  if (stack.base != nullptr) {
    UnpoisonStack(stack);
    return;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t usable = (size + page - 1) / page * page;
  const size_t mapped = usable + page;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    Throw(ErrorCode::kResourceExhausted, "cannot map a {} fiber stack for a virtual device", HumanBytes(mapped));
  }
  mprotect(base, page, PROT_NONE);  // guard page: a stack overflow faults instead of corrupting memory
  stack.base = base;
  stack.mapped = mapped;
  // Stack colouring: the tops of page-aligned stacks all share one page offset, so the hot top frames of
  // thousands of devices would compete for the same cache sets; shift each top by 0..31 cache lines.
  // (At most half a page, so that the few hot frames stay on the stack's top page.)
  const size_t colour = (reinterpret_cast<uintptr_t>(base) / mapped % 32) * 64;
  stack.context.size = usable - colour;
  stack.context.sp = static_cast<char*>(base) + mapped - colour;
  UnpoisonStack(stack);
}

void FreeStack(FiberStack& stack) {
  if (stack.base == nullptr) return;
  UnpoisonStack(stack);
  munmap(stack.base, stack.mapped);
  stack.base = nullptr;
}

// --- Switching, with the sanitizers told about every stack switch --------------------------------------------
//
// Devices are boost::context fcontexts (make_fcontext on the device's pooled stack). The switch itself is
// ours on x86-64 (SysV): boost's jump_fcontext also saves and restores the SSE control/status word and the x87
// control word, which costs more than the rest of the switch (4.5 ns of 14 ns per device-wait at 4096 devices,
// measured). So a worker thread's floating-point environment (rounding mode, exception masks) is shared by the
// devices it runs, as it is by functions called on one thread; a device that changes it must restore it before
// it reaches a collective. Elsewhere boost's jump_fcontext is used.

namespace fc = boost::context::detail;

#if defined(__x86_64__) && defined(__linux__) && !defined(SPMDSIM_BOOST_JUMP)
// Same frame layout as boost's jump_fcontext (x86_64 SysV ELF), so contexts made by make_fcontext start with it:
// callee-saved registers at 0x8..0x30, the return address at 0x38; 0x0..0x7 (boost's FPU words) unused.
extern "C" fc::transfer_t spmdsim_jump_fcontext(fc::fcontext_t to, void* data);
asm(R"(
    .text
    .globl spmdsim_jump_fcontext
    .hidden spmdsim_jump_fcontext
    .type spmdsim_jump_fcontext,@function
    .align 16
spmdsim_jump_fcontext:
    leaq  -0x38(%rsp), %rsp
    movq  %r12, 0x8(%rsp)
    movq  %r13, 0x10(%rsp)
    movq  %r14, 0x18(%rsp)
    movq  %r15, 0x20(%rsp)
    movq  %rbx, 0x28(%rsp)
    movq  %rbp, 0x30(%rsp)
    movq  %rsp, %rax
    movq  %rdi, %rsp
    movq  0x38(%rsp), %r8
    movq  0x8(%rsp), %r12
    movq  0x10(%rsp), %r13
    movq  0x18(%rsp), %r14
    movq  0x20(%rsp), %r15
    movq  0x28(%rsp), %rbx
    movq  0x30(%rsp), %rbp
    leaq  0x40(%rsp), %rsp
    movq  %rsi, %rdx
    movq  %rax, %rdi
    jmp   *%r8
    .size spmdsim_jump_fcontext,.-spmdsim_jump_fcontext
)");
inline fc::transfer_t Jump(fc::fcontext_t to, void* data) { return spmdsim_jump_fcontext(to, data); }
#else
inline fc::transfer_t Jump(fc::fcontext_t to, void* data) { return fc::jump_fcontext(to, data); }
#endif

struct WorkerThreadState {
  void* asan_fake_stack = nullptr;
  void* tsan_fiber = nullptr;
  const DeviceSlot* running = nullptr;  // the device this thread runs (read by the SIGSEGV handler)
  bool alt_stack = false;               // sigaltstack installed for this thread
};
thread_local WorkerThreadState worker_thread;

// --- A device that overflows its stack -----------------------------------------------------------------------
//
// A fiber stack has a guard page below it; running into it is a SIGSEGV that would kill the process with no
// word of which device or why. Worker threads get an alternate signal stack and a SIGSEGV handler that, when
// the faulting address is in the guard page of the device the thread runs, writes which device overflowed and
// how to give it more stack, then lets the signal take its default course (the process still dies: the device's
// stack is corrupt and cannot be unwound). Other faults go to the handler that was there before. Not installed
// under AddressSanitizer/ThreadSanitizer, which report stack overflows themselves.

#if !defined(SPMDSIM_ASAN) && !defined(SPMDSIM_TSAN)
struct sigaction previous_segv_action;

// Async-signal-safe decimal.
size_t FormatUnsigned(char* out, uint64_t value) {
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  for (size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

// Lets the signal take its default course: the faulting instruction runs again and the process ends.
void RestoreDefaultSegv() {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, nullptr);
}

void OnSegv(int signal, siginfo_t* info, void* context) {
  const DeviceSlot* s = worker_thread.running;
  const char* address = static_cast<const char*>(info->si_addr);
  const char* guard = s != nullptr ? static_cast<const char*>(s->stack.base) : nullptr;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));  // async-signal-safe
  if (guard != nullptr && address >= guard && address < guard + page) {
    char message[320];
    size_t n = 0;
    const auto append = [&](const char* text) {
      for (; *text != 0 && n < sizeof(message); ++text) message[n++] = *text;
    };
    append("spmdsim: the virtual device at position ");
    n += FormatUnsigned(message + n, static_cast<uint64_t>(s->position));
    append(" overflowed its ");
    n += FormatUnsigned(message + n, (s->stack.mapped - page) / 1024);
    append(" KiB fiber stack (deep recursion or large local arrays in the device function); raise "
           "RuntimeOptions::fiber_stack_bytes\n");
    ssize_t written = write(STDERR_FILENO, message, n);
    (void)written;
    RestoreDefaultSegv();
    return;
  }
  if ((previous_segv_action.sa_flags & SA_SIGINFO) != 0 && previous_segv_action.sa_sigaction != nullptr) {
    previous_segv_action.sa_sigaction(signal, info, context);
    return;
  }
  if ((previous_segv_action.sa_flags & SA_SIGINFO) == 0 && previous_segv_action.sa_handler != SIG_DFL &&
      previous_segv_action.sa_handler != SIG_IGN) {
    previous_segv_action.sa_handler(signal);
    return;
  }
  RestoreDefaultSegv();
}

// Once per process: the handler; once per worker thread: its alternate signal stack (kept for the thread's life).
void InstallStackOverflowReport() {
  if (worker_thread.alt_stack) return;
  worker_thread.alt_stack = true;
  static std::once_flag handler_once;
  std::call_once(handler_once, [] {
    struct sigaction action {};
    action.sa_sigaction = &OnSegv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_segv_action);
  });
  const size_t size = 64 * 1024;
  void* stack = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stack == MAP_FAILED) return;
  stack_t alt{};
  alt.ss_sp = stack;
  alt.ss_size = size;
  if (sigaltstack(&alt, nullptr) != 0) munmap(stack, size);
}
#else
void InstallStackOverflowReport() {}
#endif

// Worker -> device. Returns when the device switches back (it waits or has finished).
void SwitchIntoDevice(DeviceSlot& s) {
#if defined(SPMDSIM_TSAN)
  s.worker_tsan_fiber = worker_thread.tsan_fiber;
#endif
#if defined(SPMDSIM_ASAN)
  WorkerThreadState& w = worker_thread;
  __sanitizer_start_switch_fiber(&w.asan_fake_stack,
                                 static_cast<char*>(s.stack.context.sp) - s.stack.context.size,
                                 s.stack.context.size);
#endif
#if defined(SPMDSIM_TSAN)
  __tsan_switch_to_fiber(s.tsan_fiber, 0);
#endif
  s.fiber = Jump(s.fiber, &s).fctx;
#if defined(SPMDSIM_ASAN)
  __sanitizer_finish_switch_fiber(w.asan_fake_stack, nullptr, nullptr);
#endif
}

// Tells the sanitizers that the device's stack is being left for the worker's. `finishing`: for good (the fiber
// is never resumed).
void AnnounceSwitchToWorker(DeviceSlot& s, bool finishing) {
#if defined(SPMDSIM_ASAN)
  __sanitizer_start_switch_fiber(finishing ? nullptr : &s.asan_fake_stack, s.worker_stack_bottom,
                                 s.worker_stack_size);
#endif
#if defined(SPMDSIM_TSAN)
  __tsan_switch_to_fiber(s.worker_tsan_fiber, 0);
#endif
  (void)s;
  (void)finishing;
}

// Device -> worker, from a device that waits; returns when the worker resumes it.
void SwitchToWorker(DeviceSlot& s) {
  AnnounceSwitchToWorker(s, /*finishing=*/false);
  s.worker = Jump(s.worker, nullptr).fctx;
#if defined(SPMDSIM_ASAN)
  __sanitizer_finish_switch_fiber(s.asan_fake_stack, &s.worker_stack_bottom, &s.worker_stack_size);
#endif
}

// A device's fiber: runs the Run's function, records how it ended, and switches to the worker for good (the
// stack is reused from its top by the next Run's make_fcontext).
[[noreturn]] void DeviceEntry(fc::transfer_t t) {
  DeviceSlot& s = *static_cast<DeviceSlot*>(t.data);
  s.worker = t.fctx;
#if defined(SPMDSIM_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &s.worker_stack_bottom, &s.worker_stack_size);
#endif
  try {
    s.run->fn(s.context());
    s.outcome = Outcome::kReturned;
  } catch (const DeviceAborted&) {
    s.outcome = Outcome::kAborted;
  } catch (...) {
    s.error = std::current_exception();
    s.outcome = Outcome::kThrew;
  }
  s.call = nullptr;
  s.state.store(DeviceState::kFinished, std::memory_order_relaxed);
  AnnounceSwitchToWorker(s, /*finishing=*/true);
  Jump(s.worker, nullptr);
  __builtin_unreachable();
}

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
  Worker(RuntimeCore& core, RunState& run) : core_(core), run_(run), mesh_(core.mesh) {}

  void Main() {
    int b = run_.next_block.fetch_add(1, std::memory_order_relaxed);
    if (b >= run_.num_blocks) return;  // a late task: every block is already taken
    AddBlock(b);
    // A completed barrier releases every waiting device (the next Pass resumes kWaiting devices; no loop
    // over the slots marks them ready). Whether they are released normally is the leader's verdict, the
    // same for every worker: so every device runs each step up to the one where something failed, and
    // which devices fail in that step does not depend on how the workers were scheduled.
    for (;;) {
      for (int block : blocks_) Pass(core_.blocks[block]);
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
  void AddBlock(int b) {
    blocks_.push_back(b);
    const Block& bl = core_.blocks[b];
    for (int64_t p = bl.begin; p < bl.end; ++p) {
      DeviceSlot& s = core_.slots[p];
      EnsureStack(s.stack, core_.options.fiber_stack_bytes * kSanitizerStackFactor);
      s.run = &run_;
    }
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
    std::lock_guard lock(run_.observer_mu);
    if (!run_.observer_detached) call(*observer);
  }

  // The thread's current device (what arrays made now are charged to) is set here and cleared once a pass
  // is over (end of Pass and of Unwind), not after every device: between two devices the worker makes no arrays.
  void Resume(DeviceSlot& s) {
    s.state.store(DeviceState::kRunning, std::memory_order_relaxed);
    SetCurrentSlot(&s);
    worker_thread.running = &s;
    SwitchIntoDevice(s);
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

  // Runs every ready device of the block until it waits or finishes, and summarises the block.
  void Pass(Block& bl) {
    bl.ref = nullptr;
    bl.ref_position = -1;
    bl.waiting = 0;
    bl.finished = 0;
    bl.mismatch = false;
    for (int64_t p = bl.begin; p < bl.end; ++p) {
      DeviceSlot& s = core_.slots[p];
      if (p + kPrefetchAhead < bl.end) PrefetchDevice(core_.slots[p + kPrefetchAhead]);
      DeviceState st = s.state.load(std::memory_order_relaxed);
      // Devices not started yet are started even if another device already failed in this first step:
      // every device runs the step in which the first failure happens (see Main).
      if (st == DeviceState::kNotStarted) {
        StartFiber(s);
        st = DeviceState::kReady;
      }
      if (st == DeviceState::kReady || st == DeviceState::kWaiting) {  // kWaiting: released by the barrier
        Resume(s);
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
      if (waited < std::chrono::microseconds(50)) continue;
      // A block no thread has claimed yet (oneTBB did not give us all the threads we asked for) is taken
      // over here, so the Run completes with any number of threads.
      if (lead && run_.next_block.load(std::memory_order_relaxed) < run_.num_blocks) {
        int b = run_.next_block.fetch_add(1, std::memory_order_relaxed);
        if (b < run_.num_blocks) {
          AddBlock(b);
          Pass(core_.blocks[b]);
          if (Arrive(1)) return Lead(epoch, lead);
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

  void LeaderSection() {
    run_.plan_parallel = false;
    if (run_.aborted()) return;
    int64_t waiting = 0, finished = 0;
    const CollectiveCall* ref = nullptr;
    bool mismatch = false;
    for (const Block& bl : core_.blocks) {
      waiting += bl.waiting;
      finished += bl.finished;
      mismatch = mismatch || bl.mismatch;
      if (bl.ref != nullptr) {
        if (ref == nullptr) {
          ref = bl.ref;
        } else if (!mismatch && !SameCall(*ref, *bl.ref)) {
          mismatch = true;
        }
      }
    }
    if (waiting == 0) {
      run_.done = true;
      return;
    }
    if (finished > 0) {
      ReportEarlyReturn();
      return;
    }
    if (mismatch) {
      ReportMismatch();
      return;
    }
    const GroupInfo* groups = nullptr;
    if (ref->op != OpKind::kBarrier) {  // a barrier has no data: nothing to plan
      const int64_t n = mesh_.size();
      run_.calls.resize(n);
      for (int64_t p = 0; p < n; ++p) run_.calls[p] = core_.slots[p].call;
      groups = &core_.Groups(ref->axes);
    }
    try {
      if (groups != nullptr) {
        run_.plan.Build(mesh_, *groups, run_.calls);
      } else {
        run_.plan.Clear();
      }
    } catch (const std::bad_alloc&) {
      run_.SetAbort(AbortReason::kHostError, ErrorCode::kResourceExhausted,
                    fmt::format("the host ran out of memory computing {}", DescribeCall(mesh_, *ref)));
      return;
    }
    if (core_.options.observer != nullptr) {
      CollectiveEvent event;
      event.op = ref->op;
      std::vector<std::string> names = AxesNames(mesh_, ref->axes);
      event.axes = names;
      event.group_size = ref->group_size;
      event.num_groups = groups == nullptr ? 1 : static_cast<int64_t>(groups->groups.size());
      if (groups != nullptr) {
        event.groups = groups->groups;
        event.dtype = ref->input->dtype();
        event.input_bytes_per_device = ref->input->nbytes();
        event.output_bytes_per_device = NumElements(ref->out_shape) * DTypeSize(ref->out_dtype);
        event.abstract = ref->input->is_abstract();
        event.permutation = ref->perm;
      }
      event.sequence = run_.sequence;
      Observe([&](RuntimeObserver& o) { o.OnCollective(event); });
    }
    ++run_.sequence;
    run_.plan_parallel = run_.num_blocks > 1 && run_.plan.num_units() > 1 && run_.plan.bytes_written() >= kParallelBytes;
    if (!run_.plan_parallel) run_.plan.Execute(0, run_.plan.num_units());
  }

  void ReportEarlyReturn() {
    std::vector<int64_t> finished;
    std::map<std::string, std::vector<int64_t>> waiting;
    for (int64_t p = 0; p < mesh_.size(); ++p) {
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
    for (int64_t p = 0; p < mesh_.size(); ++p) {
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
    const int64_t units = run_.plan.num_units();
    for (int b : blocks_) {
      int64_t begin = units * b / run_.num_blocks;
      int64_t end = units * (b + 1) / run_.num_blocks;
      run_.plan.Execute(begin, end);
    }
  }

  // Releases every device of this worker's blocks (and of any block no thread claimed) and closes them.
  void Unwind() {
    for (;;) {
      int b = run_.next_block.fetch_add(1, std::memory_order_relaxed);
      if (b >= run_.num_blocks) break;
      AddBlock(b);
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
              Resume(s);
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
    std::lock_guard lock(run_.mu);
    for (int b : blocks_) {
      core_.blocks[b].closed = true;
      ++run_.closed_blocks;
    }
    if (run_.closed_blocks == run_.num_blocks) run_.cv.notify_all();
  }

  RuntimeCore& core_;
  RunState& run_;
  const Mesh& mesh_;
  std::vector<int> blocks_;
};

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
  Handoff(Handoff&& other) noexcept { args_.store(other.args_.load(std::memory_order_acquire), std::memory_order_release); }
  Handoff(const Handoff&) = delete;
  TaskArgs* get() const { return args_.load(std::memory_order_acquire); }

 private:
  std::atomic<TaskArgs*> args_{nullptr};
};

void WorkerEntry(std::unique_ptr<TaskArgs> args) {
  RunState& run = *args->run;
  // Wait until Run has enqueued every task (so that oneTBB's writes to the task object happen before this
  // thread's reads of it, for ThreadSanitizer's benefit too).
  while (!run.published.load(std::memory_order_acquire)) std::this_thread::yield();
#if defined(SPMDSIM_TSAN)
  worker_thread.tsan_fiber = __tsan_get_current_fiber();
#endif
  InstallStackOverflowReport();
  Worker(*args->core, run).Main();
  RuntimeCore& core = *args->core;
  std::lock_guard lock(core.tasks_mu);
  if (--core.tasks_outstanding == 0) core.tasks_cv.notify_all();
}

}  // namespace

RuntimeCore::RuntimeCore(Mesh mesh_in, RuntimeOptions options_in, int workers)
    : mesh(std::move(mesh_in)), options(std::move(options_in)), num_workers(workers), slots(mesh.size()) {
  int64_t capacity = options.device_memory_bytes;
  if (capacity == 0) capacity = mesh.topology() != nullptr ? mesh.topology()->memory_bytes() : kDefaultDeviceMemoryBytes;
  if (capacity <= 0) capacity = kDefaultDeviceMemoryBytes;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    DeviceSlot& s = slots[p];
    s.position = p;
    s.memory = std::make_shared<DeviceMemory>(p, mesh.DeviceAt(p), capacity);
    s.memory_raw = s.memory.get();
    new (s.context_storage) DeviceContext(this, &s, p, mesh.DeviceAt(p), mesh.CoordsOfPosition(p));
  }
  blocks = std::vector<Block>(static_cast<size_t>(workers));  // Block holds an atomic: not movable, made in place
  for (int b = 0; b < workers; ++b) {
    blocks[b].begin = mesh.size() * b / workers;
    blocks[b].end = mesh.size() * (b + 1) / workers;
  }
}

RuntimeCore::~RuntimeCore() {
  for (DeviceSlot& s : slots) {
    FreeStack(s.stack);
    s.context().~DeviceContext();
  }
}

const GroupInfo& RuntimeCore::Groups(const AxesKey& key) {
  std::lock_guard lock(groups_mu);
  auto it = groups.find(key);
  if (it == groups.end()) it = groups.emplace(key, std::make_unique<GroupInfo>(MakeGroupInfo(mesh, key))).first;
  return *it->second;
}

const CollectiveCall kBarrierCall{};

namespace {

// A device waits at `call`: records it for the worker's pass and the watchdog, switches to the worker, and
// unwinds when the Run was aborted. Inline: it is the whole of a barrier's hot path.
inline void WaitAt(DeviceSlot& slot, const CollectiveCall& call) {
  RunState& run = *slot.run;
  if (run.aborted()) throw DeviceAborted{};
  slot.call = &call;
  slot.waiting_op.store(call.op, std::memory_order_relaxed);
  slot.wait_episode.store(static_cast<uint32_t>(run.episodes.load(std::memory_order_relaxed)),
                          std::memory_order_relaxed);
  slot.state.store(DeviceState::kWaiting, std::memory_order_relaxed);
  SwitchToWorker(slot);
  slot.call = nullptr;
  if (slot.resume_aborted) {
    slot.resume_aborted = false;
    throw DeviceAborted{};
  }
}

}  // namespace

void RuntimeCore::WaitAtBarrier(DeviceSlot& slot) { WaitAt(slot, kBarrierCall); }

Array RuntimeCore::Collective(DeviceSlot& slot, CollectiveCall& call) {
  WaitAt(slot, call);
  if (call.op == OpKind::kBarrier) return Array();
  return ArrayAccess::Make(call.out_dtype, call.out_shape, slot.run->plan.ResultBuffer(slot.position),
                           slot.memory.get());
}

}  // namespace internal

using internal::DeviceState;
using internal::RunState;

Runtime::Runtime(Mesh mesh, RuntimeOptions options) {
  if (mesh.empty()) Throw(ErrorCode::kInvalidArgument, "Runtime needs a mesh with at least one device");
  if (mesh.size() > (int64_t{1} << 31)) Throw(ErrorCode::kInvalidArgument, "mesh of {} devices is too large", mesh.size());
  if (options.num_threads < 0)
    Throw(ErrorCode::kInvalidArgument, "RuntimeOptions::num_threads must be >= 0 (0: one per core), got {}",
          options.num_threads);
  if (options.fiber_stack_bytes < 16 * 1024)
    Throw(ErrorCode::kInvalidArgument, "RuntimeOptions::fiber_stack_bytes must be at least 16 KiB, got {}",
          options.fiber_stack_bytes);
  if (options.device_memory_bytes < 0)
    Throw(ErrorCode::kInvalidArgument, "RuntimeOptions::device_memory_bytes must be >= 0, got {}",
          options.device_memory_bytes);
  if (options.collective_timeout.count() <= 0)
    Throw(ErrorCode::kInvalidArgument, "RuntimeOptions::collective_timeout must be positive, got {} ms",
          options.collective_timeout.count());
  int threads = options.num_threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const int workers = static_cast<int>(std::min<int64_t>(threads, mesh.size()));
  core_ = std::make_shared<internal::RuntimeCore>(std::move(mesh), std::move(options), workers);
  pool_ = std::make_unique<internal::WorkerPool>(workers);
}

namespace {

// Waits until every block of `run` is closed or `deadline` passes; returns whether all closed.
bool WaitClosed(RunState& run, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(run.mu);
  return run.cv.wait_until(lock, deadline, [&] { return run.closed_blocks == run.num_blocks; });
}

std::string StillRunning(const internal::RuntimeCore& core) {
  std::vector<int64_t> running;
  for (int64_t p = 0; p < core.mesh.size(); ++p) {
    if (core.slots[p].state.load(std::memory_order_relaxed) != DeviceState::kFinished) running.push_back(p);
  }
  return internal::PositionRanges(running);
}

}  // namespace

Runtime::~Runtime() {
  if (!core_) return;
  auto deadline = std::chrono::steady_clock::now() + core_->options.collective_timeout;
  // Every task enqueued must have returned before the arena goes (oneTBB would drop a task that has not
  // started yet, and its arguments with it).
  std::unique_lock lock(core_->tasks_mu);
  if (!core_->tasks_cv.wait_until(lock, deadline, [&] { return core_->tasks_outstanding == 0; })) {
    // A device is still running on a worker thread: leave the threads and the state they use behind.
    (void)pool_.release();
  }
}

const Mesh& Runtime::mesh() const { return core_->mesh; }
int64_t Runtime::num_devices() const { return core_->mesh.size(); }
int Runtime::num_workers() const { return core_->num_workers; }
const RuntimeOptions& Runtime::options() const { return core_->options; }

MemoryStats Runtime::memory_stats(int64_t position) const {
  if (position < 0 || position >= num_devices())
    Throw(ErrorCode::kOutOfRange, "device position {} out of range [0, {})", position, num_devices());
  return core_->slots[position].memory->stats();
}

void Runtime::ResetPeakMemory() {
  for (auto& s : core_->slots) s.memory->ResetPeak();
}

void Runtime::Run(const std::function<void(DeviceContext&)>& fn) {
  using Clock = std::chrono::steady_clock;
  internal::RuntimeCore& core = *core_;
  if (internal::CurrentSlot() != nullptr)
    Throw(ErrorCode::kFailedPrecondition, "Runtime::Run called from inside a virtual device");
  std::unique_lock<std::mutex> one_run(core.run_mu, std::try_to_lock);
  if (!one_run.owns_lock()) Throw(ErrorCode::kFailedPrecondition, "Runtime::Run is already running on another thread");
  if (core.run) {
    RunState& previous = *core.run;
    if (previous.published.load() && !WaitClosed(previous, Clock::now() + core.options.collective_timeout)) {
      Throw(ErrorCode::kFailedPrecondition,
            "a device of the previous Run is still running (positions {}); it never reached a collective after the "
            "Run was aborted",
            StillRunning(core));
    }
  }
  auto run = std::make_shared<RunState>();
  core.run = run;
  run->fn = fn;
  run->num_blocks = core.num_workers;
  for (auto& s : core.slots) {
    s.state.store(DeviceState::kNotStarted, std::memory_order_relaxed);
    s.outcome = internal::Outcome::kNone;
    s.error = nullptr;
    s.resume_aborted = false;
    s.call = nullptr;
  }
  for (auto& b : core.blocks) b.closed = false;
  RuntimeObserver* observer = core.options.observer;
  if (observer != nullptr) observer->OnRunStart(core.mesh.size());
  {
    std::lock_guard lock(core.tasks_mu);
    core.tasks_outstanding += core.num_workers;
  }
  for (int w = 0; w < core.num_workers; ++w) {
    internal::Handoff handoff(new internal::TaskArgs{core_, run});
    pool_->arena.enqueue([handoff = std::move(handoff)] {
      internal::WorkerEntry(std::unique_ptr<internal::TaskArgs>(handoff.get()));
    });
  }
  run->published.store(true, std::memory_order_release);

  // Watchdog: devices waiting at a collective while no barrier completes for collective_timeout.
  const auto timeout = core.options.collective_timeout;
  const auto period = std::clamp<Clock::duration>(timeout / 20, std::chrono::milliseconds(1),
                                                  std::chrono::milliseconds(100));
  const auto grace = std::min<Clock::duration>(timeout, std::chrono::seconds(1));
  uint64_t last_progress = ~uint64_t{0};
  bool stalled = false;
  Clock::time_point stalled_since{};
  bool all_closed = false;
  {
    std::unique_lock lock(run->mu);
    for (;;) {
      if (run->cv.wait_for(lock, period, [&] { return run->closed_blocks == run->num_blocks; })) {
        all_closed = true;
        break;
      }
      const auto now = Clock::now();
      if (run->aborted()) {
        if (now - run->abort_time >= grace) break;
        continue;
      }
      const uint64_t episodes = run->episodes.load(std::memory_order_relaxed);
      // Progress: a barrier completed, a device reached its next collective or finished, or collective work
      // is under way. Only a Run where devices wait and none of this happens for `timeout` is stuck: a device
      // that computes for long while its worker's other devices queue behind it is not.
      uint64_t progress = episodes;
      for (const auto& b : core.blocks) progress += b.progress.load(std::memory_order_relaxed);
      const bool executing = run->executing.load(std::memory_order_relaxed);
      bool any_waiting = false;
      for (const auto& s : core.slots) {
        if (s.state.load(std::memory_order_relaxed) == DeviceState::kWaiting) {
          any_waiting = true;
          break;
        }
      }
      if (progress != last_progress || executing || !any_waiting) {
        last_progress = progress;
        stalled = false;
        continue;
      }
      if (!stalled) {
        stalled = true;
        stalled_since = now;
      }
      if (now - stalled_since < timeout) continue;
      // Deadline: name who waits where and who never arrived (atomics only: the devices are not ours to read).
      std::map<std::string_view, std::vector<int64_t>> waiting;
      std::vector<int64_t> missing, finished, released;
      for (int64_t p = 0; p < core.mesh.size(); ++p) {
        const auto& s = core.slots[p];
        switch (s.state.load(std::memory_order_relaxed)) {
          case DeviceState::kWaiting:
            if (s.wait_episode.load(std::memory_order_relaxed) != static_cast<uint32_t>(episodes)) {
              released.push_back(p);  // its barrier completed; its worker is busy with a device that never arrived
            } else {
              waiting[internal::OpName(s.waiting_op.load(std::memory_order_relaxed))].push_back(p);
            }
            break;
          case DeviceState::kFinished:
            finished.push_back(p);
            break;
          default:
            missing.push_back(p);
        }
      }
      std::vector<std::string> parts;
      for (const auto& [op, positions] : waiting)
        parts.push_back(fmt::format("{} wait at {}", internal::DescribeDevices(core.mesh, positions), op));
      parts.insert(parts.begin(),
                   fmt::format("{} never arrived (still running)", internal::DescribeDevices(core.mesh, missing)));
      if (!released.empty()) {
        parts.push_back(fmt::format("{} passed the last collective and wait for their worker thread",
                                    internal::DescribeDevices(core.mesh, released)));
      }
      if (!finished.empty()) parts.push_back(fmt::format("{} returned", internal::DescribeDevices(core.mesh, finished)));
      std::string message = fmt::format("devices did not arrive at a collective within the timeout of {} ms: {}",
                                        timeout.count(), fmt::join(parts, "; "));
      lock.unlock();
      run->SetAbort(internal::AbortReason::kDeadline, ErrorCode::kDeadlineExceeded, std::move(message));
      lock.lock();
    }
  }

  // Results. Only blocks that closed may be read (a stuck device's block still belongs to its worker).
  const int reason = run->abort.load(std::memory_order_acquire);
  if (reason == static_cast<int>(internal::AbortReason::kNone) && all_closed) {
    if (observer != nullptr) observer->OnRunEnd(true);
    return;
  }
  if (observer != nullptr) {
    // Devices may still be running (a device that never arrived); the workers stop calling the observer now.
    {
      std::lock_guard lock(run->observer_mu);
      run->observer_detached = true;
    }
    observer->OnRunEnd(false);
  }
  std::unique_lock lock(run->mu);
  for (const auto& bl : core.blocks) {
    if (!bl.closed) continue;
    for (int64_t p = bl.begin; p < bl.end; ++p) {
      const auto& s = core.slots[p];
      if (s.outcome != internal::Outcome::kThrew) continue;
      ErrorCode code = ErrorCode::kAborted;
      std::string kind, what;
      try {
        std::rethrow_exception(s.error);
      } catch (const Error& e) {
        code = e.code();
        kind = e.kind();
        what = e.what();
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
        what = "an exception that is not a std::exception";
      }
      throw DeviceError(code,
                        fmt::format("device {} (position {}, coords {}) failed: {}", s.context().device_id(), p,
                                    PyTuple(s.context().coords()), what),
                        kind, p, s.context().device_id(), s.error);
    }
  }
  std::string message = run->abort_message;
  ErrorCode code = run->abort_code;
  if (!all_closed) {
    message += fmt::format(
        " [devices at positions {} are still running on their worker threads; they are unwound when they reach a "
        "collective]",
        StillRunning(core));
  }
  throw Error(code, message);
}

}  // namespace spmdsim
