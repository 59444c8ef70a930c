// Small local tensor ops for the shardmap tests, until the ops branch's Eigen ops are merged. Each works through
// doubles, keeps its input's dtype, and unions its inputs' varying axes (as JAX's elementwise rule does).
#ifndef SPMDSIM_TESTS_SHARDMAP_LOCAL_OPS_H_
#define SPMDSIM_TESTS_SHARDMAP_LOCAL_OPS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "common/error.h"
#include "sim/array.h"

namespace spmdsim::testops {

inline Array FromDoubles(DType dtype, const std::vector<double>& v, std::vector<int64_t> shape, uint64_t mask) {
  Array out;
  switch (dtype) {
    case DType::kF64: out = Array::FromVector<double>(v, std::move(shape)); break;
    case DType::kI32: {
      std::vector<int32_t> x(v.begin(), v.end());
      out = Array::FromVector<int32_t>(x, std::move(shape));
      break;
    }
    case DType::kI64: {
      std::vector<int64_t> x(v.begin(), v.end());
      out = Array::FromVector<int64_t>(x, std::move(shape));
      break;
    }
    default: {
      std::vector<float> x(v.begin(), v.end());
      out = Array::FromVector<float>(x, std::move(shape));
    }
  }
  return out.WithVaryingAxes(mask);
}

inline Array Map(const Array& a, const std::function<double(double)>& f) {
  std::vector<double> v = a.ToDoubles();
  for (double& x : v) x = f(x);
  return FromDoubles(a.dtype(), v, a.shape(), a.varying_axes());
}

inline Array Scale(const Array& a, double s) { return Map(a, [s](double x) { return x * s; }); }
inline Array Relu(const Array& a) { return Map(a, [](double x) { return x > 0 ? x : 0; }); }

inline Array Add(const Array& a, const Array& b) {
  SPMDSIM_CHECK(a.shape() == b.shape(), "Add of different shapes");
  std::vector<double> x = a.ToDoubles(), y = b.ToDoubles();
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  return FromDoubles(a.dtype(), x, a.shape(), a.varying_axes() | b.varying_axes());
}

// [m,k] x [k,n] -> [m,n].
inline Array Matmul(const Array& a, const Array& b) {
  SPMDSIM_CHECK(a.rank() == 2 && b.rank() == 2 && a.shape()[1] == b.shape()[0], "Matmul shapes");
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  std::vector<double> x = a.ToDoubles(), y = b.ToDoubles(), z(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) z[i * n + j] += x[i * k + p] * y[p * n + j];
  return FromDoubles(a.dtype(), z, {m, n}, a.varying_axes() | b.varying_axes());
}

// Reverses dimension 0.
inline Array Flip(const Array& a) {
  std::vector<double> x = a.ToDoubles(), y(x.size());
  const int64_t rows = a.rank() == 0 ? 1 : a.shape()[0];
  const int64_t inner = rows == 0 ? 0 : static_cast<int64_t>(x.size()) / rows;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < inner; ++i) y[(rows - 1 - r) * inner + i] = x[r * inner + i];
  return FromDoubles(a.dtype(), y, a.shape(), a.varying_axes());
}

// Reverses all dimensions (numpy .T).
inline Array Transpose(const Array& a) {
  const int r = a.rank();
  std::vector<int64_t> out_shape(a.shape().rbegin(), a.shape().rend());
  std::vector<double> x = a.ToDoubles(), y(x.size());
  std::vector<int64_t> idx(r, 0);
  for (size_t flat = 0; flat < x.size(); ++flat) {
    int64_t rest = static_cast<int64_t>(flat);
    for (int d = r - 1; d >= 0; --d) {
      idx[d] = rest % a.shape()[d];
      rest /= a.shape()[d];
    }
    int64_t o = 0;
    for (int d = 0; d < r; ++d) o = o * out_shape[d] + idx[r - 1 - d];
    y[o] = x[flat];
  }
  return FromDoubles(a.dtype(), y, out_shape, a.varying_axes());
}

inline Array Ravel(const Array& a) { return a.Reshape({a.size()}); }

// Sum of all elements as a [1] array.
inline Array SumAll(const Array& a) {
  double s = 0;
  for (double x : a.ToDoubles()) s += x;
  return FromDoubles(a.dtype(), {s}, {1}, a.varying_axes());
}

// Rows [start, stop) of a rank >= 1 array.
inline Array SliceRows(const Array& a, int64_t start, int64_t stop) {
  std::vector<double> x = a.ToDoubles();
  const int64_t inner = a.shape()[0] == 0 ? 0 : a.size() / a.shape()[0];
  std::vector<double> y(x.begin() + start * inner, x.begin() + stop * inner);
  std::vector<int64_t> shape = a.shape();
  shape[0] = stop - start;
  return FromDoubles(a.dtype(), y, shape, a.varying_axes());
}

}  // namespace spmdsim::testops

#endif  // SPMDSIM_TESTS_SHARDMAP_LOCAL_OPS_H_
