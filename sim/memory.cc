#include "sim/memory.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim::internal {

DeviceMemory::DeviceMemory(int64_t position, int device_id, int64_t capacity_bytes)
    : position_(position), device_id_(device_id), capacity_(capacity_bytes) {
  SPMDSIM_CHECK(capacity_bytes >= 0, "negative capacity {}", capacity_bytes);
}

void DeviceMemory::Charge(int64_t bytes) {
  SPMDSIM_CHECK(bytes >= 0);
  int64_t current = in_use_.load(std::memory_order_relaxed);
  int64_t next;
  do {
    next = current + bytes;
    if (next > capacity_) {
      // XLA: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes." (xla/service/...allocator);
      // we add the device and its capacity, as TPU runtime messages do.
      Throw(ErrorCode::kResourceExhausted,
            "Out of memory while trying to allocate {} ({} bytes) on device {} (position {}): {} in use of "
            "capacity {} ({} bytes), {} free",
            HumanBytes(bytes), bytes, device_id_, position_, HumanBytes(current), HumanBytes(capacity_),
            capacity_, HumanBytes(capacity_ - current));
    }
  } while (!in_use_.compare_exchange_weak(current, next, std::memory_order_relaxed));
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (next > peak && !peak_.compare_exchange_weak(peak, next, std::memory_order_relaxed)) {
  }
}

void DeviceMemory::Release(int64_t bytes) noexcept { in_use_.fetch_sub(bytes, std::memory_order_relaxed); }

MemoryStats DeviceMemory::stats() const {
  return {in_use_.load(std::memory_order_relaxed), peak_.load(std::memory_order_relaxed), capacity_};
}

void DeviceMemory::ResetPeak() { peak_.store(in_use_.load(std::memory_order_relaxed), std::memory_order_relaxed); }

}  // namespace spmdsim::internal
