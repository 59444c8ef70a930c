#include "ops/reduction.h"

#include <cmath>
#include <functional>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops/elementwise.h"
#include "tests/ops/ops_test_util.h"

namespace spmdsim {
namespace {

using ops_test::ExpectValues;
using ops_test::ErrorOf;
using ops_test::MakeArray;
using ::testing::HasSubstr;

// Reference reduction with loops: for every element, its output index drops (or zeroes) the reduced axes.
std::vector<double> ReferenceReduce(const Array& x, const std::vector<bool>& reduce,
                                    const std::function<double(double, double)>& f, double init) {
  std::vector<int64_t> out_shape;
  for (int d = 0; d < x.rank(); ++d)
    if (!reduce[d]) out_shape.push_back(x.shape()[d]);
  std::vector<double> out(static_cast<size_t>(ops_test::Product(out_shape)), init);
  std::vector<double> v = x.ToDoubles();
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t rem = i, o = 0, stride = 1;
    for (int d = x.rank() - 1; d >= 0; --d) {
      int64_t c = rem % x.shape()[d];
      rem /= x.shape()[d];
      if (!reduce[d]) {
        o += c * stride;
        stride *= x.shape()[d];
      }
    }
    out[o] = f(out[o], v[i]);
  }
  return out;
}

TEST(Reduction, HeaderExample) {
  Array x = Array::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(Sum(x, {1}).ToDoubles(), (std::vector<double>{6, 15}));
  EXPECT_EQ(Sum(x, {0}, true).shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Sum(x).shape(), std::vector<int64_t>{});
  EXPECT_EQ(Sum(x).ToDoubles(), std::vector<double>{21});
  EXPECT_EQ(ReduceMax(x).ToDoubles(), std::vector<double>{6});
  EXPECT_EQ(ReduceMin(x, {0}).ToDoubles(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(Mean(x, {-1}).ToDoubles(), (std::vector<double>{2, 5}));
  EXPECT_EQ(Sum(x, {}).ToDoubles(), x.ToDoubles());
}

TEST(Reduction, RandomAxesMatchLoopsForEveryDtype) {
  std::mt19937 rng(5);
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<int64_t> shape = ops_test::RandomShape(rng, 4, 5);
      Array x = ops_test::RandomArray(rng, dtype, shape, -8, 8);
      std::vector<int> axes;
      std::vector<bool> mask(shape.size(), false);
      for (int d = 0; d < x.rank(); ++d) {
        if (rng() % 2) {
          axes.push_back(rng() % 2 ? d : d - x.rank());  // negative axes too
          mask[d] = true;
        }
      }
      bool keepdims = rng() % 2;
      std::vector<int64_t> expected_shape;
      for (int d = 0; d < x.rank(); ++d) {
        if (!mask[d]) expected_shape.push_back(shape[d]);
        else if (keepdims) expected_shape.push_back(1);
      }
      std::string what = fmt::format("{} axes={} keepdims={}", x.ShapeString(), fmt::join(axes, ","), keepdims);
      Array s = Sum(x, axes, keepdims);
      ASSERT_EQ(s.shape(), expected_shape) << what;
      ASSERT_EQ(s.dtype(), dtype);
      std::vector<double> sum = ReferenceReduce(x, mask, [](double a, double b) { return a + b; }, 0);
      // Accumulation in f32 for the 16-bit floats and f32, then one rounding.
      double rtol = dtype == DType::kF64 ? 1e-14 : dtype == DType::kF32 ? 1e-5 : ops_test::Tolerance(dtype);
      ExpectValues(s, sum, rtol, 1e-4, "Sum " + what);
      bool empty_reduce = false;
      int64_t count = 1;
      for (int d = 0; d < x.rank(); ++d)
        if (mask[d]) count *= shape[d];
      empty_reduce = count == 0;
      if (!empty_reduce) {
        ExpectValues(ReduceMax(x, axes, keepdims),
                     ReferenceReduce(x, mask, [](double a, double b) { return std::max(a, b); }, -INFINITY), 0, 0,
                     "Max " + what);
        ExpectValues(ReduceMin(x, axes, keepdims),
                     ReferenceReduce(x, mask, [](double a, double b) { return std::min(a, b); }, INFINITY), 0, 0,
                     "Min " + what);
        std::vector<double> mean = sum;
        for (double& m : mean) m /= static_cast<double>(count);
        Array me = Mean(x, axes, keepdims);
        EXPECT_EQ(me.dtype(), IsFloating(dtype) ? dtype : DType::kF32);
        ExpectValues(me, mean, std::max(rtol, 1e-6), 1e-4, "Mean " + what);
      }
    }
  }
}

TEST(Reduction, BoolSumsToInt32AndMeansToFloat32) {
  Array b = Array::FromVector(std::vector<bool>{true, false, true, true}, {2, 2});
  EXPECT_EQ(Sum(b).ShapeString(), "int32[]");
  EXPECT_EQ(Sum(b, {1}).ToDoubles(), (std::vector<double>{1, 2}));
  EXPECT_EQ(Mean(b).ToDoubles(), std::vector<double>{0.75});
  EXPECT_EQ(ReduceMax(b, {1}).ToDoubles(), (std::vector<double>{1, 1}));
  EXPECT_EQ(ReduceMin(b, {1}).ToDoubles(), (std::vector<double>{0, 1}));
}

TEST(Reduction, BFloat16SumAccumulatesInFloat32) {
  // 300 ones: a bf16 accumulator would stop at 256 (256 + 1 rounds back to 256, the spacing there is 2);
  // accumulating in f32 gives 300, which bf16 represents exactly.
  Array x = MakeArray(DType::kBF16, std::vector<double>(300, 1.0), {300});
  EXPECT_EQ(Sum(x).ToDoubles(), std::vector<double>{300});
}

TEST(Reduction, MaxAndMinPropagateNaNAndSumOfEmptyIsZero) {
  Array x = Array::FromVector<float>({1, std::nanf(""), 3, 4}, {2, 2});
  ExpectValues(ReduceMax(x, {1}), {NAN, 4}, 0);
  ExpectValues(ReduceMin(x, {1}), {NAN, 3}, 0);
  Array e = Array::Zeros({0, 3}, DType::kF32);
  EXPECT_EQ(Sum(e, {0}).ToDoubles(), (std::vector<double>{0, 0, 0}));
  ExpectValues(Mean(e, {0}), {NAN, NAN, NAN}, 0);
  EXPECT_EQ(ReduceMax(e, {1}).shape(), std::vector<int64_t>{0});  // nothing to reduce into
}

TEST(Reduction, ArgMaxAndArgMin) {
  Array x = Array::FromVector<float>({3, 7, 7, 1, 9, 2}, {2, 3});
  EXPECT_EQ(ArgMax(x, 1).ToDoubles(), (std::vector<double>{1, 1}));  // first of the tie
  EXPECT_EQ(ArgMax(x, 0).ToDoubles(), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(ArgMin(x, -1).ToDoubles(), (std::vector<double>{0, 0}));
  EXPECT_EQ(ArgMax(x, 1).dtype(), DType::kI32);
  EXPECT_EQ(ArgMax(Array::FromVector<float>({1, std::nanf(""), 5}, {3}), 0).ToDoubles(), std::vector<double>{1});
  EXPECT_EQ(ErrorOf([&] { ArgMax(Array::Zeros({2, 0}, DType::kF32), 1); }),
            "ValueError: ArgMax: attempt to get argmax of an empty sequence (input float32[2,0])");
}

TEST(Reduction, SoftmaxMatchesTheFormulaForEveryFloatDtype) {
  std::mt19937 rng(9);
  for (DType dtype : ops_test::kFloatTypes) {
    Array x = ops_test::RandomArray(rng, dtype, {3, 4, 5}, -5, 5);
    for (int axis : {0, 1, -1}) {
      int a = axis < 0 ? axis + 3 : axis;
      std::vector<double> v = x.ToDoubles(), sm(v.size()), lsm(v.size());
      const int64_t dims[3] = {3, 4, 5};
      int64_t inner = 1;
      for (int d = a + 1; d < 3; ++d) inner *= dims[d];
      const int64_t n = dims[a];
      for (int64_t i = 0; i < x.size(); ++i) {
        int64_t base = i - ((i / inner) % n) * inner;  // the row's first element
        double m = -INFINITY, s = 0;
        for (int64_t k = 0; k < n; ++k) m = std::max(m, v[base + k * inner]);
        for (int64_t k = 0; k < n; ++k) s += std::exp(v[base + k * inner] - m);
        sm[i] = std::exp(v[i] - m) / s;
        lsm[i] = v[i] - m - std::log(s);
      }
      double rtol = dtype == DType::kF64 ? 1e-13 : dtype == DType::kF32 ? 1e-5 : ops_test::Tolerance(dtype);
      ExpectValues(Softmax(x, axis), sm, rtol, 1e-7, fmt::format("Softmax {} axis {}", DTypeName(dtype), axis));
      ExpectValues(LogSoftmax(x, axis), lsm, rtol, 1e-5, fmt::format("LogSoftmax {} axis {}", DTypeName(dtype), axis));
    }
  }
}

TEST(Reduction, SoftmaxIsStableForLargeLogitsAndAllMinusInfinityRows) {
  Array x = Array::FromVector<float>({1000, 1000, -INFINITY, -INFINITY}, {2, 2});
  ExpectValues(Softmax(x), {0.5, 0.5, NAN, NAN}, 1e-7);
}

TEST(Reduction, ErrorsUseNumpysWording) {
  Array x = Array::Zeros({2, 3}, DType::kF32);
  EXPECT_EQ(ErrorOf([&] { Sum(x, {2}); }), "ValueError: Sum: axis 2 is out of bounds for array of dimension 2");
  EXPECT_EQ(ErrorOf([&] { Mean(x, {-3}); }), "ValueError: Mean: axis -3 is out of bounds for array of dimension 2");
  EXPECT_EQ(ErrorOf([&] { Sum(x, {1, -1}); }), "ValueError: Sum: duplicate value in 'axis'");
  EXPECT_EQ(
      ErrorOf([&] { ReduceMax(Array::Zeros({0}, DType::kF32)); }),
      "ValueError: ReduceMax: zero-size array to reduction operation max which has no identity (input float32[0])");
  EXPECT_EQ(ErrorOf([&] { Softmax(Array::Zeros({2}, DType::kI32)); }),
            "TypeError: Softmax requires floating-point arguments, got int32[2]");
  EXPECT_EQ(ErrorOf([&] { Softmax(x, 5); }), "ValueError: Softmax: axis 5 is out of bounds for array of dimension 2");
  EXPECT_THAT(ErrorOf([&] { Sum(Array()); }), HasSubstr("empty Array handle"));
}

template <typename A = Array>
void ExpectVaryingKept() {
  if constexpr (!requires(const A& x) { x.varying_axes(); }) {
    GTEST_SKIP() << "Array has no varying_axes() in this build";
  } else {
    A a = A::Zeros({2, 3}, DType::kF32).WithVaryingAxes(0b10);
    EXPECT_EQ(Sum(a, {1}).varying_axes(), 0b10u);
    EXPECT_EQ(Softmax(a).varying_axes(), 0b10u);
    EXPECT_EQ(ArgMax(a, 0).varying_axes(), 0b10u);
  }
}

TEST(Reduction, ResultsKeepTheInputsVaryingAxes) { ExpectVaryingKept(); }

TEST(Reduction, AbstractInputsGiveAbstractResults) {
  Array a = Array::Abstract({4, 8, 16}, DType::kBF16);
  EXPECT_EQ(Sum(a, {1}).ShapeString(), "bfloat16[4,16]");
  EXPECT_TRUE(Sum(a, {1}).is_abstract());
  EXPECT_EQ(Mean(a, {0, 2}, true).ShapeString(), "bfloat16[1,8,1]");
  EXPECT_EQ(ArgMax(a, 2).ShapeString(), "int32[4,8]");
  EXPECT_TRUE(Softmax(a).is_abstract());
  EXPECT_EQ(LogSoftmax(a, 0).ShapeString(), "bfloat16[4,8,16]");
}

}  // namespace
}  // namespace spmdsim
