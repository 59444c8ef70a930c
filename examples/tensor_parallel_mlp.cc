// A Megatron-style tensor-parallel MLP (Shoeybi et al. 2019, "Megatron-LM", section 3): W1 is split by
// columns and W2 by rows over the 'model' axis, so each device computes gelu(x @ W1[:, its columns]) @
// W2[its rows, :] -- a partial sum of the output -- and ONE psum over 'model' completes it. The batch is
// split over 'data' at the same time (2-D parallelism).
//
// Mesh: the 8 chips of a TPU v4 2x2x2 slice as {data: 2, model: 4}, in the device order JAX's
// mesh_utils.create_device_mesh picks (MakeDeviceMesh).
// The check: the output must match gelu(x @ W1) @ W2 computed on the whole arrays.
#include <cstdio>
#include <memory>
#include <random>

#include "examples/example_check.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "ops/ops.h"
#include "shardmap/shard_map.h"
#include "sim/multiprocess.h"

using namespace spmdsim;  // NOLINT: an example reads better without the prefixes

int main(int argc, char** argv) {
  // Alone: one process runs every device. Under `mpirun -np K`: each process runs its share of the devices and
  // the collectives cross processes over MPI; every process prints the same results (docs/multiprocess.md).
  MpiSession mpi(&argc, &argv);
  ShardMapOptions across;
  across.runtime_options.process_group = mpi.world();
  auto topology = std::make_shared<const Topology>(Topology::Parse("tpu-v4:2x2x2"));
  Mesh mesh = MakeDeviceMesh(topology, {{"data", 2}, {"model", 4}});

  std::mt19937 rng(7);
  const int64_t batch = 8, d_model = 16, d_ff = 64;
  Array x = examples::RandomNormal(rng, {batch, d_model});
  Array w1 = examples::RandomNormal(rng, {d_model, d_ff}, 0.25f);
  Array w2 = examples::RandomNormal(rng, {d_ff, d_model}, 0.25f);

  // Blocks each device receives: x [4, 16] (its half of the batch), w1 [16, 16] (a quarter of the columns),
  // w2 [16, 16] (the matching quarter of the rows). gelu is elementwise, so it applies to the column block
  // without communication; the row-parallel matmul leaves partial sums that the psum adds.
  auto mlp = ShardMap(
      [](DeviceContext& d, const Array& x_block, const Array& w1_cols, const Array& w2_rows) {
        Array h = Gelu(MatMul(x_block, w1_cols));          // column-parallel: [4, 16]
        Array partial = MatMul(h, w2_rows);                // row-parallel: [4, 16], one summand per device
        return d.Psum(partial, "model");                   // the only communication
      },
      mesh, {P("data", kNone), P(kNone, "model"), P("model", kNone)}, {P("data", kNone)}, across);
  Array y = mlp(x, w1, w2)[0];

  Array expected = MatMul(Gelu(MatMul(x, w1)), w2);
  std::printf("tensor-parallel MLP on %s, mesh %s (device ids %s)\n", topology->ToString().c_str(),
              mesh.ToString().c_str(), mesh.devices().ToString().c_str());
  std::printf("x %s, w1 %s split P(None, 'model'), w2 %s split P('model', None) -> y %s\n",
              x.ShapeString().c_str(), w1.ShapeString().c_str(), w2.ShapeString().c_str(),
              y.ShapeString().c_str());
  // The psum adds float32 partial sums in another order than the whole matmul does, so the results agree to
  // rounding, not bitwise; with larger sizes raise the tolerance (d_model 512, d_ff 2048 needs rtol ~1e-4).
  if (!examples::AllClose("y = gelu(x @ w1) @ w2", y, expected, 1e-5, 1e-5)) {
    std::fprintf(stderr, "FAILED: the tensor-parallel MLP differs from the unsharded MLP\n");
    return 1;
  }
  return 0;
}
