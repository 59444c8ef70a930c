// HloOpcode: every opcode XLA's HLO text can hold, spelled as XLA prints it ("add", "all-reduce-start",
// "dynamic-update-slice"): xla/hlo/ir/hlo_opcode.h's HLO_OPCODE_LIST, all of it. XLA's async shorthand
// ("reduce-scatter-start", "call-done") is not an opcode: the parser reads it as async-start / async-done around the
// opcode before the suffix (hlo/parser.h). The parser knows all of them; which ones spmdsim executes and prices is
// decided by hlo/support.h, which refuses the rest before anything runs.
//
// Thread safety: pure functions.
#ifndef SPMDSIM_HLO_OPCODE_H_
#define SPMDSIM_HLO_OPCODE_H_

#include <cstdint>
#include <string_view>

namespace spmdsim::hlo {

// X(enumerator, "text name")
#define SPMDSIM_HLO_OPCODES(X)                                      \
  X(kAbs, "abs")                                                    \
  X(kAcos, "acos")                                                  \
  X(kAcosh, "acosh")                                                \
  X(kAdd, "add")                                                    \
  X(kAddDependency, "add-dependency")                               \
  X(kAfterAll, "after-all")                                         \
  X(kAllGather, "all-gather")                                       \
  X(kAllGatherStart, "all-gather-start")                            \
  X(kAllGatherDone, "all-gather-done")                              \
  X(kAllReduce, "all-reduce")                                       \
  X(kAllReduceStart, "all-reduce-start")                            \
  X(kAllReduceDone, "all-reduce-done")                              \
  X(kAllToAll, "all-to-all")                                        \
  X(kAnd, "and")                                                    \
  X(kAsin, "asin")                                                  \
  X(kAsinh, "asinh")                                                \
  X(kAsyncStart, "async-start")                                     \
  X(kAsyncUpdate, "async-update")                                   \
  X(kAsyncDone, "async-done")                                       \
  X(kAtan, "atan")                                                  \
  X(kAtan2, "atan2")                                                \
  X(kAtanh, "atanh")                                                \
  X(kBatchNormGrad, "batch-norm-grad")                              \
  X(kBatchNormInference, "batch-norm-inference")                    \
  X(kBatchNormTraining, "batch-norm-training")                      \
  X(kBitcast, "bitcast")                                            \
  X(kBitcastConvert, "bitcast-convert")                             \
  X(kBroadcast, "broadcast")                                        \
  X(kCall, "call")                                                  \
  X(kCbrt, "cbrt")                                                  \
  X(kCeil, "ceil")                                                  \
  X(kCholesky, "cholesky")                                          \
  X(kClamp, "clamp")                                                \
  X(kClz, "count-leading-zeros")                                    \
  X(kCollectiveBroadcast, "collective-broadcast")                   \
  X(kCollectivePermute, "collective-permute")                       \
  X(kCollectivePermuteStart, "collective-permute-start")            \
  X(kCollectivePermuteDone, "collective-permute-done")              \
  X(kCollectiveReduce, "collective-reduce")                         \
  X(kCompare, "compare")                                            \
  X(kComplex, "complex")                                            \
  X(kConcatenate, "concatenate")                                    \
  X(kConditional, "conditional")                                    \
  X(kConstant, "constant")                                          \
  X(kConvert, "convert")                                            \
  X(kConvolution, "convolution")                                    \
  X(kCopy, "copy")                                                  \
  X(kCopyStart, "copy-start")                                       \
  X(kCopyDone, "copy-done")                                         \
  X(kCos, "cosine")                                                 \
  X(kCosh, "cosh")                                                  \
  X(kCustomCall, "custom-call")                                     \
  X(kDivide, "divide")                                              \
  X(kDomain, "domain")                                              \
  X(kDot, "dot")                                                    \
  X(kDynamicReshape, "dynamic-reshape")                             \
  X(kDynamicSlice, "dynamic-slice")                                 \
  X(kDynamicUpdateSlice, "dynamic-update-slice")                    \
  X(kErf, "erf")                                                    \
  X(kExp, "exponential")                                            \
  X(kExpm1, "exponential-minus-one")                                \
  X(kFft, "fft")                                                    \
  X(kFloor, "floor")                                                \
  X(kFusion, "fusion")                                              \
  X(kGather, "gather")                                              \
  X(kGetDimensionSize, "get-dimension-size")                        \
  X(kGetTupleElement, "get-tuple-element")                          \
  X(kImag, "imag")                                                  \
  X(kInfeed, "infeed")                                              \
  X(kIota, "iota")                                                  \
  X(kIsFinite, "is-finite")                                         \
  X(kLog, "log")                                                    \
  X(kLog1p, "log-plus-one")                                         \
  X(kLogistic, "logistic")                                          \
  X(kMap, "map")                                                    \
  X(kMaximum, "maximum")                                            \
  X(kMinimum, "minimum")                                            \
  X(kMulhi, "mulhi")                                                \
  X(kMultiply, "multiply")                                          \
  X(kNegate, "negate")                                              \
  X(kNot, "not")                                                    \
  X(kOptimizationBarrier, "opt-barrier")                            \
  X(kOr, "or")                                                      \
  X(kOutfeed, "outfeed")                                            \
  X(kPad, "pad")                                                    \
  X(kParameter, "parameter")                                        \
  X(kPartitionId, "partition-id")                                   \
  X(kPopulationCount, "popcnt")                                     \
  X(kPower, "power")                                                \
  X(kRaggedAllToAll, "ragged-all-to-all")                           \
  X(kRaggedDot, "ragged-dot")                                       \
  X(kReal, "real")                                                  \
  X(kRecv, "recv")                                                  \
  X(kRecvDone, "recv-done")                                         \
  X(kReduce, "reduce")                                              \
  X(kReducePrecision, "reduce-precision")                           \
  X(kReduceScatter, "reduce-scatter")                               \
  X(kReduceWindow, "reduce-window")                                 \
  X(kRemainder, "remainder")                                        \
  X(kReplicaId, "replica-id")                                       \
  X(kReshape, "reshape")                                            \
  X(kReverse, "reverse")                                            \
  X(kRng, "rng")                                                    \
  X(kRngBitGenerator, "rng-bit-generator")                          \
  X(kRngGetAndUpdateState, "rng-get-and-update-state")              \
  X(kRoundNearestAfz, "round-nearest-afz")                          \
  X(kRoundNearestEven, "round-nearest-even")                        \
  X(kRsqrt, "rsqrt")                                                \
  X(kScaledDot, "scaled-dot")                                       \
  X(kScan, "scan")                                                  \
  X(kScatter, "scatter")                                            \
  X(kSelect, "select")                                              \
  X(kSelectAndScatter, "select-and-scatter")                        \
  X(kSend, "send")                                                  \
  X(kSendDone, "send-done")                                         \
  X(kSetDimensionSize, "set-dimension-size")                        \
  X(kShiftLeft, "shift-left")                                       \
  X(kShiftRightArithmetic, "shift-right-arithmetic")                \
  X(kShiftRightLogical, "shift-right-logical")                      \
  X(kShuffle, "shuffle")                                            \
  X(kSign, "sign")                                                  \
  X(kSin, "sine")                                                   \
  X(kSinh, "sinh")                                                  \
  X(kSlice, "slice")                                                \
  X(kSort, "sort")                                                  \
  X(kSqrt, "sqrt")                                                  \
  X(kStochasticConvert, "stochastic-convert")                       \
  X(kSubtract, "subtract")                                          \
  X(kTan, "tan")                                                    \
  X(kTanh, "tanh")                                                  \
  X(kTopK, "topk")                                                  \
  X(kTranspose, "transpose")                                        \
  X(kTriangularSolve, "triangular-solve")                           \
  X(kTuple, "tuple")                                                \
  X(kWhile, "while")                                                \
  X(kXor, "xor")

enum class Opcode : uint8_t {
#define SPMDSIM_HLO_OPCODE_ENUM(e, s) e,
  SPMDSIM_HLO_OPCODES(SPMDSIM_HLO_OPCODE_ENUM)
#undef SPMDSIM_HLO_OPCODE_ENUM
};

// "add", "all-reduce-start", ...
std::string_view OpcodeName(Opcode opcode);
// The opcode of a name as XLA prints it; false when there is none.
bool ParseOpcode(std::string_view name, Opcode* opcode);

// Elementwise ops of one operand (abs .. tanh, acos .. sinh; convert, bitcast-convert excluded), of two (add ..
// xor, mulhi, compare included), and select / clamp (three).
bool IsElementwiseUnary(Opcode opcode);
bool IsElementwiseBinary(Opcode opcode);
// Collectives, in their synchronous, -start and -done forms.
bool IsCollective(Opcode opcode);
bool IsAsyncCollectiveStart(Opcode opcode);  // all-reduce-start, all-gather-start, collective-permute-start
bool IsAsyncCollectiveDone(Opcode opcode);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_OPCODE_H_
