// ScalarProgram: a computation over scalars (a reduce's or scatter's to_apply, a sort comparator, select-and-
// scatter's select) compiled to a list of element operations on 64-bit registers, so that the kernels call it
// once per element without building Values.
//
// Compiles computations made of parameter, constant (scalar), elementwise unary / binary ops, compare, select,
// clamp, convert, bitcast-convert (same width), tuple (as the root) and get-tuple-element of a parameter-free
// tuple. Anything else: Compile returns nullptr and the caller evaluates the computation as a whole.
//
// Thread safety: immutable after Compile; Run may be called concurrently (the caller passes the registers).
#ifndef SPMDSIM_HLO_INTERNAL_SCALAR_PROGRAM_H_
#define SPMDSIM_HLO_INTERNAL_SCALAR_PROGRAM_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "hlo/ir.h"

namespace spmdsim::hlo::internal {

// One element in a register: its bytes in the low bytes of a uint64_t (the element type is the instruction's).
template <typename T>
inline uint64_t ToBits(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T>
inline T FromBits(uint64_t bits) {
  T v;
  std::memcpy(static_cast<void*>(&v), &bits, sizeof(T));
  return v;
}

class ScalarProgram {
 public:
  static std::unique_ptr<ScalarProgram> Compile(const Computation& c);

  int64_t num_params() const { return num_params_; }
  int64_t num_results() const { return static_cast<int64_t>(results_.size()); }
  int64_t num_registers() const { return static_cast<int64_t>(steps_.size()); }
  // The root as op(parameter 0, parameter 1) with one result: the op (add, maximum, ...), for kernels' fast paths.
  std::optional<Opcode> simple_binary() const { return simple_binary_; }

  // Runs with `params` (one per parameter, bits) into `results`; `registers` has num_registers() entries.
  void Run(std::span<const uint64_t> params, std::span<uint64_t> registers, std::span<uint64_t> results) const;

 private:
  struct Step {
    Opcode op = Opcode::kParameter;
    DType dtype = DType::kF32;          // of the result
    DType operand_dtype = DType::kF32;  // of operand 0 (compare, convert)
    int32_t a = -1, b = -1, c = -1;     // operand registers
    int64_t parameter = 0;
    uint64_t constant = 0;
    ComparisonDirection direction = ComparisonDirection::kEq;
    ComparisonType comparison = ComparisonType::kDefault;
  };
  uint64_t Execute(const Step& s, std::span<const uint64_t> r, std::span<const uint64_t> params) const;

  std::vector<Step> steps_;
  std::vector<int32_t> results_;
  int64_t num_params_ = 0;
  std::optional<Opcode> simple_binary_;
};

}  // namespace spmdsim::hlo::internal

#endif  // SPMDSIM_HLO_INTERNAL_SCALAR_PROGRAM_H_
