// Runtime benchmarks: one barrier episode (every device arrives and leaves) and psum latency/bandwidth, next
// to peers in the same binary: one OS thread per device with std::barrier, and Boost.Fiber fibers on one
// thread with boost::fibers::barrier (when built with SPMDSIM_HAVE_BOOST_FIBER). Open MPI runs in its own
// processes: scripts/bench-peers.sh. Figures and their discussion: docs/runtime.md.
//
// Run: build/bench/bench/sim/sim_runtime_benchmark --benchmark_counters_tabular=true
// Counters: `episode` = seconds per barrier episode (or per collective), `algbw`/`busbw` = nccl-tests'
// algorithm and bus bandwidth (bytes per device / time; busbw = algbw * 2(n-1)/n for an all-reduce).
#include <barrier>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#if defined(SPMDSIM_HAVE_BOOST_FIBER)
#include <boost/fiber/all.hpp>
#endif

#include "common/strings.h"
#include "mesh/mesh.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

int64_t RoundsFor(int64_t devices) { return devices <= 64 ? 20000 : (devices <= 512 ? 2000 : 300); }

void SetEpisodeCounter(benchmark::State& state, int64_t rounds) {
  state.counters["episode"] = benchmark::Counter(static_cast<double>(state.iterations() * rounds),
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Seconds of `rounds` calls of `step` on every device, timed by device 0 inside one Run from the release of a
// first barrier to the release of a last one: episodes only, not the Run's start-up and finish (an empty Run
// is BM_RuntimeEmptyRun). Device 0 is the first device its worker resumes after a barrier.
template <typename Step>
double TimedRun(Runtime& runtime, int64_t rounds, Step step) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point start, stop;
  runtime.Run([&](DeviceContext& d) {
    d.Barrier();
    if (d.position() == 0) start = Clock::now();
    for (int64_t r = 0; r < rounds; ++r) step(d);
    d.Barrier();
    if (d.position() == 0) stop = Clock::now();
  });
  return std::chrono::duration<double>(stop - start).count();
}

// Our runtime; workers 0 = the default (one per core). Time per episode = the manual time / rounds
// (`episode` counter); rounds + 1 barriers are timed, so one episode of timing overhead is spread over rounds.
void BM_RuntimeBarrier(benchmark::State& state) {
  const int64_t n = state.range(0);
  RuntimeOptions options;
  options.num_threads = static_cast<int>(state.range(1));
  Runtime runtime(Mesh::Iota({n}, {"x"}), options);
  runtime.Run([](DeviceContext& d) { d.Barrier(); });  // warm-up: maps the pooled fiber stacks
  const int64_t rounds = RoundsFor(n);
  for (auto _ : state) state.SetIterationTime(TimedRun(runtime, rounds, [](DeviceContext& d) { d.Barrier(); }));
  SetEpisodeCounter(state, rounds);
  state.counters["workers"] = runtime.num_workers();
}
BENCHMARK(BM_RuntimeBarrier)
    ->ArgNames({"devices", "workers"})
    ->ArgsProduct({{2, 8, 64, 512, 4096}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// An empty Run: the cost of dispatching to the workers and starting/finishing every device.
void BM_RuntimeEmptyRun(benchmark::State& state) {
  const int64_t n = state.range(0);
  Runtime runtime(Mesh::Iota({n}, {"x"}));
  runtime.Run([](DeviceContext&) {});  // warm-up: maps the pooled fiber stacks
  for (auto _ : state) runtime.Run([](DeviceContext&) {});
}
BENCHMARK(BM_RuntimeEmptyRun)->ArgNames({"devices"})->Arg(8)->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Peer: one OS thread per device, std::barrier.
void BM_StdBarrierThreads(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int64_t rounds = n <= 8 ? 20000 : 2000;
  for (auto _ : state) {
    std::barrier barrier(n);
    std::vector<std::thread> threads;
    for (int64_t d = 0; d < n; ++d)
      threads.emplace_back([&] {
        for (int64_t r = 0; r < rounds; ++r) barrier.arrive_and_wait();
      });
    for (auto& t : threads) t.join();
  }
  SetEpisodeCounter(state, rounds);
}
BENCHMARK(BM_StdBarrierThreads)->ArgNames({"devices"})->Arg(2)->Arg(8)->Arg(64)->UseRealTime()
    ->Unit(benchmark::kMillisecond);

#if defined(SPMDSIM_HAVE_BOOST_FIBER)
// Peer: Boost.Fiber fibers on one thread, boost::fibers::barrier (bench/peers/fiber_barrier.cpp).
void BM_BoostFiberBarrier(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int64_t rounds = RoundsFor(n) / (n >= 4096 ? 3 : 1);
  for (auto _ : state) {
    boost::fibers::barrier barrier(static_cast<size_t>(n));
    std::vector<boost::fibers::fiber> fibers;
    for (int64_t d = 0; d < n; ++d)
      fibers.emplace_back([&] {
        for (int64_t r = 0; r < rounds; ++r) barrier.wait();
      });
    for (auto& f : fibers) f.join();
  }
  SetEpisodeCounter(state, rounds);
}
BENCHMARK(BM_BoostFiberBarrier)->ArgNames({"devices"})->Arg(2)->Arg(8)->Arg(64)->Arg(512)->Arg(4096)->UseRealTime()
    ->Unit(benchmark::kMillisecond);
#endif

// psum of `bytes` of float32 per device over all n devices.
void BM_RuntimePsum(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int64_t bytes = state.range(1);
  const int64_t elements = std::max<int64_t>(1, bytes / 4);
  Runtime runtime(Mesh::Iota({n}, {"x"}));
  // The inputs are made (and their pages touched) once, outside the timed Runs; each device holds its own.
  std::vector<Array> inputs(n);
  runtime.Run([&](DeviceContext& d) {
    inputs[d.position()] = Array::Full({elements}, DType::kF32, 1.0);
    benchmark::DoNotOptimize(d.Psum(inputs[d.position()], "x"));  // warms the output buffer pool
  });
  const int64_t rounds = bytes <= 4096 ? 5000 : (bytes <= 256 * kKiB ? 200 : (bytes <= 2 * kMiB ? 40 : 10));
  for (auto _ : state) {
    state.SetIterationTime(TimedRun(runtime, rounds, [&](DeviceContext& d) {
      benchmark::DoNotOptimize(d.Psum(inputs[d.position()], "x"));
    }));
  }
  SetEpisodeCounter(state, rounds);
  // nccl-tests' all-reduce figures (GB = 1e9 bytes): algbw = S / time, busbw = algbw * 2(n-1)/n. `moved` = the
  // bytes this algorithm must move / time: the n inputs read and one output per group written, (n+1) * S
  // (the result is one buffer shared by the group); compare it with BM_MemcpyReference's `moved` (2 * S).
  const double per_device = static_cast<double>(elements * 4);
  const double total = static_cast<double>(state.iterations() * rounds) * per_device;
  const double fn = static_cast<double>(n);
  state.counters["algbw"] = benchmark::Counter(total, benchmark::Counter::kIsRate);
  state.counters["busbw"] = benchmark::Counter(total * 2.0 * (fn - 1) / fn, benchmark::Counter::kIsRate);
  state.counters["moved"] = benchmark::Counter(total * (fn + 1), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RuntimePsum)
    ->ArgNames({"devices", "bytes"})
    ->ArgsProduct({{2, 4, 8}, {4, 4 * kKiB, 256 * kKiB, 2 * kMiB, 16 * kMiB}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The machine's memcpy in the same binary and run: `moved` = 2 * bytes / time (read and written). 24 MiB and
// 72 MiB move what a 16 MiB psum moves at 2 and 8 devices ((n+1) * 16 MiB), with the same footprint in the
// caches: the reference for "70% of memcpy on the bytes the algorithm must move".
void BM_MemcpyReference(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.counters["moved"] = benchmark::Counter(2.0 * static_cast<double>(state.iterations()) *
                                                   static_cast<double>(bytes), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MemcpyReference)->ArgNames({"bytes"})->Arg(16 * kMiB)->Arg(24 * kMiB)->Arg(72 * kMiB)->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace spmdsim
