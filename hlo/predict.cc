#include "hlo/predict.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "common/error.h"
#include "cost/compute_model.h"
#include "cost/link_model.h"
#include "hlo/cost.h"
#include "hlo/groups.h"
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
    case 1: { int8_t x; std::memcpy(&x, b.data(), 1); v = IsUnsigned(ins->shape().dtype) ? static_cast<uint8_t>(x) : x; break; }
    case 2: { int16_t x; std::memcpy(&x, b.data(), 2); v = IsUnsigned(ins->shape().dtype) ? static_cast<uint16_t>(x) : x; break; }
    case 4: { int32_t x; std::memcpy(&x, b.data(), 4); v = IsUnsigned(ins->shape().dtype) ? static_cast<uint32_t>(x) : x; break; }
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

// The Roofline/ComputeModel peak lookup throws for dtypes the topology lacks: integers and 8-bit types are priced
// at the float32 peak (docs/workloads.md).
DType PricedType(DType t) {
  return (t == DType::kBF16 || t == DType::kF16 || t == DType::kF64 || t == DType::kF8E4M3FN || t == DType::kF8E5M2)
             ? t
             : DType::kF32;
}

CollectiveOp OpOf(Opcode op) {
  switch (op) {
    case Opcode::kAllReduce: case Opcode::kAllReduceStart: return CollectiveOp::kAllReduce;
    case Opcode::kAllGather: case Opcode::kAllGatherStart: case Opcode::kCollectiveBroadcast: return CollectiveOp::kAllGather;
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

int64_t StaticTripCount(const Instruction& loop) {
  if (loop.attrs().known_trip_count >= 0) return loop.attrs().known_trip_count;
  const Computation& cond = *loop.called()[0];
  const Computation& body = *loop.called()[1];
  const Instruction* cmp = cond.root();
  if (cmp->opcode() != Opcode::kCompare || cmp->attrs().direction != ComparisonDirection::kLt) return -1;
  int64_t k = 0, limit = 0, k2 = 0, start = 0, step = 0;
  if (!IsStateElement(cmp->operand(0), &k) || !IntConstant(cmp->operand(1), &limit)) return -1;
  const Instruction* init = loop.operand(0);
  if (init->opcode() != Opcode::kTuple || k >= init->operand_count() || !IntConstant(init->operand(k), &start)) return -1;
  const Instruction* next = body.root();
  if (next->opcode() != Opcode::kTuple || k >= next->operand_count()) return -1;
  const Instruction* add = next->operand(k);
  if (add->opcode() != Opcode::kAdd || !IsStateElement(add->operand(0), &k2) || k2 != k ||
      !IntConstant(add->operand(1), &step) || step <= 0) {
    return -1;
  }
  return std::max<int64_t>(0, (limit - start + step - 1) / step);
}

namespace {

// One device's compute and communication streams.
class Streams {
 public:
  explicit Streams(double slowdown) : slowdown_(slowdown) {}
  double compute_clock() const { return compute_; }
  double comm_free() const { return comm_free_; }
  // Moves both streams forward (extrapolated loop iterations).
  void Shift(double compute, double comm) {
    compute_ += compute;
    comm_free_ += comm;
  }
  double end() const { return std::max(compute_, comm_free_); }

  // Runs `seconds` of compute from the current clock, slower while communication is in flight.
  std::pair<double, double> Compute(double seconds) {
    const double start = compute_;
    double t = compute_, left = seconds;
    for (const auto& [b, e] : comm_) {
      if (left <= 0) break;
      if (e <= t) continue;
      if (b > t) {
        const double free = std::min(left, b - t);
        t += free;
        left -= free;
        if (left <= 0) break;
      }
      const double rate = 1.0 - slowdown_;
      const double done = std::min(left, (e - t) * rate);
      t += done / rate;
      left -= done;
    }
    compute_ = t + left;
    return {start, compute_};
  }

  // A collective of `seconds` issued now: it starts when the communication stream is free.
  std::pair<double, double> Start(double seconds) {
    const double start = std::max(compute_, comm_free_);
    comm_free_ = start + seconds;
    if (seconds > 0) comm_.emplace_back(start, comm_free_);
    return {start, comm_free_};
  }

  // The compute stream waits until `end`; returns how long it waited.
  double Wait(double end) {
    const double waited = std::max(0.0, end - compute_);
    compute_ = std::max(compute_, end);
    return waited;
  }

 private:
  double slowdown_;
  double compute_ = 0, comm_free_ = 0;
  std::vector<std::pair<double, double>> comm_;  // in-flight intervals, in order
};

class Predictor {
 public:
  Predictor(const Module& m, const Mesh& mesh, const PredictOptions& o)
      : module_(m), mesh_(mesh), options_(o), compute_(*mesh.topology(), o.roofline), collectives_(mesh, o.collectives),
        streams_(Slowdown()), narrow_(o.narrow_types.value_or(mesh.topology()->platform() != Platform::kCpu)) {}

  Prediction Run() {
    Walk(*module_.entry());
    out_.step_seconds = streams_.end();
    out_.comm_slowdown = Slowdown();
    if (!narrowed_.empty()) {
      out_.notes.push_back(fmt::format(
          "{} instructions use values XLA CPU widened from {} to f32; they are priced in {}, as a TPU or GPU "
          "compile keeps them", narrowed_.size(), DTypeShortName(narrowed_type_), DTypeShortName(narrowed_type_)));
    }
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

  void Walk(const Computation& c) {
    std::vector<const Instruction*> deferred;  // synchronous collectives run asynchronously (overlap_collectives)
    for (int64_t i = 0; i < c.instruction_count(); ++i) {
      const Instruction& ins = *c.instruction(i);
      for (const Instruction* o : ins.operands()) {
        auto it = std::find(deferred.begin(), deferred.end(), o);
        if (it == deferred.end()) continue;
        Done(*o);
        deferred.erase(it);
      }
      if (options_.overlap_collectives && IsCollective(ins.opcode()) && !IsAsyncCollectiveStart(ins.opcode()) &&
          !IsAsyncCollectiveDone(ins.opcode())) {
        StartCollective(ins, ins);
        deferred.push_back(&ins);
        continue;
      }
      Execute(ins);
    }
    for (const Instruction* d : deferred) Done(*d);
  }

  void Execute(const Instruction& ins) {
    const Opcode op = ins.opcode();
    if (op == Opcode::kWhile) return Loop(ins);
    if (op == Opcode::kCall) return Walk(*ins.called()[0]);
    if (op == Opcode::kConditional) return Walk(*CostliestBranch(ins));
    if (op == Opcode::kAsyncStart && IsCollective(ins.called()[0]->root()->opcode())) return StartCollective(ins, *ins.called()[0]->root());
    if (op == Opcode::kAsyncStart) return Walk(*ins.called()[0]);
    if (IsAsyncCollectiveStart(op)) return StartCollective(ins, ins);
    if (IsAsyncCollectiveDone(op) || op == Opcode::kAsyncDone) return Done(ins);
    if (IsCollective(op)) {
      StartCollective(ins, ins);
      return Done(ins);
    }
    const InstructionCost cost = CostOf(ins, narrow_);
    if (cost.flops == 0 && cost.bytes() == 0) return;
    if (narrow_ && !narrowed_.count(&ins) && CostOf(ins, false).bytes() != cost.bytes()) {
      narrowed_.insert(&ins);
      if (const DType t = NarrowType(ins); t != DType::kF32 && !ins.shape().IsTuple()) narrowed_type_ = t;
    }
    const LocalOpCost t = compute_.Cost(cost.flops, cost.bytes(), cost.dims, PricedType(cost.dtype), options_.speed_factor);
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
    scope_time_[scope.name][cls.name] += end - start;
    Record(ins, start, end, false);
  }

  void Loop(const Instruction& ins) {
    int64_t trips = -1;
    if (auto it = options_.trip_counts.find(&ins); it != options_.trip_counts.end()) trips = it->second;
    if (trips < 0) trips = StaticTripCount(ins);
    if (trips < 0) {
      trips = 1;
      out_.notes.push_back(fmt::format("{}: the trip count of while loop %{} is unknown; counted once", ins.Where(), ins.name()));
    }
    // Loops whose iterations would make more than kMaxUnrolledOps instructions run two iterations and extend the
    // second (every later iteration repeats it: same instructions, same costs) to the trip count.
    const int64_t per_iteration = InstructionsOf(*ins.called()[0]) + InstructionsOf(*ins.called()[1]);
    const bool extend = trips > 2 && static_cast<double>(trips) * static_cast<double>(per_iteration) > kMaxUnrolledOps;
    const int64_t simulated = extend ? 2 : trips;
    Snapshot before;
    for (int64_t t = 0; t < simulated; ++t) {
      if (t == simulated - 1) before = Take();
      Walk(*ins.called()[0]);
      Walk(*ins.called()[1]);
    }
    if (extend) {
      Extend(before, Take(), trips - simulated);
      out_.notes.push_back(fmt::format("{}: while loop %{} ran {} times; 2 were simulated and the second repeated",
                                       ins.Where(), ins.name(), trips));
    }
    Walk(*ins.called()[0]);
  }

  static constexpr double kMaxUnrolledOps = 2e6;

  int64_t InstructionsOf(const Computation& c) {
    auto it = sizes_.find(&c);
    if (it != sizes_.end()) return it->second;
    int64_t n = c.instruction_count();
    for (int64_t i = 0; i < c.instruction_count(); ++i) {
      for (const Computation* callee : c.instruction(i)->called()) {
        if (c.instruction(i)->opcode() != Opcode::kFusion) n += InstructionsOf(*callee);
      }
    }
    return sizes_[&c] = n;
  }

  // What an iteration adds: the clocks, the totals and every group's sums.
  struct Snapshot {
    double compute_clock = 0, comm_free = 0;
    Prediction totals;
  };
  Snapshot Take() const {
    Snapshot s;
    s.compute_clock = streams_.compute_clock();
    s.comm_free = streams_.comm_free();
    s.totals.compute_seconds = out_.compute_seconds;
    s.totals.comm_seconds = out_.comm_seconds;
    s.totals.exposed_comm_seconds = out_.exposed_comm_seconds;
    s.totals.flops = out_.flops;
    s.totals.executed_ops = out_.executed_ops;
    s.totals.by_class = out_.by_class;
    s.totals.by_scope = out_.by_scope;
    return s;
  }
  static void AddGroups(std::vector<OpGroup>& into, const std::vector<OpGroup>& a, const std::vector<OpGroup>& b, double k) {
    for (size_t i = 0; i < into.size(); ++i) {
      const OpGroup zero;
      const OpGroup& x = i < a.size() ? a[i] : zero;
      into[i].count += static_cast<int64_t>(k) * (b[i].count - x.count);
      into[i].compute_seconds += k * (b[i].compute_seconds - x.compute_seconds);
      into[i].comm_seconds += k * (b[i].comm_seconds - x.comm_seconds);
      into[i].exposed_comm_seconds += k * (b[i].exposed_comm_seconds - x.exposed_comm_seconds);
      into[i].flops += k * (b[i].flops - x.flops);
      into[i].bytes += k * (b[i].bytes - x.bytes);
      into[i].message_bytes += k * (b[i].message_bytes - x.message_bytes);
      for (const auto& [link, bytes] : b[i].bytes_sent) {
        const auto it = x.bytes_sent.find(link);
        into[i].bytes_sent[link] += k * (bytes - (it == x.bytes_sent.end() ? 0 : it->second));
      }
    }
  }
  void Extend(const Snapshot& a, const Snapshot& b, int64_t times) {
    const double k = static_cast<double>(times);
    streams_.Shift(k * (b.compute_clock - a.compute_clock), k * (b.comm_free - a.comm_free));
    out_.compute_seconds += k * (b.totals.compute_seconds - a.totals.compute_seconds);
    out_.comm_seconds += k * (b.totals.comm_seconds - a.totals.comm_seconds);
    out_.exposed_comm_seconds += k * (b.totals.exposed_comm_seconds - a.totals.exposed_comm_seconds);
    out_.flops += k * (b.totals.flops - a.totals.flops);
    out_.executed_ops += times * (b.totals.executed_ops - a.totals.executed_ops);
    AddGroups(out_.by_class, a.totals.by_class, b.totals.by_class, k);
    AddGroups(out_.by_scope, a.totals.by_scope, b.totals.by_scope, k);
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

  // The slowest group's cost of collective `c` (cached per instruction).
  const CollectiveCost& PriceCollective(const Instruction& c) {
    auto it = prices_.find(&c);
    if (it != prices_.end()) return it->second;
    CollectiveCost worst;
    const double bytes = MessageBytes(c, narrow_);
    const Opcode op = c.opcode();
    auto consider = [&](const CollectiveCost& cost) {
      if (cost.seconds >= worst.seconds) worst = cost;
    };
    if (op == Opcode::kCollectivePermute || op == Opcode::kCollectivePermuteStart) {
      std::vector<std::pair<int, int>> pair{{0, 1}};
      for (const auto& [s, t] : PairsOf(c, module_.replica_count(), module_.num_partitions())) {
        if (s == t) continue;
        const std::vector<int64_t> group{s, t};
        consider(Cached(CollectiveOp::kPermute, group, bytes, pair));
      }
    } else {
      for (const auto& group : GroupsOf(c, module_.replica_count(), module_.num_partitions())) {
        if (group.size() > 1) consider(Cached(OpOf(op), group, bytes, {}));
      }
    }
    worst.bytes = bytes;
    return prices_.emplace(&c, worst).first->second;
  }

  // CostOfGroup, shared by groups with the same physical span (their members' relative coordinates).
  CollectiveCost Cached(CollectiveOp op, const std::vector<int64_t>& group, double bytes,
                        const std::vector<std::pair<int, int>>& pairs) {
    const GroupSpan span = SpanOfGroup(mesh_, group);
    std::string key = fmt::format("{}|{}|{}", static_cast<int>(op), bytes, span.ToString());
    for (const auto& coords : span.member_coords) key += fmt::format("|{}", fmt::join(coords, ","));
    auto it = span_cache_.find(key);
    if (it == span_cache_.end()) it = span_cache_.emplace(key, collectives_.CostOfGroup(op, group, bytes, pairs)).first;
    return it->second;
  }

  void StartCollective(const Instruction& handle, const Instruction& c) {
    const CollectiveCost& cost = PriceCollective(c);
    const auto [start, end] = streams_.Start(cost.seconds);
    in_flight_[&handle] = end;
    OpGroup& cls = Group(out_.by_class, by_class_, InstructionClass(c));
    OpGroup& scope = Group(out_.by_scope, by_scope_, ScopeOf(c));
    for (OpGroup* g : {&cls, &scope}) {
      g->count += 1;
      g->comm_seconds += end - start;
      g->message_bytes += cost.bytes;
      g->group_size = std::max<int64_t>(g->group_size, cost.group_size);
      g->algorithm = cost.algorithm;
      for (const auto& [link, b] : cost.bytes_sent) g->bytes_sent[link] += b;
    }
    out_.comm_seconds += end - start;
    Record(c, start, end, true);
    pending_[&handle] = {by_class_[cls.name], by_scope_[scope.name], options_.record_events ? out_.events.size() - 1 : SIZE_MAX};
    scope_time_[scope.name][cls.name] += end - start;
  }

  // The compute stream waits for the collective `done` completes: a synchronous collective itself, or the
  // -start (async-start) that -done (async-done, through async-updates) names.
  void Done(const Instruction& done) {
    const Instruction* start = &done;
    if (IsAsyncCollectiveDone(done.opcode()) || done.opcode() == Opcode::kAsyncDone) start = done.operand(0);
    while (start->opcode() == Opcode::kAsyncUpdate) start = start->operand(0);
    auto it = in_flight_.find(start);
    if (it == in_flight_.end()) return;
    const double waited = streams_.Wait(it->second);
    out_.exposed_comm_seconds += waited;
    const Pending& p = pending_[start];
    out_.by_class[p.cls].exposed_comm_seconds += waited;
    out_.by_scope[p.scope].exposed_comm_seconds += waited;
    if (p.event != SIZE_MAX) out_.events[p.event].exposed = waited;
    in_flight_.erase(it);
  }

  void Record(const Instruction& ins, double start, double end, bool collective) {
    ++out_.executed_ops;
    if (options_.record_events) out_.events.push_back(OpEvent{&ins, start, end, collective, 0});
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

  struct Pending {
    size_t cls = 0, scope = 0;  // indices in by_class / by_scope
    size_t event = SIZE_MAX;
  };

  const Module& module_;
  const Mesh& mesh_;
  const PredictOptions& options_;
  ComputeModel compute_;
  CollectiveModel collectives_;
  Streams streams_;
  Prediction out_;
  std::map<std::string, size_t> by_class_, by_scope_;
  std::map<const Instruction*, CollectiveCost> prices_;
  std::map<std::string, CollectiveCost> span_cache_;
  std::map<const Instruction*, double> in_flight_;
  std::map<const Instruction*, Pending> pending_;
  std::map<std::string, std::map<std::string, double>> scope_time_;  // scope -> class -> seconds
  std::map<const Computation*, int64_t> sizes_;
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
  if (mesh.topology() == nullptr) Throw(ErrorCode::kFailedPrecondition, "predicting an HLO module needs a mesh with a topology");
  module.CheckDeviceCount(mesh.size(), "the mesh");
  Predictor p(module.module(), mesh, options);
  Prediction out = p.Run();
  out.memory = module.memory();
  p.NameScopeOps(&out);
  return out;
}

}  // namespace spmdsim::hlo
