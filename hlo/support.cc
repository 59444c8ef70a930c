#include "hlo/support.h"

#include <array>

#include <fmt/format.h>

#include "common/error.h"
#include "hlo/verify.h"

namespace spmdsim::hlo {
namespace {

constexpr char kListed[] = "docs/hlo.md lists what runs";

// Elementwise ops XLA knows that the interpreter has no kernel for (complex parts; the inverse and hyperbolic
// functions JAX expands before XLA sees them; mulhi).
bool HasNoKernel(Opcode op) {
  switch (op) {
    case Opcode::kReal: case Opcode::kImag: case Opcode::kComplex: case Opcode::kAcos: case Opcode::kAcosh:
    case Opcode::kAsin: case Opcode::kAsinh: case Opcode::kAtan: case Opcode::kAtanh: case Opcode::kCosh:
    case Opcode::kSinh: case Opcode::kMulhi:
      return true;
    default:
      return false;
  }
}

// What the interpreter runs: every opcode of a JAX program XLA CPU compiles.
bool RunsWithData(Opcode op) {
  if (IsElementwiseUnary(op) || IsElementwiseBinary(op)) return !HasNoKernel(op);
  switch (op) {
    case Opcode::kSelect: case Opcode::kClamp: case Opcode::kConvert: case Opcode::kBitcastConvert:
    case Opcode::kReducePrecision:
    case Opcode::kIota: case Opcode::kConstant: case Opcode::kBroadcast: case Opcode::kReshape:
    case Opcode::kBitcast: case Opcode::kCopy: case Opcode::kOptimizationBarrier: case Opcode::kDomain:
    case Opcode::kTranspose: case Opcode::kReverse: case Opcode::kSlice: case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice: case Opcode::kConcatenate: case Opcode::kPad: case Opcode::kReduce:
    case Opcode::kReduceWindow: case Opcode::kSelectAndScatter: case Opcode::kMap: case Opcode::kDot:
    case Opcode::kConvolution: case Opcode::kGather: case Opcode::kScatter: case Opcode::kSort:
    case Opcode::kTopK: case Opcode::kTuple: case Opcode::kGetTupleElement: case Opcode::kCall:
    case Opcode::kFusion: case Opcode::kWhile: case Opcode::kConditional: case Opcode::kParameter:
    case Opcode::kPartitionId: case Opcode::kReplicaId: case Opcode::kAfterAll: case Opcode::kAddDependency:
    case Opcode::kAllReduce: case Opcode::kAllReduceStart: case Opcode::kAllReduceDone:
    case Opcode::kAllGather: case Opcode::kAllGatherStart: case Opcode::kAllGatherDone:
    case Opcode::kReduceScatter: case Opcode::kAllToAll: case Opcode::kCollectivePermute:
    case Opcode::kCollectivePermuteStart: case Opcode::kCollectivePermuteDone: case Opcode::kCollectiveBroadcast:
    case Opcode::kAsyncStart: case Opcode::kAsyncUpdate: case Opcode::kAsyncDone: case Opcode::kCustomCall:
      return true;
    default:
      return false;
  }
}

// What an abstract run (shapes and the cost model) also accepts: the opcodes XLA's TPU and GPU compilers emit
// beside those (prefetches, host transfers and multi-slice send / recv, dynamic shapes' sizes, ragged all-to-all).
bool RunsAbstract(Opcode op) {
  if (RunsWithData(op) || IsElementwiseUnary(op) || IsElementwiseBinary(op)) return true;
  switch (op) {
    case Opcode::kCopyStart: case Opcode::kCopyDone: case Opcode::kSend: case Opcode::kRecv:
    case Opcode::kSendDone: case Opcode::kRecvDone: case Opcode::kRaggedAllToAll:
    case Opcode::kGetDimensionSize: case Opcode::kRngGetAndUpdateState: case Opcode::kStochasticConvert:
      return true;
    default:
      return false;
  }
}

// Custom-call targets the interpreter runs.
bool TargetRunsWithData(const std::string& target) { return target == "TopK" || target == "Sharding"; }

// Custom-call targets of XLA's TPU and GPU compiles, accepted abstract: the TPU runtime's buffer, layout, async
// collective and gather/scatter helpers, and the GPU libraries' kernels (cuBLAS, cuBLASLt, cuDNN, cuSOLVER).
bool TargetRunsAbstract(const std::string& target) {
  static constexpr std::array<std::string_view, 16> kTargets = {
      "TopK", "Sharding", "AllocateBuffer", "ConcatBitcast", "PrepareAsyncCallStart", "PrepareAsyncCallDone",
      "AsyncCollectiveStart", "AsyncCollectiveDone", "AssumeGatherIndicesInBound", "GatherScatterIndicesBitpacked",
      "SliceId", "ZeroCrop", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost", "MoveToDevice"};
  for (std::string_view t : kTargets) {
    if (target == t) return true;
  }
  for (std::string_view prefix : {"__cublas$", "__cudnn$", "__cusolver$", "__gpu$"}) {
    if (target.starts_with(prefix)) return true;
  }
  return IsHostCallbackTarget(target);
}

bool HasArithmetic(DType t) {
  return t != DType::kC64 && t != DType::kC128 && t != DType::kF8E4M3FN && t != DType::kF8E5M2;
}

bool ShapeHasArithmetic(const Shape& s, DType* bad) {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple) {
      if (!ShapeHasArithmetic(e, bad)) return false;
    }
    return true;
  }
  if (s.IsArray() && !HasArithmetic(s.dtype)) {
    *bad = s.dtype;
    return false;
  }
  return true;
}

[[noreturn]] void Refuse(const Instruction& ins, const std::string& why) {
  throw Error(ErrorCode::kUnimplemented,
              fmt::format("{}: %{} ({}) cannot run: {}", ins.Where(), ins.name(), OpcodeName(ins.opcode()), why));
}

}  // namespace

bool IsHostCallbackTarget(std::string_view target) {
  return target.find("callback") != std::string_view::npos;  // xla_python_cpu_callback, xla_ffi_python_gpu_callback
}

bool IsSupported(const Instruction& ins, SupportedModule::Use use, std::string* why) {
  const Opcode op = ins.opcode();
  const bool with_data = use == SupportedModule::Use::kWithData;
  if (!RunsAbstract(op)) {
    *why = fmt::format("{} is not supported (spmdsim runs the opcodes XLA compiles JAX training and inference "
                       "programs to; {})", OpcodeName(op), kListed);
    return false;
  }
  if (with_data && !RunsWithData(op)) {
    *why = fmt::format("{} comes from a TPU or GPU compile, which spmdsim runs without data only; run it --abstract",
                       OpcodeName(op));
    return false;
  }
  if (op == Opcode::kCustomCall) {
    const std::string& target = ins.attrs().custom_call_target;
    if (!TargetRunsAbstract(target)) {
      *why = fmt::format("custom-call target \"{}\" is not supported; supported targets: \"TopK\", \"Sharding\" and, "
                         "without data, those of XLA's TPU and GPU compiles ({})", target, kListed);
      return false;
    }
    if (with_data && IsHostCallbackTarget(target)) {
      *why = fmt::format("custom-call target \"{}\" is a host callback (jax.debug.print, io_callback, "
                         "pure_callback), which calls Python on the host: spmdsim does not run it; take the callback "
                         "out of the program "
                         "(or behind a flag) to run it with data, or run it --abstract (priced at 0, with a note)",
                         target);
      return false;
    }
    if (with_data && !TargetRunsWithData(target)) {
      *why = fmt::format("custom-call target \"{}\" comes from a TPU or GPU compile, which spmdsim runs without data "
                         "only; run it --abstract", target);
      return false;
    }
  }
  if (with_data && op == Opcode::kCollectivePermute && ins.operand_count() != 1) {
    *why = "the combined and in-place forms of collective-permute run without data only; run it --abstract";
    return false;
  }
  return true;
}

namespace {

void CheckSupported(const Module& module, SupportedModule::Use use) {
  std::string why;
  // Opcodes first (what cannot run at all), then what running with data needs.
  for (int64_t c = 0; c < module.computation_count(); ++c) {
    const Computation& comp = *module.computation(c);
    for (int64_t i = 0; i < comp.instruction_count(); ++i) {
      if (!IsSupported(*comp.instruction(i), use, &why)) Refuse(*comp.instruction(i), why);
    }
  }
  if (use != SupportedModule::Use::kWithData) return;
  for (int64_t c = 0; c < module.computation_count(); ++c) {
    const Computation& comp = *module.computation(c);
    for (int64_t i = 0; i < comp.instruction_count(); ++i) {
      const Instruction& ins = *comp.instruction(i);
      DType bad = DType::kF32;
      if (!ShapeHasArithmetic(ins.shape(), &bad)) {
        Refuse(ins, fmt::format("{} elements have no arithmetic in spmdsim; run it --abstract (shapes and the cost "
                                "model only)", HloTypeName(bad)));
      }
      if (ins.opcode() == Opcode::kConstant && ins.literal().elided) {
        Refuse(ins, "the constant was printed as {...}; print the module with its large constants "
                    "(HloPrintOptions.print_large_constants = True) or run it --abstract");
      }
      if (IsMixedPrecision(ins, &why)) {
        Refuse(ins, fmt::format("it mixes floating-point precisions ({}), as only TPU and GPU compiles do; run it "
                                "--abstract", why));
      }
    }
  }
}

}  // namespace

SupportedModule SupportedModule::Check(std::shared_ptr<const Module> module, Use use) {
  if (module == nullptr) Throw(ErrorCode::kInvalidArgument, "no HLO module");
  CheckSupported(*module, use);
  MemoryEstimate memory = EstimateMemory(*module);
  return SupportedModule(std::move(module), use, std::move(memory));
}

void SupportedModule::CheckDeviceCount(int64_t count, std::string_view what, std::string_view hint) const {
  if (count == device_count()) return;
  Throw(ErrorCode::kInvalidArgument, "module {} runs on {} devices ({} replicas x {} partitions); {} has {}{}{}{}",
        module_->name(), device_count(), module_->replica_count(), module_->num_partitions(), what, count,
        hint.empty() ? "" : " (", hint, hint.empty() ? "" : ")");
}

}  // namespace spmdsim::hlo
