// The thread's current device (sim/internal/device_entry.h) and what the public API derives from it
// (CurrentDevice(), sim/device_context.h; CurrentDeviceMemory(), sim/internal/buffer.h).
#include "sim/internal/slot.h"

#include "sim/internal/buffer.h"

namespace spmdsim {
namespace internal {
namespace {
thread_local DeviceSlot* current_slot = nullptr;
}  // namespace

// Not inline: a fiber may move between threads only before it starts (sim/internal/worker.cc), but keeping the
// thread_local access behind a call also stops the compiler caching its address across a fiber switch.
__attribute__((noinline)) DeviceSlot* CurrentSlot() { return current_slot; }
__attribute__((noinline)) void SetCurrentSlot(DeviceSlot* slot) { current_slot = slot; }

DeviceMemory* CurrentDeviceMemory() {
  DeviceSlot* slot = CurrentSlot();
  return slot != nullptr ? slot->memory_raw : nullptr;
}

}  // namespace internal

DeviceContext* CurrentDevice() {
  internal::DeviceSlot* slot = internal::CurrentSlot();
  return slot != nullptr ? &slot->context() : nullptr;
}

}  // namespace spmdsim
