#include "partition/memory_analysis.h"

#include <memory>
#include <numeric>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace spmdsim {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;

Mesh CpuMesh(std::vector<int64_t> shape, std::vector<std::string> names, int64_t memory_bytes) {
  Topology topology = Topology::Cpu(static_cast<int>(Product(shape)));
  topology.SetMemoryBytes(memory_bytes);
  std::vector<int> ids(Product(shape));
  std::iota(ids.begin(), ids.end(), 0);
  return Mesh(DeviceArray(shape, ids), names, std::make_shared<const Topology>(topology));
}

TEST(AnalyzeMemory, SumsShardBytesPerDevice) {
  Mesh mesh = Mesh::Iota({2, 4}, {"dp", "tp"});
  std::vector<NamedArray> arrays{{"w", {1024, 4096}, 4, PartitionSpec::Parse("P(None, 'tp')")},
                                 {"b", {4096}, 4, PartitionSpec()},
                                 {"e", {64, 512}, 2, PartitionSpec::Parse("P(('dp', 'tp'))")}};
  MemoryAnalysis m = AnalyzeMemory(arrays, mesh);
  const int64_t w = 1024 * 1024 * 4, b = 4096 * 4, e = 8 * 512 * 2;
  EXPECT_THAT(m.bytes_per_position, Each(w + b + e));
  EXPECT_EQ(m.max_bytes, w + b + e);
  EXPECT_EQ(m.min_bytes, w + b + e);
  EXPECT_EQ(m.max_device, 0);
  EXPECT_EQ(m.replicated_bytes_per_device, b);
  EXPECT_EQ(m.sharded_bytes_per_device, w + e);
  ASSERT_EQ(m.arrays.size(), 3u);
  EXPECT_EQ(m.arrays[0].replication, 2);
  EXPECT_EQ(m.arrays[0].num_shards, 4);
  EXPECT_TRUE(m.arrays[0].sharded);
  EXPECT_EQ(m.arrays[1].replication, 8);
  EXPECT_FALSE(m.arrays[1].sharded);
  EXPECT_EQ(m.arrays[2].global_bytes, 64 * 512 * 2);
  EXPECT_EQ(m.bytes_per_process, (std::vector<int64_t>{8 * (w + b + e)}));
  EXPECT_TRUE(m.fits());
  EXPECT_NO_THROW(CheckCapacity(m));
}

TEST(AnalyzeMemory, TotalsPerHost) {
  // dgx-h100:2 = 2 hosts of 8 GPUs; mesh (host, gpu) = (2, 8) in id order.
  auto topology = std::make_shared<const Topology>(Topology::Parse("dgx-h100:2"));
  std::vector<int> ids(16);
  std::iota(ids.begin(), ids.end(), 0);
  Mesh mesh(DeviceArray({2, 8}, ids), {"dcn", "ici"}, topology);
  MemoryAnalysis m = AnalyzeMemory({{"x", {16, 8}, 4, PartitionSpec::Parse("P('ici')")}}, mesh);
  EXPECT_EQ(m.processes, (std::vector<int>{0, 1}));
  EXPECT_EQ(m.bytes_per_process, (std::vector<int64_t>{8 * 2 * 8 * 4, 8 * 2 * 8 * 4}));
  EXPECT_EQ(m.capacity_bytes, topology->memory_bytes());
}

TEST(CheckCapacity, NamesTheDeviceThatDoesNotFit) {
  Mesh mesh = CpuMesh({4}, {"x"}, 1000);
  MemoryAnalysis m = AnalyzeMemory({{"w", {1000}, 4, PartitionSpec::Parse("P('x')")}}, mesh);
  EXPECT_EQ(m.devices_over_capacity, (std::vector<int>{}));
  MemoryAnalysis big = AnalyzeMemory({{"w", {1000}, 8, PartitionSpec::Parse("P('x')")}}, mesh);
  EXPECT_EQ(big.devices_over_capacity, (std::vector<int>{0, 1, 2, 3}));
  try {
    CheckCapacity(big);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_THAT(e.message(), HasSubstr("device 0 needs 2000 bytes but has 1000 bytes"));
  }
}

TEST(AnalyzeMemory, NamesTheArrayWhoseSpecDoesNotFit) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  try {
    AnalyzeMemory({{"layer/w", {6}, 4, PartitionSpec::Parse("P('x')")}}, mesh);
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.kind(), "IndivisibleError");
    EXPECT_THAT(e.message(), HasSubstr("array 'layer/w': "));
  }
}

}  // namespace
}  // namespace spmdsim
