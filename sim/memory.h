// Per-device memory accounting: how many bytes of simulated device memory a virtual device holds now and at
// most, against its capacity (e.g. 32 GiB of HBM for a TPU v4 chip, mesh/topology.h).
//
// Host memory is not device memory: an Array shared by 8 devices is one host buffer but is charged 8 times,
// once to each device that holds it (sim/array.h). Exceeding the capacity throws
// Error(kResourceExhausted) in the style of XLA's RESOURCE_EXHAUSTED, naming the device, the request and the
// capacity; nothing is allocated in that case.
//
// Example: capacity 1000 bytes; Charge(600) -> in use 600, peak 600; Charge(600) throws
//   "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 600B (600 bytes) on device 3 (position 3):
//    600B in use of capacity 1000B (1000 bytes), 400B free";
//   Release(600) -> in use 0, peak 600.
//
// Thread safety: every member is thread-safe. Counters are atomics updated with relaxed ordering: a charge
// made by one thread is visible to stats() on another only after some other synchronisation (e.g. the end of
// Runtime::Run, which joins every device). The capacity check is exact: concurrent charges never take
// in_use above capacity.
#ifndef SPMDSIM_SIM_MEMORY_H_
#define SPMDSIM_SIM_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace spmdsim {

struct MemoryStats {
  int64_t in_use_bytes = 0;    // bytes charged now
  int64_t peak_bytes = 0;      // the most ever charged at once (since creation or the last ResetPeak)
  int64_t capacity_bytes = 0;  // the device's memory size
};

namespace internal {

// The account of one virtual device. Owned by the runtime through shared_ptr: every Array charged to the
// device keeps it alive, so arrays may outlive the Runtime.
class DeviceMemory : public std::enable_shared_from_this<DeviceMemory> {
 public:
  // REQUIRES: capacity_bytes >= 0.
  DeviceMemory(int64_t position, int device_id, int64_t capacity_bytes);
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Adds `bytes` (>= 0) to the account or throws Error(kResourceExhausted) leaving it unchanged.
  void Charge(int64_t bytes);
  // REQUIRES: `bytes` was charged before and not yet released.
  void Release(int64_t bytes) noexcept;
  MemoryStats stats() const;
  // Sets the peak to the current use.
  void ResetPeak();

  int64_t position() const { return position_; }
  int device_id() const { return device_id_; }

 private:
  const int64_t position_;
  const int device_id_;
  const int64_t capacity_;
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
};


}  // namespace internal
}  // namespace spmdsim

#endif  // SPMDSIM_SIM_MEMORY_H_
