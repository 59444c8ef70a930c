#include "cost/roofline.h"

#include <cmath>
#include <limits>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

TEST(Roofline, MatmulOnV4IsComputeBoundAsInTheHeaderExample) {
  Roofline roofline(Topology::Parse("tpu-v4:2x2x1"));
  const double n = 1024;
  LocalOpCost cost = roofline.Cost(2 * n * n * n, 3 * n * n * 2, DType::kBF16);
  EXPECT_NEAR(cost.compute_seconds, 2 * n * n * n / 275e12, 1e-15);
  EXPECT_NEAR(cost.memory_seconds, 3 * n * n * 2 / 1200e9, 1e-15);
  EXPECT_TRUE(cost.compute_bound);
  EXPECT_DOUBLE_EQ(cost.seconds, cost.compute_seconds);
  EXPECT_NEAR(cost.seconds * 1e6, 7.81, 0.01);
}

TEST(Roofline, ElementwiseOpIsMemoryBound) {
  Roofline roofline(Topology::Parse("dgx-h100:1"));
  // x + y over 1e8 bf16 elements: 1e8 FLOPs, 6e8 bytes.
  LocalOpCost cost = roofline.Cost(1e8, 6e8, DType::kBF16);
  EXPECT_FALSE(cost.compute_bound);
  EXPECT_DOUBLE_EQ(cost.seconds, 6e8 / 3350e9);
}

TEST(Roofline, EfficienciesScaleTheirSideOfTheRoof) {
  Topology v4 = Topology::Parse("tpu-v4:2x2x1");
  Roofline full(v4);
  Roofline half(v4, {.compute_efficiency = 0.5, .memory_efficiency = 0.25});
  LocalOpCost a = full.Cost(1e12, 1e9, DType::kBF16);
  LocalOpCost b = half.Cost(1e12, 1e9, DType::kBF16);
  EXPECT_DOUBLE_EQ(b.compute_seconds, 2 * a.compute_seconds);
  EXPECT_DOUBLE_EQ(b.memory_seconds, 4 * a.memory_seconds);
}

TEST(Roofline, SpeedFactorSlowsAStraggler) {
  Roofline roofline(Topology::Parse("tpu-v4:2x2x1"));
  LocalOpCost nominal = roofline.Cost(1e12, 1e9, DType::kBF16);
  LocalOpCost slow = roofline.Cost(1e12, 1e9, DType::kBF16, 0.5);
  EXPECT_DOUBLE_EQ(slow.seconds, 2 * nominal.seconds);
  EXPECT_DOUBLE_EQ(slow.compute_seconds, nominal.compute_seconds);
}

TEST(Roofline, PureDataMovementNeedsNoDtype) {
  Roofline roofline(Topology::Parse("cpu:2"));
  LocalOpCost cost = roofline.Cost(0, 10.5e9, DType::kC64);  // cpu has no complex peak
  EXPECT_DOUBLE_EQ(cost.seconds, 1.0);
}

TEST(Roofline, UnknownDtypeListsTheKnownOnes) {
  Roofline roofline(Topology::Parse("tpu-v4:2x2x1"));
  try {
    roofline.Cost(1, 1, DType::kI8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("no peak FLOP/s for dtype 'i8'; it has: f32, bf16"));
  }
}

TEST(Roofline, RejectsBadNumbers) {
  Topology v4 = Topology::Parse("tpu-v4:2x2x1");
  Roofline roofline(v4);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (auto [flops, bytes, speed] : {std::tuple{-1.0, 0.0, 1.0}, std::tuple{nan, 0.0, 1.0},
                                     std::tuple{0.0, -5.0, 1.0}, std::tuple{0.0, inf, 1.0},
                                     std::tuple{1.0, 1.0, 0.0}, std::tuple{1.0, 1.0, -2.0}}) {
    try {
      roofline.Cost(flops, bytes, DType::kBF16, speed);
      FAIL() << flops << " " << bytes << " " << speed;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    }
  }
  EXPECT_THROW(Roofline(v4, {.compute_efficiency = 0}), Error);
  EXPECT_THROW(Roofline(v4, {.compute_efficiency = 1.5}), Error);
  EXPECT_THROW(Roofline(v4, {.memory_efficiency = -1}), Error);
}

}  // namespace
}  // namespace spmdsim
