// How long CreateDeviceMesh / CreateHybridDeviceMesh take on large TPU topologies.
//   build/bench/bench/mesh/mesh_mesh_benchmark --benchmark_format=json
// Single-threaded (no UseRealTime needed); one iteration = one complete mesh.
#include <benchmark/benchmark.h>

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mesh/mesh_utils.h"
#include "mesh/topology.h"

namespace spmdsim {
namespace {

// Mesh shapes on tpu-v4:16x16x16 (4096 devices); index = the benchmark argument.
const std::vector<std::vector<int64_t>>& Shapes() {
  static const std::vector<std::vector<int64_t>> shapes = {{16, 16, 16}, {256, 16}, {4096}, {64, 64}, {8, 8, 64}};
  return shapes;
}

void BM_CreateDeviceMeshV4_4096(benchmark::State& state) {
  static const Topology topology = Topology::Parse("tpu-v4:16x16x16");
  const auto& shape = Shapes()[state.range(0)];
  state.SetLabel(fmt::format("mesh {}", fmt::join(shape, "x")));
  for (auto _ : state) {
    DeviceArray mesh = CreateDeviceMesh(shape, topology);
    benchmark::DoNotOptimize(mesh.ids().data());
  }
  state.counters["devices"] = 4096;
}
BENCHMARK(BM_CreateDeviceMeshV4_4096)->DenseRange(0, 2)->ArgNames({"shape"})->Unit(benchmark::kMicrosecond);

// (64, 64) and (8, 8, 64) need split physical axes on 16x16x16.
void BM_CreateDeviceMeshV4_4096_SplitAxes(benchmark::State& state) {
  static const Topology topology = Topology::Parse("tpu-v4:16x16x16");
  const auto& shape = Shapes()[state.range(0)];
  state.SetLabel(fmt::format("mesh {}", fmt::join(shape, "x")));
  for (auto _ : state) {
    DeviceArray mesh = CreateDeviceMesh(shape, topology, std::nullopt, {.allow_split_physical_axes = true});
    benchmark::DoNotOptimize(mesh.ids().data());
  }
}
BENCHMARK(BM_CreateDeviceMeshV4_4096_SplitAxes)->DenseRange(3, 4)->ArgNames({"shape"})->Unit(benchmark::kMicrosecond);

// 4 slices of tpu-v4:8x16x16 (2048 devices each, 8192 in all): ici (1, 2048), dcn (4, 1).
void BM_CreateHybridDeviceMeshV4_4x2048(benchmark::State& state) {
  static const Topology topology = Topology::Parse("tpu-v4:8x16x16", 4);
  for (auto _ : state) {
    DeviceArray mesh = CreateHybridDeviceMesh({1, 2048}, {4, 1}, topology);
    benchmark::DoNotOptimize(mesh.ids().data());
  }
  state.counters["devices"] = 8192;
}
BENCHMARK(BM_CreateHybridDeviceMeshV4_4x2048)->Unit(benchmark::kMicrosecond);

// 2 slices of tpu-v4:16x16x8 (2048 each, 4096 in all): ici (16, 128), dcn (2, 1).
void BM_CreateHybridDeviceMeshV4_2x2048(benchmark::State& state) {
  static const Topology topology = Topology::Parse("tpu-v4:16x16x8", 2);
  for (auto _ : state) {
    DeviceArray mesh = CreateHybridDeviceMesh({16, 128}, {2, 1}, topology);
    benchmark::DoNotOptimize(mesh.ids().data());
  }
  state.counters["devices"] = 4096;
}
BENCHMARK(BM_CreateHybridDeviceMeshV4_2x2048)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace spmdsim
