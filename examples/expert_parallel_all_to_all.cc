// Expert parallelism with all_to_all (GShard, Lepikhin et al. 2020, section 2.2; Switch Transformer, Fedus
// et al. 2021): each device holds a shard of the tokens and ONE expert FFN. A router picks an expert per
// token (top-1); all_to_all over 'expert' sends every token to the device of its expert, each device runs its
// expert on what it received, and a second all_to_all brings the results back to the tokens' devices, where
// they are scaled by the router probability.
//
// Static shapes, as on accelerators: every device sends each expert a buffer of `capacity` slots. Here the
// capacity is the number of local tokens, so no token is ever dropped (real models use a smaller capacity
// factor and drop the overflow).
//
// Mesh: a TPU v4 2x2x1 slice (4 chips) as {expert: 4}. The check: every token's output equals
// gate * expert_e(token) computed token by token on the whole arrays.
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "examples/example_check.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "ops/ops.h"
#include "shardmap/shard_map.h"
#include "sim/multiprocess.h"

using namespace spmdsim;  // NOLINT: an example reads better without the prefixes

namespace {

// The expert FFN: relu(x @ w1) @ w2.
Array Expert(const Array& x, const Array& w1, const Array& w2) { return MatMul(Relu(MatMul(x, w1)), w2); }

// Top-1 routing of `tokens` [t, d]: dispatch [t, experts, capacity] is 1 where token i goes to (expert e,
// slot c); combine is the same with the router probability instead of 1. Slots fill in token order.
std::pair<Array, Array> Route(const Array& tokens, const Array& router, int64_t capacity) {
  Array probs = Softmax(MatMul(tokens, router), -1);  // [t, experts]
  const int64_t t = probs.shape()[0], experts = probs.shape()[1];
  std::vector<double> p = probs.ToDoubles();
  std::vector<float> dispatch(t * experts * capacity, 0.0f), combine(dispatch.size(), 0.0f);
  std::vector<int64_t> used(experts, 0);
  for (int64_t i = 0; i < t; ++i) {
    int64_t e = 0;
    for (int64_t k = 1; k < experts; ++k) e = p[i * experts + k] > p[i * experts + e] ? k : e;
    int64_t slot = used[e]++;  // < capacity, since capacity == t
    dispatch[(i * experts + e) * capacity + slot] = 1.0f;
    combine[(i * experts + e) * capacity + slot] = static_cast<float>(p[i * experts + e]);
  }
  return {Array::FromVector<float>(dispatch, {t, experts, capacity}),
          Array::FromVector<float>(combine, {t, experts, capacity})};
}

}  // namespace

int main(int argc, char** argv) {
  // Alone: one process runs every device. Under `mpirun -np K`: each process runs its share of the devices and
  // the collectives cross processes over MPI; every process prints the same results (docs/multiprocess.md).
  MpiSession mpi(&argc, &argv);
  ShardMapOptions across;
  across.runtime_options.process_group = mpi.world();
  auto topology = std::make_shared<const Topology>(Topology::Parse("tpu-v4:2x2x1"));
  Mesh mesh = MakeDeviceMesh(topology, {{"expert", 4}});

  std::mt19937 rng(5);
  const int64_t tokens = 32, d_model = 8, d_ff = 16, experts = 4;
  Array x = examples::RandomNormal(rng, {tokens, d_model});
  Array router = examples::RandomNormal(rng, {d_model, experts});
  Array w1 = examples::RandomNormal(rng, {experts, d_model, d_ff}, 0.3f);  // expert e's weights: w1[e]
  Array w2 = examples::RandomNormal(rng, {experts, d_ff, d_model}, 0.3f);

  auto moe = ShardMap(
      [&](DeviceContext& d, const Array& x_block, const Array& router_w, const Array& w1_e, const Array& w2_e) {
        const int64_t t = x_block.shape()[0];  // 8 local tokens; also the capacity
        auto [dispatch, combine] = Route(x_block, router_w, /*capacity=*/t);
        // Pack: send_buf[e, c] is the token in slot c for expert e.                     [experts, capacity, d]
        Array send_buf = Einsum("tec,td->ecd", dispatch, x_block);
        // Exchange: afterwards recv_buf[s, c] is slot c that device s sent to MY expert.  [sources, capacity, d]
        Array recv_buf = d.AllToAll(send_buf, "expert", /*split_axis=*/0, /*concat_axis=*/0, /*tiled=*/true);
        // My expert on everything it received (w1_e is [1, d, ff]: my slice of the expert dimension).
        Array out = Expert(Reshape(recv_buf, {experts * t, d_model}), Reshape(w1_e, {d_model, d_ff}),
                           Reshape(w2_e, {d_ff, d_model}));
        // Send the results back to the tokens' devices: back[e, c] is expert e's output for my slot c.
        Array back = d.AllToAll(Reshape(out, {experts, t, d_model}), "expert", 0, 0, /*tiled=*/true);
        // Unpack, scaled by the router probability.                                    [t, d]
        return Einsum("tec,ecd->td", combine, back);
      },
      mesh, {P("expert"), P(), P("expert"), P("expert")}, {P("expert")}, across);
  Array y = moe(x, router, w1, w2)[0];

  // Reference: each token through its expert, one at a time.
  Array probs = Softmax(MatMul(x, router), -1);
  std::vector<double> p = probs.ToDoubles();
  std::vector<Array> rows;
  std::vector<int64_t> tokens_per_expert(experts, 0);
  for (int64_t i = 0; i < tokens; ++i) {
    int64_t e = 0;
    for (int64_t k = 1; k < experts; ++k) e = p[i * experts + k] > p[i * experts + e] ? k : e;
    ++tokens_per_expert[e];
    Array token = Slice(x, {i, 0}, {i + 1, d_model});
    Array w1_e = Reshape(Slice(w1, {e, 0, 0}, {e + 1, d_model, d_ff}), {d_model, d_ff});
    Array w2_e = Reshape(Slice(w2, {e, 0, 0}, {e + 1, d_ff, d_model}), {d_ff, d_model});
    rows.push_back(Mul(Expert(token, w1_e, w2_e), p[i * experts + e]));
  }
  Array expected = Concatenate(rows, 0);

  std::printf("expert-parallel MoE on %s, mesh %s: %lld tokens routed to experts as [%lld, %lld, %lld, %lld]\n",
              topology->ToString().c_str(), mesh.ToString().c_str(), static_cast<long long>(tokens),
              static_cast<long long>(tokens_per_expert[0]), static_cast<long long>(tokens_per_expert[1]),
              static_cast<long long>(tokens_per_expert[2]), static_cast<long long>(tokens_per_expert[3]));
  if (!examples::AllClose("MoE layer output", y, expected, 1e-5, 1e-5)) {
    std::fprintf(stderr, "FAILED: the expert-parallel layer differs from routing token by token\n");
    return 1;
  }
  return 0;
}
