// `spmdsim rules` and `spmdsim resolve`, run through CLI11 in process as main.cc runs them. Expected values are
// the library's (checked against Flax / T5X / eformer in logical_axis_rules_test.cc and partition_axis_test.cc);
// here each case checks that the command line reaches them and reports bad input as one clear error.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/error.h"
#include "partition/partition_axis.h"
#include "tests/util/catch_error.h"
#include "tests/util/run_command_in_process.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

std::string RunCli(std::string command, std::vector<std::string> args) {
  args.insert(args.begin(), std::move(command));
  return RunCommandInProcess({cli::AddRulesCommand, cli::AddResolveCommand}, std::move(args));
}

json RunJson(std::string command, std::vector<std::string> args) {
  args.push_back("--json");
  return json::parse(RunCli(std::move(command), std::move(args)));
}

TEST(RulesCommand, ResolvesT5xStandardRules) {
  json j = RunJson("rules", {"--standard", "1,2", "--names", "batch,length,embed,mlp"});
  EXPECT_EQ(j["spec"], json::parse(R"(["data",null,null,"model"])"));
  EXPECT_EQ(j["spec_repr"], "P('data', None, None, 'model')");
  EXPECT_EQ(j["rules"].size(), 13u);
  EXPECT_EQ(j["rules"][6], json::parse(R"(["embed","data"])"));
  json two = RunJson("rules", {"--standard", "2,2", "--names", "embed,mlp,heads,vocab"});
  EXPECT_EQ(two["spec"], json::parse(R"(["data",null,null,"model"])"));
}

TEST(RulesCommand, MultisliceAndAdditionalRules) {
  json j = RunJson("rules", {"--standard", "1,1", "--multislice", "--rules", "extra=model", "--names", "batch,extra"});
  EXPECT_EQ(j["spec"], json::parse(R"([["replica","data"],"model"])"));
  EXPECT_EQ(j["rules"].back(), json::parse(R"(["extra","model"])"));
}

TEST(RulesCommand, OwnRulesWithNoneTuplesAndUnnamedDimensions) {
  json j = RunJson("rules", {"--rules", "batch=data,embed=,mlp=model,joined=data+model", "--logical",
                             "batch,_,joined,mlp"});
  EXPECT_EQ(j["spec"], json::parse(R"(["data",null,null,"model"])"));  // joined loses 'data' to batch
  EXPECT_EQ(j["names"], json::parse(R"(["batch",null,"joined","mlp"])"));
  // Flax's docstring example.
  json flax = RunJson("rules", {"--rules", "batch=X,features=X,heads=Y,batch=Z", "--names",
                                "batch,length,heads,features"});
  EXPECT_EQ(flax["spec"], json::parse(R"(["X",null,"Y",null])"));
}

TEST(RulesCommand, ReadsARulesFile) {
  std::string path = ::testing::TempDir() + "spmdsim_rules_test.txt";
  {
    std::ofstream out(path);
    out << "# priority order\nbatch = data\nembed = model  # 2-D activations\nembed = data\n";
  }
  json j = RunJson("rules", {"--rules-file", path, "--names", "embed,batch"});
  EXPECT_EQ(j["spec"], json::parse(R"(["model","data"])"));
  std::remove(path.c_str());
  EXPECT_EQ(CatchError([&] { RunCli("rules", {"--rules-file", path}); }).code(), ErrorCode::kNotFound);
}

TEST(RulesCommand, HumanOutputExplainsEachDimension) {
  std::string out = RunCli("rules", {"--standard", "1,2", "--names", "batch,length,embed,mlp"});
  EXPECT_THAT(out, HasSubstr("T5X standard_logical_axis_rules(1, 2)"));
  EXPECT_THAT(out, HasSubstr("spec: P('data', None, None, 'model')"));
  EXPECT_THAT(out, HasSubstr("(its rules' mesh axes were already used)"));
  EXPECT_THAT(out, HasSubstr("(rule 2)"));
  std::string list = RunCli("rules", {"--standard", "2,1"});
  EXPECT_THAT(list, HasSubstr("embed              -> 'model'"));
  EXPECT_THAT(list, ::testing::Not(HasSubstr("spec:")));
}

TEST(RulesCommand, FallbacksAsFlax) {
  EXPECT_EQ(RunJson("rules", {"--rules", "foo=data", "--names", "foo,bar"})["spec"], json::parse(R"(["data",null])"));
  EXPECT_EQ(RunJson("rules", {"--rules", "foo=data", "--names", "foo,bar", "--fallback", "none"})["spec"], nullptr);
  Error e = CatchError([] { RunCli("rules", {"--rules", "foo=data", "--names", "foo,bar", "--fallback", "error"}); });
  EXPECT_EQ(e.message(), "Axis names ('foo', 'bar') did not match a rule");
  EXPECT_THAT(CatchError([] { RunCli("rules", {"--rules", "a=x", "--names", "a", "--fallback", "maybe"}); }).message(),
              HasSubstr("unsharded, error, none"));
}

TEST(RulesCommand, BadInputNamesTheToken) {
  EXPECT_EQ(CatchError([] { RunCli("rules", {"--rules", "foo=data", "--names", "foo,foo"}); }).message(),
            "Unsupported: Dimensions ('foo',) occur more than once in array names.");
  EXPECT_EQ(CatchError([] { RunCli("rules", {"--standard", "3,1"}); }).message(),
            "`activation_partitioning_dims` = 3 `parameter_partitioning_dims` = 1 is not supported.");
  EXPECT_THAT(CatchError([] { RunCli("rules", {"--standard", "2"}); }).message(), HasSubstr("'2'"));
  EXPECT_THAT(CatchError([] { RunCli("rules", {"--standard", "1,x"}); }).message(), HasSubstr("'x'"));
  EXPECT_THAT(CatchError([] { RunCli("rules", {"--rules", "batch"}); }).message(), HasSubstr("'batch'"));
  EXPECT_THAT(CatchError([] { RunCli("rules", {}); }).message(), HasSubstr("--standard"));
  EXPECT_THAT(CatchError([] { RunCli("rules", {"--rules", "a=b", "--rules-file", "x"}); }).message(),
              HasSubstr("one of them"));
}

class ResolveCommandTest : public ::testing::Test {
 protected:
  void SetUp() override { PartitionAxis::ClearRegisteredAxes(); }
  void TearDown() override { PartitionAxis::ClearRegisteredAxes(); }
};

TEST_F(ResolveCommandTest, EformerDefaultsPerMode) {
  json j = RunJson("resolve", {"--axes", "batch,query_length,head,head_dim", "--mode", "train"});
  EXPECT_EQ(j["spec"], json::parse(R"([["fsdp","dp"],"sp","tp",null])"));
  EXPECT_EQ(j["mode"], "train");
  // eformer test_resolve_accepts_dynamic_sharding_axes_class, both ways round.
  json decode = RunJson("resolve", {"--preset", "HiddenStateSharding", "--shape", "2,1,32", "--set",
                                    "decode_query_sequence_axis=dp"});
  EXPECT_EQ(decode["spec"], json::parse(R"([["fsdp","dp"],"dp","tp"])"));
  EXPECT_EQ(decode["mode"], "decode");
  json train = RunJson("resolve", {"--preset", "HiddenStateSharding", "--shape", "2x8x32", "--set",
                                   "decode_query_sequence_axis=dp"});
  EXPECT_EQ(train["spec"], json::parse(R"([["fsdp","dp"],"sp","tp"])"));
  json insert = RunJson("resolve", {"--axes", "batch,kv_length", "--mode", "insert", "--set",
                                    "decode_key_sequence_axis=ep+fsdp"});
  EXPECT_EQ(insert["spec"], json::parse(R"([["fsdp","dp"],["ep","fsdp"]])"));
  json prefill = RunJson("resolve", {"--axes", "batch,kv_length", "--mode", "prefill", "--set",
                                     "decode_key_sequence_axis=ep+fsdp"});
  EXPECT_EQ(prefill["spec"], json::parse(R"([["fsdp","dp"],"sp"])"));
}

TEST_F(ResolveCommandTest, SetAcceptsNoneTuplesAndFieldReferences) {
  json j = RunJson("resolve", {"--axes", "head,embed,batch,_,fsdp+sp", "--mode", "train", "--set",
                               "tensor_parallel_axis=model", "--set", "head_axis=expert_parallel_axis", "--set",
                               "hidden_state_axis=none", "--set", "batch_axis=dp+fsdp"});
  EXPECT_EQ(j["spec"], json::parse(R"(["ep",null,["dp","fsdp"],null,["fsdp","sp"]])"));
  EXPECT_EQ(j["axes"], json::parse(R"(["head","embed","batch","_","fsdp+sp"])"));
  EXPECT_THAT(CatchError([] {
                RunCli("resolve", {"--axes", "batch", "--mode", "train", "--set", "nope=x"});
              }).message(),
              HasSubstr("unexpected keyword argument 'nope'"));
  EXPECT_THAT(CatchError([] { RunCli("resolve", {"--axes", "batch", "--mode", "train", "--set", "x"}); }).message(),
              HasSubstr("'x'"));
}

TEST_F(ResolveCommandTest, RegisteredAxesAndTheirErrors) {
  json j = RunJson("resolve", {"--axes", "my_axis,batch", "--mode", "decode", "--register",
                               "my_axis=query_sequence_axis", "--set", "decode_query_sequence_axis=dp"});
  EXPECT_EQ(j["spec"], json::parse(R"(["dp",["fsdp","dp"]])"));  // the decode twin was inferred
  json explicit_gen = RunJson("resolve", {"--axes", "g", "--mode", "decode", "--register", "g=head_axis:none"});
  EXPECT_EQ(explicit_gen["spec"], json::parse("[null]"));
  Error cycle = CatchError([] {
    RunCli("resolve", {"--axes", "a", "--mode", "train", "--register", "a=b", "--register", "b=a"});
  });
  EXPECT_EQ(cycle.message(), "Cyclic semantic axis registration detected at 'b'.");
}

TEST_F(ResolveCommandTest, CorrectsForAMesh) {
  json j = RunJson("resolve", {"--axes", "batch,length,embed", "--mode", "1", "--shape", "4,1,4096", "--mesh",
                               "dp=2,fsdp=4,tp=2", "--correct", "keep-most"});
  EXPECT_EQ(j["mode"], "decode");
  EXPECT_EQ(j["spec"], json::parse(R"([["fsdp","dp"],"sp","tp"])"));
  EXPECT_EQ(j["corrected"], json::parse(R"(["fsdp",null,"tp"])"));
  ASSERT_EQ(j["corrections"].size(), 2u);
  EXPECT_EQ(j["corrections"][1]["reason"], "unknown_axis");
  json eformer = RunJson("resolve", {"--axes", "batch,length,embed", "--mode", "train", "--shape", "4,8,4096",
                                     "--mesh", "dp=2,fsdp=4,tp=2"});
  EXPECT_EQ(eformer["corrected"], json::parse(R"([null,null,"tp"])"));
  EXPECT_THAT(CatchError([] { RunCli("resolve", {"--axes", "batch", "--mode", "train", "--mesh", "dp=2"}); }).message(),
              HasSubstr("--mesh needs --shape"));
}

TEST_F(ResolveCommandTest, HumanOutput) {
  std::string out = RunCli("resolve", {"--axes", "batch,query_length", "--mode", "1", "--shape", "8,1"});
  EXPECT_THAT(out, HasSubstr("mode: decode (dimension 1 of the shape is 1)"));
  EXPECT_THAT(out, HasSubstr("query_length         -> 'sp'"));
  EXPECT_THAT(out, HasSubstr("spec: P(('fsdp', 'dp'), 'sp')"));
}

TEST_F(ResolveCommandTest, BadInputIsOneClearError) {
  Error unknown = CatchError([] { RunCli("resolve", {"--axes", "batch,foo", "--mode", "train"}); });
  EXPECT_EQ(unknown.kind(), ErrorKind::kValueError);
  EXPECT_THAT(unknown.message(), HasSubstr("Unknown semantic axis name: 'foo'"));
  EXPECT_THAT(unknown.message(), HasSubstr("query_length"));
  EXPECT_THAT(CatchError([] { RunCli("resolve", {"--axes", "batch+tp", "--mode", "train"}); }).message(),
              HasSubstr("cannot contain a nested tuple"));
  EXPECT_THAT(CatchError([] { RunCli("resolve", {"--axes", "batch", "--mode", "generate"}); }).message(),
              HasSubstr("'generate'"));
  EXPECT_EQ(CatchError([] { RunCli("resolve", {"--axes", "batch", "--mode", "3", "--shape", "2,2"}); }).kind(),
            ErrorKind::kIndexError);
  EXPECT_THAT(CatchError([] { RunCli("resolve", {"--axes", "batch", "--mode", "1"}); }).message(),
              HasSubstr("shape should be provided"));
  EXPECT_THAT(CatchError([] { RunCli("resolve", {"--axes", "batch"}); }).message(), HasSubstr("--mode is required"));
  EXPECT_THAT(CatchError([] { RunCli("resolve", {"--mode", "train"}); }).message(), HasSubstr("--axes"));
  EXPECT_THAT(CatchError([] { RunCli("resolve", {"--preset", "Nope"}); }).message(), HasSubstr("HiddenStateSharding"));
  EXPECT_THAT(CatchError([] { RunCli("resolve", {"--axes", "batch", "--mode", "1", "--shape", "2,x"}); }).message(),
              HasSubstr("'x'"));
}

}  // namespace
}  // namespace spmdsim
