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
      Verifier::Fail(ins, fmt::format("dimension {} of {} does not divide into the {} members of a group", d, Str(s), n));
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
    Verifier::Fail(ins, fmt::format("its operand must be a {}, not a {}", OpcodeName(start), OpcodeName(s->opcode())));
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
    if (!out.IsTuple() || out.tuple.size() < 2 || !out.tuple[1].Compatible(wrapped->root()->shape())) {
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
        if (x.dims[d] % n != 0) Fail(ins, fmt::format("split dimension {} of {} does not divide into {} members", d, Str(x), n));
      } else if (ins.operand_count() != n) {
        Fail(ins, fmt::format("the tuple form takes one operand per group member ({}), not {}", n, ins.operand_count()));
      }
      ExpectShape(ins, MaybeTuple(OperandShapes(ins)));
      return true;
    }
    case Opcode::kCollectivePermute:
    case Opcode::kCollectivePermuteStart:
      ExpectOperandCount(ins, 1);
      PairsOf(ins, module_.replica_count(), module_.num_partitions());
      if (op == Opcode::kCollectivePermute) {
        ExpectShape(ins, ArrayOperand(ins, 0));
      } else if (!ins.shape().IsTuple() || ins.shape().tuple.size() < 2 ||
                 !ins.shape().tuple[0].Compatible(ArrayOperand(ins, 0)) ||
                 !ins.shape().tuple[1].Compatible(ArrayOperand(ins, 0))) {
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

bool Verifier::VerifyMisc(const Instruction& ins) {
  switch (ins.opcode()) {
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
    case Opcode::kRngBitGenerator: {
      ExpectOperandCount(ins, 1);
      const Shape& state = ArrayOperand(ins, 0);
      const Shape& out = ins.shape();
      if (!out.IsTuple() || out.tuple.size() != 2 || !out.tuple[0].Compatible(state) || !out.tuple[1].IsArray()) {
        Fail(ins, fmt::format("must produce ({}, an array of random bits)", Str(state)));
      }
      return true;
    }
    case Opcode::kCustomCall: {
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
          Fail(ins, fmt::format("TopK of {} must produce (values[..., k], s32[..., k]) with k <= {}", Str(x), x.dims.back()));
        }
        Shape values = Shape::Array(x.dtype, x.dims);
        values.dims.back() = out.tuple[0].dims.back();
        ExpectShape(ins, Shape::Tuple({values, Shape::Array(DType::kI32, values.dims)}));
      }
      return true;
    }
    case Opcode::kTopK: {
      ExpectOperandCount(ins, 1);
      const Shape& x = ArrayOperand(ins, 0);
      if (x.rank() == 0 || ins.attrs().topk_k < 0 || ins.attrs().topk_k > x.dims.back()) {
        Fail(ins, fmt::format("k={} must be from 0 to the last dimension of {}", ins.attrs().topk_k, Str(x)));
      }
      Shape values = Shape::Array(x.dtype, x.dims);
      values.dims.back() = ins.attrs().topk_k;
      ExpectShape(ins, Shape::Tuple({values, Shape::Array(DType::kI32, values.dims)}));
      return true;
    }
    default:
      return false;
  }
}

}  // namespace spmdsim::hlo::internal
