#include "cost/clocks.h"

#include <limits>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

CollectiveCost CostOf(double seconds) {
  CollectiveCost cost;
  cost.seconds = seconds;
  return cost;
}

TEST(SimClocks, HeaderExampleStragglerDelaysItsGroupOnly) {
  SimClocks clocks(4);
  clocks.SetSpeedFactor(2, 0.5);
  clocks.AdvanceLocalAll("matmul", 1e-3);
  EXPECT_THAT(clocks.clocks(), ElementsAre(1e-3, 1e-3, 2e-3, 1e-3));
  clocks.AdvanceCollective("psum", {{0, 1}, {2, 3}}, {CostOf(0.25e-3), CostOf(0.25e-3)});
  EXPECT_THAT(clocks.clocks(), ElementsAre(DoubleEq(1e-3 + 0.25e-3), DoubleEq(1e-3 + 0.25e-3),
                                           DoubleEq(2e-3 + 0.25e-3), DoubleEq(2e-3 + 0.25e-3)));
  EXPECT_THAT(clocks.wait_seconds(), ElementsAre(0, 0, 0, DoubleEq(1e-3)));
  EXPECT_DOUBLE_EQ(clocks.Makespan(), 2e-3 + 0.25e-3);
}

TEST(SimClocks, RecordsEveryStep) {
  SimClocks clocks(3);
  clocks.AdvanceLocal("embed", 1, 2.0);
  clocks.AdvanceCollective("all_gather", {{2, 0, 1}}, {CostOf(0.5)});
  ASSERT_EQ(clocks.steps().size(), 2u);
  const StepRecord& local = clocks.steps()[0];
  EXPECT_EQ(local.kind, StepRecord::Kind::kLocal);
  ASSERT_EQ(local.devices.size(), 1u);
  EXPECT_EQ(local.devices[0].position, 1);
  EXPECT_DOUBLE_EQ(local.devices[0].end, 2.0);
  const StepRecord& collective = clocks.steps()[1];
  EXPECT_EQ(collective.kind, StepRecord::Kind::kCollective);
  ASSERT_EQ(collective.groups.size(), 1u);
  EXPECT_DOUBLE_EQ(collective.groups[0].arrival, 2.0);
  EXPECT_DOUBLE_EQ(collective.groups[0].end, 2.5);
  ASSERT_EQ(collective.devices.size(), 3u);
  EXPECT_EQ(collective.devices[0].position, 0);  // sorted by position
  EXPECT_DOUBLE_EQ(collective.devices[0].start, 0.0);
  EXPECT_DOUBLE_EQ(collective.devices[1].start, 2.0);
  EXPECT_DOUBLE_EQ(collective.devices[2].end, 2.5);
}

TEST(SimClocks, CollectiveFromTheModelUsesEachGroupsCost) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  CollectiveModel model(mesh);
  SimClocks clocks(4);
  clocks.AdvanceLocal("late", 3, 1.0);
  const std::vector<std::string> axes = {"x"};
  clocks.AdvanceCollective("psum", model, CollectiveOp::kAllReduce, axes, 1e6);
  const double t = model.Cost(CollectiveOp::kAllReduce, axes, 1e6).seconds;
  ASSERT_GT(t, 0);
  // Groups along x: {0, 2} and {1, 3}; only the second waits for position 3.
  EXPECT_DOUBLE_EQ(clocks.now(0), t);
  EXPECT_DOUBLE_EQ(clocks.now(2), t);
  EXPECT_DOUBLE_EQ(clocks.now(1), 1.0 + t);
  EXPECT_DOUBLE_EQ(clocks.now(3), 1.0 + t);
  EXPECT_EQ(clocks.steps().back().groups[1].cost.group_size, 2);
}

TEST(SimClocks, ClocksNeverGoBackwardsAndGroupsEndTogether) {
  // Property: random local steps and random pairings keep every clock monotone and equalise each group.
  std::mt19937 rng(11);
  SimClocks clocks(8);
  std::uniform_real_distribution<double> seconds(0, 1);
  for (int p = 0; p < 8; ++p) clocks.SetSpeedFactor(p, 0.25 + seconds(rng));
  for (int step = 0; step < 50; ++step) {
    std::vector<double> before = clocks.clocks();
    if (step % 2 == 0) {
      clocks.AdvanceLocal("local", rng() % 8, seconds(rng));
    } else {
      std::vector<int64_t> order = {0, 1, 2, 3, 4, 5, 6, 7};
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<std::vector<int64_t>> groups = {{order[0], order[1], order[2]}, {order[3], order[4]},
                                                  {order[5], order[6], order[7]}};
      clocks.AdvanceCollective("c", groups, {CostOf(seconds(rng)), CostOf(seconds(rng)), CostOf(0)});
      for (const auto& group : groups) {
        for (int64_t p : group) EXPECT_DOUBLE_EQ(clocks.now(p), clocks.now(group[0]));
      }
    }
    for (int p = 0; p < 8; ++p) EXPECT_GE(clocks.now(p), before[p]);
  }
}

TEST(SimClocks, RejectsBadInput) {
  EXPECT_THROW(SimClocks(0), Error);
  SimClocks clocks(2);
  try {
    clocks.now(2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfRange);
    EXPECT_THAT(e.what(), HasSubstr("0..1"));
  }
  EXPECT_THROW(clocks.SetSpeedFactor(0, 0), Error);
  EXPECT_THROW(clocks.SetSpeedFactor(0, -1), Error);
  EXPECT_THROW(clocks.SetSpeedFactor(5, 1), Error);
  EXPECT_THROW(clocks.AdvanceLocal("x", 0, -1), Error);
  EXPECT_THROW(clocks.AdvanceLocal("x", -1, 1), Error);
  EXPECT_THROW(clocks.AdvanceLocalAll("x", std::numeric_limits<double>::infinity()), Error);
  try {
    clocks.AdvanceCollective("c", {{0, 1}}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("1 groups but 0 costs"));
  }
  try {
    clocks.AdvanceCollective("c", {{0}, {0, 1}}, {CostOf(1), CostOf(1)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("position 0 is in two groups"));
  }
  EXPECT_THROW(clocks.AdvanceCollective("c", {{}}, {CostOf(1)}), Error);
  EXPECT_THROW(clocks.AdvanceCollective("c", {{0, 3}}, {CostOf(1)}), Error);
  EXPECT_THROW(clocks.AdvanceCollective("c", {{0, 1}}, {CostOf(-1)}), Error);
  CollectiveModel model(Mesh::Iota({4}, {"x"}));
  const std::vector<std::string> axes = {"x"};
  try {
    clocks.AdvanceCollective("psum", model, CollectiveOp::kAllReduce, axes, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("4 devices but there are 2 clocks"));
  }
  EXPECT_EQ(clocks.steps().size(), 0u);  // nothing was recorded by the failed calls
}

}  // namespace
}  // namespace spmdsim

namespace spmdsim {
namespace {

TEST(SimClocks, KeepsNoStepRecordsWhenAskedButStillAdvances) {
  SimClocks clocks(2);
  clocks.set_keep_steps(false);
  for (int i = 0; i < 1000; ++i) clocks.AdvanceLocal("matmul", 0, 1e-3);
  EXPECT_TRUE(clocks.steps().empty());
  EXPECT_DOUBLE_EQ(clocks.now(0), 1.0);
}

}  // namespace
}  // namespace spmdsim
