#include "ops/internal/kernels.h"

#include <fmt/format.h>

#include "sim/device_context.h"
#include "sim/runtime.h"

namespace spmdsim::ops_internal {

void CheckValid(std::string_view op, const Array& a, int index) {
  if (!a.valid()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "{}: operand {} is an empty Array handle (default-constructed); pass an array", op, index);
  }
}

int CanonicalAxis(std::string_view op, int axis, int rank) {
  if (axis < -rank || axis >= rank) {
    ThrowKind(ErrorCode::kOutOfRange, ErrorKind::kValueError, "{}: axis {} is out of bounds for array of dimension {}",
              op, axis, rank);
  }
  return axis < 0 ? axis + rank : axis;
}

namespace {

// The op cost sink of the Runtime whose device runs this op, or nullptr (none, or a host thread).
OpCostSink* CurrentSink() {
  const DeviceContext* device = CurrentDevice();
  return device != nullptr ? device->runtime_options().op_cost_sink : nullptr;
}

}  // namespace

void ReportCost(const OpCost& cost) {
  if (OpCostSink* sink = CurrentSink()) sink->Record(CurrentDevice()->position(), cost);
}

void ReportCost(std::string_view op, int64_t flops, int64_t transcendentals,
                std::initializer_list<const Array*> inputs, const ArrayBuilder& out) {
  if (CurrentSink() == nullptr) return;
  OpCost cost{op, flops, transcendentals, 0, out.nbytes()};
  for (const Array* a : inputs) cost.bytes_read += a->nbytes();
  ReportCost(cost);
}

}  // namespace spmdsim::ops_internal
