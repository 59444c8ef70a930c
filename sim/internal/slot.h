// Internals of sim/runtime.h: one virtual device's slot: its state between the worker thread that runs it and
// its own fiber, its saved contexts, its memory account, its stack and its DeviceContext. Not for users;
// docs/runtime.md explains the design.
//
// Thread safety and ordering: a DeviceSlot's non-atomic fields are touched only by the worker thread that owns
// the slot's block and by the device's own fiber, which runs on that thread (the worker switches into the fiber
// and back), so they need no synchronisation; `state`, `waiting_op` and `wait_episode` are atomics because the
// watchdog (the thread in Runtime::Run) reads them.
#ifndef SPMDSIM_SIM_INTERNAL_SLOT_H_
#define SPMDSIM_SIM_INTERNAL_SLOT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>

#include "sim/device_context.h"
#include "sim/internal/collective_call.h"
#include "sim/internal/device_entry.h"
#include "sim/internal/fiber_stack.h"
#include "sim/memory.h"

namespace spmdsim::internal {

struct RunState;  // sim/internal/run_state.h

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
  RunState* run = nullptr;              // the Run this fiber belongs to
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

// The layout the comment above claims: the hot fields (state .. position) share the slot's first cache line;
// the cold part starts on a line of its own. (offsetof on a non-standard-layout type: supported by GCC and
// Clang, which only warn.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(alignof(DeviceSlot) == 64);
static_assert(offsetof(DeviceSlot, position) + sizeof(int64_t) <= 64, "a barrier must touch one line of the slot");
static_assert(offsetof(DeviceSlot, memory) % 64 == 0);
#pragma GCC diagnostic pop

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_SLOT_H_
