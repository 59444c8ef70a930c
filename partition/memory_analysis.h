// Per-device memory of a set of named arrays laid out by PartitionSpecs on a mesh, and a capacity check against the
// topology's per-device memory.
//
// Every device holds one block of every array (JAX shards evenly, see named_sharding.h), so its bytes are the sum of
// the arrays' shard bytes; the figures are computed per device (not averaged) so that a future uneven layout, or a
// mesh spanning hosts with different devices, reports what each device really holds.
// Example: Mesh {dp:2, tp:4}, f32 arrays w (1024, 4096) P(None, 'tp') and b (4096,) P():
//   w: 1024*1024*4 = 4 MiB per device (sharded, replication 2); b: 16 KiB per device (replicated 8 times);
//   every device 4210688 bytes; per host (cpu: one host) 8 x 4210688.
#ifndef SPMDSIM_PARTITION_MEMORY_ANALYSIS_H_
#define SPMDSIM_PARTITION_MEMORY_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "mesh/mesh.h"
#include "partition/partition_spec.h"

namespace spmdsim {

struct NamedArray {
  std::string name;
  std::vector<int64_t> shape;
  int64_t element_bytes = 4;
  PartitionSpec spec;
};

struct ArrayMemory {
  std::string name;
  int64_t global_bytes = 0;      // the whole array
  int64_t bytes_per_device = 0;  // one block
  int64_t num_shards = 1;        // distinct blocks
  int64_t replication = 1;       // devices per block
  bool sharded = false;          // num_shards > 1
};

struct MemoryAnalysis {
  std::vector<ArrayMemory> arrays;
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

// Throws SpecError (kind and message as JAX's, prefixed by the array's name) when a spec does not fit its array.
MemoryAnalysis AnalyzeMemory(const std::vector<NamedArray>& arrays, const Mesh& mesh);

// Throws Error(kResourceExhausted) naming the first device over capacity, its bytes and the capacity.
void CheckCapacity(const MemoryAnalysis& analysis);

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_MEMORY_ANALYSIS_H_
