// The varying-axes mask (Array::varying_axes, JAX's vma) and how the collectives of DeviceContext update it,
// following jax/_src/lax/parallel.py: reductions remove the axes, all_gather / psum_scatter / all_to_all /
// ppermute add them, axis_index varies over its axes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "sim/array.h"
#include "sim/device_context.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

constexpr uint64_t kX = 0b001, kY = 0b010, kZ = 0b100;

TEST(VaryingAxes, FactoriesAreInvariantAndWithVaryingAxesSharesTheBuffer) {
  Array a = Array::Iota({4}, DType::kF32);
  EXPECT_EQ(a.varying_axes(), 0u);
  Array b = a.WithVaryingAxes(kX | kZ);
  EXPECT_EQ(b.varying_axes(), kX | kZ);
  EXPECT_TRUE(b.SharesBufferWith(a));
  EXPECT_EQ(a.varying_axes(), 0u);
  EXPECT_EQ(b.Reshape({2, 2}).varying_axes(), kX | kZ);
}

// Runs fn on every device of mesh {x:2, y:2, z:2} and returns the masks it reports per position.
std::vector<uint64_t> MasksOn(const std::function<Array(DeviceContext&)>& fn) {
  Runtime runtime(Mesh::Iota({2, 2, 2}, {"x", "y", "z"}), RuntimeOptions{.num_threads = 2});
  std::vector<uint64_t> masks(8);
  runtime.Run([&](DeviceContext& d) { masks[d.position()] = fn(d).varying_axes(); });
  return masks;
}

TEST(VaryingAxes, ReductionsRemoveTheirAxes) {
  for (auto op : {&DeviceContext::Psum, &DeviceContext::Pmean, &DeviceContext::Pmax, &DeviceContext::Pmin}) {
    std::vector<uint64_t> masks = MasksOn([&](DeviceContext& d) {
      Array x = Array::Scalar<float>(1).WithVaryingAxes(kX | kY);
      return (d.*op)(x, {"x", "z"});
    });
    for (uint64_t m : masks) EXPECT_EQ(m, kY);
  }
}

TEST(VaryingAxes, ReducingAnInvariantValueKeepsItInvariant) {
  for (uint64_t m : MasksOn([](DeviceContext& d) { return d.Psum(Array::Scalar<float>(1), "y"); })) EXPECT_EQ(m, 0u);
}

TEST(VaryingAxes, GatherScatterAllToAllAndPermuteAddTheirAxes) {
  Array x = Array::Iota({4}, DType::kF32).WithVaryingAxes(kX);
  for (uint64_t m : MasksOn([&](DeviceContext& d) { return d.AllGather(d.Hold(x), "y", 0, true); }))
    EXPECT_EQ(m, kX | kY);
  for (uint64_t m : MasksOn([&](DeviceContext& d) { return d.PsumScatter(d.Hold(x), "z", 0, true); }))
    EXPECT_EQ(m, kX | kZ);
  for (uint64_t m : MasksOn([&](DeviceContext& d) { return d.AllToAll(d.Hold(x), {"y", "z"}, 0, 0, true); }))
    EXPECT_EQ(m, kX | kY | kZ);
  for (uint64_t m : MasksOn([&](DeviceContext& d) { return d.Ppermute(d.Hold(x), "z", {{0, 1}, {1, 0}}); }))
    EXPECT_EQ(m, kX | kZ);
}

TEST(VaryingAxes, CollectivesOverNoAxesKeepTheMask) {
  Array x = Array::Iota({4}, DType::kF32).WithVaryingAxes(kY);
  for (uint64_t m : MasksOn([&](DeviceContext& d) { return d.Psum(d.Hold(x), std::vector<std::string>{}); }))
    EXPECT_EQ(m, kY);
  for (uint64_t m : MasksOn([&](DeviceContext& d) { return d.AllGather(d.Hold(x), std::vector<std::string>{}); }))
    EXPECT_EQ(m, kY);
}

TEST(VaryingAxes, HoldKeepsTheMask) {
  Array x = Array::Iota({4}, DType::kF32).WithVaryingAxes(kZ);
  for (uint64_t m : MasksOn([&](DeviceContext& d) { return d.Hold(x); })) EXPECT_EQ(m, kZ);
}

TEST(VaryingAxes, AxisIndexArrayVariesOverItsAxes) {
  Runtime runtime(Mesh::Iota({2, 2, 2}, {"x", "y", "z"}), RuntimeOptions{.num_threads = 2});
  std::vector<Array> out(8);
  runtime.Run([&](DeviceContext& d) { out[d.position()] = d.AxisIndexArray({"y", "z"}); });
  for (int p = 0; p < 8; ++p) {
    EXPECT_EQ(out[p].varying_axes(), kY | kZ);
    EXPECT_EQ(out[p].dtype(), DType::kI32);
    EXPECT_EQ(out[p].data<int32_t>()[0], p % 4);  // y major, z minor
  }
}

TEST(VaryingAxes, AxesMaskNamesBitsByMeshAxisAndRejectsUnknownAxes) {
  Runtime runtime(Mesh::Iota({2, 2, 2}, {"x", "y", "z"}), RuntimeOptions{.num_threads = 1});
  std::vector<uint64_t> masks(8);
  EXPECT_THROW(runtime.Run([&](DeviceContext& d) { masks[d.position()] = d.AxesMask({"z", "x"}) | d.AxesMask("w"); }),
               Error);
  runtime.Run([&](DeviceContext& d) { masks[d.position()] = d.AxesMask({"z", "x"}); });
  for (uint64_t m : masks) EXPECT_EQ(m, kX | kZ);
}

}  // namespace
}  // namespace spmdsim
