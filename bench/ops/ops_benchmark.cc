// Local compute of spmdsim::ops against its peers in the same binary:
//  - MatMul f32 [n,n] x [n,n] vs a plain Eigen product of the same size (the peer: the GEMM ops/ calls, minus
//    the Array plumbing); counter GFLOP/s = 2 n^3 / time.
//  - Add f32 of two equal arrays vs std::memcpy of the same output size (the memory-bound ceiling: Add moves
//    3 arrays, memcpy 2); counter bytes/s = bytes moved / time.
// Run: build/bench/bench/ops/ops_ops_benchmark --benchmark_format=json
#include <cstring>
#include <vector>

#include <Eigen/Core>
#include <benchmark/benchmark.h>

#include "ops/ops.h"

namespace spmdsim {
namespace {

void BM_MatMulF32(benchmark::State& state) {
  const int64_t n = state.range(0);
  Array a = Array::Full({n, n}, DType::kF32, 0.5), b = Array::Full({n, n}, DType::kF32, 0.25);
  for (auto _ : state) {
    Array c = MatMul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatMulF32)->ArgNames({"n"})->Arg(64)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMicrosecond);

void BM_EigenMatMulF32(benchmark::State& state) {
  const int64_t n = state.range(0);
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M a = M::Constant(n, n, 0.5f), b = M::Constant(n, n, 0.25f);
  for (auto _ : state) {
    M c(n, n);
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_EigenMatMulF32)->ArgNames({"n"})->Arg(64)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMicrosecond);

void BM_MatMulBF16(benchmark::State& state) {
  const int64_t n = state.range(0);
  Array a = Array::Full({n, n}, DType::kBF16, 0.5), b = Array::Full({n, n}, DType::kBF16, 0.25);
  for (auto _ : state) {
    Array c = MatMul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatMulBF16)->ArgNames({"n"})->Arg(256)->Arg(512)->Unit(benchmark::kMicrosecond);

void BM_AddF32(benchmark::State& state) {
  const int64_t n = state.range(0);
  Array a = Array::Full({n}, DType::kF32, 1), b = Array::Full({n}, DType::kF32, 2);
  for (auto _ : state) {
    Array c = Add(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.counters["bytes/s"] = benchmark::Counter(3.0 * 4 * n, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1024);
}
BENCHMARK(BM_AddF32)->ArgNames({"elements"})->Arg(1 << 12)->Arg(1 << 18)->Arg(1 << 22)->Unit(benchmark::kMicrosecond);

void BM_MemcpyF32(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> a(static_cast<size_t>(n), 1.0f);
  for (auto _ : state) {
    std::vector<float> c(static_cast<size_t>(n));  // a fresh output each time, as Add allocates one
    std::memcpy(c.data(), a.data(), a.size() * sizeof(float));
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["bytes/s"] = benchmark::Counter(2.0 * 4 * n, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1024);
}
BENCHMARK(BM_MemcpyF32)
    ->ArgNames({"elements"})
    ->Arg(1 << 12)
    ->Arg(1 << 18)
    ->Arg(1 << 22)
    ->Unit(benchmark::kMicrosecond);

void BM_AddBroadcastBF16(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = 1024;
  Array a = Array::Full({rows, cols}, DType::kBF16, 1), b = Array::Full({cols}, DType::kBF16, 2);
  for (auto _ : state) {
    Array c = Add(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.counters["bytes/s"] = benchmark::Counter(2.0 * 2 * rows * cols, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1024);
}
BENCHMARK(BM_AddBroadcastBF16)->ArgNames({"rows"})->Arg(256)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace spmdsim
