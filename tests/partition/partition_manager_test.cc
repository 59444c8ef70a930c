#include "partition/partition_manager.h"

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/util/catch_error.h"

// Expected values from eformer's tests (tests/escale/test_partition_axis.py, test_partition_manager_api.py) where
// they exist; corrections follow eformer's get_corrected_named_sharding (partition-core's CorrectSpec).

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
namespace sem = semantic;

PartitionSpec P(std::string_view text) { return PartitionSpec::Parse(text); }
using Shape = std::vector<int64_t>;

TEST(InferRuntimeMode, DecodeWhenTheDimensionIsOne) {
  Shape decode = {2, 1, 32};
  Shape train = {2, 8, 32};
  EXPECT_EQ(InferRuntimeMode(1, decode), RuntimeMode::kDecode);
  EXPECT_EQ(InferRuntimeMode(1, train), RuntimeMode::kTrain);
  EXPECT_EQ(InferRuntimeMode(-2, decode), RuntimeMode::kDecode);  // Python indexing
  EXPECT_EQ(InferRuntimeMode(RuntimeMode::kInsert, std::nullopt), RuntimeMode::kInsert);
}

TEST(InferRuntimeMode, NeedsAShapeAndAnIndexInside) {
  Error no_shape = CatchError([] { InferRuntimeMode(1, std::nullopt); });
  EXPECT_EQ(no_shape.kind(), ErrorKind::kValueError);
  EXPECT_EQ(no_shape.message(), "when using dynamic mode detection shape should be provided");
  Shape shape = {2, 8};
  Error out = CatchError([&] { InferRuntimeMode(2, shape); });
  EXPECT_EQ(out.kind(), ErrorKind::kIndexError);
  EXPECT_THAT(out.message(), HasSubstr("tuple index out of range"));
  EXPECT_EQ(CatchError([&] { InferRuntimeMode(-3, shape); }).kind(), ErrorKind::kIndexError);
}

// eformer's test_resolve_accepts_dynamic_sharding_axes_class.
TEST(PartitionManager, ResolvesHiddenStatePresetByShape) {
  PartitionManager manager(PartitionAxis({{"decode_query_sequence_axis", "dp"}}));
  const DynamicShardingAxes& hidden = FindDynamicShardingPreset("HiddenStateSharding");
  Shape decode = {2, 1, 32};
  Shape train = {2, 8, 32};
  EXPECT_EQ(manager.Resolve(hidden, decode), P("P(('fsdp', 'dp'), 'dp', 'tp')"));
  EXPECT_EQ(manager.Resolve(hidden, train), P("P(('fsdp', 'dp'), 'sp', 'tp')"));
}

// eformer's test_resolve_accepts_dynamic_axes_argument / _instance and
// test_resolve_requires_shape_for_integer_mode_dynamic_axes.
TEST(PartitionManager, ResolvesDynamicAxesAndNeedsAShapeForAnIndexMode) {
  PartitionManager manager;
  DynamicShardingAxes batch{{sem::kBatch}, RuntimeMode::kTrain};
  EXPECT_EQ(manager.Resolve(batch), P("P(('fsdp', 'dp'))"));
  SemanticAxes axes = {sem::kBatch};
  EXPECT_EQ(manager.Resolve(axes, RuntimeMode::kTrain), P("P(('fsdp', 'dp'))"));
  EXPECT_THAT(CatchError([&] { manager.Resolve(FindDynamicShardingPreset("HiddenStateSharding")); }).message(),
              HasSubstr("shape should be provided"));
}

// Values computed with /tmp/pr/eflogic.py over eformer's common_types presets.
TEST(DynamicShardingPresets, ResolveAsEformerDoes) {
  PartitionManager manager;
  EXPECT_EQ(DynamicShardingPresets().size(), 17u);
  auto resolve = [&](std::string_view name) { return manager.Resolve(FindDynamicShardingPreset(name)); };
  EXPECT_EQ(resolve("RowWise"), P("P('tp', ('fsdp', 'sp'))"));
  EXPECT_EQ(resolve("ColumnWise"), P("P(('fsdp', 'sp'), 'tp')"));
  EXPECT_EQ(resolve("SColumnWise"), P("P(('fsdp', 'sp'),)"));
  EXPECT_EQ(resolve("SRowWise"), P("P('tp',)"));
  EXPECT_EQ(resolve("Replicated"), P("P(None,)"));
  EXPECT_EQ(resolve("ExpertColumnWise"), P("P('ep', 'fsdp', 'tp')"));
  EXPECT_EQ(resolve("ExpertRowWiseAlt"), P("P('ep', 'tp', ('fsdp', 'sp'))"));
  EXPECT_EQ(resolve("UnifiedExpertColumnWise"), P("P(('fsdp', 'sp', 'ep'), None, 'tp')"));
  EXPECT_EQ(resolve("UnifiedExpertRowWise"), P("P(('fsdp', 'sp', 'ep'), 'tp', None)"));
  EXPECT_EQ(resolve("ExpertActivationsAlt"), P("P('dp', 'sp', ('tp', 'fsdp'))"));
  EXPECT_EQ(resolve("ExpertTensorParallel"), P("P('tp', None, None)"));
  Shape q = {4, 16, 8, 64};
  EXPECT_EQ(manager.Resolve(FindDynamicShardingPreset("AttnQSharding"), q), P("P(('fsdp', 'dp'), 'sp', 'tp', None)"));
  Error e = CatchError([] { FindDynamicShardingPreset("Hidden"); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_THAT(e.what(), HasSubstr("HiddenStateSharding"));
}

TEST(PartitionManager, ShardCorrectsTheResolvedSpecForTheMesh) {
  Mesh mesh = Mesh::Iota({2, 4, 2}, {"dp", "fsdp", "tp"});
  PartitionManager manager;
  Shape shape = {8, 128, 64};
  ShardResult result = manager.Shard(mesh, shape, FindDynamicShardingPreset("HiddenStateSharding"));
  EXPECT_EQ(result.resolved, P("P(('fsdp', 'dp'), 'sp', 'tp')"));
  EXPECT_EQ(result.report.corrected, P("P(('fsdp', 'dp'), None, 'tp')"));  // the mesh has no 'sp'
  ASSERT_EQ(result.report.corrections.size(), 1u);
  EXPECT_EQ(result.report.corrections[0].dim, 1);
  EXPECT_EQ(result.report.corrections[0].reason, CorrectionReason::kUnknownAxis);
  ASSERT_TRUE(result.sharding.has_value());
  EXPECT_EQ(result.sharding->spec(), result.report.corrected);
  EXPECT_TRUE(result.constraint_applied);
}

TEST(PartitionManager, ShardWithKeepMostKeepsMoreThanEformer) {
  Mesh mesh = Mesh::Iota({2, 4, 2}, {"dp", "fsdp", "tp"});
  PartitionManager manager;
  Shape shape = {4, 128, 64};
  SemanticAxes axes = ParseSemanticAxes("batch,length,embed");
  ShardResult eformer = manager.Shard(mesh, shape, axes, RuntimeMode::kTrain);
  EXPECT_EQ(eformer.report.corrected, P("P(None, None, 'tp')"));  // 4 % (4*2) != 0
  CorrectionOptions keep_most;
  keep_most.mode = CorrectionMode::kKeepMost;
  ShardResult better = manager.Shard(mesh, shape, axes, RuntimeMode::kTrain, keep_most);
  EXPECT_EQ(better.report.corrected, P("P('fsdp', None, 'tp')"));
  EXPECT_EQ(better.report.bytes_saved_vs_eformer, 4 * 128 * 32 * 4 - 1 * 128 * 32 * 4);
}

TEST(PartitionManager, FullyReplicatedResultAppliesNoConstraint) {
  Mesh mesh = Mesh::Iota({2}, {"dp"});
  PartitionManager manager;
  Shape shape = {3, 5};
  SemanticAxes axes = ParseSemanticAxes("batch,embed");
  ShardResult result = manager.Shard(mesh, shape, axes, RuntimeMode::kTrain);
  EXPECT_EQ(result.report.corrected, PartitionSpec());
  EXPECT_TRUE(result.report.collapsed_to_empty);
  EXPECT_FALSE(result.constraint_applied);
  ASSERT_TRUE(result.sharding.has_value());
  EXPECT_TRUE(result.sharding->spec().empty());
}

TEST(PartitionManager, EmptyMeshGivesNoSharding) {
  PartitionManager manager;
  Shape shape = {8};
  SemanticAxes axes = {sem::kBatch};
  ShardResult result = manager.Shard(Mesh(), shape, axes, RuntimeMode::kTrain);
  EXPECT_FALSE(result.sharding.has_value());
  EXPECT_FALSE(result.constraint_applied);
  EXPECT_EQ(result.report.corrected, PartitionSpec());
}

TEST(PartitionManager, ShardPropagatesResolutionErrors) {
  Mesh mesh = Mesh::Iota({2}, {"dp"});
  PartitionManager manager;
  Shape shape = {8};
  SemanticAxes axes = {"nope"};
  EXPECT_EQ(CatchError([&] { manager.Shard(mesh, shape, axes, RuntimeMode::kTrain); }).message(),
            "Unknown semantic axis name: 'nope'");
  CorrectionOptions strict;
  strict.mode = CorrectionMode::kNone;
  SemanticAxes sp = {sem::kSequenceParallel};
  EXPECT_THROW(manager.Shard(mesh, shape, sp, RuntimeMode::kTrain, strict), SpecError);
}

// eformer's test_partition_manager_context_manager_updates_lookup_helpers and
// test_nested_partition_manager_context_restores_outer_manager.
TEST(ScopedPartitionManager, NestsAndRestores) {
  PartitionManager outer(PartitionAxis({{"data_parallel_axis", "dp_outer"}}));
  PartitionManager inner(PartitionAxis({{"data_parallel_axis", "dp_inner"}}));
  EXPECT_EQ(CurrentPartitionManager(), nullptr);
  {
    ScopedPartitionManager a(outer);
    EXPECT_EQ(CurrentPartitionManager(), &outer);
    {
      ScopedPartitionManager b(inner);
      EXPECT_EQ(CurrentPartitionManager(), &inner);
    }
    EXPECT_EQ(CurrentPartitionManager(), &outer);
    const PartitionManager* seen_by_other_thread = &outer;
    std::thread([&] { seen_by_other_thread = CurrentPartitionManager(); }).join();
    EXPECT_EQ(seen_by_other_thread, nullptr);
  }
  EXPECT_EQ(CurrentPartitionManager(), nullptr);
}

// eformer's test_last_partition_manager_tracks_last_created_instance and _is_visible_from_other_threads.
TEST(LastPartitionManager, TracksTheLastCreatedAcrossThreads) {
  PartitionManager first(PartitionAxis({{"data_parallel_axis", "dp1"}}));
  PartitionManager second(PartitionAxis({{"data_parallel_axis", "dp2"}}));
  ASSERT_NE(LastPartitionManager(), nullptr);
  EXPECT_EQ(*LastPartitionManager(), second);
  EXPECT_FALSE(*LastPartitionManager() == first);
  std::shared_ptr<const PartitionManager> seen;
  std::thread([&] { seen = LastPartitionManager(); }).join();
  ASSERT_NE(seen, nullptr);
  EXPECT_EQ(*seen, second);
}

// eformer's apply_logical_sharding tests: explicit manager, then the context's, then the last created.
TEST(ApplyLogicalSharding, PrefersExplicitThenContextThenLast) {
  Mesh mesh = Mesh::Iota({2, 2}, {"a", "b"});
  Shape shape = {4};
  SemanticAxes axes = {sem::kDataParallel};
  PartitionManager context_manager(PartitionAxis({{"data_parallel_axis", "a"}}));
  PartitionManager explicit_manager(PartitionAxis({{"data_parallel_axis", "b"}}));
  PartitionManager last(PartitionAxis({{"data_parallel_axis", "a"}, {"tensor_parallel_axis", "last"}}));
  {
    ScopedPartitionManager scope(context_manager);
    EXPECT_EQ(ApplyLogicalSharding(mesh, shape, &explicit_manager, axes, RuntimeMode::kTrain).report.corrected,
              P("P('b')"));
    EXPECT_EQ(ApplyLogicalSharding(mesh, shape, nullptr, axes, RuntimeMode::kTrain).report.corrected, P("P('a')"));
  }
  SemanticAxes tp = {sem::kTensorParallel};
  EXPECT_EQ(ApplyLogicalSharding(mesh, shape, nullptr, tp, RuntimeMode::kTrain).resolved, P("P('last')"));
}

TEST(ApplyLogicalSharding, WithoutAnyManagerIsAValueError) {
  internal::ClearLastPartitionManager();
  Mesh mesh = Mesh::Iota({2}, {"dp"});
  Shape shape = {4};
  SemanticAxes axes = {sem::kBatch};
  Error e = CatchError([&] { ApplyLogicalSharding(mesh, shape, nullptr, axes, RuntimeMode::kTrain); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(),
            "No PartitionManager is available. Provide `partition_manager` or use `with PartitionManager(...)`.");
}

}  // namespace
}  // namespace spmdsim
