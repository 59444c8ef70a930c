// Per-device memory of a set of named arrays laid out by PartitionSpecs on a mesh, and a capacity check against the
// topology's per-device memory.
//
// This is the analysis eformer's analyze_sharding_strategy promises (total_parameters, sharded_parameters,
// memory_per_device, balance_score) and returns empty; here every figure is computed.
//
// Every device holds one block of every array (JAX shards evenly, see named_sharding.h), so its bytes are the sum of
// the arrays' shard bytes; the figures are computed per device (not averaged) so that a future uneven layout, or a
// mesh spanning hosts with different devices, reports what each device really holds.
//
// Definitions (N = devices in the mesh, b_i = bytes device i holds, T = sum of the arrays' global bytes):
//   total_parameters    sum of the arrays' element counts (eformer: total_parameters).
//   sharded_parameters  element count of the arrays split into more than one block. eformer counts every array
//                       whose spec != P(), so P(None) or a spec naming only size-1 axes counts there and not here.
//   replication         per array: devices holding each block = N / distinct blocks (1: fully sharded; N: whole on
//                       every device). replication_factor: sum(b_i) / T, the byte-weighted mean over the arrays.
//   balance_score       mean(b_i) / max(b_i) in (0, 1]: 1 when every device holds the same bytes (always the case for
//                       NamedSharding layouts, which are even; the score is there for layouts that are not, and for
//                       comparison with eformer's field). 1 when nothing is held.
//   memory_efficiency   (T / N) / max(b_i) in (0, 1]: the share of the ideal (every byte on exactly one device);
//                       1 / replication_factor for even layouts. 1 when nothing is held.
// Example: Mesh {dp:2, tp:4}, f32 arrays w (1024, 4096) P(None, 'tp') and b (4096,) P():
//   w: 1024*1024*4 = 4 MiB per device (sharded, replication 2); b: 16 KiB per device (replicated 8 times);
//   every device 4210688 bytes; per host (cpu: one host) 8 x 4210688.
//   total_parameters 4198400, sharded_parameters 4194304, balance_score 1,
//   memory_efficiency (16793600 / 8) / 4210688 = 0.4985, replication_factor 33685504 / 16793600 = 2.006.
#ifndef SPMDSIM_PARTITION_MEMORY_ANALYSIS_H_
#define SPMDSIM_PARTITION_MEMORY_ANALYSIS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "mesh/mesh.h"
#include "partition/partition_spec.h"

namespace spmdsim {

struct NamedArray {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;  // its size is what counts
  PartitionSpec spec;
};

struct ArrayMemory {
  std::string name;
  std::vector<int64_t> shape;
  PartitionSpec spec;
  std::vector<int64_t> shard_shape;
  int64_t elements = 0;          // product(shape)
  int64_t global_bytes = 0;      // the whole array
  int64_t bytes_per_device = 0;  // one block
  int64_t num_shards = 1;        // distinct blocks
  int64_t replication = 1;       // devices per block
  bool sharded = false;          // num_shards > 1
};

struct MemoryAnalysis {
  std::vector<ArrayMemory> arrays;
  int64_t total_parameters = 0;             // elements over every array
  int64_t sharded_parameters = 0;           // elements of the arrays with more than one block
  int64_t total_bytes = 0;                  // global bytes over every array (T above)
  double balance_score = 1.0;               // mean / max bytes per device (see the file comment)
  double memory_efficiency = 1.0;           // (total_bytes / devices) / max bytes per device
  double replication_factor = 1.0;          // sum of bytes over devices / total_bytes (1 when total_bytes is 0)
  std::vector<int64_t> bytes_per_position;  // per mesh position (row-major), every device
  std::vector<int> device_of_position;      // device ids, same order
  int64_t max_bytes = 0, min_bytes = 0;
  int max_device = 0, min_device = 0;       // first device (in mesh order) with the max / min
  int64_t replicated_bytes_per_device = 0;  // from arrays held whole by every device
  int64_t sharded_bytes_per_device = 0;     // from sharded arrays, on the max device
  std::vector<int> processes;               // process indices present, ascending
  std::vector<int64_t> bytes_per_process;   // sum over each host's devices, same order
  int64_t capacity_bytes = 0;               // per device, from the topology (0: unknown)
  std::vector<int> devices_over_capacity;   // ids, when capacity is known

  bool fits() const { return devices_over_capacity.empty(); }
};

// "name:shape:dtype:spec", e.g. "layer0/w:1024,4096:bf16:P(None, 'tp')" (the shape as ParseShape in common/shape.h
// reads it, the dtype as ParseDType in common/dtype.h; the spec is everything after the third colon; an empty spec
// is P()). Throws Error(kInvalidArgument) naming the token and the expected form, or the
// SpecSyntaxError of the spec.
NamedArray ParseNamedArray(std::string_view text);

// Throws SpecError (kind and message as JAX's, prefixed by the array's name) when a spec does not fit its array, and
// Error(kInvalidArgument) naming the array when its bytes overflow int64.
MemoryAnalysis AnalyzeMemory(const std::vector<NamedArray>& arrays, const Mesh& mesh);

// Throws Error(kResourceExhausted) naming the first device over capacity, its bytes and the capacity.
void CheckCapacity(const MemoryAnalysis& analysis);

// The analysis as text for people (what `spmdsim analyze` prints): a table of the arrays, the totals, and the bytes
// of every device, devices holding the same bytes on one line ("devices 0-7: 4210688 B (4.02MiB)").
std::string FormatMemoryAnalysis(const MemoryAnalysis& analysis);

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_MEMORY_ANALYSIS_H_
