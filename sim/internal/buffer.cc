// Host buffers (sim/internal/buffer.h) and the pool of large freed buffers they are reused from.
#include "sim/internal/buffer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <list>
#include <map>
#include <vector>

#include "common/error.h"
#include "common/host_memory.h"
#include "common/strings.h"
#include "common/thread_annotations.h"

namespace spmdsim::internal {

namespace {

// Freed buffers of 128 KiB and more (glibc's default mmap threshold: smaller ones come from malloc's arenas
// without page faults) are kept for the next allocation of the same size: a collective that runs again needs
// the same output sizes, and reusing them saves the mmap, the page faults and the kernel's zeroing of fresh
// pages (a 16 MiB psum result would otherwise pay ~4096 page faults every time; an all_to_all at N=8 with
// 512 KiB per device took 200-320 us with 1 MiB as the threshold, 44-53 us with 128 KiB).
//
// Policy (docs/runtime.md, "Arrays and memory"):
//  - Sizes match exactly (a buffer is always its requested size rounded to 64 bytes, so what a device is
//    charged is what the host holds). Taking a size returns its most recently returned buffer (the warmest).
//  - Bound: the pool holds at most max(256 MiB, the bytes of pooled-size buffers in use), checked whenever a
//    buffer comes back; so beyond 256 MiB it at most doubles what the program holds, and it shrinks as the
//    program frees its arrays. A returned buffer larger than the bound is freed at once.
//  - Eviction: to make room, the buffers returned longest ago are freed first (least recently used), so sizes
//    a program stopped using give way to the sizes it uses now. (The pool used to keep up to 512 MiB of any
//    sizes for ever: after other sizes had filled it, a sweep's 64 MiB points paid page faults on every
//    output, 105-126 ms per all_to_all instead of 35 ms.)
//  - Frees happen outside the lock.
class LargeBufferPool {
 public:
  static constexpr size_t kMinBytes = 128 * kKiB;
  static constexpr size_t kFloorBytes = 256 * kMiB;

  // A pooled buffer of exactly `bytes`, or nullptr (the caller allocates). Counts `bytes` as in use either way;
  // the caller calls Untrack when its own allocation fails.
  void* Take(size_t bytes) {
    MutexLock lock(mu_);
    in_use_ += bytes;
    auto [first, last] = by_size_.equal_range(bytes);
    if (first == last) return nullptr;
    const auto it = std::prev(last);  // equal keys keep insertion order: the most recently returned
    void* data = it->second->data;
    lru_.erase(it->second);
    by_size_.erase(it);
    pooled_ -= bytes;
    return data;
  }
  void Untrack(size_t bytes) {
    MutexLock lock(mu_);
    in_use_ -= bytes;
  }
  // Takes back a buffer that was in use; keeps it, evicting the least recently returned ones as needed, or
  // frees it when it alone exceeds the bound.
  void Give(void* data, size_t bytes) {
    void* evicted_inline[8];
    std::vector<void*> evicted_more;
    size_t num_evicted = 0;
    bool keep = false;
    {
      MutexLock lock(mu_);
      in_use_ -= bytes;
      const size_t bound = std::max(kFloorBytes, in_use_);
      if (bytes <= bound) {
        keep = true;
        while (pooled_ + bytes > bound) {
          const Entry oldest = lru_.front();
          auto [first, last] = by_size_.equal_range(oldest.bytes);
          while (first->second != lru_.begin()) ++first;
          by_size_.erase(first);
          lru_.pop_front();
          pooled_ -= oldest.bytes;
          if (num_evicted < std::size(evicted_inline)) {
            evicted_inline[num_evicted++] = oldest.data;
          } else {
            evicted_more.push_back(oldest.data);
          }
        }
        try {
          lru_.push_back({bytes, data});
          try {
            by_size_.emplace(bytes, std::prev(lru_.end()));
          } catch (...) {
            lru_.pop_back();
            throw;
          }
          pooled_ += bytes;
        } catch (...) {  // no memory for the bookkeeping (this runs in a destructor): free the buffer instead
          keep = false;
        }
      }
    }
    if (!keep) std::free(data);
    for (size_t i = 0; i < num_evicted; ++i) std::free(evicted_inline[i]);
    for (void* p : evicted_more) std::free(p);
  }
  BufferPoolStats Stats() {
    MutexLock lock(mu_);
    return {static_cast<int64_t>(pooled_), static_cast<int64_t>(lru_.size()), static_cast<int64_t>(in_use_)};
  }

 private:
  struct Entry {
    size_t bytes;
    void* data;
  };
  Mutex mu_;
  std::list<Entry> lru_ SPMDSIM_GUARDED_BY(mu_);  // least recently returned first
  std::multimap<size_t, std::list<Entry>::iterator> by_size_ SPMDSIM_GUARDED_BY(mu_);  // the same entries by size
  size_t pooled_ SPMDSIM_GUARDED_BY(mu_) = 0;  // bytes in lru_
  size_t in_use_ SPMDSIM_GUARDED_BY(mu_) = 0;  // bytes of large buffers allocated and not yet returned
};

LargeBufferPool& Pool() {
  static LargeBufferPool* pool = new LargeBufferPool;  // never destroyed: buffers may die after main
  return *pool;
}

[[noreturn]] void ThrowHostMemory(int64_t bytes) {
  std::string limit;
  if (const std::optional<int64_t> as = AddressSpaceLimitBytes()) {
    limit = fmt::format("; the process's address-space limit (ulimit -v) of {} leaves {}", HumanBytes(*as),
                        HumanBytes(AddressSpaceLeftBytes()));
  }
  Throw(ErrorCode::kResourceExhausted,
        "host memory: allocating an array of {} needs {} bytes, {} available (the host has {} of physical memory){}",
        HumanBytes(bytes), bytes, HumanBytes(HostMemoryAvailableBytes()), HumanBytes(HostPhysicalMemoryBytes()),
        limit);
}

size_t RoundedSize(int64_t bytes) {
  size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  return rounded == 0 ? 64 : rounded;
}

}  // namespace

std::shared_ptr<Buffer> Buffer::Allocate(int64_t bytes) {
  if (bytes > HostPhysicalMemoryBytes()) ThrowHostMemory(bytes);  // checked first: allocating could succeed lazily
  const size_t rounded = RoundedSize(bytes);
  const bool large = rounded >= LargeBufferPool::kMinBytes;
  void* data = large ? Pool().Take(rounded) : nullptr;
  if (data == nullptr && large && bytes > AddressSpaceLeftBytes()) {
    // Beyond what the address-space limit (ulimit -v) leaves: refused before allocating, citing the limit.
    Pool().Untrack(rounded);
    ThrowHostMemory(bytes);
  }
  if (data == nullptr) data = std::aligned_alloc(64, rounded);
  if (data == nullptr) {
    if (large) Pool().Untrack(rounded);
    ThrowHostMemory(bytes);
  }
  try {
    return std::shared_ptr<Buffer>(new Buffer(data, bytes));
  } catch (...) {
    if (large) Pool().Untrack(rounded);
    std::free(data);
    throw;
  }
}

std::shared_ptr<Buffer> Buffer::AllocateZeroed(int64_t bytes) {
  auto buffer = Allocate(bytes);
  std::memset(buffer->data(), 0, static_cast<size_t>(bytes));
  return buffer;
}

Buffer::~Buffer() {
  const size_t rounded = RoundedSize(bytes_);
  if (rounded >= LargeBufferPool::kMinBytes) {
    Pool().Give(data_, rounded);
  } else {
    std::free(data_);
  }
}

BufferPoolStats GetBufferPoolStats() { return Pool().Stats(); }

}  // namespace spmdsim::internal
