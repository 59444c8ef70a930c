#include "sim/internal/fiber_stack.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "common/strings.h"
#include "sim/memory.h"

#if defined(SPMDSIM_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace spmdsim::internal {
namespace {

// ASan keeps shadow memory for addresses, not mappings: frames a fiber left poisoned (a stack switched away
// from, or unwound past) would still be poisoned when the stack is reused or its addresses mapped again.
void UnpoisonStack(FiberStack& stack) {
#if defined(SPMDSIM_ASAN)
  if (stack.base != nullptr) ASAN_UNPOISON_MEMORY_REGION(stack.base, stack.mapped);
#endif
  (void)stack;
}

size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// /proc/sys/vm/max_map_count, or -1 when it cannot be read.
int64_t MaxMapCount() {
  std::ifstream in("/proc/sys/vm/max_map_count");
  int64_t count = -1;
  in >> count;
  return in ? count : -1;
}

}  // namespace

int64_t StackMappingBytes(size_t size) {
  const size_t page = PageSize();
  return static_cast<int64_t>((size + page - 1) / page * page + page);
}

void EnsureStack(FiberStack& stack, size_t size) {
  if (stack.base != nullptr) {
    UnpoisonStack(stack);
    return;
  }
  const size_t page = PageSize();
  const size_t mapped = static_cast<size_t>(StackMappingBytes(size));
  const size_t usable = mapped - page;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    Throw(ErrorCode::kResourceExhausted, "mapping a {} stack failed: {}", HumanBytes(static_cast<int64_t>(mapped)),
          std::strerror(errno));
  }
  // Guard page: a stack overflow faults instead of corrupting memory. It splits the mapping in two, which the
  // kernel counts against vm.max_map_count.
  if (mprotect(base, page, PROT_NONE) != 0) {
    const int error = errno;
    munmap(base, mapped);
    Throw(ErrorCode::kResourceExhausted, "protecting a stack's guard page failed: {} (vm.max_map_count is {})",
          std::strerror(error), MaxMapCount());
  }
  stack.base = base;
  stack.mapped = mapped;
  // Stack colouring: the tops of page-aligned stacks all share one page offset, so the hot top frames of
  // thousands of devices would compete for the same cache sets; shift each top by 0..31 cache lines.
  // (At most half a page, so that the few hot frames stay on the stack's top page.)
  const size_t colour = (reinterpret_cast<uintptr_t>(base) / mapped % 32) * 64;
  stack.context.size = usable - colour;
  stack.context.sp = static_cast<char*>(base) + mapped - colour;
  UnpoisonStack(stack);
}

void FreeStack(FiberStack& stack) {
  if (stack.base == nullptr) return;
  UnpoisonStack(stack);
  munmap(stack.base, stack.mapped);
  stack.base = nullptr;
}

}  // namespace spmdsim::internal
