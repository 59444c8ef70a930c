#include "sim/internal/fiber.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "common/strings.h"
#include "sim/internal/run_state.h"

namespace spmdsim::internal {

#if defined(__x86_64__) && defined(__linux__) && !defined(SPMDSIM_BOOST_JUMP)
// Same frame layout as boost's jump_fcontext (x86_64 SysV ELF), so contexts made by make_fcontext start with it:
// callee-saved registers at 0x8..0x30, the return address at 0x38; 0x0..0x7 (boost's FPU words) unused.
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
#endif

namespace {
thread_local WorkerThreadState worker_thread;
}  // namespace

WorkerThreadState& ThisWorkerThread() { return worker_thread; }

namespace {

// --- A device that overflows its stack -----------------------------------------------------------------------
//
// A fiber stack in a guarded StackPool has a guard page below it; running into it is a SIGSEGV that would kill the
// process with no word of which device or why. Worker threads get an alternate signal stack and a SIGSEGV handler that,
// when the faulting address is in the guard page of the device the thread runs, writes which device overflowed and how
// to give it more stack, then lets the signal take its default course (the process still dies: the device's stack is
// corrupt and cannot be unwound). Other faults go to the handler that was there before. Not installed under
// AddressSanitizer/ThreadSanitizer, which report stack overflows themselves. A stack without a guard page (a pool too
// large for the kernel's mapping budget) has a canary word instead, which the worker checks every time the device
// switches out (CheckStackCanary); the same report then ends the process with abort().

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

// Names the device that overflowed its stack on stderr. Async-signal-safe.
void WriteStackOverflowReport(const DeviceSlot& s) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char message[320];
  size_t n = 0;
  const auto append = [&](const char* text) {
    for (; *text != 0 && n < sizeof(message); ++text) message[n++] = *text;
  };
  append("spmdsim: the virtual device at position ");
  n += FormatUnsigned(message + n, static_cast<uint64_t>(s.position));
  append(" overflowed its ");
  n += FormatUnsigned(message + n, (s.stack.mapped - page) / 1024);
  append(" KiB fiber stack (deep recursion or large local arrays in the device function); raise "
         "RuntimeOptions::fiber_stack_bytes\n");
  ssize_t written = write(STDERR_FILENO, message, n);
  (void)written;
}

#if !defined(SPMDSIM_ASAN) && !defined(SPMDSIM_TSAN)
struct sigaction previous_segv_action;

// Lets the signal take its default course: the faulting instruction runs again and the process ends.
void RestoreDefaultSegv() {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, nullptr);
}

void OnSegv(int signal, siginfo_t* info, void* context) {
  const DeviceSlot* s = CurrentSlot();  // the device this thread runs, if any
  const char* address = static_cast<const char*>(info->si_addr);
  const char* guard = s != nullptr ? static_cast<const char*>(s->stack.base) : nullptr;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));  // async-signal-safe
  if (guard != nullptr && address >= guard && address < guard + page) {
    WriteStackOverflowReport(*s);
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
  WorkerThreadState& w = ThisWorkerThread();
  if (w.alt_stack) return;
  w.alt_stack = true;
  static std::once_flag handler_once;
  std::call_once(handler_once, [] {
    struct sigaction action {};
    action.sa_sigaction = &OnSegv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_segv_action);
  });
  const size_t size = 64 * kKiB;
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

}  // namespace

void StackCanaryOverwritten(const DeviceSlot& s) {
  WriteStackOverflowReport(s);
  std::abort();
}

void EnterWorkerThread() {
#if defined(SPMDSIM_TSAN)
  ThisWorkerThread().tsan_fiber = __tsan_get_current_fiber();
#endif
  InstallStackOverflowReport();
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

}  // namespace spmdsim::internal
