#include "common/shape.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ErrorOf(std::vector<int64_t> (*parse)(std::string_view, std::string_view), std::string_view text) {
  try {
    parse(text, "--shape");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.message();
  }
  return "no error";
}

TEST(RowMajorStrides, AreInElementsInnermostOne) {
  EXPECT_THAT(RowMajorStrides(std::vector<int64_t>{2, 3, 4}), ElementsAre(12, 4, 1));
  EXPECT_THAT(RowMajorStrides(std::vector<int64_t>{}), ElementsAre());
  std::vector<int64_t> reused = {9, 9, 9, 9};
  EXPECT_THAT(RowMajorStrides(std::vector<int64_t>{5, 2}, &reused), ElementsAre(2, 1));
}

TEST(NumElements, MultipliesAndRejectsNegativeDimensions) {
  EXPECT_EQ(NumElements(std::vector<int64_t>{2, 3, 4}), 24);
  EXPECT_EQ(NumElements(std::vector<int64_t>{}), 1);
  EXPECT_EQ(NumElements(std::vector<int64_t>{0, 7}), 0);
  EXPECT_THROW(NumElements(std::vector<int64_t>{2, -1}), Error);
}

TEST(ElementCountOverflows, ChecksTheBytesNotJustTheElements) {
  EXPECT_FALSE(ElementCountOverflows(std::vector<int64_t>{1 << 20, 1 << 20}, 16));
  EXPECT_TRUE(ElementCountOverflows(std::vector<int64_t>{int64_t{1} << 31, int64_t{1} << 31}, 4));
  EXPECT_FALSE(ElementCountOverflows(std::vector<int64_t>{int64_t{1} << 62, 0, int64_t{1} << 62}, 4));
}

TEST(ShapeToString, WritesBracketsWithoutSpaces) {
  EXPECT_EQ(ShapeToString(std::vector<int64_t>{2, 3}), "[2,3]");
  EXPECT_EQ(ShapeToString(std::vector<int64_t>{}), "[]");
}

TEST(ParseShape, AcceptsCommasTimesAndPythonTuples) {
  EXPECT_THAT(ParseShape("8,1024,4096", "s"), ElementsAre(8, 1024, 4096));
  EXPECT_THAT(ParseShape(" 8, 1024 ", "s"), ElementsAre(8, 1024));
  EXPECT_THAT(ParseShape("8x1024", "s"), ElementsAre(8, 1024));
  EXPECT_THAT(ParseShape("(8, 2)", "s"), ElementsAre(8, 2));
  EXPECT_THAT(ParseShape("(8,)", "s"), ElementsAre(8));
  EXPECT_THAT(ParseShape("8,0", "s"), ElementsAre(8, 0));
  EXPECT_THAT(ParseShape("()", "s"), ElementsAre());
  EXPECT_THAT(ParseShape("", "s"), ElementsAre());
}

TEST(ParseShape, NamesTheFlagAndTheBadToken) {
  EXPECT_THAT(ErrorOf(ParseShape, "8,a"), HasSubstr("--shape: 'a' is not an integer"));
  EXPECT_THAT(ErrorOf(ParseShape, "8,-2"), HasSubstr("must be >= 0, got -2 in '8,-2'"));
  EXPECT_THAT(ErrorOf(ParseShape, "8,,2"), HasSubstr("empty dimension in shape '8,,2'"));
  EXPECT_THAT(ErrorOf(ParseShape, ",8"), HasSubstr("empty dimension"));
  EXPECT_THAT(ErrorOf(ParseShape, "8x"), HasSubstr("empty dimension"));
  EXPECT_THAT(ErrorOf(ParseShape, "2x2,4"), HasSubstr("'2x2' is not an integer"));
  EXPECT_THAT(ErrorOf(ParseShape, "4294967296,4294967296"), HasSubstr("more than 2^63 bytes"));
}

TEST(ParseDims, WantsAtLeastOnePositiveDimension) {
  EXPECT_THAT(ParseDims("2x2x4", "t"), ElementsAre(2, 2, 4));
  EXPECT_THAT(ParseDims("8", "t"), ElementsAre(8));
  EXPECT_THAT(ParseDims("2,2", "t"), ElementsAre(2, 2));
  EXPECT_THAT(ErrorOf(ParseDims, "2x0"), HasSubstr("--shape: dimensions must be positive, got '2x0'"));
  EXPECT_THAT(ErrorOf(ParseDims, ""), HasSubstr("dimensions must be positive"));
  EXPECT_THAT(ErrorOf(ParseDims, "2xax4"), HasSubstr("--shape: 'a' is not an integer"));
}

// The reference: one element at a time, by index.
void NaiveCopy(const char* src, int64_t src_offset, std::span<const int64_t> src_strides, char* dst, int64_t dst_offset,
               std::span<const int64_t> dst_strides, std::span<const int64_t> shape, int64_t esize) {
  const int64_t n = NumElements(shape);
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = src_offset, d = dst_offset;
    for (size_t k = 0; k < shape.size(); ++k) {
      s += index[k] * src_strides[k];
      d += index[k] * dst_strides[k];
    }
    std::memcpy(dst + d * esize, src + s * esize, static_cast<size_t>(esize));
    for (size_t k = shape.size(); k-- > 0;) {
      if (++index[k] < shape[k]) break;
      index[k] = 0;
    }
  }
}

TEST(BlockCopy, MergesContiguousDimensionsIntoOneRun) {
  BlockCopy copy;
  copy.Init(std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{12, 4, 1}, std::vector<int64_t>{12, 4, 1}, 4);
  EXPECT_EQ(copy.run_bytes(), 96);
  EXPECT_TRUE(copy.shape().empty());
  // Rows of 4 out of rows of 8: one run per row, the rows one dimension.
  copy.Init(std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{24, 8, 1}, std::vector<int64_t>{12, 4, 1}, 4);
  EXPECT_EQ(copy.run_bytes(), 16);
  EXPECT_THAT(copy.shape(), ElementsAre(6));
}

// Random shapes of rank 0-18 between random permuted layouts, element sizes 1-12 bytes, against a copy of
// one element at a time: merged dimensions, runs of every typed size, the odometer over up to 17 dimensions.
TEST(BlockCopy, MovesTheSameBytesAsACopyOfOneElementAtATime) {
  std::mt19937 rng(3);
  auto permuted_strides = [&](const std::vector<int64_t>& shape) {
    // Strides of a row-major layout of the dimensions in a random order.
    std::vector<size_t> order(shape.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    if (std::bernoulli_distribution(0.3)(rng)) std::sort(order.begin(), order.end());  // often row-major
    std::vector<int64_t> strides(shape.size());
    int64_t stride = 1;
    for (size_t i = order.size(); i-- > 0;) {
      strides[order[i]] = stride;
      stride *= shape[order[i]];
    }
    return strides;
  };
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = trial == 0 ? 18 : std::uniform_int_distribution<int>(0, 18)(rng);
    std::uniform_int_distribution<int64_t> dim(1, rank > 10 ? 2 : 4);
    std::vector<int64_t> shape(rank);
    for (auto& d : shape) d = dim(rng);
    const int64_t esize = std::vector<int64_t>{1, 2, 4, 8, 12}[std::uniform_int_distribution<int>(0, 4)(rng)];
    std::vector<int64_t> src_strides = permuted_strides(shape), dst_strides = permuted_strides(shape);
    if (trial == 0) {  // a transposition of 18 dimensions: nothing merges, 17 of them round the odometer
      std::fill(shape.begin(), shape.end(), 2);
      for (int i = 0; i < rank; ++i) {
        src_strides[i] = int64_t{1} << (rank - 1 - i);
        dst_strides[i] = int64_t{1} << i;
      }
    }
    const int64_t elements = NumElements(shape);
    std::vector<char> src(elements * esize), want(elements * esize, 0), got(elements * esize, 0);
    for (auto& c : src) c = static_cast<char>(rng());
    std::vector<int64_t> index(rank, 0);
    for (int64_t e = 0; e < elements; ++e) {
      int64_t s = 0, d = 0;
      for (int i = 0; i < rank; ++i) {
        s += index[i] * src_strides[i];
        d += index[i] * dst_strides[i];
      }
      std::memcpy(&want[d * esize], &src[s * esize], esize);
      for (int i = rank - 1; i >= 0 && ++index[i] == shape[i]; --i) index[i] = 0;
    }
    BlockCopy copy;
    copy.Init(shape, src_strides, dst_strides, esize);
    copy.Run(src.data(), got.data());
    ASSERT_EQ(got, want) << "trial " << trial << " shape " << ShapeToString(shape) << " esize " << esize;
  }
}

TEST(BlockCopy, TransposesAsTheHeaderExampleSays) {
  const float src[6] = {0, 1, 2, 3, 4, 5};  // [2,3]
  float dst[6] = {};
  BlockCopy copy;
  copy.Init(std::vector<int64_t>{3, 2}, std::vector<int64_t>{1, 3}, std::vector<int64_t>{2, 1}, 4);
  copy.Run(src, dst);
  EXPECT_THAT(dst, ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(StridedCopy, MatchesAnElementByElementCopyOnRandomLayouts) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = static_cast<int>(rng() % 5);
    const int64_t esize = std::vector<int64_t>{1, 2, 4, 8, 3}[rng() % 5];
    std::vector<int64_t> shape(rank), src_strides(rank), dst_strides(rank);
    for (int k = 0; k < rank; ++k) shape[k] = 1 + static_cast<int64_t>(rng() % 4);
    // The destination is dense in a random dimension order; the source a sub-box (or a broadcast, or a reversal)
    // of a larger array.
    std::vector<int> order(rank);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    int64_t dst_stride = 1;
    for (int k = rank; k-- > 0;) {
      dst_strides[order[k]] = dst_stride;
      dst_stride *= shape[order[k]];
    }
    int64_t src_stride = 1, src_offset = 0;
    for (int k = rank; k-- > 0;) {
      const int64_t extent = shape[k] + static_cast<int64_t>(rng() % 3);
      const int kind = static_cast<int>(rng() % 6);
      src_strides[k] = kind == 0 ? 0 : kind == 1 ? -src_stride : src_stride;
      if (kind == 1) src_offset += (shape[k] - 1) * src_stride;
      src_stride *= extent;
    }
    std::vector<char> src(static_cast<size_t>(src_stride * esize));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(rng());
    std::vector<char> want(static_cast<size_t>(dst_stride * esize), 0), got(want.size(), 0);
    NaiveCopy(src.data(), src_offset, src_strides, want.data(), 0, dst_strides, shape, esize);
    StridedCopy(src.data(), src_offset, src_strides, got.data(), 0, dst_strides, shape, esize);
    ASSERT_EQ(got, want) << "trial " << trial;
  }
}

TEST(StridedCopy, CopiesNothingForAnEmptyShapeAndOneElementForAScalar) {
  const int32_t src[1] = {42};
  int32_t dst[1] = {7};
  StridedCopy(src, 0, {}, dst, 0, {}, std::vector<int64_t>{}, 4);
  EXPECT_EQ(dst[0], 42);
  dst[0] = 7;
  StridedCopy(src, 0, std::vector<int64_t>{1}, dst, 0, std::vector<int64_t>{1}, std::vector<int64_t>{0}, 4);
  EXPECT_EQ(dst[0], 7);
}

}  // namespace
}  // namespace spmdsim
