#include "partition/memory_analysis.h"

#include <algorithm>
#include <map>

#include "partition/named_sharding.h"

namespace spmdsim {

MemoryAnalysis AnalyzeMemory(const std::vector<NamedArray>& arrays, const Mesh& mesh) {
  MemoryAnalysis out;
  const int64_t n = mesh.size();
  out.bytes_per_position.assign(n, 0);
  out.device_of_position = mesh.device_ids();
  std::vector<int64_t> sharded_per_position(n, 0);
  for (const NamedArray& array : arrays) {
    ShardingLayout layout;
    try {
      layout = NamedSharding(mesh, array.spec).Layout(array.shape);
    } catch (const SpecError& e) {
      std::vector<SpecProblem> problems = e.problems();
      for (auto& p : problems) p.message = fmt::format("array '{}': {}", array.name, p.message);
      throw SpecError(std::move(problems));
    }
    ArrayMemory m;
    m.name = array.name;
    m.global_bytes = Product(array.shape) * array.element_bytes;
    m.bytes_per_device = layout.ShardBytes(array.element_bytes);
    m.num_shards = layout.num_shards;
    m.replication = layout.num_replicas;
    m.sharded = layout.num_shards > 1;
    for (const DeviceShard& s : layout.shards) {
      out.bytes_per_position[s.position] += m.bytes_per_device;
      if (m.sharded) sharded_per_position[s.position] += m.bytes_per_device;
    }
    if (!m.sharded) out.replicated_bytes_per_device += m.bytes_per_device;
    out.arrays.push_back(std::move(m));
  }
  if (n > 0) {
    auto [lo, hi] = std::minmax_element(out.bytes_per_position.begin(), out.bytes_per_position.end());
    // minmax_element returns the LAST maximum; report the first one in mesh order.
    const int64_t max_pos = std::find(out.bytes_per_position.begin(), out.bytes_per_position.end(), *hi) -
                            out.bytes_per_position.begin();
    out.max_bytes = *hi;
    out.min_bytes = *lo;
    out.max_device = out.device_of_position[max_pos];
    out.min_device = out.device_of_position[lo - out.bytes_per_position.begin()];
    out.sharded_bytes_per_device = sharded_per_position[max_pos];
  }
  const Topology* topology = mesh.topology();
  std::map<int, int64_t> per_process;
  for (int64_t p = 0; p < n; ++p) {
    const int device = out.device_of_position[p];
    per_process[topology != nullptr ? topology->device(device).process_index : 0] += out.bytes_per_position[p];
  }
  for (const auto& [process, bytes] : per_process) {
    out.processes.push_back(process);
    out.bytes_per_process.push_back(bytes);
  }
  out.capacity_bytes = topology != nullptr ? topology->memory_bytes() : 0;
  if (out.capacity_bytes > 0) {
    for (int64_t p = 0; p < n; ++p) {
      if (out.bytes_per_position[p] > out.capacity_bytes) out.devices_over_capacity.push_back(out.device_of_position[p]);
    }
  }
  return out;
}

void CheckCapacity(const MemoryAnalysis& analysis) {
  if (analysis.fits()) return;
  const int device = analysis.devices_over_capacity.front();
  int64_t bytes = 0;
  for (size_t p = 0; p < analysis.device_of_position.size(); ++p) {
    if (analysis.device_of_position[p] == device) bytes = analysis.bytes_per_position[p];
  }
  Throw(ErrorCode::kResourceExhausted,
        "device {} needs {} bytes but has {} bytes of memory ({} of {} devices over capacity); shard more "
        "dimensions or use a larger mesh",
        device, bytes, analysis.capacity_bytes, analysis.devices_over_capacity.size(),
        analysis.device_of_position.size());
}

}  // namespace spmdsim
