// spmdsim's local tensor toolkit: everything a device function needs to compute on its shards.
//
// Example (a Megatron-style tensor-parallel MLP on one device of a mesh with axis "tp"):
//   Array MlpShard(DeviceContext& d, const Array& x, const Array& w1, const Array& w2) {
//     Array h = Gelu(Einsum("bsd,df->bsf", x, w1));   // column-parallel: w1 is [d, f/tp]
//     return d.Psum(MatMul(h, w2), "tp");              // row-parallel: w2 is [f/tp, d]; one psum
//   }
//
// ops/elementwise.h  arithmetic with broadcasting, comparisons, Where, Cast, activations
// ops/reduction.h    Sum, Mean, ReduceMax/Min, ArgMax/Min, Softmax, LogSoftmax
// ops/shape_ops.h    Reshape, Transpose, Slice, DynamicSlice, Concatenate, Pad, BroadcastTo, Flip, Iota, ...
// ops/linalg.h       DotGeneral, MatMul, Dot, Einsum
// ops/cost.h         the FLOP/byte cost every op reports (the cost model's seam)
// ops/random.h       deterministic random arrays (normal, uniform), whole or block by block
// docs/ops.md has the list, the numerics and the cost conventions.
#ifndef SPMDSIM_OPS_OPS_H_
#define SPMDSIM_OPS_OPS_H_

#include "ops/cost.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/random.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"

#endif  // SPMDSIM_OPS_OPS_H_
