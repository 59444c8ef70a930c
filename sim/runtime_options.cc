#include "sim/runtime_options.h"

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim {

void ValidateRuntimeOptions(const Mesh& mesh, const RuntimeOptions& options) {
  if (mesh.empty()) Throw(ErrorCode::kInvalidArgument, "Runtime needs a mesh with at least one device");
  if (mesh.size() > (int64_t{1} << 31))
    Throw(ErrorCode::kInvalidArgument, "mesh of {} devices is too large", mesh.size());
  if (options.num_threads < 0)
    Throw(ErrorCode::kInvalidArgument, "RuntimeOptions::num_threads must be >= 0 (0: one per core), got {}",
          options.num_threads);
  if (options.fiber_stack_bytes < 16 * kKiB)
    Throw(ErrorCode::kInvalidArgument, "RuntimeOptions::fiber_stack_bytes must be at least 16 KiB, got {}",
          options.fiber_stack_bytes);
  if (options.device_memory_bytes < 0)
    Throw(ErrorCode::kInvalidArgument, "RuntimeOptions::device_memory_bytes must be >= 0, got {}",
          options.device_memory_bytes);
  if (options.collective_timeout.count() <= 0)
    Throw(ErrorCode::kInvalidArgument, "RuntimeOptions::collective_timeout must be positive, got {} ms",
          options.collective_timeout.count());
}

int64_t DeviceMemoryCapacity(const Mesh& mesh, const RuntimeOptions& options) {
  int64_t capacity = options.device_memory_bytes;
  if (capacity == 0)
    capacity = mesh.topology() != nullptr ? mesh.topology()->memory_bytes() : kDefaultDeviceMemoryBytes;
  return capacity > 0 ? capacity : kDefaultDeviceMemoryBytes;
}

}  // namespace spmdsim
