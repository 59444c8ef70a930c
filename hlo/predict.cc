#include "hlo/predict.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "cost/compute_model.h"
#include "cost/link_model.h"
#include "hlo/compiled_for.h"
#include "hlo/cost.h"
#include "hlo/groups.h"
#include "hlo/internal/streams.h"
#include "hlo/support.h"

namespace spmdsim::hlo {
namespace {

// A scalar integer constant's value, or false.
bool IntConstant(const Instruction* ins, int64_t* value) {
  if (ins->opcode() != Opcode::kConstant || !ins->shape().IsArray() || ins->shape().rank() != 0 ||
      !IsInteger(ins->shape().dtype) || ins->literal().elided) {
    return false;
  }
  const auto& b = ins->literal().bytes;
  int64_t v = 0;
  switch (b.size()) {
    case 1: {
      int8_t x;
      std::memcpy(&x, b.data(), 1);
      v = IsUnsigned(ins->shape().dtype) ? static_cast<uint8_t>(x) : x;
      break;
    }
    case 2: {
      int16_t x;
      std::memcpy(&x, b.data(), 2);
      v = IsUnsigned(ins->shape().dtype) ? static_cast<uint16_t>(x) : x;
      break;
    }
    case 4: {
      int32_t x;
      std::memcpy(&x, b.data(), 4);
      v = IsUnsigned(ins->shape().dtype) ? static_cast<uint32_t>(x) : x;
      break;
    }
    case 8: std::memcpy(&v, b.data(), 8); break;
    default: return false;
  }
  *value = v;
  return true;
}

// Element k of the loop state read as get-tuple-element(parameter 0), k.
bool IsStateElement(const Instruction* ins, int64_t* k) {
  if (ins->opcode() != Opcode::kGetTupleElement || ins->operand(0)->opcode() != Opcode::kParameter) return false;
  *k = ins->attrs().index;
  return true;
}

CollectiveOp OpOf(Opcode op) {
  switch (op) {
    case Opcode::kAllReduce: case Opcode::kAllReduceStart: return CollectiveOp::kAllReduce;
    case Opcode::kAllGather:
    case Opcode::kAllGatherStart:
    case Opcode::kCollectiveBroadcast: return CollectiveOp::kAllGather;
    case Opcode::kReduceScatter: return CollectiveOp::kReduceScatter;
    case Opcode::kAllToAll: case Opcode::kRaggedAllToAll: return CollectiveOp::kAllToAll;
    default: return CollectiveOp::kPermute;
  }
}

double Bytes(const Instruction& value, bool narrow) {
  return narrow ? NarrowBytes(value) : static_cast<double>(value.shape().ByteSize());
}

// S (nccl-tests' message size) of a collective: the all-gather's result, else its operands (narrow: in their
// narrow types).
double MessageBytes(const Instruction& ins, bool narrow) {
  if (ins.opcode() == Opcode::kAllGather || ins.opcode() == Opcode::kAllGatherStart) {
    double in = 0;
    for (const Instruction* o : ins.operands()) in += Bytes(*o, narrow);
    double raw = 0;
    for (const Instruction* o : ins.operands()) raw += static_cast<double>(o->shape().ByteSize());
    const Shape& out = ins.opcode() == Opcode::kAllGather ? ins.shape() : ins.shape().tuple[1];
    return raw > 0 ? static_cast<double>(out.ByteSize()) * in / raw : 0;
  }
  double s = 0;
  for (const Instruction* o : ins.operands()) s += Bytes(*o, narrow);
  return s;
}

}  // namespace

namespace {

// The devices a collective-permute's transfers name (ascending) and each transfer as (source, target) indices
// into them; transfers to oneself dropped.
struct PermuteGroup {
  std::vector<int64_t> devices;
  std::vector<std::pair<int, int>> routes;
};

PermuteGroup PermuteGroupOf(const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  PermuteGroup g;
  for (const auto& [s, t] : pairs) {
    if (s == t) continue;
    g.devices.push_back(s);
    g.devices.push_back(t);
  }
  std::sort(g.devices.begin(), g.devices.end());
  g.devices.erase(std::unique(g.devices.begin(), g.devices.end()), g.devices.end());
  auto index = [&](int64_t d) {
    return static_cast<int>(std::lower_bound(g.devices.begin(), g.devices.end(), d) - g.devices.begin());
  };
  for (const auto& [s, t] : pairs) {
    if (s != t) g.routes.emplace_back(index(s), index(t));
  }
  return g;
}

// Through copies, bitcasts, integer converts and reshapes (XLA TPU copies loop counters' initial values and sinks
// constants into loop bodies): the instruction that makes the value.
const Instruction* Source(const Instruction* x) {
  for (int i = 0; i < 8; ++i) {
    const Opcode op = x->opcode();
    if (op != Opcode::kCopy && op != Opcode::kBitcast && op != Opcode::kReshape &&
        !(op == Opcode::kConvert && IsInteger(x->shape().dtype))) {
      break;
    }
    x = x->operand(0);
  }
  return x;
}

// A scalar integer constant through Source, or one a loop passes through unchanged (body root element k is its own
// parameter element k) with a constant initial value in `init` (a tuple).
bool LoopConstant(const Instruction* x, const Instruction* init, const Instruction* body_root, int64_t* value) {
  x = Source(x);
  if (IntConstant(x, value)) return true;
  int64_t k = 0;
  if (!IsStateElement(x, &k) || init->opcode() != Opcode::kTuple || body_root->opcode() != Opcode::kTuple ||
      k >= init->operand_count() || k >= body_root->operand_count()) {
    return false;
  }
  int64_t same = -1;
  return IsStateElement(Source(body_root->operand(k)), &same) && same == k &&
         IntConstant(Source(init->operand(k)), value);
}

}  // namespace

int64_t StaticTripCount(const Instruction& loop) {
  if (loop.attrs().known_trip_count >= 0) return loop.attrs().known_trip_count;
  const Computation& cond = *loop.called()[0];
  const Computation& body = *loop.called()[1];
  const Instruction* init = Source(loop.operand(0));
  const Instruction* next = body.root();
  const Instruction* cmp = Source(cond.root());
  if (cmp->opcode() != Opcode::kCompare || init->opcode() != Opcode::kTuple || next->opcode() != Opcode::kTuple)
    return -1;
  // i < limit, i <= limit, limit > i, limit >= i with i a state element.
  ComparisonDirection d = cmp->attrs().direction;
  const Instruction* counter = Source(cmp->operand(0));
  const Instruction* bound = cmp->operand(1);
  int64_t k = 0;
  if (!IsStateElement(counter, &k)) {
    counter = Source(cmp->operand(1));
    bound = cmp->operand(0);
    if (!IsStateElement(counter, &k)) return -1;
    d = d == ComparisonDirection::kGt   ? ComparisonDirection::kLt
        : d == ComparisonDirection::kGe ? ComparisonDirection::kLe
                                        : d;
  }
  if ((d != ComparisonDirection::kLt && d != ComparisonDirection::kLe) || k >= init->operand_count() ||
      k >= next->operand_count()) {
    return -1;
  }
  int64_t limit = 0, start = 0, step = 0, k2 = 0;
  if (!LoopConstant(bound, init, next, &limit) || !IntConstant(Source(init->operand(k)), &start)) return -1;
  const Instruction* add = Source(next->operand(k));
  if (add->opcode() != Opcode::kAdd) return -1;
  const int which = IsStateElement(Source(add->operand(0)), &k2) && k2 == k ? 1 : 0;
  if (!IsStateElement(Source(add->operand(1 - which)), &k2) || k2 != k ||
      !LoopConstant(add->operand(which), init, next, &step) || step <= 0) {
    return -1;
  }
  if (d == ComparisonDirection::kLe) ++limit;
  return std::max<int64_t>(0, (limit - start + step - 1) / step);
}

std::string_view StreamName(Stream stream) {
  switch (stream) {
    case Stream::kCompute: return "compute";
    case Stream::kCollectives: return "collectives";
    case Stream::kNetwork: return "network";
    case Stream::kCopies: return "copies";
  }
  return "compute";
}

namespace {

using internal::Queue;
using internal::Streams;

Stream StreamOf(Queue q) {
  switch (q) {
    case Queue::kCollectives: return Stream::kCollectives;
    case Queue::kNetwork: return Stream::kNetwork;
    case Queue::kCopies: return Stream::kCopies;
  }
  return Stream::kCompute;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? INT64_MAX : out;
}

// An asynchronous -start (or the -update / -done that names it): the instruction the others refer to.
const Instruction* StartOf(const Instruction& ins) {
  const Instruction* s = &ins;
  while (s->operand_count() > 0 && (s->opcode() == Opcode::kAsyncUpdate || s->opcode() == Opcode::kAsyncDone ||
                                    s->opcode() == Opcode::kCopyDone || s->opcode() == Opcode::kSendDone ||
                                    s->opcode() == Opcode::kRecvDone || IsAsyncCollectiveDone(s->opcode()))) {
    s = s->operand(0);
  }
  return s;
}

// The instruction an async-start (-update, -done) runs: its wrapped computation's root.
const Instruction* WrappedRoot(const Instruction& ins) {
  const Instruction* start = StartOf(ins);
  if (start->opcode() != Opcode::kAsyncStart || start->called().empty()) return nullptr;
  return start->called()[0]->root();
}

// The first collective in computation `c` or the computations it calls (a call-start offloaded to a SparseCore
// runs an all-reduce inside a call), or nullptr.
const Instruction* CollectiveIn(const Computation& c, int depth = 0) {
  for (int64_t i = 0; i < c.instruction_count(); ++i) {
    const Instruction* ins = c.instruction(i);
    if (IsCollective(ins->opcode())) return ins;
    if (depth < 4) {
      for (const Computation* callee : ins->called()) {
        if (const Instruction* found = CollectiveIn(*callee, depth + 1)) return found;
      }
    }
  }
  return nullptr;
}

// Whether a custom-call target names XLA's async collective fusion halves (TPU: the kCustom fusions
// %async-collective-start / -done whose roots are these custom-calls).
bool IsFusionRootTarget(const Instruction& fusion, std::string_view target) {
  if (fusion.opcode() != Opcode::kFusion || fusion.called().empty()) return false;
  const Instruction* root = fusion.called()[0]->root();
  return root->opcode() == Opcode::kCustomCall && root->attrs().custom_call_target == target;
}

// XLA GPU's collective_backend_config "is_sync": true runs the collective on the compute stream.
bool IsSync(const Instruction& ins) { return ins.attrs().is_sync; }

// A send / recv of a host transfer or a cross-slice (DCN) exchange: its frontend attribute, or "".
std::string FrontendAttribute(const Instruction& ins, const std::string& name) {
  const auto it = ins.attrs().frontend_attributes.find(name);
  return it == ins.attrs().frontend_attributes.end() ? "" : it->second;
}

// Debug and host callbacks (jax.debug.print, io_callback, pure_callback): they run on the host and, compiled
// for an accelerator, cost a host round trip that spmdsim prices at 0.
bool IsHostCallback(const Instruction& ins) {
  return ins.opcode() == Opcode::kCustomCall && IsHostCallbackTarget(ins.attrs().custom_call_target);
}

// "data,model" with the axes of `more` not in it appended ("data" + "model,data" -> "data,model").
std::string UnionOfAxes(const std::string& axes, const std::string& more) {
  std::string out = axes;
  for (size_t at = 0; !more.empty() && at != std::string::npos;) {
    const size_t comma = more.find(',', at);
    const std::string axis = more.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? comma : comma + 1;
    const std::string padded = "," + out + ",";
    if (padded.find("," + axis + ",") == std::string::npos) out += (out.empty() ? "" : ",") + axis;
  }
  return out;
}

// Narrow types undo XLA CPU's widening of bf16 / f16 on a TPU or GPU topology; a module a TPU or GPU compiler made
// holds the types it computes in already.
bool NarrowByDefault(const Module& m, const Topology& topology) {
  if (topology.platform() == Platform::kCpu) return false;
  const CompiledFor c = CompiledForOf(m);
  return c == CompiledFor::kCpu || c == CompiledFor::kUnknown;
}

// What an iteration (or a whole loop) adds: the clocks, the totals and every group's sums.
struct Snapshot {
  double compute_clock = 0;
  std::array<double, internal::kQueues> queues{};
  Prediction totals;
};

// A loop's effect measured once, reused when the loop runs again from the same relative state (nested loops are
// then priced once per distinct state, not once per iteration of their callers).
struct LoopEffect {
  Snapshot delta;                                      // totals and clocks added
  std::vector<std::pair<double, double>> in_flight;   // collectives left running, relative to the compute clock
};

class Predictor {
 public:
  Predictor(const Module& m, const Mesh& mesh, const PredictOptions& o)
      : module_(m), mesh_(mesh), options_(o), compute_(*mesh.topology(), o.roofline), collectives_(mesh, o.collectives),
        streams_(Slowdown()), narrow_(o.narrow_types.value_or(NarrowByDefault(m, *mesh.topology()))) {
    FindAsyncCollectiveFusions();
  }

  Prediction Run() {
    Walk(*module_.entry());
    out_.step_seconds = streams_.end();
    out_.comm_slowdown = Slowdown();
    AddNotes();
    for (OpGroup& g : out_.by_class) g.op = g.name;
    std::stable_sort(out_.by_class.begin(), out_.by_class.end(), [](const OpGroup& a, const OpGroup& b) {
      return a.compute_seconds + a.comm_seconds > b.compute_seconds + b.comm_seconds;
    });
    return std::move(out_);
  }

 private:
  double Slowdown() const {
    if (options_.comm_slowdown >= 0) return options_.comm_slowdown;
    const DeviceComputeSpec* spec = FindDeviceComputeSpec(mesh_.topology()->device_kind());
    if (spec == nullptr || mesh_.topology()->platform() != Platform::kGpu) return 0;
    return std::min(0.5, 16.0 / spec->compute_units);  // NCCL's SMs (docs/model.md, "Compute figures")
  }

  // The peak a local op of `t` is priced at: its own when the topology has one; integers at float32's (docs/
  // workloads.md); another float at the peak of a type of its width the topology has (f16 at bf16's, f64 at f32's,
  // fp8 at bf16's), with a note.
  DType PricedType(DType t) {
    const auto& peaks = mesh_.topology()->peak_flops();
    if (peaks.count(t) > 0) return t;
    if (!IsFloating(t)) return peaks.count(DType::kF32) > 0 ? DType::kF32 : peaks.begin()->first;
    for (DType candidate : {DType::kBF16, DType::kF16, DType::kF32, DType::kF64}) {
      if (DTypeSize(candidate) == DTypeSize(t) && peaks.count(candidate) > 0) return Substitute(t, candidate);
    }
    const DType fallback = DTypeSize(t) < 4 && peaks.count(DType::kBF16) > 0 ? DType::kBF16 : DType::kF32;
    return Substitute(t, peaks.count(fallback) > 0 ? fallback : peaks.begin()->first);
  }
  DType Substitute(DType from, DType to) {
    substituted_[from] = to;
    return to;
  }

  // ---- The walk: an explicit stack of computations and loops (a call chain of any depth, no recursion). ----

  struct Frame {
    const Computation* computation = nullptr;  // a computation frame
    int64_t next = 0;
    std::vector<const Instruction*> deferred;  // synchronous collectives run asynchronously (overlap_collectives)
    const Instruction* loop = nullptr;          // a loop frame
    int64_t trips = 0, simulated = 0, iteration = 0;
    bool started = false, extend = false, finishing = false;
    std::vector<double> key;                    // the streams' relative state at the loop's start
    Snapshot entry, before_last;
  };

  void Walk(const Computation& entry) {
    std::vector<Frame> stack(1);
    stack.back().computation = &entry;
    while (!stack.empty()) {
      if (stack.back().loop != nullptr) {
        StepLoop(stack);
        continue;
      }
      Frame& f = stack.back();
      if (f.next == f.computation->instruction_count()) {
        for (const Instruction* d : f.deferred) Done(*d);
        stack.pop_back();
        continue;
      }
      const Instruction& ins = *f.computation->instruction(f.next++);
      for (const Instruction* o : ins.operands()) {
        auto it = std::find(f.deferred.begin(), f.deferred.end(), o);
        if (it == f.deferred.end()) continue;
        Done(*o);
        f.deferred.erase(it);
      }
      if (options_.overlap_collectives && IsCollective(ins.opcode()) && !IsAsyncCollectiveStart(ins.opcode()) &&
          !IsAsyncCollectiveDone(ins.opcode())) {
        StartCollective(ins, ins);
        f.deferred.push_back(&ins);
        continue;
      }
      if (const Computation* inline_callee = InlinedCallee(ins)) {
        Frame callee;
        callee.computation = inline_callee;
        stack.push_back(std::move(callee));
        continue;
      }
      if (ins.opcode() == Opcode::kWhile) {
        Frame loop;
        loop.loop = &ins;
        stack.push_back(std::move(loop));
        continue;
      }
      Execute(ins);
    }
  }

  // The computation a call or a conditional runs in place (its costliest branch), or nullptr.
  const Computation* InlinedCallee(const Instruction& ins) {
    if (ins.opcode() == Opcode::kCall) return ins.called()[0];
    if (ins.opcode() == Opcode::kConditional) return CostliestBranch(ins);
    return nullptr;
  }

  static constexpr double kMaxUnrolledOps = 2e6;

  // One step of a while loop's frame: start it (or reuse its effect), walk its next iteration (condition, then
  // body), extrapolate, or finish it.
  void StepLoop(std::vector<Frame>& stack) {
    Frame& f = stack.back();
    const Instruction& loop = *f.loop;
    if (!f.started) {
      f.started = true;
      f.trips = TripsOf(loop);
      // The streams' state relative to the compute clock, to the picosecond (floating-point noise aside, the same
      // state prices the loop the same).
      for (double x : streams_.Relative()) f.key.push_back(std::round(x * 1e12));
      f.key.push_back(static_cast<double>(f.trips));
      if (auto it = loop_effects_.find(&loop); it != loop_effects_.end() && it->second.first == f.key) {
        Apply(it->second.second);
        cached_loops_.insert(&loop);
        stack.pop_back();
        return;
      }
      // Loops whose iterations would make more than kMaxUnrolledOps instructions run two iterations and extend the
      // second (every later iteration repeats it: same instructions, same costs).
      const int64_t per_iteration = InstructionsOf(*loop.called()[0]) + InstructionsOf(*loop.called()[1]);
      f.extend = f.trips > 2 && static_cast<double>(f.trips) * static_cast<double>(per_iteration) > kMaxUnrolledOps;
      f.simulated = f.extend ? 2 : f.trips;
      f.entry = Take();
    }
    if (!f.finishing && f.iteration < f.simulated) {
      if (f.iteration == f.simulated - 1) f.before_last = Take();
      ++f.iteration;
      const Computation* condition = loop.called()[0];
      const Computation* body = loop.called()[1];
      stack.push_back(Frame{});
      stack.back().computation = body;
      stack.push_back(Frame{});
      stack.back().computation = condition;  // on top: runs first
      return;
    }
    if (!f.finishing) {
      if (f.extend) {
        Extend(f.before_last, Take(), f.trips - f.simulated);
        extended_loops_[&loop] = f.trips;
      }
      f.finishing = true;
      const Computation* condition = loop.called()[0];
      stack.push_back(Frame{});
      stack.back().computation = condition;  // the last test of the condition, which ends the loop
      return;
    }
    LoopEffect effect{Difference(f.entry, Take()), streams_.InFlight()};
    loop_effects_[&loop] = {std::move(f.key), std::move(effect)};
    stack.pop_back();
  }

  int64_t TripsOf(const Instruction& loop) {
    int64_t trips = -1;
    if (auto it = options_.trip_counts.find(&loop); it != options_.trip_counts.end()) trips = it->second;
    if (trips < 0) trips = StaticTripCount(loop);
    if (trips < 0) {
      trips = 1;
      unknown_trips_.insert(&loop);
    }
    return trips;
  }

  int64_t InstructionsOf(const Computation& c) {
    auto it = sizes_.find(&c);
    if (it != sizes_.end()) return it->second;
    // Iterative: callees first, each once.
    std::vector<std::pair<const Computation*, bool>> todo{{&c, false}};
    while (!todo.empty()) {
      auto [comp, expanded] = todo.back();
      todo.pop_back();
      if (sizes_.count(comp) > 0) continue;
      if (!expanded) {
        todo.emplace_back(comp, true);
        for (int64_t i = 0; i < comp->instruction_count(); ++i) {
          if (!CountsCallees(*comp->instruction(i))) continue;
          for (const Computation* callee : comp->instruction(i)->called()) {
            if (sizes_.count(callee) == 0) todo.emplace_back(callee, false);
          }
        }
        continue;
      }
      int64_t n = comp->instruction_count();
      for (int64_t i = 0; i < comp->instruction_count(); ++i) {
        if (!CountsCallees(*comp->instruction(i))) continue;
        for (const Computation* callee : comp->instruction(i)->called()) {
          const auto found = sizes_.find(callee);
          n = SaturatingAdd(n, found == sizes_.end() ? 0 : found->second);
        }
      }
      sizes_[comp] = n;
    }
    return sizes_[&c];
  }

  // Whether the instructions `ins` calls run as instructions of their own: not a fusion's (one kernel), nor the
  // wrapped computation that an async-update or -done names again after its start.
  static bool CountsCallees(const Instruction& ins) {
    const Opcode op = ins.opcode();
    return op != Opcode::kFusion && op != Opcode::kAsyncUpdate && op != Opcode::kAsyncDone;
  }

  Snapshot Take() const {
    Snapshot s;
    s.compute_clock = streams_.compute_clock();
    for (size_t q = 0; q < internal::kQueues; ++q) s.queues[q] = streams_.queue_free(static_cast<Queue>(q));
    s.totals.compute_seconds = out_.compute_seconds;
    s.totals.comm_seconds = out_.comm_seconds;
    s.totals.exposed_comm_seconds = out_.exposed_comm_seconds;
    s.totals.copy_seconds = out_.copy_seconds;
    s.totals.network_seconds = out_.network_seconds;
    s.totals.exposed_transfer_seconds = out_.exposed_transfer_seconds;
    s.totals.comm_seconds_by_axis = out_.comm_seconds_by_axis;
    s.totals.flops = out_.flops;
    s.totals.contraction_flops = out_.contraction_flops;
    s.totals.executed_ops = out_.executed_ops;
    s.totals.by_class = out_.by_class;
    s.totals.by_scope = out_.by_scope;
    return s;
  }

  // b - a, as a delta that Apply adds.
  static Snapshot Difference(const Snapshot& a, const Snapshot& b) {
    Snapshot d;
    d.compute_clock = b.compute_clock - a.compute_clock;
    for (size_t q = 0; q < internal::kQueues; ++q) d.queues[q] = b.queues[q] - a.queues[q];
    d.totals.compute_seconds = b.totals.compute_seconds - a.totals.compute_seconds;
    d.totals.comm_seconds = b.totals.comm_seconds - a.totals.comm_seconds;
    d.totals.exposed_comm_seconds = b.totals.exposed_comm_seconds - a.totals.exposed_comm_seconds;
    d.totals.copy_seconds = b.totals.copy_seconds - a.totals.copy_seconds;
    d.totals.network_seconds = b.totals.network_seconds - a.totals.network_seconds;
    d.totals.exposed_transfer_seconds = b.totals.exposed_transfer_seconds - a.totals.exposed_transfer_seconds;
    for (const auto& [axes, seconds] : b.totals.comm_seconds_by_axis) {
      const auto it = a.totals.comm_seconds_by_axis.find(axes);
      d.totals.comm_seconds_by_axis[axes] = seconds - (it == a.totals.comm_seconds_by_axis.end() ? 0 : it->second);
    }
    d.totals.flops = b.totals.flops - a.totals.flops;
    d.totals.contraction_flops = b.totals.contraction_flops - a.totals.contraction_flops;
    d.totals.executed_ops = b.totals.executed_ops - a.totals.executed_ops;
    d.totals.by_class = GroupDifference(a.totals.by_class, b.totals.by_class);
    d.totals.by_scope = GroupDifference(a.totals.by_scope, b.totals.by_scope);
    return d;
  }
  static std::vector<OpGroup> GroupDifference(const std::vector<OpGroup>& a, const std::vector<OpGroup>& b) {
    std::vector<OpGroup> d = b;
    for (size_t i = 0; i < d.size(); ++i) {
      if (i >= a.size()) continue;
      d[i].count -= a[i].count;
      d[i].compute_seconds -= a[i].compute_seconds;
      d[i].comm_seconds -= a[i].comm_seconds;
      d[i].exposed_comm_seconds -= a[i].exposed_comm_seconds;
      d[i].flops -= a[i].flops;
      d[i].bytes -= a[i].bytes;
      d[i].message_bytes -= a[i].message_bytes;
      for (auto& [axis, seconds] : d[i].comm_seconds_by_axis) {
        const auto it = a[i].comm_seconds_by_axis.find(axis);
        if (it != a[i].comm_seconds_by_axis.end()) seconds -= it->second;
      }
      for (auto& [link, bytes] : d[i].bytes_sent) {
        const auto it = a[i].bytes_sent.find(link);
        if (it != a[i].bytes_sent.end()) bytes -= it->second;
      }
    }
    return d;
  }

  // Adds `times` x delta `d` to the totals (groups by index: groups are only ever appended) and the clocks.
  void Add(const Snapshot& d, double times) {
    out_.compute_seconds += times * d.totals.compute_seconds;
    out_.comm_seconds += times * d.totals.comm_seconds;
    out_.exposed_comm_seconds += times * d.totals.exposed_comm_seconds;
    out_.copy_seconds += times * d.totals.copy_seconds;
    out_.network_seconds += times * d.totals.network_seconds;
    out_.exposed_transfer_seconds += times * d.totals.exposed_transfer_seconds;
    for (const auto& [axes, seconds] : d.totals.comm_seconds_by_axis)
      out_.comm_seconds_by_axis[axes] += times * seconds;
    out_.flops += times * d.totals.flops;
    out_.contraction_flops += times * d.totals.contraction_flops;
    const double ops = std::min(times * static_cast<double>(d.totals.executed_ops), 9.2e18);
    out_.executed_ops = SaturatingAdd(out_.executed_ops, static_cast<int64_t>(ops));
    AddGroups(out_.by_class, d.totals.by_class, times);
    AddGroups(out_.by_scope, d.totals.by_scope, times);
  }
  static void AddGroups(std::vector<OpGroup>& into, const std::vector<OpGroup>& d, double k) {
    for (size_t i = 0; i < into.size() && i < d.size(); ++i) {
      into[i].count = SaturatingAdd(into[i].count,
                                    static_cast<int64_t>(std::min(k * static_cast<double>(d[i].count), 9.2e18)));
      into[i].compute_seconds += k * d[i].compute_seconds;
      into[i].comm_seconds += k * d[i].comm_seconds;
      into[i].exposed_comm_seconds += k * d[i].exposed_comm_seconds;
      into[i].flops += k * d[i].flops;
      into[i].bytes += k * d[i].bytes;
      into[i].message_bytes += k * d[i].message_bytes;
      for (const auto& [axis, seconds] : d[i].comm_seconds_by_axis) into[i].comm_seconds_by_axis[axis] += k * seconds;
      for (const auto& [link, bytes] : d[i].bytes_sent) into[i].bytes_sent[link] += k * bytes;
    }
  }

  // The iterations after the simulated ones repeat the last: its delta, `times` more.
  void Extend(const Snapshot& a, const Snapshot& b, int64_t times) {
    const Snapshot d = Difference(a, b);
    const double k = static_cast<double>(times);
    std::array<double, internal::kQueues> queues{};
    for (size_t q = 0; q < internal::kQueues; ++q) queues[q] = k * d.queues[q];
    streams_.Advance(k * d.compute_clock, queues);
    Add(d, k);
  }

  // A loop run again from a state it ran from before: its recorded effect.
  void Apply(const LoopEffect& e) {
    streams_.Advance(e.delta.compute_clock, e.delta.queues, e.in_flight);
    Add(e.delta, 1.0);
  }

  const Computation* CostliestBranch(const Instruction& ins) {
    const Computation* best = ins.called()[0];
    double most = -1;
    for (const Computation* b : ins.called()) {
      double seconds = 0;
      for (int64_t i = 0; i < b->instruction_count(); ++i) {
        const InstructionCost c = CostOf(*b->instruction(i), narrow_);
        seconds += compute_.Cost(c.flops, c.bytes(), c.dims, PricedType(c.dtype)).seconds;
      }
      if (seconds > most) most = seconds, best = b;
    }
    return best;
  }

  // ---- One instruction. ----

  void Execute(const Instruction& ins) {
    const Opcode op = ins.opcode();
    if (const Instruction* collective = AsyncCollective(ins)) {
      StartCollective(ins, *collective);
      if (IsSync(ins)) Done(ins);
      return;
    }
    if (IsAsyncDone(ins)) return Done(ins);
    if (op == Opcode::kAsyncUpdate) return;
    if (op == Opcode::kAsyncStart) return StartTransfer(ins, Queue::kCopies, WrappedSeconds(*ins.called()[0]), 0);
    if (op == Opcode::kCopyStart) {
      const double bytes = static_cast<double>(ins.operand(0)->shape().ByteSize());
      return StartTransfer(ins, Queue::kCopies, bytes / mesh_.topology()->memory_bandwidth_Bps(), bytes);
    }
    if (op == Opcode::kSend || op == Opcode::kRecv) return Transfer(ins);
    if (IsCollective(op)) {
      StartCollective(ins, ins);
      return Done(ins);
    }
    if (IsHostCallback(ins)) {
      host_callbacks_.insert(&ins);
      return;
    }
    LocalOp(ins);
  }

  // The collective an asynchronous start runs (itself for all-reduce-start & co.; the wrapped one of an
  // async-start; the one inside a call offloaded to a SparseCore; the one inside the matching done of a TPU async
  // collective fusion), or nullptr when `ins` starts none.
  const Instruction* AsyncCollective(const Instruction& ins) {
    if (IsAsyncCollectiveStart(ins.opcode())) return &ins;
    if (ins.opcode() == Opcode::kAsyncStart) {
      const Instruction* wrapped = WrappedRoot(ins);
      if (wrapped != nullptr && IsCollective(wrapped->opcode())) return wrapped;
      if (wrapped != nullptr && wrapped->opcode() == Opcode::kCall) return CollectiveIn(*wrapped->called()[0]);
      return nullptr;
    }
    const auto it = fusion_collectives_.find(&ins);
    return it == fusion_collectives_.end() ? nullptr : it->second;
  }

  bool IsAsyncDone(const Instruction& ins) const {
    const Opcode op = ins.opcode();
    return IsAsyncCollectiveDone(op) || op == Opcode::kAsyncDone || op == Opcode::kCopyDone ||
           op == Opcode::kSendDone || op == Opcode::kRecvDone || fusion_dones_.count(&ins) > 0;
  }

  // TPU async collective fusions: %async-collective-start (root custom-call AsyncCollectiveStart) and the
  // %async-collective-done that takes its results (root AsyncCollectiveDone, the collective inside it).
  void FindAsyncCollectiveFusions() {
    for (int64_t c = 0; c < module_.computation_count(); ++c) {
      const Computation& comp = *module_.computation(c);
      for (int64_t i = 0; i < comp.instruction_count(); ++i) {
        const Instruction& done = *comp.instruction(i);
        if (!IsFusionRootTarget(done, "AsyncCollectiveDone")) continue;
        for (const Instruction* o : done.operands()) {
          const Instruction* start = o->opcode() == Opcode::kGetTupleElement ? o->operand(0) : o;
          if (!IsFusionRootTarget(*start, "AsyncCollectiveStart")) continue;
          if (const Instruction* collective = CollectiveIn(*done.called()[0])) fusion_collectives_[start] = collective;
          fusion_dones_[&done] = start;
          break;
        }
      }
    }
  }

  // The local ops of an async-start's wrapped computation, priced as one item on the copies queue.
  double WrappedSeconds(const Computation& c) {
    double seconds = 0;
    for (int64_t i = 0; i < c.instruction_count(); ++i) {
      const InstructionCost cost = CostOf(*c.instruction(i), narrow_);
      if (cost.flops > 0 || cost.bytes() > 0) {
        seconds +=
            compute_.Cost(cost.flops, cost.bytes(), cost.dims, PricedType(cost.dtype), options_.speed_factor).seconds;
      }
    }
    return seconds;
  }

  // A send or recv: a host transfer or a cross-slice (DCN) exchange on the network queue. A MegaScale all-reduce
  // (XLA TPU's cross-slice half of an all-reduce: _xla_megascale_transfer_type) is priced as that all-reduce over
  // the device's peers in the other slices; other transfers as the bytes over the DCN link (PCIe for host
  // transfers, or where the topology has no DCN).
  void Transfer(const Instruction& ins) {
    const Shape& data = ins.opcode() == Opcode::kSend ? ins.operand(0)->shape()
                        : ins.shape().tuple.empty()   ? ins.shape()
                                                      : ins.shape().tuple[0];
    const double bytes = static_cast<double>(data.ByteSize());
    if (ins.opcode() == Opcode::kRecv && !FrontendAttribute(ins, "_xla_megascale_transfer_type").empty()) {
      return StartTransfer(ins, Queue::kNetwork, 0, 0);  // the matching send carries the exchange
    }
    const std::string type = FrontendAttribute(ins, "_xla_megascale_transfer_type");
    const Topology& t = *mesh_.topology();
    if (!type.empty() && t.num_slices() > 1) {
      const CollectiveOp op = type == "ALL_GATHER" ? CollectiveOp::kAllGather
                              : type == "REDUCE_SCATTER" ? CollectiveOp::kReduceScatter
                              : type == "ALL_TO_ALL" ? CollectiveOp::kAllToAll : CollectiveOp::kAllReduce;
      return StartTransfer(ins, Queue::kNetwork, CrossSliceSeconds(op, bytes), bytes);
    }
    const bool dcn = t.links().count(LinkClass::kDcn) > 0;
    const LinkSpec& link = t.link(dcn ? LinkClass::kDcn : LinkClass::kPcie);
    StartTransfer(ins, Queue::kNetwork, link.latency_s + bytes / link.bandwidth_Bps, bytes);
  }

  // A collective of the simulated device (mesh position 0) with its peers in the other slices: the same place in
  // each slice (topology device ids are slice-major), priced on a mesh of the whole topology, since a multi-slice
  // module is one slice's program and its mesh holds that slice's devices only.
  double CrossSliceSeconds(CollectiveOp op, double bytes) {
    const Topology& t = *mesh_.topology();
    if (!all_slices_) {
      std::vector<int> ids(static_cast<size_t>(t.num_devices()));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
      all_slices_.emplace(Mesh(DeviceArray({t.num_devices()}, ids), {"devices"}, mesh_.shared_topology()),
                          options_.collectives);
    }
    const int64_t per_slice = t.num_devices() / t.num_slices();
    const int64_t first = mesh_.devices().ids()[0] % per_slice;
    std::vector<int64_t> peers;
    for (int s = 0; s < t.num_slices(); ++s) peers.push_back(first + s * per_slice);
    return all_slices_->CostOfGroup(op, peers, bytes).seconds;
  }

  void StartTransfer(const Instruction& ins, Queue q, double seconds, double bytes) {
    const auto [start, end] = streams_.Start(q, seconds);
    in_flight_[&ins] = end;
    (q == Queue::kNetwork ? out_.network_seconds : out_.copy_seconds) += end - start;
    Record(ins, start, end, StreamOf(q), bytes);
    pending_[&ins] = {SIZE_MAX, SIZE_MAX, options_.record_events ? out_.events.size() - 1 : SIZE_MAX, false};
  }

  void LocalOp(const Instruction& ins) {
    const InstructionCost cost = CostOf(ins, narrow_);
    if (cost.flops == 0 && cost.bytes() == 0) return;
    if (narrow_ && !narrowed_.count(&ins) && CostOf(ins, false).bytes() != cost.bytes()) {
      narrowed_.insert(&ins);
      if (const DType t = NarrowType(ins); t != DType::kF32 && !ins.shape().IsTuple()) narrowed_type_ = t;
    }
    const LocalOpCost t = compute_.Cost(cost.flops, cost.bytes(), cost.dims, PricedType(cost.dtype),
                                        options_.speed_factor);
    const auto [start, end] = streams_.Compute(t.seconds);
    OpGroup& cls = Group(out_.by_class, by_class_, InstructionClass(ins));
    OpGroup& scope = Group(out_.by_scope, by_scope_, ScopeOf(ins));
    for (OpGroup* g : {&cls, &scope}) {
      g->count += 1;
      g->compute_seconds += end - start;
      g->flops += cost.flops;
      g->bytes += cost.bytes();
    }
    out_.compute_seconds += end - start;
    out_.flops += cost.flops;
    if (cost.dims.valid()) {
      out_.contraction_flops += cost.flops;
      double& by_type = contraction_by_type_[cost.dtype];
      by_type += cost.flops;
      if (by_type >= contraction_by_type_[out_.contraction_dtype]) out_.contraction_dtype = cost.dtype;
    }
    scope_time_[scope.name][cls.name] += end - start;
    Record(ins, start, end, Stream::kCompute, cost.bytes());
  }

  // ---- Collectives. ----

  // The mesh axes a group of positions varies over ("data", "data,model"); "" on a one-axis "devices" mesh.
  std::vector<std::string> AxesOf(const std::vector<int64_t>& group) const {
    std::vector<std::string> axes;
    if (mesh_.rank() == 1 && mesh_.axis_names()[0] == "devices") return axes;
    const std::vector<int64_t> first = mesh_.CoordsOfPosition(group[0]);
    std::vector<bool> varies(first.size(), false);
    for (int64_t p : group) {
      const std::vector<int64_t> c = mesh_.CoordsOfPosition(p);
      for (size_t a = 0; a < c.size(); ++a) varies[a] = varies[a] || c[a] != first[a];
    }
    for (size_t a = 0; a < varies.size(); ++a) {
      if (varies[a]) axes.push_back(mesh_.axis_names()[a]);
    }
    return axes;
  }

  // The slowest group's cost of collective `c` (cached per instruction), with the axes its groups vary over.
  const CollectiveCost& PriceCollective(const Instruction& c) {
    auto it = prices_.find(&c);
    if (it != prices_.end()) return it->second;
    CollectiveCost worst;
    std::vector<std::string> worst_axes;
    const double bytes = MessageBytes(c, narrow_);
    const Opcode op = c.opcode();
    auto consider = [&](const CollectiveCost& cost, std::vector<std::string> axes) {
      if (cost.seconds >= worst.seconds) worst = cost, worst_axes = std::move(axes);
    };
    if (op == Opcode::kCollectivePermute || op == Opcode::kCollectivePermuteStart) {
      // All pairs at once over the span of every device they name: each transfer takes its route through the
      // whole torus (a ring shift's last pair crosses the wraparound link, not the row back), and transfers that
      // share a link share its bandwidth.
      const PermuteGroup permute = PermuteGroupOf(PairsOf(c, module_.replica_count(), module_.num_partitions()));
      if (!permute.devices.empty()) {
        std::vector<std::string> axes = AxesOf(permute.devices);
        consider(Cached(CollectiveOp::kPermute, permute.devices, bytes, permute.routes, axes), axes);
      }
    } else {
      for (const auto& group : GroupsOf(c, module_.replica_count(), module_.num_partitions())) {
        if (group.size() <= 1) continue;
        std::vector<std::string> axes = AxesOf(group);
        consider(Cached(OpOf(op), group, bytes, {}, axes), axes);
      }
    }
    worst.bytes = bytes;
    axes_[&c] = fmt::format("{}", fmt::join(worst_axes, ","));
    return prices_.emplace(&c, worst).first->second;
  }

  // CostOfGroup, shared by groups with the same physical span (their members' relative coordinates).
  CollectiveCost Cached(CollectiveOp op, const std::vector<int64_t>& group, double bytes,
                        const std::vector<std::pair<int, int>>& pairs, const std::vector<std::string>& axes) {
    const GroupSpan span = SpanOfGroup(mesh_, group);
    std::string key = fmt::format("{}|{}|{}|{}", static_cast<int>(op), bytes, span.ToString(), fmt::join(axes, ","));
    for (const auto& [from, to] : pairs) key += fmt::format("|{}>{}", from, to);
    for (const auto& coords : span.member_coords) key += fmt::format("|{}", fmt::join(coords, ","));
    auto it = span_cache_.find(key);
    if (it == span_cache_.end())
      it = span_cache_.emplace(key, collectives_.CostOfGroup(op, group, bytes, pairs, axes)).first;
    return it->second;
  }

  void StartCollective(const Instruction& handle, const Instruction& c) {
    const CollectiveCost& cost = PriceCollective(c);
    const auto [start, end] = streams_.Start(Queue::kCollectives, cost.seconds);
    in_flight_[&handle] = end;
    OpGroup& cls = Group(out_.by_class, by_class_, InstructionClass(c));
    OpGroup& scope = Group(out_.by_scope, by_scope_, ScopeOf(c));
    const std::string& axes = axes_[&c];
    for (OpGroup* g : {&cls, &scope}) {
      g->count += 1;
      g->comm_seconds += end - start;
      g->message_bytes += cost.bytes;
      g->group_size = std::max<int64_t>(g->group_size, cost.group_size);
      g->algorithm = cost.algorithm;
      g->axes = UnionOfAxes(g->axes, axes);
      for (const auto& [link, b] : cost.bytes_sent) g->bytes_sent[link] += b;
    }
    out_.comm_seconds += end - start;
    const double scale = cost.seconds > 0 ? (end - start) / cost.seconds : 0;
    for (const auto& [axis, seconds] : cost.seconds_by_axis) {
      out_.comm_seconds_by_axis[axis] += scale * seconds;
      cls.comm_seconds_by_axis[axis] += scale * seconds;
      scope.comm_seconds_by_axis[axis] += scale * seconds;
    }
    Record(c, start, end, Stream::kCollectives, cost.bytes);
    if (options_.record_events) out_.events.back().axes = axes;
    pending_[&handle] = {by_class_[cls.name], by_scope_[scope.name],
                         options_.record_events ? out_.events.size() - 1 : SIZE_MAX, true};
    scope_time_[scope.name][cls.name] += end - start;
  }

  // The compute stream waits for the asynchronous work `done` completes: a synchronous collective itself, or the
  // start that a -done names (through async-updates; a TPU async collective done fusion: its start fusion).
  void Done(const Instruction& done) {
    const Instruction* start = StartOf(done);
    if (auto f = fusion_dones_.find(&done); f != fusion_dones_.end()) start = f->second;
    auto it = in_flight_.find(start);
    if (it == in_flight_.end()) return;
    const double waited = streams_.Wait(it->second);
    const Pending& p = pending_[start];
    if (p.collective) {
      out_.exposed_comm_seconds += waited;
      out_.by_class[p.cls].exposed_comm_seconds += waited;
      out_.by_scope[p.scope].exposed_comm_seconds += waited;
    } else {
      out_.exposed_transfer_seconds += waited;
    }
    if (p.event != SIZE_MAX) out_.events[p.event].exposed = waited;
    in_flight_.erase(it);
  }

  void Record(const Instruction& ins, double start, double end, Stream stream, double bytes) {
    out_.executed_ops = SaturatingAdd(out_.executed_ops, 1);
    if (!options_.record_events) return;
    OpEvent e;
    e.instruction = &ins;
    e.start = start;
    e.end = end;
    e.collective = stream == Stream::kCollectives;
    e.stream = stream;
    e.bytes = bytes;
    out_.events.push_back(std::move(e));
  }

  static OpGroup& Group(std::vector<OpGroup>& groups, std::map<std::string, size_t>& index, const std::string& name) {
    auto [it, inserted] = index.emplace(name, groups.size());
    if (inserted) {
      OpGroup g;
      g.name = name;
      groups.push_back(std::move(g));
    }
    return groups[it->second];
  }

  // One note per kind of assumption, naming the first few instructions.
  void AddNotes() {
    auto names = [](const auto& instructions) {
      std::vector<std::string> out;
      for (const Instruction* i : instructions) {
        if (out.size() == 3) {
          out.push_back(fmt::format("and {} more", instructions.size() - 3));
          break;
        }
        out.push_back(fmt::format("%{} ({})", i->name(), i->Where()));
      }
      return fmt::format("{}", fmt::join(out, ", "));
    };
    if (!unknown_trips_.empty()) {
      out_.notes.push_back(fmt::format("the trip count of {} while loop(s) is unknown; each counted once: {}",
                                       unknown_trips_.size(), names(unknown_trips_)));
    }
    if (!extended_loops_.empty()) {
      std::set<const Instruction*> loops;
      for (const auto& [loop, trips] : extended_loops_) loops.insert(loop);
      out_.notes.push_back(fmt::format("{} while loop(s) ran too many instructions to simulate each iteration: two "
                                       "were simulated and the second repeated for the rest: {}",
                                       loops.size(), names(loops)));
    }
    if (!cached_loops_.empty()) {
      out_.notes.push_back(fmt::format("{} while loop(s) ran again from a state they had run from: their effect was "
                                       "reused (the trace shows their first run): {}",
                                       cached_loops_.size(), names(cached_loops_)));
    }
    if (!host_callbacks_.empty()) {
      out_.notes.push_back(fmt::format("{} host callback(s) (jax.debug.print, io_callback, pure_callback) are priced "
                                       "at 0; on the target each is a host round trip: {}",
                                       host_callbacks_.size(), names(host_callbacks_)));
    }
    for (const auto& [from, to] : substituted_) {
      out_.notes.push_back(fmt::format("{} has no {} peak: {} ops are priced at its {} peak (the same width)",
                                       mesh_.topology()->ToString(), DTypeShortName(from), DTypeShortName(from),
                                       DTypeShortName(to)));
    }
    if (!narrowed_.empty()) {
      out_.notes.push_back(fmt::format(
          "{} instructions use values XLA CPU widened from {} to f32; they are priced in {}, as a TPU or GPU "
          "compile keeps them", narrowed_.size(), DTypeShortName(narrowed_type_), DTypeShortName(narrowed_type_)));
    }
  }

  struct Pending {
    size_t cls = 0, scope = 0;  // indices in by_class / by_scope (collectives)
    size_t event = SIZE_MAX;
    bool collective = true;
  };

  const Module& module_;
  const Mesh& mesh_;
  const PredictOptions& options_;
  ComputeModel compute_;
  CollectiveModel collectives_;
  std::optional<CollectiveModel> all_slices_;  // a mesh of every slice's devices (cross-slice transfers)
  Streams streams_;
  Prediction out_;
  std::map<std::string, size_t> by_class_, by_scope_;
  std::map<const Instruction*, CollectiveCost> prices_;
  std::map<const Instruction*, std::string> axes_;
  std::map<std::string, CollectiveCost> span_cache_;
  std::map<const Instruction*, double> in_flight_;
  std::map<const Instruction*, Pending> pending_;
  std::map<std::string, std::map<std::string, double>> scope_time_;  // scope -> class -> seconds
  std::map<const Computation*, int64_t> sizes_;
  std::map<const Instruction*, const Instruction*>
      fusion_collectives_;  // async collective start fusion -> its collective
  std::map<const Instruction*, const Instruction*> fusion_dones_;        // async collective done fusion -> its start
  std::map<const Instruction*, std::pair<std::vector<double>, LoopEffect>> loop_effects_;
  std::set<const Instruction*> unknown_trips_, cached_loops_, host_callbacks_;
  std::map<const Instruction*, int64_t> extended_loops_;
  std::map<DType, DType> substituted_;
  std::map<DType, double> contraction_by_type_;
  const bool narrow_;
  std::set<const Instruction*> narrowed_;  // instructions priced on narrower values than the module's
  DType narrowed_type_ = DType::kBF16;

 public:
  // The class that took the most time in each scope.
  void NameScopeOps(Prediction* p) const {
    for (OpGroup& g : p->by_scope) {
      auto it = scope_time_.find(g.name);
      if (it == scope_time_.end()) continue;
      double most = -1;
      for (const auto& [cls, seconds] : it->second) {
        if (seconds > most) most = seconds, g.op = cls;
      }
    }
  }
};

}  // namespace

Prediction Predict(const SupportedModule& module, const Mesh& mesh, const PredictOptions& options) {
  if (mesh.topology() == nullptr)
    Throw(ErrorCode::kFailedPrecondition, "predicting an HLO module needs a mesh with a topology");
  module.CheckDeviceCount(mesh.size(), "the mesh");
  Predictor p(module.module(), mesh, options);
  Prediction out = p.Run();
  out.memory = module.memory();
  p.NameScopeOps(&out);
  return out;
}

}  // namespace spmdsim::hlo
