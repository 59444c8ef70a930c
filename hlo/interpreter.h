// Interpreter: runs a verified HLO module (hlo/ir.h) with data on ONE device: the per-device program XLA
// compiled, with the device's replica and partition ids, meeting the other devices at collectives through a
// CollectivePeer (hlo/executor.h runs one interpreter per virtual device of a Runtime and gives each its peer).
//
// Semantics are XLA's (CPU backend where the HLO leaves a choice): elementwise ops as
// hlo/internal/element_ops.h documents; reductions fold in row-major order of the reduced elements from the
// init value; dot and convolution accumulate in float (16-bit inputs) or the element type; gather clamps start
// indices into bounds, scatter skips out-of-bounds windows and applies updates in order; sort is stable; while
// loops run until their condition is false (at most InterpreterOptions::max_while_iterations); a conditional
// with an out-of-range index runs its last branch. Collectives combine members in group order; all-reduce and
// reduce-scatter start from the reduction's identity as XLA CPU's in-process collectives do.
//
// Example (one device, no collectives):
//   auto m = ParseModule(text);
//   Interpreter interp(*m, InterpreterPlan::Build(*m), {});
//   Value out = interp.Run({x, w});
//
// Errors: Error(kUnimplemented) naming the instruction and its file:line:col for what cannot run (hlo/support.h
// refuses those before a run starts); Error(kResourceExhausted) when a value does not fit the device's memory;
// Error(kInvalidArgument) for arguments that do not match the entry's parameters, a while loop over its limit.
//
// Thread safety: an Interpreter belongs to one device (one thread or fiber at a time); the plan is shared and
// immutable.
#ifndef SPMDSIM_HLO_INTERPRETER_H_
#define SPMDSIM_HLO_INTERPRETER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "hlo/collective_peer.h"
#include "hlo/ir.h"
#include "hlo/value.h"

namespace spmdsim::hlo {

namespace internal {
class ScalarProgram;
}  // namespace internal

// What the interpreter precomputes once per module and shares between devices: for every computation, after
// which instruction each value is last used (values are released then, so memory follows liveness), and the
// scalar programs of reducers and comparators.
class InterpreterPlan {
 public:
  static std::shared_ptr<const InterpreterPlan> Build(const Module& module);
  ~InterpreterPlan();

  // Instructions (by index) whose value dies after instruction `i` of `c` runs.
  const std::vector<int32_t>& ReleasedAfter(const Computation& c, int64_t i) const;
  // nullptr when `c` is not a scalar computation (hlo/internal/scalar_program.h).
  const internal::ScalarProgram* ScalarProgramOf(const Computation& c) const;
  // XLA CPU contracts a multiply and the add or subtract that is its only use, inside a fused computation, into
  // one fused multiply-add (LLVM's contraction: one rounding instead of two). For instruction `i` of `c`: the index
  // of the f32 / f64 multiply it contracts (an add or subtract), kContracted for that multiply (not computed on its
  // own), else -1.
  static constexpr int32_t kContracted = -2;
  int32_t Contraction(const Computation& c, int64_t i) const;

 private:
  struct PerComputation;
  std::map<const Computation*, std::unique_ptr<PerComputation>> computations_;
};

struct InterpreterOptions {
  // A while loop that has not ended after this many iterations, or after this many seconds of wall time, fails the
  // run (a loop that never ends must not hang it): Error(kDeadlineExceeded) naming the loop, the limit and how to
  // raise it (scenario keys max_while_iterations / max_while_seconds; run_hlo's arguments of the same names).
  int64_t max_while_iterations = 100'000'000;
  double max_while_seconds = 300;
};

class Interpreter {
 public:
  // `peer` may be null for a module without collectives over more than one device.
  Interpreter(const Module& module, std::shared_ptr<const InterpreterPlan> plan, DeviceIds ids,
              CollectivePeer* peer = nullptr, InterpreterOptions options = {});
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Runs the entry computation. `arguments`: one per entry parameter, of its shape (checked).
  Value Run(std::vector<Value> arguments);

  // Runs computation `c` on `args` (used by the kernels for to_apply computations that are not scalar programs).
  Value Call(const Computation& c, std::span<const Value> args);

  const InterpreterPlan& plan() const { return *plan_; }
  DeviceIds ids() const { return ids_; }
  const Module& module() const { return module_; }
  CollectivePeer* peer() const { return peer_; }

 private:
  Value Evaluate(const Instruction& ins, std::span<const Value> values, std::span<const Value> args);
  Value EvaluateControl(const Instruction& ins, std::span<const Value* const> operands, bool* handled);
  Value RunWhile(const Instruction& ins, const Value& init);
  Value RunAsync(const Instruction& ins, std::span<const Value* const> operands);

  const Module& module_;
  std::shared_ptr<const InterpreterPlan> plan_;
  DeviceIds ids_;
  CollectivePeer* peer_;
  std::unique_ptr<CollectivePeer> solo_;  // the peer when none is given (groups of one device)
  InterpreterOptions options_;
  int depth_ = 0;
};

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_INTERPRETER_H_
