#include "hlo/memory.h"

#include <algorithm>
#include <map>
#include <vector>

namespace spmdsim::hlo {
namespace {

enum class BufferKind : uint8_t { kTemp, kArgument, kConstant, kCaller };

struct Buffer {
  int64_t bytes = 0;
  BufferKind kind = BufferKind::kTemp;
  int64_t end = -1;         // the last instruction (index) that uses it or a view of it
  bool owned_by_caller = false;  // reaches the computation's root: the caller (or the output) holds it
};

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

bool IsView(Opcode op) {
  return op == Opcode::kBitcast || op == Opcode::kGetTupleElement || op == Opcode::kTuple ||
         op == Opcode::kOptimizationBarrier || op == Opcode::kAddDependency || op == Opcode::kDomain ||
         op == Opcode::kWhile || op == Opcode::kAllReduceDone || op == Opcode::kAllGatherDone ||
         op == Opcode::kCollectivePermuteDone || op == Opcode::kAsyncDone || op == Opcode::kAsyncUpdate ||
         op == Opcode::kCopyDone;
}

bool ReusesOperand(const Instruction& ins) {
  const Opcode op = ins.opcode();
  if (IsElementwiseUnary(op) || IsElementwiseBinary(op) || op == Opcode::kSelect || op == Opcode::kClamp ||
      op == Opcode::kConvert || op == Opcode::kDynamicUpdateSlice) {
    return true;
  }
  return op == Opcode::kFusion && (ins.attrs().fusion_kind == "kLoop" ||
                                   ins.called()[0]->root()->opcode() == Opcode::kDynamicUpdateSlice);
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
    std::vector<int64_t> last_use(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) last_use[i] = i;
    for (int64_t i = 0; i < n; ++i) {
      for (const Instruction* o : c.instruction(i)->operands()) last_use[o->index()] = std::max(last_use[o->index()], i);
    }
    last_use[c.root()->index()] = n;
    table_end_ = last_use;
    for (int64_t i = 0; i < n; ++i) Define(*c.instruction(i), entry, last_use);
    for (int b : leaves_[c.root()->index()]) buffers_[b].owned_by_caller = true;
    if (estimate != nullptr) Totals(c, estimate);
    return Walk(c, estimate);
  }

 private:
  void Define(const Instruction& ins, bool entry, const std::vector<int64_t>& last_use) {
    std::vector<int>& out = leaves_[ins.index()];
    const Opcode op = ins.opcode();
    if (op == Opcode::kParameter || op == Opcode::kConstant) {
      std::vector<int64_t> bytes;
      ArrayLeaves(ins.shape(), &bytes);
      const BufferKind kind = op == Opcode::kConstant ? BufferKind::kConstant
                              : entry                 ? BufferKind::kArgument
                                                      : BufferKind::kCaller;
      for (int64_t b : bytes) out.push_back(NewBuffer(b, kind));
    } else if (IsView(op)) {
      for (const Instruction* o : ins.operands()) out.insert(out.end(), leaves_[o->index()].begin(), leaves_[o->index()].end());
      if (op == Opcode::kGetTupleElement) out = Element(ins.operand(0)->shape(), leaves_[ins.operand(0)->index()], ins.attrs().index);
      if (op == Opcode::kAllGatherDone || op == Opcode::kCollectivePermuteDone || op == Opcode::kAsyncDone) {
        out = Element(ins.operand(0)->shape(), leaves_[ins.operand(0)->index()], 1);
      }
      if (op == Opcode::kAddDependency) out = leaves_[ins.operand(0)->index()];
    } else {
      DefineNew(ins, last_use);
    }
    for (int b : out) buffers_[b].end = std::max(buffers_[b].end, last_use[ins.index()]);
  }

  void DefineNew(const Instruction& ins, const std::vector<int64_t>& last_use) {
    std::vector<int>& out = leaves_[ins.index()];
    std::vector<int64_t> bytes;
    ArrayLeaves(ins.shape(), &bytes);
    const Opcode op = ins.opcode();
    if (op == Opcode::kAllGatherStart || op == Opcode::kCollectivePermuteStart || op == Opcode::kAsyncStart) {
      // (operands' buffers, result, contexts): the operands are views.
      std::vector<int> operands;
      for (const Instruction* o : ins.operands()) operands.insert(operands.end(), leaves_[o->index()].begin(), leaves_[o->index()].end());
      out = operands;
      for (size_t k = operands.size(); k < bytes.size(); ++k) out.push_back(NewBuffer(bytes[k], BufferKind::kTemp));
      return;
    }
    if (bytes.size() == 1 && ReusesOperand(ins)) {
      for (int64_t k = 0; k < ins.operand_count(); ++k) {
        if (op == Opcode::kDynamicUpdateSlice && k != 0) break;
        const std::vector<int>& src = leaves_[ins.operand(k)->index()];
        if (src.size() != 1) continue;
        const Buffer& b = buffers_[src[0]];
        if (b.kind == BufferKind::kTemp && b.bytes == bytes[0] && b.end == ins.index()) {
          out.push_back(src[0]);
          return;
        }
      }
    }
    for (int64_t b : bytes) out.push_back(NewBuffer(b, BufferKind::kTemp));
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

  int NewBuffer(int64_t bytes, BufferKind kind) {
    buffers_.push_back(Buffer{bytes, kind});
    return static_cast<int>(buffers_.size() - 1);
  }

  void Totals(const Computation& c, MemoryEstimate* e) {
    for (const Buffer& b : buffers_) {
      if (b.kind == BufferKind::kArgument) e->argument_bytes += b.bytes;
    }
    std::vector<int64_t> out;
    ArrayLeaves(c.root()->shape(), &out);
    for (int64_t b : out) e->output_bytes += b;
    e->output_bytes += TupleTableBytes(c.root()->shape());
  }

  // Temporaries' sum along the schedule, with each called computation's own peak added where it runs.
  int64_t Walk(const Computation& c, MemoryEstimate* estimate) {
    std::vector<std::vector<int>> dying(static_cast<size_t>(c.instruction_count()) + 1);
    std::vector<bool> counted(buffers_.size(), false);
    for (size_t b = 0; b < buffers_.size(); ++b) {
      if (buffers_[b].end >= 0 && buffers_[b].end <= c.instruction_count()) dying[buffers_[b].end].push_back(static_cast<int>(b));
    }
    const std::vector<Buffer> buffers = buffers_;
    const std::vector<std::vector<int>> leaves = leaves_;
    int64_t live = 0, peak = 0;
    std::vector<int64_t> table_ends(static_cast<size_t>(c.instruction_count()) + 1, 0);
    for (int64_t i = 0; i < c.instruction_count(); ++i) {
      for (int b : leaves[i]) {
        if (!counted[b] && buffers[b].kind == BufferKind::kTemp && !buffers[b].owned_by_caller) {
          counted[b] = true;
          live += Aligned(buffers[b].bytes);
        }
      }
      const Instruction& ins = *c.instruction(i);
      const int64_t table = HasOwnTable(ins) && &ins != c.root() ? Aligned(8 * static_cast<int64_t>(ins.shape().tuple.size())) : 0;
      live += table;
      table_ends[std::min<int64_t>(table_end_[i], c.instruction_count())] += table;
      const int64_t here = live + CalleePeak(*c.instruction(i));
      if (here > peak) {
        peak = here;
        if (estimate != nullptr) estimate->peak_at = "%" + c.instruction(i)->name();
      }
      for (int b : dying[i]) {
        if (counted[b]) live -= Aligned(buffers[b].bytes);
        counted[b] = false;
      }
      live -= table_ends[i];
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

  // Whether `ins` allocates the index table of its tuple result (views share their operand's).
  static bool HasOwnTable(const Instruction& ins) {
    const Opcode op = ins.opcode();
    return ins.shape().IsTuple() && op != Opcode::kGetTupleElement && op != Opcode::kWhile &&
           op != Opcode::kParameter && op != Opcode::kOptimizationBarrier && op != Opcode::kAddDependency &&
           op != Opcode::kAsyncUpdate && op != Opcode::kAsyncDone && op != Opcode::kDomain;
  }

  std::vector<std::vector<int>> leaves_;
  std::vector<Buffer> buffers_;
  std::vector<int64_t> table_end_;  // per instruction: the last use of its value (its table dies then)
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
