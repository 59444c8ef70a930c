// The interpreter's kernels, one family per file. Each takes a verified instruction and its operands' values and
// returns the result, or an invalid Value when the opcode is not of its family. Kernels never check what the
// verifier checked.
#ifndef SPMDSIM_HLO_INTERNAL_KERNELS_H_
#define SPMDSIM_HLO_INTERNAL_KERNELS_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "hlo/collective_peer.h"
#include "hlo/internal/scalar_program.h"
#include "hlo/ir.h"
#include "hlo/value.h"

namespace spmdsim::hlo::internal {

using Operands = std::span<const Value* const>;

// What a kernel may ask of the device program that runs it; the interpreter implements it (interpreter.cc), so
// that the kernels sit below the interpreter.
class KernelContext {
 public:
  virtual ~KernelContext() = default;
  // Runs computation `c` on `args` (to_apply computations that are not scalar programs).
  virtual Value Call(const Computation& c, std::span<const Value> args) = 0;
  // nullptr when `c` is not a scalar computation (hlo/internal/scalar_program.h).
  virtual const ScalarProgram* ScalarProgramOf(const Computation& c) const = 0;
  virtual CollectivePeer& peer() = 0;
  virtual DeviceIds ids() const = 0;
};

// Unary and binary elementwise ops, compare, select, clamp, convert, bitcast-convert, reduce-precision, iota,
// constant.
Value EvalElementwise(const Instruction& ins, Operands operands);
// add or subtract `ins` (f32 / f64) of the product a x b, contracted into one fused multiply-add: product + c or
// c + product (add), product - c or c - product (subtract; `product_first` says which operand the product is).
Value EvalMultiplyAdd(const Instruction& ins, const Value& a, const Value& b, const Value& c, bool product_first);
// broadcast, reshape, bitcast, copy, transpose, reverse, slice, dynamic-slice, dynamic-update-slice,
// concatenate, pad.
Value EvalShape(const Instruction& ins, Operands operands);
// reduce, reduce-window, select-and-scatter, map.
Value EvalReduce(const Instruction& ins, Operands operands, KernelContext& context);
// dot, convolution.
Value EvalDot(const Instruction& ins, Operands operands);
// gather, scatter.
Value EvalGather(const Instruction& ins, Operands operands, KernelContext& context);
// sort, topk, custom-call TopK.
Value EvalSort(const Instruction& ins, Operands operands, KernelContext& context);
// Collectives (synchronous and -start forms), partition-id, replica-id.
Value EvalCollective(const Instruction& ins, Operands operands, KernelContext& context);

// Helpers shared by the kernels (kernels.cc).
// A zero-filled or uninitialised array value of `shape` (an array shape).
Value NewArray(const Shape& shape, bool zeroed = false);
Value NewArray(DType dtype, const std::vector<int64_t>& dims, bool zeroed = false);
// The scalar at `value` (rank 0) as int64 (indices of dynamic-slice & co.).
int64_t ScalarAsInt64(const Value& value);
// Every element of `x` converted to double (tests, checks).
std::vector<double> ToDoubles(const Value& x);
// The bits of element `i` (row-major) of array `v`, zero-extended to 64 (the registers of a ScalarProgram).
// Inline: the reduce and sort kernels call it per element.
inline uint64_t ElementBits(const Value& v, int64_t i) {
  uint64_t bits = 0;
  const int64_t size = DTypeSize(v.dtype());
  std::memcpy(&bits, static_cast<const char*>(v.raw()) + i * size, static_cast<size_t>(size));
  return bits;
}
// A to_apply computation applied to scalars: through its ScalarProgram when it has one, else by evaluating it.
class ScalarFunction {
 public:
  ScalarFunction(const Computation& c, KernelContext& context);
  int64_t num_results() const { return num_results_; }
  // params: bits of each parameter's scalar (hlo/internal/scalar_program.h); results: bits of each result.
  void operator()(std::span<const uint64_t> params, std::span<uint64_t> results);
  // The root as op(param 0, param 1) when the computation is that simple.
  std::optional<Opcode> simple_binary() const;

 private:
  const Computation& c_;
  KernelContext& context_;
  const ScalarProgram* program_;
  std::vector<uint64_t> registers_;
  int64_t num_results_ = 1;
};

}  // namespace spmdsim::hlo::internal

#endif  // SPMDSIM_HLO_INTERNAL_KERNELS_H_
