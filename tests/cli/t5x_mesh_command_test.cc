// Runs the built `spmdsim` binary with the T5X flags (`spmdsim mesh --submesh / --num-partitions / --host`) and
// checks its output against the library (mesh/t5x_mesh.h, itself tested against t5x's own output).
#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tests/cli/run_spmdsim.h"
#include "mesh/t5x_mesh.h"

namespace spmdsim::t5x {
namespace {

using ::nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using ::spmdsim::testing_cli::CommandResult;
CommandResult Spmdsim(const std::string& args) { return ::spmdsim::testing_cli::RunSpmdsim(args); }

json SpmdsimJson(const std::string& args) {
  CommandResult run = Spmdsim(args + " --json");
  EXPECT_EQ(run.exit_code, 0) << args << ": " << run.err;
  return run.exit_code == 0 ? json::parse(run.out) : json();
}

std::shared_ptr<const Topology> Topo(const std::string& text) {
  return std::make_shared<const Topology>(Topology::Parse(text));
}

TEST(T5xMeshCommand, NumPartitionsIsDefaultMeshOnTpuGpuAndCpu) {
  for (const std::string topology : {"tpu-v3:4x4", "tpu-v4:2x2x4", "tpu-v4:4x4x4", "gpu:2x8", "dgx-h100:2", "cpu:8"}) {
    for (int num_partitions : {1, 2, 4, 8}) {
      SCOPED_TRACE(topology + " " + std::to_string(num_partitions));
      const std::string args = fmt::format("mesh --topology {} --num-partitions {}", topology, num_partitions);
      Mesh expected;
      try {
        expected = DefaultMesh(num_partitions, std::nullopt, Topo(topology));
      } catch (const Error& e) {
        // e.g. tpu-v4:2x2x4 with 8 partitions: t5x's table picks (4, 2, 1, 1), which does not fit.
        CommandResult run = Spmdsim(args);
        EXPECT_EQ(run.exit_code, 1);
        EXPECT_THAT(run.err, HasSubstr(std::string(ErrorKindName(e.kind()))));
        continue;
      }
      json out = SpmdsimJson(args);
      EXPECT_EQ(out["axis_names"], json({"data", "model"}));
      EXPECT_EQ(out["shape"].get<std::vector<int64_t>>(), expected.shape());
      EXPECT_EQ(out["device_ids"].get<std::vector<int>>(), expected.device_ids());
    }
  }
}

TEST(T5xMeshCommand, SubmeshIsGetMeshAndReportsItsSteps) {
  auto topology = Topo("tpu-v4:4x4x4");
  for (bool tile : {true, false}) {
    GetMeshSteps steps;
    Mesh expected = GetMesh({4, 1, 1, 1}, topology, 0, tile, &steps);
    json out = SpmdsimJson(std::string("mesh --topology tpu-v4:4x4x4 --submesh 4,1,1,1") +
                           (tile ? "" : " --no-tile-by-host"));
    EXPECT_EQ(out["device_ids"].get<std::vector<int>>(), expected.device_ids());
    EXPECT_EQ(out["t5x"]["z_major_swap"], "yz");
    EXPECT_EQ(out["t5x"]["tiled_by_host"], false);
    EXPECT_EQ(out["t5x"]["global_hardware_mesh"], json({4, 4, 4, 1}));
    EXPECT_EQ(out["t5x"]["local_hardware_mesh"], json({2, 2, 1, 1}));
  }
  Mesh tiled = GetMesh({2, 2, 1, 1}, topology);
  json out = SpmdsimJson("mesh --topology tpu-v4:4x4x4 --submesh 2,2,1,1");
  EXPECT_EQ(out["device_ids"].get<std::vector<int>>(), tiled.device_ids());
  EXPECT_EQ(out["t5x"]["tiled_by_host"], true);
  // With both flags the submesh wins, as in t5x's default_mesh.
  json both = SpmdsimJson("mesh --topology tpu-v4:4x4x4 --submesh 2,2,1,1 --num-partitions 16");
  EXPECT_EQ(both["device_ids"].get<std::vector<int>>(), tiled.device_ids());
}

TEST(T5xMeshCommand, HostShowsWhatLocalChunkerGivesEveryHost) {
  auto topology = Topo("tpu-v3:4x4");
  Mesh mesh = DefaultMesh(4, std::nullopt, topology);
  for (int host = 0; host < 4; ++host) {
    SCOPED_TRACE(host);
    LocalChunker chunker(mesh, host);
    json out = SpmdsimJson(fmt::format("mesh --topology tpu-v3:4x4 --num-partitions 4 --host {}", host));
    const json& local = out["local_chunk"];
    EXPECT_EQ(local["host"], host);
    EXPECT_EQ(local["local_device_ids"].get<std::vector<int>>(), chunker.local_mesh().device_ids());
    EXPECT_EQ(local["axes"]["data"]["chunk_id"], chunker.chunk_id("data"));
    EXPECT_EQ(local["axes"]["data"]["num_chunks"], 4);
    EXPECT_EQ(local["axes"]["data"]["shard_id"], chunker.GetShardId({"data"}));
    EXPECT_EQ(local["axes"]["model"]["replica_id"], chunker.GetReplicaId({"model"}));
  }
  // --host works on a JAX mesh too.
  json jax = SpmdsimJson("mesh --topology tpu-v4:2x2x4 --mesh data=4,model=4 --host 2");
  EXPECT_EQ(jax["local_chunk"]["host"], 2);
}

TEST(T5xMeshCommand, HumanOutputNamesTheT5xCallAndTheHostsChunk) {
  CommandResult run = Spmdsim("mesh --topology tpu-v3:4x4 --num-partitions 4 --host 1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("mesh: Mesh('data': 8, 'model': 4) = t5x default_mesh(4) = get_mesh((2, 1, 1, 2))"));
  EXPECT_THAT(run.out, HasSubstr("hardware mesh (4, 4, 1, 2) (x, y, z, cores), per-host bounds (2, 2, 1, 2)"));
  EXPECT_THAT(run.out, HasSubstr("host 1 (T5X LocalChunker): local mesh Mesh('data': 2, 'model': 4), "
                                 "devices 4 5 6 7 12 13 14 15"));
  EXPECT_THAT(run.out, HasSubstr("data     chunk 2 of 4"));
  CommandResult gpu = Spmdsim("mesh --topology gpu:2x8 --num-partitions 4");
  EXPECT_THAT(gpu.out, HasSubstr("t5x default_mesh(4) = get_gpu_mesh(4)"));
}

// Bad input: exit 1, nothing on stdout, one line on stderr naming the problem.
TEST(T5xMeshCommand, BadInputExitsNonZeroWithOneLineNamingTheProblem) {
  struct Case {
    std::string args, must_mention;
  };
  const Case cases[] = {
      {"mesh --topology tpu-v3:4x4 --submesh 3,1,1,1", "x in {1, 2, 4}, y in {1, 2, 4}, z in {1}, cores in {1, 2}"},
      {"mesh --topology tpu-v3:4x4 --submesh 2,1", "must have 4 entries"},
      {"mesh --topology tpu-v3:4x4 --submesh 2,x,1,1", "--submesh entry"},
      {"mesh --topology tpu-v5e:4x4 --num-partitions 4", "No default mesh for this configuration"},
      {"mesh --topology gpu:2x8 --num-partitions 3", "factor or multiple of the number of local devices"},
      {"mesh --topology gpu:2x8 --num-partitions 4 --no-tile-by-host", "--no-tile-by-host"},
      {"mesh --topology tpu-v3:4x4 --no-tile-by-host", "--no-tile-by-host"},
      {"mesh --topology tpu-v3:4x4 --submesh 2,1,1,2 --mesh a=32", "do not combine with --mesh"},
      {"mesh --topology tpu-v3:4x4 --num-partitions 4 --host 4", "processes 0..3"},
      {"mesh --topology tpu-v4:4x4x4 --submesh 2,2,4,1 --no-tile-by-host --host 0", "contiguous subcube"},
      {"mesh --topology tpu-v4:2x2x2 --slices 2 --num-partitions 4", "slices"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    CommandResult run = Spmdsim(c.args);
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_THAT(run.err, StartsWith("spmdsim mesh: "));
    EXPECT_THAT(run.err, HasSubstr(c.must_mention));
  }
}

TEST(T5xMeshCommand, NonPositivePartitionsOrNegativeHostAreUsageErrors) {
  CommandResult zero = Spmdsim("mesh --topology tpu-v3:4x4 --num-partitions 0");
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_THAT(zero.err, HasSubstr("--num-partitions"));
  CommandResult host = Spmdsim("mesh --topology tpu-v3:4x4 --num-partitions 4 --host -1");
  EXPECT_NE(host.exit_code, 0);
  EXPECT_THAT(host.err, HasSubstr("--host"));
}

}  // namespace
}  // namespace spmdsim::t5x
