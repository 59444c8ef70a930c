// What spmdsim can run: checked on the whole module before anything runs, so that an unsupported opcode,
// custom-call target or element type is refused in one line naming it and where it is, not half-way through a
// simulation of thousands of devices.
//
// Runs with data (the interpreter): every opcode of a JAX program XLA compiles for CPU, for training and
// inference: elementwise math and bit ops, compare, select, clamp, convert, bitcast(-convert), reduce-precision,
// broadcast, reshape, transpose, reverse, slice, dynamic-slice, dynamic-update-slice, concatenate, pad, iota,
// constant, reduce, reduce-window, select-and-scatter, map, dot, convolution, gather, scatter, sort, topk, fusion,
// call, while, conditional, tuple, get-tuple-element, parameter, partition-id, replica-id, copy, opt-barrier,
// after-all, add-dependency, the collectives (all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
// collective-broadcast) with their -start/-done and async-start/-update/-done forms; custom-calls "TopK" and
// "Sharding". Element types: pred, s8..s64, u8..u64, f16, bf16, f32, f64 (complex and f8 are refused), one
// floating-point type where XLA's rules want one (mixed precision, which only TPU and GPU compiles have, is refused).
// Abstract runs (shapes and the cost model only) also accept what XLA's TPU and GPU compilers emit: copy-start /
// copy-done, send / recv and their -done, ragged-all-to-all, get-dimension-size, the elementwise ops without a
// kernel (acos .. sinh, mulhi, complex parts), the custom-call targets of the TPU runtime (AllocateBuffer,
// ConcatBitcast, PrepareAsyncCallStart/Done, AsyncCollectiveStart/Done, AssumeGatherIndicesInBound,
// GatherScatterIndicesBitpacked, SliceId, ZeroCrop, ...) and of the GPU libraries (__cublas$*, __cudnn$*,
// __cusolver$*), any element type, elided constants and mixed precision. A run with data names what only runs
// abstract and says "run it --abstract".
//
// Example: "model.txt:812:3: %fft.3 (fft) cannot run: fft is not supported (spmdsim runs the opcodes XLA compiles
// JAX training and inference programs to; docs/hlo.md lists what runs)";
// with data: "tpu.txt:42:3: %copy-start (copy-start) cannot run: copy-start comes from a TPU or GPU compile, which
// spmdsim runs without data only; run it --abstract".
//
// SupportedModule is the module checked once, at the edge (the scenario reader, Python, a test), with its
// per-device memory estimate; Execute (hlo/executor.h) and Predict (hlo/predict.h) take it and trust it.
//
// Example:
//   const SupportedModule m = SupportedModule::Check(LoadModule("jit_f.txt"), SupportedModule::Use::kAbstract);
//   m.CheckDeviceCount(mesh.size(), "the mesh");     // "module jit_f runs on 8 devices (...); the mesh has 4"
//   Prediction p = Predict(m, mesh);
//
// Thread safety: immutable after Check; share it freely.
#ifndef SPMDSIM_HLO_SUPPORT_H_
#define SPMDSIM_HLO_SUPPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "hlo/ir.h"
#include "hlo/memory.h"

namespace spmdsim::hlo {

class SupportedModule {
 public:
  enum class Use {
    kAbstract,  // shapes and the cost model only: opcodes and custom-call targets are checked
    kWithData,  // run by the interpreter: also element types with arithmetic and constants printed in full
  };

  // Throws Error(kUnimplemented) for the first instruction (in text order) that cannot be used so, naming it and
  // its file:line:col. REQUIRES: a verified module (ParseModule verifies).
  static SupportedModule Check(std::shared_ptr<const Module> module, Use use);

  const Module& module() const { return *module_; }
  const std::shared_ptr<const Module>& shared_module() const { return module_; }
  Use use() const { return use_; }
  bool with_data() const { return use_ == Use::kWithData; }
  // replica_count x num_partitions: the logical devices the module runs on.
  int64_t device_count() const { return module_->replica_count() * module_->num_partitions(); }
  // Per-device memory from buffer liveness (hlo/memory.h), estimated once here.
  const MemoryEstimate& memory() const { return memory_; }

  // Throws Error(kInvalidArgument) unless `count` == device_count(): "module m runs on 8 devices (1 replicas x 8
  // partitions); <what> has 4 (<hint>)". `what` names what was counted ("the mesh", "device_assignment"); `hint`,
  // when given, what would be valid.
  void CheckDeviceCount(int64_t count, std::string_view what, std::string_view hint = "") const;

 private:
  SupportedModule(std::shared_ptr<const Module> module, Use use, MemoryEstimate memory)
      : module_(std::move(module)), use_(use), memory_(std::move(memory)) {}
  std::shared_ptr<const Module> module_;
  Use use_;
  MemoryEstimate memory_;
};

// Whether one instruction can be used so (its opcode / custom-call target); false with the reason in *why.
// Whether a custom-call target is a host callback: jax.debug.print, io_callback and pure_callback lower to
// xla_python_cpu_callback / xla_ffi_python_cpu_callback (and their GPU forms), which call Python on the host.
// Abstract runs price them at 0 with a note; runs with data refuse them, saying how to take them out.
bool IsHostCallbackTarget(std::string_view target);

bool IsSupported(const Instruction& ins, SupportedModule::Use use, std::string* why);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_SUPPORT_H_
