// NCCL-style algorithm x protocol selection (cost/nccl_model.h) through CollectiveModel.
#include "cost/nccl_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/strings.h"
#include "cost/collective_model.h"
#include "tests/cost/test_meshes.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using testing_meshes::OnTopology;
using Axes = std::vector<std::string>;

constexpr double kKiB = 1024.0;

std::string Choice(const CollectiveModel& model, CollectiveOp op, const Axes& axes, double bytes) {
  CollectiveCost c = model.Cost(op, axes, bytes);
  return c.algorithm + "/" + c.protocol;
}

CollectiveModel Gpus(const std::string& preset, int64_t hosts, int64_t per_host, CollectiveOptions options = {}) {
  return CollectiveModel(OnTopology(preset, {hosts, per_host}, {"node", "local"}), options);
}

TEST(Protocol, ParsesNcclNamesInAnyCase) {
  EXPECT_EQ(ParseProtocol("simple"), Protocol::kSimple);
  EXPECT_EQ(ParseProtocol("LL128"), Protocol::kLl128);
  EXPECT_EQ(ParseProtocol("LL"), Protocol::kLl);
  EXPECT_EQ(ParseAlgorithm("NVLSTree"), Algorithm::kNvlsTree);
  EXPECT_EQ(ParseAlgorithm("Tree"), Algorithm::kTree);
  try {
    ParseProtocol("fast");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("valid: auto, ll, ll128, simple"));
  }
}

// 8x H100 (one DGX): LL while latency dominates, NVLS from a few MB (its 25 us start and pipeline fill paid
// back by 0.85 x 360 GB/s over S(1 + 1/8)); all_gather / reduce_scatter stay on the ring.
TEST(NcclSelection, EightH100) {
  CollectiveModel m = Gpus("dgx-h100:1", 1, 8);
  const Axes all = {"node", "local"};
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 8), "ring/ll");
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 256 * kKiB), "ring/ll");
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 1 * kMiB), "ring/ll");
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 16 * kMiB), "nvls/simple");
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 8 * kGiB), "nvls/simple");
  EXPECT_EQ(Choice(m, CollectiveOp::kAllGather, all, 8), "ring/ll");
  EXPECT_EQ(Choice(m, CollectiveOp::kAllGather, all, 8 * kGiB), "ring/simple");
  EXPECT_EQ(Choice(m, CollectiveOp::kReduceScatter, all, 8 * kGiB), "ring/simple");
  // NCCL's constants: ring LL = 6.6 us base + 14 steps x 0.6 us.
  EXPECT_NEAR(m.Cost(CollectiveOp::kAllReduce, all, 8).seconds, 15.0e-6, 0.01e-6);
}

// 2 x 8 H100: the tree's log2(nodes) network steps win small messages, NVLS tree (NVLS inside the node, the
// tree between the nodes: S per node each way on 2 nodes) wins large ones, above the NICs' ring bandwidth.
TEST(NcclSelection, TwoNodesOfEightH100) {
  CollectiveModel m = Gpus("dgx-h100:2", 2, 8);
  const Axes all = {"node", "local"};
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 8), "tree/ll");
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 1 * kGiB), "nvls_tree/simple");
  CollectiveCost big = m.Cost(CollectiveOp::kAllReduce, all, 1 * kGiB);
  const double nic_busbw = 8 * 50e9 * 0.96;  // the node's 8 NDR NICs
  EXPECT_GT(big.busbw_Bps, nic_busbw);        // nccl-tests issue 196: busbw can exceed the NIC bandwidth
  EXPECT_GT(big.bytes_sent.at(LinkClass::kInfiniband), 0);
  // all_gather has no tree and no NVLS across nodes (CollNet off): ring.
  EXPECT_EQ(Choice(m, CollectiveOp::kAllGather, all, 1 * kGiB), "ring/simple");
}

// 8x A100: no NVLink SHARP; LL, then LL128, then Simple as the message grows.
TEST(NcclSelection, EightA100) {
  CollectiveModel m = Gpus("dgx-a100:1", 1, 8);
  const Axes all = {"node", "local"};
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 8), "ring/ll");
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 4 * kMiB), "ring/ll128");
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 1 * kGiB), "ring/simple");
  // Ampere NVLink at 0.733 of its 300 GB/s (docs/cost-model.md, section 2): the 220 GB/s of all-reduce busbw
  // nccl-tests issue 228 measured on 8x A100-SXM4-80GB.
  CollectiveCost big = m.Cost(CollectiveOp::kAllReduce, all, 8 * kGiB);
  EXPECT_NEAR(big.busbw_Bps, 220e9, 0.01 * 220e9);
}

// NCCL before 2.21 counted 1/4 of the link for ring LL all-reduce (1/2 since) and capped Hopper's one-node LL at
// 87.7 GB/s (141 since): NVIDIA/nccl v2.18.5-1 and v2.21.5-1, src/graph/tuning.cc.
TEST(NcclSelection, OlderReleasesRunLlSlower) {
  const Axes all = {"node", "local"};
  CollectiveOptions ll;
  ll.algorithm = Algorithm::kRing;
  ll.protocol = Protocol::kLl;
  CollectiveOptions ll_218 = ll;
  ll_218.nccl_version = 21805;
  // A100: 220 GB/s of ring bus bandwidth, x 1/2 -> min(87.7, 110) = 87.7; x 1/4 -> 55.
  const double a100_now = Gpus("dgx-a100:1", 1, 8, ll).Cost(CollectiveOp::kAllReduce, all, 64 * kMiB).busbw_Bps;
  const double a100_old = Gpus("dgx-a100:1", 1, 8, ll_218).Cost(CollectiveOp::kAllReduce, all, 64 * kMiB).busbw_Bps;
  EXPECT_NEAR(a100_now, 87.7e9, 0.03 * 87.7e9);
  EXPECT_NEAR(a100_old, 55e9, 0.03 * 55e9);
  // H100: 360 x 1/2 -> 141 now; 360 x 1/4 = 90 -> 87.7 before 2.21.
  const double h100_old = Gpus("dgx-h100:1", 1, 8, ll_218).Cost(CollectiveOp::kAllReduce, all, 64 * kMiB).busbw_Bps;
  EXPECT_NEAR(h100_old, 87.7e9, 0.03 * 87.7e9);
  // The current release is the default.
  EXPECT_EQ(CollectiveOptions{}.nccl_version, 0);
}

// 2 x 8 A100: the tree beats the NIC-bound ring for large all-reduce (NCCL picks Tree on 2 nodes).
TEST(NcclSelection, TwoNodesOfEightA100PickTheTree) {
  CollectiveModel m = Gpus("dgx-a100:2", 2, 8);
  const Axes all = {"node", "local"};
  EXPECT_EQ(Choice(m, CollectiveOp::kAllReduce, all, 1 * kGiB), "tree/simple");
  CollectiveOptions ring;
  ring.algorithm = Algorithm::kRing;
  CollectiveCost forced = Gpus("dgx-a100:2", 2, 8, ring).Cost(CollectiveOp::kAllReduce, all, 8 * kGiB);
  EXPECT_NEAR(forced.busbw_Bps, 8 * 25e9 * 0.96, 0.02 * 192e9);  // the node's 8 HDR NICs bound the ring
}

// TPU: no NCCL, no protocols; the stage model's torus algorithms (bidirectional rings, concurrent over axes).
TEST(NcclSelection, TpuV5eHasNoProtocols) {
  CollectiveModel m(OnTopology("tpu-v5e:16x16", {16, 16}, {"y", "x"}));
  CollectiveCost one = m.Cost(CollectiveOp::kAllReduce, Axes{"x"}, 64 * kMiB);
  EXPECT_EQ(one.algorithm, "bidirectional_ring");
  EXPECT_EQ(one.protocol, "");
  CollectiveCost both = m.Cost(CollectiveOp::kAllGather, Axes{"y", "x"}, 64 * kMiB);
  EXPECT_EQ(both.algorithm, "torus[concurrent](bidirectional_ring, bidirectional_ring)");
  CollectiveOptions simple;
  simple.protocol = Protocol::kSimple;
  try {
    CollectiveModel bad(OnTopology("tpu-v5e:16x16", {16, 16}, {"y", "x"}), simple);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("valid here: auto"));
  }
}

TEST(NcclSelection, ForcedAlgorithmAndProtocolAreHonouredOrRefused) {
  const Axes all = {"node", "local"};
  CollectiveOptions ring_simple;
  ring_simple.algorithm = Algorithm::kRing;
  ring_simple.protocol = Protocol::kSimple;
  EXPECT_EQ(Choice(Gpus("dgx-h100:1", 1, 8, ring_simple), CollectiveOp::kAllReduce, all, 8), "ring/simple");

  CollectiveOptions nvls;
  nvls.algorithm = Algorithm::kNvls;
  try {
    Gpus("dgx-a100:1", 1, 8, nvls).Cost(CollectiveOp::kAllReduce, all, kMiB);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("applicable: ring, tree"));
  }
  nvls.protocol = Protocol::kLl;
  try {
    Gpus("dgx-h100:1", 1, 8, nvls).Cost(CollectiveOp::kAllReduce, all, kMiB);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("applicable: simple"));
  }
  CollectiveOptions tree;
  tree.algorithm = Algorithm::kTree;
  EXPECT_THROW(Gpus("dgx-h100:1", 1, 8, tree).Cost(CollectiveOp::kAllGather, all, kMiB), Error);
}

// Every candidate gets slower with the message, and the chosen one is the fastest allowed.
TEST(NcclEstimates, TheChoiceIsTheFastestCandidate) {
  NcclGroup g;
  g.nodes = 2;
  g.gpus_per_node = 8;
  g.nvlink_Bps = 360e9;
  g.network_Bps = 8 * 48e9;
  g.network_latency_s = 1e-6;
  g.nvlink_sharp = true;
  for (double bytes = 8; bytes < 1e11; bytes *= 8) {
    std::vector<NcclEstimate> small = NcclEstimates(NcclCollective::kAllReduce, g, bytes);
    std::vector<NcclEstimate> large = NcclEstimates(NcclCollective::kAllReduce, g, bytes * 8);
    ASSERT_EQ(small.size(), 7u);  // ring x 3, tree x 3, nvls_tree
    for (size_t i = 0; i < small.size(); ++i) EXPECT_LE(small[i].seconds(), large[i].seconds());
  }
}

}  // namespace
}  // namespace spmdsim
