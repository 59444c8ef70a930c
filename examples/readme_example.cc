// spmdsim in one screen: a sharded matmul on a simulated 8-chip TPU v4 slice, checked against the whole one.
#include <cstdio>
#include <memory>

#include "mesh/mesh_utils.h"
#include "ops/ops.h"
#include "shardmap/shard_map.h"
using namespace spmdsim;

int main() {
  // 8 TPU v4 chips as a (data: 2, model: 4) mesh, in the device order JAX's mesh_utils would pick.
  Mesh mesh = MakeDeviceMesh(std::make_shared<Topology>(Topology::Parse("tpu-v4:2x2x2")), {{"data", 2}, {"model", 4}});
  // x [4, 8] is split by rows over 'data' and by columns over 'model'; w [8, 2] by rows over 'model'.
  // Each device multiplies its blocks; psum over 'model' adds the 4 partial products.
  auto matmul = ShardMap([](DeviceContext& d, const Array& x, const Array& w) { return d.Psum(MatMul(x, w), "model"); },
                         mesh, {P("data", "model"), P("model", kNone)}, {P("data", kNone)});
  Array x = Array::Iota({4, 8}, DType::kF32), w = Array::Full({8, 2}, DType::kF32, 1.0);
  Array y = matmul(x, w)[0];  // row i of x @ ones sums 8i..8i+7: 64i + 28
  std::printf("%s on devices %s\ny = %s\n", mesh.ToString().c_str(), mesh.devices().ToString().c_str(),
              y.ToString().c_str());
  return y.BitwiseEquals(MatMul(x, w)) ? 0 : 1;
}
