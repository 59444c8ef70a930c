// The verifier's collectives (synchronous, -start/-done and generic async wrappers) and miscellaneous ops.
#include <fmt/ranges.h>

#include "common/error.h"
#include "hlo/groups.h"
#include "hlo/internal/verifier.h"

namespace spmdsim::hlo::internal {
namespace {

Shape MaybeTuple(std::vector<Shape> shapes) {
  return shapes.size() == 1 ? shapes[0] : Shape::Tuple(std::move(shapes));
}

std::vector<Shape> OperandShapes(const Instruction& ins) {
  std::vector<Shape> out;
  for (int64_t i = 0; i < ins.operand_count(); ++i) out.push_back(ArrayOperand(ins, i));
  return out;
}

// The reduction of all-reduce / reduce-scatter: (T, T) -> T for every operand's T.
void ExpectBinaryReducer(const Instruction& ins) {
  for (int64_t i = 0; i < ins.operand_count(); ++i) {
    const Shape scalar = Shape::Array(ArrayOperand(ins, i).dtype, {});
    ExpectSignature(ins, Called(ins, 0, "to_apply="), {scalar, scalar}, scalar, "to_apply");
  }
}

int64_t OneDimension(const Instruction& ins, int rank) {
  if (ins.attrs().dimensions.size() != 1) Verifier::Fail(ins, "dimensions must name one dimension");
  ExpectDims(ins, ins.attrs().dimensions, rank, "dimension");
  return ins.attrs().dimensions[0];
}

// all-gather / reduce-scatter results: dimension d of every operand times (or divided by) the group size n.
std::vector<Shape> ScaledShapes(const Instruction& ins, int64_t n, bool gather) {
  std::vector<Shape> out;
  for (int64_t i = 0; i < ins.operand_count(); ++i) {
    Shape s = ArrayOperand(ins, i);
    const int64_t d = OneDimension(ins, s.rank());
    if (!gather && s.dims[d] % n != 0) {
      Verifier::Fail(ins,
                     fmt::format("dimension {} of {} does not divide into the {} members of a group", d, Str(s), n));
    }
    s.dims[d] = gather ? s.dims[d] * n : s.dims[d] / n;
    s.minor_to_major.clear();
    out.push_back(s);
  }
  return out;
}

void ExpectDoneOf(const Instruction& ins, Opcode start) {
  ExpectOperandCount(ins, 1);
  const Instruction* s = ins.operand(0);
  if (s->opcode() != start) {
    Verifier::Fail(ins, fmt::format("its operand must be {}, not {}", WithArticle(start), WithArticle(s->opcode())));
  }
  if (start == Opcode::kAllReduceStart) {
    ExpectShape(ins, s->shape());
  } else if (!s->shape().IsTuple() || s->shape().tuple.size() < 2) {
    Verifier::Fail(ins, "its start must produce a tuple (operands, results)");
  } else {
    ExpectShape(ins, s->shape().tuple[1]);
  }
}

}  // namespace

void Verifier::VerifyAsync(const Instruction& ins) {
  if (ins.opcode() == Opcode::kAsyncStart) {
    const Computation* wrapped = Called(ins, 0, "calls= (the wrapped computation)");
    std::vector<Shape> params;
    for (const Instruction* o : ins.operands()) params.push_back(o->shape());
    ExpectSignature(ins, wrapped, params, std::nullopt, "the wrapped computation");
    const Shape& out = ins.shape();
    if (!out.IsTuple() || out.tuple.size() < 2 || !SameShape(out.tuple[1], wrapped->root()->shape()) ||
        (out.tuple[0].IsTuple() && !SameShape(out.tuple[0], Shape::Tuple(params)))) {
      Fail(ins, fmt::format("must produce ((operands), {}, ...)", Str(wrapped->root()->shape())));
    }
    return;
  }
  ExpectOperandCount(ins, 1);
  const Opcode from = ins.operand(0)->opcode();
  if (from != Opcode::kAsyncStart && from != Opcode::kAsyncUpdate) {
    Fail(ins, "its operand must be an async-start or async-update");
  }
  const Shape& start = ins.operand(0)->shape();
  ExpectShape(ins, ins.opcode() == Opcode::kAsyncUpdate ? start : start.tuple[1]);
}

bool Verifier::VerifyCollective(const Instruction& ins) {
  const Opcode op = ins.opcode();
  switch (op) {
    case Opcode::kAllReduce:
    case Opcode::kAllReduceStart:
      ExpectOperandsAtLeast(ins, 1);
      GroupSize(ins);
      ExpectBinaryReducer(ins);
      ExpectShape(ins, MaybeTuple(OperandShapes(ins)));
      return true;
    case Opcode::kAllGather:
    case Opcode::kAllGatherStart: {
      ExpectOperandsAtLeast(ins, 1);
      std::vector<Shape> results = ScaledShapes(ins, GroupSize(ins), true);
      if (op == Opcode::kAllGather) {
        ExpectShape(ins, MaybeTuple(results));
      } else {
        ExpectShape(ins, Shape::Tuple({MaybeTuple(OperandShapes(ins)), MaybeTuple(results)}));
      }
      return true;
    }
    case Opcode::kReduceScatter:
      ExpectOperandsAtLeast(ins, 1);
      ExpectBinaryReducer(ins);
      ExpectShape(ins, MaybeTuple(ScaledShapes(ins, GroupSize(ins), false)));
      return true;
    case Opcode::kAllToAll: {
      ExpectOperandsAtLeast(ins, 1);
      const int64_t n = GroupSize(ins);
      if (!ins.attrs().dimensions.empty()) {
        ExpectOperandCount(ins, 1);
        const Shape& x = ArrayOperand(ins, 0);
        const int64_t d = OneDimension(ins, x.rank());
        if (x.dims[d] % n != 0)
          Fail(ins, fmt::format("split dimension {} of {} does not divide into {} members", d, Str(x), n));
      } else if (ins.operand_count() != n) {
        Fail(ins,
             fmt::format("the tuple form takes one operand per group member ({}), not {}", n, ins.operand_count()));
      }
      ExpectShape(ins, MaybeTuple(OperandShapes(ins)));
      return true;
    }
    case Opcode::kCollectivePermute:
    case Opcode::kCollectivePermuteStart:
      ExpectOperandsAtLeast(ins, 1);
      PairsOf(ins, module_.replica_count(), module_.num_partitions());
      if (ins.operand_count() > 1) {
        // The combined form (one permute of several arrays) and the in-place form (operand, output buffer, start
        // indices, with slice_sizes): shapes are XLA's to check.
        return true;
      }
      if (op == Opcode::kCollectivePermute) {
        ExpectShape(ins, ArrayOperand(ins, 0));
      } else if (!ins.shape().IsTuple() || ins.shape().tuple.size() < 2 ||
                 !SameShape(ins.shape().tuple[0], ArrayOperand(ins, 0)) ||
                 !SameShape(ins.shape().tuple[1], ArrayOperand(ins, 0))) {
        Fail(ins, "must produce (operand, result, ...) of the operand's shape");
      }
      return true;
    case Opcode::kCollectiveBroadcast:
      ExpectOperandCount(ins, 1);
      GroupSize(ins);
      ExpectShape(ins, ArrayOperand(ins, 0));
      return true;
    case Opcode::kAllReduceDone: ExpectDoneOf(ins, Opcode::kAllReduceStart); return true;
    case Opcode::kAllGatherDone: ExpectDoneOf(ins, Opcode::kAllGatherStart); return true;
    case Opcode::kCollectivePermuteDone: ExpectDoneOf(ins, Opcode::kCollectivePermuteStart); return true;
    case Opcode::kAsyncStart:
    case Opcode::kAsyncUpdate:
    case Opcode::kAsyncDone:
      VerifyAsync(ins);
      return true;
    default:
      return false;
  }
}

// copy-start -> (destination, source, u32[] context): the destination in another memory space (TPU prefetches);
// copy-done -> the destination.
void Verifier::VerifyCopyStart(const Instruction& ins) {
  ExpectOperandCount(ins, 1);
  if (ins.opcode() == Opcode::kCopyStart) {
    const Shape& x = ins.operand(0)->shape();
    const Shape& out = ins.shape();
    if (!out.IsTuple() || out.tuple.size() != 3 || !SameShape(out.tuple[0], x) || !SameShape(out.tuple[1], x) ||
        !SameShape(out.tuple[2], Shape::Array(DType::kU32, {}))) {
      Fail(ins,
           fmt::format("must produce ({0}, {0}, u32[]) (destination, source, context), not {1}", Str(x), Str(out)));
    }
    return;
  }
  const Instruction* start = ins.operand(0);
  if (start->opcode() != Opcode::kCopyStart) {
    Fail(ins, fmt::format("its operand must be a copy-start, not {}", WithArticle(start->opcode())));
  }
  ExpectShape(ins, start->shape().tuple[0]);
}

// send(data, token) and recv(token) -> (data, u32[] context, token[]); send-done -> token[]; recv-done ->
// (data, token[]) (xla/service/hlo_verifier.cc HandleSend ... HandleRecvDone).
void Verifier::VerifySendRecv(const Instruction& ins) {
  const Shape token = Shape::Token();
  const Shape context = Shape::Array(DType::kU32, {});
  auto is_channel_tuple = [&](const Shape& s) {
    return s.IsTuple() && s.tuple.size() == 3 && SameShape(s.tuple[1], context) && s.tuple[2].IsToken();
  };
  switch (ins.opcode()) {
    case Opcode::kSend: {
      ExpectOperandCount(ins, 2);
      if (!ins.operand(1)->shape().IsToken()) Fail(ins, "its second operand must be a token");
      ExpectShape(ins, Shape::Tuple({ins.operand(0)->shape(), context, token}));
      return;
    }
    case Opcode::kRecv:
      ExpectOperandCount(ins, 1);
      if (!ins.operand(0)->shape().IsToken()) Fail(ins, "its operand must be a token");
      if (!is_channel_tuple(ins.shape()))
        Fail(ins, fmt::format("must produce (data, u32[], token[]), not {}", Str(ins.shape())));
      return;
    case Opcode::kSendDone:
    case Opcode::kRecvDone: {
      ExpectOperandCount(ins, 1);
      const Shape& from = ins.operand(0)->shape();
      const char* start = ins.opcode() == Opcode::kSendDone ? "send" : "recv";
      if (!is_channel_tuple(from))
        Fail(ins, fmt::format("its operand must be a {} ((data, u32[], token[])), not {}", start, Str(from)));
      ExpectShape(ins, ins.opcode() == Opcode::kSendDone ? token : Shape::Tuple({from.tuple[0], token}));
      return;
    }
    default:
      return;
  }
}

void Verifier::VerifyAfterAll(const Instruction& ins) {
  for (int64_t i = 0; i < ins.operand_count(); ++i) {
    if (!ins.operand(i)->shape().IsToken())
      Fail(ins, fmt::format("operand {} is {}; after-all takes tokens", i, Str(ins.operand(i)->shape())));
  }
  ExpectShape(ins, Shape::Token());
}

void Verifier::VerifyReducePrecision(const Instruction& ins) {
  ExpectOperandCount(ins, 1);
  const Shape& x = ArrayOperand(ins, 0);
  if (!IsFloating(x.dtype)) Fail(ins, fmt::format("needs a floating-point operand, not {}", HloTypeName(x.dtype)));
  if (ins.attrs().exponent_bits < 1 || ins.attrs().mantissa_bits < 0) {
    Fail(ins, fmt::format("exponent_bits={} must be >= 1 and mantissa_bits={} >= 0", ins.attrs().exponent_bits,
                          ins.attrs().mantissa_bits));
  }
  ExpectShape(ins, x);
}

void Verifier::VerifyGetDimensionSize(const Instruction& ins) {
  ExpectOperandCount(ins, 1);
  const Shape& x = ArrayOperand(ins, 0);
  if (ins.attrs().dimensions.size() != 1) Fail(ins, "dimensions must name one dimension");
  ExpectDims(ins, ins.attrs().dimensions, x.rank(), "dimension");
  ExpectShape(ins, Shape::Array(DType::kI32, {}));
}

void Verifier::VerifyRngBitGenerator(const Instruction& ins) {
  ExpectOperandCount(ins, 1);
  const Shape& state = ArrayOperand(ins, 0);
  const Shape& out = ins.shape();
  if (!out.IsTuple() || out.tuple.size() != 2 || !out.tuple[0].Compatible(state) || !out.tuple[1].IsArray()) {
    Fail(ins, fmt::format("must produce ({}, an array of random bits)", Str(state)));
  }
}

// Custom-calls with a meaning spmdsim knows (Sharding, TopK); any other target has whatever shapes it has.
void Verifier::VerifyCustomCall(const Instruction& ins) {
  const std::string& target = ins.attrs().custom_call_target;
  if (target == "Sharding") {
    ExpectOperandCount(ins, 1);
    ExpectShape(ins, ins.operand(0)->shape());
  } else if (target == "TopK") {
    ExpectOperandCount(ins, 1);
    const Shape& x = ArrayOperand(ins, 0);
    const Shape& out = ins.shape();
    if (x.rank() == 0 || !out.IsTuple() || out.tuple.size() != 2 || !out.tuple[0].IsArray() ||
        out.tuple[0].rank() != x.rank() || out.tuple[0].dims.back() > x.dims.back()) {
      Fail(ins, fmt::format("TopK of {} must produce (values[..., k], s32[..., k]) with k <= {}", Str(x),
                            x.dims.back()));
    }
    Shape values = Shape::Array(x.dtype, x.dims);
    values.dims.back() = out.tuple[0].dims.back();
    ExpectShape(ins, Shape::Tuple({values, Shape::Array(DType::kI32, values.dims)}));
  }
}

void Verifier::VerifyTopK(const Instruction& ins) {
  ExpectOperandCount(ins, 1);
  const Shape& x = ArrayOperand(ins, 0);
  if (x.rank() == 0 || ins.attrs().topk_k < 0 || ins.attrs().topk_k > x.dims.back()) {
    Fail(ins, fmt::format("k={} must be from 0 to the last dimension of {}", ins.attrs().topk_k, Str(x)));
  }
  Shape values = Shape::Array(x.dtype, x.dims);
  values.dims.back() = ins.attrs().topk_k;
  ExpectShape(ins, Shape::Tuple({values, Shape::Array(DType::kI32, values.dims)}));
}

bool Verifier::VerifyMisc(const Instruction& ins) {
  switch (ins.opcode()) {
    case Opcode::kCopyStart: case Opcode::kCopyDone: VerifyCopyStart(ins); return true;
    case Opcode::kSend: case Opcode::kRecv: case Opcode::kSendDone: case Opcode::kRecvDone:
      VerifySendRecv(ins);
      return true;
    case Opcode::kAfterAll: VerifyAfterAll(ins); return true;
    case Opcode::kReducePrecision: VerifyReducePrecision(ins); return true;
    case Opcode::kGetDimensionSize: VerifyGetDimensionSize(ins); return true;
    case Opcode::kPartitionId:
    case Opcode::kReplicaId:
      ExpectOperandCount(ins, 0);
      ExpectShape(ins, Shape::Array(DType::kU32, {}));
      return true;
    case Opcode::kCopy:
    case Opcode::kOptimizationBarrier:
    case Opcode::kDomain:
      ExpectOperandCount(ins, 1);
      ExpectShape(ins, ins.operand(0)->shape());
      return true;
    case Opcode::kAddDependency:
      ExpectOperandCount(ins, 2);
      ExpectShape(ins, ins.operand(0)->shape());
      return true;
    case Opcode::kRngBitGenerator: VerifyRngBitGenerator(ins); return true;
    case Opcode::kCustomCall: VerifyCustomCall(ins); return true;
    case Opcode::kTopK: VerifyTopK(ins); return true;
    default:
      return false;
  }
}

}  // namespace spmdsim::hlo::internal
