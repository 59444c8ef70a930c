// Internals of sim/array.h: host buffers, per-device charges, and the back door collectives use to build
// Arrays over shared buffers. Not for users.
//
// Thread safety: Buffer bytes are written only before the buffer is published (by the thread that allocated
// it, or by runtime workers between two barrier phases, see sim/internal/worker.cc); afterwards read-only.
// Holding is immutable; its destructor releases its charge (thread-safe, sim/memory.h).
#ifndef SPMDSIM_SIM_INTERNAL_BUFFER_H_
#define SPMDSIM_SIM_INTERNAL_BUFFER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/array.h"
#include "sim/memory.h"

namespace spmdsim::internal {

// 64-byte aligned, uninitialised host bytes.
// Allocate throws Error(kResourceExhausted) "host memory: allocating an array of 1.00TiB needs N bytes, M
// available ..." when `bytes` exceeds the host's physical memory (checked before allocating) or the allocation
// fails (e.g. under an address-space limit); never std::bad_alloc.
class Buffer {
 public:
  static std::shared_ptr<Buffer> Allocate(int64_t bytes);
  static std::shared_ptr<Buffer> AllocateZeroed(int64_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  Buffer(void* data, int64_t bytes) : data_(data), bytes_(bytes) {}
  void* data_;
  int64_t bytes_;
};

// The pool of freed buffers of >= 1 MiB that Buffer::Allocate reuses (policy: sim/array.cc, docs/runtime.md).
struct BufferPoolStats {
  int64_t pooled_bytes = 0;    // held by the pool for reuse
  int64_t pooled_buffers = 0;
  int64_t in_use_bytes = 0;    // large buffers allocated and not yet freed
};
BufferPoolStats GetBufferPoolStats();

// One device's claim on a buffer: `bytes` charged to `memory` (nullptr: a host array, not charged).
// The charge must already be taken (DeviceMemory::Charge); the destructor releases it.
class Holding {
 public:
  Holding(std::shared_ptr<Buffer> buffer, int64_t bytes, std::shared_ptr<DeviceMemory> memory)
      : buffer_(std::move(buffer)), bytes_(bytes), memory_(std::move(memory)) {}
  ~Holding() {
    if (memory_) memory_->Release(bytes_);
  }
  Holding(const Holding&) = delete;
  Holding& operator=(const Holding&) = delete;

  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }  // nullptr for abstract arrays
  DeviceMemory* memory() const { return memory_.get(); }

 private:
  std::shared_ptr<Buffer> buffer_;
  int64_t bytes_;
  std::shared_ptr<DeviceMemory> memory_;
};

// The account of the virtual device whose code runs on this thread right now (CurrentDevice(),
// sim/device_context.h), or nullptr on host threads. Arrays created while it is set are charged to it.
DeviceMemory* CurrentDeviceMemory();

struct ArrayAccess {
  // An Array over `buffer` (nullptr: abstract), charged to `memory` (nullptr: host). Charges first and
  // throws Error(kResourceExhausted) without making anything when the device is full.
  static Array Make(DType dtype, std::vector<int64_t> shape, std::shared_ptr<Buffer> buffer,
                    DeviceMemory* memory);
  // Charges `memory` for nbytes and then allocates (zeroed when asked) a buffer for it: the charge comes
  // first so that an over-capacity request never allocates host memory.
  static Array Allocate(DType dtype, std::vector<int64_t> shape, DeviceMemory* memory, bool zeroed,
                        bool abstract);
  static const std::shared_ptr<Buffer>& buffer(const Array& array);
  static void* mutable_data(const Array& array);  // REQUIRES: not yet shared with another thread
  // The same buffer held (and charged) by `memory`; a no-op copy when it already is.
  static Array Rehold(const Array& array, DeviceMemory* memory);
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_BUFFER_H_
