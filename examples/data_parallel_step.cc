// A data-parallel training step: each device computes the gradients of a 2-layer MLP on its shard of the
// batch, the gradients are averaged over the 'data' axis with one pmean, and every device applies the same
// SGD update to its replica of the parameters (JAX: the classic `pmean(grads, 'data')` step in shard_map).
//
// Model: p = relu(x @ w1) @ w2, loss = mean((p - y)^2). Mesh: the 8 GPUs of one DGX H100 as {data: 8}.
// The check: the step on 8 shards of 4 examples must give the same loss and parameters as the same step
// on the full batch of 32 (the mean of equal-sized shard means is the full-batch mean).
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

constexpr double kLearningRate = 0.1;

struct Gradients {
  Array loss, dw1, dw2;
};

// Loss and gradients of the MLP on whatever batch it is given (a shard or the full batch). Plain local ops,
// no collectives: the same code serves the sharded step and the unsharded reference.
Gradients LossAndGradients(const Array& x, const Array& y, const Array& w1, const Array& w2) {
  // Forward.
  Array z = MatMul(x, w1);  // [b, hidden]
  Array h = Relu(z);
  Array p = MatMul(h, w2);  // [b, out]
  Array err = Sub(p, y);
  Array loss = Mean(Mul(err, err));
  // Backward (by hand: spmdsim has no autodiff). d loss / d p = 2 (p - y) / (b * out).
  Array dp = Mul(err, 2.0 / static_cast<double>(err.size()));
  Array dw2 = MatMul(Transpose(h), dp);                          // [hidden, out]
  Array dh = MatMul(dp, Transpose(w2));                          // [b, hidden]
  Array dz = Mul(dh, Cast(Greater(z, 0.0), DType::kF32));        // relu'
  Array dw1 = MatMul(Transpose(x), dz);                          // [in, hidden]
  return {loss, dw1, dw2};
}

}  // namespace

int main(int argc, char** argv) {
  // Alone: one process runs every device. Under `mpirun -np K`: each process runs its share of the devices and
  // the collectives cross processes over MPI; every process prints the same results (docs/multiprocess.md).
  MpiSession mpi(&argc, &argv);
  ShardMapOptions across;
  across.runtime_options.process_group = mpi.world();
  // One DGX H100 host: 8 GPUs, all on the 'data' axis.
  auto topology = std::make_shared<const Topology>(Topology::Parse("dgx-h100:1"));
  Mesh mesh = MakeDeviceMesh(topology, {{"data", 8}});

  std::mt19937 rng(42);
  const int64_t batch = 32, in = 16, hidden = 32, out = 4;
  Array x = examples::RandomNormal(rng, {batch, in});
  Array y = examples::RandomNormal(rng, {batch, out});
  Array w1 = examples::RandomNormal(rng, {in, hidden}, 0.25f);
  Array w2 = examples::RandomNormal(rng, {hidden, out}, 0.25f);

  // The step on each device: local gradients on its 4 examples, pmean over 'data', SGD. The batch is split
  // by P('data'); the parameters are replicated (P()), and so are the outputs: after the pmean every device
  // holds the same gradients, which the replication check verifies (statically and by comparing values).
  auto train_step = ShardMap(
      [](DeviceContext& d, const Array& x_shard, const Array& y_shard, const Array& w1_replica,
         const Array& w2_replica) {
        Gradients g = LossAndGradients(x_shard, y_shard, w1_replica, w2_replica);
        Array dw1 = d.Pmean(g.dw1, "data");
        Array dw2 = d.Pmean(g.dw2, "data");
        Array loss = d.Pmean(g.loss, "data");
        return std::tuple{Sub(w1_replica, Mul(dw1, kLearningRate)), Sub(w2_replica, Mul(dw2, kLearningRate)),
                          loss};
      },
      mesh, {P("data"), P("data"), P(), P()}, {P(), P(), P()}, across);
  std::vector<Array> sharded = train_step(x, y, w1, w2);

  // The reference: the same step on the full batch, no mesh.
  Gradients g = LossAndGradients(x, y, w1, w2);
  Array new_w1 = Sub(w1, Mul(g.dw1, kLearningRate));
  Array new_w2 = Sub(w2, Mul(g.dw2, kLearningRate));

  std::printf("data-parallel step on %s, mesh %s: loss %.6f (full batch %.6f)\n", topology->ToString().c_str(),
              mesh.ToString().c_str(), sharded[2].ToDoubles()[0], g.loss.ToDoubles()[0]);
  bool ok = examples::AllClose("loss", sharded[2], g.loss, 1e-5, 1e-6);
  ok &= examples::AllClose("w1 after the step", sharded[0], new_w1, 1e-5, 1e-6);
  ok &= examples::AllClose("w2 after the step", sharded[1], new_w2, 1e-5, 1e-6);
  if (!ok) {
    std::fprintf(stderr, "FAILED: the data-parallel step differs from the full-batch step\n");
    return 1;
  }
  return 0;
}
