// Internals of sim/array.h: host buffers (pooled when large, sim/internal/buffer.cc) and one device's charge
// on a buffer. Not for users; sim/internal/array_access.h builds Arrays over them.
//
// Thread safety: Buffer bytes are written only before the buffer is published (by the thread that allocated
// it, or by runtime workers between two barrier phases, see sim/internal/worker.cc); afterwards read-only.
// Holding is immutable; its destructor releases its charge (thread-safe, sim/memory.h).
#ifndef SPMDSIM_SIM_INTERNAL_BUFFER_H_
#define SPMDSIM_SIM_INTERNAL_BUFFER_H_

#include <cstdint>
#include <memory>
#include <utility>

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

// The pool of freed buffers of >= 128 KiB that Buffer::Allocate reuses (policy: sim/internal/buffer.cc,
// docs/runtime.md).
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

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_BUFFER_H_
