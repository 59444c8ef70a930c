// Collectives built from ppermute steps around a ring. On a ring of N devices, an all-gather is N-1 steps in
// which every device passes the last block it received to its right neighbour -- what ring all-gather
// implementations do on TPU ICI and NVLink rings. Doing a matmul on each block as it arrives, instead of
// waiting for the whole gather, is the "collective matmul" (Wang et al. 2023, "Overlap communication with
// dependent computation via decomposition", ASPLOS; the shard_map notebook's all-gather matmul).
//
// Mesh: 8 CPU devices as {ring: 8}. The checks: the ring all-gather equals all_gather (on every device) and
// the collective matmul equals lhs @ rhs computed whole.
#include <cstdio>
#include <memory>
#include <random>
#include <tuple>

#include "examples/example_check.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "ops/ops.h"
#include "shardmap/shard_map.h"
#include "sim/multiprocess.h"

using namespace spmdsim;  // NOLINT: an example reads better without the prefixes

namespace {

// ppermute pairs that send in-group index j to j+1 (mod n).
PermutationPairs ShiftRight(int64_t n) {
  PermutationPairs pairs;
  for (int64_t j = 0; j < n; ++j) pairs.push_back({j, (j + 1) % n});
  return pairs;
}

// All-gather of rank-2 blocks along dimension 0 by N-1 ring steps: after step s, device idx holds the block of device
// idx - s and writes it to its place in the result.
Array RingAllGather(DeviceContext& d, const Array& block, const char* axis) {
  const int64_t n = d.AxisSize(axis), idx = d.AxisIndex(axis), rows = block.shape()[0];
  std::vector<int64_t> shape = block.shape();
  shape[0] *= n;
  Array result = DynamicUpdateSlice(Array::Zeros(shape, block.dtype()), block, {idx * rows, 0});
  Array travelling = block;
  for (int64_t step = 1; step < n; ++step) {
    travelling = d.Ppermute(travelling, axis, ShiftRight(n));  // now the block of device idx - step
    int64_t owner = (idx - step + n) % n;
    result = DynamicUpdateSlice(result, travelling, {owner * rows, 0});
  }
  return result;
}

// lhs_block: my rows of lhs; rhs_block: my columns of rhs. Returns all rows of lhs @ rhs for my columns,
// multiplying each lhs block as it passes by instead of gathering lhs first.
Array CollectiveMatmul(DeviceContext& d, const Array& lhs_block, const Array& rhs_block, const char* axis) {
  const int64_t n = d.AxisSize(axis), idx = d.AxisIndex(axis), rows = lhs_block.shape()[0];
  Array out = Array::Zeros({rows * n, rhs_block.shape()[1]}, DType::kF32);
  Array travelling = lhs_block;
  for (int64_t step = 0; step < n; ++step) {
    if (step > 0) travelling = d.Ppermute(travelling, axis, ShiftRight(n));
    int64_t owner = (idx - step + n) % n;  // whose lhs rows I hold now
    out = DynamicUpdateSlice(out, MatMul(travelling, rhs_block), {owner * rows, 0});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // Alone: one process runs every device. Under `mpirun -np K`: each process runs its share of the devices and
  // the collectives cross processes over MPI; every process prints the same results (docs/multiprocess.md).
  MpiSession mpi(&argc, &argv);
  ShardMapOptions across;
  across.runtime_options.process_group = mpi.world();
  auto topology = std::make_shared<const Topology>(Topology::Parse("cpu:8"));
  Mesh mesh = MakeDeviceMesh(topology, {{"ring", 8}});

  std::mt19937 rng(11);
  Array x = examples::RandomNormal(rng, {16, 3});    // 2 rows per device
  Array lhs = examples::RandomNormal(rng, {16, 12});
  Array rhs = examples::RandomNormal(rng, {12, 24});  // 3 columns per device

  // 1. Ring all-gather vs jax.lax.all_gather(tiled=True). Both results vary over 'ring' as far as the
  //    replication check can tell (ppermute and all_gather do not make a value invariant), so we keep every
  //    device's copy with out_specs P('ring') -- [8 * 16, 3] -- and compare all of them.
  auto gather = ShardMap(
      [](DeviceContext& d, const Array& block) {
        return std::tuple{RingAllGather(d, block, "ring"), d.AllGather(block, "ring", 0, /*tiled=*/true)};
      },
      mesh, {P("ring")}, {P("ring"), P("ring")}, across);
  std::vector<Array> gathered = gather(x);
  Array every_device_x = Concatenate(std::vector<Array>(8, x), 0);  // what 8 correct copies look like
  bool ok = examples::AllClose("ring all-gather == all_gather", gathered[0], gathered[1], 0, 0);
  ok &= examples::AllClose("ring all-gather == x on every device", gathered[0], every_device_x, 0, 0);

  // 2. All-gather collective matmul: lhs rows P('ring', None), rhs columns P(None, 'ring'); each device ends
  //    with all rows of its column block, so the output is P(None, 'ring').
  auto matmul = ShardMap(
      [](DeviceContext& d, const Array& lhs_block, const Array& rhs_block) {
        return CollectiveMatmul(d, lhs_block, rhs_block, "ring");
      },
      mesh, {P("ring", kNone), P(kNone, "ring")}, {P(kNone, "ring")}, across);
  ok &= examples::AllClose("collective matmul == lhs @ rhs", matmul(lhs, rhs)[0], MatMul(lhs, rhs), 1e-5, 1e-5);

  if (!ok) {
    std::fprintf(stderr, "FAILED: a ring collective differs from the unsharded computation\n");
    return 1;
  }
  return 0;
}
