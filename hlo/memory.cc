#include "hlo/memory.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hlo/compiled_for.h"

namespace spmdsim::hlo {
namespace {

// The boundary each backend places temporaries at inside its temp allocation: XLA CPU 64 bytes
// (xla/backends/cpu/alignment.h); XLA GPU 128 (its allocator's buffer alignment); TPU 512 (its buffer assignment
// gives a scalar or a tuple's index table 512 bytes: the memory-usage report of an --xla_dump_to compile).
int64_t AlignmentFor(CompiledFor compiled_for) {
  switch (compiled_for) {
    case CompiledFor::kTpu: return 512;
    case CompiledFor::kGpu: return 128;
    default: return 64;
  }
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? INT64_MAX : out;
}

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
    bytes->push_back(s.PhysicalByteSize());
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

// kAliased: an entry output XLA writes into a donated argument's buffer (input_output_alias): neither a
// temporary nor an output allocation of its own. kOnChip: a value in a memory space other than the default
// (TPU: S(1) VMEM, S(2) sync flags, ...): not device memory (HBM), counted nowhere.
enum class BufferKind : uint8_t { kTemp, kArgument, kConstant, kCaller, kAliased, kOnChip };

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
         op == Opcode::kCollectivePermuteDone || op == Opcode::kAsyncDone || op == Opcode::kAsyncUpdate;
}

// The leaf of `shape` that output index `index` names (a path into nested tuples), or -1.
int64_t LeafOf(const Shape& shape, const std::vector<int64_t>& index) {
  int64_t leaf = 0;
  const Shape* s = &shape;
  for (int64_t k : index) {
    if (!s->IsTuple() || k < 0 || k >= static_cast<int64_t>(s->tuple.size())) return -1;
    for (int64_t j = 0; j < k; ++j) {
      std::vector<int64_t> bytes;
      ArrayLeaves(s->tuple[static_cast<size_t>(j)], &bytes);
      leaf += static_cast<int64_t>(bytes.size());
    }
    s = &s->tuple[static_cast<size_t>(k)];
  }
  return s->IsArray() ? leaf : -1;
}

// The operand whose buffer output leaf `leaf` of `ins` must be written into (XLA's in-place ops, its
// HloDataflowAnalysis::GetInPlaceInputOutputPairs): a dynamic-update-slice's operand 0, a scatter's inputs, and a
// fusion whose root (through bitcasts; each element of a tuple root) is one of those over a fused parameter. -1 when
// none.
int64_t InPlaceOperand(const Instruction& ins, size_t leaf) {
  const Opcode op = ins.opcode();
  if (op == Opcode::kDynamicUpdateSlice) return leaf == 0 ? 0 : -1;
  if (op == Opcode::kScatter)
    return static_cast<int64_t>(leaf) < (ins.operand_count() - 1) / 2 ? static_cast<int64_t>(leaf) : -1;
  if (op != Opcode::kFusion) return -1;
  const Instruction* root = ins.called()[0]->root();
  if (root->opcode() == Opcode::kTuple) {
    if (leaf >= static_cast<size_t>(root->operand_count())) return -1;
    root = root->operand(static_cast<int64_t>(leaf));
    leaf = 0;
  }
  for (int i = 0; i < 4 && root->opcode() == Opcode::kBitcast; ++i) root = root->operand(0);
  const Opcode r = root->opcode();
  const bool dus = r == Opcode::kDynamicUpdateSlice && leaf == 0;
  const bool scatter = r == Opcode::kScatter && static_cast<int64_t>(leaf) < (root->operand_count() - 1) / 2;
  if (!dus && !scatter) return -1;
  const Instruction* target = root->operand(dus ? 0 : static_cast<int64_t>(leaf));
  for (int i = 0; i < 4 && target->opcode() == Opcode::kBitcast; ++i) target = target->operand(0);
  return target->opcode() == Opcode::kParameter ? target->attrs().parameter_number : -1;
}

// The entry's outputs written into donated arguments (input_output_alias): (output leaf, parameter number), the
// output leaf the index of the aliased array among the root's array leaves.
std::vector<std::pair<int64_t, int64_t>> EntryAliases(const Module& m) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const InputOutputAlias& a : m.input_output_aliases()) {
    const int64_t leaf = LeafOf(m.entry()->root()->shape(), a.output_index);
    if (leaf >= 0 && a.parameter_index.empty()) out.emplace_back(leaf, a.parameter_number);
  }
  return out;
}

bool IsElementwise(const Instruction& ins) {
  const Opcode op = ins.opcode();
  return IsElementwiseUnary(op) || IsElementwiseBinary(op) || op == Opcode::kSelect || op == Opcode::kClamp ||
         op == Opcode::kConvert || op == Opcode::kCopy;
}

// Whether every use of `value` inside its computation, and of what those uses compute, is elementwise (or a
// tuple): XLA's AreTransitiveUsesElementwiseOrTuple. Follows users(), so each value is visited once.
bool UsesAreElementwise(const Instruction& value) {
  std::vector<const Instruction*> todo{&value};
  std::vector<const Instruction*> seen{&value};
  while (!todo.empty()) {
    const Instruction* v = todo.back();
    todo.pop_back();
    for (const Instruction* u : v->users()) {
      if (u->opcode() == Opcode::kTuple) continue;
      if (!IsElementwise(*u)) return false;
      if (std::find(seen.begin(), seen.end(), u) == seen.end()) {
        seen.push_back(u);
        todo.push_back(u);
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
  Liveness(const std::unordered_map<const Computation*, int64_t>* callee_peaks, CompiledFor compiled_for)
      : callee_peaks_(callee_peaks), alignment_(AlignmentFor(compiled_for)),
        in_place_all_reduce_(compiled_for == CompiledFor::kTpu) {}

  // The peak of `c`'s temporaries, the computation's own parameters and root excluded (its caller holds
  // them); for the entry, parameters are arguments and the root's buffers are outputs.
  int64_t Peak(const Computation& c, bool entry, MemoryEstimate* estimate) {
    const int64_t n = c.instruction_count();
    leaves_.assign(static_cast<size_t>(n), {});
    buffers_.clear();
    last_use_.assign(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) last_use_[i] = i;
    for (int64_t i = 0; i < n; ++i) {
      for (const Instruction* o : c.instruction(i)->operands())
        last_use_[o->index()] = std::max(last_use_[o->index()], i);
    }
    last_use_[c.root()->index()] = n;
    for (int64_t i = 0; i < n; ++i) Define(*c.instruction(i), entry);
    for (int b : leaves_[c.root()->index()]) buffers_[b].output = true;
    if (entry) MarkAliased(c, estimate);
    for (int64_t i = 0; i < n; ++i) FindSharing(*c.instruction(i));
    if (entry) PlaceInOutputs(c);
    if (estimate != nullptr) Totals(c, estimate);
    return Walk(c, estimate);
  }

 private:
  int NewBuffer(const Instruction& maker, const Shape* shape, BufferKind kind) {
    Buffer b;
    b.bytes = shape->PhysicalByteSize();  // tiled layouts (TPU) pad their minor dimensions
    if (shape->memory_space != 0 && kind != BufferKind::kArgument) kind = BufferKind::kOnChip;
    b.shape = shape;
    b.kind = kind;
    b.maker = &maker;
    b.start = maker.index();
    buffers_.push_back(b);
    return static_cast<int>(buffers_.size() - 1);
  }

  std::vector<int> OperandLeaves(const Instruction& ins) const {
    std::vector<int> out;
    for (const Instruction* o : ins.operands())
      out.insert(out.end(), leaves_[o->index()].begin(), leaves_[o->index()].end());
    return out;
  }

  void Define(const Instruction& ins, bool entry) {
    std::vector<int>& out = leaves_[ins.index()];
    const Opcode op = ins.opcode();
    std::vector<const Shape*> shapes;
    ArrayShapes(ins.shape(), &shapes);
    if (op == Opcode::kParameter || op == Opcode::kConstant) {
      const BufferKind kind = op == Opcode::kConstant ? BufferKind::kConstant
                              : entry                 ? BufferKind::kArgument
                                                      : BufferKind::kCaller;
      for (const Shape* b : shapes) out.push_back(NewBuffer(ins, b, kind));
    } else if (op == Opcode::kGetTupleElement) {
      out = Element(ins.operand(0)->shape(), leaves_[ins.operand(0)->index()], ins.attrs().index);
    } else if (op == Opcode::kAllGatherDone || op == Opcode::kCollectivePermuteDone || op == Opcode::kAsyncDone) {
      out = Element(ins.operand(0)->shape(), leaves_[ins.operand(0)->index()], 1);
    } else if (op == Opcode::kCopyDone || op == Opcode::kRecvDone) {
      // copy-start is (destination, source, context); recv is (data, context, token): the -done is element 0.
      out = Element(ins.operand(0)->shape(), leaves_[ins.operand(0)->index()], 0);
    } else if (op == Opcode::kSendDone) {
      // a token
    } else if (op == Opcode::kCopyStart || op == Opcode::kSend) {
      // copy-start: (destination, source = the operand, context); send: (the operand, context, token).
      const std::vector<int>& source = leaves_[ins.operand(0)->index()];
      for (size_t k = 0; k < shapes.size(); ++k) {
        const bool is_source = (op == Opcode::kCopyStart ? k == 1 : k == 0) && source.size() == 1;
        out.push_back(is_source ? source[0] : NewBuffer(ins, shapes[k], BufferKind::kTemp));
      }
    } else if (op == Opcode::kAddDependency) {
      out = leaves_[ins.operand(0)->index()];
    } else if (IsView(op)) {
      out = OperandLeaves(ins);
    } else if (op == Opcode::kAllGatherStart || op == Opcode::kCollectivePermuteStart || op == Opcode::kAsyncStart) {
      out = OperandLeaves(ins);  // (operands' buffers, result, contexts)
      for (size_t k = out.size(); k < shapes.size(); ++k) out.push_back(NewBuffer(ins, shapes[k], BufferKind::kTemp));
    } else {
      for (size_t k = 0; k < shapes.size(); ++k) {
        const int reused = ReusedOperandBuffer(ins, k, shapes[k]);
        out.push_back(reused >= 0 ? reused : NewBuffer(ins, shapes[k], BufferKind::kTemp));
      }
    }
    for (int b : out) buffers_[b].end = std::max(buffers_[b].end, last_use_[ins.index()]);
  }

  // The operand buffer output leaf `k` of `ins` is written into, or -1: an in-place op's (a dynamic-update-slice,
  // a scatter, such fusions: XLA's copy insertion leaves them a temporary of their own to update), or a sort's
  // operand k when that operand has no other user (XLA's CanShareOperandBufferWithUser for sort).
  int ReusedOperandBuffer(const Instruction& ins, size_t k, const Shape* shape) const {
    // output_to_operand_aliasing (fusions, custom-calls: TPU's async collective fusions) names the buffer outright.
    for (const OutputOperandAlias& a : ins.attrs().output_to_operand_aliasing) {
      if (LeafOf(ins.shape(), a.output_index) != static_cast<int64_t>(k) || a.operand_number >= ins.operand_count())
        continue;
      const Instruction& o = *ins.operand(a.operand_number);
      const int64_t leaf = LeafOf(o.shape(), a.operand_index);
      const std::vector<int>& src = leaves_[o.index()];
      if (leaf >= 0 && leaf < static_cast<int64_t>(src.size())) return src[static_cast<size_t>(leaf)];
    }
    int64_t operand = InPlaceOperand(ins, k);
    // A sort's output k may take its operand k when nothing else uses it (XLA's CanShareOperandBufferWithUser); on a
    // TPU an all-reduce's output k may take its operand k's buffer when that dies there (reduced in place).
    const bool shares_kth = (ins.opcode() == Opcode::kSort && ins.operand(static_cast<int64_t>(std::min<size_t>(
                                 k, static_cast<size_t>(ins.operand_count() - 1))))->users().size() == 1) ||
                            (in_place_all_reduce_ && ins.opcode() == Opcode::kAllReduce);
    const bool sort = operand < 0 && shares_kth && static_cast<int64_t>(k) < ins.operand_count();
    if (sort) operand = static_cast<int64_t>(k);
    if (operand < 0 || operand >= ins.operand_count()) return -1;
    const std::vector<int>& src = leaves_[ins.operand(operand)->index()];
    if (src.size() != 1) return -1;
    const Buffer& b = buffers_[src[0]];
    if (b.kind != BufferKind::kTemp || !SameShape(b.shape, shape)) return -1;
    if (sort && b.end > ins.index()) return -1;
    return src[0];
  }

  // CanShareOperand, once per (user, operand).
  bool CanShare(const Instruction& user, const Instruction& operand) const {
    const auto key = std::make_pair(&user, &operand);
    auto it = can_share_.find(key);
    if (it == can_share_.end()) it = can_share_.emplace(key, CanShareOperand(user, operand)).first;
    return it->second;
  }

  // Outputs written into donated arguments (input_output_alias) live in the argument's allocation: not
  // temporaries, not output allocations; their bytes are the estimate's alias_bytes.
  void MarkAliased(const Computation& entry, MemoryEstimate* estimate) {
    const std::vector<int>& out = leaves_[entry.root()->index()];
    for (const auto& [leaf, param] : EntryAliases(*entry.module())) {
      if (leaf < 0 || leaf >= static_cast<int64_t>(out.size()) || param < 0 || param >= entry.parameter_count())
        continue;
      const int output = out[static_cast<size_t>(leaf)];
      Buffer& b = buffers_[output];
      if (estimate != nullptr) estimate->alias_bytes = SaturatingAdd(estimate->alias_bytes, b.bytes);
      if (b.kind != BufferKind::kTemp) continue;
      b.kind = BufferKind::kAliased;
      const std::vector<int>& argument = leaves_[entry.parameter(param)->index()];
      if (argument.size() != 1) continue;
      buffers_[argument[0]].start = 0;  // an argument is live from the start
      aliased_.emplace_back(argument[0], output);
    }
  }

  // A new single-array buffer of an elementwise op may take the heap slot of an operand buffer of the same size
  // that dies here (is used by nothing later).
  void FindSharing(const Instruction& ins) {
    const std::vector<int>& out = leaves_[ins.index()];
    if (out.size() != 1 || buffers_[out[0]].maker != &ins) return;
    for (const Instruction* o : ins.operands()) {
      const std::vector<int>& src = leaves_[o->index()];
      if (src.size() != 1 || src[0] == out[0] || !CanShare(ins, *o)) continue;
      const Buffer& b = buffers_[src[0]];
      if (b.kind == BufferKind::kTemp && !b.output && SameShape(b.shape, buffers_[out[0]].shape) &&
          b.end == ins.index()) {
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
      // The buffers placed in it by (start, buffer): their live ranges never overlap (they may touch), so a new
      // range is checked against its neighbours only.
      std::map<std::pair<int64_t, int>, int64_t> ranges;  // -> end
    };
    std::vector<Allocation> allocations;
    std::vector<int> allocation_of(buffers_.size(), -1);
    std::vector<int64_t> ends(buffers_.size());
    for (size_t b = 0; b < buffers_.size(); ++b) ends[b] = buffers_[b].output ? c.instruction_count() : buffers_[b].end;
    auto occupy = [&](Allocation& a, int b) { a.ranges.emplace(std::make_pair(buffers_[b].start, b), ends[b]); };
    // A donated argument's allocation holds the argument until its last use and the output written into it from
    // where that output is made; temporaries may use it in between (as an output's allocation).
    for (const auto& [argument, output] : aliased_) {
      allocation_of[argument] = allocation_of[output] = static_cast<int>(allocations.size());
      allocations.push_back(Allocation{buffers_[output].bytes, {}});
      occupy(allocations.back(), argument);
      occupy(allocations.back(), output);
    }
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
    // The ranges that can meet [start, end] are those starting at or before `end`, walked back until one ends
    // before `start` (ranges in an allocation are disjoint: the earlier ones end earlier).
    auto fits = [&](int t, const Allocation& a) {
      const Buffer& buffer = buffers_[t];
      if (buffer.bytes > a.bytes || (buffer.output && buffer.bytes != a.bytes)) return false;
      auto it = a.ranges.upper_bound(std::make_pair(ends[t], INT32_MAX));
      while (it != a.ranges.begin()) {
        --it;
        if (it->second < buffer.start) break;
        if (!disjoint(t, it->first.second)) return false;
      }
      return true;
    };
    auto try_place = [&](int t, int k) {
      if (allocation_of[t] >= 0 || !fits(t, allocations[k])) return;
      occupy(allocations[k], t);
      allocation_of[t] = k;
    };
    for (int t : order) {
      Buffer& buffer = buffers_[t];
      // Its operands' allocations first, then the newest first (XLA's order of candidates).
      for (const Instruction* o : buffer.maker->operands()) {
        for (int ob : leaves_[o->index()]) {
          if (allocation_of[ob] >= 0) try_place(t, allocation_of[ob]);
        }
      }
      for (int k = static_cast<int>(allocations.size()) - 1; k >= 0 && allocation_of[t] < 0; --k) try_place(t, k);
      if (allocation_of[t] < 0 && buffer.output) {  // an output gets an allocation of its own
        allocation_of[t] = static_cast<int>(allocations.size());
        allocations.push_back(Allocation{buffer.bytes, {}});
        occupy(allocations.back(), t);
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
      if (src.size() == 1 && src[0] == earlier && CanShare(*later.maker, *o)) return true;
    }
    return false;
  }

  void Totals(const Computation& c, MemoryEstimate* e) const {
    for (const Buffer& b : buffers_) {
      if (b.kind == BufferKind::kArgument) e->argument_bytes = SaturatingAdd(e->argument_bytes, b.bytes);
    }
    std::vector<int64_t> out;
    ArrayLeaves(c.root()->shape(), &out);
    for (int64_t b : out) e->output_bytes = SaturatingAdd(e->output_bytes, b);
    // A TPU gives the output tuple's index table an allocation of its own (512 bytes); CPU and GPU count its bytes.
    const int64_t table = TupleTableBytes(c.root()->shape());
    e->output_bytes = SaturatingAdd(e->output_bytes, table > 0 && alignment_ >= 512 ? Aligned(table) : table);
  }

  bool InHeap(const Buffer& b) const { return b.kind == BufferKind::kTemp && !b.output && !b.in_output; }

  // The heap slot of each buffer (a buffer that takes over a dying operand's slot shares it), each slot's end, its
  // aligned size and its size.
  void Slots(std::vector<int>* slot, std::vector<int64_t>* slot_end, std::vector<int64_t>* slot_bytes,
             std::vector<int64_t>* slot_raw) const {
    slot->assign(buffers_.size(), -1);
    for (size_t b = 0; b < buffers_.size(); ++b) {
      if (!InHeap(buffers_[b])) continue;
      const int from = buffers_[b].shares;
      const bool take_over = from >= 0 && InHeap(buffers_[from]) && (*slot)[from] >= 0;
      (*slot)[b] = take_over ? (*slot)[from] : static_cast<int>(slot_end->size());
      if (!take_over) {
        slot_end->push_back(buffers_[b].end);
        slot_bytes->push_back(Aligned(buffers_[b].bytes));
        slot_raw->push_back(buffers_[b].bytes);
      }
      (*slot_end)[(*slot)[b]] = std::max((*slot_end)[(*slot)[b]], buffers_[b].end);
    }
  }

  // The largest slots live now, for MemoryEstimate::live_at_peak.
  std::vector<std::pair<std::string, int64_t>> Largest(const std::vector<int>& slot,
                                                       const std::vector<bool>& live) const {
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
  // The heap's size along the schedule (tuple tables included), with each called computation's own peak added where
  // it runs. Slots are 64-byte aligned; the heap ends at the top slot's last byte, not at its aligned end: XLA's
  // decreasing-size heap puts the smallest live slot on top, so its alignment padding is not counted.
  int64_t Walk(const Computation& c, MemoryEstimate* estimate) {
    std::vector<int> slot;
    std::vector<int64_t> slot_end, slot_bytes, slot_raw;
    Slots(&slot, &slot_end, &slot_bytes, &slot_raw);
    const int64_t n = c.instruction_count();
    std::vector<std::vector<int>> dying(static_cast<size_t>(n) + 1);
    for (size_t s = 0; s < slot_end.size(); ++s)
      dying[std::clamp<int64_t>(slot_end[s], 0, n)].push_back(static_cast<int>(s));
    std::vector<std::vector<int64_t>> tables_dying(static_cast<size_t>(n) + 1);
    std::vector<bool> live(slot_end.size(), false);
    std::multiset<std::pair<int64_t, int64_t>> live_sizes;  // (raw bytes, alignment padding) of live slots and tables
    long double now = 0, peak = 0;  // exact to 2^64 on x86-64: a module may declare arrays of 2^62 bytes
    int64_t peak_index = -1;
    for (int64_t i = 0; i < n; ++i) {
      const Instruction& ins = *c.instruction(i);
      for (int b : leaves_[i]) {
        if (slot[b] >= 0 && !live[slot[b]]) {
          live[slot[b]] = true;
          now += slot_bytes[slot[b]];
          live_sizes.emplace(slot_raw[slot[b]], slot_bytes[slot[b]] - slot_raw[slot[b]]);
        }
      }
      if (HasOwnTable(ins) && &ins != c.root()) {
        const int64_t table = 8 * static_cast<int64_t>(ins.shape().tuple.size());
        now += Aligned(table);
        live_sizes.emplace(table, Aligned(table) - table);
        tables_dying[std::min<int64_t>(last_use_[i], n)].push_back(table);
      }
      const int64_t callee = CalleePeak(ins);
      const int64_t top_padding = live_sizes.empty() ? 0 : live_sizes.begin()->second;
      const long double here = callee > 0 ? now + callee : now - top_padding;
      if (here > peak) peak = here, peak_index = i;
      for (int s : dying[i]) {
        if (!live[s]) continue;
        now -= slot_bytes[s];
        live[s] = false;
        live_sizes.erase(live_sizes.find({slot_raw[s], slot_bytes[s] - slot_raw[s]}));
      }
      for (int64_t table : tables_dying[i]) {
        now -= Aligned(table);
        live_sizes.erase(live_sizes.find({table, Aligned(table) - table}));
      }
    }
    if (estimate != nullptr && peak_index >= 0) Describe(c, slot, slot_end, peak_index, estimate);
    return peak >= static_cast<long double>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(peak);
  }

  // Where the temporaries peak and the largest of them live there.
  void Describe(const Computation& c, const std::vector<int>& slot, const std::vector<int64_t>& slot_end,
                int64_t at, MemoryEstimate* estimate) const {
    std::vector<bool> live(slot_end.size(), false);
    for (int64_t i = 0; i <= at; ++i) {
      for (int b : leaves_[i]) {
        if (slot[b] >= 0 && slot_end[slot[b]] >= at) live[slot[b]] = true;
      }
    }
    estimate->peak_at = "%" + c.instruction(at)->name();
    estimate->live_at_peak = Largest(slot, live);
  }

  int64_t CalleePeak(const Instruction& ins) const {
    const Opcode op = ins.opcode();
    if (op != Opcode::kWhile && op != Opcode::kCall && op != Opcode::kConditional) return 0;
    int64_t most = 0;
    for (const Computation* callee : ins.called()) {
      const auto it = callee_peaks_->find(callee);
      if (it != callee_peaks_->end()) most = std::max(most, it->second);  // never coexist: condition and body, branches
    }
    return most;
  }

  std::vector<std::vector<int>> leaves_;
  std::vector<Buffer> buffers_;
  std::vector<int64_t> last_use_;  // per instruction: the last use of its value
  // The peaks of the computations this one calls, computed before it (EstimateMemory).
  int64_t Aligned(int64_t bytes) const {
    return bytes > INT64_MAX - alignment_ ? INT64_MAX : (bytes + alignment_ - 1) / alignment_ * alignment_;
  }

  const std::unordered_map<const Computation*, int64_t>* callee_peaks_;
  int64_t alignment_;
  bool in_place_all_reduce_;
  std::vector<std::pair<int, int>> aliased_;  // (donated argument's buffer, the output written into it)
  mutable std::map<std::pair<const Instruction*, const Instruction*>, bool> can_share_;
};

// The computations that while loops, calls and conditionals reach from the entry, callees before their callers
// (an explicit stack: a call chain of any depth is walked without recursion).
std::vector<const Computation*> CalleesFirst(const Computation& entry) {
  std::vector<const Computation*> order;
  std::unordered_map<const Computation*, bool> done;  // false: on the stack
  std::vector<std::pair<const Computation*, int64_t>> stack{{&entry, 0}};
  done[&entry] = false;
  while (!stack.empty()) {
    auto& [c, next] = stack.back();
    if (next < c->instruction_count()) {
      const Instruction& ins = *c->instruction(next++);
      const Opcode op = ins.opcode();
      if (op != Opcode::kWhile && op != Opcode::kCall && op != Opcode::kConditional) continue;
      for (const Computation* callee : ins.called()) {
        if (done.emplace(callee, false).second) stack.emplace_back(callee, 0);
      }
      continue;
    }
    done[c] = true;
    order.push_back(c);
    stack.pop_back();
  }
  return order;
}
}  // namespace

MemoryEstimate EstimateMemory(const Module& module) {
  std::unordered_map<const Computation*, int64_t> peaks;
  MemoryEstimate e;
  const CompiledFor compiled_for = CompiledForOf(module);
  for (const Computation* c : CalleesFirst(*module.entry())) {
    Liveness liveness(&peaks, compiled_for);
    if (c == module.entry()) {
      e.temp_bytes = liveness.Peak(*c, true, &e);
    } else {
      peaks[c] = liveness.Peak(*c, false, nullptr);
    }
  }
  return e;
}

}  // namespace spmdsim::hlo
