// What one instruction costs on one device, before any hardware is chosen: FLOPs, transcendentals, bytes read
// and written, and for a contraction its [batch, m, k] x [k, n] dimensions (XLA: HloCostAnalysis).
//
// Conventions (those of XLA's HloCostAnalysis, so that our FLOP counts match compiled.cost_analysis()):
//   elementwise        1 FLOP per output element (transcendentals counted separately, one per element)
//   dot                2 x batch x m x n x k
//   convolution        2 x output elements x kernel window x input features per group
//   reduce             (input elements - output elements) reducer FLOPs, 1 each for the simple reducers
//   reduce-window      output elements x window size
//   fusion             the sum over its fused instructions; bytes are those of the fusion's operands and result
//                      (an operand read only through slices / dynamic-slices counts the sliced bytes; a
//                      dynamic-update-slice root writes only its update, in place)
//   bitcast, tuple, get-tuple-element, parameter, constant, after-all: free (no bytes)
//   everything else    its operands' bytes read, its result's bytes written
// Narrow types (narrow_types = true; hlo/predict.h prices TPUs and GPUs so): XLA's CPU backend computes bf16 and
// f16 in f32 (its float normalization): it widens the operands of dots and of most ops with converts, keeps such
// values as f32 between ops, rounding them through the narrow type (convert(convert(x, bf16), f32)), and even
// converts a whole bf16 array to f32 and back around a dynamic-update-slice. A TPU or GPU compile keeps these
// values narrow. With narrow_types every value is counted in its NarrowType (below), a dot or convolution whose
// operands are both narrow is priced in that type, and converts between a value and its widened copy are views
// (a dynamic-update-slice behind them stays in place, a slice behind them reads only its slice).
//
// Example: dot(f32[8,64], f32[64,32]) -> flops 32768, bytes read 10240, written 1024, dims {1, 8, 32, 64}.
//
// Thread safety: pure.
#ifndef SPMDSIM_HLO_COST_H_
#define SPMDSIM_HLO_COST_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "cost/compute_model.h"
#include "hlo/ir.h"

namespace spmdsim::hlo {

// The class an instruction is reported under: "dot", "convolution", "fusion" (loop / input / output fusions
// without a contraction), "dot fusion", "collective:all-reduce", ..., "data movement" (copy, transpose, slices,
// concatenate, pad, gather, scatter, ...), "elementwise", "reduce", "sort", "control" (while, call, ...).
std::string InstructionClass(const Instruction& ins);

// bytes_read / bytes_written are double, as flops are: cost-model inputs (the roofline divides them by
// bandwidths, hlo/predict.h scales them by loop trip counts), exact for whole counts below 2^53 bytes; not
// buffers (docs/architecture.md, "Byte counts").
struct InstructionCost {
  double flops = 0;
  double transcendentals = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  ContractionDims dims;             // a dot's (or a fusion's dot's), else invalid
  DType dtype = DType::kF32;  // the type whose peak prices it: a contraction's source type (above), else the result's
  double bytes() const { return bytes_read + bytes_written; }
};

// The cost of a non-control, non-collective instruction (fusions included). Collectives, while, call and
// conditional are priced by the caller (hlo/predict.h).
InstructionCost CostOf(const Instruction& ins, bool narrow_types = false);

// The type `value` holds as the program wrote it: for an f32 value that XLA CPU widened from a narrow float (a
// convert from it, or a bitcast, copy, reshape, transpose, broadcast, slice, pad, gather, select, dynamic-update-slice,
// concatenate, collective or fusion of such values), that narrow type; otherwise its own. Example:
// f32[8] convert(bf16[8] %x) -> bf16; f32[8] fusion whose root is convert(convert(dot, bf16), f32) -> bf16.
DType NarrowType(const Instruction& value);
// The bytes of `value` in its NarrowType (a tuple: of its elements).
double NarrowBytes(const Instruction& value);

// The operation whose op_name scope reports an instruction: "jit(f)/jvp(MLP)/Dense_0" for
// op_name="jit(f)/jvp(MLP)/Dense_0/dot_general"; "(no op_name)" when metadata has none or one without a scope
// (XLA names some ops it makes after an instruction, "broadcast.8").
std::string ScopeOf(const Instruction& ins);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_COST_H_
