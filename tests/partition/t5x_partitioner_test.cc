#include "partition/t5x_partitioner.h"

#include <algorithm>
#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/util/catch_error.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

PartitionSpec P(std::string_view text) { return PartitionSpec::Parse(text); }

std::shared_ptr<const Topology> Topo(std::string_view text, int slices = 1) {
  return std::make_shared<const Topology>(Topology::Parse(text, slices));
}

// Independent of LocalChunker: a host's chunk along `axis` is the lowest coordinate its devices have on that
// axis divided by how many coordinates they span (hosts own boxes of the mesh).
std::pair<int64_t, int64_t> ChunkOf(const Mesh& mesh, int host, const std::string& axis) {
  int a = mesh.AxisIndex(axis);
  int64_t lo = mesh.shape()[a], hi = -1;
  for (int64_t pos = 0; pos < mesh.size(); ++pos) {
    if (mesh.topology()->device(mesh.DeviceAt(pos)).process_index != host) continue;
    int64_t c = mesh.CoordsOfPosition(pos)[a];
    lo = std::min(lo, c);
    hi = std::max(hi, c);
  }
  int64_t extent = hi - lo + 1;
  return {lo / extent, mesh.shape()[a] / extent};  // (chunk id, number of chunks)
}

TEST(DataLayout, PrintsAsT5xDataclass) {
  EXPECT_EQ((DataLayout{64, 2, 4, true}).ToString(),
            "DataLayout(batch_size=64, shard_id=2, num_shards=4, is_first_host_in_replica_set=True)");
  EXPECT_EQ((DataLayout{std::nullopt, 0, 1, false}).ToString(),
            "DataLayout(batch_size=None, shard_id=0, num_shards=1, is_first_host_in_replica_set=False)");
}

TEST(T5xPartitioner, SingleHostMeshWithStandardRules) {
  T5xPartitioner partitioner(Mesh::Iota({4, 2}, {"data", "model"}));
  EXPECT_EQ(partitioner.logical_axis_rules(), StandardLogicalAxisRules());
  EXPECT_EQ(partitioner.data_axis(), PartitionSpec::Entry::Axis("data"));
  EXPECT_EQ(partitioner.data_partition_spec(), P("P('data',)"));
  EXPECT_EQ(partitioner.data_mesh_size(), 4);
  EXPECT_EQ(partitioner.data_shards(), 1);
  EXPECT_EQ(partitioner.data_shard_id(), 0);
  EXPECT_EQ(partitioner.GetDataLayout(), (DataLayout{4, 0, 1, true}));
  EXPECT_EQ(partitioner.GetDataLayout(12), (DataLayout{12, 0, 1, true}));
  EXPECT_EQ(partitioner.GetDataLayout(0), (DataLayout{4, 0, 1, true}));  // Python: 0 or data_mesh_size
  Error e = CatchError([&] { partitioner.GetDataLayout(6); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(), "Batch size (6) must be divisible by corresponding data mesh size (4).");
}

// t5x's test topology (partitioning_test.py test_default_mesh / test_local_chunker): TPU v3 4x4, 4 partitions.
TEST(T5xPartitioner, SplitsTheBatchOverTheHostsOfATpuV3) {
  T5xPartitioner partitioner = T5xPartitioner::FromTopology(Topo("tpu-v3:4x4"), 4);
  const Mesh& mesh = partitioner.mesh();
  ASSERT_EQ(mesh.axis_names(), (std::vector<std::string>{"data", "model"}));
  EXPECT_EQ(partitioner.data_mesh_size(), 8);
  std::set<int64_t> shard_ids;
  for (int host = 0; host < 4; ++host) {
    auto [chunk, chunks] = ChunkOf(mesh, host, "data");
    EXPECT_EQ(chunks, 4);
    EXPECT_EQ(partitioner.data_shards(host), 4);
    EXPECT_EQ(partitioner.data_shard_id(host), chunk);
    EXPECT_EQ(partitioner.GetDataLayout(64, host), (DataLayout{64, chunk, 4, true}));
    shard_ids.insert(chunk);
  }
  EXPECT_EQ(shard_ids.size(), 4u);  // every host gets its own shard
  // The header's example.
  EXPECT_EQ(partitioner.GetDataLayout(64, 1).ToString(),
            "DataLayout(batch_size=64, shard_id=2, num_shards=4, is_first_host_in_replica_set=True)");
  EXPECT_EQ(partitioner.GetDataLayout(std::nullopt, 3).batch_size, 8);
  EXPECT_THAT(CatchError([&] { partitioner.GetDataLayout(12, 0); }).message(),
              HasSubstr("Batch size (12) must be divisible by corresponding data mesh size (8)."));
}

TEST(T5xPartitioner, LocalChunkInfoFromASpec) {
  T5xPartitioner partitioner = T5xPartitioner::FromTopology(Topo("tpu-v3:4x4"), 4);
  std::vector<int64_t> shape = {128, 16};
  EXPECT_EQ(partitioner.GetLocalChunkInfo(shape, P("P('data', 'model')"), 1).ToString(),
            "LocalChunkInfo(slice=(slice(64, 96, None), slice(0, 16, None)), replica_id=0)");
  t5x::LocalChunkInfo replicated = partitioner.GetLocalChunkInfo(shape, P("P(None, 'model')"), 1);
  EXPECT_EQ(replicated.replica_id, 2);
  EXPECT_TRUE(replicated.slice[0].whole());
  EXPECT_EQ(CatchError([&] { partitioner.GetLocalChunkInfo(shape, P("P(('data', 'model'),)"), 1); }).kind(),
            ErrorKind::kNotImplementedError);
}

TEST(T5xPartitioner, MultisliceSplitsBatchOverReplicaAndData) {
  auto topology = Topo("tpu-v4:2x2x2", 2);
  std::vector<int64_t> ici = {1, 2, 4};
  std::vector<int64_t> dcn = {2, 1, 1};
  // T5X still wants num_partitions (or a submesh) here, though default_mesh ignores it for ici/dcn meshes.
  EXPECT_EQ(CatchError([&] { T5xPartitioner::FromTopology(topology, 0, std::nullopt, ici, dcn); }).kind(),
            ErrorKind::kValueError);
  T5xPartitioner partitioner = T5xPartitioner::FromTopology(topology, 4, std::nullopt, ici, dcn);
  const Mesh& mesh = partitioner.mesh();
  ASSERT_EQ(mesh.axis_names(), (std::vector<std::string>{"replica", "data", "model"}));
  EXPECT_EQ(partitioner.data_axis(), PartitionSpec::Entry::Axes({"replica", "data"}));
  EXPECT_EQ(partitioner.data_partition_spec(), P("P(('replica', 'data'),)"));
  EXPECT_EQ(partitioner.logical_axis_rules()[0].mesh_axes, PartitionSpec::Entry::Axes({"replica", "data"}));
  EXPECT_EQ(partitioner.data_mesh_size(), 4);
  for (int host = 0; host < topology->num_processes(); ++host) {
    auto [replica, replicas] = ChunkOf(mesh, host, "replica");
    auto [data, datas] = ChunkOf(mesh, host, "data");
    auto [model, models] = ChunkOf(mesh, host, "model");
    DataLayout layout = partitioner.GetDataLayout(16, host);
    EXPECT_EQ(layout.num_shards, replicas * datas) << host;
    EXPECT_EQ(layout.shard_id, replica * datas + data) << host;  // 'replica' major
    EXPECT_EQ(layout.is_first_host_in_replica_set, model == 0) << host;
    (void)models;
  }
}

TEST(T5xPartitioner, RulesWithoutBatchHaveNoDataAxis) {
  T5xPartitioner::Options options;
  options.logical_axis_rules = ParseLogicalAxisRules("embed=model");
  T5xPartitioner partitioner(Mesh::Iota({2, 2}, {"data", "model"}), options);
  EXPECT_TRUE(partitioner.data_axis().is_none());
  EXPECT_EQ(partitioner.data_partition_spec(), P("P(None,)"));
  EXPECT_EQ(partitioner.GetDataLayout(), (DataLayout{std::nullopt, 0, 1, true}));
  EXPECT_EQ(partitioner.GetDataLayout(7, 1), (DataLayout{7, 0, 1, false}));
  EXPECT_EQ(CatchError([&] { partitioner.data_mesh_size(); }).kind(), ErrorKind::kTypeError);
  EXPECT_EQ(CatchError([&] { partitioner.data_shards(); }).kind(), ErrorKind::kTypeError);
  EXPECT_EQ(CatchError([&] { partitioner.data_shard_id(); }).kind(), ErrorKind::kTypeError);
}

TEST(T5xPartitioner, DataAxisMissingFromTheMeshIsAKeyError) {
  T5xPartitioner partitioner(Mesh::Iota({2, 2}, {"x", "y"}));
  Error e = CatchError([&] { partitioner.data_mesh_size(); });
  EXPECT_EQ(e.kind(), ErrorKind::kKeyError);
  EXPECT_THAT(e.message(), HasSubstr("'data'"));
  EXPECT_THAT(CatchError([&] { partitioner.GetDataLayout(4); }).kind(), ErrorKind::kKeyError);
}

TEST(T5xPartitioner, NeedsPartitionsOrASubmesh) {
  Error e = CatchError([] { T5xPartitioner::FromTopology(Topo("tpu-v3:4x4"), 0); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(), "At least one of `num_partitions` or `model_parallel_submesh` must be set.");
  T5xPartitioner with_submesh =
      T5xPartitioner::FromTopology(Topo("tpu-v3:4x4"), 0, t5x::HardwareMesh{2, 1, 1, 2});
  EXPECT_EQ(with_submesh.mesh().shape(), (std::vector<int64_t>{8, 4}));
}

// t5x test_get_mesh_axes: the parameters' logical axes through the partitioner's rules.
TEST(T5xPartitioner, GetMeshAxesMapsEveryParameter) {
  T5xPartitioner::Options options;
  options.logical_axis_rules = ParseLogicalAxisRules("batch=data,embed=,vocab=model,mlp=model");
  T5xPartitioner partitioner(Mesh::Iota({1, 1}, {"data", "model"}), options);
  std::vector<std::pair<std::string, std::optional<LogicalAxes>>> params = {
      {"params/logits_dense", ParseLogicalAxes("vocab,embed")},
      {"params/mlp/wo/kernel", ParseLogicalAxes("embed,mlp")},
      {"state/step", std::nullopt}};
  auto out = partitioner.GetMeshAxes(params);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].second, P("P('model', None)"));
  EXPECT_EQ(out[1].second, P("P(None, 'model')"));
  EXPECT_FALSE(out[2].second.has_value());
}

TEST(T5xPartitioner, GetMeshAxesNamesTheFailingParameter) {
  T5xPartitioner partitioner(Mesh::Iota({2, 1}, {"data", "model"}));
  std::vector<std::pair<std::string, std::optional<LogicalAxes>>> params = {
      {"params/ok", ParseLogicalAxes("embed")}, {"params/dense/kernel", ParseLogicalAxes("embed,embed")}};
  Error e = CatchError([&] { partitioner.GetMeshAxes(params); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(),
            "Failed to map logical axes for params/dense/kernel: Unsupported: Dimensions ('embed',) occur more than "
            "once in array names.");
}

}  // namespace
}  // namespace spmdsim
