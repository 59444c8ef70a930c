// Internals of sim/runtime.h: the pooled stacks device fibers run on. Not for users.
//
// Thread safety: a FiberStack belongs to its device's slot; EnsureStack and FreeStack are called by one thread
// at a time for a given stack (Runtime::Run before the workers start, ~RuntimeCore after they have returned).
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

// A fiber stack kept for the device across Runs (mmap'd, with a guard page below it).
struct FiberStack {
  void* base = nullptr;  // start of the mapping (guard page)
  size_t mapped = 0;     // bytes mapped including the guard page
  boost::context::stack_context context;
};

// Maps `stack` with `size` usable bytes unless it already is (then only clears ASan's poison). Throws
// Error(kResourceExhausted) when the mapping fails.
void EnsureStack(FiberStack& stack, size_t size);
// The bytes EnsureStack maps for `size` usable bytes: rounded up to pages, plus the guard page.
int64_t StackMappingBytes(size_t size);
void FreeStack(FiberStack& stack);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_FIBER_STACK_H_
