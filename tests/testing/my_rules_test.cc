// A template to copy: test your own partitioning rules and SPMD device functions with spmdsim::testing.
//
// Build it like any GoogleTest file, linking spmdsim::testing:
//   find_package(spmdsim REQUIRED)
//   add_executable(my_rules_test my_rules_test.cc)
//   target_link_libraries(my_rules_test PRIVATE spmdsim::testing GTest::gtest_main)
//
// NOTE: shard_map (spmdsim::shardmap) is being written at the same time as this file. Until it lands, the
// device functions below cut their own blocks out of the global arrays with Slice and AxisIndex; with
// ShardMap the same test becomes `ShardMap(f, mesh(), {P(), P(None, "tp"), P("tp", None)}, P())(x, w1, w2)`
// and the slicing disappears. The checks (AllClose against the unsharded computation) stay as they are.
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops/ops.h"
#include "partition/correction.h"
#include "partition/named_sharding.h"
#include "testing/spmd_test.h"

namespace {

using spmdsim::Array;
using spmdsim::DeviceContext;
using spmdsim::DType;
using spmdsim::PartitionSpec;
using spmdsim::testing::AllClose;
using spmdsim::testing::IsShardedAs;
using spmdsim::testing::NeededNoCorrection;

// ---- the code under test (yours) -----------------------------------------------------------------------

// Your partitioning rule: how an MLP's weights are laid out on a (dp, tp) mesh (Megatron: W1 column-parallel,
// W2 row-parallel; activations batch-sharded).
PartitionSpec RuleFor(const std::string& param) {
  if (param == "mlp/w1") return PartitionSpec::Parse("P(None, 'tp')");
  if (param == "mlp/w2") return PartitionSpec::Parse("P('tp', None)");
  return PartitionSpec::Parse("P('dp', None, None)");  // activations [batch, seq, d]
}

// Your device function: one tensor-parallel MLP shard and one psum over "tp".
Array MlpShard(DeviceContext& d, const Array& x, const Array& w1_block, const Array& w2_block) {
  Array h = spmdsim::Gelu(spmdsim::Einsum("bsd,df->bsf", x, w1_block));
  return d.Psum(spmdsim::MatMul(h, w2_block), "tp");
}

// The unsharded computation it must reproduce.
Array Mlp(const Array& x, const Array& w1, const Array& w2) {
  return spmdsim::MatMul(spmdsim::Gelu(spmdsim::Einsum("bsd,df->bsf", x, w1)), w2);
}

Array Random(std::mt19937& rng, std::vector<int64_t> shape) {
  std::normal_distribution<float> n(0, 1);
  std::vector<float> v(static_cast<size_t>(spmdsim::NumElements(shape)));
  for (float& f : v) f = n(rng);
  return Array::FromVector<float>(v, std::move(shape));
}

// ---- the tests ----------------------------------------------------------------------------------------------

class MyRulesTest : public spmdsim::testing::SpmdTest {};

TEST_F(MyRulesTest, RulesFitTheModelWithoutCorrection) {
  UseMesh("tpu-v4:2x2x1", {{"dp", 2}, {"tp", 2}});
  EXPECT_THAT(spmdsim::CorrectSpec(RuleFor("mlp/w1"), mesh(), std::vector<int64_t>{64, 256}), NeededNoCorrection());
  EXPECT_THAT(spmdsim::CorrectSpec(RuleFor("mlp/w2"), mesh(), std::vector<int64_t>{256, 64}), NeededNoCorrection());
  EXPECT_THAT(spmdsim::NamedSharding(mesh(), RuleFor("mlp/w1")), IsShardedAs("P(None, 'tp')"));
}

TEST_F(MyRulesTest, TensorParallelMlpMatchesTheUnshardedMlp) {
  UseMesh("tpu-v4:2x2x1", {{"dp", 2}, {"tp", 2}});
  std::mt19937 rng(0);
  const int64_t b = 4, s = 8, dm = 16, f = 32;
  Array x = Random(rng, {b, s, dm}), w1 = Random(rng, {dm, f}), w2 = Random(rng, {f, dm});
  Array expected = Mlp(x, w1, w2);
  std::vector<Array> out = RunOnEachDevice([&](DeviceContext& d) {
    // The blocks RuleFor assigns to this device (what ShardMap will do for you).
    int64_t i = d.AxisIndex("dp"), t = d.AxisIndex("tp");
    int64_t bb = b / 2, ff = f / 2;
    Array x_block = spmdsim::Slice(x, {i * bb, 0, 0}, {(i + 1) * bb, s, dm});
    Array w1_block = spmdsim::Slice(w1, {0, t * ff}, {dm, (t + 1) * ff});
    Array w2_block = spmdsim::Slice(w2, {t * ff, 0}, {(t + 1) * ff, dm});
    return MlpShard(d, x_block, w1_block, w2_block);
  });
  for (int64_t p = 0; p < mesh().size(); ++p) {
    int64_t i = mesh().CoordsOfPosition(p)[mesh().AxisIndex("dp")];
    Array expected_block = spmdsim::Slice(expected, {i * b / 2, 0, 0}, {(i + 1) * b / 2, s, dm});
    EXPECT_THAT(out[p], AllClose(expected_block, 1e-5, 1e-5)) << "device position " << p;
  }
}

}  // namespace
