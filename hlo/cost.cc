#include "hlo/cost.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

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

// TPU custom-calls that move no data: buffer allocation, async-call preparation, views and compiler assumptions.
bool IsFreeCustomCall(const Instruction& ins) {
  if (ins.opcode() != Opcode::kCustomCall) return false;
  const std::string& t = ins.attrs().custom_call_target;
  return t == "AllocateBuffer" || t == "PrepareAsyncCallStart" || t == "PrepareAsyncCallDone" || t == "SliceId" ||
         t == "ConcatBitcast" || t == "AssumeGatherIndicesInBound" || t == "Sharding" || t == "SPMDFullToShardShape" ||
         t == "SPMDShardToFullShape";
}

// A cuBLAS GEMM custom-call (XLA GPU's __cublas$gemm, __cublas$lt$matmul and its fp8 form): its contraction from
// gemm_backend_config's dot_dimension_numbers, or invalid dims when it is not one.
ContractionDims GemmDims(const Instruction& ins) {
  const std::string& t = ins.attrs().custom_call_target;
  if (ins.opcode() != Opcode::kCustomCall || !t.starts_with("__cublas") || ins.operand_count() < 2) return {};
  for (const auto& [key, value] : ins.attrs().raw) {
    if (key != "backend_config") continue;
    const nlohmann::json config = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
    if (!config.is_object() || !config.contains("gemm_backend_config")) return {};
    const nlohmann::json& dnums = config["gemm_backend_config"].value("dot_dimension_numbers",
                                                                      nlohmann::json::object());
    auto dims = [&](const char* name) {
      std::vector<int64_t> out;
      for (const auto& d : dnums.value(name, nlohmann::json::array())) {
        out.push_back(d.is_string() ? std::stoll(d.get<std::string>()) : d.get<int64_t>());
      }
      return out;
    };
    const Shape& l = ins.operand(0)->shape();
    const Shape& r = ins.operand(1)->shape();
    const std::vector<int64_t> lb = dims("lhs_batch_dimensions"), lc = dims("lhs_contracting_dimensions");
    const std::vector<int64_t> rb = dims("rhs_batch_dimensions"), rc = dims("rhs_contracting_dimensions");
    ContractionDims c{1, 1, 1, 1};
    auto in = [](const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
    for (int i = 0; i < l.rank(); ++i) {
      if (in(lb, i)) c.batch *= l.dims[i];
      else if (in(lc, i)) c.k *= l.dims[i];
      else c.m *= l.dims[i];
    }
    for (int i = 0; i < r.rank(); ++i) {
      if (!in(rb, i) && !in(rc, i)) c.n *= r.dims[i];
    }
    return c;
  }
  return {};
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

// The (output, kernel) position pairs of one spatial dimension that read an input element (not padding, not a
// hole of the input's dilation): XLA's HloCostAnalysis counts only those. A TPU matmul with batch dimensions is a
// convolution whose spatial dimension carries the batch through padding and dilation; counting every window
// position would multiply its FLOPs by the window.
double ValidPositions(const WindowDim& w, int64_t input, int64_t kernel, int64_t output) {
  if (w.lhs_dilation ==
      1) {  // per kernel index, the output indices o with 0 <= o*stride - pad_low + k*rhs_dilation < input
    double count = 0;
    for (int64_t k = 0; k < kernel; ++k) {
      const int64_t offset = k * w.rhs_dilation - w.pad_low;  // input index = o * stride + offset
      const int64_t first = offset >= 0 ? 0 : (-offset + w.stride - 1) / w.stride;
      const int64_t last = input - 1 - offset < 0 ? -1 : (input - 1 - offset) / w.stride;  // largest valid o
      count += static_cast<double>(std::max<int64_t>(0, std::min(last, output - 1) - first + 1));
    }
    return count;
  }
  double count = 0;
  for (int64_t k = 0; k < kernel; ++k) {
    for (int64_t o = 0; o < output; ++o) {
      const int64_t undilated = o * w.stride - w.pad_low + k * w.rhs_dilation;
      if (undilated < 0 || undilated % w.lhs_dilation != 0) continue;
      count += undilated / w.lhs_dilation < input;
    }
  }
  return count;
}

// A convolution as the contraction the matmul model prices: batch = output positions, m = input batch (per batch
// group), n = output features, k = input features per group x the valid kernel positions per output position.
// A TPU matmul (dim_labels=bf_io->bf, no spatial dimensions) is {1, b, o, i}. FLOPs = 2 batch m n k.
ContractionDims ConvolutionDims(const Instruction& conv, double positions) {
  const ConvDims& c = conv.attrs().conv;
  const Shape& in = conv.operand(0)->shape();
  const Shape& out = conv.shape();
  double outputs = 1;
  for (int64_t d : c.output_spatial) outputs *= static_cast<double>(out.dims[d]);
  ContractionDims dims;
  dims.batch = std::max<int64_t>(1, static_cast<int64_t>(outputs));
  dims.m = std::max<int64_t>(1, in.dims[c.input_batch] / conv.attrs().batch_group_count);
  dims.n = std::max<int64_t>(1, out.dims[c.output_feature]);
  const double features = static_cast<double>(in.dims[c.input_feature] / conv.attrs().feature_group_count);
  dims.k = std::max<int64_t>(1, static_cast<int64_t>(std::llround(features * positions / std::max(1.0, outputs))));
  return dims;
}

// 2 x (input features per group) x output features x (batch per batch group) x valid positions of every spatial
// dimension (XLA's HloCostAnalysis::GetConvolutionFlops).
double ConvolutionPositions(const Instruction& conv) {
  const ConvDims& c = conv.attrs().conv;
  const Shape& in = conv.operand(0)->shape();
  const Shape& k = conv.operand(1)->shape();
  const Shape& out = conv.shape();
  double positions = 1;
  for (size_t d = 0; d < c.kernel_spatial.size(); ++d) {
    const WindowDim w = d < conv.attrs().window.size() ? conv.attrs().window[d] : WindowDim{};
    positions *= ValidPositions(w, in.dims[c.input_spatial[d]], k.dims[c.kernel_spatial[d]],
                                out.dims[c.output_spatial[d]]);
  }
  return positions;
}

double ConvolutionFlops(const Instruction& conv) {
  const ConvDims& c = conv.attrs().conv;
  const Shape& in = conv.operand(0)->shape();
  const Shape& out = conv.shape();
  const double positions = ConvolutionPositions(conv);
  const double features = static_cast<double>(in.dims[c.input_feature]) /
                          static_cast<double>(conv.attrs().feature_group_count);
  const double batch = static_cast<double>(in.dims[c.input_batch]) /
                       static_cast<double>(conv.attrs().batch_group_count);
  return 2.0 * features * static_cast<double>(out.dims[c.output_feature]) * batch * positions;
}

bool IsNarrowFloat(DType t) {
  return t == DType::kBF16 || t == DType::kF16 || t == DType::kF8E4M3FN || t == DType::kF8E5M2;
}

template <typename F>
void ForEachUse(const Instruction& v, F&& f) {
  const Instruction* previous = nullptr;
  for (const Instruction* u : v.users()) {
    if (u == previous) continue;  // listed once per use
    previous = u;
    for (int64_t k = 0; k < u->operand_count(); ++k) {
      if (u->operand(k) == &v) f(*u, k);
    }
  }
}

// The narrow type every use of f32 value `v` rounds it to first (XLA CPU leaves the rounding of a bf16 result
// computed in f32 to its consumers: convert(convert(v, bf16), f32) there), through views and into fusions; else
// f32.
DType RoundedByUses(const Instruction& v, int depth) {
  DType common = DType::kF32;
  bool ok = !v.users().empty() && depth <= 4;
  ForEachUse(v, [&](const Instruction& u, int64_t k) {
    DType t = DType::kF32;
    if (!ok) return;
    if (u.opcode() == Opcode::kConvert && IsNarrowFloat(u.shape().dtype)) {
      t = u.shape().dtype;
    } else if (u.opcode() == Opcode::kFusion) {
      t = RoundedByUses(*u.called()[0]->parameter(k), depth + 1);
    } else if (u.opcode() == Opcode::kBitcast || u.opcode() == Opcode::kReshape || u.opcode() == Opcode::kCopy) {
      t = RoundedByUses(u, depth + 1);
    }
    ok = IsNarrowFloat(t) && (common == DType::kF32 || common == t);
    common = t;
  });
  return ok ? common : DType::kF32;
}

// The narrow type that operands [first, last) of `x` all have, else `own`.
DType CommonNarrow(const Instruction* x, int64_t first, int64_t last, const Instruction* caller, int depth, DType own);

// NarrowType (cost.h) of `x`, a value of the fusion `caller` when it is in one (its parameters are the caller's
// operands). Depth-limited: a long chain keeps its own type.
DType NarrowTypeOf(const Instruction* x, const Instruction* caller, int depth) {
  if (x->shape().IsTuple()) return DType::kF32;
  const DType own = x->shape().dtype;
  if (own != DType::kF32 || depth > 12) return own;
  switch (x->opcode()) {
    case Opcode::kConvert:
      return IsNarrowFloat(x->operand(0)->shape().dtype) ? x->operand(0)->shape().dtype : own;
    case Opcode::kBitcast: case Opcode::kCopy: case Opcode::kReshape: case Opcode::kTranspose:
    case Opcode::kBroadcast: case Opcode::kSlice: case Opcode::kDynamicSlice: case Opcode::kReverse:
    case Opcode::kPad: case Opcode::kGather: case Opcode::kAllReduce: case Opcode::kAllGather:
    case Opcode::kAllToAll: case Opcode::kCollectivePermute: case Opcode::kReduceScatter:
      return x->operand_count() == 0 || x->operand(0)->shape().IsTuple()
                 ? own : NarrowTypeOf(x->operand(0), caller, depth + 1);
    case Opcode::kDynamicUpdateSlice:
      return CommonNarrow(x, 0, 2, caller, depth, own);
    case Opcode::kSelect:
      return CommonNarrow(x, 1, 3, caller, depth, own);
    case Opcode::kConcatenate:
      return CommonNarrow(x, 0, x->operand_count(), caller, depth, own);
    case Opcode::kFusion: {
      const DType t = NarrowTypeOf(x->called()[0]->root(), x, depth + 1);
      return t != own ? t : RoundedByUses(*x, 0);
    }
    case Opcode::kParameter:
      if (caller == nullptr || caller->opcode() != Opcode::kFusion) return own;
      return NarrowTypeOf(caller->operand(x->attrs().parameter_number), nullptr, depth + 1);
    case Opcode::kGetTupleElement: {
      const Instruction* t = x->operand(0);
      const Instruction* in = caller;
      if (t->opcode() == Opcode::kFusion) in = t, t = t->called()[0]->root();
      if (t->opcode() != Opcode::kTuple && t->opcode() != Opcode::kAllReduce) return own;
      const int64_t i = x->attrs().index;
      return i < t->operand_count() ? NarrowTypeOf(t->operand(i), in, depth + 1) : own;
    }
    default:
      return caller == nullptr ? RoundedByUses(*x, 0) : own;
  }
}

DType CommonNarrow(const Instruction* x, int64_t first, int64_t last, const Instruction* caller, int depth, DType own) {
  DType common = own;
  for (int64_t i = first; i < last; ++i) {
    const DType t = NarrowTypeOf(x->operand(i), caller, depth + 1);
    if (!IsNarrowFloat(t) || (common != own && t != common)) return own;
    common = t;
  }
  return common;
}

// The bytes of value `v` (in `caller` when it is a fused value), its narrow type's when `narrow`.
double ValueBytes(const Instruction* v, const Instruction* caller, bool narrow) {
  const Shape& s = v->shape();
  if (s.IsTuple()) {
    if (!narrow || v->opcode() != Opcode::kTuple) return static_cast<double>(s.ByteSize());
    double bytes = 0;
    for (const Instruction* e : v->operands()) bytes += ValueBytes(e, caller, narrow);
    return bytes;
  }
  const DType t = narrow ? NarrowTypeOf(v, caller, 0) : s.dtype;
  return Elements(s) * static_cast<double>(DTypeSize(t));
}

// The type a contraction is priced in: its operands' narrow type when both have the same one (`narrow`), else its
// first operand's.
DType ContractionType(const Instruction& ins, const Instruction* caller, bool narrow) {
  if (!narrow) return ins.operand(0)->shape().dtype;
  const DType a = NarrowTypeOf(ins.operand(0), caller, 0), b = NarrowTypeOf(ins.operand(1), caller, 0);
  return a == b && IsNarrowFloat(a) ? a : ins.operand(0)->shape().dtype;
}

// FLOPs and transcendentals of one instruction's arithmetic (no bytes); `caller`: the fusion `ins` is in.
void AddArithmetic(const Instruction& ins, bool narrow, InstructionCost* cost, const Instruction* caller = nullptr) {
  const Opcode op = ins.opcode();
  if (op == Opcode::kDot) {
    const ContractionDims d = DotDimsOf(ins);
    cost->flops += 2.0 * d.batch * d.m * d.n * d.k;
    cost->dims = d;
    cost->dtype = ContractionType(ins, caller, narrow);
  } else if (op == Opcode::kConvolution) {
    cost->flops += ConvolutionFlops(ins);
    cost->dims = ConvolutionDims(ins, ConvolutionPositions(ins));
    cost->dtype = ContractionType(ins, caller, narrow);
  } else if (op == Opcode::kReduce || op == Opcode::kReduceWindow) {
    double window = 1;
    for (const WindowDim& w : ins.attrs().window) window *= static_cast<double>(w.size);
    cost->flops += op == Opcode::kReduce ? Elements(ins.operand(0)->shape()) : Elements(ins.shape()) * window;
  } else if (IsElementwiseUnary(op) || IsElementwiseBinary(op) || op == Opcode::kSelect || op == Opcode::kClamp) {
    cost->flops += Elements(ins.shape());
    if (IsTranscendental(op)) cost->transcendentals += Elements(ins.shape());
  } else if (op == Opcode::kFusion || op == Opcode::kCall) {
    const Computation& c = *ins.called()[0];
    for (int64_t i = 0; i < c.instruction_count(); ++i) AddArithmetic(*c.instruction(i), narrow, cost, &ins);
  }
}

// Whether `u` is a view of its operand: a bitcast, or when `narrow` a convert (XLA CPU's round trips of bf16
// arrays through f32, which a TPU or GPU compile does not make).
bool IsView(const Instruction& u, bool narrow) {
  return u.opcode() == Opcode::kBitcast || (narrow && u.opcode() == Opcode::kConvert);
}

// Whether `u`'s value is its computation's result, through views.
bool ReachesRoot(const Instruction& u, bool narrow, int depth = 0) {
  if (u.is_root()) return true;
  int uses = 0;
  const Instruction* next = nullptr;
  ForEachUse(u, [&](const Instruction& w, int64_t) { uses += 1, next = &w; });
  return uses == 1 && depth < 4 && IsView(*next, narrow) && ReachesRoot(*next, narrow, depth + 1);
}

// The elements of fused value `v` that its uses read: a slice-like use its slice's, the in-place operand of a
// dynamic-update-slice result none, a view what its uses read; -1 when some use reads all of it.
double ElementsRead(const Instruction& v, bool narrow, int depth = 0) {
  double elements = 0;
  bool all = false;
  ForEachUse(v, [&](const Instruction& u, int64_t k) {
    const Opcode op = u.opcode();
    if ((op == Opcode::kDynamicSlice || op == Opcode::kSlice || op == Opcode::kGather) && k == 0) {
      elements += Elements(u.shape());
    } else if (op == Opcode::kDynamicUpdateSlice && k == 0 && ReachesRoot(u, narrow)) {
      // updated in place: not read
    } else if (IsView(u, narrow) && depth < 4) {
      const double e = ElementsRead(u, narrow, depth + 1);
      all = all || e < 0;
      elements += e;
    } else {
      all = true;
    }
  });
  return all ? -1 : elements;
}

// Bytes of fusion parameter `p` that the fusion `caller` reads.
double ParameterBytesRead(const Instruction& p, const Instruction& caller, bool narrow) {
  if (p.shape().IsTuple()) return static_cast<double>(p.shape().ByteSize());
  const double read = ElementsRead(p, narrow);
  const DType t = narrow ? NarrowTypeOf(caller.operand(p.attrs().parameter_number), nullptr, 0) : p.shape().dtype;
  return (read < 0 ? Elements(p.shape()) : read) * static_cast<double>(DTypeSize(t));
}

double ResultBytesWritten(const Instruction& ins, bool narrow) {
  if (ins.opcode() == Opcode::kFusion) {
    const Instruction* root = ins.called()[0]->root();
    const Instruction* dus = root;
    for (int i = 0; i < 4 && IsView(*dus, narrow); ++i) dus = dus->operand(0);
    if (dus->opcode() == Opcode::kDynamicUpdateSlice) return ValueBytes(dus->operand(1), &ins, narrow);
    return ValueBytes(root, &ins, narrow);
  }
  if (ins.opcode() == Opcode::kDynamicUpdateSlice) return ValueBytes(ins.operand(1), nullptr, narrow);
  return ValueBytes(&ins, nullptr, narrow);
}

double OperandBytesRead(const Instruction& ins, bool narrow) {
  const Opcode op = ins.opcode();
  if (op == Opcode::kFusion) {
    double bytes = 0;
    const Computation& c = *ins.called()[0];
    for (int64_t i = 0; i < c.parameter_count(); ++i) bytes += ParameterBytesRead(*c.parameter(i), ins, narrow);
    return bytes;
  }
  if (op == Opcode::kDynamicSlice || op == Opcode::kSlice || op == Opcode::kGather)
    return ValueBytes(&ins, nullptr, narrow);
  double bytes = 0;
  for (int64_t k = 0; k < ins.operand_count(); ++k) {
    if (op == Opcode::kDynamicUpdateSlice && k == 0) continue;  // in place
    bytes += ValueBytes(ins.operand(k), nullptr, narrow);
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
    case Opcode::kCopyStart: case Opcode::kCopyDone: return "async copy";
    case Opcode::kSend: case Opcode::kRecv: case Opcode::kSendDone: case Opcode::kRecvDone: return "transfer";
    case Opcode::kCustomCall: return GemmDims(ins).valid() ? "dot (cuBLAS)" : "custom-call";
    case Opcode::kWhile: case Opcode::kCall: case Opcode::kConditional: case Opcode::kAsyncStart:
    case Opcode::kAsyncUpdate: case Opcode::kAsyncDone:
      return "control";
    default:
      break;
  }
  return IsFree(op) ? "control" : "elementwise";
}

DType NarrowType(const Instruction& value) { return NarrowTypeOf(&value, nullptr, 0); }

double NarrowBytes(const Instruction& value) { return ValueBytes(&value, nullptr, true); }

InstructionCost CostOf(const Instruction& ins, bool narrow_types) {
  InstructionCost cost;
  cost.dtype = FirstType(ins.shape());
  if (IsFree(ins.opcode()) || IsFreeCustomCall(ins)) return cost;
  AddArithmetic(ins, narrow_types, &cost);
  if (const ContractionDims gemm = GemmDims(ins); gemm.valid()) {  // cuBLAS: priced as the dot it is
    cost.flops += 2.0 * static_cast<double>(gemm.batch) * gemm.m * gemm.n * gemm.k;
    cost.dims = gemm;
    cost.dtype = ins.operand(0)->shape().dtype;
    cost.bytes_read = static_cast<double>(ins.operand(0)->shape().ByteSize() + ins.operand(1)->shape().ByteSize());
    cost.bytes_written = static_cast<double>(ins.shape().IsTuple() ? ins.shape().tuple[0].ByteSize()
                                                                   : ins.shape().ByteSize());
    return cost;
  }
  cost.bytes_read = OperandBytesRead(ins, narrow_types);
  cost.bytes_written = ResultBytesWritten(ins, narrow_types);
  if (!cost.dims.valid()) cost.dims = ContractionDims{};
  if (ins.opcode() == Opcode::kFusion && CallsContraction(*ins.called()[0])) {
    // A fusion around one dot is priced as that contraction (its epilogue rides along).
    int contractions = 0;
    const Computation& c = *ins.called()[0];
    for (int64_t i = 0; i < c.instruction_count(); ++i) {
      const Opcode o = c.instruction(i)->opcode();
      contractions += o == Opcode::kDot || o == Opcode::kConvolution;
    }
    if (contractions != 1) cost.dims = ContractionDims{};
  }
  return cost;
}

namespace {

// An op_name JAX wrote ("jit(f)/jvp(MLP)/Dense_0/dot_general"); XLA's own passes name some ops after an
// instruction ("broadcast.8"), which says nothing of where in the program they come from.
bool IsJaxName(const std::string& name) { return name.find('/') != std::string::npos; }

// The op_name of `ins`, or for a fusion without one, of the first of its fused instructions (root first) that has
// one (XLA's passes leave many fusions without metadata, their fused ops keep theirs).
const std::string* OpNameOf(const Instruction& ins) {
  if (IsJaxName(ins.attrs().op_name)) return &ins.attrs().op_name;
  if (ins.opcode() != Opcode::kFusion) return nullptr;
  const Computation& c = *ins.called()[0];
  if (IsJaxName(c.root()->attrs().op_name)) return &c.root()->attrs().op_name;
  for (int64_t i = c.instruction_count(); i-- > 0;) {
    if (IsJaxName(c.instruction(i)->attrs().op_name)) return &c.instruction(i)->attrs().op_name;
  }
  return nullptr;
}

}  // namespace

namespace {

// The scope of op_name `name` without its last component; for an op XLA combined from several ("jit(f)/(a/x:a/y)",
// the combiners join their op_names), the scope the parts share ("jit(f)/a").
std::string ScopeOfName(std::string_view name) {
  const size_t open = name.find("/(");
  if (open == std::string_view::npos || name.back() != ')') return std::string(name.substr(0, name.rfind('/')));
  std::string_view inner = name.substr(open + 2, name.size() - open - 3);
  std::vector<std::string_view> common;
  bool first = true;
  while (!inner.empty()) {
    const size_t colon = inner.find(':');
    std::string_view part = inner.substr(0, colon);
    inner = colon == std::string_view::npos ? std::string_view() : inner.substr(colon + 1);
    std::vector<std::string_view> path;
    for (size_t at = part.find('/'); at != std::string_view::npos; at = part.find('/')) {
      path.push_back(part.substr(0, at));
      part = part.substr(at + 1);
    }
    if (first) common = path;
    size_t n = 0;
    while (n < common.size() && n < path.size() && common[n] == path[n]) ++n;
    common.resize(n);
    first = false;
  }
  std::string scope(name.substr(0, open));
  for (std::string_view c : common) scope.append(1, '/').append(c);
  return scope;
}

}  // namespace

std::string ScopeOf(const Instruction& ins) {
  const std::string* name = OpNameOf(ins);
  return name == nullptr ? "(no op_name)" : ScopeOfName(*name);
}

}  // namespace spmdsim::hlo
