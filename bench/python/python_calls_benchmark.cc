// The four calls whose cost from Python bench/python/binding_overhead.py measures with timeit, made here from C++
// with the same inputs, so that the difference is the binding's overhead (argument conversion, building the
// Python result, and for run() the JSON text and its parsing):
//   devices_indices_map   NamedSharding::Layout (Python builds {device: (slice, ...)} from it)
//   corrected_sharding    GetCorrectedNamedSharding (eformer's get_corrected_named_sharding)
//   logical_to_mesh_axes  LogicalToMeshAxes with T5X's standard rules (2, 2)
//   run_abstract          LoadScenario + RunScenario(abstract, 1 worker thread) + JsonReport of
//                         scenarios/cpu8-quick.yaml
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "mesh/mesh_utils.h"
#include "partition/correction.h"
#include "partition/logical_axis_rules.h"
#include "partition/named_sharding.h"
#include "scenario/report.h"
#include "scenario/run.h"
#include "scenario/scenario.h"

#ifndef SPMDSIM_SOURCE_DIR
#define SPMDSIM_SOURCE_DIR "."
#endif

namespace spmdsim {
namespace {

// devices: 8 (cpu:8 as data 2 x model 4) or 256 (tpu-v5e:16x16 as data 16 x model 16); shape (64, 1024).
void BM_DevicesIndicesMap(benchmark::State& state) {
  const bool big = state.range(0) == 256;
  auto topology = std::make_shared<const Topology>(Topology::Parse(big ? "tpu-v5e:16x16" : "cpu:8"));
  Mesh mesh = MakeDeviceMesh(topology, {{"data", big ? 16 : 2}, {"model", big ? 16 : 4}});
  NamedSharding sharding(mesh, P("data", "model"));
  std::vector<int64_t> shape = {64, 1024};
  for (auto _ : state) benchmark::DoNotOptimize(sharding.Layout(shape));
}
BENCHMARK(BM_DevicesIndicesMap)->Arg(8)->Arg(256)->ArgNames({"devices"});

void BM_GetCorrectedNamedSharding(benchmark::State& state) {
  Mesh mesh = Mesh::Iota({2, 4, 2}, {"dp", "fsdp", "tp"});
  PartitionSpec spec = P({"dp", "fsdp", "tp"}, "sp", "tp");
  std::vector<int64_t> shape = {8, 1024, 6};
  for (auto _ : state) benchmark::DoNotOptimize(GetCorrectedNamedSharding(shape, spec, mesh));
}
BENCHMARK(BM_GetCorrectedNamedSharding);

void BM_LogicalToMeshAxes(benchmark::State& state) {
  LogicalAxisRules rules = StandardLogicalAxisRules(2, 2);
  LogicalAxes names = {"batch", "length", "embed"};
  for (auto _ : state) benchmark::DoNotOptimize(LogicalToMeshAxes(names, rules));
}
BENCHMARK(BM_LogicalToMeshAxes);

void BM_RunAbstract(benchmark::State& state) {
  const std::string path = std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/cpu8-quick.yaml";
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    Scenario s = LoadScenario(path);
    std::vector<WorkloadResult> results = RunScenario(s, {.abstract = true, .num_threads = 1});
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    benchmark::DoNotOptimize(JsonReport(s, results, true, wall, ExitCode::kOk).dump());
  }
}
// The simulation runs on a worker thread: cpu_time is the whole process's (every thread), as Python's
// time.process_time, so that a busy machine's scheduling delays (wall time) do not count as cost.
BENCHMARK(BM_RunAbstract)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace
}  // namespace spmdsim
