// Helpers for the ops tests: random arrays of every dtype, rounding a double to a dtype, and a naive
// broadcasting index map the tests compute their expected values with (straightforward loops, no ops/ code).
#ifndef SPMDSIM_TESTS_OPS_OPS_TEST_UTIL_H_
#define SPMDSIM_TESTS_OPS_OPS_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"
#include "sim/array.h"

namespace spmdsim::ops_test {

inline constexpr DType kFloatTypes[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16};
inline constexpr DType kIntTypes[] = {DType::kI32, DType::kI64};

// `v` as the dtype stores it (round to nearest even for the 16-bit floats; truncation for integers).
inline double RoundTo(DType dtype, double v) {
  switch (dtype) {
    case DType::kF32: return static_cast<float>(v);
    case DType::kF64: return v;
    case DType::kBF16: return ToFloat(ToBFloat16(static_cast<float>(v)));
    case DType::kF16: return ToFloat(ToFloat16(static_cast<float>(v)));
    case DType::kI32: return static_cast<int32_t>(v);
    case DType::kI64: return static_cast<int64_t>(v);
    case DType::kBool: return v != 0;
    default: break;  // not an array dtype
  }
  return v;
}

// An array of `dtype` holding `values` (each converted as the dtype stores it).
inline Array MakeArray(DType dtype, const std::vector<double>& values, std::vector<int64_t> shape) {
  switch (dtype) {
    case DType::kF32: return Array::FromVector<float>(std::vector<float>(values.begin(), values.end()), shape);
    case DType::kF64: return Array::FromVector<double>(values, shape);
    case DType::kBF16: {
      std::vector<bfloat16> v;
      for (double x : values) v.push_back(ToBFloat16(static_cast<float>(x)));
      return Array::FromVector<bfloat16>(v, shape);
    }
    case DType::kF16: {
      std::vector<float16> v;
      for (double x : values) v.push_back(ToFloat16(static_cast<float>(x)));
      return Array::FromVector<float16>(v, shape);
    }
    case DType::kI32: {
      std::vector<int32_t> v;
      for (double x : values) v.push_back(static_cast<int32_t>(x));
      return Array::FromVector<int32_t>(v, shape);
    }
    case DType::kI64: {
      std::vector<int64_t> v;
      for (double x : values) v.push_back(static_cast<int64_t>(x));
      return Array::FromVector<int64_t>(v, shape);
    }
    case DType::kBool: {
      std::vector<bool> v;
      for (double x : values) v.push_back(x != 0);
      return Array::FromVector(v, shape);
    }
    default: break;  // not an array dtype
  }
  return {};
}

inline int64_t Product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Uniform values in [lo, hi) (integers for integer dtypes), already representable in the dtype.
inline std::vector<double> RandomValues(std::mt19937& rng, DType dtype, int64_t n, double lo, double hi) {
  std::vector<double> v(static_cast<size_t>(n));
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& x : v) x = IsFloating(dtype) ? RoundTo(dtype, u(rng)) : std::floor(u(rng));
  return v;
}

inline Array RandomArray(std::mt19937& rng, DType dtype, std::vector<int64_t> shape, double lo = -2,
                         double hi = 2) {
  return MakeArray(dtype, RandomValues(rng, dtype, Product(shape), lo, hi), shape);
}

// Index of the element of an operand of `in_shape` that the output element `flat` (of `out_shape`) reads
// under numpy broadcasting.
inline int64_t BroadcastIndex(const std::vector<int64_t>& out_shape, const std::vector<int64_t>& in_shape,
                              int64_t flat) {
  int64_t index = 0, stride = 1;
  for (size_t k = 0; k < out_shape.size(); ++k) {
    size_t o = out_shape.size() - 1 - k;
    int64_t coord = flat % out_shape[o];
    flat /= out_shape[o];
    if (k < in_shape.size()) {
      size_t i = in_shape.size() - 1 - k;
      if (in_shape[i] != 1) index += coord * stride;
      stride *= in_shape[i];
    }
  }
  return index;
}

// A random shape of rank in [0, max_rank] with dimensions in [1, max_dim].
inline std::vector<int64_t> RandomShape(std::mt19937& rng, int max_rank, int64_t max_dim) {
  std::vector<int64_t> s(static_cast<size_t>(std::uniform_int_distribution<int>(0, max_rank)(rng)));
  for (int64_t& d : s) d = std::uniform_int_distribution<int64_t>(1, max_dim)(rng);
  return s;
}

// A shape that broadcasts to `shape`: a random suffix with random dimensions set to 1.
inline std::vector<int64_t> BroadcastableTo(std::mt19937& rng, const std::vector<int64_t>& shape) {
  size_t drop = std::uniform_int_distribution<size_t>(0, shape.size())(rng);
  std::vector<int64_t> s(shape.begin() + static_cast<std::ptrdiff_t>(drop), shape.end());
  for (int64_t& d : s)
    if (rng() % 3 == 0) d = 1;
  return s;
}

// Relative tolerance of one rounding in `dtype` (plus slack for f32 intermediates).
inline double Tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 2e-6;
    case DType::kF64: return 1e-12;
    case DType::kBF16: return 1.0 / 128;
    case DType::kF16: return 1.0 / 1024;
    default: return 0;
  }
}

// Checks every element of `actual` against `expected` (NaN equal to NaN), |a - e| <= atol + rtol * |e|.
inline void ExpectValues(const Array& actual, const std::vector<double>& expected, double rtol, double atol = 0,
                         const std::string& what = "") {
  std::vector<double> got = actual.ToDoubles();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << " got " << got[i];
    } else if (std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << what << " element " << i;
    } else {
      EXPECT_LE(std::abs(got[i] - expected[i]), atol + rtol * std::abs(expected[i]))
          << what << " element " << i << ": got " << got[i] << ", expected " << expected[i];
    }
  }
}

// "<kind>: <message>" of the spmdsim::Error that f throws, or "no error".
inline std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(ErrorKindName(e.kind())) + ": " + e.message();
  }
  return "no error";
}

}  // namespace spmdsim::ops_test

#endif  // SPMDSIM_TESTS_OPS_OPS_TEST_UTIL_H_
