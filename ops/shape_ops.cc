#include "ops/shape_ops.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "ops/elementwise.h"
#include "ops/internal/kernels.h"

namespace spmdsim {

using ops_internal::CanonicalAxis;
using ops_internal::CheckValid;
using ops_internal::NewResult;
using ops_internal::ReportCost;
using ops_internal::VaryingUnion;
using ops_internal::WithVaryingAxes;

namespace {

// Copies `x` viewed through (offset, strides) over `shape` into a new array of `shape`.
Array Gather(std::string_view lax, const Array& x, int64_t offset, const std::vector<int64_t>& strides,
             std::vector<int64_t> shape) {
  ArrayBuilder out = NewResult(x.dtype(), std::move(shape), x.is_abstract());
  if (!x.is_abstract() && out.size() > 0) {
    StridedCopy(x.raw_data(), offset, strides, out.mutable_data(), 0, RowMajorStrides(out.shape()), out.shape(),
                DTypeSize(x.dtype()));
  }
  ReportCost(lax, 0, 0, {&x}, out);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&x}));
}

void FillWith(ArrayBuilder& out, double value) {
  if (out.size() == 0) return;
  Array one = Array::Full({}, out.dtype(), value);
  const int64_t es = DTypeSize(out.dtype());
  char* d = static_cast<char*>(out.mutable_data());
  for (int64_t i = 0; i < out.size(); ++i) std::memcpy(d + i * es, one.raw_data(), static_cast<size_t>(es));
}

}  // namespace

Array Reshape(const Array& x, std::vector<int64_t> shape) {
  CheckValid("Reshape", x);
  int unknown = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (unknown >= 0)
        ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                  "Reshape: can only specify one unknown dimension");
      unknown = static_cast<int>(i);
    } else if (shape[i] < 0) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "Reshape: negative dimensions not allowed (shape {})", PyTuple(shape));
    } else {
      known *= shape[i];
    }
  }
  if (unknown >= 0 && known != 0 && x.size() % known == 0) shape[unknown] = x.size() / known;
  if ((unknown >= 0 && shape[unknown] == -1) || NumElements(shape) != x.size()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Reshape: cannot reshape array of size {} into shape {}", x.size(), PyTuple(shape));
  }
  ops_internal::ReportCost(OpCost{"reshape", 0, 0, 0, 0});
  return WithVaryingAxes(x.Reshape(std::move(shape)), VaryingUnion({&x}));
}

Array Ravel(const Array& x) { return Reshape(x, {-1}); }

Array ExpandDims(const Array& x, int axis) {
  CheckValid("ExpandDims", x);
  int a = CanonicalAxis("ExpandDims", axis, x.rank() + 1);
  std::vector<int64_t> shape = x.shape();
  shape.insert(shape.begin() + a, 1);
  return Reshape(x, std::move(shape));
}

Array Squeeze(const Array& x, const std::vector<int>& axes) {
  CheckValid("Squeeze", x);
  std::vector<bool> drop(static_cast<size_t>(x.rank()), false);
  if (axes.empty()) {
    for (int d = 0; d < x.rank(); ++d) drop[d] = x.shape()[d] == 1;
  }
  for (int axis : axes) {
    int a = CanonicalAxis("Squeeze", axis, x.rank());
    if (x.shape()[a] != 1) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "Squeeze: cannot select an axis to squeeze out which has size not equal to one (axis {} of {})",
                axis, x.ShapeString());
    }
    drop[a] = true;
  }
  std::vector<int64_t> shape;
  for (int d = 0; d < x.rank(); ++d)
    if (!drop[d]) shape.push_back(x.shape()[d]);
  return Reshape(x, std::move(shape));
}

Array Transpose(const Array& x, const std::vector<int>& perm_in) {
  CheckValid("Transpose", x);
  std::vector<int> perm = perm_in;
  if (perm.empty() && x.rank() > 0) {
    perm.resize(static_cast<size_t>(x.rank()));
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  if (static_cast<int>(perm.size()) != x.rank()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "Transpose: axes don't match array (perm {} for {})",
              PyTuple(std::vector<int64_t>(perm.begin(), perm.end())), x.ShapeString());
  }
  std::vector<bool> seen(perm.size(), false);
  for (int& p : perm) {
    p = CanonicalAxis("Transpose", p, x.rank());
    if (seen[p])
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "Transpose: repeated axis in transpose");
    seen[p] = true;
  }
  std::vector<int64_t> in_strides = RowMajorStrides(x.shape());
  std::vector<int64_t> shape(perm.size()), strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    shape[i] = x.shape()[perm[i]];
    strides[i] = in_strides[perm[i]];
  }
  return Gather("transpose", x, 0, strides, std::move(shape));
}

Array SwapAxes(const Array& x, int axis1, int axis2) {
  CheckValid("SwapAxes", x);
  int a = CanonicalAxis("SwapAxes", axis1, x.rank());
  int b = CanonicalAxis("SwapAxes", axis2, x.rank());
  std::vector<int> perm(static_cast<size_t>(x.rank()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[a], perm[b]);
  return Transpose(x, perm);
}

Array Slice(const Array& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
            const std::vector<int64_t>& strides_in) {
  CheckValid("Slice", x);
  const auto& s = x.shape();
  auto fail = [](const std::string& message) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError, "Slice: {}", message);
  };
  if (static_cast<int>(start.size()) != x.rank()) {
    fail(fmt::format(
        "slice start_indices must have length equal to the number of dimensions of the operand, got indices {} "
        "for operand shape {}.",
        PyTuple(start), PyTuple(s)));
  }
  if (limit.size() != start.size()) {
    fail(fmt::format("slice limit_indices must have the same length as start_indices, got start_indices {} and "
         "limit_indices {}.", PyTuple(start), PyTuple(limit)));
  }
  for (int d = 0; d < x.rank(); ++d) {
    if (limit[d] > s[d]) {
      fail(fmt::format(
          "slice limit_indices must be less than or equal to operand shape, got limit_indices {} for operand "
          "shape {}.",
          PyTuple(limit), PyTuple(s)));
    }
  }
  for (int d = 0; d < x.rank(); ++d) {
    if (start[d] < 0)
      fail(fmt::format("slice start_indices must be greater than or equal to zero, got start_indices of {}.",
                       PyTuple(start)));
  }
  for (int d = 0; d < x.rank(); ++d) {
    if (limit[d] < start[d]) {
      fail(fmt::format("slice limit_indices must be greater than or equal to start_indices, got start_indices {} and "
           "limit_indices {}.", PyTuple(start), PyTuple(limit)));
    }
  }
  std::vector<int64_t> steps = strides_in.empty() ? std::vector<int64_t>(start.size(), 1) : strides_in;
  if (steps.size() != start.size()) {
    fail(fmt::format(
        "slice strides must have length equal to the number of dimensions of the operand, got strides {} for "
        "operand shape {}.",
        PyTuple(steps), PyTuple(s)));
  }
  for (int64_t st : steps)
    if (st <= 0) fail(fmt::format("slice strides must be positive, got {}", PyTuple(steps)));
  std::vector<int64_t> in_strides = RowMajorStrides(s);
  std::vector<int64_t> shape(start.size()), strides(start.size());
  int64_t offset = 0;
  for (size_t d = 0; d < start.size(); ++d) {
    shape[d] = (limit[d] - start[d] + steps[d] - 1) / steps[d];
    strides[d] = in_strides[d] * steps[d];
    offset += start[d] * in_strides[d];
  }
  return Gather("slice", x, offset, strides, std::move(shape));
}

Array DynamicSlice(const Array& x, const std::vector<int64_t>& start, const std::vector<int64_t>& sizes) {
  CheckValid("DynamicSlice", x);
  const auto& s = x.shape();
  if (static_cast<int>(start.size()) != x.rank() || sizes.size() != start.size()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
              "DynamicSlice: dynamic_slice needs one start index and one slice size per dimension of the operand, "
              "got start_indices {} and slice_sizes {} for operand shape {}.",
              PyTuple(start), PyTuple(sizes), PyTuple(s));
  }
  for (int d = 0; d < x.rank(); ++d) {
    if (sizes[d] > s[d]) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
                "DynamicSlice: slice slice_sizes must be less than or equal to operand shape, got slice_sizes {} "
                "for operand shape {}.", PyTuple(sizes), PyTuple(s));
    }
    if (sizes[d] < 0) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
                "DynamicSlice: slice slice_sizes must be greater than or equal to zero, got slice_sizes of {}.",
                PyTuple(sizes));
    }
  }
  std::vector<int64_t> in_strides = RowMajorStrides(s);
  int64_t offset = 0;
  for (int d = 0; d < x.rank(); ++d) offset += std::clamp<int64_t>(start[d], 0, s[d] - sizes[d]) * in_strides[d];
  return Gather("dynamic_slice", x, offset, in_strides, sizes);
}

Array DynamicUpdateSlice(const Array& x, const Array& update, const std::vector<int64_t>& start) {
  CheckValid("DynamicUpdateSlice", x, 0);
  CheckValid("DynamicUpdateSlice", update, 1);
  const auto& s = x.shape();
  if (update.rank() != x.rank()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
              "DynamicUpdateSlice: dynamic_update_slice update must have the same rank as operand, got update "
              "shape {} for operand shape {}.", PyTuple(update.shape()), PyTuple(s));
  }
  if (static_cast<int>(start.size()) != x.rank()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
              "DynamicUpdateSlice: dynamic_update_slice start_indices must have length equal to the rank of "
              "operand, got indices {} for operand shape {}.", PyTuple(start), PyTuple(s));
  }
  for (int d = 0; d < x.rank(); ++d) {
    if (update.shape()[d] > s[d]) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
                "DynamicUpdateSlice: dynamic_update_slice update shape must be smaller than operand shape, got "
                "update shape {} for operand shape {}.", PyTuple(update.shape()), PyTuple(s));
    }
  }
  if (update.dtype() != x.dtype()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
              "DynamicUpdateSlice: the update must have the operand's dtype, got {} and {}", update.ShapeString(),
              x.ShapeString());
  }
  const bool abstract = x.is_abstract() || update.is_abstract();
  ArrayBuilder out = NewResult(x.dtype(), s, abstract);
  if (!abstract && out.size() > 0) {
    std::memcpy(out.mutable_data(), x.raw_data(), static_cast<size_t>(x.nbytes()));
    std::vector<int64_t> strides = RowMajorStrides(s);
    int64_t offset = 0;
    for (int d = 0; d < x.rank(); ++d)
      offset += std::clamp<int64_t>(start[d], 0, s[d] - update.shape()[d]) * strides[d];
    StridedCopy(update.raw_data(), 0, RowMajorStrides(update.shape()), out.mutable_data(), offset, strides,
                update.shape(), DTypeSize(x.dtype()));
  }
  ReportCost("dynamic_update_slice", 0, 0, {&x, &update}, out);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&x, &update}));
}

Array Concatenate(const std::vector<Array>& arrays, int axis) {
  if (arrays.empty()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Concatenate: need at least one array to concatenate");
  }
  for (size_t i = 0; i < arrays.size(); ++i) CheckValid("Concatenate", arrays[i], static_cast<int>(i));
  const Array& first = arrays[0];
  if (first.rank() == 0) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Concatenate: zero-dimensional arrays cannot be concatenated");
  }
  int a = CanonicalAxis("Concatenate", axis, first.rank());
  DType dtype = first.dtype();
  bool abstract = false;
  std::vector<int64_t> shape = first.shape();
  shape[a] = 0;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const Array& x = arrays[i];
    if (x.rank() != first.rank()) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "Concatenate: all the input arrays must have same number of dimensions, but the array at index 0 "
                "has {} dimension(s) and the array at index {} has {} dimension(s)", first.rank(), i, x.rank());
    }
    for (int d = 0; d < x.rank(); ++d) {
      if (d != a && x.shape()[d] != first.shape()[d]) {
        ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                  "Concatenate: all the input array dimensions except for the concatenation axis must match "
                  "exactly, but along dimension {}, the array at index 0 has size {} and the array at index {} has "
                  "size {}", d, first.shape()[d], i, x.shape()[d]);
      }
    }
    shape[a] += x.shape()[a];
    dtype = PromoteTypes(dtype, x.dtype());
    abstract = abstract || x.is_abstract();
  }
  ArrayBuilder out = NewResult(dtype, shape, abstract);
  OpCost cost{"concatenate", 0, 0, 0, out.nbytes()};
  std::vector<int64_t> out_strides = RowMajorStrides(shape);
  int64_t at = 0;
  for (const Array& x : arrays) {
    Array part = x.dtype() == dtype ? x : Cast(x, dtype);
    cost.bytes_read += x.nbytes();
    if (!abstract && part.size() > 0) {
      StridedCopy(part.raw_data(), 0, RowMajorStrides(part.shape()), out.mutable_data(), at * out_strides[a],
                  out_strides, part.shape(), DTypeSize(dtype));
    }
    at += x.shape()[a];
  }
  ops_internal::ReportCost(cost);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion(arrays));
}

Array Stack(const std::vector<Array>& arrays, int axis) {
  if (arrays.empty())
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "Stack: need at least one array to stack");
  for (size_t i = 0; i < arrays.size(); ++i) {
    CheckValid("Stack", arrays[i], static_cast<int>(i));
    if (arrays[i].shape() != arrays[0].shape()) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "Stack: all input arrays must have the same shape (index 0 is {}, index {} is {})",
                arrays[0].ShapeString(), i, arrays[i].ShapeString());
    }
  }
  int a = CanonicalAxis("Stack", axis, arrays[0].rank() + 1);
  std::vector<Array> expanded;
  expanded.reserve(arrays.size());
  for (const Array& x : arrays) expanded.push_back(ExpandDims(x, a));
  return Concatenate(expanded, a);
}

std::vector<Array> Split(const Array& x, int64_t sections, int axis) {
  CheckValid("Split", x);
  int a = CanonicalAxis("Split", axis, x.rank());
  if (sections <= 0) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Split: number sections must be larger than 0, got {}", sections);
  }
  const int64_t dim = x.shape()[a];
  if (dim % sections != 0) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Split: array split does not result in an equal division: {} sections of axis {} (size {}) of {}",
              sections, axis, dim, x.ShapeString());
  }
  std::vector<Array> parts;
  std::vector<int64_t> start(static_cast<size_t>(x.rank()), 0), limit = x.shape();
  for (int64_t i = 0; i < sections; ++i) {
    start[a] = i * (dim / sections);
    limit[a] = start[a] + dim / sections;
    parts.push_back(Slice(x, start, limit));
  }
  return parts;
}

Array Pad(const Array& x, const std::vector<int64_t>& low, const std::vector<int64_t>& high, double value) {
  CheckValid("Pad", x);
  if (static_cast<int>(low.size()) != x.rank() || static_cast<int>(high.size()) != x.rank()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Pad: padding must give one (low, high) pair per dimension of the operand, got low {} and high {} "
              "for operand shape {}", PyTuple(low), PyTuple(high), PyTuple(x.shape()));
  }
  std::vector<int64_t> shape = x.shape();
  int64_t offset = 0;
  std::vector<int64_t> out_strides;
  for (int d = 0; d < x.rank(); ++d) {
    if (low[d] < 0 || high[d] < 0) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "Pad: index can't contain negative values (low {}, high {})", PyTuple(low), PyTuple(high));
    }
    shape[d] += low[d] + high[d];
  }
  out_strides = RowMajorStrides(shape);
  for (int d = 0; d < x.rank(); ++d) offset += low[d] * out_strides[d];
  ArrayBuilder out = NewResult(x.dtype(), shape, x.is_abstract());
  if (!x.is_abstract()) {
    FillWith(out, value);
    if (x.size() > 0) {
      StridedCopy(x.raw_data(), 0, RowMajorStrides(x.shape()), out.mutable_data(), offset, out_strides, x.shape(),
                  DTypeSize(x.dtype()));
    }
  }
  ReportCost("pad", 0, 0, {&x}, out);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&x}));
}

Array BroadcastTo(const Array& x, const std::vector<int64_t>& shape) {
  CheckValid("BroadcastTo", x);
  const int r = static_cast<int>(shape.size());
  bool ok = r >= x.rank();
  std::vector<int64_t> strides(shape.size(), 0);
  std::vector<int64_t> in_strides = RowMajorStrides(x.shape());
  for (int i = 0; ok && i < x.rank(); ++i) {
    int64_t d = x.shape()[i], o = shape[r - x.rank() + i];
    if (d == o) {
      strides[r - x.rank() + i] = in_strides[i];
    } else if (d != 1) {
      ok = false;
    }
  }
  for (int64_t d : shape) ok = ok && d >= 0;
  if (!ok) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "BroadcastTo: Incompatible shapes for broadcasting: {} and requested shape {}", PyTuple(x.shape()),
              PyTuple(shape));
  }
  return Gather("broadcast_in_dim", x, 0, strides, shape);
}

Array Flip(const Array& x, const std::vector<int>& axes) {
  CheckValid("Flip", x);
  std::vector<bool> flip(static_cast<size_t>(x.rank()), axes.empty());
  for (int axis : axes) flip[CanonicalAxis("Flip", axis, x.rank())] = true;
  std::vector<int64_t> strides = RowMajorStrides(x.shape());
  int64_t offset = 0;
  for (int d = 0; d < x.rank(); ++d) {
    if (flip[d] && x.shape()[d] > 0) {
      offset += (x.shape()[d] - 1) * strides[d];
      strides[d] = -strides[d];
    }
  }
  return Gather("rev", x, offset, strides, x.shape());
}

Array Iota(DType dtype, int64_t n) {
  if (n < 0)
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "Iota: negative dimensions are not allowed ({})", n);
  Array out = Array::Iota({n}, dtype);
  ops_internal::ReportCost(OpCost{"iota", 0, 0, 0, out.nbytes()});
  return out;
}

Array BroadcastedIota(DType dtype, const std::vector<int64_t>& shape, int dimension) {
  for (int64_t d : shape) {
    if (d < 0) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "BroadcastedIota: negative dimensions are not allowed in {}", PyTuple(shape));
    }
  }
  int a = CanonicalAxis("BroadcastedIota", dimension, static_cast<int>(shape.size()));
  Array line = Array::Iota({shape[a]}, dtype);
  std::vector<int64_t> strides(shape.size(), 0);
  strides[a] = 1;
  ArrayBuilder out = NewResult(dtype, shape, false);
  if (out.size() > 0) {
    StridedCopy(line.raw_data(), 0, strides, out.mutable_data(), 0, RowMajorStrides(shape), shape, DTypeSize(dtype));
  }
  ops_internal::ReportCost(OpCost{"iota", 0, 0, 0, out.nbytes()});
  return std::move(out).Freeze();
}

}  // namespace spmdsim
