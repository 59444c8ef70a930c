// Shape kernels: broadcast, reshape, bitcast, copy, transpose, reverse, slice, dynamic-slice,
// dynamic-update-slice, concatenate, pad. Every copy is one strided block copy (common/shape.h).
#include <algorithm>
#include <cstring>

#include "common/shape.h"
#include "hlo/internal/kernels.h"

namespace spmdsim::hlo::internal {
namespace {

int64_t ElementBytes(const Value& v) { return DTypeSize(v.dtype()); }

Value Broadcast(const Instruction& ins, const Value& x) {
  const Shape& s = ins.shape();
  ValueBuilder out(s.dtype, s.dims);
  const std::vector<int64_t> xs = RowMajorStrides(x.dims());
  std::vector<int64_t> src(s.dims.size(), 0);
  for (size_t i = 0; i < ins.attrs().dimensions.size(); ++i) src[ins.attrs().dimensions[i]] = xs[i];
  if (out.size() > 0) StridedCopy(x.raw(), 0, src, out.raw(), 0, RowMajorStrides(s.dims), s.dims, ElementBytes(x));
  return std::move(out).Finish();
}

// x (row-major over `dims`) permuted: result dimension i is x's dimension perm[i].
Value Permute(const Value& x, const std::vector<int64_t>& perm) {
  std::vector<int64_t> dims, src;
  const std::vector<int64_t> xs = RowMajorStrides(x.dims());
  for (int64_t p : perm) {
    dims.push_back(x.dims()[p]);
    src.push_back(xs[p]);
  }
  ValueBuilder out(x.dtype(), dims);
  if (out.size() > 0) StridedCopy(x.raw(), 0, src, out.raw(), 0, RowMajorStrides(dims), dims, ElementBytes(x));
  return std::move(out).Finish();
}

// Dimensions from major to minor in memory (the reverse of minor_to_major).
std::vector<int64_t> MajorToMinor(const Shape& s) {
  std::vector<int64_t> m = s.MinorToMajor();
  std::reverse(m.begin(), m.end());
  return m;
}

// bitcast: the operand's bytes in its layout, read in the result's layout.
Value Bitcast(const Instruction& ins, const Value& x) {
  const Shape& in = ins.operand(0)->shape();
  const Shape& out = ins.shape();
  const bool same_type = out.dtype == x.dtype();
  if (same_type && in.HasDefaultLayout() && out.HasDefaultLayout()) {
    return Value::FromArray(x.dtype(), x.storage().Reshape(out.dims));
  }
  Value physical = Permute(x, MajorToMinor(in));  // the operand as laid out in memory
  const std::vector<int64_t> order = MajorToMinor(out);
  std::vector<int64_t> out_physical;
  for (int64_t d : order) out_physical.push_back(out.dims[d]);
  Value as_out;
  if (same_type) {
    as_out = Value::FromArray(x.dtype(), physical.storage().Reshape(out_physical));
  } else {  // the same bytes as another element type
    ValueBuilder b(out.dtype, out_physical);
    std::memcpy(b.raw(), physical.raw(), static_cast<size_t>(physical.nbytes()));
    as_out = std::move(b).Finish();
  }
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
  return Permute(as_out, inverse);
}

Value Reverse(const Instruction& ins, const Value& x) {
  ValueBuilder out(x.dtype(), x.dims());
  std::vector<int64_t> src = RowMajorStrides(x.dims());
  int64_t offset = 0;
  for (int64_t d : ins.attrs().dimensions) {
    if (x.dims()[d] == 0) continue;
    offset += (x.dims()[d] - 1) * src[d];
    src[d] = -src[d];
  }
  if (x.size() > 0)
    StridedCopy(x.raw(), offset, src, out.raw(), 0, RowMajorStrides(x.dims()), x.dims(), ElementBytes(x));
  return std::move(out).Finish();
}

Value Slice(const Instruction& ins, const Value& x) {
  const Shape& s = ins.shape();
  ValueBuilder out(s.dtype, s.dims);
  const std::vector<int64_t> xs = RowMajorStrides(x.dims());
  std::vector<int64_t> src(xs.size());
  int64_t offset = 0;
  for (size_t d = 0; d < xs.size(); ++d) {
    offset += ins.attrs().slice[d].start * xs[d];
    src[d] = ins.attrs().slice[d].stride * xs[d];
  }
  if (out.size() > 0) StridedCopy(x.raw(), offset, src, out.raw(), 0, RowMajorStrides(s.dims), s.dims, ElementBytes(x));
  return std::move(out).Finish();
}

// Start indices clamped so that a block of `sizes` fits in `dims` (XLA's dynamic-slice semantics).
std::vector<int64_t> ClampedStarts(Operands v, int first, const std::vector<int64_t>& dims,
                                   const std::vector<int64_t>& sizes) {
  std::vector<int64_t> starts;
  for (size_t d = 0; d < dims.size(); ++d) {
    starts.push_back(std::clamp<int64_t>(ScalarAsInt64(*v[first + d]), 0, dims[d] - sizes[d]));
  }
  return starts;
}

int64_t Offset(const std::vector<int64_t>& index, const std::vector<int64_t>& strides) {
  int64_t o = 0;
  for (size_t d = 0; d < index.size(); ++d) o += index[d] * strides[d];
  return o;
}

Value DynamicSlice(const Instruction& ins, Operands v) {
  const Value& x = *v[0];
  const Shape& s = ins.shape();
  ValueBuilder out(s.dtype, s.dims);
  const std::vector<int64_t> xs = RowMajorStrides(x.dims());
  const int64_t offset = Offset(ClampedStarts(v, 1, x.dims(), s.dims), xs);
  if (out.size() > 0) StridedCopy(x.raw(), offset, xs, out.raw(), 0, RowMajorStrides(s.dims), s.dims, ElementBytes(x));
  return std::move(out).Finish();
}

Value DynamicUpdateSlice(const Instruction& ins, Operands v) {
  const Value& x = *v[0];
  const Value& u = *v[1];
  ValueBuilder out(x.dtype(), x.dims());
  std::memcpy(out.raw(), x.raw(), static_cast<size_t>(x.nbytes()));
  const std::vector<int64_t> xs = RowMajorStrides(x.dims());
  const int64_t offset = Offset(ClampedStarts(v, 2, x.dims(), u.dims()), xs);
  if (u.size() > 0)
    StridedCopy(u.raw(), 0, RowMajorStrides(u.dims()), out.raw(), offset, xs, u.dims(), ElementBytes(x));
  return std::move(out).Finish();
}

Value Concatenate(const Instruction& ins, Operands v) {
  const Shape& s = ins.shape();
  ValueBuilder out(s.dtype, s.dims);
  const int64_t d = ins.attrs().dimensions[0];
  const std::vector<int64_t> os = RowMajorStrides(s.dims);
  int64_t at = 0;
  for (const Value* x : v) {
    if (x->size() > 0)
      StridedCopy(x->raw(), 0, RowMajorStrides(x->dims()), out.raw(), at * os[d], os, x->dims(), ElementBytes(*x));
    at += x->dims()[d];
  }
  return std::move(out).Finish();
}

Value Pad(const Instruction& ins, const Value& x, const Value& pad) {
  const Shape& s = ins.shape();
  ValueBuilder out(s.dtype, s.dims);
  const int64_t size = ElementBytes(x);
  char* o = static_cast<char*>(out.raw());
  for (int64_t i = 0; i < out.size(); ++i) std::memcpy(o + i * size, pad.raw(), static_cast<size_t>(size));
  // Operand element i of dimension d lands at low + i * (interior + 1); copy the ones that land inside.
  const std::vector<int64_t> xs = RowMajorStrides(x.dims()), os = RowMajorStrides(s.dims);
  std::vector<int64_t> box, src(xs.size()), dst(xs.size());
  int64_t src_offset = 0, dst_offset = 0;
  for (size_t d = 0; d < xs.size(); ++d) {
    const PadDim& p = ins.attrs().padding[d];
    const int64_t step = p.interior + 1;
    int64_t first = p.low >= 0 ? 0 : (-p.low + step - 1) / step;
    int64_t last = x.dims()[d] - 1;  // the last element whose position is < out dim
    while (last >= first && p.low + last * step >= s.dims[d]) --last;
    box.push_back(std::max<int64_t>(last - first + 1, 0));
    src_offset += first * xs[d];
    dst_offset += (p.low + first * step) * os[d];
    src[d] = xs[d];
    dst[d] = step * os[d];
  }
  if (NumElements(box) > 0) StridedCopy(x.raw(), src_offset, src, out.raw(), dst_offset, dst, box, size);
  return std::move(out).Finish();
}

}  // namespace

Value EvalShape(const Instruction& ins, Operands v) {
  switch (ins.opcode()) {
    case Opcode::kBroadcast: return Broadcast(ins, *v[0]);
    case Opcode::kReshape: return Value::FromArray(v[0]->dtype(), v[0]->storage().Reshape(ins.shape().dims));
    case Opcode::kBitcast: return Bitcast(ins, *v[0]);
    case Opcode::kCopy: case Opcode::kOptimizationBarrier: case Opcode::kDomain: return *v[0];
    case Opcode::kTranspose: return Permute(*v[0], ins.attrs().dimensions);
    case Opcode::kReverse: return Reverse(ins, *v[0]);
    case Opcode::kSlice: return Slice(ins, *v[0]);
    case Opcode::kDynamicSlice: return DynamicSlice(ins, v);
    case Opcode::kDynamicUpdateSlice: return DynamicUpdateSlice(ins, v);
    case Opcode::kConcatenate: return Concatenate(ins, v);
    case Opcode::kPad: return Pad(ins, *v[0], *v[1]);
    default: return Value();
  }
}

}  // namespace spmdsim::hlo::internal
