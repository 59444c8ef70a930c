#include "sim/array_builder.h"

#include <utility>

#include "common/error.h"
#include "sim/internal/array_access.h"
#include "sim/internal/buffer.h"

namespace spmdsim {

using internal::ArrayAccess;

ArrayBuilder::ArrayBuilder(DType dtype, std::vector<int64_t> shape, Options options)
    : array_(ArrayAccess::Allocate(dtype, std::move(shape), internal::CurrentDeviceMemory(), options.zeroed,
                                   options.abstract)),
      data_(ArrayAccess::mutable_data(array_)) {}

ArrayBuilder::ArrayBuilder(DType dtype, std::vector<int64_t> shape)
    : ArrayBuilder(dtype, std::move(shape), Options{}) {}

void ArrayBuilder::CheckWritable(DType requested) const {
  if (requested != array_.dtype()) {
    Throw(ErrorCode::kInvalidArgument, "array is {}, not {}", array_.ShapeString(), DTypeName(requested));
  }
  if (data_ == nullptr && array_.size() > 0) {
    Throw(ErrorCode::kFailedPrecondition, "array {} has no elements to write (abstract, or already frozen)",
          array_.ShapeString());
  }
}

}  // namespace spmdsim
