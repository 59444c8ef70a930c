#include "ops/elementwise.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/ops/ops_test_util.h"

namespace spmdsim {
namespace {

using ops_test::BroadcastIndex;
using ops_test::ExpectValues;
using ops_test::ErrorOf;
using ops_test::MakeArray;
using ops_test::RoundTo;
using ::testing::HasSubstr;

struct BinaryCase {
  const char* name;
  Array (*op)(const Array&, const Array&);
  double (*ref)(double, double);
};

const BinaryCase kArithmetic[] = {
    {"Add", Add, [](double a, double b) { return a + b; }},
    {"Sub", Sub, [](double a, double b) { return a - b; }},
    {"Mul", Mul, [](double a, double b) { return a * b; }},
    {"Div", Div, [](double a, double b) { return a / b; }},
    {"Max", Max, [](double a, double b) { return std::max(a, b); }},
    {"Min", Min, [](double a, double b) { return std::min(a, b); }},
};

TEST(Elementwise, AddBroadcastsARowOverTheMatrix) {
  Array x = Array::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = Array::FromVector<float>({10, 20, 30}, {3});
  Array y = Add(x, b);
  EXPECT_EQ(y.ShapeString(), "float32[2,3]");
  EXPECT_EQ(y.ToDoubles(), (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(Add(b, x).ToDoubles(), y.ToDoubles());
}

TEST(Elementwise, BinaryOpsMatchLoopsOnRandomBroadcastShapesForEveryFloatDtype) {
  std::mt19937 rng(7);
  for (DType dtype : ops_test::kFloatTypes) {
    for (const BinaryCase& c : kArithmetic) {
      for (int trial = 0; trial < 12; ++trial) {
        std::vector<int64_t> shape = ops_test::RandomShape(rng, 4, 4);
        std::vector<int64_t> sx = ops_test::BroadcastableTo(rng, shape), sy = ops_test::BroadcastableTo(rng, shape);
        if (trial % 2 == 0) sx = shape;
        Array x = ops_test::RandomArray(rng, dtype, sx);
        // Divisors away from zero keep the relative error of the reference meaningful.
        Array y = ops_test::RandomArray(rng, dtype, sy, 0.5, 3);
        Array z = c.op(x, y);
        std::vector<int64_t> out_shape = BroadcastShapes(std::vector<std::vector<int64_t>>{sx, sy});
        ASSERT_EQ(z.shape(), out_shape);
        ASSERT_EQ(z.dtype(), dtype);
        std::vector<double> xv = x.ToDoubles(), yv = y.ToDoubles(), expected;
        for (int64_t i = 0; i < ops_test::Product(out_shape); ++i) {
          double a = xv[BroadcastIndex(out_shape, sx, i)], b = yv[BroadcastIndex(out_shape, sy, i)];
          // 16-bit floats compute in f32 and round once: the reference does the same.
          double r = dtype == DType::kF64 ? c.ref(a, b) : static_cast<float>(c.ref(a, b));
          expected.push_back(RoundTo(dtype, r));
        }
        ExpectValues(z, expected, dtype == DType::kF64 ? 1e-15 : 0, 0,
                     fmt::format("{} {} {} {}", c.name, DTypeName(dtype), x.ShapeString(), y.ShapeString()));
      }
    }
  }
}

TEST(Elementwise, IntegerArithmeticIsExactAndDivisionTruncates) {
  std::mt19937 rng(11);
  for (DType dtype : ops_test::kIntTypes) {
    for (const BinaryCase& c : kArithmetic) {
      Array x = ops_test::RandomArray(rng, dtype, {3, 4}, -50, 50);
      Array y = ops_test::RandomArray(rng, dtype, {4}, 1, 9);
      Array z = c.op(x, y);
      ASSERT_EQ(z.dtype(), dtype);
      std::vector<double> xv = x.ToDoubles(), yv = y.ToDoubles(), expected;
      for (int64_t i = 0; i < 12; ++i) {
        double r = c.ref(xv[i], yv[i % 4]);
        expected.push_back(std::string(c.name) == "Div" ? std::trunc(r) : r);
      }
      ExpectValues(z, expected, 0, 0, c.name);
    }
  }
  EXPECT_EQ(Div(Array::Scalar<int32_t>(-7), Array::Scalar<int32_t>(2)).ToDoubles(), std::vector<double>{-3});
  EXPECT_EQ(Div(Array::Scalar<int32_t>(std::numeric_limits<int32_t>::min()), Array::Scalar<int32_t>(-1)).ToDoubles(),
            std::vector<double>{std::numeric_limits<int32_t>::min()});
}

TEST(Elementwise, IntegerDivisionByZeroIsAnError) {
  Array x = Array::FromVector<int32_t>({1, 2}, {2});
  Array y = Array::FromVector<int32_t>({1, 0}, {2});
  EXPECT_THAT(ErrorOf([&] { Div(x, y); }), HasSubstr("Div: integer division by zero"));
}

TEST(Elementwise, BFloat16ResultsAreRoundedOnceToNearestEven) {
  // bf16 keeps 8 significand bits, so its spacing at 1 is 2^-7 and both sums below are ties: 1 + 2^-8 rounds
  // to 1 and 1 + 3*2^-8 to 1 + 2^-6, the neighbours with an even last bit.
  Array one = MakeArray(DType::kBF16, {1, 1}, {2});
  Array tiny = MakeArray(DType::kF32, {std::ldexp(1.0, -8), 3 * std::ldexp(1.0, -8)}, {2});
  Array sum = Add(one, Cast(tiny, DType::kBF16));
  EXPECT_EQ(sum.ToDoubles(), (std::vector<double>{1.0, 1.0 + std::ldexp(1.0, -6)}));
  // A composite op rounds once: 16-bit Gelu equals the f32 result rounded, not per-step rounding.
  Array x = MakeArray(DType::kBF16, {-0.5, 1.0, 3.0}, {3});
  std::vector<double> expected;
  for (double v : x.ToDoubles()) {
    float f = static_cast<float>(v);
    expected.push_back(
        RoundTo(DType::kBF16, 0.5f * f * (1.0f + std::tanh(0.7978845608f * (f + 0.044715f * f * f * f)))));
  }
  ExpectValues(Gelu(x), expected, 0);
}

TEST(Elementwise, ComparisonsGiveBoolForEveryDtype) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    Array x = MakeArray(dtype, {1, 2, 3}, {3});
    Array y = MakeArray(dtype, {2}, {1});
    EXPECT_EQ(Less(x, y).dtype(), DType::kBool);
    EXPECT_EQ(Less(x, y).ToDoubles(), (std::vector<double>{1, 0, 0}));
    EXPECT_EQ(LessEqual(x, y).ToDoubles(), (std::vector<double>{1, 1, 0}));
    EXPECT_EQ(Greater(x, y).ToDoubles(), (std::vector<double>{0, 0, 1}));
    EXPECT_EQ(GreaterEqual(x, y).ToDoubles(), (std::vector<double>{0, 1, 1}));
    EXPECT_EQ(Equal(x, y).ToDoubles(), (std::vector<double>{0, 1, 0}));
    EXPECT_EQ(NotEqual(x, y).ToDoubles(), (std::vector<double>{1, 0, 1}));
    EXPECT_EQ(Greater(x, 1.5).ToDoubles(), (std::vector<double>{0, 1, 1}));
  }
  Array nan = Array::FromVector<float>({std::nanf("")}, {1});
  EXPECT_EQ(Equal(nan, nan).ToDoubles(), std::vector<double>{0});
  EXPECT_EQ(NotEqual(nan, nan).ToDoubles(), std::vector<double>{1});
}

TEST(Elementwise, PromoteTypesFollowsJaxForNonWeakTypes) {
  EXPECT_EQ(PromoteTypes(DType::kBF16, DType::kF16), DType::kF32);
  EXPECT_EQ(PromoteTypes(DType::kBF16, DType::kF32), DType::kF32);
  EXPECT_EQ(PromoteTypes(DType::kF32, DType::kF64), DType::kF64);
  EXPECT_EQ(PromoteTypes(DType::kI32, DType::kI64), DType::kI64);
  EXPECT_EQ(PromoteTypes(DType::kI64, DType::kBF16), DType::kBF16);
  EXPECT_EQ(PromoteTypes(DType::kI32, DType::kF16), DType::kF16);
  EXPECT_EQ(PromoteTypes(DType::kBool, DType::kI32), DType::kI32);
  EXPECT_EQ(PromoteTypes(DType::kBool, DType::kBool), DType::kBool);
  Array a = MakeArray(DType::kBF16, {1.5}, {1});
  Array b = MakeArray(DType::kF32, {0.25}, {1});
  EXPECT_EQ(Add(a, b).ShapeString(), "float32[1]");
  EXPECT_EQ(Add(a, b).ToDoubles(), std::vector<double>{1.75});
}

TEST(Elementwise, PythonScalarsAreWeaklyTyped) {
  Array h = MakeArray(DType::kBF16, {3}, {1});
  EXPECT_EQ(Mul(h, 0.5).dtype(), DType::kBF16);
  EXPECT_EQ(Mul(0.5, h).ToDoubles(), std::vector<double>{1.5});
  Array i = MakeArray(DType::kI32, {3}, {1});
  EXPECT_EQ(Add(i, 2.0).dtype(), DType::kI32);
  EXPECT_EQ(Mul(i, 0.5).dtype(), DType::kF32);
  EXPECT_EQ(Mul(i, 0.5).ToDoubles(), std::vector<double>{1.5});
  EXPECT_EQ(Sub(10.0, i).ToDoubles(), std::vector<double>{7});
  EXPECT_EQ(Div(1.0, MakeArray(DType::kF32, {4}, {1})).ToDoubles(), std::vector<double>{0.25});
  EXPECT_EQ(Pow(MakeArray(DType::kF64, {3}, {1}), 2.0).ToDoubles(), std::vector<double>{9});
}

TEST(Elementwise, MaxAndMinPropagateNaN) {
  Array x = Array::FromVector<float>({1, std::nanf(""), 3}, {3});
  Array y = Array::FromVector<float>({std::nanf(""), 2, 1}, {3});
  ExpectValues(Max(x, y), {NAN, NAN, 3}, 0);
  ExpectValues(Min(x, y), {NAN, NAN, 1}, 0);
  ExpectValues(Relu(Array::FromVector<float>({-1, std::nanf(""), 2}, {3})), {0, NAN, 2}, 0);
}

struct UnaryCase {
  const char* name;
  Array (*op)(const Array&);
  double (*ref)(double);
  double lo, hi;
};

double GeluTanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double GeluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

const UnaryCase kUnary[] = {
    {"Neg", Neg, [](double x) { return -x; }, -3, 3},
    {"Abs", Abs, [](double x) { return std::abs(x); }, -3, 3},
    {"Sign", Sign, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }, -3, 3},
    {"Exp", Exp, [](double x) { return std::exp(x); }, -5, 5},
    {"Log", Log, [](double x) { return std::log(x); }, 0.1, 10},
    {"Sqrt", Sqrt, [](double x) { return std::sqrt(x); }, 0, 10},
    {"Rsqrt", Rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.1, 10},
    {"Tanh", Tanh, [](double x) { return std::tanh(x); }, -4, 4},
    {"Sigmoid", Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -6, 6},
    {"Relu", Relu, [](double x) { return std::max(x, 0.0); }, -3, 3},
    {"Silu", Silu, [](double x) { return x / (1 + std::exp(-x)); }, -6, 6},
    {"GeluTanh", [](const Array& x) { return Gelu(x, true); }, GeluTanh, -4, 4},
    {"GeluErf", [](const Array& x) { return Gelu(x, false); }, GeluErf, -4, 4},
};

TEST(Elementwise, UnaryOpsMatchTheMathLibraryForEveryFloatDtype) {
  std::mt19937 rng(3);
  for (DType dtype : ops_test::kFloatTypes) {
    for (const UnaryCase& c : kUnary) {
      Array x = ops_test::RandomArray(rng, dtype, {5, 7}, c.lo, c.hi);
      Array y = c.op(x);
      ASSERT_EQ(y.dtype(), dtype);
      ASSERT_EQ(y.shape(), x.shape());
      std::vector<double> expected;
      for (double v : x.ToDoubles()) expected.push_back(c.ref(v));
      // One rounding to the dtype, and a few f32 ulps for the f32 math (Eigen's vectorised exp/log/rsqrt).
      double rtol = dtype == DType::kF64 ? 1e-13 : dtype == DType::kF32 ? 1e-6 : ops_test::Tolerance(dtype);
      ExpectValues(y, expected, rtol, dtype == DType::kF64 ? 1e-15 : 1e-7,
                   fmt::format("{} {}", c.name, DTypeName(dtype)));
    }
  }
}

TEST(Elementwise, GeluDefaultIsJaxsTanhApproximation) {
  Array x = Array::FromVector<double>({-2, -0.5, 1, 3}, {4});
  // Values from the formulas in jax.nn.gelu, evaluated in Python.
  ExpectValues(Gelu(x), {-0.04540230591222494, -0.15428599017485606, 0.8411919906082768, 2.996362607918227}, 1e-14);
  ExpectValues(Gelu(x, false), {-0.04550026389635842, -0.15426876936299344, 0.8413447460685429, 2.99595030590511},
               1e-14);
}

TEST(Elementwise, IntegerUnaryOpsAndRelu) {
  Array x = Array::FromVector<int32_t>({-3, 0, 4}, {3});
  EXPECT_EQ(Neg(x).ToDoubles(), (std::vector<double>{3, 0, -4}));
  EXPECT_EQ(Abs(x).ToDoubles(), (std::vector<double>{3, 0, 4}));
  EXPECT_EQ(Sign(x).ToDoubles(), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(Relu(x).ToDoubles(), (std::vector<double>{0, 0, 4}));
  EXPECT_EQ(Relu(x).dtype(), DType::kI32);
}

TEST(Elementwise, WhereBroadcastsItsThreeOperands) {
  Array cond = Array::FromVector(std::vector<bool>{true, false, true}, {3});
  Array x = Array::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array y = Array::Scalar<float>(-1);
  EXPECT_EQ(Where(cond, x, y).ToDoubles(), (std::vector<double>{1, -1, 3, 4, -1, 6}));
  EXPECT_EQ(Where(Greater(x, 3.0), x, Neg(x)).ToDoubles(), (std::vector<double>{-1, -2, -3, 4, 5, 6}));
  EXPECT_THAT(ErrorOf([&] { Where(x, x, y); }), HasSubstr("TypeError: Where requires a bool condition"));
}

TEST(Elementwise, LogicalOpsOnBool) {
  Array a = Array::FromVector(std::vector<bool>{true, true, false, false}, {4});
  Array b = Array::FromVector(std::vector<bool>{true, false, true, false}, {4});
  EXPECT_EQ(LogicalAnd(a, b).ToDoubles(), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(LogicalOr(a, b).ToDoubles(), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_EQ(LogicalNot(a).ToDoubles(), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(Max(a, b).ToDoubles(), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_THAT(ErrorOf([&] { LogicalAnd(a, Array::Scalar<int32_t>(1)); }),
              HasSubstr("TypeError: LogicalAnd requires bool arguments, got int32[]"));
  EXPECT_THAT(ErrorOf([&] { LogicalNot(Array::Scalar<float>(1)); }), HasSubstr("LogicalNot requires bool"));
}

TEST(Elementwise, CastConvertsAsXlaDoes) {
  Array f = Array::FromVector<float>({2.7f, -2.7f, std::nanf(""), 3e9f, -3e9f, 0}, {6});
  EXPECT_EQ(Cast(f, DType::kI32).ToDoubles(),
            (std::vector<double>{2, -2, 0, 2147483647.0, -2147483648.0, 0}));
  EXPECT_EQ(Cast(f, DType::kBool).ToDoubles(), (std::vector<double>{1, 1, 1, 1, 1, 0}));
  Array g = Array::FromVector<float>({1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8)}, {2});
  EXPECT_EQ(Cast(g, DType::kBF16).ToDoubles(), (std::vector<double>{1.0, 1.0 + std::ldexp(1.0, -6)}));
  EXPECT_EQ(Cast(Array::FromVector<int64_t>({5, -6}, {2}), DType::kF16).ToDoubles(), (std::vector<double>{5, -6}));
  Array same = Cast(f, DType::kF32);
  EXPECT_TRUE(same.SharesBufferWith(f));
}

TEST(Elementwise, IncompatibleShapesUseJaxsWording) {
  Array a = Array::Zeros({2, 3}, DType::kF32), b = Array::Zeros({4}, DType::kF32);
  Error e(ErrorCode::kInternal, "");
  try {
    Add(a, b);
  } catch (const Error& caught) {
    e = caught;
  }
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(), "Add: Incompatible shapes for broadcasting: shapes=[(2, 3), (4,)]");
  EXPECT_EQ(ErrorOf([&] { Where(Array::Zeros({5}, DType::kBool), a, a); }),
            "ValueError: Where: Incompatible shapes for broadcasting: shapes=[(5,), (2, 3), (2, 3)]");
}

TEST(Elementwise, TypeErrorsNameTheOpAndTheOperand) {
  Array i = Array::Zeros({2}, DType::kI32);
  Array b = Array::Zeros({2}, DType::kBool);
  EXPECT_EQ(ErrorOf([&] { Exp(i); }), "TypeError: Exp requires floating-point arguments, got int32[2]");
  EXPECT_EQ(ErrorOf([&] { Gelu(i); }), "TypeError: Gelu requires floating-point arguments, got int32[2]");
  EXPECT_EQ(ErrorOf([&] { Pow(i, i); }), "TypeError: Pow requires floating-point arguments, got int32[2]");
  EXPECT_THAT(ErrorOf([&] { Add(b, b); }), HasSubstr("TypeError: Add does not accept dtype bool"));
  EXPECT_THAT(ErrorOf([&] { Neg(b); }), HasSubstr("TypeError: Neg requires numeric (not bool) arguments"));
  EXPECT_THAT(ErrorOf([&] { Add(Array(), i); }), HasSubstr("Add: operand 0 is an empty Array handle"));
}

TEST(Elementwise, AbstractOperandsGiveAbstractResultsOfTheBroadcastShape) {
  Array a = Array::Abstract({8, 1, 4}, DType::kBF16);
  Array b = Array::FromVector<float>({1, 2, 3}, {3, 1});
  Array c = Add(a, b);
  EXPECT_TRUE(c.is_abstract());
  EXPECT_EQ(c.ShapeString(), "float32[8,3,4]");
  EXPECT_TRUE(Exp(a).is_abstract());
  EXPECT_EQ(Greater(a, 0.0).ShapeString(), "bool[8,1,4]");
  EXPECT_EQ(Where(Greater(a, 0.0), a, Array::Scalar<float>(0)).ShapeString(), "float32[8,1,4]");
  EXPECT_EQ(Cast(a, DType::kF32).ShapeString(), "float32[8,1,4]");
  EXPECT_TRUE(Cast(a, DType::kF32).is_abstract());
  EXPECT_THAT(ErrorOf([&] { Add(a, Array::Abstract({3}, DType::kF32)); }), HasSubstr("Incompatible shapes"));
}

TEST(Elementwise, EmptyArraysWork) {
  Array e = Array::Zeros({0, 3}, DType::kF32);
  EXPECT_EQ(Add(e, Array::Zeros({3}, DType::kF32)).shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(Exp(e).size(), 0);
}

template <typename A = Array>
void ExpectVaryingAxesUnion() {
  if constexpr (!requires(const A& x) { x.varying_axes(); }) {
    GTEST_SKIP() << "Array has no varying_axes() in this build yet; ops/internal/kernels.h switches it on";
  } else {
    A a = A::Zeros({2}, DType::kF32).WithVaryingAxes(0b01);
    A b = A::Zeros({2}, DType::kF32).WithVaryingAxes(0b10);
    EXPECT_EQ(Add(a, b).varying_axes(), 0b11u);
    EXPECT_EQ(Where(Greater(a, 0.0), a, b).varying_axes(), 0b11u);
    EXPECT_EQ(Exp(a).varying_axes(), 0b01u);
  }
}

TEST(Elementwise, ResultsCarryTheUnionOfTheOperandsVaryingAxes) { ExpectVaryingAxesUnion(); }

}  // namespace
}  // namespace spmdsim
