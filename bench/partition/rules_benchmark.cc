// Cost of the per-tensor partitioning helpers that models call on every step: eformer PartitionAxis resolution,
// PartitionManager::Shard (resolve + eformer correction), Flax logical_to_mesh_axes with T5X's rules, and regex
// rule matching (a Boost.Regex search over a parameter path; before issue #10, std::regex).
#include <benchmark/benchmark.h>

#include "mesh/mesh.h"
#include "partition/logical_axis_rules.h"
#include "partition/match_rules.h"
#include "partition/partition_axis.h"
#include "partition/partition_manager.h"

namespace spmdsim {
namespace {

void BM_PartitionAxisResolveSpec(benchmark::State& state) {
  PartitionAxis paxis({{"decode_query_sequence_axis", "dp"}});
  SemanticAxes axes = ParseSemanticAxes("batch,query_length,head,head_dim");
  RuntimeMode mode = state.range(0) ? RuntimeMode::kDecode : RuntimeMode::kTrain;
  for (auto _ : state) benchmark::DoNotOptimize(paxis.ResolveSpec(axes, mode));
}
BENCHMARK(BM_PartitionAxisResolveSpec)->Arg(0)->Arg(1)->ArgNames({"decode"});

void BM_PartitionManagerShard(benchmark::State& state) {
  Mesh mesh = Mesh::Iota({2, 4, 2}, {"dp", "fsdp", "tp"});
  PartitionManager manager;
  std::vector<int64_t> shape = {8, 2048, 32, 128};
  SemanticAxes axes = ParseSemanticAxes("batch,query_length,head,head_dim");
  CorrectionOptions options;
  options.log = false;
  for (auto _ : state) benchmark::DoNotOptimize(manager.Shard(mesh, shape, axes, 1, options));
}
BENCHMARK(BM_PartitionManagerShard);

void BM_LogicalToMeshAxesStandardRules(benchmark::State& state) {
  LogicalAxisRules rules = StandardLogicalAxisRules(2, 2);
  LogicalAxes names = ParseLogicalAxes("batch,length,embed,mlp");
  for (auto _ : state) benchmark::DoNotOptimize(LogicalToMeshAxes(names, rules));
}
BENCHMARK(BM_LogicalToMeshAxesStandardRules);

void BM_MatchPartitionRule(benchmark::State& state) {
  PartitionRules rules({{"embed_tokens/embedding", PartitionSpec::Parse("P('tp', 'fsdp')")},
                        {"(q|k|v)_proj/kernel", PartitionSpec::Parse("P('fsdp', 'tp')")},
                        {"o_proj/kernel", PartitionSpec::Parse("P('tp', 'fsdp')")},
                        {"mlp/.*/kernel", PartitionSpec::Parse("P('fsdp', 'tp')")},
                        {"norm/scale", PartitionSpec::Parse("P(None)")},
                        {"lm_head/kernel", PartitionSpec::Parse("P('fsdp', 'tp')")},
                        {".*", PartitionSpec()}});
  std::vector<int64_t> shape = {4096, 11008};
  const std::string name = "model/layers/17/mlp/down_proj/kernel";  // the 4th rule matches
  for (auto _ : state) benchmark::DoNotOptimize(rules.Match(name, shape));
}
BENCHMARK(BM_MatchPartitionRule);

}  // namespace
}  // namespace spmdsim
