#include "ops/elementwise.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "ops/internal/kernels.h"

namespace spmdsim {

using ops_internal::CheckValid;
using ops_internal::ComputeBuffer;
using ops_internal::IsStorageOf;
using ops_internal::NewResult;
using ops_internal::ReportCost;
using ops_internal::VaryingUnion;
using ops_internal::VisitCompute;
using ops_internal::WithVaryingAxes;

namespace {

int Rank(DType d) {  // position in JAX's (non-weak) lattice, for the cases PromoteTypes handles by order
  switch (d) {
    case DType::kBool: return 0;
    case DType::kI32: return 1;
    case DType::kI64: return 2;
    case DType::kBF16: return 3;
    case DType::kF16: return 3;
    case DType::kF32: return 4;
    case DType::kF64: return 5;
    default: break;  // not an array dtype
  }
  return 0;
}

// An operand read at output element i: a scalar (step 0) or a contiguous run of C at the output's shape.
template <typename C>
class Operand {
 public:
  Operand(const Array& a, const std::vector<int64_t>& out_shape) {
    if (a.size() == 1) {
      storage_.resize(1);
      ops_internal::LoadAs<C>(a.raw_data(), a.dtype(), 1, storage_.data());
      ptr_ = storage_.data();
      step_ = 0;
    } else if (a.shape() == out_shape) {
      if (IsStorageOf<C>(a.dtype())) {
        ptr_ = static_cast<const C*>(a.raw_data());
      } else {
        storage_.resize(static_cast<size_t>(a.size()));
        ops_internal::LoadAs<C>(a.raw_data(), a.dtype(), a.size(), storage_.data());
        ptr_ = storage_.data();
      }
    } else {
      // Broadcast: stride 0 along the dimensions the operand has as 1 (or lacks).
      ComputeBuffer<C> in(a);
      std::vector<int64_t> in_strides = RowMajorStrides(a.shape());
      const size_t r = out_shape.size(), ar = a.shape().size();
      std::vector<int64_t> strides(r, 0);
      for (size_t i = 0; i < ar; ++i) {
        if (a.shape()[i] != 1) strides[r - ar + i] = in_strides[i];
      }
      storage_.resize(static_cast<size_t>(NumElements(out_shape)));
      StridedCopy(in.data(), 0, strides, storage_.data(), 0, RowMajorStrides(out_shape), out_shape, sizeof(C));
      ptr_ = storage_.data();
    }
  }
  C operator[](int64_t i) const { return ptr_[i * step_]; }
  bool scalar() const { return step_ == 0; }
  const C* data() const { return ptr_; }

 private:
  const C* ptr_ = nullptr;
  int64_t step_ = 1;
  ops_internal::Scratch<C> storage_;
};

// Where an op writes its values of C: straight into the result, or into a scratch run rounded once at the end.
template <typename C>
class Output {
 public:
  explicit Output(ArrayBuilder& out) : out_(out) {
    if (IsStorageOf<C>(out.dtype())) {
      ptr_ = static_cast<C*>(out.mutable_data());
    } else {
      scratch_.resize(static_cast<size_t>(out.size()));
      ptr_ = scratch_.data();
    }
  }
  C* data() { return ptr_; }
  void Finish() {
    if (!scratch_.empty()) ops_internal::StoreAs<C>(scratch_.data(), out_.size(), out_.mutable_data(), out_.dtype());
  }

 private:
  ArrayBuilder& out_;
  C* ptr_;
  ops_internal::Scratch<C> scratch_;
};

std::string ShapesList(std::initializer_list<const Array*> arrays) {
  std::string s;
  for (const Array* a : arrays) {
    if (!s.empty()) s += ", ";
    s += a->ShapeString();
  }
  return s;
}

[[noreturn]] void ThrowDType(std::string_view op, std::string_view wanted, const Array& a) {
  ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError, "{} requires {} arguments, got {}", op, wanted,
            a.ShapeString());
}

enum class Bin { kAdd, kSub, kMul, kDiv, kMax, kMin, kPow, kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr };

const char* BinName(Bin b) {
  switch (b) {
    case Bin::kAdd: return "Add";
    case Bin::kSub: return "Sub";
    case Bin::kMul: return "Mul";
    case Bin::kDiv: return "Div";
    case Bin::kMax: return "Max";
    case Bin::kMin: return "Min";
    case Bin::kPow: return "Pow";
    case Bin::kEq: return "Equal";
    case Bin::kNe: return "NotEqual";
    case Bin::kLt: return "Less";
    case Bin::kLe: return "LessEqual";
    case Bin::kGt: return "Greater";
    case Bin::kGe: return "GreaterEqual";
    case Bin::kAnd: return "LogicalAnd";
    case Bin::kOr: return "LogicalOr";
  }
  return "?";
}
std::string_view LaxName(Bin b) {
  switch (b) {
    case Bin::kAdd: return "add";
    case Bin::kSub: return "sub";
    case Bin::kMul: return "mul";
    case Bin::kDiv: return "div";
    case Bin::kMax: return "max";
    case Bin::kMin: return "min";
    case Bin::kPow: return "pow";
    case Bin::kEq: return "eq";
    case Bin::kNe: return "ne";
    case Bin::kLt: return "lt";
    case Bin::kLe: return "le";
    case Bin::kGt: return "gt";
    case Bin::kGe: return "ge";
    case Bin::kAnd: return "and";
    case Bin::kOr: return "or";
  }
  return "?";
}
bool IsComparison(Bin b) { return b >= Bin::kEq && b <= Bin::kGe; }

template <typename C>
C MaxOf(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a > b ? a : b;
}
template <typename C>
C MinOf(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}

template <typename C>
void ComputeBinary(Bin op, const Array& x, const Array& y, ArrayBuilder& out) {
  Operand<C> a(x, out.shape()), b(y, out.shape());
  const int64_t n = out.size();
  if (IsComparison(op) || op == Bin::kAnd || op == Bin::kOr) {
    bool* o = static_cast<bool*>(out.mutable_data());
    switch (op) {
      case Bin::kEq: for (int64_t i = 0; i < n; ++i) o[i] = a[i] == b[i]; break;
      case Bin::kNe: for (int64_t i = 0; i < n; ++i) o[i] = a[i] != b[i]; break;
      case Bin::kLt: for (int64_t i = 0; i < n; ++i) o[i] = a[i] < b[i]; break;
      case Bin::kLe: for (int64_t i = 0; i < n; ++i) o[i] = a[i] <= b[i]; break;
      case Bin::kGt: for (int64_t i = 0; i < n; ++i) o[i] = a[i] > b[i]; break;
      case Bin::kGe: for (int64_t i = 0; i < n; ++i) o[i] = a[i] >= b[i]; break;
      case Bin::kAnd: for (int64_t i = 0; i < n; ++i) o[i] = static_cast<bool>(a[i]) && static_cast<bool>(b[i]); break;
      case Bin::kOr: for (int64_t i = 0; i < n; ++i) o[i] = static_cast<bool>(a[i]) || static_cast<bool>(b[i]); break;
      default: break;
    }
    return;
  }
  Output<C> out_run(out);
  C* o = out_run.data();
  if constexpr (std::is_same_v<C, bool>) {
    // Only max/min reach here for bool.
    if (op == Bin::kMax) for (int64_t i = 0; i < n; ++i) o[i] = a[i] || b[i];
    if (op == Bin::kMin) for (int64_t i = 0; i < n; ++i) o[i] = a[i] && b[i];
  } else {
    if (op == Bin::kAdd && !a.scalar() && !b.scalar()) {
      // The common case without broadcasting: let Eigen vectorise it.
      Eigen::Map<Eigen::Array<C, Eigen::Dynamic, 1>>(o, n) =
          Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, 1>>(a.data(), n) +
          Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, 1>>(b.data(), n);
    } else {
      switch (op) {
        case Bin::kAdd: for (int64_t i = 0; i < n; ++i) o[i] = a[i] + b[i]; break;
        case Bin::kSub: for (int64_t i = 0; i < n; ++i) o[i] = a[i] - b[i]; break;
        case Bin::kMul: for (int64_t i = 0; i < n; ++i) o[i] = a[i] * b[i]; break;
        case Bin::kDiv:
          if constexpr (std::is_integral_v<C>) {
            for (int64_t i = 0; i < n; ++i) {
              if (b[i] == 0) {
                Throw(ErrorCode::kInvalidArgument, "Div: integer division by zero (divisor element {} of {})",
                      b.scalar() ? 0 : i, y.ShapeString());
              }
              // INT_MIN / -1 overflows in C++; XLA wraps to INT_MIN.
              o[i] = (b[i] == -1) ? static_cast<C>(0 - static_cast<std::make_unsigned_t<C>>(a[i])) : a[i] / b[i];
            }
          } else {
            for (int64_t i = 0; i < n; ++i) o[i] = a[i] / b[i];
          }
          break;
        case Bin::kMax: for (int64_t i = 0; i < n; ++i) o[i] = MaxOf(a[i], b[i]); break;
        case Bin::kMin: for (int64_t i = 0; i < n; ++i) o[i] = MinOf(a[i], b[i]); break;
        case Bin::kPow:
          if constexpr (std::is_floating_point_v<C>) {
            for (int64_t i = 0; i < n; ++i) o[i] = std::pow(a[i], b[i]);
          }
          break;
        default: break;
      }
    }
  }
  out_run.Finish();
}

Array Binary(Bin op, const Array& x, const Array& y) {
  const char* name = BinName(op);
  CheckValid(name, x, 0);
  CheckValid(name, y, 1);
  DType dtype = PromoteTypes(x.dtype(), y.dtype());
  if (op == Bin::kAnd || op == Bin::kOr) {
    if (x.dtype() != DType::kBool) ThrowDType(name, "bool", x);
    if (y.dtype() != DType::kBool) ThrowDType(name, "bool", y);
  } else if (dtype == DType::kBool && !IsComparison(op) && op != Bin::kMax && op != Bin::kMin) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
              "{} does not accept dtype bool (operands {}); use LogicalAnd/LogicalOr or Cast first", name,
              ShapesList({&x, &y}));
  } else if (op == Bin::kPow && !IsFloating(dtype)) {
    ThrowDType(name, "floating-point", x.dtype() == dtype ? x : y);
  }
  const std::vector<int64_t> shapes[2] = {x.shape(), y.shape()};
  std::vector<int64_t> shape = BroadcastShapes(shapes, name);
  const bool abstract = x.is_abstract() || y.is_abstract();
  ArrayBuilder out = NewResult(IsComparison(op) || op == Bin::kAnd || op == Bin::kOr ? DType::kBool : dtype, shape,
                        abstract);
  if (!abstract && out.size() > 0) {
    VisitCompute(dtype, [&](auto tag) { ComputeBinary<decltype(tag)>(op, x, y, out); });
  }
  ReportCost(LaxName(op), out.size(), op == Bin::kPow ? out.size() : 0, {&x, &y}, out);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&x, &y}));
}

// A Python scalar next to an array: it takes the array's dtype, except a non-integral value next to an integer
// or bool array, which makes the result float32 (JAX's weak typing with the default float dtype).
Array WeakScalar(const Array& like, double value) {
  DType dtype = like.dtype();
  if (!IsFloating(dtype) && value != std::floor(value)) dtype = DType::kF32;
  if (dtype == DType::kBool && value != 0 && value != 1) dtype = DType::kI32;
  return Array::Full({}, dtype, value);
}

enum class Un {
  kNeg, kAbs, kSign, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kRelu, kGeluTanh, kGeluErf, kSilu, kNot
};

struct UnInfo {
  const char* name;
  std::string_view lax;
  int flops;
  int transcendentals;
  bool floating_only;
};
UnInfo Info(Un u) {
  switch (u) {
    case Un::kNeg: return {"Neg", "neg", 1, 0, false};
    case Un::kAbs: return {"Abs", "abs", 1, 0, false};
    case Un::kSign: return {"Sign", "sign", 1, 0, false};
    case Un::kExp: return {"Exp", "exp", 1, 1, true};
    case Un::kLog: return {"Log", "log", 1, 1, true};
    case Un::kSqrt: return {"Sqrt", "sqrt", 1, 1, true};
    case Un::kRsqrt: return {"Rsqrt", "rsqrt", 1, 1, true};
    case Un::kTanh: return {"Tanh", "tanh", 1, 1, true};
    case Un::kSigmoid: return {"Sigmoid", "logistic", 3, 1, true};
    case Un::kRelu: return {"Relu", "relu", 1, 0, false};
    case Un::kGeluTanh: return {"Gelu", "gelu", 8, 1, true};
    case Un::kGeluErf: return {"Gelu", "gelu", 5, 1, true};
    case Un::kSilu: return {"Silu", "silu", 4, 1, true};
    case Un::kNot: return {"LogicalNot", "not", 1, 0, false};
  }
  return {"?", "?", 0, 0, false};
}

template <typename C>
void ComputeUnary(Un op, const Array& x, ArrayBuilder& out) {
  ComputeBuffer<C> in(x);
  const int64_t n = x.size();
  Output<C> out_run(out);
  const C* a = in.data();
  C* o = out_run.data();
  using ArrayX = Eigen::Array<C, Eigen::Dynamic, 1>;
  Eigen::Map<const ArrayX> va(a, n);
  Eigen::Map<ArrayX> vo(o, n);
  if constexpr (std::is_same_v<C, bool>) {
    if (op == Un::kNot) vo = !va;
    if (op == Un::kRelu) vo = va;
  } else {
    switch (op) {
      case Un::kNeg: vo = -va; break;
      case Un::kAbs: for (int64_t i = 0; i < n; ++i) o[i] = a[i] < 0 ? static_cast<C>(-a[i]) : a[i]; break;
      case Un::kSign:
        for (int64_t i = 0; i < n; ++i) o[i] = a[i] > 0 ? C{1} : a[i] < 0 ? C{-1} : a[i];
        break;
      case Un::kRelu: for (int64_t i = 0; i < n; ++i) o[i] = MaxOf(a[i], C{0}); break;
      default:
        if constexpr (std::is_floating_point_v<C>) {
          switch (op) {
            case Un::kExp: vo = va.exp(); break;
            case Un::kLog: vo = va.log(); break;
            case Un::kSqrt: vo = va.sqrt(); break;
            case Un::kRsqrt: vo = va.rsqrt(); break;
            case Un::kTanh: for (int64_t i = 0; i < n; ++i) o[i] = std::tanh(a[i]); break;
            case Un::kSigmoid: for (int64_t i = 0; i < n; ++i) o[i] = C{1} / (C{1} + std::exp(-a[i])); break;
            case Un::kSilu: for (int64_t i = 0; i < n; ++i) o[i] = a[i] / (C{1} + std::exp(-a[i])); break;
            case Un::kGeluTanh: {
              const C k = static_cast<C>(0.79788456080286535587989211986876);  // sqrt(2 / pi)
              for (int64_t i = 0; i < n; ++i) {
                C v = a[i];
                o[i] = C{0.5} * v * (C{1} + std::tanh(k * (v + C{0.044715} * v * v * v)));
              }
              break;
            }
            case Un::kGeluErf: {
              const C k = static_cast<C>(0.70710678118654752440084436210485);  // 1 / sqrt(2)
              for (int64_t i = 0; i < n; ++i) o[i] = C{0.5} * a[i] * (C{1} + std::erf(a[i] * k));
              break;
            }
            default: break;
          }
        }
    }
  }
  out_run.Finish();
}

Array Unary(Un op, const Array& x) {
  UnInfo info = Info(op);
  CheckValid(info.name, x);
  if (op == Un::kNot) {
    if (x.dtype() != DType::kBool) ThrowDType(info.name, "bool", x);
  } else if (info.floating_only) {
    if (!IsFloating(x.dtype())) ThrowDType(info.name, "floating-point", x);
  } else if (x.dtype() == DType::kBool && op != Un::kRelu) {
    ThrowDType(info.name, "numeric (not bool)", x);
  }
  ArrayBuilder out = NewResult(x.dtype(), x.shape(), x.is_abstract());
  if (!x.is_abstract() && out.size() > 0) {
    VisitCompute(x.dtype(), [&](auto tag) { ComputeUnary<decltype(tag)>(op, x, out); });
  }
  ReportCost(info.lax, out.size() * info.flops, out.size() * info.transcendentals, {&x}, out);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&x}));
}

}  // namespace

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  if ((a == DType::kBF16 && b == DType::kF16) || (a == DType::kF16 && b == DType::kBF16)) return DType::kF32;
  if (IsFloating(a) && !IsFloating(b)) return a;
  if (IsFloating(b) && !IsFloating(a)) return b;
  return Rank(a) >= Rank(b) ? a : b;
}

std::vector<int64_t> BroadcastShapes(std::span<const std::vector<int64_t>> shapes, std::string_view op) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string list;
      for (const auto& t : shapes) list += (list.empty() ? "" : ", ") + PyTuple(t);
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "{}: Incompatible shapes for broadcasting: shapes=[{}]", op, list);
    }
  }
  return out;
}

Array Add(const Array& x, const Array& y) { return Binary(Bin::kAdd, x, y); }
Array Sub(const Array& x, const Array& y) { return Binary(Bin::kSub, x, y); }
Array Mul(const Array& x, const Array& y) { return Binary(Bin::kMul, x, y); }
Array Div(const Array& x, const Array& y) { return Binary(Bin::kDiv, x, y); }
Array Max(const Array& x, const Array& y) { return Binary(Bin::kMax, x, y); }
Array Min(const Array& x, const Array& y) { return Binary(Bin::kMin, x, y); }
Array Pow(const Array& x, const Array& y) { return Binary(Bin::kPow, x, y); }
Array Equal(const Array& x, const Array& y) { return Binary(Bin::kEq, x, y); }
Array NotEqual(const Array& x, const Array& y) { return Binary(Bin::kNe, x, y); }
Array Less(const Array& x, const Array& y) { return Binary(Bin::kLt, x, y); }
Array LessEqual(const Array& x, const Array& y) { return Binary(Bin::kLe, x, y); }
Array Greater(const Array& x, const Array& y) { return Binary(Bin::kGt, x, y); }
Array GreaterEqual(const Array& x, const Array& y) { return Binary(Bin::kGe, x, y); }
Array LogicalAnd(const Array& x, const Array& y) { return Binary(Bin::kAnd, x, y); }
Array LogicalOr(const Array& x, const Array& y) { return Binary(Bin::kOr, x, y); }

#define SPMDSIM_SCALAR_RIGHT(Fn, op) \
  Array Fn(const Array& x, double y) { CheckValid(#Fn, x); return Binary(op, x, WeakScalar(x, y)); }
#define SPMDSIM_SCALAR_LEFT(Fn, op) \
  Array Fn(double x, const Array& y) { CheckValid(#Fn, y); return Binary(op, WeakScalar(y, x), y); }
SPMDSIM_SCALAR_RIGHT(Add, Bin::kAdd)
SPMDSIM_SCALAR_LEFT(Add, Bin::kAdd)
SPMDSIM_SCALAR_RIGHT(Sub, Bin::kSub)
SPMDSIM_SCALAR_LEFT(Sub, Bin::kSub)
SPMDSIM_SCALAR_RIGHT(Mul, Bin::kMul)
SPMDSIM_SCALAR_LEFT(Mul, Bin::kMul)
SPMDSIM_SCALAR_RIGHT(Div, Bin::kDiv)
SPMDSIM_SCALAR_LEFT(Div, Bin::kDiv)
SPMDSIM_SCALAR_RIGHT(Max, Bin::kMax)
SPMDSIM_SCALAR_RIGHT(Min, Bin::kMin)
SPMDSIM_SCALAR_RIGHT(Pow, Bin::kPow)
SPMDSIM_SCALAR_RIGHT(Equal, Bin::kEq)
SPMDSIM_SCALAR_RIGHT(NotEqual, Bin::kNe)
SPMDSIM_SCALAR_RIGHT(Less, Bin::kLt)
SPMDSIM_SCALAR_RIGHT(LessEqual, Bin::kLe)
SPMDSIM_SCALAR_RIGHT(Greater, Bin::kGt)
SPMDSIM_SCALAR_RIGHT(GreaterEqual, Bin::kGe)
#undef SPMDSIM_SCALAR_RIGHT
#undef SPMDSIM_SCALAR_LEFT

Array LogicalNot(const Array& x) { return Unary(Un::kNot, x); }
Array Neg(const Array& x) { return Unary(Un::kNeg, x); }
Array Abs(const Array& x) { return Unary(Un::kAbs, x); }
Array Sign(const Array& x) { return Unary(Un::kSign, x); }
Array Exp(const Array& x) { return Unary(Un::kExp, x); }
Array Log(const Array& x) { return Unary(Un::kLog, x); }
Array Sqrt(const Array& x) { return Unary(Un::kSqrt, x); }
Array Rsqrt(const Array& x) { return Unary(Un::kRsqrt, x); }
Array Tanh(const Array& x) { return Unary(Un::kTanh, x); }
Array Sigmoid(const Array& x) { return Unary(Un::kSigmoid, x); }
Array Relu(const Array& x) { return Unary(Un::kRelu, x); }
Array Gelu(const Array& x, bool approximate) { return Unary(approximate ? Un::kGeluTanh : Un::kGeluErf, x); }
Array Silu(const Array& x) { return Unary(Un::kSilu, x); }

Array Where(const Array& cond, const Array& x, const Array& y) {
  CheckValid("Where", cond, 0);
  CheckValid("Where", x, 1);
  CheckValid("Where", y, 2);
  if (cond.dtype() != DType::kBool) ThrowDType("Where", "a bool condition; other", cond);
  DType dtype = PromoteTypes(x.dtype(), y.dtype());
  const std::vector<int64_t> shapes[3] = {cond.shape(), x.shape(), y.shape()};
  std::vector<int64_t> shape = BroadcastShapes(shapes, "Where");
  const bool abstract = cond.is_abstract() || x.is_abstract() || y.is_abstract();
  ArrayBuilder out = NewResult(dtype, shape, abstract);
  if (!abstract && out.size() > 0) {
    VisitCompute(dtype, [&](auto tag) {
      using C = decltype(tag);
      Operand<bool> c(cond, shape);
      Operand<C> a(x, shape), b(y, shape);
      Output<C> out_run(out);
      C* o = out_run.data();
      for (int64_t i = 0; i < out.size(); ++i) o[i] = c[i] ? a[i] : b[i];
      out_run.Finish();
    });
  }
  ReportCost("select_n", out.size(), 0, {&cond, &x, &y}, out);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&cond, &x, &y}));
}

Array Cast(const Array& x, DType dtype) {
  CheckValid("Cast", x);
  if (x.dtype() == dtype) return x;
  ArrayBuilder out = NewResult(dtype, x.shape(), x.is_abstract());
  if (!x.is_abstract() && out.size() > 0) {
    // Through the target's compute type: one rounding for every source except float64 -> bfloat16/float16,
    // which goes through float32 (two roundings; differs from XLA's direct rounding only in rare ties).
    VisitCompute(dtype, [&](auto tag) {
      using C = decltype(tag);
      ComputeBuffer<C> in(x);
      ops_internal::StoreAs<C>(in.data(), x.size(), out.mutable_data(), dtype);
    });
  }
  ReportCost("convert_element_type", 0, 0, {&x}, out);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&x}));
}

}  // namespace spmdsim
