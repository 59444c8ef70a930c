#include "sim/runtime_options.h"

namespace spmdsim {

int64_t DeviceMemoryCapacity(const Mesh& mesh, const RuntimeOptions& options) {
  int64_t capacity = options.device_memory_bytes;
  if (capacity == 0) capacity = mesh.topology() != nullptr ? mesh.topology()->memory_bytes() : kDefaultDeviceMemoryBytes;
  return capacity > 0 ? capacity : kDefaultDeviceMemoryBytes;
}

}  // namespace spmdsim
