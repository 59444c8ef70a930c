#include "ops/reduction.h"

#include <cmath>
#include <limits>
#include <string_view>

#include "ops/internal/kernels.h"

namespace spmdsim {

using ops_internal::CanonicalAxis;
using ops_internal::CheckValid;
using ops_internal::NewResult;
using ops_internal::ReportCost;
using ops_internal::VaryingUnion;
using ops_internal::VisitCompute;
using ops_internal::WithVaryingAxes;

namespace {

enum class Red { kSum, kMean, kMax, kMin };

struct RedInfo {
  const char* name;
  std::string_view lax;
};
RedInfo Info(Red r) {
  switch (r) {
    case Red::kSum: return {"Sum", "reduce_sum"};
    case Red::kMean: return {"Mean", "reduce_mean"};
    case Red::kMax: return {"ReduceMax", "reduce_max"};
    case Red::kMin: return {"ReduceMin", "reduce_min"};
  }
  return {"?", "?"};
}

// Canonical, checked axes as a per-dimension mask.
std::vector<bool> AxisMask(std::string_view op, const std::vector<int>& axes, int rank) {
  std::vector<bool> mask(static_cast<size_t>(rank), false);
  for (int a : axes) {
    int c = CanonicalAxis(op, a, rank);
    if (mask[c]) ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "{}: duplicate value in 'axis'", op);
    mask[c] = true;
  }
  return mask;
}

template <typename C>
C Lowest() {
  if constexpr (std::is_floating_point_v<C>) return -std::numeric_limits<C>::infinity();
  return std::numeric_limits<C>::lowest();
}
template <typename C>
C Highest() {
  if constexpr (std::is_floating_point_v<C>) return std::numeric_limits<C>::infinity();
  return std::numeric_limits<C>::max();
}

template <typename C>
void ComputeReduce(Red op, const Array& x, const std::vector<bool>& mask, int64_t rows, int64_t cols,
                   ArrayBuilder& out) {
  std::vector<int> perm;
  for (int d = 0; d < x.rank(); ++d)
    if (!mask[d]) perm.push_back(d);
  for (int d = 0; d < x.rank(); ++d)
    if (mask[d]) perm.push_back(d);
  ops_internal::Scratch<C> in = ops_internal::PermutedCompute<C>(x, perm);
  ops_internal::Scratch<C> result(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const C* row = in.data() + r * cols;
    C acc{};
    switch (op) {
      case Red::kSum:
      case Red::kMean:
        if constexpr (std::is_same_v<C, bool>) {
          acc = false;
        } else {
          acc = Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, 1>>(row, cols).sum();
          if (op == Red::kMean) {
            if constexpr (std::is_floating_point_v<C>) {
              acc = cols == 0 ? std::numeric_limits<C>::quiet_NaN() : acc / static_cast<C>(cols);
            }
          }
        }
        break;
      case Red::kMax:
        acc = Lowest<C>();
        for (int64_t c = 0; c < cols; ++c) {
          C v = row[c];
          if (v != v) { acc = v; break; }
          if (v > acc) acc = v;
        }
        break;
      case Red::kMin:
        acc = Highest<C>();
        for (int64_t c = 0; c < cols; ++c) {
          C v = row[c];
          if (v != v) { acc = v; break; }
          if (v < acc) acc = v;
        }
        break;
    }
    result[static_cast<size_t>(r)] = acc;
  }
  ops_internal::StoreAs<C>(result.data(), rows, out.mutable_data(), out.dtype());
}

Array Reduce(Red op, const Array& x, const std::vector<int>* axes, bool keepdims) {
  RedInfo info = Info(op);
  CheckValid(info.name, x);
  std::vector<bool> mask = axes == nullptr ? std::vector<bool>(static_cast<size_t>(x.rank()), true)
                                           : AxisMask(info.name, *axes, x.rank());
  std::vector<int64_t> shape;
  int64_t rows = 1, cols = 1;
  for (int d = 0; d < x.rank(); ++d) {
    if (mask[d]) {
      cols *= x.shape()[d];
      if (keepdims) shape.push_back(1);
    } else {
      rows *= x.shape()[d];
      shape.push_back(x.shape()[d]);
    }
  }
  if ((op == Red::kMax || op == Red::kMin) && cols == 0 && rows > 0) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "{}: zero-size array to reduction operation {} which has no identity (input {})", info.name,
              op == Red::kMax ? "max" : "min", x.ShapeString());
  }
  DType dtype = x.dtype();
  if (op == Red::kSum && dtype == DType::kBool) dtype = DType::kI32;
  if (op == Red::kMean && !IsFloating(dtype)) dtype = DType::kF32;
  ArrayBuilder out = NewResult(dtype, shape, x.is_abstract());
  if (!x.is_abstract() && rows > 0) {
    VisitCompute(op == Red::kMax || op == Red::kMin ? x.dtype() : dtype,
                 [&](auto tag) { ComputeReduce<decltype(tag)>(op, x, mask, rows, cols, out); });
  }
  ReportCost(info.lax, x.size(), 0, {&x}, out);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&x}));
}

Array ArgReduce(bool is_max, const Array& x, int axis) {
  const char* name = is_max ? "ArgMax" : "ArgMin";
  CheckValid(name, x);
  int a = CanonicalAxis(name, axis, x.rank());
  const int64_t n = x.shape()[a];
  std::vector<int64_t> shape;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < a) outer *= x.shape()[d];
    if (d > a) inner *= x.shape()[d];
    if (d != a) shape.push_back(x.shape()[d]);
  }
  if (n == 0 && outer * inner > 0) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "{}: attempt to get {} of an empty sequence (input {})", name, is_max ? "argmax" : "argmin",
              x.ShapeString());
  }
  ArrayBuilder out = NewResult(DType::kI32, shape, x.is_abstract());
  if (!x.is_abstract() && out.size() > 0) {
    VisitCompute(x.dtype(), [&](auto tag) {
      using C = decltype(tag);
      ops_internal::ComputeBuffer<C> in(x);
      int32_t* o = static_cast<int32_t*>(out.mutable_data());
      for (int64_t p = 0; p < outer; ++p) {
        for (int64_t q = 0; q < inner; ++q) {
          const C* base = in.data() + p * n * inner + q;
          int64_t best = 0;
          C bv = base[0];
          for (int64_t k = 1; k < n && bv == bv; ++k) {
            C v = base[k * inner];
            if (v != v || (is_max ? v > bv : v < bv)) {
              best = k;
              bv = v;
            }
          }
          o[p * inner + q] = static_cast<int32_t>(best);
        }
      }
    });
  }
  ReportCost(is_max ? "argmax" : "argmin", x.size(), 0, {&x}, out);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&x}));
}

Array SoftmaxImpl(bool log, const Array& x, int axis) {
  const char* name = log ? "LogSoftmax" : "Softmax";
  CheckValid(name, x);
  if (!IsFloating(x.dtype())) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError, "{} requires floating-point arguments, got {}", name,
              x.ShapeString());
  }
  int a = CanonicalAxis(name, axis, x.rank());
  const int64_t n = x.shape()[a];
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < a) outer *= x.shape()[d];
    if (d > a) inner *= x.shape()[d];
  }
  ArrayBuilder out = NewResult(x.dtype(), x.shape(), x.is_abstract());
  if (!x.is_abstract() && out.size() > 0) {
    VisitCompute(x.dtype(), [&](auto tag) {
      using C = decltype(tag);
      if constexpr (std::is_floating_point_v<C>) {
        ops_internal::ComputeBuffer<C> in(x);
        ops_internal::Scratch<C> o(static_cast<size_t>(x.size()));
        for (int64_t p = 0; p < outer; ++p) {
          for (int64_t q = 0; q < inner; ++q) {
            const int64_t base = p * n * inner + q;
            C m = -std::numeric_limits<C>::infinity();
            for (int64_t k = 0; k < n; ++k) m = std::max(m, in.data()[base + k * inner]);
            if (!std::isfinite(m)) m = 0;  // all -inf (or inf): jax.nn.softmax's stop_gradient(max) is 0 then
            C s = 0;
            for (int64_t k = 0; k < n; ++k) {
              C e = std::exp(in.data()[base + k * inner] - m);
              o[base + k * inner] = e;
              s += e;
            }
            if (log) {
              C ls = std::log(s);
              for (int64_t k = 0; k < n; ++k) o[base + k * inner] = in.data()[base + k * inner] - m - ls;
            } else {
              for (int64_t k = 0; k < n; ++k) o[base + k * inner] /= s;
            }
          }
        }
        ops_internal::StoreAs<C>(o.data(), x.size(), out.mutable_data(), out.dtype());
      }
    });
  }
  // max, subtract, exp, sum, divide (or log-subtract): 4 flops and 1 exp per element.
  ReportCost(log ? "log_softmax" : "softmax", 4 * x.size(), x.size() + (log ? outer * inner : 0), {&x}, out);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&x}));
}

}  // namespace

Array Sum(const Array& x) { return Reduce(Red::kSum, x, nullptr, false); }
Array Sum(const Array& x, const std::vector<int>& axes, bool keepdims) { return Reduce(Red::kSum, x, &axes, keepdims); }
Array Mean(const Array& x) { return Reduce(Red::kMean, x, nullptr, false); }
Array Mean(const Array& x, const std::vector<int>& axes, bool keepdims) {
  return Reduce(Red::kMean, x, &axes, keepdims);
}
Array ReduceMax(const Array& x) { return Reduce(Red::kMax, x, nullptr, false); }
Array ReduceMax(const Array& x, const std::vector<int>& axes, bool keepdims) {
  return Reduce(Red::kMax, x, &axes, keepdims);
}
Array ReduceMin(const Array& x) { return Reduce(Red::kMin, x, nullptr, false); }
Array ReduceMin(const Array& x, const std::vector<int>& axes, bool keepdims) {
  return Reduce(Red::kMin, x, &axes, keepdims);
}
Array ArgMax(const Array& x, int axis) { return ArgReduce(true, x, axis); }
Array ArgMin(const Array& x, int axis) { return ArgReduce(false, x, axis); }
Array Softmax(const Array& x, int axis) { return SoftmaxImpl(false, x, axis); }
Array LogSoftmax(const Array& x, int axis) { return SoftmaxImpl(true, x, axis); }

}  // namespace spmdsim
