// RunModel: the model workload's analytic accounting as a WorkloadResult (workloads/workloads.h).
#include <algorithm>
#include <cmath>

#include "workloads/model.h"
#include "workloads/workloads.h"

namespace spmdsim {

WorkloadResult RunModel(const WorkloadContext& context, const ModelConfig& config) {
  WorkloadResult r;
  r.name = config.name;
  r.kind = "model";
  r.abstract = context.abstract;
  ModelAccounting a = AccountModel(config, context.mesh);
  const Mesh& mesh = context.mesh;
  MemoryResult& m = r.memory;
  m.capacity_bytes = static_cast<int64_t>(a.capacity_bytes);
  m.peak_bytes_per_position.resize(static_cast<size_t>(mesh.size()));
  for (int64_t position = 0; position < mesh.size(); ++position) {
    const int64_t stage = mesh.IndexInGroup(position, config.parallel.pipeline_axes);
    const auto bytes = static_cast<int64_t>(std::ceil(a.stages[static_cast<size_t>(stage)].memory.total()));
    m.peak_bytes_per_position[static_cast<size_t>(position)] = bytes;
    if (position == 0 || bytes > m.peak_bytes_max) {
      m.peak_bytes_max = bytes;
      m.max_device = mesh.DeviceAt(position);
    }
    if (position == 0 || bytes < m.peak_bytes_min) {
      m.peak_bytes_min = bytes;
      m.min_device = mesh.DeviceAt(position);
    }
  }
  ModelStepTimes step = PredictModelStep(config, mesh, ModelStepOptions{.roofline = context.cost.roofline, .speed_factors = context.cost.speed_factors,
                                         .collectives = context.cost.collectives});
  r.totals.predicted_seconds = step.step_seconds;
  r.totals.compute_seconds = step.compute_seconds;
  for (const auto& [kind, seconds] : step.comm_by_kind) {
    r.totals.communication_seconds += seconds;
    if (seconds > 0) r.totals.communication_seconds_by_axis[kind] = seconds;
  }
  r.totals.flops = step.model_flops;
  r.check.compared = "the model workload is predicted from shapes only (no data yet)";
  r.model = std::move(a);
  r.model_step = std::move(step);
  return r;
}

}  // namespace spmdsim
