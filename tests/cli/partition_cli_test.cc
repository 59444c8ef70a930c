// The partition commands (`spmdsim shard | resolve | rules | analyze`) run as users run them: through the built
// binary. Two tables: the peers' own cases (Flax, T5X, eformer, JAX), expected spec or expected error, and bad
// input of every kind, which must exit non-zero with one line naming the offending token.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run_spmdsim.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using json = nlohmann::json;
using testing_cli::CommandResult;
using testing_cli::RunSpmdsim;

int Lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

// A peer's case: the command line (without --json) and either the spec it gives or the start of its error.
struct PeerCase {
  const char* source;  // where the case comes from
  std::string args;
  const char* spec;   // expected "spec" as JSON, or nullptr when the peer raises
  const char* error;  // "<kind>: <message start>" when the peer raises
};

// Flax: tests/linen/partitioning_test.py (test_logical_to_mesh_axes, _priorities, _cases), the docstring example
// and flax/linen/spmd.py's fallback error. T5X: t5x/partitioning.py standard_logical_axis_rules, resolved with
// Flax (values from a Python copy of Flax's _logical_to_mesh_axes over T5X's rule sets, as in
// logical_axis_rules_test.cc). eformer: PartitionAxis defaults and decode overrides (escale/partition/manager.py)
// and get_corrected_named_sharding (constraints.py; values from a Python re-implementation, as in
// correction_test.cc). JAX: NamedSharding's errors (jax/_src/named_sharding.py).
const std::vector<PeerCase> kPeerCases = {
    {"flax test_logical_to_mesh_axes", "rules --rules foo=data,bar=model,baz= --names foo,bar", R"(["data","model"])",
     nullptr},
    {"flax test_logical_to_mesh_axes",
     "rules --rules foo=data,bar=model,baz= --names foo,UNCONSTRAINED,UNCONSTRAINED,_,_",
     R"(["data","UNCONSTRAINED","UNCONSTRAINED",null,null])", nullptr},
    {"flax docstring", "rules --rules batch=X,features=X,heads=Y,batch=Z --names batch,length,heads,features",
     R"(["X",null,"Y",null])", nullptr},
    {"flax priorities", "rules --rules foo=model,bar=model,baz=data --names foo,bar,baz", R"(["model",null,"data"])",
     nullptr},
    {"flax priorities", "rules --rules foo=model,bar=model,baz=data --names bar,foo,baz", R"([null,"model","data"])",
     nullptr},
    {"flax priorities", "rules --rules foo=model,bar=model,baz=data --names baz,bar,foo,unassigned",
     R"(["data",null,"model",null])", nullptr},
    {"flax cases", "rules --rules a=model+data,b=data --names a,b", R"([["model","data"],null])", nullptr},
    {"flax cases", "rules --rules a=model+replica,b=data --names a,b", R"([["model","replica"],"data"])", nullptr},
    {"flax cases", "rules --rules a=model+replica,b=data+model --names a,b", R"([["model","replica"],null])", nullptr},
    {"flax cases", "rules --rules a=model+replica,b=model --names a,b,c", R"([["model","replica"],null,null])",
     nullptr},
    {"flax cases", "rules --rules a=,a=model --names a,b", R"([null,null])", nullptr},
    {"flax cases", "rules --rules baz=data,bar=,foo=model,foo=data --names baz,bar,foo", R"(["data",null,"model"])",
     nullptr},
    {"flax cases", "rules --rules baz=data,foo=model+emb --names baz,UNCONSTRAINED,foo",
     R"(["data","UNCONSTRAINED",["model","emb"]])", nullptr},
    {"flax duplicate names", "rules --rules foo=data,bar=model,baz= --names foo,foo,baz", nullptr,
     "ValueError: Unsupported: Dimensions ('foo',) occur more than once in array names."},
    {"flax fallback RAISE_ERROR", "rules --rules foo=data --names foo,bar --fallback error", nullptr,
     "ValueError: Axis names ('foo', 'bar') did not match a rule"},
    {"t5x standard(1,1)", "rules --standard 1,1 --names batch,length,embed", R"(["data",null,null])", nullptr},
    {"t5x standard(2,1)", "rules --standard 2,1 --names batch,length,embed", R"(["data",null,"model"])", nullptr},
    {"t5x standard(1,2)", "rules --standard 1,2 --names embed,mlp", R"(["data","model"])", nullptr},
    {"t5x standard(2,2)", "rules --standard 2,2 --names vocab,embed", R"(["model","data"])", nullptr},
    {"t5x standard(2,2)", "rules --standard 2,2 --names embed,mlp,heads,vocab", R"(["data",null,null,"model"])",
     nullptr},
    {"t5x standard(1,1)", "rules --standard 1,1 --names batch,length,heads,kv", R"(["data",null,"model",null])",
     nullptr},
    {"t5x multislice", "rules --standard 1,2 --multislice --names batch,length,heads,kv",
     R"([["replica","data"],null,"model",null])", nullptr},
    {"t5x multislice", "rules --standard 1,2 --multislice --names batch,embed,mlp",
     R"([["replica","data"],null,"model"])", nullptr},
    {"t5x unsupported dims", "rules --standard 3,1 --names batch", nullptr,
     "ValueError: `activation_partitioning_dims` = 3 `parameter_partitioning_dims` = 1 is not supported."},
    {"eformer defaults", "resolve --axes batch --mode train", R"([["fsdp","dp"]])", nullptr},
    {"eformer defaults",
     "resolve --mode decode --axes batch,length,query_length,kv_length,embed,head,kv_head,mlp_intermediate,vocab,"
     "expert,expert_gate,head_dim,kv_head_dim,bias_head_seq,bias_kv_seq,dp,fsdp,tp,sp,ep,_",
     R"([["fsdp","dp"],"sp","sp","sp","tp","tp","tp","tp","tp","ep",null,null,null,null,null,"dp","fsdp","tp","sp",)"
     R"("ep",null])",
     nullptr},
    {"eformer decode overrides",
     "resolve --axes batch,length,query_length,kv_length,head,kv_head,head_dim,kv_head_dim --mode decode "
     "--set decode_batch_axis=dp --set decode_query_sequence_axis=dp --set decode_head_axis=none "
     "--set decode_attention_dim_axis=tp --set batch_axis=fsdp --set decode_kv_head_axis=tp+sp",
     R"(["dp","sp","dp","sp","tp",["tp","sp"],"tp",null])", nullptr},
    {"eformer decode overrides (train)",
     "resolve --axes batch,length,query_length,kv_length,head,kv_head,head_dim,kv_head_dim --mode train "
     "--set decode_batch_axis=dp --set decode_query_sequence_axis=dp --set batch_axis=fsdp",
     R"(["fsdp","sp","sp","sp","tp","tp",null,null])", nullptr},
    {"eformer composite", "resolve --axes fsdp+sp,tp --mode train", R"([["fsdp","sp"],"tp"])", nullptr},
    {"eformer unknown semantic axis", "resolve --axes batch,__UNKNOWN_SEMANTIC__ --mode train", nullptr,
     "ValueError: Unknown semantic axis name: '__UNKNOWN_SEMANTIC__'"},
    {"eformer composite holding batch", "resolve --axes batch+tp --mode train", nullptr,
     "ValueError: A tuple inside PartitionSpec cannot contain a nested tuple."},
    {"eformer correction", "shard --mesh dp=2,fsdp=4,tp=2 --shape 8,1024,6 --spec \"P(('dp','fsdp','tp'),'sp','tp')\" "
     "--correct eformer", R"([null,null,"tp"])", nullptr},
    {"eformer truncation", "shard --mesh dp=2,fsdp=4,tp=2 --shape 6,4 --spec \"P('fsdp','tp','dp')\" --correct eformer",
     R"([null,"tp"])", nullptr},
    {"eformer all None", "shard --mesh dp=2,fsdp=4,tp=2 --shape 3 --spec \"P('dp')\" --correct eformer", R"([])",
     nullptr},
    {"eformer size-1 axes kept", "shard --mesh dp=2,one=1 --shape 4,4 --spec \"P(('dp','one'))\" --correct eformer",
     R"([["dp","one"],null])", nullptr},
    {"eformer UNCONSTRAINED", "shard --mesh dp=2,fsdp=4,tp=2 --shape 4,4 --spec \"P(P.UNCONSTRAINED,'tp')\" "
     "--correct eformer", R"([null,"tp"])", nullptr},
    {"eformer duplicate removed", "shard --mesh dp=2,fsdp=4,tp=2 --shape 8,3 --spec \"P('dp','dp')\" --correct eformer",
     R"(["dp",null])", nullptr},
    {"eformer duplicate kept", "shard --mesh dp=2,fsdp=4,tp=2 --shape 8,8 --spec \"P('dp','dp')\" --correct eformer",
     nullptr, "DuplicateSpecError: "},
    {"jax IndivisibleError", "shard --mesh x=4 --shape 6 --spec \"P('x')\"", nullptr,
     "IndivisibleError: Sharding NamedSharding(mesh=Mesh('x': 4, axis_types=(Auto,)), spec=P('x',), "
     "memory_kind=device) implies that array axis 0 is partitioned 4 times, but the dimension size is 6"},
    {"jax unknown axis", "shard --mesh x=4 --shape 8 --spec \"P('y')\"", nullptr, "ValueError: Resource axis: y of"},
    {"jax rank", "shard --mesh x=4 --shape 8 --spec \"P('x', None)\"", nullptr, "ValueError: "},
};

TEST(PartitionCli, AgreesWithThePeersCaseByCase) {
  for (const PeerCase& c : kPeerCases) {
    SCOPED_TRACE(std::string(c.source) + ": spmdsim " + c.args);
    CommandResult run = RunSpmdsim(c.args + " --json");
    if (c.spec != nullptr) {
      ASSERT_EQ(run.exit_code, 0) << run.err;
      EXPECT_EQ(json::parse(run.out)["spec"], json::parse(c.spec));
    } else {
      EXPECT_EQ(run.exit_code, 1);
      EXPECT_EQ(run.out, "");
      EXPECT_EQ(Lines(run.err), 1) << run.err;
      const std::string command = c.args.substr(0, c.args.find(' '));
      EXPECT_THAT(run.err, StartsWith("spmdsim " + command + ": " + c.error)) << run.err;
    }
  }
}

// Bad input: the exit code, and text the single line of stderr must contain (the offending token and what is valid).
struct BadInput {
  std::string args;
  int exit_code;
  std::vector<std::string> must_mention;
};

const std::vector<BadInput> kBadInputs = {
    // shard
    {"shard --mesh x --shape 8 --spec \"P()\"", 1, {"--mesh", "'x'"}},
    {"shard --mesh x=0 --shape 8 --spec \"P()\"", 1, {"'x'", "positive"}},
    {"shard --mesh x=4,x=2 --shape 8 --spec \"P()\"", 1, {"'x'"}},
    {"shard --mesh x=4 --shape 8,b --spec \"P()\"", 1, {"--shape", "'b'"}},
    {"shard --mesh x=4 --shape 8,-1 --spec \"P()\"", 1, {"--shape", "-1"}},
    {"shard --mesh x=4 --shape 8,,2 --spec \"P()\"", 1, {"--shape", "'8,,2'"}},
    {"shard --mesh x=4 --shape 8 --spec \"P('x'\"", 1, {"SyntaxError", "column"}},
    {"shard --mesh x=4 --shape 8 --spec \"P(('x', ('y',)))\"", 1, {"ValueError", "nested tuple"}},
    {"shard --mesh x=4 --shape 8 --spec \"P()\" --dtype f33", 1, {"--dtype", "'f33'", "bf16"}},
    {"shard --mesh x=4 --shape 8 --spec \"P()\" --correct best", 1, {"'best'", "keep-most"}},
    {"shard --mesh x=4 --shape 8 --spec \"P()\" --topology tpu-v9:2x2", 1, {"tpu-v9"}},
    {"shard --mesh x=4 --shape 8 --spec \"P()\" --topology cpu:8", 1, {"8"}},
    {"shard --mesh x=4 --shape 8 --spec \"P()\" --slices 2", 1, {"--slices", "--topology"}},
    {"shard --mesh x=4 --shape 8 --spec \"P()\" --width 5", 2, {"--width", "5"}},
    {"shard --mesh x=4 --shape 8", 2, {"--spec", "required"}},
    {"shard --mesh x=4 --shape 8 --spec \"P()\" --bogus", 2, {"--bogus"}},
    {"shard --mesh x=4 --shape 8 --spec \"P()\" --max-devices -1", 2, {"--max-devices", "-1"}},
    {"shard --mesh x=4 --shape 4294967296,4294967296,4294967296 --spec \"P()\"", 1, {"--shape", "2^63"}},
    {"shard --mesh x=2000000 --shape 8 --spec \"P()\"", 1, {"'x=2000000'", "2^20"}},
    {"shard --mesh x=99999999999999999999 --shape 8 --spec \"P()\"", 1, {"'99999999999999999999'"}},
    // resolve
    {"resolve --axes batch,foo --mode train", 1, {"'foo'", "query_length"}},
    {"resolve --axes batch --mode generate", 1, {"'generate'", "train"}},
    {"resolve --axes batch", 1, {"--mode", "train"}},
    {"resolve --mode train", 1, {"--axes", "--preset"}},
    {"resolve --axes batch --mode train --set nosuch=dp", 1, {"nosuch"}},
    {"resolve --axes batch --mode train --set head_axis", 1, {"--set", "'head_axis'", "field=value"}},
    {"resolve --axes batch --mode 3 --shape 2,2", 1, {"IndexError"}},
    {"resolve --axes batch --mode train --mesh dp=2", 1, {"--mesh", "--shape"}},
    {"resolve --axes batch --mode train --mesh dp=2 --shape 8 --correct best", 1, {"'best'"}},
    {"resolve --preset Nope", 1, {"Nope", "HiddenStateSharding"}},
    {"resolve --axes batch --mode train --register =x", 1, {"--register", "'=x'"}},
    // rules
    {"rules", 1, {"--rules", "--standard"}},
    {"rules --rules batch=data,embed --names batch", 1, {"'embed'"}},
    {"rules --standard 2", 1, {"--standard", "'2'"}},
    {"rules --standard 1,x", 1, {"'x'"}},
    {"rules --rules a=x --names a --fallback maybe", 1, {"'maybe'", "unsharded, error, none"}},
    {"rules --rules-file /nonexistent/rules.txt --names a", 1, {"/nonexistent/rules.txt"}},
    {"rules --rules a=x --rules-file r.txt", 1, {"--rules", "--rules-file"}},
    {"rules --rules a=x --names a,,b", 1, {"'a,,b'"}},
    // analyze
    {"analyze --mesh x=4", 1, {"--array", "--file"}},
    {"analyze --mesh x=4 --array w:8:f32", 1, {"'w:8:f32'", "name:shape:dtype:spec"}},
    {"analyze --mesh x=4 --array \"w:6:f32:P('x')\"", 1, {"IndivisibleError", "array 'w'"}},
    {"analyze --mesh x=4 --array \"w:8:f32:P('y')\"", 1, {"array 'w'", "y"}},
    {"analyze --mesh x=4 --array \"w:8:f33:P()\"", 1, {"'w'", "'f33'"}},
    {"analyze --mesh x=4 --array \"w:8:f32:P()\" --array \"w:4:f32:P()\"", 1, {"'w'", "twice"}},
    {"analyze --mesh x=4 --array \"w:8:f32:P()\" --correct best", 1, {"'best'"}},
    {"analyze --mesh x=4 --file /nonexistent/a.yaml", 1, {"/nonexistent/a.yaml"}},
    {"analyze --mesh x=4 --array \"w:8:f32:P()\" --file a.yaml", 1, {"not both"}},
    {"analyze --array \"w:8:f32:P()\"", 2, {"--mesh"}},
    {"analyze --mesh x=4 --array \"w:4294967296,4294967296,4294967296:f64:P()\"", 1, {"'w'", "2^63"}},
    {"resolve --axes batch --mode train --mesh dp=2000000 --shape 8", 1, {"'dp=2000000'", "2^20"}},
};

TEST(PartitionCli, BadInputExitsNonZeroWithOneLineNamingTheToken) {
  for (const BadInput& c : kBadInputs) {
    SCOPED_TRACE("spmdsim " + c.args);
    CommandResult run = RunSpmdsim(c.args);
    EXPECT_EQ(run.exit_code, c.exit_code) << run.err;
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(Lines(run.err), 1) << run.err;
    const std::string command = c.args.substr(0, c.args.find(' '));
    EXPECT_THAT(run.err, StartsWith("spmdsim " + command + ": ")) << run.err;
    for (const std::string& token : c.must_mention) EXPECT_THAT(run.err, HasSubstr(token)) << run.err;
  }
}

TEST(PartitionCli, UnknownCommandNamesItAndTheValidOnes) {
  CommandResult run = RunSpmdsim("shrad --mesh x=4");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(Lines(run.err), 1) << run.err;
  EXPECT_THAT(run.err, StartsWith("spmdsim: unknown command 'shrad'; commands are "));
  for (const char* name : {"shard", "resolve", "rules", "analyze"}) EXPECT_THAT(run.err, HasSubstr(name));
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(PartitionCli, AnalyzeFileErrorsNameTheArrayAndTheField) {
  struct FileCase {
    std::string yaml;
    std::vector<std::string> must_mention;
  };
  // The arrays file is read with the scenario's readers: every error names file:line:col and the key.
  const std::vector<FileCase> cases = {
      {"arrays:\n  - name: w\n    shape: [8\n", {":4:1: not valid YAML"}},
      {"arrays: 3\n", {":1:9: arrays: expected a list of arrays"}},
      {"- name: w\n  shape: [8]\n  sepc: P()\n",
       {":3:3: arrays[0].sepc", "did you mean 'spec'", "name, shape, dtype, spec"}},
      {"- shape: [8]\n", {":1:3: arrays[0].name: missing required key"}},
      {"- name: w\n", {":1:3: arrays[0].shape: missing required key"}},
      {"- name: w\n  shape: [8, x]\n", {":2:14: arrays[0].shape[1]", "'x'"}},
      {"- name: w\n  shape: [8, -1]\n", {":2:10: arrays[0].shape", "dimension 1 is -1"}},
      {"- name: w\n  shape: [8]\n  dtype: float\n", {":3:10: arrays[0].dtype", "'float'"}},
      {"- name: w\n  shape: [8]\n  spec: \"P('x'\"\n", {":3:9: arrays[0].spec", "SyntaxError"}},
      {"- name: w\n  shape: [8]\n  spec: [[x, [y]]]\n", {":3:14: arrays[0].spec[0][1]", "found a list"}},
      {"- name: w\n  shape: [8]\n  spec: {a: b}\n", {":3:9: arrays[0].spec", "expected a PartitionSpec"}},
      {"- name: w\n  shape: [6]\n  spec: [x]\n", {"IndivisibleError", "array 'w'"}},
      {"- {name: w, shape: [8]}\n- {name: w, shape: [4]}\n", {":2:3: arrays[1].name", "given twice"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = WriteFile("analyze_bad_" + std::to_string(i) + ".yaml", cases[i].yaml);
    SCOPED_TRACE(cases[i].yaml);
    CommandResult run = RunSpmdsim("analyze --mesh x=4 --file " + path);
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_EQ(Lines(run.err), 1) << run.err;
    EXPECT_THAT(run.err, StartsWith("spmdsim analyze: ")) << run.err;
    for (const std::string& token : cases[i].must_mention) EXPECT_THAT(run.err, HasSubstr(token)) << run.err;
    std::remove(path.c_str());
  }
}

TEST(PartitionCli, AnalyzeReportsEveryFigure) {
  // The example of partition/memory_analysis.h.
  CommandResult run = RunSpmdsim(
      "analyze --mesh dp=2,tp=4 --array \"w:1024,4096:f32:P(None,'tp')\" --array \"b:4096:f32:P()\" --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json j = json::parse(run.out);
  EXPECT_EQ(j["total_parameters"], 4198400);
  EXPECT_EQ(j["sharded_parameters"], 4194304);
  EXPECT_EQ(j["total_bytes"], 16793600);
  EXPECT_EQ(j["bytes_per_device"], json(std::vector<int64_t>(8, 4210688)));
  EXPECT_EQ(j["devices"], json::parse("[0,1,2,3,4,5,6,7]"));
  EXPECT_EQ(j["largest"], json::parse(R"({"device":0,"bytes":4210688})"));
  EXPECT_EQ(j["smallest"], json::parse(R"({"device":0,"bytes":4210688})"));
  EXPECT_DOUBLE_EQ(j["balance_score"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["memory_efficiency"].get<double>(), 16793600.0 / 8 / 4210688);
  EXPECT_DOUBLE_EQ(j["replication_factor"].get<double>(), 8.0 * 4210688 / 16793600);
  ASSERT_EQ(j["arrays"].size(), 2u);
  EXPECT_EQ(j["arrays"][0]["spec"], json::parse("[null,\"tp\"]"));
  EXPECT_EQ(j["arrays"][0]["replication"], 2);
  EXPECT_EQ(j["arrays"][0]["blocks"], 4);
  EXPECT_EQ(j["arrays"][1]["replication"], 8);
  EXPECT_EQ(j["arrays"][1]["sharded"], false);

  CommandResult human =
      RunSpmdsim("analyze --mesh dp=2,tp=4 --array \"w:1024,4096:f32:P(None,'tp')\" --array \"b:4096:f32:P()\"");
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_THAT(human.out, HasSubstr("parameters          4198400 total, 4194304 in sharded arrays"));
  EXPECT_THAT(human.out, HasSubstr("devices 0-7: 4210688 (4.02MiB)"));
}

TEST(PartitionCli, AnalyzeReadsAFileAndCorrectsEverySpec) {
  const std::string path = WriteFile("analyze_ok.yaml",
                                     "arrays:\n"
                                     "  - {name: embed, shape: [32000, 4096], dtype: bf16, spec: \"P('tp', 'fsdp')\"}\n"
                                     "  - {name: norm, shape: [4096]}\n"
                                     "  - {name: head, shape: [4096, 6], spec: [[fsdp, tp], tp]}\n");
  CommandResult run = RunSpmdsim("analyze --mesh fsdp=4,tp=2 --file " + path + " --correct keep-most --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json j = json::parse(run.out);
  ASSERT_EQ(j["arrays"].size(), 3u);
  EXPECT_EQ(j["arrays"][0]["bytes_per_device"], 32000 / 2 * 4096 / 4 * 2);
  EXPECT_EQ(j["arrays"][1]["dtype"], "f32");
  EXPECT_EQ(j["arrays"][1]["replication"], 8);
  // head: both entries fit, so keep-most keeps them, minus 'tp' at dim 1 (already used by dim 0).
  EXPECT_EQ(j["arrays"][2]["requested_spec"], json::parse(R"([["fsdp","tp"],"tp"])"));
  EXPECT_EQ(j["arrays"][2]["spec"], json::parse(R"([["fsdp","tp"],null])"));
  EXPECT_FALSE(j["arrays"][2]["corrections"].empty());
  EXPECT_EQ(j["correct"], "keep-most");
  std::remove(path.c_str());
}

TEST(PartitionCli, ShardJsonHasTheIssuesFieldsWithTheIssuesTypes) {
  CommandResult run = RunSpmdsim(
      "shard --mesh dp=2,fsdp=4,tp=2 --shape 8,1024,4096 --spec \"P(('dp','fsdp'),'sp','tp')\" --correct eformer "
      "--json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json j = json::parse(run.out);
  for (const char* key : {"spec", "corrections", "shard_shape", "bytes_per_device", "shards"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["spec"], json::parse(R"([["dp","fsdp"],null,"tp"])"));
  ASSERT_EQ(j["corrections"].size(), 1u);
  for (const char* key : {"dim", "from", "to", "reason"}) EXPECT_TRUE(j["corrections"][0].contains(key)) << key;
  EXPECT_EQ(j["corrections"][0]["dim"], 1);
  EXPECT_EQ(j["corrections"][0]["from"], "sp");
  EXPECT_EQ(j["corrections"][0]["to"], nullptr);
  EXPECT_EQ(j["corrections"][0]["reason"], "unknown_axis");
  EXPECT_TRUE(j["bytes_per_device"].is_number_integer());
  ASSERT_EQ(j["shards"].size(), 16u);
  for (const json& s : j["shards"]) {
    EXPECT_TRUE(s["device"].is_number_integer());
    EXPECT_TRUE(s["replica_id"].is_number_integer());
    ASSERT_EQ(s["index"].size(), 3u);
    for (const json& r : s["index"]) EXPECT_EQ(r.size(), 2u);
  }
}

TEST(PartitionCli, ShardDrawsTheBlocksInTheHumanOutput) {
  CommandResult run = RunSpmdsim("shard --mesh x=2,y=2 --shape 4,8 --spec \"P('x','y')\"");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("rows: dim 0 (2 blocks), columns: dim 1 (2 blocks)\n"));
  EXPECT_THAT(run.out, HasSubstr("0:2 | 0   | 1   |\n"));
  EXPECT_THAT(run.out, HasSubstr("2:4 | 2   | 3   |\n"));
  // 256 devices on one dimension: folded to the width, and the device list cut.
  CommandResult wide = RunSpmdsim("shard --mesh x=256 --shape 1024 --spec \"P('x')\" --width 60 --max-devices 4");
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_THAT(wide.out, HasSubstr("more columns of blocks (of 256) do not fit in 60 characters"));
  EXPECT_THAT(wide.out, HasSubstr("... 252 more device(s) (of 256"));
}

}  // namespace
}  // namespace spmdsim
