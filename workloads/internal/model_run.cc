// RunModel: the model workload's analytic accounting and predicted step as a WorkloadResult
// (workloads/workloads.h); in a real (non-abstract) run also the training step run with data and checked
// against the same model on one device (workloads/internal/model_program.h).
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "ops/ops.h"
#include "workloads/internal/model_program.h"
#include "workloads/internal/program.h"
#include "model/model.h"
#include "workloads/workloads.h"

namespace spmdsim {
namespace {

void FillPrediction(const WorkloadContext& context, const ValidatedModel& model, WorkloadResult* r) {
  const ModelConfig& config = model.config();
  ModelAccounting a = AccountModel(model);
  const Mesh& mesh = model.mesh();
  MemoryResult& m = r->memory;
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
  ModelStepTimes step = PredictModelStep(model,
                                         ModelStepOptions{.roofline = context.cost.roofline,
                                                          .speed_factors = context.cost.speed_factors,
                                                          .collectives = context.cost.collectives,
                                                          .calibration = context.cost.model_calibration,
                                                          .record_schedule = context.record_trace});
  r->totals.predicted_seconds = step.step_seconds;
  r->totals.compute_seconds = step.compute_seconds;
  for (const auto& [kind, seconds] : step.comm_by_kind) {
    r->totals.communication_seconds += seconds;
    if (seconds > 0) r->totals.communication_seconds_by_axis[kind] = seconds;
  }
  r->totals.flops = step.model_flops;
  r->model = std::move(a);
  r->model_step = std::move(step);
}

// Output k of the parallel run against the one-device run's outputs, slice by slice for stage-stacked weights.
void CompareOutput(const internal::ModelOutputLabel& label, const Array& got,
                   const std::map<std::string, Array>& want, const ModelConfig& config, NumericCheck* check) {
  for (size_t s = 0; s < label.names.size(); ++s) {
    Array g = got;
    if (label.stacked) {
      std::vector<int64_t> start(got.shape().size(), 0), limit = got.shape();
      start[0] = static_cast<int64_t>(s);
      limit[0] = static_cast<int64_t>(s) + 1;
      std::vector<int64_t> shape(got.shape().begin() + 1, got.shape().end());
      g = Reshape(Slice(got, start, limit), shape);
    }
    CheckedValue c = internal::CompareArrays(label.names[s], g, want.at(label.names[s]), config.rtol, config.atol);
    check->passed = check->passed && c.passed;
    check->max_abs_error = std::max(check->max_abs_error, c.max_abs_error);
    check->max_rel_error = std::max(check->max_rel_error, c.max_rel_error);
    check->values.push_back(std::move(c));
  }
}

// The loss and every weight gradient of `run` against the same model on one device.
void CheckAgainstOneDevice(const WorkloadContext& context, const ModelConfig& config,
                           const internal::ModelProgram& parallel, const WorkloadResult& run, NumericCheck* check) {
  check->rtol = config.rtol;
  check->atol = config.atol;
  if (!config.check) {
    check->compared = "not checked (check: false)";
    return;
  }
  const std::vector<std::string>& axes = context.mesh.axis_names();
  const Mesh one = Mesh::Iota(std::vector<int64_t>(axes.size(), 1), axes);
  const internal::ModelProgram reference =
      internal::BuildModelProgram(ValidateModel(internal::OneDeviceModel(config), one));
  const std::vector<Array> want_values = internal::RunProgramOnOneDevice(reference.program, axes);
  std::map<std::string, Array> want;
  for (size_t i = 0; i < want_values.size(); ++i) want.emplace(reference.labels[i].names[0], want_values[i]);
  check->performed = true;
  check->compared = fmt::format("loss and {} weight gradients vs the same model on one device (one micro-batch of "
                                "{} sequences, float32)", want.size() - 1, config.global_batch);
  for (size_t k = 0; k < run.outputs.size(); ++k) {
    CompareOutput(parallel.labels[k], run.outputs[k].second, want, config, check);
  }
}

// The step run with data on the mesh, checked against the same model on one device; fills r->check,
// r->wall_seconds, and the inputs (weights, tokens) and outputs (loss, gradients) that --dump writes.
void RunWithData(const WorkloadContext& context, const ValidatedModel& model, WorkloadResult* r) {
  const ModelConfig& config = model.config();
  internal::CheckModelRunsWithData(model);
  internal::ModelProgram parallel = internal::BuildModelProgram(model);
  parallel.program.check = false;
  WorkloadContext run_context = context;
  run_context.keep_arrays = true;
  run_context.record_trace = false;
  // The check below reads the whole outputs: across ranks every rank receives them (docs/multiprocess.md).
  WorkloadResult run =
      internal::RunProgram(run_context, parallel.program, WorkloadKind::kModel, /*whole_outputs=*/true);
  r->wall_seconds = run.wall_seconds;
  CheckAgainstOneDevice(context, config, parallel, run, &r->check);
  if (context.keep_arrays) {
    r->inputs = std::move(run.inputs);
    r->outputs = std::move(run.outputs);
    r->sharded_inputs = std::move(run.sharded_inputs);
    r->sharded_outputs = std::move(run.sharded_outputs);
  }
}

}  // namespace

WorkloadResult RunModel(const WorkloadContext& context, const ValidatedModel& model) {
  WorkloadResult r;
  r.name = model.config().name;
  r.kind = WorkloadKind::kModel;
  r.abstract = context.abstract;
  FillPrediction(context, model, &r);
  if (context.abstract) {
    r.check.compared = "abstract run: the model is predicted from shapes only";
    return r;
  }
  RunWithData(context, model, &r);
  return r;
}

}  // namespace spmdsim
