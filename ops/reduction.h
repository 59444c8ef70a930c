// Reductions over axes and the softmax family (JAX: jnp.sum / mean / max / min, jax.nn.softmax /
// log_softmax).
//
// Axes may be negative (counted from the end). `Sum(x)` reduces every axis (numpy axis=None); an empty axis
// list reduces none. Bad axes: Error(kOutOfRange, "ValueError") "Sum: axis 2 is out of bounds for array of
// dimension 2"; a repeated axis: Error(kInvalidArgument, "ValueError") "Sum: duplicate value in 'axis'".
// keepdims keeps reduced axes as size 1.
// Numerics: float32/bfloat16/float16 accumulate in float32 and round once (jnp.sum upcasts 16-bit floats
// the same way); float64 in double; integers in their own type (wrapping). Max/Min propagate NaN (jnp.max).
// Mean of an integer array is float32 (JAX's default float dtype); of an empty selection, NaN.
// Max/Min over an empty selection: Error(ValueError) "Max: zero-size array to reduction operation max which
// has no identity" (numpy/JAX).
//
// Example:
//   Array x = Array::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
//   Sum(x, {1}).ToDoubles() == {6, 15};     Sum(x, {0}, true).shape() == {1, 3}
//   Max(x).ToDoubles() == {6};              Mean(x, {-1}).ToDoubles() == {2, 5}
//   Softmax(x, -1) rows sum to 1;           LogSoftmax(x) == Log(Softmax(x)) up to rounding
//
// Abstract inputs give abstract results; results are charged to the current device, carry the input's
// varying axes and report their cost (ops/cost.h). Thread safety: reentrant.
#ifndef SPMDSIM_OPS_REDUCTION_H_
#define SPMDSIM_OPS_REDUCTION_H_

#include <vector>

#include "sim/array.h"

namespace spmdsim {

Array Sum(const Array& x);
Array Sum(const Array& x, const std::vector<int>& axes, bool keepdims = false);
Array Mean(const Array& x);
Array Mean(const Array& x, const std::vector<int>& axes, bool keepdims = false);
// Reductions (the elementwise Max/Min of two arrays are in ops/elementwise.h).
Array ReduceMax(const Array& x);
Array ReduceMax(const Array& x, const std::vector<int>& axes, bool keepdims = false);
Array ReduceMin(const Array& x);
Array ReduceMin(const Array& x, const std::vector<int>& axes, bool keepdims = false);
// Index of the largest / smallest element along `axis` (first on ties; NaN counts as largest), int32.
Array ArgMax(const Array& x, int axis);
Array ArgMin(const Array& x, int axis);

// exp(x - max) / sum(exp(x - max)) along `axis`, computed in one pass per row (floating only).
Array Softmax(const Array& x, int axis = -1);
// x - max - log(sum(exp(x - max))) along `axis` (floating only).
Array LogSoftmax(const Array& x, int axis = -1);

}  // namespace spmdsim

#endif  // SPMDSIM_OPS_REDUCTION_H_
