// The interpreter's driver: the plan (liveness, scalar programs), computations in schedule order, and the ops
// that structure a program: parameter, tuple, get-tuple-element, call, fusion, while, conditional, async
// wrappers, after-all / add-dependency, custom-calls that are identities.
#include "hlo/interpreter.h"

#include <chrono>
#include <set>

#include <fmt/format.h>

#include "common/error.h"
#include "hlo/groups.h"
#include "hlo/internal/kernels.h"
#include "hlo/internal/scalar_program.h"

namespace spmdsim::hlo {

using internal::Operands;

struct InterpreterPlan::PerComputation {
  std::vector<std::vector<int32_t>> released_after;
  std::unique_ptr<internal::ScalarProgram> scalar;
  std::vector<int32_t> contraction;  // empty: none in this computation
};

InterpreterPlan::~InterpreterPlan() = default;

namespace {

// The computations fusions call (where XLA CPU's emitter lets LLVM contract multiply-adds).
std::set<const Computation*> FusedComputations(const Module& module) {
  std::set<const Computation*> fused;
  for (int64_t c = 0; c < module.computation_count(); ++c) {
    const Computation& comp = *module.computation(c);
    for (int64_t i = 0; i < comp.instruction_count(); ++i) {
      if (comp.instruction(i)->opcode() == Opcode::kFusion) fused.insert(comp.instruction(i)->called()[0]);
    }
  }
  return fused;
}

// The multiply an f32 / f64 add or subtract contracts: its operand 0 when that is a multiply used only there, else
// its operand 1 (the order of LLVM's DAG combiner); -1 when none.
int32_t ContractedOperand(const Instruction& ins) {
  const Opcode op = ins.opcode();
  if ((op != Opcode::kAdd && op != Opcode::kSubtract) || !ins.shape().IsArray() ||
      (ins.shape().dtype != DType::kF32 && ins.shape().dtype != DType::kF64)) {
    return -1;
  }
  for (int64_t k = 0; k < 2; ++k) {
    const Instruction* m = ins.operand(k);
    if (m->opcode() == Opcode::kMultiply && m->users().size() == 1 && !m->is_root()) return m->index();
  }
  return -1;
}

}  // namespace

std::shared_ptr<const InterpreterPlan> InterpreterPlan::Build(const Module& module) {
  auto plan = std::make_shared<InterpreterPlan>();
  const std::set<const Computation*> fused = FusedComputations(module);
  for (int64_t c = 0; c < module.computation_count(); ++c) {
    const Computation& comp = *module.computation(c);
    auto per = std::make_unique<PerComputation>();
    const int64_t n = comp.instruction_count();
    std::vector<int64_t> last_use(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) last_use[i] = i;  // unused values die right after they are made
    for (int64_t i = 0; i < n; ++i) {
      for (const Instruction* o : comp.instruction(i)->operands())
        last_use[o->index()] = std::max(last_use[o->index()], i);
    }
    if (fused.count(&comp) > 0) {
      for (int64_t i = 0; i < n; ++i) {
        const int32_t m = ContractedOperand(*comp.instruction(i));
        if (m < 0) continue;
        if (per->contraction.empty()) per->contraction.assign(static_cast<size_t>(n), -1);
        per->contraction[i] = m;
        per->contraction[m] = kContracted;
        // The multiply's operands are read by the fused multiply-add instead.
        for (const Instruction* o : comp.instruction(m)->operands())
          last_use[o->index()] = std::max(last_use[o->index()], i);
      }
    }
    per->released_after.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if (comp.instruction(i) != comp.root()) per->released_after[last_use[i]].push_back(static_cast<int32_t>(i));
    }
    per->scalar = internal::ScalarProgram::Compile(comp);  // null unless every value is a scalar
    plan->computations_[&comp] = std::move(per);
  }
  return plan;
}

const std::vector<int32_t>& InterpreterPlan::ReleasedAfter(const Computation& c, int64_t i) const {
  return computations_.at(&c)->released_after[i];
}

int32_t InterpreterPlan::Contraction(const Computation& c, int64_t i) const {
  const std::vector<int32_t>& contraction = computations_.at(&c)->contraction;
  return contraction.empty() ? -1 : contraction[i];
}

const internal::ScalarProgram* InterpreterPlan::ScalarProgramOf(const Computation& c) const {
  return computations_.at(&c)->scalar.get();
}

namespace {

// The peer of a module whose collectives all run over groups of one device: every exchange is the device alone.
class SoloPeer : public CollectivePeer {
 public:
  explicit SoloPeer(const Module& m) : module_(m) {}
  std::vector<Array> Exchange(const Instruction& c, const Array& mine, int64_t* rank) override {
    const auto groups = GroupsOf(c, module_.replica_count(), module_.num_partitions());
    if (groups[0].size() != 1) {
      throw Error(ErrorCode::kFailedPrecondition,
                  fmt::format("{}: %{} combines {} devices; run the module on its {} devices (hlo/executor.h)",
                              c.Where(), c.name(), groups[0].size(),
                              module_.replica_count() * module_.num_partitions()));
    }
    *rank = 0;
    return {mine};
  }
  Array Permute(const Instruction& c, const Array& mine) override {
    for (const auto& [s, t] : PairsOf(c, module_.replica_count(), module_.num_partitions())) {
      if (s != t) {
        throw Error(ErrorCode::kFailedPrecondition,
                    fmt::format("{}: %{} sends between devices; run the module on its devices (hlo/executor.h)",
                                c.Where(), c.name()));
      }
    }
    return c.attrs().source_target_pairs.empty() ? Array() : mine;
  }

 private:
  const Module& module_;
};

// The interpreter as the kernels see it (hlo/internal/kernels.h).
class Kernels final : public internal::KernelContext {
 public:
  explicit Kernels(Interpreter& interpreter) : interpreter_(interpreter) {}
  Value Call(const Computation& c, std::span<const Value> args) override { return interpreter_.Call(c, args); }
  const internal::ScalarProgram* ScalarProgramOf(const Computation& c) const override {
    return interpreter_.plan().ScalarProgramOf(c);
  }
  CollectivePeer& peer() override { return *interpreter_.peer(); }
  DeviceIds ids() const override { return interpreter_.ids(); }

 private:
  Interpreter& interpreter_;
};

[[noreturn]] void Unsupported(const Instruction& ins, const std::string& what) {
  throw Error(ErrorCode::kUnimplemented, fmt::format("{}: %{} ({}): {}", ins.Where(), ins.name(),
                                                     OpcodeName(ins.opcode()), what));
}

}  // namespace

Interpreter::Interpreter(const Module& module, std::shared_ptr<const InterpreterPlan> plan, DeviceIds ids,
                         CollectivePeer* peer, InterpreterOptions options)
    : module_(module), plan_(std::move(plan)), ids_(ids), peer_(peer), options_(options) {
  if (peer_ == nullptr) {
    solo_ = std::make_unique<SoloPeer>(module);
    peer_ = solo_.get();
  }
}

Interpreter::~Interpreter() = default;

Value Interpreter::Run(std::vector<Value> arguments) {
  const Computation& entry = *module_.entry();
  if (static_cast<int64_t>(arguments.size()) != entry.parameter_count()) {
    Throw(ErrorCode::kInvalidArgument, "%{} takes {} arguments, not {}", entry.name(), entry.parameter_count(),
          arguments.size());
  }
  for (int64_t i = 0; i < entry.parameter_count(); ++i) {
    const Shape& want = entry.parameter(i)->shape();
    if (!arguments[i].valid() || !arguments[i].shape().Compatible(want)) {
      Throw(ErrorCode::kInvalidArgument, "argument {} of %{} is {}; parameter {} is {}", i, entry.name(),
            arguments[i].valid() ? arguments[i].ShapeString() : "missing", i, want.ToString());
    }
  }
  return Call(entry, arguments);
}

Value Interpreter::Call(const Computation& c, std::span<const Value> args) {
  if (++depth_ > 256) {
    --depth_;
    Throw(ErrorCode::kInvalidArgument, "computations nest more than 256 deep (at %{})", c.name());
  }
  std::vector<Value> values(static_cast<size_t>(c.instruction_count()));
  for (int64_t i = 0; i < c.instruction_count(); ++i) {
    const int32_t contraction = plan_->Contraction(c, i);
    if (contraction >= 0) {
      const Instruction& ins = *c.instruction(i);
      const Instruction& m = *c.instruction(contraction);
      const bool product_first = ins.operand(0) == &m;
      values[i] = internal::EvalMultiplyAdd(ins, values[m.operand(0)->index()], values[m.operand(1)->index()],
                                            values[ins.operand(product_first ? 1 : 0)->index()], product_first);
    } else if (contraction != InterpreterPlan::kContracted) {
      values[i] = Evaluate(*c.instruction(i), values, args);
    }
    for (int32_t dead : plan_->ReleasedAfter(c, i)) values[dead] = Value();
  }
  --depth_;
  return std::move(values[c.root()->index()]);
}

Value Interpreter::Evaluate(const Instruction& ins, std::span<const Value> values, std::span<const Value> args) {
  if (ins.opcode() == Opcode::kParameter) return args[ins.attrs().parameter_number];
  std::vector<const Value*> ops;
  ops.reserve(static_cast<size_t>(ins.operand_count()));
  for (const Instruction* o : ins.operands()) ops.push_back(&values[o->index()]);
  const Operands v(ops);
  bool handled = false;
  Value out = EvaluateControl(ins, v, &handled);
  if (handled) return out;
  using internal::KernelContext;
  Kernels context(*this);
  for (auto kernel : {+[](const Instruction& i, Operands o, KernelContext&) { return internal::EvalElementwise(i, o); },
                      +[](const Instruction& i, Operands o, KernelContext&) { return internal::EvalShape(i, o); },
                      +[](const Instruction& i, Operands o, KernelContext&) { return internal::EvalDot(i, o); },
                      &internal::EvalReduce, &internal::EvalGather, &internal::EvalSort,
                      &internal::EvalCollective}) {
    out = kernel(ins, v, context);
    if (out.valid()) return out;
  }
  Unsupported(ins, "is not supported by the interpreter");
}

Value Interpreter::EvaluateControl(const Instruction& ins, Operands v, bool* handled) {
  *handled = true;
  switch (ins.opcode()) {
    case Opcode::kTuple: {
      std::vector<Value> elements;
      for (const Value* x : v) elements.push_back(*x);
      return Value::Tuple(std::move(elements));
    }
    case Opcode::kGetTupleElement: return v[0]->element(static_cast<size_t>(ins.attrs().index));
    case Opcode::kCall:
    case Opcode::kFusion: {
      std::vector<Value> args;
      for (const Value* x : v) args.push_back(*x);
      return Call(*ins.called()[0], args);
    }
    case Opcode::kWhile: return RunWhile(ins, *v[0]);
    case Opcode::kConditional: {
      int64_t branch = 0;
      if (v[0]->dtype() == DType::kBool) {
        branch = v[0]->data<bool>()[0] ? 0 : 1;
      } else {
        branch = internal::ScalarAsInt64(*v[0]);
        const int64_t n = static_cast<int64_t>(ins.called().size());
        if (branch < 0 || branch >= n) branch = n - 1;  // XLA: an out-of-range index runs the last branch
      }
      return Call(*ins.called()[branch], std::span<const Value>(v[branch + 1], 1));
    }
    case Opcode::kAsyncStart: case Opcode::kAsyncUpdate: case Opcode::kAsyncDone: return RunAsync(ins, v);
    case Opcode::kAllReduceDone: return *v[0];
    case Opcode::kAllGatherDone: case Opcode::kCollectivePermuteDone: return v[0]->element(1);
    case Opcode::kAfterAll: return Value::Token();
    case Opcode::kAddDependency: return *v[0];
    case Opcode::kCustomCall:
      if (ins.attrs().custom_call_target == "Sharding") return *v[0];
      break;
    default: break;
  }
  *handled = false;
  return Value();
}

Value Interpreter::RunWhile(const Instruction& ins, const Value& init) {
  const Computation& condition = *ins.called()[0];
  const Computation& body = *ins.called()[1];
  const auto start = std::chrono::steady_clock::now();
  Value state = init;
  for (int64_t i = 0;; ++i) {
    Value go = Call(condition, std::span<const Value>(&state, 1));
    if (!go.data<bool>()[0]) return state;
    if (i >= options_.max_while_iterations) {
      Throw(ErrorCode::kDeadlineExceeded, "{}: while loop %{} ran {} iterations without ending (the limit: "
            "max_while_iterations, a scenario key and a run_hlo argument, raises it)", ins.Where(), ins.name(),
            options_.max_while_iterations);
    }
    if (i % 1024 == 1023) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (seconds > options_.max_while_seconds) {
        Throw(ErrorCode::kDeadlineExceeded, "{}: while loop %{} ran {} iterations in {:.1f} s without ending (the "
              "limit: max_while_seconds = {}, a scenario key and a run_hlo argument, raises it)", ins.Where(),
              ins.name(), i + 1, seconds, options_.max_while_seconds);
      }
    }
    state = Call(body, std::span<const Value>(&state, 1));
  }
}

// async-start runs the wrapped computation at once; -update passes the state on; -done returns the result.
Value Interpreter::RunAsync(const Instruction& ins, Operands v) {
  if (ins.opcode() == Opcode::kAsyncDone) return v[0]->element(1);
  if (ins.opcode() == Opcode::kAsyncUpdate) return *v[0];
  std::vector<Value> args;
  for (const Value* x : v) args.push_back(*x);
  Value result = Call(*ins.called()[0], args);
  std::vector<Value> parts{Value::Tuple(args), result};
  for (size_t i = 2; i < ins.shape().tuple.size(); ++i) parts.push_back(internal::NewArray(ins.shape().tuple[i], true));
  return Value::Tuple(std::move(parts));
}

}  // namespace spmdsim::hlo
