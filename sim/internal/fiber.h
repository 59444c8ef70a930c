// Internals of sim/runtime.h: switching between a worker thread and the device fibers it runs, with the
// sanitizers told about every stack switch. Not for users; docs/runtime.md ("Our own switch").
//
// Devices are boost::context fcontexts (make_fcontext on the device's pooled stack). The switch itself is
// ours on x86-64 (SysV): boost's jump_fcontext also saves and restores the SSE control/status word and the x87
// control word, which costs more than the rest of the switch (4.5 ns of 14 ns per device-wait at 4096 devices,
// measured). So a worker thread's floating-point environment (rounding mode, exception masks) is shared by the
// devices it runs, as it is by functions called on one thread; a device that changes it must restore it before
// it reaches a collective. Elsewhere boost's jump_fcontext is used.
//
// The switches are inline: they are the whole of a barrier's hot path with WaitAt (sim/internal/core.cc).
// Thread safety: a device's fiber and its worker run on one thread and hand over to each other; nothing here
// is shared between threads.
#ifndef SPMDSIM_SIM_INTERNAL_FIBER_H_
#define SPMDSIM_SIM_INTERNAL_FIBER_H_

#include <boost/context/detail/fcontext.hpp>

#include "sim/internal/fiber_stack.h"
#include "sim/internal/slot.h"

#if defined(SPMDSIM_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(SPMDSIM_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace spmdsim::internal {

namespace fc = boost::context::detail;

#if defined(__x86_64__) && defined(__linux__) && !defined(SPMDSIM_BOOST_JUMP)
// fiber.cc: the same frame layout as boost's jump_fcontext (x86_64 SysV ELF) without the FPU words.
extern "C" fc::transfer_t spmdsim_jump_fcontext(fc::fcontext_t to, void* data);
inline fc::transfer_t Jump(fc::fcontext_t to, void* data) { return spmdsim_jump_fcontext(to, data); }
#else
inline fc::transfer_t Jump(fc::fcontext_t to, void* data) { return fc::jump_fcontext(to, data); }
#endif

// What a worker thread keeps for the sanitizers (and its alternate signal stack). One per thread.
struct WorkerThreadState {
  void* asan_fake_stack = nullptr;
  void* tsan_fiber = nullptr;
  bool alt_stack = false;               // sigaltstack installed for this thread
};
WorkerThreadState& ThisWorkerThread();

// Prepares the calling thread to run devices: tells ThreadSanitizer its own fiber and installs the stack
// overflow report (an alternate signal stack and, once per process, a SIGSEGV handler that names a device that
// ran into its guard page; not under the sanitizers, which report overflows themselves).
void EnterWorkerThread();

// A device whose stack has no guard page overwrote its canary (kStackCanary): names it on stderr as the SIGSEGV
// handler does for a guard page, and aborts (its stack, and maybe the one below, is corrupt).
[[noreturn, gnu::cold]] void StackCanaryOverwritten(const DeviceSlot& s);

// Checks the canary of a device whose stack has no guard page: one load and compare, after every switch out of
// the device. `canary` is the canary word of the stack: StackPool::canary_base() + position * stride().
inline void CheckStackCanary(const DeviceSlot& s, const char* canary) {
  uint64_t word;
  __builtin_memcpy(&word, canary, sizeof(word));
  if (__builtin_expect(word != kStackCanary, 0)) StackCanaryOverwritten(s);
}

// A device's fiber: runs the Run's function, records how it ended, and switches to the worker for good (the
// stack is reused from its top by the next Run's make_fcontext). The entry of make_fcontext.
[[noreturn]] void DeviceEntry(fc::transfer_t t);

// Worker -> device. Returns when the device switches back (it waits or has finished).
inline void SwitchIntoDevice(DeviceSlot& s) {
#if defined(SPMDSIM_TSAN)
  s.worker_tsan_fiber = ThisWorkerThread().tsan_fiber;
#endif
#if defined(SPMDSIM_ASAN)
  WorkerThreadState& w = ThisWorkerThread();
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
inline void AnnounceSwitchToWorker(DeviceSlot& s, bool finishing) {
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
inline void SwitchToWorker(DeviceSlot& s) {
  AnnounceSwitchToWorker(s, /*finishing=*/false);
  s.worker = Jump(s.worker, nullptr).fctx;
#if defined(SPMDSIM_ASAN)
  __sanitizer_finish_switch_fiber(s.asan_fake_stack, &s.worker_stack_bottom, &s.worker_stack_size);
#endif
}


}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_FIBER_H_
