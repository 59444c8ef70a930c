#include "ops/shape_ops.h"

#include <functional>
#include <numeric>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/ops/ops_test_util.h"

namespace spmdsim {
namespace {

using ops_test::ErrorOf;
using ops_test::MakeArray;
using ::testing::HasSubstr;

const DType kAllTypes[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kBool};

// Row-major coordinates of flat index i in `shape`.
std::vector<int64_t> Coords(const std::vector<int64_t>& shape, int64_t i) {
  std::vector<int64_t> c(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    c[k] = i % shape[k];
    i /= shape[k];
  }
  return c;
}
int64_t Flat(const std::vector<int64_t>& shape, const std::vector<int64_t>& c) {
  int64_t f = 0;
  for (size_t k = 0; k < shape.size(); ++k) f = f * shape[k] + c[k];
  return f;
}

TEST(ShapeOps, HeaderExample) {
  Array x = Array::Iota({2, 3}, DType::kF32);
  EXPECT_EQ(Transpose(x).ToString(), "[[0, 3], [1, 4], [2, 5]]");
  EXPECT_EQ(Slice(x, {0, 1}, {2, 3}).ToDoubles(), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(Concatenate({x, x}, 1).shape(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(Pad(x, {0, 1}, {0, 0}, -1).ToString(), "[[-1, 0, 1, 2], [-1, 3, 4, 5]]");
  EXPECT_EQ(Reshape(x, {3, -1}).shape(), (std::vector<int64_t>{3, 2}));
}

TEST(ShapeOps, ReshapeSharesTheBufferAndInfersOneDimension) {
  Array x = Array::Iota({2, 3, 4}, DType::kI32);
  Array r = Reshape(x, {-1, 4});
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{6, 4}));
  EXPECT_TRUE(r.SharesBufferWith(x));
  EXPECT_EQ(Ravel(x).shape(), std::vector<int64_t>{24});
  EXPECT_EQ(ExpandDims(x, -1).shape(), (std::vector<int64_t>{2, 3, 4, 1}));
  EXPECT_EQ(ExpandDims(x, 0).shape(), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(Squeeze(Array::Zeros({1, 3, 1}, DType::kF32)).shape(), std::vector<int64_t>{3});
  EXPECT_EQ(Squeeze(Array::Zeros({1, 3, 1}, DType::kF32), {0}).shape(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(ErrorOf([&] { Reshape(x, {5, -1}); }),
            "ValueError: Reshape: cannot reshape array of size 24 into shape (5, -1)");
  EXPECT_EQ(ErrorOf([&] { Reshape(x, {4}); }), "ValueError: Reshape: cannot reshape array of size 24 into shape (4,)");
  EXPECT_EQ(ErrorOf([&] { Reshape(x, {-1, -1}); }), "ValueError: Reshape: can only specify one unknown dimension");
  EXPECT_THAT(ErrorOf([&] { Reshape(x, {-2, 12}); }), HasSubstr("negative dimensions not allowed"));
  EXPECT_THAT(ErrorOf([&] { Squeeze(x, {1}); }), HasSubstr("cannot select an axis to squeeze out"));
}

TEST(ShapeOps, TransposeMatchesLoopsForRandomPermutationsAndEveryDtype) {
  std::mt19937 rng(21);
  for (DType dtype : kAllTypes) {
    for (int trial = 0; trial < 10; ++trial) {
      std::vector<int64_t> shape = ops_test::RandomShape(rng, 5, 4);
      Array x = ops_test::RandomArray(rng, dtype, shape, -9, 9);
      std::vector<int> perm(shape.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      Array t = Transpose(x, perm);
      std::vector<int64_t> out_shape;
      for (int p : perm) out_shape.push_back(shape[p]);
      ASSERT_EQ(t.shape(), out_shape);
      std::vector<double> v = x.ToDoubles(), got = t.ToDoubles();
      for (int64_t i = 0; i < t.size(); ++i) {
        std::vector<int64_t> oc = Coords(out_shape, i), ic(shape.size());
        for (size_t k = 0; k < perm.size(); ++k) ic[perm[k]] = oc[k];
        ASSERT_EQ(got[i], v[Flat(shape, ic)]) << DTypeName(dtype);
      }
    }
  }
  Array x = Array::Iota({2, 3, 4}, DType::kF32);
  EXPECT_EQ(SwapAxes(x, 0, -1).shape(), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(ErrorOf([&] { Transpose(x, {0, 1}); }),
            "ValueError: Transpose: axes don't match array (perm (0, 1) for float32[2,3,4])");
  EXPECT_EQ(ErrorOf([&] { Transpose(x, {0, 1, 1}); }), "ValueError: Transpose: repeated axis in transpose");
  EXPECT_EQ(ErrorOf([&] { Transpose(x, {0, 1, 3}); }),
            "ValueError: Transpose: axis 3 is out of bounds for array of dimension 3");
}

TEST(ShapeOps, SliceWithStridesMatchesLoops) {
  std::mt19937 rng(4);
  for (DType dtype : kAllTypes) {
    for (int trial = 0; trial < 10; ++trial) {
      std::vector<int64_t> shape = ops_test::RandomShape(rng, 4, 6);
      Array x = ops_test::RandomArray(rng, dtype, shape, -9, 9);
      std::vector<int64_t> start, limit, strides, out_shape;
      for (int64_t d : shape) {
        int64_t s = std::uniform_int_distribution<int64_t>(0, d)(rng);
        int64_t l = std::uniform_int_distribution<int64_t>(s, d)(rng);
        int64_t st = std::uniform_int_distribution<int64_t>(1, 3)(rng);
        start.push_back(s);
        limit.push_back(l);
        strides.push_back(st);
        out_shape.push_back((l - s + st - 1) / st);
      }
      Array y = Slice(x, start, limit, strides);
      ASSERT_EQ(y.shape(), out_shape);
      std::vector<double> v = x.ToDoubles(), got = y.ToDoubles();
      for (int64_t i = 0; i < y.size(); ++i) {
        std::vector<int64_t> c = Coords(out_shape, i);
        for (size_t k = 0; k < c.size(); ++k) c[k] = start[k] + c[k] * strides[k];
        ASSERT_EQ(got[i], v[Flat(shape, c)]);
      }
    }
  }
}

TEST(ShapeOps, SliceErrorsUseLaxsWording) {
  Array x = Array::Zeros({2, 3}, DType::kF32);
  EXPECT_EQ(ErrorOf([&] { Slice(x, {0}, {1}); }),
            "TypeError: Slice: slice start_indices must have length equal to the number of dimensions of the operand, "
            "got indices (0,) for operand shape (2, 3).");
  EXPECT_EQ(ErrorOf([&] { Slice(x, {0, 0}, {1}); }),
            "TypeError: Slice: slice limit_indices must have the same length as start_indices, got start_indices (0, "
            "0) and limit_indices (1,).");
  EXPECT_EQ(ErrorOf([&] { Slice(x, {0, 0}, {3, 3}); }),
            "TypeError: Slice: slice limit_indices must be less than or equal to operand shape, got limit_indices (3, "
            "3) for operand shape (2, 3).");
  EXPECT_EQ(ErrorOf([&] { Slice(x, {-1, 0}, {1, 3}); }),
            "TypeError: Slice: slice start_indices must be greater than or equal to zero, got start_indices of "
            "(-1, 0).");
  EXPECT_EQ(ErrorOf([&] { Slice(x, {1, 0}, {0, 3}); }),
            "TypeError: Slice: slice limit_indices must be greater than or equal to start_indices, got start_indices "
            "(1, 0) and limit_indices (0, 3).");
  EXPECT_EQ(ErrorOf([&] { Slice(x, {0, 0}, {2, 3}, {1}); }),
            "TypeError: Slice: slice strides must have length equal to the number of dimensions of the operand, got "
            "strides (1,) for operand shape (2, 3).");
  EXPECT_EQ(ErrorOf([&] { Slice(x, {0, 0}, {2, 3}, {1, 0}); }),
            "TypeError: Slice: slice strides must be positive, got (1, 0)");
}

TEST(ShapeOps, DynamicSliceClampsItsStartAsXlaDoes) {
  Array x = Array::Iota({5}, DType::kI32);
  EXPECT_EQ(DynamicSlice(x, {1}, {2}).ToDoubles(), (std::vector<double>{1, 2}));
  EXPECT_EQ(DynamicSlice(x, {4}, {2}).ToDoubles(), (std::vector<double>{3, 4}));  // clamped to 3
  EXPECT_EQ(DynamicSlice(x, {-3}, {2}).ToDoubles(), (std::vector<double>{0, 1}));
  Array m = Array::Iota({3, 4}, DType::kF32);
  EXPECT_EQ(DynamicSlice(m, {1, 2}, {2, 2}).ToDoubles(), (std::vector<double>{6, 7, 10, 11}));
  EXPECT_EQ(ErrorOf([&] { DynamicSlice(m, {0, 0}, {4, 1}); }),
            "TypeError: DynamicSlice: slice slice_sizes must be less than or equal to operand shape, got slice_sizes "
            "(4, 1) for operand shape (3, 4).");
  EXPECT_THAT(ErrorOf([&] { DynamicSlice(m, {0}, {1, 1}); }),
              HasSubstr("one start index and one slice size per dimension"));
  EXPECT_THAT(ErrorOf([&] { DynamicSlice(m, {0, 0}, {-1, 1}); }), HasSubstr("greater than or equal to zero"));
  Array u = Array::Full({2, 2}, DType::kF32, -1);
  EXPECT_EQ(DynamicUpdateSlice(m, u, {2, 3}).ToDoubles(),
            (std::vector<double>{0, 1, 2, 3, 4, 5, -1, -1, 8, 9, -1, -1}));  // start clamped to (1, 2)
  EXPECT_THAT(ErrorOf([&] { DynamicUpdateSlice(m, Array::Zeros({2}, DType::kF32), {0, 0}); }),
              HasSubstr("update must have the same rank as operand"));
  EXPECT_THAT(ErrorOf([&] { DynamicUpdateSlice(m, Array::Zeros({4, 1}, DType::kF32), {0, 0}); }),
              HasSubstr("update shape must be smaller than operand shape"));
  EXPECT_THAT(ErrorOf([&] { DynamicUpdateSlice(m, u, {0}); }), HasSubstr("start_indices must have length equal"));
  EXPECT_THAT(ErrorOf([&] { DynamicUpdateSlice(m, Array::Zeros({1, 1}, DType::kI32), {0, 0}); }),
              HasSubstr("must have the operand's dtype"));
}

TEST(ShapeOps, ConcatenateStackAndSplit) {
  Array a = Array::Iota({2, 2}, DType::kF32);
  Array b = MakeArray(DType::kBF16, {10, 11}, {2, 1});
  Array c = Concatenate({a, b}, -1);
  EXPECT_EQ(c.ShapeString(), "float32[2,3]");
  EXPECT_EQ(c.ToDoubles(), (std::vector<double>{0, 1, 10, 2, 3, 11}));
  EXPECT_EQ(Concatenate({a, a}, 0).ToDoubles(), (std::vector<double>{0, 1, 2, 3, 0, 1, 2, 3}));
  Array s = Stack({a, a}, 1);
  EXPECT_EQ(s.shape(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(s.ToDoubles(), (std::vector<double>{0, 1, 0, 1, 2, 3, 2, 3}));
  std::vector<Array> parts = Split(Array::Iota({2, 6}, DType::kI64), 3, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].ToDoubles(), (std::vector<double>{4, 5, 10, 11}));
  EXPECT_EQ(ErrorOf([&] { Concatenate({a, Array::Zeros({3, 2}, DType::kF32)}, 1); }),
            "ValueError: Concatenate: all the input array dimensions except for the concatenation axis must match "
            "exactly, but along dimension 0, the array at index 0 has size 2 and the array at index 1 has size 3");
  EXPECT_THAT(ErrorOf([&] { Concatenate({a, Array::Zeros({2}, DType::kF32)}); }),
              HasSubstr("must have same number of dimensions"));
  EXPECT_THAT(ErrorOf([&] { Concatenate({}); }), HasSubstr("need at least one array"));
  EXPECT_THAT(ErrorOf([&] { Concatenate({Array::Scalar<float>(1)}); }), HasSubstr("zero-dimensional"));
  EXPECT_EQ(ErrorOf([&] { Concatenate({a}, 2); }),
            "ValueError: Concatenate: axis 2 is out of bounds for array of dimension 2");
  EXPECT_THAT(ErrorOf([&] { Stack({a, b}); }), HasSubstr("all input arrays must have the same shape"));
  EXPECT_THAT(ErrorOf([&] { Split(a, 3, 0); }), HasSubstr("array split does not result in an equal division"));
}

TEST(ShapeOps, PadBroadcastToAndFlip) {
  Array x = MakeArray(DType::kBool, {1, 0}, {2});
  EXPECT_EQ(Pad(x, {1}, {2}, 1).ToDoubles(), (std::vector<double>{1, 1, 0, 1, 1}));
  EXPECT_THAT(ErrorOf([&] { Pad(x, {-1}, {0}); }), HasSubstr("negative"));
  EXPECT_THAT(ErrorOf([&] { Pad(x, {1, 1}, {0, 0}); }), HasSubstr("one (low, high) pair per dimension"));
  Array r = Array::FromVector<float>({1, 2, 3}, {3, 1});
  EXPECT_EQ(BroadcastTo(r, {2, 3, 2}).ToDoubles(), (std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(ErrorOf([&] { BroadcastTo(r, {2, 2}); }),
            "ValueError: BroadcastTo: Incompatible shapes for broadcasting: (3, 1) and requested shape (2, 2)");
  Array m = Array::Iota({2, 3}, DType::kI32);
  EXPECT_EQ(Flip(m).ToDoubles(), (std::vector<double>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(Flip(m, {1}).ToDoubles(), (std::vector<double>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(Flip(m, {-2}).ToDoubles(), (std::vector<double>{3, 4, 5, 0, 1, 2}));
}

TEST(ShapeOps, IotaAndBroadcastedIota) {
  EXPECT_EQ(Iota(DType::kBF16, 4).ToString(), "[0, 1, 2, 3]");
  EXPECT_EQ(BroadcastedIota(DType::kI32, {2, 3}, 1).ToDoubles(), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(BroadcastedIota(DType::kI32, {2, 3}, 0).ToDoubles(), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  EXPECT_THAT(ErrorOf([&] { Iota(DType::kF32, -1); }), HasSubstr("negative"));
  EXPECT_THAT(ErrorOf([&] { BroadcastedIota(DType::kF32, {2}, 1); }), HasSubstr("axis 1 is out of bounds"));
}

template <typename A = Array>
void ExpectVaryingUnion() {
  if constexpr (!requires(const A& x) { x.varying_axes(); }) {
    GTEST_SKIP() << "Array has no varying_axes() in this build";
  } else {
    A a = A::Zeros({2, 3}, DType::kF32).WithVaryingAxes(0b01);
    A b = A::Zeros({2, 3}, DType::kF32).WithVaryingAxes(0b10);
    EXPECT_EQ(Concatenate({a, b}, 0).varying_axes(), 0b11u);
    EXPECT_EQ(Transpose(a).varying_axes(), 0b01u);
    EXPECT_EQ(Reshape(b, {6}).varying_axes(), 0b10u);
    EXPECT_EQ(Slice(a, {0, 0}, {1, 1}).varying_axes(), 0b01u);
    EXPECT_EQ(DynamicUpdateSlice(a, Slice(b, {0, 0}, {1, 1}), {0, 0}).varying_axes(), 0b11u);
    EXPECT_EQ(Pad(a, {1, 1}, {0, 0}).varying_axes(), 0b01u);
  }
}

TEST(ShapeOps, ResultsCarryTheUnionOfTheOperandsVaryingAxes) { ExpectVaryingUnion(); }

TEST(ShapeOps, AbstractInputsGiveAbstractResults) {
  Array a = Array::Abstract({4, 6}, DType::kF16);
  EXPECT_TRUE(Transpose(a).is_abstract());
  EXPECT_EQ(Transpose(a).ShapeString(), "float16[6,4]");
  EXPECT_EQ(Slice(a, {1, 0}, {4, 6}, {2, 3}).ShapeString(), "float16[2,2]");
  EXPECT_EQ(DynamicSlice(a, {9, 9}, {2, 2}).ShapeString(), "float16[2,2]");
  EXPECT_EQ(Concatenate({a, Array::Zeros({4, 2}, DType::kF16)}, 1).ShapeString(), "float16[4,8]");
  EXPECT_TRUE(Concatenate({a, Array::Zeros({4, 2}, DType::kF16)}, 1).is_abstract());
  EXPECT_EQ(Pad(a, {1, 1}, {0, 2}).ShapeString(), "float16[5,9]");
  EXPECT_EQ(BroadcastTo(a, {3, 4, 6}).ShapeString(), "float16[3,4,6]");
  EXPECT_EQ(Reshape(a, {2, -1}).ShapeString(), "float16[2,12]");
  EXPECT_TRUE(Reshape(a, {2, -1}).is_abstract());
  EXPECT_EQ(Flip(a).ShapeString(), "float16[4,6]");
  EXPECT_EQ(Split(a, 2, 1)[1].ShapeString(), "float16[4,3]");
}

}  // namespace
}  // namespace spmdsim
