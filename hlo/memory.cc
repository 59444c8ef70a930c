#include "hlo/memory.h"

#include <algorithm>
#include <map>
#include <vector>

namespace spmdsim::hlo {
namespace {

// XLA:CPU places every temporary at a 64-byte boundary inside its temp allocation (xla/backends/cpu/alignment.h).
constexpr int64_t kAlignment = 64;
int64_t Aligned(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Bytes of the index tables of a tuple shape: 8 per element of every tuple node (XLA's tuple buffers).
int64_t TupleTableBytes(const Shape& s) {
  if (!s.IsTuple()) return 0;
  int64_t bytes = 8 * static_cast<int64_t>(s.tuple.size());
  for (const Shape& e : s.tuple) bytes += TupleTableBytes(e);
  return bytes;
}

void ArrayLeaves(const Shape& s, std::vector<int64_t>* bytes) {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple) ArrayLeaves(e, bytes);
  } else if (s.IsArray()) {
    bytes->push_back(s.ByteSize());
  }
}

void ArrayShapes(const Shape& s, std::vector<const Shape*>* shapes) {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple) ArrayShapes(e, shapes);
  } else if (s.IsArray()) {
    shapes->push_back(&s);
  }
}

// Same element type, dimensions and layout (XLA's ShapeUtil::Equal, which buffer sharing requires).
bool SameShape(const Shape* a, const Shape* b) {
  return a != nullptr && b != nullptr && a->dtype == b->dtype && a->dims == b->dims &&
         a->MinorToMajor() == b->MinorToMajor();
}

enum class BufferKind : uint8_t { kTemp, kArgument, kConstant, kCaller };

// An HloBuffer: the values that must share memory (an instruction's array and its views).
struct Buffer {
  int64_t bytes = 0;
  const Shape* shape = nullptr;        // its array's shape
  BufferKind kind = BufferKind::kTemp;
  const Instruction* maker = nullptr;  // the instruction that allocated it
  int64_t start = 0;                   // its index in the schedule
  int64_t end = -1;                    // the last instruction that uses it or a view of it
  bool output = false;                 // reaches the computation's root: the caller (or the output) holds it
  bool in_output = false;              // placed in an output's allocation (see PlaceInOutputs)
  int shares = -1;                     // the dying operand buffer whose heap slot it may take over
};

// Views: bitcast, get-tuple-element, tuple, opt-barrier, while (its state is its operand's buffers), and the halves
// of async pairs that only pass their start's buffers on.
bool IsView(Opcode op) {
  return op == Opcode::kBitcast || op == Opcode::kGetTupleElement || op == Opcode::kTuple ||
         op == Opcode::kOptimizationBarrier || op == Opcode::kAddDependency || op == Opcode::kDomain ||
         op == Opcode::kWhile || op == Opcode::kAllReduceDone || op == Opcode::kAllGatherDone ||
         op == Opcode::kCollectivePermuteDone || op == Opcode::kAsyncDone || op == Opcode::kAsyncUpdate ||
         op == Opcode::kCopyDone;
}

// In-place ops: a dynamic-update-slice (or a fusion whose root is one) writes into its first operand's buffer.
bool IsInPlace(const Instruction& ins) {
  return ins.opcode() == Opcode::kDynamicUpdateSlice ||
         (ins.opcode() == Opcode::kFusion && ins.called()[0]->root()->opcode() == Opcode::kDynamicUpdateSlice);
}

bool IsElementwise(const Instruction& ins) {
  const Opcode op = ins.opcode();
  return IsElementwiseUnary(op) || IsElementwiseBinary(op) || op == Opcode::kSelect || op == Opcode::kClamp ||
         op == Opcode::kConvert || op == Opcode::kCopy;
}

// Whether every use of `value` inside its computation, and of what those uses compute, is elementwise (or a
// tuple): XLA's AreTransitiveUsesElementwiseOrTuple.
bool UsesAreElementwise(const Instruction& value) {
  const Computation& c = *value.parent();
  std::vector<const Instruction*> todo{&value};
  std::vector<bool> seen(static_cast<size_t>(c.instruction_count()), false);
  while (!todo.empty()) {
    const Instruction* v = todo.back();
    todo.pop_back();
    for (int64_t i = v->index() + 1; i < c.instruction_count(); ++i) {
      const Instruction& u = *c.instruction(i);
      if (std::find(u.operands().begin(), u.operands().end(), v) == u.operands().end()) continue;
      if (u.opcode() == Opcode::kTuple) continue;
      if (!IsElementwise(u)) return false;
      if (!seen[i]) {
        seen[i] = true;
        todo.push_back(&u);
      }
    }
  }
  return true;
}

// Whether `user` may write its result over operand `operand`'s memory (XLA's CanShareOperandBufferWithUser for
// elementwise ops and loop fusions; shapes are compared by the caller).
bool CanShareOperand(const Instruction& user, const Instruction& operand) {
  if (operand.opcode() == Opcode::kConstant) return false;
  if (user.opcode() == Opcode::kFusion) {
    if (user.attrs().fusion_kind != "kLoop" && user.attrs().fusion_kind != "kInput") return false;
    const Computation& fused = *user.called()[0];
    for (int64_t k = 0; k < user.operand_count(); ++k) {
      if (user.operand(k) == &operand && !UsesAreElementwise(*fused.parameter(k))) return false;
    }
    return true;
  }
  return IsElementwise(user);
}

// Whether `ins` allocates the index table of its tuple result (views share their operand's).
bool HasOwnTable(const Instruction& ins) {
  const Opcode op = ins.opcode();
  return ins.shape().IsTuple() && op != Opcode::kGetTupleElement && op != Opcode::kWhile &&
         op != Opcode::kParameter && op != Opcode::kOptimizationBarrier && op != Opcode::kAddDependency &&
         op != Opcode::kAsyncUpdate && op != Opcode::kAsyncDone && op != Opcode::kDomain;
}

// Buffer liveness over one computation.
class Liveness {
 public:
  // The peak of `c`'s temporaries, the computation's own parameters and root excluded (its caller holds
  // them); for the entry, parameters are arguments and the root's buffers are outputs.
  int64_t Peak(const Computation& c, bool entry, MemoryEstimate* estimate) {
    const int64_t n = c.instruction_count();
    leaves_.assign(static_cast<size_t>(n), {});
    buffers_.clear();
    last_use_.assign(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) last_use_[i] = i;
    for (int64_t i = 0; i < n; ++i) {
      for (const Instruction* o : c.instruction(i)->operands()) last_use_[o->index()] = std::max(last_use_[o->index()], i);
    }
    last_use_[c.root()->index()] = n;
    for (int64_t i = 0; i < n; ++i) Define(*c.instruction(i), entry);
    for (int b : leaves_[c.root()->index()]) buffers_[b].output = true;
    for (int64_t i = 0; i < n; ++i) FindSharing(*c.instruction(i));
    if (entry) PlaceInOutputs(c);
    if (estimate != nullptr) Totals(c, estimate);
    return Walk(c, estimate);
  }

 private:
  int NewBuffer(const Instruction& maker, const Shape* shape, BufferKind kind) {
    Buffer b;
    b.bytes = shape->ByteSize();
    b.shape = shape;
    b.kind = kind;
    b.maker = &maker;
    b.start = maker.index();
    buffers_.push_back(b);
    return static_cast<int>(buffers_.size() - 1);
  }

  std::vector<int> OperandLeaves(const Instruction& ins) const {
    std::vector<int> out;
    for (const Instruction* o : ins.operands()) out.insert(out.end(), leaves_[o->index()].begin(), leaves_[o->index()].end());
    return out;
  }

  void Define(const Instruction& ins, bool entry) {
    std::vector<int>& out = leaves_[ins.index()];
    const Opcode op = ins.opcode();
    std::vector<const Shape*> shapes;
    ArrayShapes(ins.shape(), &shapes);
    if (op == Opcode::kParameter || op == Opcode::kConstant) {
      const BufferKind kind = op == Opcode::kConstant ? BufferKind::kConstant : entry ? BufferKind::kArgument : BufferKind::kCaller;
      for (const Shape* b : shapes) out.push_back(NewBuffer(ins, b, kind));
    } else if (op == Opcode::kGetTupleElement) {
      out = Element(ins.operand(0)->shape(), leaves_[ins.operand(0)->index()], ins.attrs().index);
    } else if (op == Opcode::kAllGatherDone || op == Opcode::kCollectivePermuteDone || op == Opcode::kAsyncDone) {
      out = Element(ins.operand(0)->shape(), leaves_[ins.operand(0)->index()], 1);
    } else if (op == Opcode::kAddDependency) {
      out = leaves_[ins.operand(0)->index()];
    } else if (IsView(op)) {
      out = OperandLeaves(ins);
    } else if (op == Opcode::kAllGatherStart || op == Opcode::kCollectivePermuteStart || op == Opcode::kAsyncStart) {
      out = OperandLeaves(ins);  // (operands' buffers, result, contexts)
      for (size_t k = out.size(); k < shapes.size(); ++k) out.push_back(NewBuffer(ins, shapes[k], BufferKind::kTemp));
    } else if (IsInPlace(ins) && shapes.size() == 1 && buffers_[leaves_[ins.operand(0)->index()][0]].kind == BufferKind::kTemp) {
      out.push_back(leaves_[ins.operand(0)->index()][0]);
    } else {
      for (const Shape* b : shapes) out.push_back(NewBuffer(ins, b, BufferKind::kTemp));
    }
    for (int b : out) buffers_[b].end = std::max(buffers_[b].end, last_use_[ins.index()]);
  }

  // A new single-array buffer of an elementwise op may take the heap slot of an operand buffer of the same size
  // that dies here (is used by nothing later).
  void FindSharing(const Instruction& ins) {
    const std::vector<int>& out = leaves_[ins.index()];
    if (out.size() != 1 || buffers_[out[0]].maker != &ins) return;
    for (const Instruction* o : ins.operands()) {
      const std::vector<int>& src = leaves_[o->index()];
      if (src.size() != 1 || src[0] == out[0] || !CanShareOperand(ins, *o)) continue;
      const Buffer& b = buffers_[src[0]];
      if (b.kind == BufferKind::kTemp && !b.output && SameShape(b.shape, buffers_[out[0]].shape) && b.end == ins.index()) {
        buffers_[out[0]].shares = src[0];
        return;
      }
    }
  }

  // The leaves of element `index` of a tuple shape whose leaves are `leaves`.
  static std::vector<int> Element(const Shape& tuple, const std::vector<int>& leaves, int64_t index) {
    if (!tuple.IsTuple()) return leaves;
    size_t first = 0;
    for (int64_t i = 0; i < index; ++i) {
      std::vector<int64_t> bytes;
      ArrayLeaves(tuple.tuple[i], &bytes);
      first += bytes.size();
    }
    std::vector<int64_t> bytes;
    ArrayLeaves(tuple.tuple[index], &bytes);
    if (first + bytes.size() > leaves.size()) return {};
    return std::vector<int>(leaves.begin() + first, leaves.begin() + first + bytes.size());
  }

  // XLA's BufferAssigner (xla/service/buffer_assignment.cc, AssignSingleHloBuffer) gives each output its own
  // allocation, then takes the temporaries largest first and puts each into an existing allocation whose
  // buffers it does not overlap in time (its operands' allocations first, then the smallest); only the rest go
  // to the heap-packed temp allocation.
  void PlaceInOutputs(const Computation& c) {
    struct Allocation {
      int64_t bytes = 0;
      std::vector<int> buffers;  // placed in it
    };
    std::vector<Allocation> allocations;
    std::vector<int> allocation_of(buffers_.size(), -1);
    std::vector<int> order;  // outputs and temporaries, largest first, outputs first among equals
    for (size_t b = 0; b < buffers_.size(); ++b) {
      if (buffers_[b].kind == BufferKind::kTemp) order.push_back(static_cast<int>(b));
    }
    const std::vector<int64_t> post = PostOrder(c);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      if (buffers_[x].bytes != buffers_[y].bytes) return buffers_[x].bytes > buffers_[y].bytes;
      if (buffers_[x].output != buffers_[y].output) return buffers_[x].output;
      return post[buffers_[x].maker->index()] < post[buffers_[y].maker->index()];
    });
    std::vector<int64_t> ends(buffers_.size());
    for (size_t b = 0; b < buffers_.size(); ++b) ends[b] = buffers_[b].output ? c.instruction_count() : buffers_[b].end;
    // Two buffers may share an allocation when their live ranges are disjoint, or when one ends where the other
    // starts and the later one's instruction can write over it (XLA's LiveRangeInterferes).
    auto disjoint = [&](int x, int y) {
      const Buffer& a = buffers_[x];
      const Buffer& b = buffers_[y];
      if (ends[x] < b.start || ends[y] < a.start) return true;
      if (ends[x] == b.start) return TakesOver(b, x);
      if (ends[y] == a.start) return TakesOver(a, y);
      return false;
    };
    auto fits = [&](int t, const Allocation& a) {
      const Buffer& buffer = buffers_[t];
      if (buffer.bytes > a.bytes || (buffer.output && buffer.bytes != a.bytes)) return false;
      for (int other : a.buffers) {
        if (!disjoint(t, other)) return false;
      }
      return true;
    };
    for (int t : order) {
      Buffer& buffer = buffers_[t];
      std::vector<int> candidates;
      for (const Instruction* o : buffer.maker->operands()) {
        for (int ob : leaves_[o->index()]) {
          if (allocation_of[ob] >= 0) candidates.push_back(allocation_of[ob]);
        }
      }
      for (int k = static_cast<int>(allocations.size()) - 1; k >= 0; --k) candidates.push_back(k);
      for (int k : candidates) {
        if (!fits(t, allocations[k])) continue;
        allocations[k].buffers.push_back(t);
        allocation_of[t] = k;
        break;
      }
      if (allocation_of[t] < 0 && buffer.output) {  // an output gets an allocation of its own
        allocation_of[t] = static_cast<int>(allocations.size());
        allocations.push_back(Allocation{buffer.bytes, {t}});
      }
      buffer.in_output = allocation_of[t] >= 0 && !buffer.output;
    }
  }

  // Each instruction's position in the computation's post order (XLA's MakeInstructionPostOrder: operands first,
  // depth first from the root; instructions the root does not reach after, in schedule order).
  static std::vector<int64_t> PostOrder(const Computation& c) {
    const int64_t n = c.instruction_count();
    std::vector<int64_t> position(static_cast<size_t>(n), -1);
    int64_t next = 0;
    std::vector<std::pair<const Instruction*, int64_t>> stack{{c.root(), 0}};
    std::vector<bool> entered(static_cast<size_t>(n), false);
    entered[c.root()->index()] = true;
    while (!stack.empty()) {
      auto& [ins, k] = stack.back();
      if (k < ins->operand_count()) {
        const Instruction* o = ins->operand(k++);
        if (!entered[o->index()]) {
          entered[o->index()] = true;
          stack.emplace_back(o, 0);
        }
        continue;
      }
      position[ins->index()] = next++;
      stack.pop_back();
    }
    for (int64_t i = 0; i < n; ++i) {
      if (position[i] < 0) position[i] = next++;
    }
    return position;
  }

  // Whether buffer `later`'s instruction can write its result over buffer `earlier`, which it reads last.
  bool TakesOver(const Buffer& later, int earlier) const {
    if (later.maker == nullptr || !SameShape(later.shape, buffers_[earlier].shape)) return false;
    for (const Instruction* o : later.maker->operands()) {
      const std::vector<int>& src = leaves_[o->index()];
      if (src.size() == 1 && src[0] == earlier && CanShareOperand(*later.maker, *o)) return true;
    }
    return false;
  }

  void Totals(const Computation& c, MemoryEstimate* e) const {
    for (const Buffer& b : buffers_) {
      if (b.kind == BufferKind::kArgument) e->argument_bytes += b.bytes;
    }
    std::vector<int64_t> out;
    ArrayLeaves(c.root()->shape(), &out);
    for (int64_t b : out) e->output_bytes += b;
    e->output_bytes += TupleTableBytes(c.root()->shape());
  }

  bool InHeap(const Buffer& b) const { return b.kind == BufferKind::kTemp && !b.output && !b.in_output; }

  // The heap slot of each buffer (a buffer that takes over a dying operand's slot shares it) and each slot's end.
  void Slots(std::vector<int>* slot, std::vector<int64_t>* slot_end, std::vector<int64_t>* slot_bytes) const {
    slot->assign(buffers_.size(), -1);
    for (size_t b = 0; b < buffers_.size(); ++b) {
      if (!InHeap(buffers_[b])) continue;
      const int from = buffers_[b].shares;
      const bool take_over = from >= 0 && InHeap(buffers_[from]) && (*slot)[from] >= 0;
      (*slot)[b] = take_over ? (*slot)[from] : static_cast<int>(slot_end->size());
      if (!take_over) {
        slot_end->push_back(buffers_[b].end);
        slot_bytes->push_back(Aligned(buffers_[b].bytes));
      }
      (*slot_end)[(*slot)[b]] = std::max((*slot_end)[(*slot)[b]], buffers_[b].end);
    }
  }

  // The largest slots live now, for MemoryEstimate::live_at_peak.
  std::vector<std::pair<std::string, int64_t>> Largest(const std::vector<int>& slot, const std::vector<bool>& live) const {
    std::vector<std::pair<std::string, int64_t>> out;
    std::vector<bool> seen(live.size(), false);
    for (size_t b = 0; b < buffers_.size(); ++b) {
      if (slot[b] < 0 || !live[slot[b]] || seen[slot[b]]) continue;
      seen[slot[b]] = true;
      out.emplace_back("%" + buffers_[b].maker->name(), buffers_[b].bytes);
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    if (out.size() > 8) out.resize(8);
    return out;
  }

  // The heap's live bytes along the schedule (tuple tables included), with each called computation's own peak
  // added where it runs.
  int64_t Walk(const Computation& c, MemoryEstimate* estimate) {
    std::vector<int> slot;
    std::vector<int64_t> slot_end, slot_bytes;
    Slots(&slot, &slot_end, &slot_bytes);
    const int64_t n = c.instruction_count();
    std::vector<std::vector<int>> dying(static_cast<size_t>(n) + 1);
    for (size_t s = 0; s < slot_end.size(); ++s) dying[std::clamp<int64_t>(slot_end[s], 0, n)].push_back(static_cast<int>(s));
    std::vector<int64_t> table_ends(static_cast<size_t>(n) + 1, 0);
    std::vector<bool> live(slot_end.size(), false);
    int64_t now = 0, peak = 0;
    for (int64_t i = 0; i < n; ++i) {
      const Instruction& ins = *c.instruction(i);
      for (int b : leaves_[i]) {
        if (slot[b] >= 0 && !live[slot[b]]) {
          live[slot[b]] = true;
          now += slot_bytes[slot[b]];
        }
      }
      const int64_t table = HasOwnTable(ins) && &ins != c.root() ? Aligned(8 * static_cast<int64_t>(ins.shape().tuple.size())) : 0;
      now += table;
      table_ends[std::min<int64_t>(last_use_[i], n)] += table;
      const int64_t here = now + CalleePeak(ins);
      if (here > peak) {
        peak = here;
        if (estimate != nullptr) {
          estimate->peak_at = "%" + ins.name();
          estimate->live_at_peak = Largest(slot, live);
        }
      }
      for (int s : dying[i]) {
        if (live[s]) now -= slot_bytes[s];
        live[s] = false;
      }
      now -= table_ends[i];
    }
    return peak;
  }

  int64_t CalleePeak(const Instruction& ins) {
    const Opcode op = ins.opcode();
    if (op != Opcode::kWhile && op != Opcode::kCall && op != Opcode::kConditional) return 0;
    int64_t most = 0;
    for (const Computation* callee : ins.called()) {
      auto it = cache_.find(callee);
      if (it == cache_.end()) {
        Liveness inner;
        inner.cache_ = cache_;
        it = cache_.emplace(callee, inner.Peak(*callee, false, nullptr)).first;
      }
      most = std::max(most, it->second);  // a loop's condition and body, or the branches, never coexist
    }
    return most;
  }

  std::vector<std::vector<int>> leaves_;
  std::vector<Buffer> buffers_;
  std::vector<int64_t> last_use_;  // per instruction: the last use of its value
  std::map<const Computation*, int64_t> cache_;
};

}  // namespace

MemoryEstimate EstimateMemory(const Module& module) {
  MemoryEstimate e;
  Liveness liveness;
  e.temp_bytes = liveness.Peak(*module.entry(), true, &e);
  return e;
}

}  // namespace spmdsim::hlo
