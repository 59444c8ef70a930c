// A matmul whose contracting dimension is sharded, finished with psum_scatter (the shard_map notebook,
// "Example 2: psum_scatter the result", docs/notebooks/shard_map.md in jax-ml/jax): lhs is split by
// columns P(None, 'i') and rhs by rows P('i', None), so each device's lhs_block @ rhs_block is one summand
// of the full product. psum_scatter adds the summands AND leaves each device only its block of rows of the
// sum -- the output stays sharded P('i', None), like rhs, and no device ever holds the whole result.
//
// A second version computes the same thing with ppermute steps around the ring, one local matmul per step
// (the notebook's matmul_psumscatter_overlapped), which on real hardware overlaps communication with compute.
//
// Mesh: the 4 chips of a TPU v5e 2x2 as {i: 4}. The check: both versions against lhs @ rhs.
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
  auto topology = std::make_shared<const Topology>(Topology::Parse("tpu-v5e:2x2"));
  Mesh mesh = MakeDeviceMesh(topology, {{"i", 4}});

  std::mt19937 rng(3);
  Array lhs = examples::RandomNormal(rng, {8, 16});
  Array rhs = examples::RandomNormal(rng, {16, 8});
  Array expected = MatMul(lhs, rhs);

  // Version 1: local matmul over a quarter of the contracting dimension, then psum_scatter.
  auto matmul_psum_scatter = ShardMap(
      [](DeviceContext& d, const Array& lhs_block, const Array& rhs_block) {
        Array summand = MatMul(lhs_block, rhs_block);          // [8, 4] x [4, 8] -> [8, 8], a partial sum
        return d.PsumScatter(summand, "i", /*scatter_dimension=*/0, /*tiled=*/true);  // my 2 rows of the sum
      },
      mesh, {P(kNone, "i"), P("i", kNone)}, {P("i", kNone)}, across);
  // CallSharded keeps the result on the devices: a ShardedArray with NamedSharding(mesh, P('i', None)).
  ShardedArray out = matmul_psum_scatter.CallSharded({lhs, rhs})[0];
  std::printf("psum_scatter result: %s\n", out.ToString().c_str());
  for (int64_t p = 0; p < mesh.size(); ++p) {
    std::printf("  device %d holds %s\n", out.AllShards()[p].device, out.shard(p).ShapeString().c_str());
  }
  bool ok = examples::AllClose("matmul + psum_scatter", out.Gather(), expected, 1e-5, 1e-5);

  // Version 2: the same reduce-scatter spelled as N-1 ring shifts. Device idx splits its lhs block into N row
  // chunks; at every step it adds its contribution to the chunk it is accumulating and passes the running sum
  // to its left neighbour. After N-1 shifts, device idx holds the complete rows of chunk idx.
  auto matmul_ring = ShardMap(
      [](DeviceContext& d, const Array& lhs_block, const Array& rhs_block) {
        const int64_t n = d.AxisSize("i");
        const int64_t idx = d.AxisIndex("i");
        const int64_t rows = lhs_block.shape()[0] / n;
        PermutationPairs shift_left;
        for (int64_t j = 0; j < n; ++j) shift_left.push_back({j, (j + n - 1) % n});
        auto chunk = [&](int64_t c) {  // row chunk c of my lhs block
          c %= n;
          return Slice(lhs_block, {c * rows, 0}, {(c + 1) * rows, lhs_block.shape()[1]});
        };
        Array acc = MatMul(chunk(idx + 1), rhs_block);
        for (int64_t step = 1; step < n; ++step) {
          acc = d.Ppermute(acc, "i", shift_left);
          acc = Add(acc, MatMul(chunk(idx + step + 1), rhs_block));
        }
        return acc;
      },
      mesh, {P(kNone, "i"), P("i", kNone)}, {P("i", kNone)}, across);
  ok &= examples::AllClose("matmul + ring of ppermutes", matmul_ring(lhs, rhs)[0], expected, 1e-5, 1e-5);

  if (!ok) {
    std::fprintf(stderr, "FAILED: the reduce-scatter matmul differs from lhs @ rhs\n");
    return 1;
  }
  return 0;
}
