#include "ops/internal/kernels.h"

#include <fmt/format.h>

#include "sim/device_context.h"
#include "sim/runtime.h"

namespace spmdsim::ops_internal {

void CheckValid(std::string_view op, const Array& a, int index) {
  if (!a.valid()) {
    ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
              "{}: operand {} is an empty Array handle (default-constructed); pass an array", op, index);
  }
}

std::string PyShape(std::span<const int64_t> shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

int CanonicalAxis(std::string_view op, int axis, int rank) {
  if (axis < -rank || axis >= rank) {
    ThrowKind(ErrorCode::kOutOfRange, "ValueError", "{}: axis {} is out of bounds for array of dimension {}", op,
              axis, rank);
  }
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> RowMajorStrides(std::span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

namespace {

template <typename U>
void StridedCopyT(const U* src, int64_t src_offset, std::span<const int64_t> src_strides, U* dst,
                  int64_t dst_offset, std::span<const int64_t> dst_strides, std::span<const int64_t> shape) {
  const size_t rank = shape.size();
  for (int64_t d : shape)
    if (d == 0) return;
  if (rank == 0) {
    dst[dst_offset] = src[src_offset];
    return;
  }
  const int64_t inner = shape[rank - 1];
  const int64_t ss = src_strides[rank - 1];
  const int64_t ds = dst_strides[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t s = src_offset, d = dst_offset;
  while (true) {
    if (ss == 1 && ds == 1) {
      std::memcpy(dst + d, src + s, static_cast<size_t>(inner) * sizeof(U));
    } else {
      for (int64_t i = 0; i < inner; ++i) dst[d + i * ds] = src[s + i * ss];
    }
    // Odometer over the outer dimensions.
    size_t k = rank - 1;
    while (k-- > 0) {
      ++index[k];
      s += src_strides[k];
      d += dst_strides[k];
      if (index[k] < shape[k]) break;
      s -= src_strides[k] * shape[k];
      d -= dst_strides[k] * shape[k];
      index[k] = 0;
    }
    if (k == static_cast<size_t>(-1)) return;
  }
}

}  // namespace

void StridedCopy(const void* src, int64_t src_offset, std::span<const int64_t> src_strides, void* dst,
                 int64_t dst_offset, std::span<const int64_t> dst_strides, std::span<const int64_t> shape,
                 int64_t esize) {
  switch (esize) {
    case 1:
      return StridedCopyT(static_cast<const uint8_t*>(src), src_offset, src_strides, static_cast<uint8_t*>(dst),
                          dst_offset, dst_strides, shape);
    case 2:
      return StridedCopyT(static_cast<const uint16_t*>(src), src_offset, src_strides,
                          static_cast<uint16_t*>(dst), dst_offset, dst_strides, shape);
    case 4:
      return StridedCopyT(static_cast<const uint32_t*>(src), src_offset, src_strides,
                          static_cast<uint32_t*>(dst), dst_offset, dst_strides, shape);
    case 8:
      return StridedCopyT(static_cast<const uint64_t*>(src), src_offset, src_strides,
                          static_cast<uint64_t*>(dst), dst_offset, dst_strides, shape);
    default:
      SPMDSIM_CHECK(false, "element size {}", esize);
  }
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
