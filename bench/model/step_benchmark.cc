// Pod-scale step prediction and the configuration search (issue targets: a GPT-3 175B step on 2048 GPUs in
// <= 1 s, a 70B step on a 4096-chip TPU v5p pod with FSDP x TP in <= 2 s, >= 1000 plan configurations per
// minute on 2 cores). Each reports the process's peak RSS (the simulator's memory) as a counter.
// Run: build/bench/bench/model/model_step_benchmark
#include <sys/resource.h>

#include <memory>

#include <benchmark/benchmark.h>

#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "model/model.h"
#include "model/plan.h"

namespace spmdsim {
namespace {

double PeakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

ModelConfig Gpt3() {
  ModelConfig c = GptModel(12288, 96, 96, 4 * 12288);
  c.name = "gpt3-175b";
  return c;
}

ModelConfig Llama70b() {
  ModelConfig c = LlamaModel(8192, 80, 64, 8, 28672, 4096);
  c.name = "llama2-70b";
  return c;
}

void Report(benchmark::State& state, const ModelStepTimes& t, const Mesh& mesh) {
  state.counters["devices"] = static_cast<double>(mesh.size());
  state.counters["simulated_devices"] = static_cast<double>(t.simulated_devices);
  state.counters["timeline_ops"] = static_cast<double>(t.timeline_ops);
  state.counters["predicted_s"] = t.step_seconds;
  state.counters["mfu"] = t.mfu;
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}

// GPT-3 175B on 2048 H100: TP 4 x PP 8 (interleaved, 12 virtual) x DP 64, global batch 4096 (64 micro-batches
// per pipeline), SP, ZeRO-1. Arg: 0 the default (reduced, extrapolated), 1 reduced without extrapolation.
void BM_PredictGpt3On2048H100(benchmark::State& state) {
  ModelConfig c = Gpt3();
  c.global_batch = 4096;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .pipeline_axes = {"pipe"}, .schedule = PipelineSchedule::kInterleaved1F1B, .virtual_stages = 12};
  const Mesh mesh = MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse("dgx-h100:256")),
                                   {{"data", 64}, {"pipe", 8}, {"tensor", 4}});
  ModelStepTimes t;
  for (auto _ : state) t = PredictModelStep(ValidateModel(c, mesh), {.extrapolate = state.range(0) == 0});
  Report(state, t, mesh);
}
BENCHMARK(BM_PredictGpt3On2048H100)->ArgNames({"whole"})->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// A 70B model on a 4096-chip TPU v5p pod (16x16x16): FSDP 256 x TP 16 (one torus dimension), 4 sequences per FSDP rank.
void BM_PredictLlama70bOnV5p4096(benchmark::State& state) {
  ModelConfig c = Llama70b();
  c.global_batch = 1024;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 3, .tensor_axes = {"tensor"}, .sequence_parallel = true};
  c.recompute = Recompute::kSelective;
  const Mesh mesh = MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse("tpu-v5p:16x16x16")),
                                   {{"data", 256}, {"tensor", 16}});
  ModelStepTimes t;
  for (auto _ : state) t = PredictModelStep(ValidateModel(c, mesh));
  Report(state, t, mesh);
}
BENCHMARK(BM_PredictLlama70bOnV5p4096)->UseRealTime()->Unit(benchmark::kMillisecond);

// spmdsim plan's throughput: Llama-2-70B on 4 DGX H100 (32 GPUs), global batch 64, every core.
void BM_PlanLlama70bOn32H100(benchmark::State& state) {
  ModelConfig c = Llama70b();
  const auto topology = std::make_shared<const Topology>(Topology::Parse("dgx-h100:4"));
  PlanResult r;
  for (auto _ : state) r = PlanModel(c, topology, {.global_batch = 64, .threads = 0});
  state.counters["configurations"] = static_cast<double>(r.enumerated);
  state.counters["evaluated"] = static_cast<double>(r.evaluated);
  state.counters["configs_per_minute"] = static_cast<double>(r.enumerated) / r.wall_seconds * 60;
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}
BENCHMARK(BM_PlanLlama70bOn32H100)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace spmdsim

BENCHMARK_MAIN();
