// What spmdsim can run: checked on the whole module before anything runs, so that an unsupported opcode,
// custom-call target or element type is refused in one line naming it and where it is, not half-way through a
// simulation of thousands of devices.
//
// Runs with data (the interpreter): every opcode of a JAX program XLA compiles for CPU, for training and
// inference: elementwise math and bit ops, compare, select, clamp, convert, bitcast(-convert), broadcast, reshape,
// transpose, reverse, slice, dynamic-slice, dynamic-update-slice, concatenate, pad, iota, constant, reduce,
// reduce-window, select-and-scatter, map, dot, convolution, gather, scatter, sort, topk, fusion, call, while,
// conditional, tuple, get-tuple-element, parameter, partition-id, replica-id, copy, opt-barrier, after-all,
// add-dependency, the collectives (all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
// collective-broadcast) with their -start/-done and async-start/-update/-done forms; custom-calls "TopK" and
// "Sharding". Element types: pred, s8..s64, u8..u64, f16, bf16, f32, f64 (complex and f8 are refused).
// Abstract runs (shapes and the cost model only) accept the same opcodes, any element type, and elided
// constants.
//
// Example: "model.txt:812:3: %fft.3 (fft) cannot run: fft is not supported (spmdsim runs the opcodes XLA CPU
// compiles JAX training and inference programs to; docs/hlo.md lists them)".
//
// Thread safety: pure.
#ifndef SPMDSIM_HLO_SUPPORT_H_
#define SPMDSIM_HLO_SUPPORT_H_

#include "hlo/ir.h"

namespace spmdsim::hlo {

// Throws Error(kUnimplemented) for the first instruction (in text order) that cannot run; `with_data`: the
// interpreter's needs too (element types with arithmetic, constants printed in full).
void CheckSupported(const Module& module, bool with_data);

// Whether one instruction can run (its opcode / custom-call target); false with the reason in *why.
bool IsSupported(const Instruction& ins, std::string* why);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_SUPPORT_H_
