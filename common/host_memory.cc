#include "common/host_memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "common/error.h"

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

void CheckFitsHostMemory(std::string_view what, int64_t bytes) {
  const int64_t available = HostMemoryAvailableBytes();
  if (bytes >= 0 && bytes <= available) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const std::string need = bytes < 0 ? std::string("more than 2^63 bytes")
                                     : fmt::format("{} bytes ({:.1f} GiB)", bytes, static_cast<double>(bytes) / kGiB);
  Throw(ErrorCode::kResourceExhausted,
        "{} needs {} of host memory; this host has {:.1f} GiB available (--abstract runs the cost model without "
        "the data)",
        what, need, static_cast<double>(available) / kGiB);
}

}  // namespace spmdsim
