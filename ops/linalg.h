// Contractions: lax.dot_general, jnp.matmul, jnp.dot and jnp.einsum over spmdsim::Array, on Eigen's GEMM.
//
// Dtypes: the operands are promoted (PromoteTypes); bfloat16/float16 are multiplied and accumulated in
// float32 and the result rounded once (XLA CPU does the same for a bf16 dot: it upcasts to f32); float64 in
// double; int32/int64 in their own type (wrapping). Not bool (TypeError).
// Cost (ops/cost.h): 2 * batch * M * N * K flops ("dot_general"); Einsum also reports the transposes and
// reductions it needs.
// Abstract operands give an abstract result; results are charged to the current device and carry the union
// of the operands' varying axes. Each call runs on the calling thread only (no Eigen threading).
//
// Example (a Megatron MLP shard, activations [b, s, d], weights sharded on the hidden dimension f):
//   Array h = Einsum("bsd,df->bsf", x, w1);           // [2,8,16] x [16,32] -> [2,8,32]
//   Array y = MatMul(Gelu(h), w2);                     // [2,8,32] x [32,16] -> [2,8,16] (partial sums)
//   Array scores = Einsum("bhqd,bhkd->bhqk", q, k);   // attention logits
//
// Errors (JAX's wording, prefixed with the op):
//   MatMul(f32[2,3], f32[4,5]): "dot_general requires contracting dimensions to have the same shape, got (3,)
//     and (4,)." (TypeError)
//   MatMul of a scalar: "matmul input operand 0 must have ndim at least 1, but it has ndim 0" (ValueError)
//   Einsum("ij,jk->ik", f32[2,3], f32[4,5]): "Size of label 'j' for operand 1 (4) does not match previous
//     terms (3)." (ValueError)
// Thread safety: reentrant.
#ifndef SPMDSIM_OPS_LINALG_H_
#define SPMDSIM_OPS_LINALG_H_

#include <string_view>
#include <vector>

#include "sim/array.h"

namespace spmdsim {

// lax.dot_general's dimension numbers. The result's dimensions are: batch (in lhs_batch order), then lhs's
// free dimensions, then rhs's free dimensions (each in their original order).
struct DotDimensionNumbers {
  std::vector<int> lhs_contracting;
  std::vector<int> rhs_contracting;
  std::vector<int> lhs_batch;
  std::vector<int> rhs_batch;
};
Array DotGeneral(const Array& lhs, const Array& rhs, const DotDimensionNumbers& dims);

// numpy matmul: 1-D operands are promoted to a matrix (a row for the left, a column for the right) and the
// added dimension removed from the result; leading (batch) dimensions broadcast against each other.
// Example: [7,1,2,3] x [5,3,4] -> [7,5,2,4];  [3] x [3,4] -> [4];  [2,3] x [3] -> [2].
Array MatMul(const Array& a, const Array& b);

// numpy/jnp dot: scalar operands multiply; 1-D x 1-D is the inner product; otherwise the last axis of `a`
// contracts with the second-to-last of `b` (the last when b is 1-D), and the other axes are all kept:
// [2,3,4] x [5,4,6] -> [2,3,5,6].
Array Dot(const Array& a, const Array& b);

// jnp.einsum with one or more operands: explicit ("bsd,df->bsf") or implicit ("ij,jk": the labels that occur
// once, in alphabetical order) output; "..." stands for the leading dimensions not labelled (they must have
// equal sizes where they meet; broadcasting a size-1 dimension against a larger one is not supported).
// Operands are contracted left to right. A label repeated within one operand (a diagonal, "ii->i") is not
// supported: Error(kUnimplemented).
Array Einsum(std::string_view subscripts, const std::vector<Array>& operands);
Array Einsum(std::string_view subscripts, const Array& a);
Array Einsum(std::string_view subscripts, const Array& a, const Array& b);

}  // namespace spmdsim

#endif  // SPMDSIM_OPS_LINALG_H_
