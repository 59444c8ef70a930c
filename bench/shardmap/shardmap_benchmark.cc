// ShardMap dispatch overhead and a psum inside shard_map.
//
// BM_ShardMapEmpty: an empty function, no inputs or outputs: what ShardMap adds to Runtime::Run (compare with
// bench/sim BM_RuntimeEmptyRun at the same device counts). BM_ShardMapIdentity: one input split by P('x') and
// returned, so splitting, holding and reassembly are included. BM_ShardMapPsum: P('x') input of `bytes` per
// device, psum over 'x', out P(); counter `bytes_per_second` counts the bytes each device contributes.
// Run: build/bench/bench/shardmap/shardmap_shardmap_benchmark --benchmark_format=json
#include <benchmark/benchmark.h>

#include <vector>

#include "common/strings.h"

#include "shardmap/shard_map.h"

namespace spmdsim {
namespace {

void BM_ShardMapEmpty(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto f = ShardMap([](DeviceContext&, std::span<const Array>) { return std::vector<Array>{}; },
                    Mesh::Iota({n}, {"x"}), {}, {});
  f();  // creates the runtime
  for (auto _ : state) f();
  state.counters["calls_per_second"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                          benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ShardMapEmpty)->ArgNames({"devices"})->Arg(8)->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ShardMapIdentity(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto f = ShardMap([](DeviceContext&, const Array& b) { return b; }, Mesh::Iota({n}, {"x"}), {P("x")}, {P("x")});
  Array x = Array::Iota({n, 16}, DType::kF32);
  f(x);
  for (auto _ : state) benchmark::DoNotOptimize(f(x));
}
BENCHMARK(BM_ShardMapIdentity)->ArgNames({"devices"})->Arg(8)->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ShardMapPsum(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int64_t bytes = state.range(1);
  auto f = ShardMap([](DeviceContext& d, const Array& b) { return d.Psum(b, "x"); }, Mesh::Iota({n}, {"x"}),
                    {P("x")}, {P()});
  Array x = Array::Zeros({n * (bytes / 4)}, DType::kF32);
  f(x);
  for (auto _ : state) benchmark::DoNotOptimize(f(x));
  state.SetBytesProcessed(state.iterations() * n * bytes);
}
BENCHMARK(BM_ShardMapPsum)
    ->ArgNames({"devices", "bytes"})
    ->Args({8, kKiB})
    ->Args({8, 64 * kKiB})
    ->Args({8, kMiB})
    ->Args({64, 64 * kKiB})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace spmdsim
