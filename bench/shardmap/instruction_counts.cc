// Instructions per call of the runtime's and ShardMap's hot paths, for comparing two builds on a machine too
// noisy for wall times (docs/testing.md, "Benchmarks before and after a change"). Each case runs its call a few
// times to warm up, then between CALLGRIND_ZERO_STATS and CALLGRIND_DUMP_STATS_AT(case) `calls` more times, on
// one worker thread (no spinning: the counts are the same run to run). Outside valgrind it only runs the calls.
//
// Run (scripts/instruction-counts.py does this for two builds and prints the ratios):
//   valgrind --tool=callgrind --callgrind-out-file=/tmp/ic.%p build/bench/bench/shardmap/shardmap_instruction_counts
//   then each /tmp/ic.<pid>.<n> holds one case: its "desc: Trigger: Client Request: <case>" and "totals:" lines.
#include <valgrind/callgrind.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "mesh/mesh.h"
#include "shardmap/shard_map.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

void Measure(const char* name, int calls, const std::function<void()>& call) {
  for (int i = 0; i < 3; ++i) call();
  CALLGRIND_ZERO_STATS;
  for (int i = 0; i < calls; ++i) call();
  CALLGRIND_DUMP_STATS_AT(name);
  std::printf("%s: %d calls\n", name, calls);
}

RuntimeOptions OneWorker() {
  RuntimeOptions options;
  options.num_threads = 1;
  return options;
}

void RuntimeCases() {
  for (int64_t n : {8, 4096}) {
    Runtime runtime(Mesh::Iota({n}, {"x"}), OneWorker());
    Measure(n == 8 ? "run_empty_8" : "run_empty_4096", 10, [&] { runtime.Run([](DeviceContext&) {}); });
    Measure(n == 8 ? "barrier_x100_8" : "barrier_x100_4096", 5,
            [&] { runtime.Run([](DeviceContext& d) { for (int i = 0; i < 100; ++i) d.Barrier(); }); });
    Measure(n == 8 ? "psum_f32x4_x10_8" : "psum_f32x4_x10_4096", 5, [&] {
      runtime.Run([](DeviceContext& d) {
        Array x = Array::Zeros({4}, DType::kF32);
        for (int i = 0; i < 10; ++i) x = d.Psum(x, "x");
      });
    });
  }
  Runtime runtime(Mesh::Iota({8}, {"x"}), OneWorker());
  const int64_t elements = 64 * kKiB / 4;
  Measure("psum_64KiB_8", 10, [&] {
    runtime.Run([&](DeviceContext& d) { d.Psum(Array::Zeros({elements}, DType::kF32), "x"); });
  });
  Measure("all_gather_64KiB_8", 10, [&] {
    runtime.Run([&](DeviceContext& d) { d.AllGather(Array::Zeros({elements}, DType::kF32), "x", 0, true); });
  });
  Measure("psum_scatter_64KiB_8", 10, [&] {
    runtime.Run([&](DeviceContext& d) { d.PsumScatter(Array::Zeros({elements}, DType::kF32), "x", 0, true); });
  });
  Measure("all_to_all_64KiB_8", 10, [&] {
    runtime.Run([&](DeviceContext& d) { d.AllToAll(Array::Zeros({elements}, DType::kF32), "x", 0, 0, true); });
  });
}

void ShardMapCases() {
  for (int64_t n : {8, 4096}) {
    ShardMapOptions options;
    options.runtime_options = OneWorker();
    auto empty = ShardMap([](DeviceContext&, std::span<const Array>) { return std::vector<Array>{}; },
                          Mesh::Iota({n}, {"x"}), {}, {}, options);
    Measure(n == 8 ? "shardmap_empty_8" : "shardmap_empty_4096", 10, [&] { empty(); });
    auto identity = ShardMap([](DeviceContext&, const Array& b) { return b; }, Mesh::Iota({n}, {"x"}), {P("x")},
                             {P("x")}, options);
    const Array x = Array::Iota({n, 16}, DType::kF32);
    Measure(n == 8 ? "shardmap_identity_8" : "shardmap_identity_4096", 10, [&] { identity(x); });
  }
  ShardMapOptions options;
  options.runtime_options = OneWorker();
  auto psum = ShardMap([](DeviceContext& d, const Array& b) { return d.Psum(b, "x"); }, Mesh::Iota({8}, {"x"}),
                       {P("x")}, {P()}, options);
  const Array x = Array::Zeros({8 * 64 * kKiB / 4}, DType::kF32);
  Measure("shardmap_psum_64KiB_8", 10, [&] { psum(x); });
}

}  // namespace
}  // namespace spmdsim

int main() {
  spmdsim::RuntimeCases();
  spmdsim::ShardMapCases();
  return 0;
}
