// What a framework pays per tensor per step to resolve a spec: parse, validate against mesh and shape, correct
// (eformer's mode and keep-most), and compute a NamedSharding's full index map, on an 8-device and a 4096-device
// mesh. Run: build/bench/bench/partition/partition_partition_benchmark --benchmark_format=json
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "partition/correction.h"
#include "partition/named_sharding.h"
#include "partition/partition_spec.h"

namespace spmdsim {
namespace {

// devices = 8: {dp:2, fsdp:2, tp:2}; devices = 4096: {dp:16, fsdp:32, tp:8}.
Mesh MeshOf(int64_t devices) {
  if (devices == 8) return Mesh::Iota({2, 2, 2}, {"dp", "fsdp", "tp"});
  return Mesh::Iota({16, 32, 8}, {"dp", "fsdp", "tp"});
}

// A transformer activation (batch 512, seq 2048, hidden 8192) and the spec frameworks give it.
const std::vector<int64_t> kShape{512, 2048, 8192};
constexpr const char* kSpecText = "PartitionSpec(('dp', 'fsdp'), None, 'tp')";

void BM_ParseSpec(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(PartitionSpec::Parse(kSpecText));
}
BENCHMARK(BM_ParseSpec);

void BM_ValidateSpec(benchmark::State& state) {
  Mesh mesh = MeshOf(state.range(0));
  PartitionSpec spec = PartitionSpec::Parse(kSpecText);
  for (auto _ : state) benchmark::DoNotOptimize(CheckSpec(spec, mesh, std::span<const int64_t>(kShape)));
}
BENCHMARK(BM_ValidateSpec)->Arg(8)->Arg(4096)->ArgNames({"devices"});

// A spec that needs correcting: ('dp','fsdp','tp') does not divide 512 on 4096 devices; 'sp' is not in the mesh.
void BM_CorrectSpec(benchmark::State& state) {
  Mesh mesh = MeshOf(state.range(0));
  PartitionSpec spec = PartitionSpec::Parse("P(('dp', 'fsdp', 'tp'), 'sp', 'tp', None)");
  CorrectionOptions options;
  options.mode = state.range(1) == 0 ? CorrectionMode::kEformer : CorrectionMode::kKeepMost;
  options.log = false;
  for (auto _ : state) {
    try {
      benchmark::DoNotOptimize(CorrectSpec(spec, mesh, kShape, options));
    } catch (const SpecError&) {  // eformer leaves 'tp' twice: DuplicateSpecError, as eformer raises
    }
  }
}
BENCHMARK(BM_CorrectSpec)->ArgsProduct({{8, 4096}, {0, 1}})->ArgNames({"devices", "keep_most"});

void BM_ResolveValidateCorrectShardShape(benchmark::State& state) {
  Mesh mesh = MeshOf(state.range(0));
  CorrectionOptions options;
  options.mode = CorrectionMode::kKeepMost;
  options.log = false;
  for (auto _ : state) {
    PartitionSpec spec = PartitionSpec::Parse(kSpecText);
    CorrectionReport r = CorrectSpec(spec, mesh, kShape, options);
    benchmark::DoNotOptimize(NamedSharding(mesh, r.corrected).ShardShape(kShape));
  }
}
BENCHMARK(BM_ResolveValidateCorrectShardShape)->Arg(8)->Arg(4096)->ArgNames({"devices"});

void BM_Layout(benchmark::State& state) {
  Mesh mesh = MeshOf(state.range(0));
  NamedSharding sharding(mesh, PartitionSpec::Parse(kSpecText));
  for (auto _ : state) benchmark::DoNotOptimize(sharding.Layout(kShape));
  state.counters["devices_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * mesh.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Layout)->Arg(8)->Arg(4096)->ArgNames({"devices"});

}  // namespace
}  // namespace spmdsim
