#include "testing/spmd_test.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops/ops.h"

namespace spmdsim::testing {
namespace {

class SpmdTestFixture : public SpmdTest {};

TEST_F(SpmdTestFixture, BuildsAMeshFromATopologyPresetAsMeshUtilsDoes) {
  const Mesh& m = UseMesh("tpu-v4:2x2x1", {{"dp", 2}, {"tp", 2}});
  EXPECT_EQ(m.size(), 4);
  EXPECT_EQ(m.AxisSize("tp"), 2);
  EXPECT_EQ(runtime().num_devices(), 4);
}

TEST_F(SpmdTestFixture, BuildsAnIotaMesh) {
  const Mesh& m = UseIotaMesh({{"x", 4}, {"y", 2}});
  EXPECT_EQ(m.size(), 8);
  EXPECT_EQ(m.AxisSize("x"), 4);
}

TEST_F(SpmdTestFixture, RunOnEachDeviceReturnsOneResultPerPosition) {
  UseIotaMesh({{"x", 4}});
  std::vector<Array> out = RunOnEachDevice([](DeviceContext& d) {
    return d.Psum(Array::Scalar<float>(static_cast<float>(d.position())), "x");
  });
  ASSERT_EQ(out.size(), 4u);
  for (const Array& a : out) EXPECT_THAT(a, AllCloseTo({6}));
}

TEST_F(SpmdTestFixture, RunPropagatesADeviceFailure) {
  UseIotaMesh({{"x", 2}});
  EXPECT_THROW(Run([](DeviceContext& d) {
                 if (d.position() == 1) Exp(Array::Zeros({2}, DType::kI32));
               }),
               DeviceError);
}

TEST_F(SpmdTestFixture, AnUnknownPresetIsAnError) {
  EXPECT_THROW(UseMesh("tpu-v99:2", {{"x", 2}}), Error);
}

}  // namespace
}  // namespace spmdsim::testing
