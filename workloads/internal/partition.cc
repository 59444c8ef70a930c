// partition: parameter shapes + rules -> specs (explicit, logical axis rules or regex rules), corrected to fit
// (partition/correction.h), and the per-device memory of partition/memory_analysis.h. No Runtime run.
#include <fmt/format.h>

#include "common/error.h"
#include "partition/correction.h"
#include "partition/memory_analysis.h"
#include "workloads/workloads.h"

namespace spmdsim {

WorkloadResult RunPartition(const WorkloadContext& context, const PartitionConfig& config) {
  const Mesh& mesh = context.mesh;
  WorkloadResult result;
  result.name = config.name;
  result.kind = WorkloadKind::kPartition;
  result.abstract = context.abstract;
  PartitionResult out;
  std::vector<PyRegex> regexes;
  for (const PartitionRule& r : config.regex_rules) regexes.emplace_back(r.pattern);
  std::vector<NamedArray> arrays;
  for (const PartitionParam& param : config.params) {
    PartitionParamResult r;
    r.name = param.name;
    r.shape = param.shape;
    r.dtype = param.dtype;
    if (param.spec) {
      r.requested = *param.spec;
      r.source = "spec";
    } else if (param.logical_axes) {
      if (param.logical_axes->size() != param.shape.size()) {
        Throw(ErrorCode::kInvalidArgument, "partition '{}': parameter '{}' has {} logical axes {} for a shape of "
              "rank {}", config.name, param.name, param.logical_axes->size(),
              LogicalAxesToString(*param.logical_axes), param.shape.size());
      }
      r.requested = LogicalToMeshAxes(*param.logical_axes, config.logical_rules);
      r.source = "logical " + LogicalAxesToString(*param.logical_axes);
    } else {
      r.source = "default";
      for (size_t i = 0; i < regexes.size(); ++i) {
        if (regexes[i].Search(param.name)) {
          std::vector<PartitionSpec::Entry> entries = config.regex_rules[i].spec.entries();
          if (entries.size() > param.shape.size()) entries.resize(param.shape.size());  // eformer trims
          r.requested = PartitionSpec(std::move(entries));
          r.source = fmt::format("regex rule {} ({})", i, config.regex_rules[i].pattern);
          break;
        }
      }
    }
    CorrectionOptions options;
    options.mode = config.correction;
    options.element_bytes = DTypeSize(param.dtype);
    options.log = false;
    CorrectionReport report = CorrectSpec(r.requested, mesh, param.shape, options);
    r.spec = report.corrected;
    r.corrections = report.corrections;
    arrays.push_back({param.name, param.shape, param.dtype, r.spec});
    out.params.push_back(std::move(r));
  }
  out.analysis = AnalyzeMemory(arrays, mesh);
  for (size_t i = 0; i < out.params.size(); ++i) {
    const ArrayMemory& m = out.analysis.arrays[i];
    out.params[i].global_bytes = m.global_bytes;
    out.params[i].bytes_per_device = m.bytes_per_device;
    out.params[i].replication = m.replication;
  }
  if (!out.params.empty()) {
    auto by_bytes = [](const PartitionParamResult& a, const PartitionParamResult& b) {
      return a.bytes_per_device < b.bytes_per_device;
    };
    out.largest = std::max_element(out.params.begin(), out.params.end(), by_bytes)->name;
    out.smallest = std::min_element(out.params.begin(), out.params.end(), by_bytes)->name;
  }
  MemoryResult& memory = result.memory;
  memory.peak_bytes_max = out.analysis.max_bytes;
  memory.max_device = out.analysis.max_device;
  memory.peak_bytes_min = out.analysis.min_bytes;
  memory.min_device = out.analysis.min_device;
  memory.capacity_bytes = out.analysis.capacity_bytes;
  memory.peak_bytes_per_position = out.analysis.bytes_per_position;
  for (const PartitionParamResult& p : out.params) result.layouts.emplace_back(p.name, p.spec);
  result.partition = std::move(out);
  return result;
}

}  // namespace spmdsim
