// The runtime across 2 ranks against MPI itself, in the same run (launch with `mpirun -np 2`; the README and
// docs/multiprocess.md quote its output), with 1 and with 2 workers per rank:
//  - psum of 16 MiB (float32) over 8 devices, 4 per rank, vs MPI_Allreduce of the same 16 MiB between the 2
//    ranks plus the in-rank reduction (psum over 4 devices in one process) measured alone;
//  - a barrier of 8 devices across the 2 ranks, and of 2 devices (one per rank), vs MPI_Barrier.
// Not Google Benchmark: both ranks must run the same number of iterations, which its adaptive iteration counts
// do not guarantee. Each figure is the median of several timed Runs (psum: 5 of 4 psums, barrier: 41 of 200
// barriers, the same for MPI's); rank 0 prints.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/strings.h"
#include "sim/multiprocess.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRepeats = 5;
constexpr int kBarrierRepeats = 41;
constexpr int kBarriers = 200;  // per timing

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per collective: `count` of them in one Run, timed by the rank's first local device between two
// barriers (the same on every rank: the slowest rank decides).
double TimeInRun(Runtime& runtime, int count, const std::function<void(DeviceContext&, const Array&)>& step,
                 int64_t elements) {
  double seconds = 0;
  const int64_t first = [&] {
    for (int64_t p = 0; p < runtime.num_devices(); ++p)
      if (runtime.is_local(p)) return p;
    return int64_t{0};
  }();
  runtime.Run([&](DeviceContext& d) {
    const Array x = Array::Full({elements}, DType::kF32, 1.0 + d.position());
    d.Barrier();
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) step(d, x);
    d.Barrier();
    if (d.position() == first) seconds = std::chrono::duration<double>(Clock::now() - start).count() / count;
  });
  return seconds;
}

struct Figures {
  double psum, allreduce, in_rank, barrier, mpi_barrier;  // seconds, medians
  double barrier_one_per_rank, mpi_barrier_beside_it;     // a 2-device mesh, one device per rank
};

void Psums(MpiSession& mpi, Runtime& across, int threads, std::vector<double>& psum_across,
           std::vector<double>& allreduce, std::vector<double>& in_rank) {
  constexpr int64_t kElements = 16 * kMiB / 4;  // 16 MiB of float32
  const auto psum = [](DeviceContext& d, const Array& x) { d.Psum(x, "x"); };
  psum_across.clear();
  allreduce.clear();
  for (int r = 0; r < kRepeats; ++r) psum_across.push_back(TimeInRun(across, 4, psum, kElements));

  std::vector<float> send(kElements, 1.0f), recv(kElements);
  for (int r = 0; r < kRepeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = Clock::now();
    for (int i = 0; i < 4; ++i)
      MPI_Allreduce(send.data(), recv.data(), static_cast<int>(kElements), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    allreduce.push_back(std::chrono::duration<double>(Clock::now() - start).count() / 4);
  }
  // The in-rank part alone: rank 0 reduces over its 4 devices in one process while rank 1 waits.
  if (mpi.rank() == 0) {
    in_rank.clear();
    Runtime one(Mesh::Iota({4}, {"x"}), {.num_threads = threads});
    for (int r = 0; r < kRepeats; ++r) in_rank.push_back(TimeInRun(one, 4, psum, kElements));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Seconds per MPI_Barrier between the ranks: `kBarriers` of them, timed.
double TimeMpiBarriers() {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  for (int i = 0; i < kBarriers; ++i) MPI_Barrier(MPI_COMM_WORLD);
  return std::chrono::duration<double>(Clock::now() - start).count() / kBarriers;
}

// Barriers of `across`'s devices and MPI_Barrier, alternating timings (a change of load hits both), many short
// ones (a preemption by another process on the shared host spoils one timing, not the median).
void Barriers(Runtime& across, std::vector<double>& barrier_across, std::vector<double>& mpi_barrier) {
  const auto barrier = [](DeviceContext& d, const Array&) { d.Barrier(); };
  barrier_across.clear();
  mpi_barrier.clear();
  for (int r = 0; r < kBarrierRepeats; ++r) {
    barrier_across.push_back(TimeInRun(across, kBarriers, barrier, 1));
    mpi_barrier.push_back(TimeMpiBarriers());
  }
}

// Every figure with `threads` workers per rank (rank 0's figures are the ones that count).
Figures Measure(MpiSession& mpi, int threads) {
  const Mesh mesh = Mesh::Iota({8}, {"x"});
  RuntimeOptions options;
  options.num_threads = threads;
  options.process_group = mpi.world();
  Runtime across(mesh, options);

  std::vector<double> psum_across{0}, allreduce{0}, in_rank{0}, barrier_across{0}, mpi_barrier{0};
  // SPMDSIM_BENCH_ONLY=psum or barrier: one part alone (e.g. under a profiler).
  const char* only = std::getenv("SPMDSIM_BENCH_ONLY");
  const bool do_psum = only == nullptr || std::string(only) == "psum";
  const bool do_barrier = only == nullptr || std::string(only) == "barrier";
  if (do_psum) Psums(mpi, across, threads, psum_across, allreduce, in_rank);
  std::vector<double> barrier_pair{0}, mpi_barrier_pair{0};
  if (do_barrier) {
    Barriers(across, barrier_across, mpi_barrier);
    // One device per rank: the runtime's cross-rank step alone, as MPI_Barrier has one participant per rank.
    Runtime pair(Mesh::Iota({2}, {"x"}), options);
    Barriers(pair, barrier_pair, mpi_barrier_pair);
  }
  if (mpi.rank() != 0) return {};
  return {Median(psum_across),    Median(allreduce),   Median(in_rank), Median(barrier_across), Median(mpi_barrier),
          Median(barrier_pair), Median(mpi_barrier_pair)};
}

void PrintPsum(const Figures& f) {
  fmt::print("  psum 16 MiB, 8 devices on 2 ranks : {:8.2f} ms\n", f.psum * 1e3);
  fmt::print("    MPI_Allreduce 16 MiB, 2 ranks    : {:8.2f} ms\n", f.allreduce * 1e3);
  fmt::print("    in-rank psum, 4 devices alone    : {:8.2f} ms\n", f.in_rank * 1e3);
  fmt::print("    ratio psum / (allreduce + local) : {:8.2f} (target <= 1.5)\n", f.psum / (f.allreduce + f.in_rank));
}

void PrintBarriers(const Figures& f) {
  fmt::print("  barrier, 8 devices on 2 ranks     : {:8.2f} us\n", f.barrier * 1e6);
  fmt::print("    MPI_Barrier, 2 ranks             : {:8.2f} us\n", f.mpi_barrier * 1e6);
  fmt::print("    ratio                            : {:8.2f} (target <= 2)\n", f.barrier / f.mpi_barrier);
  fmt::print("  barrier, 2 devices on 2 ranks     : {:8.2f} us\n", f.barrier_one_per_rank * 1e6);
  fmt::print("    MPI_Barrier, 2 ranks             : {:8.2f} us\n", f.mpi_barrier_beside_it * 1e6);
  fmt::print("    ratio                            : {:8.2f} (target <= 2)\n",
             f.barrier_one_per_rank / f.mpi_barrier_beside_it);
}

int Main(MpiSession& mpi) {
  if (mpi.size() != 2) {
    if (mpi.rank() == 0) std::fprintf(stderr, "run with mpirun -np 2\n");
    return 2;
  }
  // Workers per rank: 1 (one core per rank on a 2-core host) and 2 (each rank as many workers as the host has
  // cores: over-subscribed 2x), or SPMDSIM_BENCH_THREADS alone.
  std::vector<int> thread_counts = {1, 2};
  if (std::getenv("SPMDSIM_BENCH_THREADS") != nullptr)
    thread_counts = {std::atoi(std::getenv("SPMDSIM_BENCH_THREADS"))};
  for (int threads : thread_counts) {
    const Figures f = Measure(mpi, threads);
    if (mpi.rank() != 0) continue;
    fmt::print("workers per rank: {}\n", threads);
    if (f.psum > 0) PrintPsum(f);
    if (f.barrier > 0) PrintBarriers(f);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace spmdsim

int main(int argc, char** argv) {
  spmdsim::MpiSession mpi(&argc, &argv);
  return spmdsim::Main(mpi);
}
