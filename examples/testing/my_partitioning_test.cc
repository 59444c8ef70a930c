// A template to copy: test your own partitioning rules and shard_map functions with spmdsim::testing.
//
// Replace the three functions under "the code under test" with yours; keep the tests' shape. Build it like
// any GoogleTest file (examples/CMakeLists.txt does this in-tree):
//   find_package(spmdsim REQUIRED)
//   add_executable(my_partitioning_test my_partitioning_test.cc)
//   target_link_libraries(my_partitioning_test PRIVATE spmdsim::testing spmdsim::shardmap GTest::gtest_main)
//
// What it shows:
//  - your rules fit the model's shapes on the mesh without correction (NeededNoCorrection, IsShardedAs);
//  - your shard_map function, run by ShardMap on a mesh built from a topology preset, is all close to the
//    unsharded computation (AllClose), and its output is sharded as you intend (CallSharded + IsShardedAs);
//  - a mistake -- forgetting the psum -- is caught by shard_map's replication check, not by luck.
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops/ops.h"
#include "partition/correction.h"
#include "partition/named_sharding.h"
#include "shardmap/shard_map.h"
#include "testing/spmd_test.h"

namespace {

using spmdsim::Array;
using spmdsim::DeviceContext;
using spmdsim::kNone;
using spmdsim::P;
using spmdsim::PartitionSpec;
using spmdsim::ShardMap;
using spmdsim::testing::AllClose;
using spmdsim::testing::IsShardedAs;
using spmdsim::testing::NeededNoCorrection;

// ---- the code under test (yours) -----------------------------------------------------------------------

// Your partitioning rule: how each array of an MLP is laid out on a (dp, tp) mesh. Megatron: w1 is
// column-parallel, w2 row-parallel; activations [batch, seq, d] are split over the batch.
PartitionSpec RuleFor(const std::string& name) {
  if (name == "mlp/w1") return P(kNone, "tp");
  if (name == "mlp/w2") return P("tp", kNone);
  return P("dp", kNone, kNone);
}

// Your shard_map function: one tensor-parallel MLP shard and one psum over "tp".
Array MlpShard(DeviceContext& d, const Array& x, const Array& w1_block, const Array& w2_block) {
  Array h = spmdsim::Gelu(spmdsim::Einsum("bsd,df->bsf", x, w1_block));
  return d.Psum(spmdsim::MatMul(h, w2_block), "tp");
}

// The unsharded computation it must reproduce.
Array Mlp(const Array& x, const Array& w1, const Array& w2) {
  return spmdsim::MatMul(spmdsim::Gelu(spmdsim::Einsum("bsd,df->bsf", x, w1)), w2);
}

// ---- the tests ----------------------------------------------------------------------------------------------

Array Random(std::mt19937& rng, std::vector<int64_t> shape) {
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(static_cast<size_t>(spmdsim::NumElements(shape)));
  for (float& f : v) f = normal(rng);
  return Array::FromVector<float>(v, std::move(shape));
}

class MyPartitioningTest : public spmdsim::testing::SpmdTest {
 protected:
  // 4 TPU v4 chips as dp:2 x tp:2, in the order jax.experimental.mesh_utils would give.
  void SetUp() override { UseMesh("tpu-v4:2x2x1", {{"dp", 2}, {"tp", 2}}); }

  // shard_map of MlpShard with the specs the rules give, on the fixture's mesh and runtime.
  spmdsim::ShardMapped ShardedMlp() {
    spmdsim::ShardMapOptions options;
    options.runtime = &runtime();
    options.name = "MlpShard";
    return ShardMap(MlpShard, mesh(), {RuleFor("x"), RuleFor("mlp/w1"), RuleFor("mlp/w2")}, {RuleFor("y")},
                    options);
  }

  static constexpr int64_t kBatch = 4, kSeq = 8, kModel = 16, kHidden = 32;
};

TEST_F(MyPartitioningTest, RulesFitTheModelWithoutCorrection) {
  EXPECT_THAT(spmdsim::CorrectSpec(RuleFor("mlp/w1"), mesh(), std::vector<int64_t>{kModel, kHidden}),
              NeededNoCorrection());
  EXPECT_THAT(spmdsim::CorrectSpec(RuleFor("mlp/w2"), mesh(), std::vector<int64_t>{kHidden, kModel}),
              NeededNoCorrection());
  EXPECT_THAT(spmdsim::CorrectSpec(RuleFor("x"), mesh(), std::vector<int64_t>{kBatch, kSeq, kModel}),
              NeededNoCorrection());
  EXPECT_THAT(spmdsim::NamedSharding(mesh(), RuleFor("mlp/w1")), IsShardedAs("P(None, 'tp')"));
}

TEST_F(MyPartitioningTest, RulesNeedCorrectionWhenTheHiddenSizeIsOdd) {
  // 33 hidden units do not split over tp=2: the rule must be corrected (here: w1's 'tp' dropped).
  spmdsim::CorrectionOptions keep_most;
  keep_most.mode = spmdsim::CorrectionMode::kKeepMost;
  EXPECT_THAT(spmdsim::CorrectSpec(RuleFor("mlp/w1"), mesh(), std::vector<int64_t>{kModel, 33}, keep_most),
              ::testing::Not(NeededNoCorrection()));
}

TEST_F(MyPartitioningTest, ShardedMlpIsAllCloseToTheUnshardedMlp) {
  std::mt19937 rng(0);
  Array x = Random(rng, {kBatch, kSeq, kModel});
  Array w1 = Random(rng, {kModel, kHidden}), w2 = Random(rng, {kHidden, kModel});
  Array y = ShardedMlp()(x, w1, w2)[0];
  EXPECT_THAT(y, AllClose(Mlp(x, w1, w2), /*rtol=*/1e-5, /*atol=*/1e-5));
}

TEST_F(MyPartitioningTest, ShardedMlpOutputStaysShardedOverTheBatch) {
  std::mt19937 rng(1);
  Array x = Random(rng, {kBatch, kSeq, kModel});
  Array w1 = Random(rng, {kModel, kHidden}), w2 = Random(rng, {kHidden, kModel});
  spmdsim::ShardedArray y = ShardedMlp().CallSharded({x, w1, w2})[0];
  EXPECT_THAT(y.sharding(), IsShardedAs("P('dp', None, None)"));
  EXPECT_EQ(y.shard(0).shape(), (std::vector<int64_t>{kBatch / 2, kSeq, kModel}));  // each device: half the batch
  EXPECT_THAT(y.Gather(), AllClose(Mlp(x, w1, w2), 1e-5, 1e-5));
}

TEST_F(MyPartitioningTest, ForgettingThePsumIsCaughtByTheReplicationCheck) {
  // Without the psum each device returns a partial sum that varies over 'tp', but out_specs P('dp', ...)
  // promises the output is the same along 'tp': shard_map refuses it (JAX's ValueError).
  spmdsim::ShardMapOptions options;
  options.runtime = &runtime();
  auto broken = ShardMap(
      [](DeviceContext&, const Array& x, const Array& w1_block, const Array& w2_block) {
        return spmdsim::MatMul(spmdsim::Gelu(spmdsim::Einsum("bsd,df->bsf", x, w1_block)), w2_block);
      },
      mesh(), {RuleFor("x"), RuleFor("mlp/w1"), RuleFor("mlp/w2")}, {RuleFor("y")}, options);
  std::mt19937 rng(2);
  Array x = Random(rng, {kBatch, kSeq, kModel});
  Array w1 = Random(rng, {kModel, kHidden}), w2 = Random(rng, {kHidden, kModel});
  try {
    broken(x, w1, w2);
    FAIL() << "shard_map accepted an output that varies over 'tp'";
  } catch (const spmdsim::Error& e) {
    EXPECT_EQ(e.kind(), spmdsim::ErrorKind::kValueError);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("mesh axis 'tp'"));
  }
}

}  // namespace
