// The shard_map program interpreter shared by the shard_map, mlp and transformer_block engines.
//
// A program (ShardMapConfig) is validated once on the host (names, ops, arguments), then one ShardMap call runs
// it on the workload's Runtime with the CostRecorder attached; the same interpreter, run on a one-device mesh
// with the same axis names (every axis of size 1, so every collective is over a group of one), gives the
// unsharded reference the outputs are checked against.
//
// Example: steps {h = einsum(x, w1) "bd,df->bf"; y = psum(h) over model} on Mesh {model: 4} with x P(), w1
// P(None, 'model') and y P(): the reference computes x @ w1 whole; the check compares the two y's.
//
// Thread safety: EvaluateStep is reentrant (it runs on every device at once); the Run functions are called from
// one host thread.
#ifndef SPMDSIM_WORKLOADS_INTERNAL_PROGRAM_H_
#define SPMDSIM_WORKLOADS_INTERNAL_PROGRAM_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/internal/recorder.h"
#include "workloads/workloads.h"
#include "sim/device_context.h"

namespace spmdsim::internal {

// The ops of ProgramStep::op. A program resolves each step's op name to its ProgramOpEntry once, when it is
// built (FindProgramOp), and each device then calls the entry's handler.
enum class ProgramOp {
  kAbs, kAdd, kAllGather, kAllToAll, kAxisIndex, kBroadcastTo, kCast, kConcatenate, kDiv, kDot, kEinsum, kExp,
  kGelu, kGeluGrad, kGreaterEqual, kLog, kLogSoftmax, kMatMul, kMax, kMaxReduce, kMean, kMin, kMinReduce, kMul, kNeg,
  kPmax, kPmean, kPmin, kPow, kPpermute, kPsum, kPsumScatter, kRelu, kReluGrad, kReshape, kRsqrt, kSigmoid, kSilu,
  kSlice, kSoftmax, kSoftmaxGrad, kSqrt, kSquare, kSub, kSum, kTanh, kTranspose,
};

// What an op's handler reads when it runs on one device.
struct OpCall {
  DeviceContext& d;
  const ProgramStep& s;
  std::span<const Array> args;  // the step's arguments, validated against the entry's arity
  CostRecorder* recorder;       // null in reference runs; it gets ppermute's pairs
  const Array& x() const { return args[0]; }
  std::vector<Array> all() const { return std::vector<Array>(args.begin(), args.end()); }
};

// Arity values besides a count.
inline constexpr int kOneOrMore = -1;
inline constexpr int kTwoOrScalar = -2;  // two arrays, or one and the step's `scalar`

struct ProgramOpEntry {
  std::string_view name;  // as in ProgramStep::op ("psum")
  ProgramOp op;
  int arity;              // array arguments: a count, kOneOrMore or kTwoOrScalar
  bool collective;        // a collective over the step's axes (axis_index is not one: it moves no data)
  Array (*evaluate)(const OpCall& call);
};

// The entry named `name`, or null for an unknown op.
const ProgramOpEntry* FindProgramOp(std::string_view name);

// One step on one device. `recorder` may be null (reference runs); it gets ppermute's pairs.
// REQUIRES: `op` is the step's entry and `args` fit its arity (the program validated them when it was built).
Array EvaluateStep(DeviceContext& device, const ProgramOpEntry& op, const ProgramStep& step,
                   std::span<const Array> args, CostRecorder* recorder);

// numpy.isclose-style comparison of two arrays of the same shape. A block of a larger array gives its
// `index_offset` (its first index per dimension) so that `worst` names the global element; `worst_excess`, when
// given, receives how far the worst element lies outside the tolerance (<= 0: within).
CheckedValue CompareArrays(const std::string& name, const Array& got, const Array& want, double rtol,
                           double atol, std::span<const int64_t> index_offset = {},
                           double* worst_excess = nullptr);

// The input's whole array: `value`, or made by make_blocks when `value` is abstract (workloads.h, ProgramInput).
Array WholeInput(const ProgramInput& in);

// Runs `config` on one device whose mesh has `axis_names`, each of size 1 (every collective over a group of one),
// and returns its outputs. Throws what the interpreter throws (an invalid program: Error(kInvalidArgument)).
std::vector<Array> RunProgramOnOneDevice(const ShardMapConfig& config, const std::vector<std::string>& axis_names);

// Runs `config` as a workload of `kind` (shard_map, mlp, transformer_block, model). Across ranks each rank
// keeps only its devices' output blocks (WorkloadResult::outputs then as WorkloadResult's comment says) unless
// `whole_outputs`: then every rank receives the whole outputs (kept in WorkloadResult::outputs on every rank).
WorkloadResult RunProgram(const WorkloadContext& context, const ShardMapConfig& config, WorkloadKind kind,
                          bool whole_outputs = false);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_WORKLOADS_INTERNAL_PROGRAM_H_
