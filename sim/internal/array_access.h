// Internals of sim/array.h: the back door the runtime, its collectives and the process layer use to build
// Arrays over host buffers they share, and to reach an Array's buffer. Not for users (other modules make
// arrays with sim/array_builder.h).
//
// Thread safety: as Array's (sim/array.h); mutable_data() only before the Array is shared with another thread.
#ifndef SPMDSIM_SIM_INTERNAL_ARRAY_ACCESS_H_
#define SPMDSIM_SIM_INTERNAL_ARRAY_ACCESS_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sim/array.h"
#include "sim/internal/buffer.h"
#include "sim/memory.h"

namespace spmdsim::internal {

struct ArrayAccess {
  // An Array over `buffer` (nullptr: abstract), charged to `memory` (nullptr: host). Charges first and
  // throws Error(kResourceExhausted) without making anything when the device is full.
  static Array Make(DType dtype, std::vector<int64_t> shape, std::shared_ptr<Buffer> buffer,
                    DeviceMemory* memory) {  // inline: on every device's every collective
    return Array::Over(dtype, std::move(shape), std::move(buffer), memory);
  }
  // Charges `memory` for nbytes and then allocates (zeroed when asked) a buffer for it: the charge comes
  // first so that an over-capacity request never allocates host memory.
  static Array Allocate(DType dtype, std::vector<int64_t> shape, DeviceMemory* memory, bool zeroed,
                        bool abstract) {
    return Array::Allocated(dtype, std::move(shape), memory, zeroed, abstract);
  }
  static const std::shared_ptr<Buffer>& buffer(const Array& array);
  static void* mutable_data(const Array& array);  // REQUIRES: not yet shared with another thread
  // The same buffer held (and charged) by `memory`; a no-op copy when it already is.
  static Array Rehold(const Array& array, DeviceMemory* memory);
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_ARRAY_ACCESS_H_
