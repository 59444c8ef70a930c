#include "sim/device_context.h"

#include <cstdlib>
#include <utility>

#include "common/strings.h"
#include "sim/internal/array_access.h"
#include "sim/internal/collective_call.h"
#include "sim/internal/device_entry.h"

namespace spmdsim {

using internal::CollectiveCall;
using internal::OpKind;

int32_t DeviceContext::AxisIndex(const Axes& axes) const {
  internal::AxesKey key = internal::MakeAxesKey(mesh(), axes, "axis_index");
  int64_t index = 0;
  for (int i = 0; i < key.count; ++i) index = index * mesh().shape()[key.index[i]] + coords_[key.index[i]];
  return static_cast<int32_t>(index);
}

uint64_t DeviceContext::AxesMask(const Axes& axes) const {
  internal::AxesKey key = internal::MakeAxesKey(mesh(), axes, "axis_index");
  uint64_t mask = 0;
  for (int i = 0; i < key.count; ++i) mask |= uint64_t{1} << key.index[i];
  return mask;
}

Array DeviceContext::AxisIndexArray(const Axes& axes) const {
  int32_t index = AxisIndex(axes);
  return Array::Scalar<int32_t>(index).WithVaryingAxes(AxesMask(axes));
}

int64_t DeviceContext::AxisSize(const Axes& axes) const {
  return internal::GroupSize(mesh(), internal::MakeAxesKey(mesh(), axes, "axis_size"));
}

MemoryStats DeviceContext::memory_stats() const { return memory_->stats(); }

Array DeviceContext::Hold(const Array& x) const {
  if (!x.valid()) Throw(ErrorCode::kInvalidArgument, "Hold of an empty Array handle");
  return internal::ArrayAccess::Rehold(x, memory_);
}

namespace {

Array Collective(const Mesh& mesh, internal::DeviceSlot* slot, int64_t position, OpKind op, const Array* x,
                 const Axes& axes, int64_t p0 = 0, int64_t p1 = 0, bool tiled = false,
                 const PermutationPairs* perm = nullptr) {
  const std::string_view api = internal::OpName(op);
  if (internal::CurrentSlot() != slot) {
    Throw(ErrorCode::kFailedPrecondition,
          "{} called on the DeviceContext of position {} outside that device's function (a DeviceContext may only "
          "be used by the device Runtime::Run gave it to)",
          api, position);
  }
  if (x != nullptr && !x->valid()) Throw(ErrorCode::kInvalidArgument, "{} of an empty Array handle", api);
  CollectiveCall call;
  call.op = op;
  call.axes = internal::MakeAxesKey(mesh, axes, api);
  call.input = x;
  call.p0 = p0;
  call.p1 = p1;
  call.tiled = tiled;
  static const PermutationPairs kNoPerm;
  internal::ValidateCall(mesh, call, axes, perm != nullptr ? *perm : kNoPerm);
  Array out = internal::WaitAtCollective(*slot, call);
  if (x == nullptr) return out;
  // Varying manual axes (JAX's vma): reductions make the result invariant over their axes; every other
  // collective makes it vary over them.
  uint64_t bits = 0;
  for (int i = 0; i < call.axes.count; ++i) bits |= uint64_t{1} << call.axes.index[i];
  const bool reduces = op == OpKind::kPsum || op == OpKind::kPmean || op == OpKind::kPmax || op == OpKind::kPmin;
  return std::move(out).WithVaryingAxes(reduces ? (x->varying_axes() & ~bits) : (x->varying_axes() | bits));
}

}  // namespace

Array DeviceContext::Psum(const Array& x, const Axes& axes) {
  if (axes.names().empty()) return x;  // JAX: psum over no axes returns x
  return Collective(*mesh_, slot_, position_, OpKind::kPsum, &x, axes);
}

Array DeviceContext::Pmean(const Array& x, const Axes& axes) {
  return Collective(*mesh_, slot_, position_, OpKind::kPmean, &x, axes);
}

Array DeviceContext::Pmax(const Array& x, const Axes& axes) {
  if (axes.names().empty()) return x;
  return Collective(*mesh_, slot_, position_, OpKind::kPmax, &x, axes);
}

Array DeviceContext::Pmin(const Array& x, const Axes& axes) {
  if (axes.names().empty()) return x;
  return Collective(*mesh_, slot_, position_, OpKind::kPmin, &x, axes);
}

Array DeviceContext::AllGather(const Array& x, const Axes& axes, int axis, bool tiled) {
  if (axes.names().empty()) return x;  // JAX: all_gather over no axes returns x
  return Collective(*mesh_, slot_, position_, OpKind::kAllGather, &x, axes, axis, 0, tiled);
}

Array DeviceContext::PsumScatter(const Array& x, const Axes& axes, int scatter_dimension, bool tiled) {
  if (axes.names().empty()) return x;  // JAX: psum_scatter over no axes returns x
  return Collective(*mesh_, slot_, position_, OpKind::kPsumScatter, &x, axes, scatter_dimension, 0, tiled);
}

Array DeviceContext::AllToAll(const Array& x, const Axes& axes, int split_axis, int concat_axis, bool tiled) {
  return Collective(*mesh_, slot_, position_, OpKind::kAllToAll, &x, axes, split_axis, concat_axis, tiled);
}

Array DeviceContext::Ppermute(const Array& x, const Axes& axes, const PermutationPairs& perm) {
  return Collective(*mesh_, slot_, position_, OpKind::kPpermute, &x, axes, 0, 0, false, &perm);
}

namespace {

// Kept out of DeviceContext::Barrier so that the hot path has no frame to speak of (at thousands of devices
// every byte of a waiting device's stack is a cache line to bring back).
[[noreturn, gnu::noinline, gnu::cold]] void BarrierFromTheWrongDevice(const Mesh& mesh, internal::DeviceSlot* slot,
                                                                      int64_t position) {
  Collective(mesh, slot, position, OpKind::kBarrier, nullptr, Axes(std::vector<std::string>{}));  // throws
  std::abort();
}

}  // namespace

void DeviceContext::Barrier() {
  // The hot path of every barrier benchmark: no CollectiveCall of its own, nothing formatted.
  if (internal::CurrentSlot() != slot_) [[unlikely]] BarrierFromTheWrongDevice(*mesh_, slot_, position_);
  internal::WaitAtBarrier(*slot_);
}

}  // namespace spmdsim
