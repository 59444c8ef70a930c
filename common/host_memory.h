// How much memory this host can give spmdsim, and a check that a request fits before anything is allocated.
//
// Real (non-abstract) runs hold every global array in host memory; a scenario asking for more than the host has
// would otherwise die in std::bad_alloc (or the kernel's OOM killer) half-way through. The check is made before
// building the array, against /proc/meminfo's MemAvailable (sysconf(_SC_AVPHYS_PAGES) where that is missing) and
// against what the process's address-space limit (getrlimit RLIMIT_AS: `ulimit -v`, `prlimit --as`) leaves of its
// address space: under a limit, an allocation beyond it fails however much memory the host has free.
//
// Example:
//   CheckFitsHostMemory("array 'x' (float32 (1048576, 1048576))", 4 * kTiB);
//   // throws Error(kResourceExhausted): "array 'x' (float32 (1048576, 1048576)) needs 4398046511104 bytes
//   //   (4.00TiB) of host memory; this host has 11.20GiB available (--abstract runs the cost model ...)"
#ifndef SPMDSIM_COMMON_HOST_MEMORY_H_
#define SPMDSIM_COMMON_HOST_MEMORY_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace spmdsim {

// Bytes of memory the host has available now (MemAvailable); thread-safe. Never below 0.
int64_t HostMemoryAvailableBytes();

// Bytes of physical memory the host has (sysconf); computed once, thread-safe. No single buffer can be larger.
int64_t HostPhysicalMemoryBytes();

// The process's address-space limit (RLIMIT_AS, soft), or nullopt when it has none; thread-safe.
std::optional<int64_t> AddressSpaceLimitBytes();
// What that limit leaves: the limit less the address space mapped now (/proc/self/statm); never below 0.
// INT64_MAX without a limit.
int64_t AddressSpaceLeftBytes();

// Throws Error(kResourceExhausted) naming `what` and both sizes when `bytes` (negative: it overflowed) exceeds
// HostMemoryAvailableBytes() or AddressSpaceLeftBytes(); when the address-space limit is what refuses it, the
// message cites the limit (ulimit -v) and what it leaves.
void CheckFitsHostMemory(std::string_view what, int64_t bytes);

// The bytes of an array of `shape` with `itemsize`-byte elements; -1 when that overflows int64.
int64_t ArrayBytes(std::span<const int64_t> shape, int64_t itemsize);

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_HOST_MEMORY_H_
