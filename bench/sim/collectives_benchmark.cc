// Collectives sweep: every collective of the runtime at N=2 and N=8 devices (1-axis mesh) and message sizes
// 8 B - 64 MiB, reported with nccl-tests' algbw/busbw; the 4096-device scale check (psum + all_gather on a
// 64x64 mesh, peak resident memory); and memcpy as the machine's reference bandwidth, all in one binary so
// ratios can be quoted from one run. Figures: docs/runtime.md, "Collectives sweep (algbw/busbw)".
//
// Run: scripts/collectives-sweep.sh (every benchmark in its own process; prints the table of docs/runtime.md),
// or build/bench/bench/sim/sim_collectives_benchmark --benchmark_counters_tabular=true (one process: the points
// then share the runtime's pool of freed buffers, see the script).
//
// Definitions (NVIDIA/nccl-tests doc/PERFORMANCE.md and src/<op>.cu, <Op>GetCollByteCount/<Op>GetBw, read at
// commit a0b82b2; the size column is common.cu's max(sendBytes, expectedBytes)):
//   size S  = the bytes nccl-tests prints in its "size" column, max(send bytes, recv bytes) of one rank:
//     psum (ncclAllReduce, all_reduce.cu)          S = count * 4       = the per-device input = output
//     all_gather tiled (ncclAllGather)             S = sendcount * 4 * n = the per-device OUTPUT (total)
//     psum_scatter tiled (ncclReduceScatter)       S = recvcount * 4 * n = the per-device INPUT (total)
//     all_to_all tiled (ncclAllToAll, alltoall.cu) S = count_per_peer * 4 * n = per-device input = output
//     ppermute ring shift (sendrecv.cu: send to rank+1, receive from rank-1)  S = count * 4
//   algbw = S / t, in GB/s of 1e9 bytes (nccl-tests divides by 1.0E9), t = time of one collective.
//   busbw = algbw * factor: all-reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; sendrecv 1.
//   For all_gather / psum_scatter / all_to_all the per-peer chunk is S / (4n) float32 elements, at least 1, so
//   at 8 B and N=8 these ops run with S = 32 B (the `size` counter is the S actually run; nccl-tests instead
//   rounds the per-rank count down to 16 bytes, which would be 0 there).
// Counters: `size` = S; `in_per_rank` / `out_per_rank` = bytes of one device's input / output; `episode` =
// seconds per collective; `algbw`, `busbw` as above (printed as bytes/s with SI prefixes: "4.2G/s" = 4.2 GB/s).
//
// Timing: every device runs `rounds` collectives inside one Run; device 0 reads the clock after a Barrier
// before the first and after a Barrier after the last (manual time), so Run's start-up (~100 us at N=8,
// docs/runtime.md) is not in the figure. Rounds adapt to the size: they are calibrated before the measurement
// so one Run is ~20 ms of collectives (the two barriers, < 1 us at N <= 8, are then negligible, and the
// sweep's wall time is not spent starting Runs). Inputs are made once per benchmark in a setup Run (charged
// to the devices, as nccl-tests allocates its buffers once); outputs are dropped after each collective, so
// large output buffers come back from the runtime's buffer pool as nccl-tests reuses its receive buffers.
// Caveats: ppermute moves no bytes (the receiver shares the sender's immutable buffer, docs/runtime.md), so
// its algbw is a per-call cost, not a copy rate; psum and all_gather write one output buffer per group, not
// one per device. `all_to_all_rows` is all_to_all of the same bytes as float32[n, S/(4n)] instead of the flat
// float32[S/4], to show how the kernel's speed depends on the layout.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "common/strings.h"
#include "mesh/mesh.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

using Clock = std::chrono::steady_clock;

// kAllToAllRows: all_to_all of the same bytes viewed as float32[n, S/(4n)] (split and concat axis 0), a row
// per peer: the same data movement as kAllToAll, which is float32[S/4] (1-D, what nccl-tests' flat buffer is).
enum class Op { kPsum, kAllGather, kPsumScatter, kAllToAll, kAllToAllRows, kPpermute };

// What one benchmark point runs: the shape of one device's input (float32), the element counts of its input and
// output, nccl-tests' S and its busbw factor.
struct Point {
  std::vector<int64_t> in_shape;
  int64_t in_elements = 0;
  int64_t out_elements = 0;
  int64_t nccl_bytes = 0;
  double busbw_factor = 1.0;
};

Point PointFor(Op op, int64_t n, int64_t bytes) {
  const double nd = static_cast<double>(n);
  const int64_t count = std::max<int64_t>(1, bytes / 4);      // psum, ppermute: S / 4 elements per device
  const int64_t chunk = std::max<int64_t>(1, bytes / 4 / n);  // the others: S / (4n) per peer
  switch (op) {
    case Op::kPsum:  // AllReduceGetBw: count*typesize, factor 2(n-1)/n
      return {{count}, count, count, count * 4, 2.0 * (nd - 1) / nd};
    case Op::kAllGather:  // AllGatherGetBw: sendcount*typesize*nranks (the output), factor (n-1)/n
      return {{chunk}, chunk, chunk * n, chunk * n * 4, (nd - 1) / nd};
    case Op::kPsumScatter:  // ReduceScatterGetBw: recvcount*typesize*nranks (the input), factor (n-1)/n
      return {{chunk * n}, chunk * n, chunk, chunk * n * 4, (nd - 1) / nd};
    case Op::kAllToAll:  // AlltoAllGetBw: count*nranks*typesize, count = per-peer count; factor (n-1)/n
      return {{chunk * n}, chunk * n, chunk * n, chunk * n * 4, (nd - 1) / nd};
    case Op::kAllToAllRows:
      return {{n, chunk}, chunk * n, chunk * n, chunk * n * 4, (nd - 1) / nd};
    case Op::kPpermute:  // SendRecvGetBw: count*typesize, factor 1
      return {{count}, count, count, count * 4, 1.0};
  }
  return {};
}

int64_t MiB(int64_t m) { return m * kMiB; }

void BM_Collective(benchmark::State& state, Op op) {
  const int64_t n = state.range(0);
  const Point p = PointFor(op, n, state.range(1));
  RuntimeOptions options;
  // Accounting only (nothing is reserved): the largest point holds 64 MiB in + 64 MiB out per device.
  options.device_memory_bytes = 4 * kGiB;
  Runtime runtime(Mesh::Iota({n}, {"x"}), options);
  PermutationPairs ring;  // in-group i sends to i+1 (nccl-tests sendrecv: to rank+1, from rank-1)
  for (int64_t i = 0; i < n; ++i) ring.emplace_back(i, (i + 1) % n);

  std::vector<Array> inputs(static_cast<size_t>(n));
  runtime.Run([&](DeviceContext& d) {  // setup; also maps the fiber stacks
    inputs[static_cast<size_t>(d.position())] =
        Array::Full(p.in_shape, DType::kF32, static_cast<double>(d.position() + 1));
  });
  // Seconds of `rounds` collectives, timed by device 0 between two barriers inside one Run.
  const auto timed_run = [&](int64_t rounds) {
    Clock::time_point start, stop;
    runtime.Run([&](DeviceContext& d) {
      const Array& x = inputs[static_cast<size_t>(d.position())];
      d.Barrier();
      if (d.position() == 0) start = Clock::now();
      for (int64_t r = 0; r < rounds; ++r) {
        switch (op) {
          case Op::kPsum: benchmark::DoNotOptimize(d.Psum(x, "x")); break;
          case Op::kAllGather: benchmark::DoNotOptimize(d.AllGather(x, "x", 0, /*tiled=*/true)); break;
          case Op::kPsumScatter: benchmark::DoNotOptimize(d.PsumScatter(x, "x", 0, /*tiled=*/true)); break;
          case Op::kAllToAll:
          case Op::kAllToAllRows: benchmark::DoNotOptimize(d.AllToAll(x, "x", 0, 0, /*tiled=*/true)); break;
          case Op::kPpermute: benchmark::DoNotOptimize(d.Ppermute(x, "x", ring)); break;
        }
      }
      d.Barrier();
      if (d.position() == 0) stop = Clock::now();
    });
    return std::chrono::duration<double>(stop - start).count();
  };
  // Rounds per Run: calibrated to ~20 ms of collectives (warm-up, then 1 round, then ~2 ms worth).
  timed_run(1);
  int64_t rounds = std::clamp<int64_t>(static_cast<int64_t>(2e-3 / std::max(timed_run(1), 1e-8)), 1, 100000);
  rounds = std::clamp<int64_t>(
      static_cast<int64_t>(20e-3 / std::max(timed_run(rounds) / static_cast<double>(rounds), 1e-8)), 1, 100000);
  for (auto _ : state) state.SetIterationTime(timed_run(rounds));

  const double collectives = static_cast<double>(state.iterations() * rounds);
  const double s = static_cast<double>(p.nccl_bytes);
  state.counters["size"] = s;
  state.counters["in_per_rank"] = static_cast<double>(p.in_elements * 4);
  state.counters["out_per_rank"] = static_cast<double>(p.out_elements * 4);
  state.counters["rounds"] = static_cast<double>(rounds);
  state.counters["episode"] =
      benchmark::Counter(collectives, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["algbw"] = benchmark::Counter(collectives * s, benchmark::Counter::kIsRate);
  state.counters["busbw"] = benchmark::Counter(collectives * s * p.busbw_factor, benchmark::Counter::kIsRate);
}

// The peak resident set of this whole process so far (ru_maxrss is in KiB on Linux).
double PeakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// The 4096-device scale check (issue 4): 64x64 mesh, every device holds 256 float32 (1 KiB), psums them over
// "x" (64 groups of 64) and all_gathers them (tiled) over "y" (64 KiB out per device, one buffer per group).
// `episode` = one psum + one all_gather. `peak_rss_MiB` is getrusage(RUSAGE_SELF).ru_maxrss: the high-water
// mark of the WHOLE PROCESS since it started, so it is registered first and is only this workload's when no
// other benchmark ran before it (run it alone: --benchmark_filter=Scale4096). tests/sim/scale_test.cc checks
// the same workload's values and its peak RSS (< 2 GiB) in a child process.
void BM_Scale4096(benchmark::State& state) {
  constexpr int64_t kElements = 256;
  const int64_t rounds = 5;
  Runtime runtime(Mesh::Iota({64, 64}, {"x", "y"}));
  runtime.Run([](DeviceContext&) {});  // maps the pooled fiber stacks
  for (auto _ : state) {
    runtime.Run([&](DeviceContext& d) {
      Array x = Array::Full({kElements}, DType::kF32, static_cast<double>(d.position()));
      for (int64_t r = 0; r < rounds; ++r) {
        benchmark::DoNotOptimize(d.Psum(x, "x"));
        benchmark::DoNotOptimize(d.AllGather(x, "y", 0, /*tiled=*/true));
      }
    });
  }
  state.counters["devices"] = static_cast<double>(runtime.num_devices());
  state.counters["episode"] = benchmark::Counter(static_cast<double>(state.iterations() * rounds),
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}
BENCHMARK(BM_Scale4096)->UseRealTime()->Unit(benchmark::kMillisecond);

// The reference: one thread's memcpy of `bytes` between two buffers already faulted in. algbw = bytes / time
// (as for sendrecv); the memory traffic is twice that (read + write).
void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  std::vector<char> src(bytes, 1);
  std::vector<char> dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.counters["size"] = static_cast<double>(bytes);
  state.counters["algbw"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(bytes),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Memcpy)->ArgNames({"bytes"})->Arg(MiB(16))->Arg(MiB(64))->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void SweepArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"devices", "bytes"})
      ->ArgsProduct({{2, 8}, {8, 128, 2 * kKiB, 32 * kKiB, 512 * kKiB, MiB(8), MiB(64)}})
      ->UseManualTime()
      ->MinTime(0.3)
      ->Unit(benchmark::kMicrosecond);
}
BENCHMARK_CAPTURE(BM_Collective, psum, Op::kPsum)->Apply(SweepArgs);
BENCHMARK_CAPTURE(BM_Collective, all_gather, Op::kAllGather)->Apply(SweepArgs);
BENCHMARK_CAPTURE(BM_Collective, psum_scatter, Op::kPsumScatter)->Apply(SweepArgs);
BENCHMARK_CAPTURE(BM_Collective, all_to_all, Op::kAllToAll)->Apply(SweepArgs);
BENCHMARK_CAPTURE(BM_Collective, all_to_all_rows, Op::kAllToAllRows)->Apply(SweepArgs);
BENCHMARK_CAPTURE(BM_Collective, ppermute, Op::kPpermute)->Apply(SweepArgs);

}  // namespace
}  // namespace spmdsim
