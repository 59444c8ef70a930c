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
  Topology topology = Topology::Cpu(static_cast<int>(NumElements(shape)));
  topology.SetMemoryBytes(memory_bytes);
  std::vector<int> ids(NumElements(shape));
  std::iota(ids.begin(), ids.end(), 0);
  return Mesh(DeviceArray(shape, ids), names, std::make_shared<const Topology>(topology));
}

TEST(AnalyzeMemory, SumsShardBytesPerDevice) {
  Mesh mesh = Mesh::Iota({2, 4}, {"dp", "tp"});
  std::vector<NamedArray> arrays{{"w", {1024, 4096}, DType::kF32, PartitionSpec::Parse("P(None, 'tp')")},
                                 {"b", {4096}, DType::kF32, PartitionSpec()},
                                 {"e", {64, 512}, DType::kBF16, PartitionSpec::Parse("P(('dp', 'tp'))")}};
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
  MemoryAnalysis m = AnalyzeMemory({{"x", {16, 8}, DType::kF32, PartitionSpec::Parse("P('ici')")}}, mesh);
  EXPECT_EQ(m.processes, (std::vector<int>{0, 1}));
  EXPECT_EQ(m.bytes_per_process, (std::vector<int64_t>{8 * 2 * 8 * 4, 8 * 2 * 8 * 4}));
  EXPECT_EQ(m.capacity_bytes, topology->memory_bytes());
}

TEST(CheckCapacity, NamesTheDeviceThatDoesNotFit) {
  Mesh mesh = CpuMesh({4}, {"x"}, 1000);
  MemoryAnalysis m = AnalyzeMemory({{"w", {1000}, DType::kF32, PartitionSpec::Parse("P('x')")}}, mesh);
  EXPECT_EQ(m.devices_over_capacity, (std::vector<int>{}));
  MemoryAnalysis big = AnalyzeMemory({{"w", {1000}, DType::kF64, PartitionSpec::Parse("P('x')")}}, mesh);
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
    AnalyzeMemory({{"layer/w", {6}, DType::kF32, PartitionSpec::Parse("P('x')")}}, mesh);
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndivisibleError);
    EXPECT_THAT(e.message(), HasSubstr("array 'layer/w': "));
  }
}

// The example of memory_analysis.h, every figure.
TEST(AnalyzeMemory, FillsWhatEformersAnalyzeShardingStrategyLeavesEmpty) {
  Mesh mesh = Mesh::Iota({2, 4}, {"dp", "tp"});
  MemoryAnalysis m = AnalyzeMemory({{"w", {1024, 4096}, DType::kF32, PartitionSpec::Parse("P(None, 'tp')")},
                                    {"b", {4096}, DType::kF32, PartitionSpec()}},
                                   mesh);
  EXPECT_EQ(m.total_parameters, 1024 * 4096 + 4096);
  EXPECT_EQ(m.sharded_parameters, 1024 * 4096);
  EXPECT_EQ(m.total_bytes, 16793600);
  EXPECT_THAT(m.bytes_per_position, Each(4210688));
  EXPECT_DOUBLE_EQ(m.balance_score, 1.0);
  EXPECT_DOUBLE_EQ(m.memory_efficiency, 16793600.0 / 8 / 4210688);
  EXPECT_DOUBLE_EQ(m.replication_factor, 8.0 * 4210688 / 16793600);
  ASSERT_EQ(m.arrays.size(), 2u);
  EXPECT_EQ(m.arrays[0].elements, 1024 * 4096);
  EXPECT_EQ(m.arrays[0].shape, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(m.arrays[0].shard_shape, (std::vector<int64_t>{1024, 1024}));
  EXPECT_EQ(m.arrays[0].spec, PartitionSpec::Parse("P(None, 'tp')"));
  EXPECT_EQ(m.arrays[0].replication, 2);
  EXPECT_EQ(m.arrays[1].replication, 8);
}

TEST(AnalyzeMemory, CountsASpecThatSplitsNothingAsUnshardedUnlikeEformer) {
  // eformer counts every array whose spec != P() as sharded; P(None) and an axis of size 1 split nothing.
  Mesh mesh = Mesh::Iota({1, 4}, {"one", "x"});
  MemoryAnalysis m = AnalyzeMemory({{"a", {8}, DType::kF32, PartitionSpec::Parse("P(None)")},
                                    {"b", {8}, DType::kF32, PartitionSpec::Parse("P('one')")},
                                    {"c", {8}, DType::kF32, PartitionSpec::Parse("P('x')")}},
                                   mesh);
  EXPECT_EQ(m.total_parameters, 24);
  EXPECT_EQ(m.sharded_parameters, 8);
  // 4 devices hold 8*4 + 8*4 + 2*4 = 72 bytes each; ideal 96 / 4 = 24.
  EXPECT_DOUBLE_EQ(m.memory_efficiency, 24.0 / 72.0);
  EXPECT_DOUBLE_EQ(m.replication_factor, 4.0 * 72 / 96);
}

TEST(AnalyzeMemory, ScoresAreOneWhenNothingIsHeld) {
  Mesh mesh = Mesh::Iota({2}, {"x"});
  MemoryAnalysis none = AnalyzeMemory({}, mesh);
  EXPECT_EQ(none.total_parameters, 0);
  EXPECT_DOUBLE_EQ(none.balance_score, 1.0);
  EXPECT_DOUBLE_EQ(none.memory_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(none.replication_factor, 1.0);
  MemoryAnalysis empty = AnalyzeMemory({{"e", {0, 4}, DType::kF32, PartitionSpec::Parse("P('x')")}}, mesh);
  EXPECT_EQ(empty.total_bytes, 0);
  EXPECT_DOUBLE_EQ(empty.balance_score, 1.0);
}

TEST(ParseNamedArray, ReadsNameShapeDtypeAndSpec) {
  NamedArray a = ParseNamedArray("layer0/w:1024,4096:bf16:P(None, 'tp')");
  EXPECT_EQ(a.name, "layer0/w");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(a.dtype, DType::kBF16);
  EXPECT_EQ(a.spec, PartitionSpec::Parse("P(None, 'tp')"));
  NamedArray scalar = ParseNamedArray("step::i32:");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.spec, PartitionSpec());
}

TEST(ParseNamedArray, NamesTheTokenAndTheExpectedForm) {
  auto message = [](std::string_view text) {
    try {
      ParseNamedArray(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message("w:8:f32"), HasSubstr("--array 'w:8:f32': 2 of the 3 ':' separators; expected "
                                            "name:shape:dtype:spec"));
  EXPECT_THAT(message(":8:f32:P()"), HasSubstr("the name is empty"));
  EXPECT_THAT(message("w:8,b:f32:P()"), HasSubstr("'b'"));
  EXPECT_THAT(message("w:8:f33:P()"), HasSubstr("--array 'w': unknown dtype 'f33'"));
  EXPECT_THAT(message("w:8:f32:P('x' 'y')"), HasSubstr("--array 'w' spec: "));
  EXPECT_THAT(message("w:8:f32:P(('a', ('b',)))"), HasSubstr("ValueError"));
}

TEST(FormatMemoryAnalysis, ShowsTotalsScoresAndEveryDevice) {
  Mesh mesh = Mesh::Iota({2, 4}, {"dp", "tp"});
  MemoryAnalysis m = AnalyzeMemory({{"w", {1024, 4096}, DType::kF32, PartitionSpec::Parse("P(None, 'tp')")},
                                    {"b", {4096}, DType::kF32, PartitionSpec()}},
                                   mesh);
  const std::string text = FormatMemoryAnalysis(m);
  EXPECT_THAT(text, HasSubstr("w      (1024, 4096)  P(None, 'tp')       4.00MiB       4            2\n"));
  EXPECT_THAT(text, HasSubstr("parameters          4198400 total, 4194304 in sharded arrays (99.9%)"));
  EXPECT_THAT(text, HasSubstr("largest device      0: 4210688 (4.02MiB)"));
  EXPECT_THAT(text, HasSubstr("balance score       1.0000"));
  EXPECT_THAT(text, HasSubstr("memory efficiency   0.4985"));
  EXPECT_THAT(text, HasSubstr("replication factor  2.0059"));
  EXPECT_THAT(text, HasSubstr("  devices 0-7: 4210688 (4.02MiB)\n"));
}

}  // namespace
}  // namespace spmdsim
