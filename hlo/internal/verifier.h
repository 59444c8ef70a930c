// The verifier's helpers, shared by verify.cc (driver, elementwise, shape and control-flow ops) and
// verify_ops.cc (reductions, windows, dot, convolution, gather, scatter, sort, collectives, custom calls).
#ifndef SPMDSIM_HLO_INTERNAL_VERIFIER_H_
#define SPMDSIM_HLO_INTERNAL_VERIFIER_H_

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hlo/ir.h"

namespace spmdsim::hlo::internal {

class Verifier {
 public:
  // allow_mixed_precision: as XLA's TPU and GPU pipelines verify (HloVerifier's allow_mixed_precision): floating-
  // point element types may differ wherever XLA's ShapeVerifier then compares shapes ignoring FP precision.
  Verifier(const Module& module, bool allow_mixed_precision)
      : module_(module), allow_mixed_precision_(allow_mixed_precision) {}
  void Run();
  // One instruction's checks (not its computation's or module's).
  void VerifyOne(const Instruction& ins);

  // Throws "file:line:col: %name (opcode): message".
  [[noreturn]] static void Fail(const Instruction& ins, const std::string& message);

 private:
  void VerifyInstruction(const Instruction& ins);
  bool VerifyElementwise(const Instruction& ins);
  bool VerifyShapeOp(const Instruction& ins);
  bool VerifyDataMovement(const Instruction& ins);
  bool VerifyControlFlow(const Instruction& ins);
  bool VerifyReduction(const Instruction& ins);
  bool VerifyWindowed(const Instruction& ins);
  bool VerifyContraction(const Instruction& ins);
  bool VerifyIndexing(const Instruction& ins);
  bool VerifyCollective(const Instruction& ins);
  bool VerifyMisc(const Instruction& ins);
  void VerifyAfterAll(const Instruction& ins);
  void VerifyReducePrecision(const Instruction& ins);
  void VerifyGetDimensionSize(const Instruction& ins);
  void VerifyRngBitGenerator(const Instruction& ins);
  void VerifyCustomCall(const Instruction& ins);
  void VerifyTopK(const Instruction& ins);
  void VerifyUnary(const Instruction& ins);
  void VerifyBinary(const Instruction& ins);
  void VerifyEntryParameters();
  void VerifyGather(const Instruction& ins);
  void VerifyScatter(const Instruction& ins);
  void VerifyConvolution(const Instruction& ins);
  void VerifyReduceWindow(const Instruction& ins);
  void VerifySelectAndScatter(const Instruction& ins);
  void VerifySort(const Instruction& ins);
  void VerifyAsync(const Instruction& ins);
  void VerifyBroadcast(const Instruction& ins);
  void VerifyBitcastConvert(const Instruction& ins);
  void VerifyDynamicSlice(const Instruction& ins);
  void VerifyPad(const Instruction& ins);
  int64_t GroupSize(const Instruction& ins);

  void VerifyCopyStart(const Instruction& ins);
  void VerifySendRecv(const Instruction& ins);
  void VerifySharding(const Instruction& ins);

  const Module& module_;
  bool allow_mixed_precision_;
};

// Shapes and element types compared under the verification in progress on this thread: exactly, or ignoring
// floating-point precision (f32 and bf16 alike; ShapeUtil::CompatibleIgnoringFpPrecision) when it allows mixed
// precision. Layouts are ignored.
bool SameShape(const Shape& a, const Shape& b);
bool SameType(DType a, DType b);

// Helpers (verify.cc).
void ExpectOperandCount(const Instruction& ins, int64_t n);
void ExpectOperandsAtLeast(const Instruction& ins, int64_t n);
const Shape& ArrayOperand(const Instruction& ins, int64_t i);
// The declared shape must equal `expected` (dtype and dimensions; layouts ignored).
void ExpectShape(const Instruction& ins, const Shape& expected);
// A computation called by `ins` takes `params` and returns `result` (dtypes and dimensions).
void ExpectSignature(const Instruction& ins, const Computation* c, const std::vector<Shape>& params,
                     const std::optional<Shape>& result, std::string_view role);
const Computation* Called(const Instruction& ins, size_t i, std::string_view role);
// Dimension numbers must be distinct and in [0, rank).
void ExpectDims(const Instruction& ins, const std::vector<int64_t>& dims, int64_t rank, std::string_view what);
std::vector<Shape> ScalarShapes(const std::vector<DType>& dtypes);
// "a copy-start", "an async-start": an opcode's name with its indefinite article, for messages.
std::string WithArticle(Opcode opcode);
std::string Str(const Shape& shape);

}  // namespace spmdsim::hlo::internal

#endif  // SPMDSIM_HLO_INTERNAL_VERIFIER_H_
