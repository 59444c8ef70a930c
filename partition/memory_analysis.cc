#include "partition/memory_analysis.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "common/error_context.h"
#include "common/shape.h"
#include "common/strings.h"
#include "partition/named_sharding.h"
#include "partition/sharding_picture.h"

namespace spmdsim {

NamedArray ParseNamedArray(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    Throw(ErrorCode::kInvalidArgument,
          "--array '{}': {}; expected name:shape:dtype:spec, e.g. \"w:1024,4096:bf16:P(None, 'tp')\"", text, why);
  };
  std::vector<size_t> colons;
  for (size_t i = 0; i < text.size() && colons.size() < 3; ++i) {
    if (text[i] == ':') colons.push_back(i);
  }
  if (colons.size() < 3) bad(fmt::format("{} of the 3 ':' separators", colons.size()));
  NamedArray array;
  array.name = std::string(Trim(text.substr(0, colons[0])));
  if (array.name.empty()) bad("the name is empty");
  const std::string what = fmt::format("--array '{}' shape", array.name);
  array.shape = ParseShape(text.substr(colons[0] + 1, colons[1] - colons[0] - 1), what);
  try {
    array.dtype = ParseDType(text.substr(colons[1] + 1, colons[2] - colons[1] - 1));
  } catch (const Error& e) {
    RethrowWithContext(e, fmt::format("--array '{}': {}", array.name, e.message()));
  }
  try {
    array.spec = PartitionSpec::Parse(text.substr(colons[2] + 1));
  } catch (const Error& e) {
    RethrowWithContext(e, fmt::format("--array '{}' spec: {}", array.name, e.message()));
  }
  return array;
}

MemoryAnalysis AnalyzeMemory(const std::vector<NamedArray>& arrays, const Mesh& mesh) {
  MemoryAnalysis out;
  const int64_t n = mesh.size();
  out.bytes_per_position.assign(n, 0);
  out.device_of_position = mesh.device_ids();
  std::vector<int64_t> sharded_per_position(n, 0);
  for (const NamedArray& array : arrays) {
    const int64_t element_bytes = DTypeSize(array.dtype);
    if (ElementCountOverflows(array.shape, element_bytes)) {
      Throw(ErrorCode::kInvalidArgument, "array '{}': shape {} of {}-byte elements holds more than 2^63 bytes",
            array.name, PyTuple(array.shape), element_bytes);
    }
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
    m.shape = array.shape;
    m.spec = array.spec;
    m.shard_shape = layout.shard_shape;
    m.elements = NumElements(array.shape);
    m.global_bytes = m.elements * element_bytes;
    m.bytes_per_device = layout.ShardBytes(element_bytes);
    m.num_shards = layout.num_shards;
    m.replication = layout.num_replicas;
    m.sharded = layout.num_shards > 1;
    for (const DeviceShard& s : layout.shards) {
      out.bytes_per_position[s.position] += m.bytes_per_device;
      if (m.sharded) sharded_per_position[s.position] += m.bytes_per_device;
    }
    if (!m.sharded) out.replicated_bytes_per_device += m.bytes_per_device;
    out.total_parameters += m.elements;
    if (m.sharded) out.sharded_parameters += m.elements;
    out.total_bytes += m.global_bytes;
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
    const int64_t held = std::accumulate(out.bytes_per_position.begin(), out.bytes_per_position.end(), int64_t{0});
    if (out.max_bytes > 0) {
      out.balance_score = static_cast<double>(held) / static_cast<double>(n) / static_cast<double>(out.max_bytes);
      out.memory_efficiency =
          static_cast<double>(out.total_bytes) / static_cast<double>(n) / static_cast<double>(out.max_bytes);
    }
    if (out.total_bytes > 0) out.replication_factor = static_cast<double>(held) / static_cast<double>(out.total_bytes);
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
      if (out.bytes_per_position[p] > out.capacity_bytes)
        out.devices_over_capacity.push_back(out.device_of_position[p]);
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

std::string FormatMemoryAnalysis(const MemoryAnalysis& analysis) {
  std::string out;
  size_t name_width = 5, spec_width = 4, shape_width = 5;
  for (const ArrayMemory& a : analysis.arrays) {
    name_width = std::max(name_width, a.name.size());
    spec_width = std::max(spec_width, a.spec.ToString().size());
    shape_width = std::max(shape_width, PyTuple(a.shape).size());
  }
  out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>12}  {:>6}  {:>11}\n", "array", name_width, "shape", shape_width,
                     "spec", spec_width, "bytes/device", "blocks", "replication");
  for (const ArrayMemory& a : analysis.arrays) {
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>12}  {:>6}  {:>11}\n", a.name, name_width, PyTuple(a.shape),
                       shape_width, a.spec.ToString(), spec_width, HumanBytes(a.bytes_per_device), a.num_shards,
                       a.replication);
  }
  const int64_t n = static_cast<int64_t>(analysis.bytes_per_position.size());
  out += fmt::format("parameters          {} total, {} in sharded arrays ({:.1f}%)\n", analysis.total_parameters,
                     analysis.sharded_parameters,
                     analysis.total_parameters > 0
                         ? 100.0 * static_cast<double>(analysis.sharded_parameters) /
                               static_cast<double>(analysis.total_parameters)
                         : 0.0);
  out += fmt::format("bytes               {} ({}) in all, {} devices\n", analysis.total_bytes,
                     HumanBytes(analysis.total_bytes), n);
  out += fmt::format("largest device      {}: {} ({})\n", analysis.max_device, analysis.max_bytes,
                     HumanBytes(analysis.max_bytes));
  out += fmt::format("smallest device     {}: {} ({})\n", analysis.min_device, analysis.min_bytes,
                     HumanBytes(analysis.min_bytes));
  out += fmt::format("balance score       {:.4f} (mean / max bytes per device)\n", analysis.balance_score);
  out += fmt::format("memory efficiency   {:.4f} (ideal bytes per device / max; 1 = no replication)\n",
                     analysis.memory_efficiency);
  out += fmt::format("replication factor  {:.4f} (bytes held on all devices / array bytes)\n",
                     analysis.replication_factor);
  if (analysis.capacity_bytes > 0) {
    out += fmt::format("capacity            {} per device: {}\n", HumanBytes(analysis.capacity_bytes),
                       analysis.fits() ? "fits"
                                       : fmt::format("{} device(s) over", analysis.devices_over_capacity.size()));
  }
  // Every device's bytes; devices holding the same bytes share a line, in order of first appearance.
  std::vector<int64_t> values;
  std::map<int64_t, std::vector<int>> devices_by_bytes;
  for (int64_t p = 0; p < n; ++p) {
    const int64_t b = analysis.bytes_per_position[p];
    if (devices_by_bytes.find(b) == devices_by_bytes.end()) values.push_back(b);
    devices_by_bytes[b].push_back(analysis.device_of_position[p]);
  }
  out += "bytes per device\n";
  for (int64_t b : values) {
    out += fmt::format("  devices {}: {} ({})\n", DeviceIdsLabel(devices_by_bytes[b]), b, HumanBytes(b));
  }
  if (analysis.processes.size() > 1) {
    out += "bytes per host\n";
    for (size_t h = 0; h < analysis.processes.size(); ++h) {
      out += fmt::format("  host {}: {} ({})\n", analysis.processes[h], analysis.bytes_per_process[h],
                         HumanBytes(analysis.bytes_per_process[h]));
    }
  }
  return out;
}

}  // namespace spmdsim
