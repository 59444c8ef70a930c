#include "mesh/mesh.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Axes = std::vector<std::string>;

TEST(Mesh, LooksUpAxesByName) {
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  EXPECT_EQ(mesh.size(), 8);
  EXPECT_EQ(mesh.AxisIndex("y"), 1);
  EXPECT_EQ(mesh.AxisSize("x"), 4);
  EXPECT_EQ(mesh.AxesSize(Axes{"x", "y"}), 8);
  EXPECT_EQ(mesh.ToString(), "Mesh('x': 4, 'y': 2)");
}

TEST(Mesh, UnknownAxisErrorListsTheValidAxes) {
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  try {
    mesh.AxisIndex("tp");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("'tp'"));
    EXPECT_THAT(e.what(), HasSubstr("('x', 'y')"));
  }
}

TEST(Mesh, RejectsRepeatedAxisNamesAndWrongRank) {
  EXPECT_THROW(Mesh::Iota({2, 2}, {"x", "x"}), Error);
  EXPECT_THROW(Mesh::Iota({2, 2}, {"x"}), Error);
  EXPECT_THROW(Mesh::Iota({2}, {""}), Error);
  EXPECT_THROW(Mesh(DeviceArray({2}, {1, 1}), {"x"}), Error);
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  EXPECT_THROW(mesh.ValidateAxes(Axes{"x", "x"}), Error);
}

TEST(Mesh, GroupsFollowTheTupleOrderFirstNameMajor) {
  // id = 2*x + y on a (4, 2) mesh.
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  EXPECT_THAT(mesh.DeviceGroups(Axes{"x"}),
              ElementsAre(ElementsAre(0, 2, 4, 6), ElementsAre(1, 3, 5, 7)));
  EXPECT_THAT(mesh.DeviceGroups(Axes{"y"}),
              ElementsAre(ElementsAre(0, 1), ElementsAre(2, 3), ElementsAre(4, 5), ElementsAre(6, 7)));
  EXPECT_THAT(mesh.DeviceGroups(Axes{"x", "y"}), ElementsAre(ElementsAre(0, 1, 2, 3, 4, 5, 6, 7)));
  EXPECT_THAT(mesh.DeviceGroups(Axes{"y", "x"}), ElementsAre(ElementsAre(0, 2, 4, 6, 1, 3, 5, 7)));
  EXPECT_EQ(mesh.DeviceGroups(Axes{}).size(), 8u);
  EXPECT_EQ(mesh.IndexInGroup(5, Axes{"y", "x"}), 4 * 1 + 2);
  EXPECT_EQ(mesh.GroupOf(5, Axes{"x"}), 1);
}

TEST(Mesh, GroupsUseDeviceIdsNotPositions) {
  Mesh mesh(DeviceArray({2, 2}, {3, 1, 2, 0}), {"a", "b"});
  EXPECT_THAT(mesh.DeviceGroups(Axes{"a"}), ElementsAre(ElementsAre(3, 2), ElementsAre(1, 0)));
  EXPECT_EQ(mesh.PositionOfDevice(2), 2);
  EXPECT_THAT(mesh.CoordsOfPosition(mesh.PositionOfDevice(1)), ElementsAre(0, 1));
  EXPECT_THROW(mesh.PositionOfDevice(7), Error);
}

TEST(Mesh, RejectsDevicesTheTopologyDoesNotHave) {
  auto topology = std::make_shared<const Topology>(Topology::Cpu(2));
  EXPECT_THROW(Mesh(DeviceArray({3}, {0, 1, 2}), {"x"}, topology), Error);
}

TEST(DeviceArray, TransposesAndReshapesLikeNumpy) {
  DeviceArray a({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_THAT(a.Transpose({1, 0}).ids(), ElementsAre(0, 4, 1, 5, 2, 6, 3, 7));
  EXPECT_THAT(a.Transpose({1, 0}).shape(), ElementsAre(4, 2));
  EXPECT_EQ(a.Reshape({2, 2, 2}).at({1, 0, 1}), 5);
  EXPECT_EQ(a.ToString(), "[[0, 1, 2, 3], [4, 5, 6, 7]]");
  EXPECT_THROW(a.Reshape({3, 3}), Error);
}

}  // namespace
}  // namespace spmdsim
