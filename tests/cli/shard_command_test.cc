// `spmdsim shard`, run through CLI11 as main.cc runs it.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#ifdef SPMDSIM_CLI_BINARY
#include "tests/cli/run_spmdsim.h"
#endif
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/error.h"
#include "tests/util/run_command_in_process.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

std::string RunShard(std::vector<std::string> args) {
  args.insert(args.begin(), "shard");
  return RunCommandInProcess({cli::AddShardCommand}, std::move(args));
}

nlohmann::json RunJson(std::vector<std::string> args) {
  args.push_back("--json");
  return nlohmann::json::parse(RunShard(std::move(args)));
}

TEST(ShardCommand, PrintsTheIssuesJsonFields) {
  nlohmann::json j = RunJson({"--mesh", "dp=2,fsdp=4,tp=2", "--shape", "8,1024,4096", "--spec",
                              "P(('dp','fsdp'),None,'tp')"});
  EXPECT_EQ(j["spec"], nlohmann::json::parse(R"([["dp","fsdp"],null,"tp"])"));
  EXPECT_EQ(j["shard_shape"], nlohmann::json::parse("[1,1024,2048]"));
  EXPECT_EQ(j["bytes_per_device"], 1 * 1024 * 2048 * 4);
  EXPECT_TRUE(j["corrections"].empty());
  ASSERT_EQ(j["shards"].size(), 16u);
  // Device 5 = (dp 0, fsdp 2, tp 1): rows [2, 3), columns [2048, 4096).
  EXPECT_EQ(j["shards"][5]["device"], 5);
  EXPECT_EQ(j["shards"][5]["index"], nlohmann::json::parse("[[2,3],[0,1024],[2048,4096]]"));
  EXPECT_EQ(j["shards"][5]["replica_id"], 0);
}

TEST(ShardCommand, ReplicaIdsCountDevicesHoldingTheSameBlock) {
  nlohmann::json j = RunJson({"--mesh", "x=2,y=2", "--shape", "4", "--spec", "P('y')"});
  std::vector<int> replicas;
  for (const auto& s : j["shards"]) replicas.push_back(s["replica_id"]);
  EXPECT_EQ(replicas, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(j["shards"][2]["index"], nlohmann::json::parse("[[0,2]]"));
}

TEST(ShardCommand, CorrectsAsEformerAndKeepMost) {
  const std::vector<std::string> base{"--mesh", "dp=2,fsdp=4,tp=2", "--shape", "8,1024,6", "--spec",
                                      "P(('dp','fsdp','tp'), 'sp', 'tp')"};
  auto args = base;
  args.insert(args.end(), {"--correct", "eformer"});
  nlohmann::json e = RunJson(args);
  EXPECT_EQ(e["spec"], nlohmann::json::parse(R"([null,null,"tp"])"));
  ASSERT_EQ(e["corrections"].size(), 2u);
  EXPECT_EQ(e["corrections"][0]["dim"], 0);
  EXPECT_EQ(e["corrections"][0]["from"], nlohmann::json::parse(R"(["dp","fsdp","tp"])"));
  EXPECT_EQ(e["corrections"][0]["to"], nullptr);
  EXPECT_EQ(e["corrections"][0]["reason"], "not_divisible");
  EXPECT_EQ(e["corrections"][1]["reason"], "unknown_axis");
  args = base;
  args.insert(args.end(), {"--correct", "keep-most"});
  nlohmann::json k = RunJson(args);
  EXPECT_EQ(k["spec"], nlohmann::json::parse(R"([["dp","fsdp"],null,"tp"])"));
  EXPECT_EQ(k["bytes_saved_vs_eformer"], 86016);
}

TEST(ShardCommand, HumanOutputShowsEveryPart) {
  std::string out = RunShard({"--mesh", "data=4", "--topology", "tpu-v4:2x2x1", "--shape", "8,2", "--spec",
                         "('data', None)", "--dtype", "bf16"});
  EXPECT_THAT(out, HasSubstr("spec        P('data', None)"));
  EXPECT_THAT(out, HasSubstr("shard shape (2, 2)   4 distinct block(s) x 1 replica(s)"));
  EXPECT_THAT(out, HasSubstr("bytes/device 8 (8B)"));
  EXPECT_THAT(out, HasSubstr("[6:8, 0:2]  r0"));
  EXPECT_THAT(out, HasSubstr("host 0: 4 device(s), 4 distinct block(s)"));
}

// The error RunShard throws for these arguments, or "no error".
std::string ShardError(std::vector<std::string> args) {
  try {
    RunShard(std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ShardCommand, BadInputNamesTheOffendingToken) {
  EXPECT_THAT(ShardError({"--mesh", "x=4", "--shape", "6", "--spec", "P('x')"}),
              HasSubstr("IndivisibleError: Sharding NamedSharding(mesh=Mesh('x': 4, axis_types=(Auto,)), spec=P('x',), "
                        "memory_kind=device) implies"));
  EXPECT_THAT(ShardError({"--mesh", "x=4", "--shape", "8", "--spec", "P('x' 'y')"}), HasSubstr("column 7"));
  EXPECT_THAT(ShardError({"--mesh", "x=4", "--shape", "8", "--spec", "P('x')", "--dtype", "f33"}), HasSubstr("'f33'"));
  EXPECT_THAT(ShardError({"--mesh", "x=4", "--shape", "8,a", "--spec", "P('x')"}), HasSubstr("'a'"));
  EXPECT_THAT(ShardError({"--mesh", "x=4", "--shape", "8", "--spec", "P('x')", "--correct", "best"}),
              HasSubstr("'best'"));
  EXPECT_THAT(ShardError({"--mesh", "x=64", "--topology", "cpu:8", "--shape", "8", "--spec", "P('x')"}),
              HasSubstr("64"));
  EXPECT_THAT(ShardError({"--mesh", "x=2", "--dcn", "x=2", "--shape", "8", "--spec", "P('x')"}),
              HasSubstr("--dcn and --slices need --topology"));
  EXPECT_THAT(ShardError({"--mesh", "x=2", "--shape", "8,8", "--spec", "P('x', 'x')", "--correct", "eformer"}),
              HasSubstr("DuplicateSpecError"));
}

// Before: JAX's message alone ("Resource axis: modle of P('modle', None) is not found in mesh: ('data', 'model').")
// and "unknown topology preset 'tpu-v5'". After: each with a did-you-mean; JAX's text is kept in front.
TEST(ShardCommand, UnknownAxesAndPresetsGetADidYouMean) {
  EXPECT_THAT(ShardError({"--mesh", "data=2,model=4", "--shape", "8,8", "--spec", "P('modle', None)"}),
              HasSubstr("ValueError: Resource axis: modle of P('modle', None) is not found in mesh: ('data', "
                        "'model'). (did you mean 'model' for 'modle'?)"));
  EXPECT_EQ(ShardError({"--mesh", "data=2,model=4", "--shape", "8,8", "--spec", "P('modle', None)", "--correct",
                     "keep-most"}),
            "no error");  // corrected: the axis is dropped, as eformer does (and reported)
  EXPECT_THAT(ShardError({"--mesh", "x=64", "--topology", "tpu-v5:4x4x4", "--shape", "64", "--spec", "P('x')"}),
              HasSubstr("(did you mean 'tpu-v5e' or 'tpu-v5p'?)"));
  EXPECT_THAT(ShardError({"--mesh", "x=64", "--topology", "tpu-v5p:4x4x", "--shape", "64", "--spec", "P('x')"}),
              HasSubstr("dimension 3 of '4x4x' is empty; tpu-v5p takes XxYxZ chips, e.g. tpu-v5p:4x4x4"));
}

TEST(ShardCommand, UsesTheMeshCommandsConstructionOnATopology) {
  // tpu-v3:4x4 has 32 devices (2 cores per chip); create_device_mesh's v3 ring order, not id order.
  nlohmann::json j = RunJson({"--mesh", "x=4,y=8", "--topology", "tpu-v3:4x4", "--shape", "4,8", "--spec",
                              "P('x', 'y')"});
  std::vector<int> devices;
  for (const auto& s : j["shards"]) devices.push_back(s["device"]);
  std::vector<int> sorted = devices;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_EQ(j["mesh"]["topology"], "tpu-v3:4x4");
}

#ifdef SPMDSIM_CLI_BINARY
// Before: "--correct TEXT  none (JAX's errors), eformer, keep-most": the default went unsaid.
TEST(ShardCommand, HelpSaysNoneIsTheDefaultCorrection) {
  testing_cli::CommandResult run = testing_cli::RunSpmdsim("shard --help");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("none (the default: JAX's errors for a spec that does not fit), eformer, keep-most"));
}

TEST(ShardCommand, BinaryExitsOneWithOneLineOnBadInput) {
  testing_cli::CommandResult run = testing_cli::RunSpmdsim("shard --mesh x=4 --shape 6 --spec \"P('x')\"");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_THAT(run.err, ::testing::StartsWith("spmdsim shard: IndivisibleError: "));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1);
}
#endif

}  // namespace
}  // namespace spmdsim
