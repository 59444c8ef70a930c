// Verify: every instruction's operands, attributes and declared shape checked against XLA's shape rules
// (xla/service/shape_inference.cc), once, when a module is read; the interpreter and the cost model then trust
// the module.
//
// Checked, per opcode family: operand counts; element types (float-only math, integer-only shifts and bit ops,
// pred conditions); elementwise operands of one shape; broadcast / reshape / transpose / slice / dynamic-slice /
// dynamic-update-slice / concatenate / pad / reverse / iota / bitcast / bitcast-convert shapes; reduce,
// reduce-window and select-and-scatter against their computations; dot and convolution dimension numbers;
// gather and scatter dimension numbers; sort; call / fusion / while / conditional / map against the
// computations they call; tuples and get-tuple-element; collectives' replica groups (ids in range, each once,
// groups of one size) and the shapes they imply; the entry's parameters against entry_computation_layout.
// An opcode outside these families is accepted here (hlo/support.h refuses what cannot run).
//
// Mixed precision: as XLA's TPU and GPU pipelines verify (HloVerifier's allow_mixed_precision), floating-point
// element types may differ wherever XLA's ShapeVerifier then compares shapes ignoring FP precision: a TPU
// all-reduce of f32 operands with bf16 results, a broadcast from f32 to bf16, a fusion whose parameter is bf16 for
// an f32 operand, elementwise operands of two float types. Custom-calls have whatever shapes their targets give
// them (TPU AllocateBuffer, AsyncCollectiveStart, ...; GPU __cublas$lt$matmul, __cudnn$fmha, ...), except TopK and
// Sharding, which spmdsim runs.
//
// Errors: Error(kInvalidArgument) "file:line:col: %name (opcode): what is wrong; what is valid".
// Example: "m.txt:4:3: %a (add): operands have shapes f32[2] and f32[3]; elementwise operands need one shape".
//
// Thread safety: pure.
#ifndef SPMDSIM_HLO_VERIFY_H_
#define SPMDSIM_HLO_VERIFY_H_

#include <string>

#include "hlo/ir.h"

namespace spmdsim::hlo {

void Verify(const Module& module);

// Whether `ins` verifies only because mixed precision is allowed (its floating-point element types differ where
// XLA's rules without allow_mixed_precision require one type); then *why says where, as the verifier would.
// REQUIRES: a verified module.
bool IsMixedPrecision(const Instruction& ins, std::string* why);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_VERIFY_H_
