// The runner's own overhead per workload: how long the engines take to run and cost a workload, real and
// abstract, up to a full TPU v4 pod (4096 devices) transformer block (the "under 10 s" target).
// Run: build/bench/bench/workloads/workloads_workloads_benchmark --benchmark_format=json
#include <memory>

#include <benchmark/benchmark.h>

#include "common/strings.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "workloads/workloads.h"

namespace spmdsim {
namespace {

WorkloadContext Context(const std::string& topology, std::vector<std::pair<std::string, int64_t>> axes,
                        bool abstract) {
  auto topo = std::make_shared<const Topology>(Topology::Parse(topology));
  WorkloadContext ctx;
  ctx.mesh = MakeDeviceMesh(topo, axes);
  ctx.abstract = abstract;
  return ctx;
}

// A full v4 pod: data 256 x model 16 (model along one torus dimension), a GPT-3-sized layer (d_model 12288,
// 96 heads, d_ff 4 x d_model), global batch 512 x 2048 tokens, bf16, forward and backward, abstract.
void BM_AbstractTransformerBlockV4Pod(benchmark::State& state) {
  WorkloadContext ctx = Context("tpu-v4:16x16x16", {{"data", 256}, {"model", 16}}, true);
  TransformerBlockConfig t{.batch = 512, .seq = 2048, .d_model = 12288, .d_ff = 49152, .heads = 96};
  t.dtype = DType::kBF16;
  t.sharding = {.batch_axes = {"data"}, .tensor_axes = {"model"}, .sequence_parallel = state.range(0) != 0};
  double predicted = 0;
  size_t steps = 0;
  for (auto _ : state) {
    WorkloadResult r = RunTransformerBlock(ctx, t);
    predicted = r.totals.predicted_seconds;
    steps = r.steps.size();
  }
  state.counters["devices"] = 4096;
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["predicted_ms"] = predicted * 1e3;
}
BENCHMARK(BM_AbstractTransformerBlockV4Pod)->ArgNames({"sp"})->Arg(0)->Arg(1)->UseRealTime()
    ->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_MlpCpu8(benchmark::State& state) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 2}, {"model", 4}}, state.range(0) != 0);
  MlpConfig mlp{.batch = 8, .seq = 64, .d_model = 128, .d_ff = 512};
  mlp.sharding = {.batch_axes = {"data"}, .tensor_axes = {"model"}};
  for (auto _ : state) benchmark::DoNotOptimize(RunMlp(ctx, mlp));
}
BENCHMARK(BM_MlpCpu8)->ArgNames({"abstract"})->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CollectivesSweepDgxH100x4(benchmark::State& state) {
  WorkloadContext ctx = Context("dgx-h100:4", {{"data", 4}, {"tensor", 8}}, state.range(0) != 0);
  CollectivesConfig c;
  c.ops = {"psum", "all_gather", "psum_scatter", "all_to_all"};
  c.axes = {{"tensor"}, {"data", "tensor"}};
  c.sizes = SweepSizes(kKiB, kMiB, 8);
  c.iterations = 2;
  for (auto _ : state) benchmark::DoNotOptimize(RunCollectives(ctx, c));
}
BENCHMARK(BM_CollectivesSweepDgxH100x4)->ArgNames({"abstract"})->Arg(0)->Arg(1)->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace spmdsim
