#include "common/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
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
    if (key == "MemAvailable:") return kib * kKiB;
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

std::optional<int64_t> AddressSpaceLimitBytes() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const auto max = static_cast<rlim_t>(std::numeric_limits<int64_t>::max());
  return static_cast<int64_t>(std::min(limit.rlim_cur, max));
}

int64_t AddressSpaceLeftBytes() {
  const std::optional<int64_t> limit = AddressSpaceLimitBytes();
  if (!limit) return std::numeric_limits<int64_t>::max();
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0;
  statm >> pages;  // the first field: the whole mapped address space, in pages
  const int64_t mapped = pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  return std::max<int64_t>(*limit - mapped, 0);
}

void CheckFitsHostMemory(std::string_view what, int64_t bytes) {
  const int64_t available = HostMemoryAvailableBytes();
  const int64_t address_space = AddressSpaceLeftBytes();
  if (bytes >= 0 && bytes <= available && bytes <= address_space) return;
  const std::string need =
      bytes < 0 ? std::string("more than 2^63 bytes") : fmt::format("{} bytes ({})", bytes, HumanBytes(bytes));
  if (bytes >= 0 && bytes <= available) {  // the host has it; the limit refuses it
    Throw(ErrorCode::kResourceExhausted,
          "{} needs {} of host memory; the process's address-space limit (ulimit -v) of {} leaves {} (raise the "
          "limit, or --abstract runs the cost model without the data)",
          what, need, HumanBytes(*AddressSpaceLimitBytes()), HumanBytes(address_space));
  }
  Throw(ErrorCode::kResourceExhausted,
        "{} needs {} of host memory; this host has {} available (--abstract runs the cost model without the data)",
        what, need, HumanBytes(available));
}

}  // namespace spmdsim
