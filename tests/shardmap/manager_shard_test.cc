// ShardWithManager: PartitionManager::Shard's decision applied to the data.
#include "shardmap/manager_shard.h"

#include <gtest/gtest.h>

#include <vector>

#include "shardmap/shard_map.h"

namespace spmdsim {
namespace {

const std::vector<SemanticAxis> kBatchEmbed = {SemanticAxis(semantic::kBatch), SemanticAxis(semantic::kEmbed)};

TEST(ShardWithManager, MovesAReplicatedArrayToTheResolvedShardingWithoutTraffic) {
  Mesh mesh = Mesh::Iota({2, 2, 2}, {"dp", "fsdp", "tp"});
  PartitionManager manager;
  Array x = Array::Iota({8, 16}, DType::kF32);
  ShardedArray replicated = ShardedArray::DevicePut(x, NamedSharding(mesh, P()));
  ManagerShardResult r = ShardWithManager(manager, replicated, kBatchEmbed, RuntimeMode::kTrain);
  EXPECT_EQ(r.decision.report.corrected, P({"fsdp", "dp"}, "tp"));
  EXPECT_EQ(r.array.sharding().spec(), P({"fsdp", "dp"}, "tp"));
  EXPECT_EQ(r.moved.total_bytes_moved, 0);  // every device already held its piece
  for (int p = 0; p < 8; ++p) EXPECT_EQ(r.moved.bytes_local[p], 8 * 16 * 4 / 8);
  EXPECT_EQ(r.array.Gather().ToDoubles(), x.ToDoubles());
}

TEST(ShardWithManager, MovesAShardedArrayAndCountsTheBytes) {
  Mesh mesh = Mesh::Iota({2, 2, 2}, {"dp", "fsdp", "tp"});
  PartitionManager manager;
  Array x = Array::Iota({8, 16}, DType::kF32);
  ShardedArray by_tp = ShardedArray::DevicePut(x, NamedSharding(mesh, P("tp")));
  ManagerShardResult r = ShardWithManager(manager, by_tp, kBatchEmbed, RuntimeMode::kTrain);
  EXPECT_EQ(r.array.Gather().ToDoubles(), x.ToDoubles());
  int64_t sent = 0;
  for (int p = 0; p < 8; ++p) {
    sent += r.moved.bytes_sent[p];
    EXPECT_EQ(r.moved.bytes_local[p] + r.moved.bytes_received[p], r.array.shard(p).nbytes());
  }
  EXPECT_GT(r.moved.total_bytes_moved, 0);
  EXPECT_EQ(sent, r.moved.total_bytes_moved);
}

TEST(ShardWithManager, PlacesAHostArrayAndRejectsAnEmptyMesh) {
  Mesh mesh = Mesh::Iota({2, 2, 2}, {"dp", "fsdp", "tp"});
  PartitionManager manager;
  Array x = Array::Iota({8, 16}, DType::kF32);
  ManagerShardResult r = ShardWithManager(manager, mesh, x, kBatchEmbed, RuntimeMode::kTrain);
  EXPECT_EQ(r.array.sharding().spec(), P({"fsdp", "dp"}, "tp"));
  EXPECT_EQ(r.array.Gather().ToDoubles(), x.ToDoubles());
  EXPECT_THROW(ShardWithManager(manager, Mesh(), x, kBatchEmbed, RuntimeMode::kTrain), Error);
}

}  // namespace
}  // namespace spmdsim
