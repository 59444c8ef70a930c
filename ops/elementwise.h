// Elementwise ops on spmdsim::Array with numpy broadcasting (JAX: jax.numpy / jax.lax elementwise
// functions, jax.nn activations).
//
// Broadcasting: shapes are aligned at their trailing dimensions; each pair of dimensions must be equal or one
// of them 1 (numpy's rule). Mismatch: Error(kInvalidArgument, kind "ValueError"):
//   "Add: Incompatible shapes for broadcasting: shapes=[(2, 3), (4,)]"   (JAX's wording).
// Dtypes: two operands of different dtypes are promoted as JAX promotes non-weak types (PromoteTypes);
// a `double` operand is a weakly typed Python scalar and takes the array's dtype (JAX: `x * 0.5` stays bf16).
// Numerics: bfloat16 and float16 are computed in float32 and rounded once per op (round to nearest even);
// XLA CPU likewise upcasts 16-bit floating-point arithmetic to f32 (docs/ops.md, "Numerics").
// Abstract operands (Array::Abstract) give an abstract result of the right shape and dtype, no arithmetic.
// Every result is charged to the current virtual device and carries the union of its operands' varying mesh
// axes; every op reports its cost (ops/cost.h).
//
// Example:
//   Array x = Array::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
//   Array b = Array::FromVector<float>({10, 20, 30}, {3});
//   Add(x, b).ToString() == "[[11, 22, 33], [14, 25, 36]]"      // b broadcast over the rows
//   Relu(Sub(x, 3.0)).ToDoubles() == {0, 0, 0, 1, 2, 3}
//   Greater(x, 2.0).dtype() == DType::kBool
//
// Thread safety: every function is reentrant and may run on many devices concurrently.
#ifndef SPMDSIM_OPS_ELEMENTWISE_H_
#define SPMDSIM_OPS_ELEMENTWISE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "sim/array.h"

namespace spmdsim {

// JAX's result dtype for two non-weak dtypes: equal -> itself; bool with x -> x; int32+int64 -> int64;
// integer with a floating type -> the floating type; bfloat16+float16 -> float32; floats -> the wider.
DType PromoteTypes(DType a, DType b);

// numpy's broadcast shape of `shapes`, or Error(ValueError) "<op>: Incompatible shapes for broadcasting:
// shapes=[(2, 3), (4,)]".
std::vector<int64_t> BroadcastShapes(std::span<const std::vector<int64_t>> shapes, std::string_view op = "broadcast");

// ---- binary arithmetic (not on bool: TypeError) --------------------------------------------------------
Array Add(const Array& x, const Array& y);
Array Sub(const Array& x, const Array& y);
Array Mul(const Array& x, const Array& y);
// Floating: IEEE division. Integer: truncating division (lax.div, C++ `/`); a zero divisor throws
// Error(kInvalidArgument) (XLA's result there is implementation-defined).
Array Div(const Array& x, const Array& y);
// Elementwise maximum / minimum; a NaN in either operand gives NaN (jnp.maximum / jnp.minimum). Bool allowed.
Array Max(const Array& x, const Array& y);
Array Min(const Array& x, const Array& y);
// x ** y, floating only (lax.pow).
Array Pow(const Array& x, const Array& y);

// Weakly typed scalar operand: the scalar is converted to the array's dtype first.
Array Add(const Array& x, double y);
Array Add(double x, const Array& y);
Array Sub(const Array& x, double y);
Array Sub(double x, const Array& y);
Array Mul(const Array& x, double y);
Array Mul(double x, const Array& y);
Array Div(const Array& x, double y);
Array Div(double x, const Array& y);
Array Max(const Array& x, double y);
Array Min(const Array& x, double y);
Array Pow(const Array& x, double y);

// ---- comparisons: bool result; NaN compares unequal to everything -----------------------------------------
Array Equal(const Array& x, const Array& y);
Array NotEqual(const Array& x, const Array& y);
Array Less(const Array& x, const Array& y);
Array LessEqual(const Array& x, const Array& y);
Array Greater(const Array& x, const Array& y);
Array GreaterEqual(const Array& x, const Array& y);
Array Equal(const Array& x, double y);
Array NotEqual(const Array& x, double y);
Array Less(const Array& x, double y);
Array LessEqual(const Array& x, double y);
Array Greater(const Array& x, double y);
Array GreaterEqual(const Array& x, double y);

// Logical ops on bool arrays (TypeError for other dtypes).
Array LogicalAnd(const Array& x, const Array& y);
Array LogicalOr(const Array& x, const Array& y);
Array LogicalNot(const Array& x);

// cond ? x : y elementwise, all three broadcast together (jnp.where). REQUIRES: cond is bool (TypeError).
Array Where(const Array& cond, const Array& x, const Array& y);

// Element conversion (lax.convert_element_type): float -> integer truncates toward zero, saturates and maps
// NaN to 0 (XLA CPU); -> bool is `!= 0`; -> bfloat16/float16 rounds to nearest even.
Array Cast(const Array& x, DType dtype);

// ---- unary --------------------------------------------------------------------------------------------------
Array Neg(const Array& x);   // not bool
Array Abs(const Array& x);   // not bool
Array Sign(const Array& x);  // -1, 0, 1 (NaN stays NaN); not bool
// Floating only (lax semantics; TypeError for integers and bool):
Array Exp(const Array& x);
Array Log(const Array& x);
Array Sqrt(const Array& x);
Array Rsqrt(const Array& x);  // 1 / sqrt(x)
Array Tanh(const Array& x);
Array Sigmoid(const Array& x);  // 1 / (1 + exp(-x)) (jax.nn.sigmoid)

// ---- activations (jax.nn), floating only ---------------------------------------------------------------
Array Relu(const Array& x);  // max(x, 0); also on integers
// jax.nn.gelu. approximate = true (JAX's default): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
// false: the exact 0.5 x (1 + erf(x / sqrt(2))).
Array Gelu(const Array& x, bool approximate = true);
Array Silu(const Array& x);  // x * sigmoid(x) (jax.nn.silu / swish)

}  // namespace spmdsim

#endif  // SPMDSIM_OPS_ELEMENTWISE_H_
