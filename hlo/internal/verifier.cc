// The verifier's driver, its helpers, and the elementwise, shape, data-movement and control-flow families
// (the others are in verify_ops.cc and verify_collectives.cc).
#include "hlo/internal/verifier.h"

#include <algorithm>
#include <numeric>

#include <fmt/ranges.h>

#include "common/error.h"

namespace spmdsim::hlo {

namespace internal {

namespace {

// Whether the verification running on this thread allows mixed precision (set by Verifier for its duration).
thread_local bool mixed_precision_allowed = false;

class ScopedPrecision {
 public:
  explicit ScopedPrecision(bool allow) : saved_(mixed_precision_allowed) { mixed_precision_allowed = allow; }
  ~ScopedPrecision() { mixed_precision_allowed = saved_; }
  ScopedPrecision(const ScopedPrecision&) = delete;
  ScopedPrecision& operator=(const ScopedPrecision&) = delete;

 private:
  bool saved_;
};

}  // namespace

bool SameShape(const Shape& a, const Shape& b) {
  return mixed_precision_allowed ? a.CompatibleIgnoringFpPrecision(b) : a.Compatible(b);
}

bool SameType(DType a, DType b) { return a == b || (mixed_precision_allowed && IsFloating(a) && IsFloating(b)); }

void Verifier::Fail(const Instruction& ins, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}: %{} ({}): {}", ins.Where(), ins.name(), OpcodeName(ins.opcode()), message));
}

std::string Str(const Shape& shape) { return shape.ToString(); }

std::string WithArticle(Opcode opcode) {
  const std::string_view name = OpcodeName(opcode);
  const bool vowel = std::string_view("aeiou").find(name.front()) != std::string_view::npos;
  return fmt::format("{} {}", vowel ? "an" : "a", name);
}

void ExpectOperandCount(const Instruction& ins, int64_t n) {
  if (ins.operand_count() != n) {
    Verifier::Fail(ins, fmt::format("takes {} operand{}, not {}", n, n == 1 ? "" : "s", ins.operand_count()));
  }
}

void ExpectOperandsAtLeast(const Instruction& ins, int64_t n) {
  if (ins.operand_count() < n)
    Verifier::Fail(ins, fmt::format("takes at least {} operands, not {}", n, ins.operand_count()));
}

const Shape& ArrayOperand(const Instruction& ins, int64_t i) {
  const Shape& s = ins.operand(i)->shape();
  if (!s.IsArray()) Verifier::Fail(ins, fmt::format("operand {} is {}; an array is needed", i, Str(s)));
  return s;
}

void ExpectShape(const Instruction& ins, const Shape& expected) {
  if (!SameShape(ins.shape(), expected)) {
    Verifier::Fail(ins, fmt::format("declared shape {} does not match {} (from its operands and attributes)",
                                    Str(ins.shape()), Str(expected)));
  }
}

const Computation* Called(const Instruction& ins, size_t i, std::string_view role) {
  if (ins.called().size() <= i) Verifier::Fail(ins, fmt::format("needs {}", role));
  return ins.called()[i];
}

void ExpectSignature(const Instruction& ins, const Computation* c, const std::vector<Shape>& params,
                     const std::optional<Shape>& result, std::string_view role) {
  if (c == nullptr) Verifier::Fail(ins, fmt::format("needs {}", role));
  if (c->parameter_count() != static_cast<int64_t>(params.size())) {
    Verifier::Fail(ins, fmt::format("{} %{} takes {} parameters; {} are needed", role, c->name(),
                                    c->parameter_count(), params.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (!SameShape(c->parameter(static_cast<int64_t>(i))->shape(), params[i])) {
      Verifier::Fail(ins, fmt::format("{} %{} parameter {} is {}; {} is needed", role, c->name(), i,
                                      Str(c->parameter(static_cast<int64_t>(i))->shape()), Str(params[i])));
    }
  }
  if (result.has_value() && !SameShape(c->root()->shape(), *result)) {
    Verifier::Fail(ins, fmt::format("{} %{} returns {}; {} is needed", role, c->name(), Str(c->root()->shape()),
                                    Str(*result)));
  }
}

void ExpectDims(const Instruction& ins, const std::vector<int64_t>& dims, int64_t rank, std::string_view what) {
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank) Verifier::Fail(ins, fmt::format("{} {} is outside 0..{}", what, d, rank - 1));
    if (seen[d]) Verifier::Fail(ins, fmt::format("{} {} is given twice", what, d));
    seen[d] = true;
  }
}

std::vector<Shape> ScalarShapes(const std::vector<DType>& dtypes) {
  std::vector<Shape> out;
  for (DType d : dtypes) out.push_back(Shape::Array(d, {}));
  return out;
}

namespace {

bool FloatOnly(Opcode op) {
  switch (op) {
    case Opcode::kCbrt: case Opcode::kCeil: case Opcode::kCos: case Opcode::kErf: case Opcode::kExp:
    case Opcode::kExpm1: case Opcode::kFloor: case Opcode::kIsFinite: case Opcode::kLog: case Opcode::kLog1p:
    case Opcode::kLogistic: case Opcode::kRoundNearestAfz: case Opcode::kRoundNearestEven: case Opcode::kRsqrt:
    case Opcode::kSin: case Opcode::kSqrt: case Opcode::kTan: case Opcode::kTanh: case Opcode::kAtan2:
    case Opcode::kAcos: case Opcode::kAcosh: case Opcode::kAsin: case Opcode::kAsinh: case Opcode::kAtan:
    case Opcode::kAtanh: case Opcode::kCosh: case Opcode::kSinh:
      return true;
    default:
      return false;
  }
}

bool IntOrPredOnly(Opcode op) {
  return op == Opcode::kNot || op == Opcode::kAnd || op == Opcode::kOr || op == Opcode::kXor;
}

bool IntOnly(Opcode op) {
  return op == Opcode::kPopulationCount || op == Opcode::kClz || op == Opcode::kShiftLeft || op == Opcode::kMulhi ||
         op == Opcode::kShiftRightArithmetic || op == Opcode::kShiftRightLogical;
}

void ExpectTypeFits(const Instruction& ins, DType t) {
  const Opcode op = ins.opcode();
  const bool is_float = IsFloating(t) || IsComplex(t);
  if (FloatOnly(op) && !is_float) {
    Verifier::Fail(ins, fmt::format("needs a floating-point operand, not {}", HloTypeName(t)));
  }
  if (IntOrPredOnly(op) && !IsInteger(t) && t != DType::kBool) {
    Verifier::Fail(ins, fmt::format("needs an integer or pred operand, not {}", HloTypeName(t)));
  }
  if (IntOnly(op) && !IsInteger(t))
    Verifier::Fail(ins, fmt::format("needs an integer operand, not {}", HloTypeName(t)));
}

DType ComplexPart(DType t) { return t == DType::kC64 ? DType::kF32 : t == DType::kC128 ? DType::kF64 : t; }

}  // namespace

void Verifier::VerifyUnary(const Instruction& ins) {
  ExpectOperandCount(ins, 1);
  const Shape& x = ArrayOperand(ins, 0);
  ExpectTypeFits(ins, x.dtype);
  DType out = x.dtype;
  if (ins.opcode() == Opcode::kIsFinite) out = DType::kBool;
  if (ins.opcode() == Opcode::kReal || ins.opcode() == Opcode::kImag || ins.opcode() == Opcode::kAbs) {
    out = ComplexPart(x.dtype);
  }
  ExpectShape(ins, Shape::Array(out, x.dims));
}

void Verifier::VerifyBinary(const Instruction& ins) {
  ExpectOperandCount(ins, 2);
  const Shape& a = ArrayOperand(ins, 0);
  const Shape& b = ArrayOperand(ins, 1);
  if (!SameShape(a, b)) {
    Fail(ins, fmt::format("operands have shapes {} and {}; elementwise operands need one shape (broadcast first)",
                          Str(a), Str(b)));
  }
  ExpectTypeFits(ins, a.dtype);
  DType out = a.dtype;
  if (ins.opcode() == Opcode::kCompare) out = DType::kBool;
  if (ins.opcode() == Opcode::kComplex) out = a.dtype == DType::kF64 ? DType::kC128 : DType::kC64;
  ExpectShape(ins, Shape::Array(out, a.dims));
}

bool Verifier::VerifyElementwise(const Instruction& ins) {
  const Opcode op = ins.opcode();
  if (IsElementwiseUnary(op)) {
    VerifyUnary(ins);
  } else if (IsElementwiseBinary(op)) {
    VerifyBinary(ins);
  } else if (op == Opcode::kSelect) {
    ExpectOperandCount(ins, 3);
    const Shape& p = ArrayOperand(ins, 0);
    const Shape& t = ArrayOperand(ins, 1);
    if (p.dtype != DType::kBool) Fail(ins, fmt::format("the predicate is {}; it must be pred", Str(p)));
    if (!SameShape(t, ArrayOperand(ins, 2))) Fail(ins, "on_true and on_false must have one shape");
    if (p.rank() != 0 && p.dims != t.dims) Fail(ins, "the predicate must be a scalar or have the operands' dimensions");
    ExpectShape(ins, t);
  } else if (op == Opcode::kClamp) {
    ExpectOperandCount(ins, 3);
    const Shape& x = ArrayOperand(ins, 1);
    for (int64_t i : {0, 2}) {
      const Shape& bound = ArrayOperand(ins, i);
      if (!SameType(bound.dtype, x.dtype) || (bound.rank() != 0 && bound.dims != x.dims)) {
        Fail(ins, fmt::format("bound {} is {}; a scalar or {} of {} is needed", i, Str(bound), Str(x),
                              HloTypeName(x.dtype)));
      }
    }
    ExpectShape(ins, x);
  } else if (op == Opcode::kConvert || op == Opcode::kStochasticConvert) {
    ExpectOperandsAtLeast(ins, 1);
    const Shape& x = ArrayOperand(ins, 0);
    if (!ins.shape().IsArray() || ins.shape().dims != x.dims)
      Fail(ins, fmt::format("must keep the dimensions of {}", Str(x)));
  } else {
    return false;
  }
  return true;
}

void Verifier::VerifyBroadcast(const Instruction& ins) {
  const Attributes& a = ins.attrs();
  ExpectOperandCount(ins, 1);
  const Shape& x = ArrayOperand(ins, 0);
  const Shape& out = ins.shape();
  if (!out.IsArray() || !SameType(out.dtype, x.dtype))
    Fail(ins, fmt::format("must keep the element type of {}", Str(x)));
  if (static_cast<int>(a.dimensions.size()) != x.rank()) {
    Fail(ins,
         fmt::format("dimensions has {} entries; the operand {} has rank {}", a.dimensions.size(), Str(x), x.rank()));
  }
  ExpectDims(ins, a.dimensions, out.rank(), "broadcast dimension");
  for (int i = 0; i < x.rank(); ++i) {
    if (out.dims[a.dimensions[i]] != x.dims[i]) {
      Fail(ins, fmt::format("operand dimension {} (size {}) maps to output dimension {} of size {}", i, x.dims[i],
                            a.dimensions[i], out.dims[a.dimensions[i]]));
    }
  }
}

void Verifier::VerifyBitcastConvert(const Instruction& ins) {
  ExpectOperandCount(ins, 1);
  const Shape& x = ArrayOperand(ins, 0);
  const Shape& out = ins.shape();
  if (!out.IsArray()) Fail(ins, "must produce an array");
  const int64_t in_size = DTypeSize(x.dtype), out_size = DTypeSize(out.dtype);
  std::vector<int64_t> dims = x.dims;
  if (in_size > out_size) dims.push_back(in_size / out_size);
  if (in_size < out_size) {
    if (x.rank() == 0 || x.dims.back() != out_size / in_size) {
      Fail(ins,
           fmt::format("{} to {} needs a last dimension of {}", Str(x), HloTypeName(out.dtype), out_size / in_size));
    }
    dims.pop_back();
  }
  ExpectShape(ins, Shape::Array(out.dtype, dims));
}

void Verifier::VerifyDynamicSlice(const Instruction& ins) {
  const Attributes& a = ins.attrs();
  const bool update = ins.opcode() == Opcode::kDynamicUpdateSlice;
  ExpectOperandsAtLeast(ins, 1);
  const Shape& x = ArrayOperand(ins, 0);
  const int first_index = update ? 2 : 1;
  ExpectOperandCount(ins, first_index + x.rank());
  for (int i = first_index; i < ins.operand_count(); ++i) {
    const Shape& idx = ArrayOperand(ins, i);
    if (idx.rank() != 0 || !IsInteger(idx.dtype))
      Fail(ins, fmt::format("index operand {} is {}; an integer scalar is needed", i, Str(idx)));
  }
  const std::vector<int64_t>& sizes = update ? ArrayOperand(ins, 1).dims : a.dynamic_slice_sizes;
  if (update && !SameType(ArrayOperand(ins, 1).dtype, x.dtype))
    Fail(ins, "the update must have the operand's element type");
  if (static_cast<int>(sizes.size()) != x.rank()) Fail(ins, fmt::format("needs {} slice sizes", x.rank()));
  for (int i = 0; i < x.rank(); ++i) {
    if (sizes[i] < 0 || sizes[i] > x.dims[i]) {
      Fail(ins, fmt::format("size {} of dimension {} exceeds the operand's {}", sizes[i], i, x.dims[i]));
    }
  }
  ExpectShape(ins, update ? x : Shape::Array(x.dtype, sizes));
}

void Verifier::VerifyPad(const Instruction& ins) {
  const Attributes& a = ins.attrs();
  ExpectOperandCount(ins, 2);
  const Shape& x = ArrayOperand(ins, 0);
  const Shape& v = ArrayOperand(ins, 1);
  if (v.rank() != 0 || !SameType(v.dtype, x.dtype))
    Fail(ins, fmt::format("the padding value must be a {} scalar", HloTypeName(x.dtype)));
  if (static_cast<int>(a.padding.size()) != x.rank()) Fail(ins, fmt::format("padding needs {} dimensions", x.rank()));
  std::vector<int64_t> dims;
  for (int i = 0; i < x.rank(); ++i) {
    const PadDim& p = a.padding[i];
    const int64_t n = p.low + p.high + x.dims[i] + std::max<int64_t>(x.dims[i] - 1, 0) * p.interior;
    if (n < 0) Fail(ins, fmt::format("padding of dimension {} leaves a negative size {}", i, n));
    dims.push_back(n);
  }
  ExpectShape(ins, Shape::Array(x.dtype, dims));
}

bool Verifier::VerifyShapeOp(const Instruction& ins) {
  const Attributes& a = ins.attrs();
  switch (ins.opcode()) {
    case Opcode::kBroadcast:
      VerifyBroadcast(ins);
      return true;
    case Opcode::kReshape: {
      ExpectOperandCount(ins, 1);
      const Shape& x = ArrayOperand(ins, 0);
      if (!ins.shape().IsArray() || !SameType(ins.shape().dtype, x.dtype) ||
          ins.shape().NumElements() != x.NumElements()) {
        Fail(ins, fmt::format("{} has {} elements of {}; the result must have as many of the same type", Str(x),
                              x.NumElements(), HloTypeName(x.dtype)));
      }
      return true;
    }
    case Opcode::kBitcast: {
      ExpectOperandCount(ins, 1);
      const Shape& x = ArrayOperand(ins, 0);
      // XLA's ShapeVerifier compares the sizes with the backend's shape size: with a TPU layout, the tiled size.
      if (!ins.shape().IsArray() || ins.shape().PhysicalByteSize() != x.PhysicalByteSize()) {
        Fail(ins, fmt::format("{} holds {} bytes; a bitcast must keep them", x.ToString(x.HasLayoutItems()),
                              x.PhysicalByteSize()));
      }
      return true;
    }
    case Opcode::kTranspose: {
      ExpectOperandCount(ins, 1);
      const Shape& x = ArrayOperand(ins, 0);
      if (static_cast<int>(a.dimensions.size()) != x.rank())
        Fail(ins, "dimensions must be a permutation of the operand's");
      ExpectDims(ins, a.dimensions, x.rank(), "transpose dimension");
      std::vector<int64_t> dims;
      for (int64_t d : a.dimensions) dims.push_back(x.dims[d]);
      ExpectShape(ins, Shape::Array(x.dtype, dims));
      return true;
    }
    case Opcode::kReverse: {
      ExpectOperandCount(ins, 1);
      ExpectDims(ins, a.dimensions, ArrayOperand(ins, 0).rank(), "reverse dimension");
      ExpectShape(ins, ins.operand(0)->shape());
      return true;
    }
    case Opcode::kBitcastConvert:
      VerifyBitcastConvert(ins);
      return true;
    case Opcode::kIota: {
      ExpectOperandCount(ins, 0);
      if (!ins.shape().IsArray() || ins.shape().rank() == 0) Fail(ins, "must produce an array of rank >= 1");
      if (a.iota_dimension < 0 || a.iota_dimension >= ins.shape().rank()) {
        Fail(ins, fmt::format("iota_dimension {} is outside 0..{}", a.iota_dimension, ins.shape().rank() - 1));
      }
      return true;
    }
    default:
      return false;
  }
}

bool Verifier::VerifyDataMovement(const Instruction& ins) {
  const Attributes& a = ins.attrs();
  switch (ins.opcode()) {
    case Opcode::kSlice: {
      ExpectOperandCount(ins, 1);
      const Shape& x = ArrayOperand(ins, 0);
      if (static_cast<int>(a.slice.size()) != x.rank()) Fail(ins, fmt::format("slice needs {} dimensions", x.rank()));
      std::vector<int64_t> dims;
      for (int i = 0; i < x.rank(); ++i) {
        const SliceDim& s = a.slice[i];
        if (s.start < 0 || s.start > s.limit || s.limit > x.dims[i] || s.stride < 1) {
          Fail(ins, fmt::format("slice [{}:{}:{}] of dimension {} (size {}) needs 0 <= start <= limit <= size, "
                                "stride >= 1", s.start, s.limit, s.stride, i, x.dims[i]));
        }
        dims.push_back((s.limit - s.start + s.stride - 1) / s.stride);
      }
      ExpectShape(ins, Shape::Array(x.dtype, dims));
      return true;
    }
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice:
      VerifyDynamicSlice(ins);
      return true;
    case Opcode::kConcatenate: {
      ExpectOperandsAtLeast(ins, 1);
      const Shape& first = ArrayOperand(ins, 0);
      if (a.dimensions.size() != 1) Fail(ins, "dimensions must name one dimension");
      const int64_t d = a.dimensions[0];
      ExpectDims(ins, a.dimensions, first.rank(), "concatenate dimension");
      std::vector<int64_t> dims = first.dims;
      dims[d] = 0;
      for (int64_t i = 0; i < ins.operand_count(); ++i) {
        const Shape& x = ArrayOperand(ins, i);
        std::vector<int64_t> a_dims = x.dims, f_dims = first.dims;
        if (x.rank() == first.rank()) a_dims[d] = f_dims[d] = 0;
        if (!SameType(x.dtype, first.dtype) || a_dims != f_dims) {
          Fail(ins, fmt::format("operand {} is {}; every operand must be {} except along dimension {}", i, Str(x),
                                Str(first), d));
        }
        dims[d] += x.dims[d];
      }
      ExpectShape(ins, Shape::Array(first.dtype, dims));
      return true;
    }
    case Opcode::kPad:
      VerifyPad(ins);
      return true;
    default:
      return false;
  }
}

bool Verifier::VerifyControlFlow(const Instruction& ins) {
  switch (ins.opcode()) {
    case Opcode::kTuple: {
      std::vector<Shape> elements;
      for (const Instruction* o : ins.operands()) elements.push_back(o->shape());
      ExpectShape(ins, Shape::Tuple(elements));
      return true;
    }
    case Opcode::kGetTupleElement: {
      ExpectOperandCount(ins, 1);
      const Shape& t = ins.operand(0)->shape();
      if (!t.IsTuple()) Fail(ins, fmt::format("the operand is {}, not a tuple", Str(t)));
      if (ins.attrs().index < 0 || ins.attrs().index >= static_cast<int64_t>(t.tuple.size())) {
        Fail(ins, fmt::format("index {} is outside the tuple's {} elements", ins.attrs().index, t.tuple.size()));
      }
      ExpectShape(ins, t.tuple[ins.attrs().index]);
      return true;
    }
    case Opcode::kCall:
    case Opcode::kFusion: {
      std::vector<Shape> params;
      for (const Instruction* o : ins.operands()) params.push_back(o->shape());
      if (ins.called().size() != 1) Fail(ins, "calls= must name one computation");
      ExpectSignature(ins, ins.called()[0], params, ins.shape(), "the called computation");
      return true;
    }
    case Opcode::kWhile: {
      ExpectOperandCount(ins, 1);
      const Shape& state = ins.operand(0)->shape();
      if (ins.called().size() != 2) Fail(ins, "needs condition= and body=");
      ExpectSignature(ins, ins.called()[0], {state}, Shape::Array(DType::kBool, {}), "condition");
      ExpectSignature(ins, ins.called()[1], {state}, state, "body");
      ExpectShape(ins, state);
      return true;
    }
    case Opcode::kConditional: {
      ExpectOperandsAtLeast(ins, 1);
      const Shape& selector = ArrayOperand(ins, 0);
      const bool is_pred = selector.dtype == DType::kBool;
      if (selector.rank() != 0 || (!is_pred && selector.dtype != DType::kI32))
        Fail(ins, "the selector must be pred[] or s32[]");
      const size_t branches = ins.called().size();
      if (branches == 0 || (is_pred && branches != 2) || static_cast<int64_t>(branches) + 1 != ins.operand_count()) {
        Fail(ins, fmt::format("has {} branches and {} branch operands; each branch takes one (pred: exactly two)",
                              branches, ins.operand_count() - 1));
      }
      for (size_t b = 0; b < branches; ++b) {
        ExpectSignature(ins, ins.called()[b], {ins.operand(static_cast<int64_t>(b) + 1)->shape()}, ins.shape(),
                        fmt::format("branch {}", b));
      }
      return true;
    }
    case Opcode::kMap: {
      ExpectOperandsAtLeast(ins, 1);
      std::vector<DType> types;
      for (int64_t i = 0; i < ins.operand_count(); ++i) {
        if (ArrayOperand(ins, i).dims != ArrayOperand(ins, 0).dims) Fail(ins, "map operands must have one dimensions");
        types.push_back(ins.operand(i)->shape().dtype);
      }
      ExpectSignature(ins, Called(ins, 0, "to_apply="), ScalarShapes(types), std::nullopt, "to_apply");
      const Shape& r = ins.called()[0]->root()->shape();
      if (!r.IsArray() || r.rank() != 0) Fail(ins, "to_apply must return a scalar");
      ExpectShape(ins, Shape::Array(r.dtype, ArrayOperand(ins, 0).dims));
      return true;
    }
    default:
      return false;
  }
}

void Verifier::VerifyEntryParameters() {
  const Computation* entry = module_.entry();
  const auto& layouts = module_.entry_parameter_layouts();
  if (!layouts.empty() && static_cast<int64_t>(layouts.size()) != entry->parameter_count()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: entry_computation_layout lists {} parameters; %{} has {}", module_.Where({1, 1}),
                            layouts.size(), entry->name(), entry->parameter_count()));
  }
  for (size_t i = 0; i < layouts.size(); ++i) {
    const Instruction* p = entry->parameter(static_cast<int64_t>(i));
    if (!SameShape(p->shape(), layouts[i])) {
      Fail(*p, fmt::format("is {}; entry_computation_layout says {}", Str(p->shape()), Str(layouts[i])));
    }
  }
  const auto& result = module_.entry_result_layout();
  if (result.has_value() && !SameShape(entry->root()->shape(), *result)) {
    Fail(*entry->root(), fmt::format("is {}; entry_computation_layout says the result is {}",
                                     Str(entry->root()->shape()), Str(*result)));
  }
}

// A sharding fits its value: a tiled one tiles the array's rank (plus its subgroup dimensions) with distinct
// devices; a tuple one has one sharding per leaf (XLA's HloSharding::Validate). Device ids are not bounded by the
// module's device count: a multi-slice TPU module (one slice's program) shards its parameters over every slice's
// devices.
void Verifier::VerifySharding(const Instruction& ins) {
  std::vector<const Shape*> leaves;
  const auto collect = [&](const auto& self, const Shape& s) -> void {
    if (!s.IsTuple()) {
      leaves.push_back(&s);
      return;
    }
    for (const Shape& e : s.tuple) self(self, e);
  };
  collect(collect, ins.shape());
  const Sharding& sharding = *ins.attrs().sharding;
  if (sharding.kind == Sharding::Kind::kTuple && sharding.tuple.size() != leaves.size()) {
    Fail(ins, fmt::format("sharding {} has {} elements; the value {} has {} leaves", sharding.ToString(),
                          sharding.tuple.size(), Str(ins.shape()), leaves.size()));
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Sharding& s = sharding.kind == Sharding::Kind::kTuple ? sharding.tuple[i] : sharding;
    const Shape& leaf = *leaves[i];
    if (s.kind == Sharding::Kind::kTuple)
      Fail(ins, fmt::format("sharding {} nests a tuple sharding", sharding.ToString()));
    if (s.kind != Sharding::Kind::kTiled || leaf.IsToken()) continue;
    const int data_dims = static_cast<int>(s.tile_dims.size()) - s.subgroup_dims;
    if (data_dims != leaf.rank()) {
      Fail(ins,
           fmt::format("sharding {} tiles {} dimensions; {} has {}", s.ToString(), data_dims, Str(leaf), leaf.rank()));
    }
    std::vector<int64_t> sorted = s.tile_devices;
    std::sort(sorted.begin(), sorted.end());
    for (size_t k = 0; k < sorted.size(); ++k) {
      if (sorted[k] < 0) Fail(ins, fmt::format("sharding {} names device {}", s.ToString(), sorted[k]));
      if (k > 0 && sorted[k] == sorted[k - 1])
        Fail(ins, fmt::format("sharding {} names device {} twice", s.ToString(), sorted[k]));
    }
  }
}

void Verifier::VerifyInstruction(const Instruction& ins) {
  VerifyElementwise(ins) || VerifyShapeOp(ins) || VerifyDataMovement(ins) || VerifyControlFlow(ins) ||
      VerifyReduction(ins) || VerifyWindowed(ins) || VerifyContraction(ins) || VerifyIndexing(ins) ||
      VerifyCollective(ins) || VerifyMisc(ins);
  if (ins.attrs().sharding.has_value()) VerifySharding(ins);
}

void Verifier::VerifyOne(const Instruction& ins) {
  const ScopedPrecision precision(allow_mixed_precision_);
  VerifyInstruction(ins);
}

void Verifier::Run() {
  const ScopedPrecision precision(allow_mixed_precision_);
  for (int64_t c = 0; c < module_.computation_count(); ++c) {
    const Computation* comp = module_.computation(c);
    for (int64_t i = 0; i < comp->instruction_count(); ++i) VerifyInstruction(*comp->instruction(i));
  }
  VerifyEntryParameters();
}

}  // namespace internal

}  // namespace spmdsim::hlo
