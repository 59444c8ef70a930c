#include "common/host_memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim {

int64_t HostMemoryAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
}

int64_t ArrayBytes(std::span<const int64_t> shape, int64_t itemsize) {
  int64_t bytes = itemsize;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes)) return -1;
  return bytes;
}

int64_t HostPhysicalMemoryBytes() {
  static const int64_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : int64_t{0};
  }();
  return bytes;
}

void CheckFitsHostMemory(std::string_view what, int64_t bytes) {
  const int64_t available = HostMemoryAvailableBytes();
  if (bytes >= 0 && bytes <= available) return;
  const std::string need =
      bytes < 0 ? std::string("more than 2^63 bytes") : fmt::format("{} bytes ({})", bytes, HumanBytes(bytes));
  Throw(ErrorCode::kResourceExhausted,
        "{} needs {} of host memory; this host has {} available (--abstract runs the cost model without the data)",
        what, need, HumanBytes(available));
}

}  // namespace spmdsim
