#include "sim/internal/array_access.h"

#include <utility>

namespace spmdsim::internal {

const std::shared_ptr<Buffer>& ArrayAccess::buffer(const Array& array) { return array.holding_->buffer(); }

void* ArrayAccess::mutable_data(const Array& array) {
  const auto& buffer = array.holding_->buffer();
  return buffer ? buffer->data() : nullptr;
}

Array ArrayAccess::Rehold(const Array& array, DeviceMemory* memory) {
  if (array.holding_->memory() == memory) return array;
  return Make(array.dtype_, array.shape_, array.holding_->buffer(), memory).WithVaryingAxes(array.varying_axes_);
}

}  // namespace spmdsim::internal
