#include "cost/collective_model.h"

#include <cmath>
#include <limits>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/strings.h"
#include "tests/cost/test_meshes.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using testing_meshes::OnTopology;
using Axes = std::vector<std::string>;


CollectiveOptions Forced(Algorithm algorithm) {
  CollectiveOptions options;
  options.algorithm = algorithm;
  return options;
}

TEST(CollectiveOps, ParseJaxAndNcclNames) {
  EXPECT_EQ(ParseCollectiveOp("psum"), CollectiveOp::kAllReduce);
  EXPECT_EQ(ParseCollectiveOp("pmax"), CollectiveOp::kAllReduce);
  EXPECT_EQ(ParseCollectiveOp("psum_scatter"), CollectiveOp::kReduceScatter);
  EXPECT_EQ(ParseCollectiveOp("all_gather"), CollectiveOp::kAllGather);
  EXPECT_EQ(ParseCollectiveOp("alltoall"), CollectiveOp::kAllToAll);
  EXPECT_EQ(ParseCollectiveOp("sendrecv"), CollectiveOp::kPermute);
  try {
    ParseCollectiveOp("broadcast");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("psum_scatter"));
  }
  EXPECT_EQ(ParseAlgorithm("bidirectional_ring"), Algorithm::kBidirectionalRing);
  EXPECT_EQ(ParseAlgorithm("tree"), Algorithm::kTree);
  EXPECT_THROW(ParseAlgorithm("collnet"), Error);
  EXPECT_EQ(ParseComposition("concurrent"), Composition::kConcurrent);
  EXPECT_THROW(ParseComposition("parallel"), Error);
}

TEST(CollectiveOps, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kPermute, 8), 1.0);
}

TEST(CollectiveModel, HeaderExampleRingAllReduceOnEightH100) {
  // NCCL's ring / Simple: 8.4 us base + 14 steps x 3.4 us (tuning.cc), then 2(n-1)/n S at 0.8 x 450 GB/s.
  CollectiveModel model(OnTopology("dgx-h100:1", {8}, {"g"}), Forced(Algorithm::kRing));
  CollectiveCost cost = model.Cost(CollectiveOp::kAllReduce, Axes{"g"}, kGiB);
  const double B = 450e9 * 0.8;
  const double expected = (8.4 + 14 * 3.4) * 1e-6 + 2.0 * 7 / 8 * kGiB / B;
  EXPECT_NEAR(cost.seconds, expected, 1e-12);
  EXPECT_NEAR(cost.seconds * 1e3, 5.2756, 5e-4);
  EXPECT_EQ(cost.algorithm, "ring");
  EXPECT_EQ(cost.protocol, "simple");
  EXPECT_DOUBLE_EQ(cost.algbw_Bps, kGiB / cost.seconds);
  EXPECT_DOUBLE_EQ(cost.busbw_Bps, cost.algbw_Bps * 2 * 7 / 8);
  EXPECT_NEAR(cost.busbw_Bps / 1e9, 356.2, 0.1);
  EXPECT_DOUBLE_EQ(cost.bytes_sent.at(LinkClass::kNvlink), 2.0 * 7 / 8 * kGiB);
  EXPECT_DOUBLE_EQ(cost.seconds_by_link.at(LinkClass::kNvlink), cost.seconds);
  EXPECT_DOUBLE_EQ(cost.seconds_by_axis.at("g"), cost.seconds);
}

TEST(CollectiveModel, AutoPicksDirectOnASwitchForItsSmallerLatency) {
  // Host memory is a switch; GPU all-reduce follows NCCL instead (tests/cost/nccl_model_test.cc).
  Mesh mesh = OnTopology("cpu:8", {8}, {"g"});
  CollectiveCost automatic = CollectiveModel(mesh).Cost(CollectiveOp::kAllReduce, Axes{"g"}, 1e6);
  CollectiveCost ring = CollectiveModel(mesh, Forced(Algorithm::kRing)).Cost(CollectiveOp::kAllReduce, Axes{"g"}, 1e6);
  CollectiveCost hd =
      CollectiveModel(mesh, Forced(Algorithm::kHalvingDoubling)).Cost(CollectiveOp::kAllReduce, Axes{"g"}, 1e6);
  EXPECT_EQ(automatic.algorithm, "direct");
  EXPECT_NEAR(ring.seconds - automatic.seconds, (14 - 2) * 0.1e-6, 1e-12);
  EXPECT_NEAR(hd.seconds - automatic.seconds, (6 - 2) * 0.1e-6, 1e-12);
}

TEST(CollectiveModel, GatherAndScatterUseTheWholeArrayAsS) {
  // S = per-device output of all_gather = input of reduce_scatter; both (p-1)/p S / B on a ring.
  CollectiveModel model(OnTopology("dgx-h100:1", {8}, {"g"}), Forced(Algorithm::kRing));
  const double S = 8e8, B = 450e9 * 0.8;
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    CollectiveCost cost = model.Cost(op, Axes{"g"}, S);
    EXPECT_EQ(cost.protocol, "simple");
    EXPECT_NEAR(cost.seconds, (8.4 + 7 * 3.4) * 1e-6 + 7.0 / 8 * S / B, 1e-12);  // NCCL ring / Simple
    EXPECT_DOUBLE_EQ(cost.busbw_Bps, S / cost.seconds * 7 / 8);
  }
  CollectiveCost a2a = CollectiveModel(OnTopology("dgx-h100:1", {8}, {"g"}))
                           .Cost(CollectiveOp::kAllToAll, Axes{"g"}, S);
  EXPECT_EQ(a2a.algorithm, "direct");
  EXPECT_NEAR(a2a.seconds, 7 * 2e-6 + 7.0 / 8 * S / B, 1e-12);
}

TEST(CollectiveModel, BidirectionalRingHalvesTheBandwidthTermOnAWrappedTorusAxis) {
  Mesh mesh = OnTopology("tpu-v4:4x4x4", {4, 4, 4}, {"z", "y", "x"});
  const double S = 1e9, B = 4.5e10;
  CollectiveCost best = CollectiveModel(mesh).Cost(CollectiveOp::kAllGather, Axes{"x"}, S);
  EXPECT_EQ(best.algorithm, "bidirectional_ring");
  EXPECT_NEAR(best.seconds, 2 * 1e-6 + 3.0 / 4 * S / (2 * B), 1e-12);  // ceil(3/2) = 2 steps
  CollectiveCost ring = CollectiveModel(mesh, Forced(Algorithm::kRing)).Cost(CollectiveOp::kAllGather, Axes{"x"}, S);
  EXPECT_NEAR(ring.seconds, 3 * 1e-6 + 3.0 / 4 * S / B, 1e-12);
}

TEST(CollectiveModel, LineIsTwiceAsSlowAsAWrappedRing) {
  Topology v4 = Topology::Parse("tpu-v4:4x4x4");
  Topology no_wrap = v4;
  no_wrap.SetWraparound({false, false, false});
  const double S = 1e10;
  CollectiveCost ring = CollectiveModel(OnTopology(v4, {4, 4, 4}, {"z", "y", "x"}))
                            .Cost(CollectiveOp::kAllReduce, Axes{"x"}, S);
  CollectiveCost line = CollectiveModel(OnTopology(no_wrap, {4, 4, 4}, {"z", "y", "x"}))
                            .Cost(CollectiveOp::kAllReduce, Axes{"x"}, S);
  EXPECT_EQ(line.algorithm, "ring");
  EXPECT_NEAR(line.stages[0].bandwidth_seconds / ring.stages[0].bandwidth_seconds, 2.0, 1e-12);
  try {
    CollectiveModel(OnTopology(no_wrap, {4, 4, 4}, {"z", "y", "x"}), Forced(Algorithm::kBidirectionalRing))
        .Cost(CollectiveOp::kAllReduce, Axes{"x"}, S);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("applicable: ring"));
  }
}

TEST(CollectiveModel, AllToAllOnATorusRingLoadsTheBusiestLink) {
  const double S = 1e9, B = 4.5e10;
  Topology v4 = Topology::Parse("tpu-v4:4x4x4");
  CollectiveCost ring = CollectiveModel(OnTopology(v4, {4, 4, 4}, {"z", "y", "x"}))
                            .Cost(CollectiveOp::kAllToAll, Axes{"x"}, S);
  EXPECT_EQ(ring.algorithm, "bidirectional_ring");
  EXPECT_NEAR(ring.stages[0].bandwidth_seconds, S * 4 / (2 * 4) / B, 1e-12);  // floor(p^2/4) / (2p)
  EXPECT_NEAR(ring.stages[0].latency_seconds, 2e-6, 1e-15);
  Topology no_wrap = v4;
  no_wrap.SetWraparound({false, false, false});
  CollectiveCost line = CollectiveModel(OnTopology(no_wrap, {4, 4, 4}, {"z", "y", "x"}))
                            .Cost(CollectiveOp::kAllToAll, Axes{"x"}, S);
  EXPECT_NEAR(line.stages[0].bandwidth_seconds, 2 * 2 * (S / 4) / B, 1e-12);  // middle cut
}

TEST(CollectiveModel, SeveralTorusAxesRunConcurrentlyOrDimensionByDimension) {
  Mesh mesh = OnTopology("tpu-v4:4x4x4", {4, 4, 4}, {"z", "y", "x"});
  const double S = 1e9, B = 4.5e10, a = 1e-6;
  CollectiveCost best = CollectiveModel(mesh).Cost(CollectiveOp::kAllGather, Axes{"y", "x"}, S);
  EXPECT_EQ(best.algorithm, "torus[concurrent](bidirectional_ring, bidirectional_ring)");
  // Two stripes of S/2: each dimension serves one stripe on S/2 and one on S/8.
  const double per_dim = 3.0 / 4 * (S / 2) / (2 * B) + 3.0 / 4 * (S / 8) / (2 * B);
  EXPECT_NEAR(best.seconds, per_dim + 2 * 2 * a, 1e-12);
  CollectiveOptions sequential;
  sequential.composition = Composition::kSequential;
  CollectiveCost seq = CollectiveModel(mesh, sequential).Cost(CollectiveOp::kAllGather, Axes{"y", "x"}, S);
  EXPECT_EQ(seq.algorithm, "torus[sequential](bidirectional_ring, bidirectional_ring)");
  EXPECT_NEAR(seq.seconds, 2 * 2 * a + 3.0 / 4 * S / (2 * B) + 3.0 / 4 * (S / 4) / (2 * B), 1e-12);
  EXPECT_LT(best.seconds, seq.seconds);
  // The per-stage shares add up to the total either way.
  for (const CollectiveCost& cost : {best, seq}) {
    double sum = 0;
    for (const StageCost& s : cost.stages) sum += s.seconds;
    EXPECT_NEAR(sum, cost.seconds, 1e-12);
  }
  CollectiveOptions concurrent;
  concurrent.composition = Composition::kConcurrent;
  try {
    CollectiveModel(mesh, concurrent).Cost(CollectiveOp::kAllGather, Axes{"x"}, S);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("at least two ICI torus dimensions"));
  }
}

TEST(CollectiveModel, NvlsTreeAllReduceAcrossTwoDgxHosts) {
  // psum over 2 hosts x 8 GPUs (NCCL picks NVLS tree): NVLS inside each host, S(1 + 1/8) at 0.85 x 0.8 x 450
  // GB/s; the 2-node tree moves S per node over its 8 NICs at 0.96 x 50 GB/s: NVLS is the bottleneck.
  Mesh mesh = OnTopology("dgx-h100:2", {2, 8}, {"hosts", "local"});
  const double S = 1e9, Bnvls = 450e9 * 0.8 * 0.85;
  CollectiveCost cost = CollectiveModel(mesh).Cost(CollectiveOp::kAllReduce, Axes{"hosts", "local"}, S);
  EXPECT_EQ(cost.algorithm, "nvls_tree");
  EXPECT_EQ(cost.protocol, "simple");
  const double per_byte = 1.125 / Bnvls;
  const double latency = 25e-6 + 2 * (20.9e-6 + 2 * 1e-6) + 8 * 16 * 128 * 1024 * per_byte;
  EXPECT_NEAR(cost.seconds, latency + S * per_byte, 1e-12);
  EXPECT_DOUBLE_EQ(cost.bytes_sent.at(LinkClass::kNvlink), 1.125 * S);
  EXPECT_DOUBLE_EQ(cost.bytes_sent.at(LinkClass::kInfiniband), S / 8);
  EXPECT_NEAR(cost.seconds_by_axis.at("local") + cost.seconds_by_axis.at("hosts"), cost.seconds, 1e-12);
  EXPECT_DOUBLE_EQ(cost.busbw_factor, 2.0 * 15 / 16);
}

TEST(CollectiveModel, NvlsIsDefaultWhereTheSwitchHasItAndOnlyInsideOneHost) {
  Mesh one = OnTopology("dgx-h100:1", {8}, {"g"});
  CollectiveCost nvls = CollectiveModel(one).Cost(CollectiveOp::kAllReduce, Axes{"g"}, 1e9);
  EXPECT_EQ(nvls.algorithm, "nvls");
  const double Bnvls = 450e9 * 0.8 * 0.85;
  EXPECT_NEAR(nvls.seconds, 25e-6 + 1.125 * (8 * 16 * 128 * 1024 + 1e9) / Bnvls, 1e-12);
  CollectiveOptions off;
  off.allow_nvls = false;
  EXPECT_EQ(CollectiveModel(one, off).Cost(CollectiveOp::kAllReduce, Axes{"g"}, 1e9).algorithm, "ring");
  Mesh two = OnTopology("dgx-h100:2", {16}, {"g"});
  try {
    CollectiveModel(two, Forced(Algorithm::kNvls)).Cost(CollectiveOp::kAllReduce, Axes{"g"}, 1e9);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("applicable: ring, tree, nvls_tree"));
  }
  // NVLS all_gather exists in one host (NCCL), but moves S through the switch: slower than the ring.
  CollectiveCost gather = CollectiveModel(one, Forced(Algorithm::kNvls)).Cost(CollectiveOp::kAllGather, Axes{"g"}, 1e9);
  EXPECT_GT(gather.seconds, CollectiveModel(one).Cost(CollectiveOp::kAllGather, Axes{"g"}, 1e9).seconds);
  EXPECT_THROW(CollectiveModel(two, Forced(Algorithm::kNvls)).Cost(CollectiveOp::kAllGather, Axes{"g"}, 1e9), Error);
}

TEST(CollectiveModel, HalvingDoublingNeedsAPowerOfTwo) {
  Mesh six = OnTopology("cpu:6", {6}, {"g"});
  try {
    CollectiveModel(six, Forced(Algorithm::kHalvingDoubling)).Cost(CollectiveOp::kAllReduce, Axes{"g"}, 1e6);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("'halving_doubling'"));
    EXPECT_THAT(e.what(), HasSubstr("applicable: ring, direct"));
  }
}

TEST(CollectiveModel, PermuteRoutesTheShorterWayAndCountsContention) {
  Mesh mesh = OnTopology("tpu-v4:4x4x4", {4, 4, 4}, {"z", "y", "x"});
  CollectiveModel model(mesh);
  const double S = 1e8, B = 4.5e10, a = 1e-6;
  // Default pairs: shift by one (nccl-tests sendrecv): one hop, each link carries S.
  CollectiveCost shift = model.Cost(CollectiveOp::kPermute, Axes{"x"}, S);
  EXPECT_NEAR(shift.seconds, S / B + a, 1e-12);
  EXPECT_DOUBLE_EQ(shift.busbw_Bps, shift.algbw_Bps);
  // 3 -> 0 goes forward through the wraparound: one hop.
  const std::pair<int, int> wrap[] = {{3, 0}};
  EXPECT_NEAR(model.Cost(CollectiveOp::kPermute, Axes{"x"}, S, wrap).seconds, S / B + a, 1e-12);
  // 0 -> 2 and 1 -> 3 both cross the link 1 -> 2.
  const std::pair<int, int> crossing[] = {{0, 2}, {1, 3}};
  EXPECT_NEAR(model.Cost(CollectiveOp::kPermute, Axes{"x"}, S, crossing).seconds, 2 * S / B + 2 * a, 1e-12);
  // Across hosts on GPUs: the IB NIC.
  CollectiveModel gpus(OnTopology("dgx-h100:2", {2, 8}, {"hosts", "local"}));
  CollectiveCost ib = gpus.Cost(CollectiveOp::kPermute, Axes{"hosts"}, S);
  EXPECT_NEAR(ib.seconds, S / (50e9 * 0.96) + 3.7e-6, 1e-12);  // IB efficiency 0.96; fabric 1 us + NCCL 2.7 us
  EXPECT_DOUBLE_EQ(ib.bytes_sent.at(LinkClass::kInfiniband), S);
  // A self pair costs nothing.
  const std::pair<int, int> self[] = {{1, 1}};
  EXPECT_EQ(model.Cost(CollectiveOp::kPermute, Axes{"x"}, S, self).seconds, 0);
}

TEST(CollectiveModel, OnChipStagesMoveNoIciBytes) {
  Mesh mesh = OnTopology("tpu-v3:2x2", {2, 2, 2}, {"y", "x", "core"});
  CollectiveCost cost = CollectiveModel(mesh).Cost(CollectiveOp::kAllReduce, Axes{"core"}, 1e6);
  EXPECT_GT(cost.seconds, 0);
  EXPECT_TRUE(cost.bytes_sent.empty());
  EXPECT_EQ(cost.algorithm, "direct");
  // Forcing ring still exchanges the two cores directly on the chip.
  CollectiveCost forced =
      CollectiveModel(mesh, Forced(Algorithm::kRing)).Cost(CollectiveOp::kAllReduce, Axes{"core"}, 1e6);
  EXPECT_DOUBLE_EQ(forced.seconds, cost.seconds);
}

TEST(CollectiveModel, DcnBetweenSlicesIsSharedByTheHost) {
  Topology two = Topology::Parse("tpu-v4:2x2x1", 2);
  Mesh mesh = OnTopology(two, {2, 4}, {"dcn", "ici"});
  const double S = 1e8;
  CollectiveCost cost = CollectiveModel(mesh, Forced(Algorithm::kRing)).Cost(CollectiveOp::kAllReduce, Axes{"dcn"}, S);
  EXPECT_NEAR(cost.seconds, 2 * (10e-6 + 0.5 * S / (2.5e10 / 4)), 1e-12);
  EXPECT_EQ(cost.bytes_sent.count(LinkClass::kDcn), 1u);
}

// Issue 12's DCN figures: v5e 2 x 100 Gb/s per 8-chip host, v5p 50 Gb/s per chip (4 chips per host); every
// chip of a host shares its NICs, and a small message pays the 10 us DCN latency per ring step.
TEST(CollectiveModel, DcnPerHostOfV5eAndV5p) {
  struct Case {
    const char* preset;
    int64_t chips;        // one host's chips: the slice
    double per_chip_Bps;  // the published figure per chip, one way
  };
  for (Case c : {Case{"tpu-v5e:2x4", 8, 2 * 100e9 / 8 / 8}, Case{"tpu-v5p:2x2x1", 4, 50e9 / 8}}) {
    SCOPED_TRACE(c.preset);
    Mesh mesh = OnTopology(c.preset, {2, c.chips}, {"dcn", "ici"}, {}, /*num_slices=*/2);
    CollectiveModel model(mesh, Forced(Algorithm::kRing));
    const double S = 1e8;
    // v5e collectives also pay the fixed cost the scaling book's profiles show (cost/collective_model.h).
    const double fixed = TpuCollectiveOverheadSeconds(*mesh.topology()->tpu_generation());
    EXPECT_NEAR(model.Cost(CollectiveOp::kAllReduce, Axes{"dcn"}, S).seconds,
                2 * (10e-6 + 0.5 * S / c.per_chip_Bps) + fixed, 1e-9);
    // 8 bytes: latency-bound, the two ring steps' latency.
    EXPECT_NEAR(model.Cost(CollectiveOp::kAllReduce, Axes{"dcn"}, 8).seconds, 2 * 10e-6 + fixed, 1e-8);
  }
}

TEST(CollectiveModel, SlowestGroupIsReportedAndEveryGroupIsCosted) {
  // Row 0 stays inside host 0, row 1 crosses to host 1.
  Mesh mesh = OnTopology("dgx-h100:2", {2, 4}, {"a", "b"}, {0, 1, 2, 3, 4, 5, 8, 9});
  CollectiveModel model(mesh);
  std::vector<CollectiveCost> per_group = model.CostPerGroup(CollectiveOp::kAllGather, Axes{"b"}, 1e8);
  ASSERT_EQ(per_group.size(), 2u);
  EXPECT_LT(per_group[0].seconds, per_group[1].seconds);
  EXPECT_EQ(per_group[0].bytes_sent.count(LinkClass::kInfiniband), 0u);
  EXPECT_DOUBLE_EQ(model.Cost(CollectiveOp::kAllGather, Axes{"b"}, 1e8).seconds, per_group[1].seconds);
}

TEST(CollectiveModel, TrivialCallsCostNothing) {
  CollectiveModel model(OnTopology("dgx-h100:1", {8, 1}, {"g", "one"}));
  CollectiveCost single = model.Cost(CollectiveOp::kAllReduce, Axes{"one"}, 1e6);
  EXPECT_EQ(single.seconds, 0);
  EXPECT_EQ(single.algorithm, "none");
  EXPECT_EQ(single.algbw_Bps, 0);
  EXPECT_EQ(model.Cost(CollectiveOp::kAllReduce, Axes{"g"}, 0).seconds, 0);
}

TEST(CollectiveModel, RejectsBadInput) {
  Mesh mesh = OnTopology("dgx-h100:1", {8}, {"g"});
  CollectiveModel model(mesh);
  try {
    model.Cost(CollectiveOp::kAllReduce, Axes{"tp"}, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("'tp'"));
  }
  EXPECT_THROW(model.Cost(CollectiveOp::kAllReduce, Axes{"g", "g"}, 8), Error);
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    try {
      model.Cost(CollectiveOp::kAllGather, Axes{"g"}, bad);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_THAT(e.what(), HasSubstr("message size"));
    }
  }
  const std::vector<int64_t> group = {0, 1};
  EXPECT_THROW(model.CostOfGroup(CollectiveOp::kAllReduce, group, -1), Error);
  const std::pair<int, int> pair[] = {{0, 1}};
  EXPECT_THROW(model.Cost(CollectiveOp::kAllGather, Axes{"g"}, 8, pair), Error);
  const std::pair<int, int> outside[] = {{0, 8}};
  EXPECT_THROW(model.Cost(CollectiveOp::kPermute, Axes{"g"}, 8, outside), Error);
  const std::pair<int, int> twice[] = {{0, 1}, {0, 2}};
  try {
    model.Cost(CollectiveOp::kPermute, Axes{"g"}, 8, twice);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValueError);
    EXPECT_THAT(e.what(), HasSubstr("source 0 twice"));
  }
  const std::pair<int, int> same_destination[] = {{0, 2}, {1, 2}};
  EXPECT_THROW(model.Cost(CollectiveOp::kPermute, Axes{"g"}, 8, same_destination), Error);
  try {
    CollectiveModel(Mesh(DeviceArray({2}, {0, 1}), {"x"}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
  }
  CollectiveOptions zero;
  zero.link_efficiency[LinkClass::kIci] = 0;
  EXPECT_THROW(CollectiveModel(mesh, zero), Error);
  CollectiveOptions above;
  above.link_efficiency[LinkClass::kNvlink] = 1.5;
  EXPECT_THROW(CollectiveModel(mesh, above), Error);
}

TEST(CollectiveModel, PropertiesHoldOverRandomGroupsAndSizes) {
  // Random GPU clusters and TPU slices, random ops and sizes: time grows with size, busbw never beats
  // the fastest link the group uses, and the breakdowns add up to the total.
  std::mt19937 rng(2024);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> machines = {
      {"dgx-h100:2", {2, 4, 2}}, {"dgx-a100:4", {4, 8, 1}}, {"tpu-v4:4x4x4", {4, 2, 8}},
      {"tpu-v5e:4x4", {2, 8, 1}}, {"tpu-v3:4x4", {4, 4, 2}}, {"cpu:8", {2, 2, 2}}};
  const CollectiveOp ops[] = {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                              CollectiveOp::kAllToAll, CollectiveOp::kPermute};
  std::uniform_real_distribution<double> log_size(3, 10);
  for (const auto& [preset, shape] : machines) {
    Topology topology = Topology::Parse(preset);
    CollectiveModel model(OnTopology(topology, shape, {"a", "b", "c"}));
    double fastest = 0;
    for (const auto& [link, spec] : topology.links()) fastest = std::max(fastest, spec.bandwidth_Bps);
    fastest = std::max(fastest, topology.memory_bandwidth_Bps());
    for (int trial = 0; trial < 30; ++trial) {
      Axes axes;
      for (const char* name : {"a", "b", "c"}) {
        if (rng() % 2) axes.push_back(name);
      }
      CollectiveOp op = ops[rng() % 5];
      double S = std::pow(10.0, log_size(rng));
      SCOPED_TRACE(preset + " " + std::string(CollectiveOpName(op)) + " " + std::to_string(S));
      CollectiveCost small = model.Cost(op, axes, S);
      CollectiveCost large = model.Cost(op, axes, 2 * S);
      EXPECT_GE(large.seconds, small.seconds);
      EXPECT_TRUE(std::isfinite(small.seconds));
      if (small.group_size > 1) {
        EXPECT_GT(small.seconds, 0);
        EXPECT_LE(small.busbw_Bps, 2 * fastest);  // bidirectional rings use two directions at most
        double by_stage = 0, by_link = 0, by_axis = 0;
        for (const StageCost& s : small.stages) by_stage += s.seconds;
        for (const auto& [_, t] : small.seconds_by_link) by_link += t;
        for (const auto& [_, t] : small.seconds_by_axis) by_axis += t;
        EXPECT_NEAR(by_stage, small.seconds, 1e-9 * small.seconds);
        EXPECT_NEAR(by_link, small.seconds, 1e-9 * small.seconds);
        EXPECT_NEAR(by_axis, small.seconds, 1e-9 * small.seconds);
      }
    }
  }
}

// NVLink reaches 0.73 of its line rate on Ampere (220 of 300 GB/s: nccl-tests issues 228, 331) and 0.8 on
// Hopper (issue 212); TPU v5e ICI 0.855 (the scaling book: 95% of 4.5e10 B/s) with a 2.7 us fixed cost.
TEST(CollectiveModel, LinkEfficienciesByGeneration) {
  EXPECT_NEAR(DefaultNvlinkEfficiency(GpuGeneration::kAmpere), 220.0 / 300, 1e-12);
  EXPECT_EQ(DefaultNvlinkEfficiency(GpuGeneration::kHopper), 0.8);
  EXPECT_NEAR(DefaultIciEfficiency(Topology::TpuGeneration::kV5e), 0.855, 1e-12);
  EXPECT_EQ(DefaultIciEfficiency(Topology::TpuGeneration::kV4), 1.0);
  EXPECT_NEAR(TpuCollectiveOverheadSeconds(Topology::TpuGeneration::kV5e) * 1e6, 2.70, 0.01);
  EXPECT_EQ(TpuCollectiveOverheadSeconds(Topology::TpuGeneration::kV5p), 0.0);
  // 8x A100 ring all-reduce of 8 GiB: busbw ~ 220 GB/s.
  Mesh a100 = OnTopology("dgx-a100:1", {8}, {"x"});
  const double S = 8.0 * kGiB;
  const CollectiveCost c = CollectiveModel(a100).Cost(CollectiveOp::kAllReduce, Axes{"x"}, S);
  EXPECT_NEAR(c.busbw_Bps / 1e9, 220, 3);
  // An explicit figure overrides the generation's.
  CollectiveOptions full;
  full.link_efficiency[LinkClass::kNvlink] = 1.0;
  EXPECT_NEAR(CollectiveModel(a100, full).Cost(CollectiveOp::kAllReduce, Axes{"x"}, S).busbw_Bps / 1e9, 300, 4);
}

}  // namespace
}  // namespace spmdsim
