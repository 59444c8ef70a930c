#include "ops/internal/kernels.h"

#include <fmt/format.h>

#include "sim/internal/buffer.h"
#include "sim/memory.h"

namespace spmdsim::ops_internal {

Array NewResult(DType dtype, std::vector<int64_t> shape, bool abstract) {
  return internal::ArrayAccess::Allocate(dtype, std::move(shape), internal::CurrentDeviceMemory(), false,
                                         abstract);
}

void* MutableData(const Array& fresh) { return internal::ArrayAccess::mutable_data(fresh); }

void CheckValid(std::string_view op, const Array& a, int index) {
  if (!a.valid()) {
    ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
              "{}: operand {} is an empty Array handle (default-constructed); pass an array", op, index);
  }
}

int CanonicalAxis(std::string_view op, int axis, int rank) {
  if (axis < -rank || axis >= rank) {
    ThrowKind(ErrorCode::kOutOfRange, "ValueError", "{}: axis {} is out of bounds for array of dimension {}", op,
              axis, rank);
  }
  return axis < 0 ? axis + rank : axis;
}

void ReportCost(const OpCost& cost) {
  OpCostSink* sink = CurrentOpCostSink();
  if (sink == nullptr) return;
  internal::DeviceMemory* memory = internal::CurrentDeviceMemory();
  sink->Record(memory == nullptr ? -1 : memory->position(), cost);
}

void ReportCost(std::string_view op, int64_t flops, int64_t transcendentals,
                std::initializer_list<const Array*> inputs, const Array& out) {
  if (CurrentOpCostSink() == nullptr) return;
  OpCost cost{op, flops, transcendentals, 0, out.nbytes()};
  for (const Array* a : inputs) cost.bytes_read += a->nbytes();
  ReportCost(cost);
}

}  // namespace spmdsim::ops_internal
