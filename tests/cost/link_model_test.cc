#include "cost/link_model.h"

#include <numeric>
#include <random>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/cost/test_meshes.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_meshes::OnTopology;
using Axes = std::vector<std::string>;

std::vector<int64_t> GroupOf(const Mesh& mesh, const Axes& axes, int64_t position) {
  return mesh.PositionGroups(axes)[mesh.GroupOf(position, axes)];
}

TEST(SpanOfGroup, FullTorusDimensionWithWraparoundIsARing) {
  // tpu-v4:4x4x4 wraps every dimension; mesh axes (z, y, x) follow the device numbering (x fastest).
  Mesh mesh = OnTopology("tpu-v4:4x4x4", {4, 4, 4}, {"z", "y", "x"});
  GroupSpan span = SpanOfGroup(mesh, GroupOf(mesh, {"x"}, 0));
  ASSERT_EQ(span.stages.size(), 1u);
  EXPECT_EQ(span.stages[0].link, LinkClass::kIci);
  EXPECT_EQ(span.stages[0].shape, StageShape::kRing);
  EXPECT_EQ(span.stages[0].dimension, "x");
  EXPECT_EQ(span.stages[0].size, 4);
  EXPECT_EQ(span.stages[0].stride, 1);
  EXPECT_DOUBLE_EQ(span.stages[0].bandwidth_Bps, 4.5e10);
  EXPECT_DOUBLE_EQ(span.stages[0].latency_s, 1e-6);
  EXPECT_TRUE(span.regular);
  EXPECT_EQ(span.size(), 4);
}

TEST(SpanOfGroup, DimensionWithoutWraparoundIsALine) {
  // v4 wraps a dimension only when it is a multiple of 4: x and y of 2x2x4 are lines, z a ring.
  Mesh mesh = OnTopology("tpu-v4:2x2x4", {4, 2, 2}, {"z", "y", "x"});
  EXPECT_EQ(SpanOfGroup(mesh, GroupOf(mesh, {"x"}, 0)).stages[0].shape, StageShape::kLine);
  EXPECT_EQ(SpanOfGroup(mesh, GroupOf(mesh, {"z"}, 0)).stages[0].shape, StageShape::kRing);
}

TEST(SpanOfGroup, PartOfAWrappedDimensionIsALine) {
  // x of 4 split into (xh, xl): xl holds chips {0, 1} of the ring of 4, which cannot use the wraparound.
  Mesh mesh = OnTopology("tpu-v4:4x4x4", {4, 4, 2, 2}, {"z", "y", "xh", "xl"});
  GroupSpan span = SpanOfGroup(mesh, GroupOf(mesh, {"xl"}, 0));
  ASSERT_EQ(span.stages.size(), 1u);
  EXPECT_EQ(span.stages[0].shape, StageShape::kLine);
  EXPECT_EQ(span.stages[0].stride, 1);
}

TEST(SpanOfGroup, StridedMembersShareLinksWithInterleavedGroups) {
  // xh holds chips {0, 2}: every other chip of the ring of 4; two interleaved groups share each link.
  Mesh mesh = OnTopology("tpu-v4:4x4x4", {4, 4, 2, 2}, {"z", "y", "xh", "xl"});
  GroupSpan span = SpanOfGroup(mesh, GroupOf(mesh, {"xh"}, 0));
  ASSERT_EQ(span.stages.size(), 1u);
  EXPECT_EQ(span.stages[0].stride, 2);
  EXPECT_EQ(span.stages[0].shape, StageShape::kRing);  // 2 members x stride 2 = the whole wrapped dimension
  EXPECT_DOUBLE_EQ(span.stages[0].bandwidth_Bps, 4.5e10 / 2);
  EXPECT_DOUBLE_EQ(span.stages[0].latency_s, 2e-6);
}

TEST(SpanOfGroup, SeveralTorusDimensionsGiveOneStageEachInXYZOrder) {
  Mesh mesh = OnTopology("tpu-v4:4x4x4", {4, 16}, {"data", "model"});  // model = (y, x)
  GroupSpan span = SpanOfGroup(mesh, GroupOf(mesh, {"model"}, 0));
  ASSERT_EQ(span.stages.size(), 2u);
  EXPECT_EQ(span.stages[0].dimension, "x");
  EXPECT_EQ(span.stages[1].dimension, "y");
  // member_coords: member i of the model group sits at x = i % 4, y = i / 4.
  for (int i = 0; i < 16; ++i) EXPECT_THAT(span.member_coords[i], ElementsAre(i % 4, i / 4));
}

TEST(SpanOfGroup, CoresOfOneChipExchangeOnTheChip) {
  // tpu-v3:2x2 has 2 cores per chip: ids = (y*2 + x)*2 + core.
  Topology v3 = Topology::Parse("tpu-v3:2x2");
  Mesh mesh = OnTopology(v3, {2, 2, 2}, {"y", "x", "core"});
  GroupSpan cores = SpanOfGroup(mesh, GroupOf(mesh, {"core"}, 0));
  ASSERT_EQ(cores.stages.size(), 1u);
  EXPECT_EQ(cores.stages[0].shape, StageShape::kOnChip);
  EXPECT_DOUBLE_EQ(cores.stages[0].bandwidth_Bps, v3.memory_bandwidth_Bps());
  // One core per chip: the other core's group uses the same chip links, so half the link each.
  GroupSpan x = SpanOfGroup(mesh, GroupOf(mesh, {"x"}, 0));
  ASSERT_EQ(x.stages.size(), 1u);
  EXPECT_EQ(x.stages[0].link, LinkClass::kIci);
  EXPECT_DOUBLE_EQ(x.stages[0].bandwidth_Bps, v3.link(LinkClass::kIci).bandwidth_Bps / 2);
  // Both cores and both x: on-chip first, then ICI at the full link.
  GroupSpan both = SpanOfGroup(mesh, GroupOf(mesh, {"x", "core"}, 0));
  ASSERT_EQ(both.stages.size(), 2u);
  EXPECT_EQ(both.stages[0].shape, StageShape::kOnChip);
  EXPECT_DOUBLE_EQ(both.stages[1].bandwidth_Bps, v3.link(LinkClass::kIci).bandwidth_Bps);
}

TEST(SpanOfGroup, AcrossSlicesIsDcnSharedByTheHostsDevices) {
  // Two v4 2x2x1 slices: one 4-chip host per slice; its 2.5e10 B/s NIC is shared by 4 chips.
  Topology two = Topology::Parse("tpu-v4:2x2x1", 2);
  Mesh mesh = OnTopology(two, {2, 4}, {"dcn", "ici"});
  GroupSpan span = SpanOfGroup(mesh, GroupOf(mesh, {"dcn"}, 0));
  ASSERT_EQ(span.stages.size(), 1u);
  EXPECT_EQ(span.stages[0].link, LinkClass::kDcn);
  EXPECT_EQ(span.stages[0].shape, StageShape::kSwitch);
  EXPECT_DOUBLE_EQ(span.stages[0].bandwidth_Bps, 2.5e10 / 4);
  GroupSpan all = SpanOfGroup(mesh, GroupOf(mesh, {"dcn", "ici"}, 0));
  ASSERT_EQ(all.stages.size(), 3u);  // x, y, then DCN last
  EXPECT_EQ(all.stages[2].link, LinkClass::kDcn);
}

TEST(SpanOfGroup, GpuHostIsNvlinkAndAcrossHostsIsInfiniband) {
  Mesh mesh = OnTopology("dgx-h100:2", {2, 8}, {"hosts", "local"});
  GroupSpan local = SpanOfGroup(mesh, GroupOf(mesh, {"local"}, 0));
  ASSERT_EQ(local.stages.size(), 1u);
  EXPECT_EQ(local.stages[0].link, LinkClass::kNvlink);
  EXPECT_EQ(local.stages[0].shape, StageShape::kSwitch);
  EXPECT_DOUBLE_EQ(local.stages[0].bandwidth_Bps, 450e9);  // switched: every GPU at full bandwidth
  GroupSpan hosts = SpanOfGroup(mesh, GroupOf(mesh, {"hosts"}, 3));
  ASSERT_EQ(hosts.stages.size(), 1u);
  EXPECT_EQ(hosts.stages[0].link, LinkClass::kInfiniband);
  EXPECT_DOUBLE_EQ(hosts.stages[0].bandwidth_Bps, 50e9);  // one NIC per GPU
  GroupSpan both = SpanOfGroup(mesh, GroupOf(mesh, {"hosts", "local"}, 0));
  ASSERT_EQ(both.stages.size(), 2u);
  EXPECT_EQ(both.stages[0].link, LinkClass::kNvlink);
  EXPECT_EQ(both.stages[1].link, LinkClass::kInfiniband);
}

TEST(SpanOfGroup, GroupThatIsNotAProductFallsBackToOneCoarseStage) {
  Mesh mesh = OnTopology("dgx-h100:2", {2, 8}, {"hosts", "local"});
  const std::vector<int64_t> diagonal = {0, 9};  // host 0 GPU 0 and host 1 GPU 1
  GroupSpan span = SpanOfGroup(mesh, diagonal);
  EXPECT_FALSE(span.regular);
  ASSERT_EQ(span.stages.size(), 1u);
  EXPECT_EQ(span.stages[0].link, LinkClass::kInfiniband);
  EXPECT_EQ(span.stages[0].size, 2);
  EXPECT_THAT(span.ToString(), HasSubstr("irregular"));
}

TEST(SpanOfGroup, CpuDevicesShareHostMemory) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  GroupSpan span = SpanOfGroup(mesh, GroupOf(mesh, {"x"}, 0));
  ASSERT_EQ(span.stages.size(), 1u);
  EXPECT_EQ(span.stages[0].link, LinkClass::kHostMemory);
  EXPECT_EQ(span.stages[0].size, 4);
}

TEST(SpanOfGroup, SingleDeviceHasNoStages) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  const std::vector<int64_t> one = {2};
  GroupSpan span = SpanOfGroup(mesh, one);
  EXPECT_TRUE(span.stages.empty());
  EXPECT_EQ(span.ToString(), "single device");
}

TEST(SpanOfGroup, RejectsAMeshWithoutTopology) {
  Mesh mesh(DeviceArray({2}, {0, 1}), {"x"});
  const std::vector<int64_t> group = {0, 1};
  try {
    SpanOfGroup(mesh, group);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_THAT(e.what(), HasSubstr("topology"));
  }
}

TEST(SpanOfGroup, RejectsBadGroups) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  const std::vector<int64_t> empty;
  const std::vector<int64_t> outside = {0, 4};
  const std::vector<int64_t> repeated = {1, 1};
  try {
    SpanOfGroup(mesh, outside);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfRange);
    EXPECT_THAT(e.what(), HasSubstr("0..3"));
  }
  try {
    SpanOfGroup(mesh, empty);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  try {
    SpanOfGroup(mesh, repeated);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("twice"));
  }
}

TEST(DescribeAxes, ReportsTheLinkClassOfEveryAxis) {
  Topology two = Topology::Parse("dgx-h100:2");
  Mesh mesh = OnTopology(two, {2, 8}, {"data", "tensor"});
  std::vector<AxisLinks> axes = DescribeAxes(mesh);
  ASSERT_EQ(axes.size(), 2u);
  EXPECT_EQ(axes[0].axis, "data");
  EXPECT_THAT(axes[0].links, ElementsAre(LinkClass::kInfiniband));
  EXPECT_THAT(axes[1].links, ElementsAre(LinkClass::kNvlink));
  EXPECT_TRUE(axes[0].uniform);
  EXPECT_THAT(axes[1].ToString(), HasSubstr("tensor (8): [nvlink]"));
}

TEST(DescribeAxes, FlagsAxesWhoseGroupsDifferAndShowsTheSlowest) {
  // Row 0 stays in host 0; row 1 mixes hosts 0 and 1 (an asymmetric layout).
  Mesh mesh = OnTopology("dgx-h100:2", {2, 4}, {"a", "b"}, {0, 1, 2, 3, 4, 5, 8, 9});
  std::vector<AxisLinks> axes = DescribeAxes(mesh);
  EXPECT_FALSE(axes[1].uniform);
  EXPECT_THAT(axes[1].links, ElementsAre(LinkClass::kInfiniband));
  EXPECT_THAT(axes[1].ToString(), HasSubstr("groups differ"));
}

TEST(DescribeAxes, SizeOneAxisCrossesNothing) {
  Mesh mesh = OnTopology("tpu-v4:2x2x1", {1, 4}, {"one", "chips"});
  std::vector<AxisLinks> axes = DescribeAxes(mesh);
  EXPECT_TRUE(axes[0].links.empty());
  EXPECT_THAT(axes[1].links, ElementsAre(LinkClass::kIci));
}

TEST(SpanOfGroup, MemberCoordinatesAreDistinctAndInRangeForRandomLayouts) {
  // Property: for random transposes of a v4 4x4x4 mesh and every group along random axis subsets, the
  // stages' sizes multiply to the group size and members get distinct in-range coordinates.
  std::mt19937 rng(7);
  Topology v4 = Topology::Parse("tpu-v4:4x4x4");
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int> perm = {0, 1, 2, 3};
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int> ids(64);
    std::iota(ids.begin(), ids.end(), 0);
    DeviceArray array = DeviceArray({4, 4, 2, 2}, ids).Transpose(perm);
    Mesh mesh = OnTopology(v4, array.shape(), {"a", "b", "c", "d"}, array.ids());
    Axes names = {"a", "b", "c", "d"};
    Axes subset;
    for (const auto& n : names) {
      if (rng() % 2) subset.push_back(n);
    }
    for (const auto& group : mesh.PositionGroups(subset)) {
      GroupSpan span = SpanOfGroup(mesh, group);
      ASSERT_TRUE(span.regular);
      int64_t product = 1;
      for (const SpanStage& s : span.stages) product *= s.size;
      EXPECT_EQ(product, static_cast<int64_t>(group.size()));
      std::set<std::vector<int>> distinct(span.member_coords.begin(), span.member_coords.end());
      EXPECT_EQ(distinct.size(), group.size());
      for (const auto& coords : span.member_coords) {
        ASSERT_EQ(coords.size(), span.stages.size());
        for (size_t s = 0; s < coords.size(); ++s) {
          EXPECT_GE(coords[s], 0);
          EXPECT_LT(coords[s], span.stages[s].size);
        }
      }
    }
  }
}

}  // namespace
}  // namespace spmdsim
