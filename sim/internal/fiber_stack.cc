#include "sim/internal/fiber_stack.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/error.h"
#include "common/strings.h"
#include "common/thread_annotations.h"

#if defined(SPMDSIM_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace spmdsim::internal {
namespace {

size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// /proc/sys/vm/max_map_count, or the kernel's default when it cannot be read.
int64_t MaxMapCount() {
  std::ifstream in("/proc/sys/vm/max_map_count");
  int64_t count = -1;
  in >> count;
  return in && count > 0 ? count : 65530;
}

// The mappings this process has now: the lines of /proc/self/maps (0 when it cannot be read).
int64_t MappingsNow() {
  std::ifstream in("/proc/self/maps");
  return std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
}

// The one released pool kept for the next Map of the same count and stride (see Map).
struct SparePool {
  char* base = nullptr;
  size_t bytes = 0;
  int64_t count = 0;
  size_t stride = 0;
  bool guarded = false;
};

struct Spare {
  Mutex mu;
  SparePool pool SPMDSIM_GUARDED_BY(mu);
};

Spare& TheSpare() {
  static Spare* spare = new Spare();  // never destroyed: ~StackPool may run during exit
  return *spare;
}

}  // namespace

int64_t StackPool::StrideBytes(size_t usable) {
  const size_t page = PageSize();
  return static_cast<int64_t>((usable + page - 1) / page * page + page);
}

bool StackPool::GuardsFit(int64_t count) {
  // N guard pages split one mapping into 2N (guard, stack, guard, stack, ...).
  return 2 * count + kMappingMargin <= MaxMapCount() - MappingsNow();
}

void StackPool::Map(int64_t count, size_t usable) {
  page_ = PageSize();
  stride_ = static_cast<size_t>(StrideBytes(usable));
  if (TakeSpare(count)) return;
  const size_t bytes = stride_ * static_cast<size_t>(count);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    Throw(ErrorCode::kResourceExhausted, "mapping {} of stacks failed: {}", HumanBytes(static_cast<int64_t>(bytes)),
          std::strerror(errno));
  }
  // Only the pages a device touches may become resident: with transparent huge pages "always", a fault in
  // one stack could make 2 MiB (30 stacks) resident.
  madvise(base, bytes, MADV_NOHUGEPAGE);
  base_ = static_cast<char*>(base);
  bytes_ = bytes;
  count_ = count;
  guarded_ = GuardsFit(count);
  for (int64_t i = 0; guarded_ && i < count; ++i) {
    // A guard page: an overflow faults instead of corrupting the stack below (another device's).
    if (mprotect(base_ + stride_ * static_cast<size_t>(i), page_, PROT_NONE) != 0) guarded_ = false;
  }
  if (!guarded_) {
    // Out of mappings after all (another thread made some): undo the guard pages, which merges the mapping
    // back into one, and fall back to canaries.
    if (mprotect(base_, bytes_, PROT_READ | PROT_WRITE) != 0) {
      const int error = errno;
      munmap(base_, bytes_);
      base_ = nullptr;
      Throw(ErrorCode::kResourceExhausted, "unprotecting the guard pages of {} stacks failed: {}", count,
            std::strerror(error));
    }
    WriteCanaries();
  }
}

void StackPool::WriteCanaries() {
  for (int64_t i = 0; i < count_; ++i) {
    std::memcpy(base_ + stride_ * static_cast<size_t>(i) + page_ - sizeof(uint64_t), &kStackCanary,
                sizeof(uint64_t));
  }
}

bool StackPool::SpareHolds(int64_t count, size_t usable) {
  Spare& spare = TheSpare();
  MutexLock lock(spare.mu);
  const SparePool& p = spare.pool;
  return p.base != nullptr && p.count == count && p.stride == static_cast<size_t>(StrideBytes(usable));
}

bool StackPool::TakeSpare(int64_t count) {
  Spare& spare = TheSpare();
  MutexLock lock(spare.mu);
  SparePool& p = spare.pool;
  if (p.base == nullptr || p.count != count || p.stride != stride_) return false;
  base_ = p.base;
  bytes_ = p.bytes;
  count_ = p.count;
  guarded_ = p.guarded;
  p = SparePool{};
  // The pages were dropped when the pool was released (they read as zeros again): put the canaries back.
  if (!guarded_) WriteCanaries();
  return true;
}

bool StackPool::OfferAsSpare() {
  if (count_ > kMaxSpareStacks) return false;
  // Drop the pages the fibers touched, as munmap would: a spare costs address space and mappings, not memory.
  if (madvise(base_, bytes_, MADV_DONTNEED) != 0) return false;
  SparePool replaced;
  {
    Spare& spare = TheSpare();
    MutexLock lock(spare.mu);
    replaced = spare.pool;
    spare.pool = SparePool{base_, bytes_, count_, stride_, guarded_};
  }
  if (replaced.base != nullptr) munmap(replaced.base, replaced.bytes);
  base_ = nullptr;
  return true;
}

FiberStack StackPool::StackAt(int64_t i) const {
  FiberStack stack;
  stack.base = base_ + stride_ * static_cast<size_t>(i);
  stack.mapped = stride_;
  // Stack colouring: the tops of page-aligned stacks all share one page offset, so the hot top frames of
  // thousands of devices would compete for the same cache sets; shift each top by 0..31 cache lines.
  // (At most half a page, so that the few hot frames stay on the stack's top page.)
  const size_t colour = static_cast<size_t>(i % 32) * 64;
  stack.context.size = stride_ - page_ - colour;
  stack.context.sp = static_cast<char*>(stack.base) + stride_ - colour;
  return stack;
}

// ASan keeps shadow memory for addresses, not mappings: frames a fiber left poisoned (a stack switched away
// from, or unwound past) would still be poisoned when the stack is reused or its addresses mapped again.
void StackPool::Unpoison() {
#if defined(SPMDSIM_ASAN)
  if (base_ != nullptr) ASAN_UNPOISON_MEMORY_REGION(base_, bytes_);
#endif
}

StackPool::~StackPool() {
  if (base_ == nullptr) return;
  Unpoison();
  if (OfferAsSpare()) return;
  munmap(base_, bytes_);
}

}  // namespace spmdsim::internal
