// ShardedArray (device_put, gather, addressable shards) and Reshard with its byte report.
#include "shardmap/sharded_array.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "shardmap/shard_map.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShardedArray, DevicePutSharesOneBufferPerBlock) {
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  Array x = Array::Iota({8, 2}, DType::kF32);
  ShardedArray a = ShardedArray::DevicePut(x, NamedSharding(mesh, P("x")));
  EXPECT_EQ(a.shard(0).ToString(), "[[0, 1], [2, 3]]");
  EXPECT_TRUE(a.shard(1).SharesBufferWith(a.shard(0)));
  EXPECT_FALSE(a.shard(2).SharesBufferWith(a.shard(0)));
  EXPECT_EQ(a.shard(0).charged_position(), -1);  // host arrays without a runtime
  EXPECT_EQ(a.Gather().ToDoubles(), x.ToDoubles());
  EXPECT_EQ(a.ToString(), "ShardedArray(float32[8,2], " + NamedSharding(mesh, P("x")).ToString() + ")");
}

TEST(ShardedArray, DevicePutThroughARuntimeChargesEachDevice) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  Runtime runtime(mesh);
  ShardedArray a = ShardedArray::DevicePut(Array::Iota({4, 4}, DType::kF32), NamedSharding(mesh, P("x")), &runtime);
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(a.shard(p).charged_position(), p);
    EXPECT_EQ(runtime.memory_stats(p).in_use_bytes, 2 * 4 * 4);
  }
  EXPECT_THROW(ShardedArray::DevicePut(Array::Iota({4}, DType::kF32), NamedSharding(Mesh::Iota({4}, {"x"}), P("x")),
                                       &runtime),
               Error);
}

TEST(ShardedArray, AddressableShardsGroupByHost) {
  // A TPU v4 slice of 16 chips on 4 hosts (4 chips each): P('x') over x=16.
  std::shared_ptr<const Topology> topo = std::make_shared<Topology>(Topology::Parse("tpu-v4:4x4x1"));
  std::vector<int> ids(topo->num_devices());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
  Mesh mesh(DeviceArray({static_cast<int64_t>(ids.size())}, ids), {"x"}, topo);
  ShardedArray a = ShardedArray::DevicePut(Array::Iota({static_cast<int64_t>(ids.size())}, DType::kI32),
                                           NamedSharding(mesh, P("x")));
  int64_t total = 0;
  for (int host = 0; host < topo->num_processes(); ++host) {
    for (const AddressableShard& s : a.AddressableShards(host)) {
      EXPECT_EQ(topo->device(s.device).process_index, host);
      EXPECT_EQ(s.data.ToDoubles()[0], s.index[0].start);
      ++total;
    }
  }
  EXPECT_EQ(total, mesh.size());
  EXPECT_EQ(static_cast<int64_t>(a.AllShards().size()), mesh.size());
}

TEST(ShardedArray, GatherRejectsReplicasThatDiffer) {
  Mesh mesh = Mesh::Iota({2}, {"x"});
  NamedSharding replicated(mesh, P());
  ShardedArray a = ShardedArray::FromShards({2}, DType::kF32, replicated,
                                            {Array::FromVector<float>({1, 2}, {2}),
                                             Array::FromVector<float>({1, 3}, {2})});
  try {
    a.Gather();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("replicas of block"));
    EXPECT_THAT(e.message(), HasSubstr("device 1 (position 1)"));
  }
  EXPECT_THAT(a.Gather(GatherOptions{.check_replicas = false}).ToDoubles(), ElementsAre(1, 2));
}

TEST(ShardedArray, FromShardsChecksShapesAndCount) {
  Mesh mesh = Mesh::Iota({2}, {"x"});
  NamedSharding s(mesh, P("x"));
  EXPECT_THROW(ShardedArray::FromShards({4}, DType::kF32, s, {Array::Zeros({2}, DType::kF32)}), Error);
  EXPECT_THROW(ShardedArray::FromShards({4}, DType::kF32, s,
                                        {Array::Zeros({2}, DType::kF32), Array::Zeros({3}, DType::kF32)}),
               Error);
  EXPECT_THROW(ShardedArray::DevicePut(Array::Iota({3}, DType::kF32), s), SpecError);  // 2 does not divide 3
}

TEST(Reshard, MovesOnlyWhatADeviceDoesNotHold) {
  // The header's example: mesh {x:4, y:2}, (8,2) float32, P('x') -> P('y').
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  Array x = Array::Iota({8, 2}, DType::kF32);
  ShardedArray a = ShardedArray::DevicePut(x, NamedSharding(mesh, P("x")));
  ReshardReport r;
  ShardedArray b = Reshard(a, NamedSharding(mesh, P("y")), &r);
  EXPECT_EQ(r.bytes_local[0], 16);
  EXPECT_EQ(r.bytes_received[0], 16);
  EXPECT_EQ(r.bytes_received[1], 32);
  EXPECT_EQ(b.Gather().ToDoubles(), x.ToDoubles());
  int64_t sent = 0, received = 0;
  for (int p = 0; p < 8; ++p) {
    sent += r.bytes_sent[p];
    received += r.bytes_received[p];
  }
  EXPECT_EQ(sent, received);
  EXPECT_EQ(received, r.total_bytes_moved);
  EXPECT_THAT(r.ToString(), HasSubstr("position 1: sent"));
}

TEST(Reshard, ToTheSameShardingMovesNothing) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  ShardedArray a = ShardedArray::DevicePut(Array::Iota({4, 4}, DType::kF32), NamedSharding(mesh, P("x")));
  ReshardReport r;
  ShardedArray b = Reshard(a, NamedSharding(mesh, P("x", kNone)), &r);
  EXPECT_EQ(r.total_bytes_moved, 0);
  EXPECT_TRUE(b.shard(3).SharesBufferWith(a.shard(3)));
}

TEST(Reshard, ThroughARuntimeChargesTheNewBlocksToTheirDevices) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  Runtime runtime(mesh);
  ShardedArray a = ShardedArray::DevicePut(Array::Iota({4, 4}, DType::kF32), NamedSharding(mesh, P("x", "y")));
  ShardedArray b = Reshard(a, NamedSharding(mesh, P()), nullptr, &runtime);
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(b.shard(p).charged_position(), p);
    EXPECT_EQ(runtime.memory_stats(p).in_use_bytes, 64);
  }
  EXPECT_EQ(b.Gather().ToDoubles(), a.Gather().ToDoubles());
}

TEST(Reshard, RequiresTheSameDevices) {
  ShardedArray a = ShardedArray::DevicePut(Array::Iota({4}, DType::kF32),
                                           NamedSharding(Mesh::Iota({4}, {"x"}), P("x")));
  EXPECT_THROW(Reshard(a, NamedSharding(Mesh::Iota({2}, {"x"}), P("x"))), Error);
  // Same devices in another arrangement is fine: (4,) -> (2, 2).
  ShardedArray b = Reshard(a, NamedSharding(Mesh::Iota({2, 2}, {"a", "b"}), P({"b", "a"})));
  EXPECT_EQ(b.Gather().ToDoubles(), a.Gather().ToDoubles());
}

TEST(Reshard, RoundTripsOverRandomShardings) {
  // Property: for random specs on a (2, 4) mesh, Reshard preserves the global value and conserves bytes.
  Mesh mesh = Mesh::Iota({2, 4}, {"x", "y"});
  const std::vector<PartitionSpec> specs = {P(),         P("x"),          P("y"),          P(kNone, "x"),
                                            P("x", "y"), P("y", "x"),     P({"x", "y"}),   P({"y", "x"}),
                                            P(kNone, {"x", "y"}), P(kNone, "y")};
  std::mt19937 rng(20261122);
  Array x = Array::Iota({8, 8}, DType::kF32);
  for (int trial = 0; trial < 40; ++trial) {
    const PartitionSpec& from = specs[rng() % specs.size()];
    const PartitionSpec& to = specs[rng() % specs.size()];
    ShardedArray a = ShardedArray::DevicePut(x, NamedSharding(mesh, from));
    ReshardReport r;
    ShardedArray b = Reshard(a, NamedSharding(mesh, to), &r);
    EXPECT_EQ(b.Gather().ToDoubles(), x.ToDoubles()) << from.ToString() << " -> " << to.ToString();
    int64_t sent = 0, local = 0, held = 0;
    for (int p = 0; p < 8; ++p) {
      sent += r.bytes_sent[p];
      local += r.bytes_local[p];
      held += b.shard(p).nbytes();
      // Every device ends with exactly its block: what it had plus what it received.
      EXPECT_EQ(r.bytes_local[p] + r.bytes_received[p], b.shard(p).nbytes());
    }
    EXPECT_EQ(sent, r.total_bytes_moved);
    EXPECT_EQ(local + sent, held);  // every byte a device ends with was kept or sent to it
  }
}

}  // namespace
}  // namespace spmdsim
