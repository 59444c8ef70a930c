// Shape and data-movement ops (JAX: jnp.reshape / transpose / concatenate / pad / broadcast_to / flip /
// ravel / arange, lax.slice / dynamic_slice / broadcasted_iota).
//
// None of them computes: they move elements (any dtype, bool included) and report 0 flops (ops/cost.h).
// Reshape and Ravel share the input's buffer (no copy, nothing read or written). Abstract inputs give abstract
// results; results are charged to the current device and carry the inputs' varying axes.
//
// Example:
//   Array x = Array::Iota({2, 3}, DType::kF32);             // [[0, 1, 2], [3, 4, 5]]
//   Transpose(x).ToString() == "[[0, 3], [1, 4], [2, 5]]"
//   Slice(x, {0, 1}, {2, 3}).ToDoubles() == {1, 2, 4, 5}
//   Concatenate({x, x}, 1).shape() == {2, 6}
//   Pad(x, {0, 1}, {0, 0}, -1).ToString() == "[[-1, 0, 1, 2], [-1, 3, 4, 5]]"
//   Reshape(x, {3, -1}).shape() == {3, 2}
//
// Errors reproduce numpy/JAX's wording, prefixed with the op, e.g.
//   "Reshape: cannot reshape array of size 6 into shape (4,)"          (ValueError)
//   "Transpose: axes don't match array"                                 (ValueError)
//   "Concatenate: all the input array dimensions except for the concatenation axis must match exactly, but
//    along dimension 0, the array at index 0 has size 2 and the array at index 1 has size 3"  (ValueError)
// Thread safety: reentrant.
#ifndef SPMDSIM_OPS_SHAPE_OPS_H_
#define SPMDSIM_OPS_SHAPE_OPS_H_

#include <cstdint>
#include <vector>

#include "sim/array.h"

namespace spmdsim {

// New shape with the same number of elements; one dimension may be -1 (inferred). Shares the buffer.
Array Reshape(const Array& x, std::vector<int64_t> shape);
Array Ravel(const Array& x);  // Reshape(x, {-1})
// Insert a size-1 axis at `axis` (in [-rank-1, rank]); remove size-1 axes (all of them when `axes` is empty).
Array ExpandDims(const Array& x, int axis);
Array Squeeze(const Array& x, const std::vector<int>& axes = {});

// Permutes the axes: result dimension i is x's dimension perm[i]. Empty perm reverses them (numpy).
Array Transpose(const Array& x, const std::vector<int>& perm = {});
// Swaps two axes (jnp.swapaxes).
Array SwapAxes(const Array& x, int axis1, int axis2);

// lax.slice: elements start[i], start[i]+stride[i], ... below limit[i]. Empty strides: all 1.
// REQUIRES 0 <= start <= limit <= dim and stride >= 1 (ValueError otherwise, naming the dimension).
Array Slice(const Array& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
            const std::vector<int64_t>& strides = {});
// lax.dynamic_slice: a block of `sizes` at `start`, each start clamped into [0, dim - size] (as XLA does,
// so an out-of-range start is not an error). REQUIRES sizes[i] <= dim (TypeError otherwise).
Array DynamicSlice(const Array& x, const std::vector<int64_t>& start, const std::vector<int64_t>& sizes);
// lax.dynamic_update_slice: x with `update` written at `start` (clamped the same way).
Array DynamicUpdateSlice(const Array& x, const Array& update, const std::vector<int64_t>& start);

// Joins arrays along `axis`; every other dimension must match; dtypes are promoted (PromoteTypes).
Array Concatenate(const std::vector<Array>& arrays, int axis = 0);
// Stacks equal-shaped arrays along a new axis (jnp.stack).
Array Stack(const std::vector<Array>& arrays, int axis = 0);
// Splits into `sections` equal parts along `axis` (jnp.split with an integer; ValueError when it does not
// divide: "array split does not result in an equal division").
std::vector<Array> Split(const Array& x, int64_t sections, int axis = 0);

// Pads each dimension with low[i] elements before and high[i] after, of `value` (jnp.pad constant mode;
// lax.pad without interior padding). REQUIRES low, high >= 0.
Array Pad(const Array& x, const std::vector<int64_t>& low, const std::vector<int64_t>& high, double value = 0);

// numpy broadcast_to: x's shape aligned at the trailing end; each dimension equal or 1.
Array BroadcastTo(const Array& x, const std::vector<int64_t>& shape);
// Reverses the order of elements along `axes` (empty: every axis).
Array Flip(const Array& x, const std::vector<int>& axes = {});

// jnp.arange(n, dtype=dtype): 0, 1, ..., n-1.
Array Iota(DType dtype, int64_t n);
// lax.broadcasted_iota: an array of `shape` whose elements are their index along `dimension`.
Array BroadcastedIota(DType dtype, const std::vector<int64_t>& shape, int dimension);

}  // namespace spmdsim

#endif  // SPMDSIM_OPS_SHAPE_OPS_H_
