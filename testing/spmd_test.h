// spmdsim::testing: a GoogleTest harness for users' partitioning code and device functions. Link
// spmdsim::testing (it brings GoogleTest/gmock) and copy examples/testing/my_partitioning_test.cc to start.
//
//  - SpmdTest: a fixture that builds a Mesh the way JAX's mesh_utils do (MakeDeviceMesh on a topology preset)
//    and runs device functions on it (Runtime::Run), collecting one result per device.
//  - Matchers (gmock), in testing/matchers.h: AllClose / AllCloseTo (numpy.allclose), BitwiseEqual,
//    IsShardedAs("P('dp', None)"), NeededNoCorrection().
//
// Example:
//   class MyMlpTest : public spmdsim::testing::SpmdTest {};
//   TEST_F(MyMlpTest, TensorParallelMatchesUnsharded) {
//     UseMesh("tpu-v4:2x2x1", {{"dp", 2}, {"tp", 2}});      // 4 devices: dp:2 x tp:2
//     std::vector<Array> out = RunOnEachDevice([&](DeviceContext& d) { return MyShard(d, ...); });
//     EXPECT_THAT(out[0], AllClose(reference, /*rtol=*/1e-5, /*atol=*/1e-6));
//   }
//
// Thread safety: a fixture belongs to one test; RunOnEachDevice calls the function concurrently on every
// device (see sim/runtime.h), and returns after every device has finished.
#ifndef SPMDSIM_TESTING_SPMD_TEST_H_
#define SPMDSIM_TESTING_SPMD_TEST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "mesh/mesh.h"
#include "sim/array.h"
#include "sim/device_context.h"
#include "sim/runtime.h"
#include "testing/matchers.h"

namespace spmdsim::testing {

class SpmdTest : public ::testing::Test {
 protected:
  // A mesh on a topology preset ("tpu-v4:2x2x1", "tpu-v5e:4x4", "dgx-h100:1", "gpu:2x8", "cpu:8"; see
  // Topology::Parse) with named axis sizes, device order as jax.experimental.mesh_utils.create_device_mesh
  // (MakeDeviceMesh). The product of the sizes must equal the preset's device count. Replaces the previous
  // mesh and runtime.
  const Mesh& UseMesh(std::string_view topology, const std::vector<std::pair<std::string, int64_t>>& axes);
  // A mesh without a topology: devices 0..n-1 in row-major order (Mesh::Iota).
  const Mesh& UseIotaMesh(const std::vector<std::pair<std::string, int64_t>>& axes);

  // REQUIRES: UseMesh or UseIotaMesh was called (fails the test otherwise).
  const Mesh& mesh() const;
  // The runtime for the mesh, created on first use with `runtime_options`.
  Runtime& runtime();

  // Runs fn on every device; result i is device position i's return value.
  std::vector<Array> RunOnEachDevice(const std::function<Array(DeviceContext&)>& fn);
  // Runs fn on every device (for functions that check or record things themselves).
  void Run(const std::function<void(DeviceContext&)>& fn);

  RuntimeOptions runtime_options;  // set before the first runtime() / RunOnEachDevice call

 private:
  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<Runtime> runtime_;
};

}  // namespace spmdsim::testing

#endif  // SPMDSIM_TESTING_SPMD_TEST_H_
