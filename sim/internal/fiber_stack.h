// Internals of sim/runtime.h: the pooled stacks device fibers run on. Not for users.
//
// Thread safety: a StackPool belongs to one RuntimeCore; Map and Unpoison are called by Runtime::Run before the
// workers start, ~StackPool after they have returned; the process-wide spare pool (see StackPool) is behind a
// mutex. A FiberStack belongs to its device's slot.
#ifndef SPMDSIM_SIM_INTERNAL_FIBER_STACK_H_
#define SPMDSIM_SIM_INTERNAL_FIBER_STACK_H_

#include <cstddef>
#include <cstdint>

#include <boost/context/stack_context.hpp>

namespace spmdsim::internal {

// Sanitizer builds have much larger frames (redzones, fake stacks).
#if defined(SPMDSIM_ASAN) || defined(SPMDSIM_TSAN)
inline constexpr size_t kSanitizerStackFactor = 4;
#else
inline constexpr size_t kSanitizerStackFactor = 1;
#endif

// The word a stack without a guard page keeps just below its usable bytes (StackPool::CanaryOf). A device
// whose stack no longer holds it has overflowed.
inline constexpr uint64_t kStackCanary = 0x5350'4d44'5349'4d21;  // "!MISDMPS"

// One device's stack: a page below `usable` bytes, in its Runtime's StackPool. The page is a guard page
// (PROT_NONE) when the pool is guarded, else readable and writable with kStackCanary in its top word.
struct FiberStack {
  void* base = nullptr;  // the stack's lowest page (guard or canary page)
  size_t mapped = 0;     // bytes including that page
  boost::context::stack_context context;
};

// The fiber stacks of a Runtime's devices, in one mapping, kept across Runs.
//
// Policy: a guard page below every stack while the kernel's mapping budget allows it (each guard page splits
// the mapping, so N guarded stacks are 2N mappings; see GuardsFit), else no guard pages and a canary word per
// stack that the worker checks whenever its device switches out (one mapping for all stacks).
//
// Reuse: a released pool of at most kMaxSpareStacks stacks is kept (its pages dropped with MADV_DONTNEED) for
// the next Map of the same count and stride, in any Runtime of the process: a scenario run and each Python call
// make a Runtime per workload, and a new pool costs an mmap, a guard page per stack and the read of
// /proc/self/maps (GuardsFit: ~0.1-0.4 ms in a process with a few hundred mappings). The spare keeps the guard
// pages it had, so taking it adds no mapping; one spare at a time (the latest released).
//
// Example: 8 stacks of 64 KiB on 4 KiB pages: one 544 KiB mapping; stack i starts at base + i * 68 KiB with
// its guard page; its usable bytes are the 64 KiB above that page, its top (shifted by colour) near
// base + (i + 1) * 68 KiB.
class StackPool {
 public:
  StackPool() = default;
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool();

  // Maps `count` stacks of `usable` bytes each (rounded up to pages), with guard pages when GuardsFit, or takes
  // the spare pool of that shape. Throws Error(kResourceExhausted) when the mapping fails.
  // REQUIRES: !mapped(), count > 0.
  void Map(int64_t count, size_t usable);
  bool mapped() const { return base_ != nullptr; }
  bool guarded() const { return guarded_; }
  int64_t count() const { return count_; }
  // The bytes between two stacks' starts: the usable bytes rounded up to pages, plus the guard/canary page.
  size_t stride() const { return stride_; }
  FiberStack StackAt(int64_t i) const;
  // The canary word of stack 0 (stack i's is stride() * i bytes above). Meaningful when !guarded().
  const char* canary_base() const { return base_ + page_ - sizeof(uint64_t); }
  // ASan: clears the poison fibers left on every stack (a stack switched away from, or unwound past).
  void Unpoison();

  static int64_t StrideBytes(size_t usable);
  // Whether the spare pool (see Reuse above) holds `count` stacks of `usable` bytes: a Map of that shape maps
  // nothing new.
  static bool SpareHolds(int64_t count, size_t usable);
  // Whether guard pages for `count` stacks fit in the mappings this process may still make:
  // vm.max_map_count - the mappings it has now (/proc/self/maps) - a margin of kMappingMargin for everything
  // else (heap arenas, large buffers, threads, other Runtimes).
  static bool GuardsFit(int64_t count);
  static constexpr int64_t kMappingMargin = 8192;
  // The largest pool kept as the spare when released (at most 2 x 256 mappings when guarded).
  static constexpr int64_t kMaxSpareStacks = 256;

 private:
  void WriteCanaries();
  bool TakeSpare(int64_t count);  // adopts the spare when it has `count` stacks of stride_
  bool OfferAsSpare();            // on release: becomes the spare (then !mapped()) unless too large

  char* base_ = nullptr;
  size_t bytes_ = 0;
  size_t stride_ = 0;
  size_t page_ = 0;
  int64_t count_ = 0;
  bool guarded_ = false;
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_FIBER_STACK_H_
