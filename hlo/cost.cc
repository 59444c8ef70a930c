#include "hlo/cost.h"

#include <algorithm>

namespace spmdsim::hlo {
namespace {

double Elements(const Shape& s) {
  if (s.IsTuple()) {
    double n = 0;
    for (const Shape& e : s.tuple) n += Elements(e);
    return n;
  }
  return static_cast<double>(s.NumElements());
}

DType FirstType(const Shape& s) {
  if (s.IsTuple()) return s.tuple.empty() ? DType::kF32 : FirstType(s.tuple[0]);
  return s.dtype;
}

bool IsTranscendental(Opcode op) {
  switch (op) {
    case Opcode::kExp: case Opcode::kExpm1: case Opcode::kLog: case Opcode::kLog1p: case Opcode::kLogistic:
    case Opcode::kTanh: case Opcode::kSin: case Opcode::kCos: case Opcode::kTan: case Opcode::kErf:
    case Opcode::kSqrt: case Opcode::kRsqrt: case Opcode::kCbrt: case Opcode::kPower: case Opcode::kAtan2:
      return true;
    default:
      return false;
  }
}

bool IsFree(Opcode op) {
  return op == Opcode::kBitcast || op == Opcode::kTuple || op == Opcode::kGetTupleElement ||
         op == Opcode::kParameter || op == Opcode::kConstant || op == Opcode::kAfterAll ||
         op == Opcode::kAddDependency || op == Opcode::kOptimizationBarrier || op == Opcode::kDomain ||
         op == Opcode::kPartitionId || op == Opcode::kReplicaId;
}

ContractionDims DotDimsOf(const Instruction& dot) {
  const DotDims& d = dot.attrs().dot;
  const Shape& l = dot.operand(0)->shape();
  const Shape& r = dot.operand(1)->shape();
  ContractionDims c{1, 1, 1, 1};
  for (int64_t x : d.lhs_batch) c.batch *= l.dims[x];
  for (int64_t x : d.lhs_contracting) c.k *= l.dims[x];
  for (int i = 0; i < l.rank(); ++i) {
    if (std::find(d.lhs_batch.begin(), d.lhs_batch.end(), i) == d.lhs_batch.end() &&
        std::find(d.lhs_contracting.begin(), d.lhs_contracting.end(), i) == d.lhs_contracting.end()) {
      c.m *= l.dims[i];
    }
  }
  for (int i = 0; i < r.rank(); ++i) {
    if (std::find(d.rhs_batch.begin(), d.rhs_batch.end(), i) == d.rhs_batch.end() &&
        std::find(d.rhs_contracting.begin(), d.rhs_contracting.end(), i) == d.rhs_contracting.end()) {
      c.n *= r.dims[i];
    }
  }
  return c;
}

double ConvolutionFlops(const Instruction& conv) {
  const ConvDims& c = conv.attrs().conv;
  const Shape& k = conv.operand(1)->shape();
  double window = 1;
  for (int64_t d : c.kernel_spatial) window *= static_cast<double>(k.dims[d]);
  return 2.0 * Elements(conv.shape()) * window * static_cast<double>(k.dims[c.kernel_input_feature]);
}

// FLOPs and transcendentals of one instruction's arithmetic (no bytes).
void AddArithmetic(const Instruction& ins, InstructionCost* cost) {
  const Opcode op = ins.opcode();
  if (op == Opcode::kDot) {
    const ContractionDims d = DotDimsOf(ins);
    cost->flops += 2.0 * d.batch * d.m * d.n * d.k;
    cost->dims = d;
    cost->dtype = ins.operand(0)->shape().dtype;
  } else if (op == Opcode::kConvolution) {
    cost->flops += ConvolutionFlops(ins);
    cost->dtype = ins.operand(0)->shape().dtype;
  } else if (op == Opcode::kReduce || op == Opcode::kReduceWindow) {
    double window = 1;
    for (const WindowDim& w : ins.attrs().window) window *= static_cast<double>(w.size);
    cost->flops += op == Opcode::kReduce ? Elements(ins.operand(0)->shape()) : Elements(ins.shape()) * window;
  } else if (IsElementwiseUnary(op) || IsElementwiseBinary(op) || op == Opcode::kSelect || op == Opcode::kClamp) {
    cost->flops += Elements(ins.shape());
    if (IsTranscendental(op)) cost->transcendentals += Elements(ins.shape());
  } else if (op == Opcode::kFusion || op == Opcode::kCall) {
    const Computation& c = *ins.called()[0];
    for (int64_t i = 0; i < c.instruction_count(); ++i) AddArithmetic(*c.instruction(i), cost);
  }
}

// Bytes of fusion parameter `p` that the fusion reads: the sliced bytes when every use slices it, and nothing
// when its only use is as the in-place operand of a dynamic-update-slice root.
double ParameterBytesRead(const Instruction& p) {
  const Computation& c = *p.parent();
  double sliced = 0;
  bool only_slices = true, any_use = false;
  for (int64_t i = 0; i < c.instruction_count(); ++i) {
    const Instruction& u = *c.instruction(i);
    for (int64_t k = 0; k < u.operand_count(); ++k) {
      if (u.operand(k) != &p) continue;
      any_use = true;
      const Opcode op = u.opcode();
      if ((op == Opcode::kDynamicSlice || op == Opcode::kSlice || op == Opcode::kGather) && k == 0) {
        sliced += static_cast<double>(u.shape().ByteSize());
      } else if (op == Opcode::kDynamicUpdateSlice && k == 0 && u.is_root()) {
        // updated in place: not read
      } else {
        only_slices = false;
      }
    }
  }
  if (!any_use) return 0;
  return only_slices ? sliced : static_cast<double>(p.shape().ByteSize());
}

double ResultBytesWritten(const Instruction& ins) {
  if (ins.opcode() == Opcode::kFusion) {
    const Instruction* root = ins.called()[0]->root();
    if (root->opcode() == Opcode::kDynamicUpdateSlice) return static_cast<double>(root->operand(1)->shape().ByteSize());
  }
  if (ins.opcode() == Opcode::kDynamicUpdateSlice) return static_cast<double>(ins.operand(1)->shape().ByteSize());
  return static_cast<double>(ins.shape().ByteSize());
}

double OperandBytesRead(const Instruction& ins) {
  const Opcode op = ins.opcode();
  if (op == Opcode::kFusion) {
    double bytes = 0;
    const Computation& c = *ins.called()[0];
    for (int64_t i = 0; i < c.parameter_count(); ++i) bytes += ParameterBytesRead(*c.parameter(i));
    return bytes;
  }
  if (op == Opcode::kDynamicSlice || op == Opcode::kSlice || op == Opcode::kGather) {
    return static_cast<double>(ins.shape().ByteSize());
  }
  double bytes = 0;
  for (int64_t k = 0; k < ins.operand_count(); ++k) {
    if (op == Opcode::kDynamicUpdateSlice && k == 0) continue;  // in place
    bytes += static_cast<double>(ins.operand(k)->shape().ByteSize());
  }
  return bytes;
}

bool CallsContraction(const Computation& c) {
  for (int64_t i = 0; i < c.instruction_count(); ++i) {
    const Opcode op = c.instruction(i)->opcode();
    if (op == Opcode::kDot || op == Opcode::kConvolution) return true;
  }
  return false;
}

}  // namespace

std::string InstructionClass(const Instruction& ins) {
  const Opcode op = ins.opcode();
  if (op == Opcode::kDot) return "dot";
  if (op == Opcode::kConvolution) return "convolution";
  if (op == Opcode::kFusion) return CallsContraction(*ins.called()[0]) ? "fusion (dot)" : "fusion";
  if (IsCollective(op)) {
    std::string_view name = OpcodeName(op);
    for (std::string_view suffix : {"-start", "-done"}) {
      if (name.ends_with(suffix)) name.remove_suffix(suffix.size());
    }
    return "collective " + std::string(name);
  }
  switch (op) {
    case Opcode::kReduce: case Opcode::kReduceWindow: case Opcode::kSelectAndScatter: case Opcode::kMap:
      return "reduce";
    case Opcode::kCopy: case Opcode::kTranspose: case Opcode::kSlice: case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice: case Opcode::kConcatenate: case Opcode::kPad: case Opcode::kReverse:
    case Opcode::kGather: case Opcode::kScatter: case Opcode::kReshape: case Opcode::kBroadcast:
      return "data movement";
    case Opcode::kSort: case Opcode::kTopK: return "sort";
    case Opcode::kCustomCall: return "custom-call";
    case Opcode::kWhile: case Opcode::kCall: case Opcode::kConditional: case Opcode::kAsyncStart:
    case Opcode::kAsyncUpdate: case Opcode::kAsyncDone:
      return "control";
    default:
      break;
  }
  return IsFree(op) ? "control" : "elementwise";
}

InstructionCost CostOf(const Instruction& ins) {
  InstructionCost cost;
  cost.dtype = FirstType(ins.shape());
  if (IsFree(ins.opcode())) return cost;
  AddArithmetic(ins, &cost);
  cost.bytes_read = OperandBytesRead(ins);
  cost.bytes_written = ResultBytesWritten(ins);
  if (!cost.dims.valid()) cost.dims = ContractionDims{};
  if (ins.opcode() == Opcode::kFusion && CallsContraction(*ins.called()[0])) {
    // A fusion around one dot is priced as that contraction (its epilogue rides along).
    int dots = 0;
    const Computation& c = *ins.called()[0];
    for (int64_t i = 0; i < c.instruction_count(); ++i) dots += c.instruction(i)->opcode() == Opcode::kDot;
    if (dots != 1) cost.dims = ContractionDims{};
  }
  return cost;
}

namespace {

// The op_name of `ins`, or for a fusion without one, of the first of its fused instructions (root first) that has
// one (XLA's passes leave many fusions without metadata, their fused ops keep theirs).
const std::string* OpNameOf(const Instruction& ins) {
  if (!ins.attrs().op_name.empty()) return &ins.attrs().op_name;
  if (ins.opcode() != Opcode::kFusion) return nullptr;
  const Computation& c = *ins.called()[0];
  if (!c.root()->attrs().op_name.empty()) return &c.root()->attrs().op_name;
  for (int64_t i = c.instruction_count(); i-- > 0;) {
    if (!c.instruction(i)->attrs().op_name.empty()) return &c.instruction(i)->attrs().op_name;
  }
  return nullptr;
}

}  // namespace

std::string ScopeOf(const Instruction& ins) {
  const std::string* name = OpNameOf(ins);
  if (name == nullptr) return "(no op_name)";
  const size_t slash = name->rfind('/');
  return slash == std::string::npos ? *name : name->substr(0, slash);
}

}  // namespace spmdsim::hlo
