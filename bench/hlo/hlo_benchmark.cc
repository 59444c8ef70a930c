// What importing a module XLA compiled costs: parsing and verifying its HLO text, predicting it on a full TPU v4
// pod (4096 devices, abstract; the "N = 4096 in seconds"), its memory estimate, and a run with data of a
// small module on 8 virtual devices.
// Run: build/bench/bench/hlo/hlo_hlo_benchmark --benchmark_format=json
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <benchmark/benchmark.h>

#include "hlo/memory.h"
#include "hlo/parser.h"
#include "hlo/predict.h"
#include "hlo/support.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "workloads/hlo_workload.h"

namespace spmdsim {
namespace {

const std::string kTestdata = std::string(SPMDSIM_SOURCE_DIR) + "/tests/hlo/testdata/";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The scan-over-layers transformer's training step XLA compiled for 4096 devices (data 256 x model 16).
void BM_ParsePodModule(benchmark::State& state) {
  const std::string text = Slurp(kTestdata + "pod4096_transformer_train_step.txt");
  for (auto _ : state) benchmark::DoNotOptimize(hlo::ParseModule(text, "pod4096.txt"));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_ParsePodModule)->Unit(benchmark::kMillisecond);

void BM_PredictPodModuleOnTpuV4Pod(benchmark::State& state) {
  const hlo::SupportedModule module = hlo::SupportedModule::Check(
      hlo::LoadModule(kTestdata + "pod4096_transformer_train_step.txt"), hlo::SupportedModule::Use::kAbstract);
  auto topo = std::make_shared<const Topology>(Topology::Parse("tpu-v4:16x16x16"));
  const Mesh mesh = MakeDeviceMesh(topo, {{"data", 256}, {"model", 16}});
  hlo::PredictOptions options;
  options.overlap_collectives = state.range(0) != 0;
  double step = 0;
  for (auto _ : state) step = hlo::Predict(module, mesh, options).step_seconds;
  state.counters["devices"] = 4096;
  state.counters["predicted_ms"] = step * 1e3;
}
BENCHMARK(BM_PredictPodModuleOnTpuV4Pod)->ArgNames({"overlap"})->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_MemoryEstimatePodModule(benchmark::State& state) {
  const auto module = hlo::LoadModule(kTestdata + "pod4096_transformer_train_step.txt");
  for (auto _ : state) benchmark::DoNotOptimize(hlo::EstimateMemory(*module).peak_bytes());
}
BENCHMARK(BM_MemoryEstimatePodModule)->Unit(benchmark::kMillisecond);

// jit with NamedShardings (data 2 x model 4), run with random inputs on 8 virtual CPU devices and predicted.
void BM_RunWithDataNamedShardingMlp(benchmark::State& state) {
  HloConfig config;
  config.module = hlo::LoadModule(kTestdata + "named_sharding_mlp.txt");
  WorkloadContext ctx;
  ctx.mesh = MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse("cpu:8")), {{"data", 2}, {"model", 4}});
  ctx.runtime.num_threads = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(RunHlo(ctx, config));
}
BENCHMARK(BM_RunWithDataNamedShardingMlp)->ArgNames({"threads"})->Arg(1)->Arg(8)->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace spmdsim
