// PredictModelStep and PredictModelLayer (model/step.h): the model's step built by the StepBuilder
// (model/internal/step_builder.h) as per-device programs on a StepTimeline, run, and extrapolated over the
// micro-batches; the op list and its sources are in docs/model.md.
#include "model/step.h"

#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "common/error.h"
#include "cost/compute_model.h"
#include "cost/timeline.h"
#include "model/accounting.h"
#include "model/internal/schedule_recorder.h"
#include "model/internal/step_builder.h"

namespace spmdsim {

namespace {

using internal::kCategoryNames;
using internal::kNumCategories;
using internal::kOptimizer;
using internal::StepBuilder;

// The device's documented sustained matrix rate (the rate the step's matmuls are priced at, before the slowest
// device's pace), and a warning when the prediction implies more (MFU above it): the step would then be faster
// than the device can run it (docs/model.md, "FLOPs and MFU").
void CheckSustainedRate(const ComputeModel& compute, const std::string& device_kind, DType dtype, ModelStepTimes* t) {
  t->sustained_fraction = compute.SustainedMatmulFraction(dtype);
  t->sustained_measured = compute.HasMeasuredMatmulRate(dtype);
  if (const BorrowedMatmulRate* borrowed = FindBorrowedMatmulRate(device_kind)) {
    t->sustained_borrowed_from = std::string(borrowed->from);
    // A borrowed rate is no bound on this device: the threshold is the best MFU measured on it.
    if (t->mfu > borrowed->published_mfu) {
      t->warnings.push_back(fmt::format(
          "MFU {:.1f}% is above {:.1f}%, {}: {}'s matmul rate is borrowed from {} ({:.1f}% of the peak, no {} "
          "measurement is published), so the predicted step is likely faster than the device runs it",
          100 * t->mfu, 100 * borrowed->published_mfu, borrowed->published_mfu_source, device_kind, borrowed->from,
          100 * t->sustained_fraction, device_kind));
    }
  }
  if (t->mfu > t->sustained_fraction * (1 + 1e-9)) {
    t->warnings.push_back(fmt::format(
        "MFU {:.1f}% is above the {:.1f}% of the peak that {} sustains ({}): the predicted step is faster than the "
        "device can run it",
        100 * t->mfu, 100 * t->sustained_fraction, device_kind,
        t->sustained_measured ? "its documented matmul rate"
        : t->sustained_borrowed_from.empty()
            ? "the datasheet peak: no measured rate documented"
            : fmt::format("{}'s measured rate, borrowed", t->sustained_borrowed_from)));
  }
}

// Every pipeline stage's times: those of its simulated device that finishes last.
std::vector<ModelStageTimes> StageTimes(const ValidatedModel& model, const std::vector<int64_t>& simulated,
                                        const std::vector<DeviceTimes>& times) {
  std::vector<ModelStageTimes> stages(static_cast<size_t>(model.degrees().pipeline));
  for (size_t i = 0; i < times.size(); ++i) {
    const int64_t stage = model.mesh().IndexInGroup(simulated[i], model.config().parallel.pipeline_axes);
    ModelStageTimes& s = stages[static_cast<size_t>(stage)];
    if (times[i].end < s.end) continue;
    s = {stage, times[i].end, times[i].compute, times[i].exposed_comm, times[i].pipeline_wait, {}};
    for (int cat = kOptimizer + 1; cat < kNumCategories; ++cat)
      s.exposed_by_kind[kCategoryNames[static_cast<size_t>(cat)]] =
          times[i].exposed_by_category[static_cast<size_t>(cat)];
  }
  return stages;
}

// Runs the timeline of `model` (its micro-batch count as configured) and fills the times (and, with
// options.record_schedule, the schedule).
ModelStepTimes Simulate(const ValidatedModel& model, const ModelStepOptions& options) {
  StepBuilder builder(model, options);
  std::unique_ptr<StepTimeline> timeline = builder.Build();
  ModelStepTimes out;
  for (int64_t i = 0; i < static_cast<int64_t>(builder.simulated().size()); ++i)
    out.timeline_ops += static_cast<int64_t>(timeline->program(i).size());
  std::vector<std::vector<OpInterval>> intervals;
  const std::vector<DeviceTimes> times = timeline->Run(options.record_schedule ? &intervals : nullptr);
  size_t last = 0;
  for (size_t i = 1; i < times.size(); ++i)
    if (times[i].end > times[last].end) last = i;
  const DeviceTimes& t = times[last];
  out.step_seconds = t.end;
  out.compute_seconds = t.compute;
  out.exposed_comm_seconds = t.exposed_comm;
  out.hidden_comm_seconds = std::max(0.0, t.comm - t.exposed_comm);
  out.bubble_seconds = t.pipeline_wait;
  out.host_wait_seconds = t.host_wait;
  out.comm_slowdown = builder.slowdown();
  internal::FillBreakdown(t, &out.compute_by_phase, &out.comm_by_kind, &out.exposed_by_kind);
  out.simulated_devices = static_cast<int64_t>(times.size());
  out.stages = StageTimes(model, builder.simulated(), times);
  out.hardware_flops = builder.ExecutedFlops();
  if (options.record_schedule) out.schedule = internal::MakeSchedule(model, builder, *timeline, times, intervals, last);
  return out;
}

// a + f (b - a), field by field (the additive times).
ModelStepTimes Extrapolate(const ModelStepTimes& a, const ModelStepTimes& b, double f) {
  auto line = [f](double x, double y) { return y + f * (y - x); };
  ModelStepTimes out = b;
  out.step_seconds = line(a.step_seconds, b.step_seconds);
  out.compute_seconds = line(a.compute_seconds, b.compute_seconds);
  out.exposed_comm_seconds = line(a.exposed_comm_seconds, b.exposed_comm_seconds);
  out.hidden_comm_seconds = line(a.hidden_comm_seconds, b.hidden_comm_seconds);
  out.bubble_seconds = line(a.bubble_seconds, b.bubble_seconds);
  out.host_wait_seconds = line(a.host_wait_seconds, b.host_wait_seconds);
  out.hardware_flops = line(a.hardware_flops, b.hardware_flops);
  using Breakdown = std::map<std::string, double> ModelStepTimes::*;
  for (Breakdown field :
       {&ModelStepTimes::compute_by_phase, &ModelStepTimes::comm_by_kind, &ModelStepTimes::exposed_by_kind})
    for (auto& [key, value] : out.*field) value = line((a.*field).at(key), value);
  out.timeline_ops = a.timeline_ops + b.timeline_ops;  // what was simulated
  for (size_t i = 0; i < out.stages.size(); ++i) {
    ModelStageTimes& s = out.stages[i];
    const ModelStageTimes& x = a.stages[i];
    s.end = line(x.end, s.end);
    s.compute_seconds = line(x.compute_seconds, s.compute_seconds);
    s.exposed_comm_seconds = line(x.exposed_comm_seconds, s.exposed_comm_seconds);
    s.bubble_seconds = line(x.bubble_seconds, s.bubble_seconds);
    for (auto& [key, value] : s.exposed_by_kind) value = line(x.exposed_by_kind.at(key), value);
  }
  return out;
}

// The schedule to show for an extrapolated step: the whole step simulated once more when it is small enough
// (StepSchedule::kMaxScheduleOps), else that of the m2-micro-batch run `b` (null unless recording).
std::shared_ptr<const StepSchedule> RecordedSchedule(const ValidatedModel& model, const ModelStepOptions& options,
                                                     const ModelStepTimes& b, int64_t m2) {
  if (!options.record_schedule) return nullptr;
  const int64_t m = model.degrees().micro_batches;
  const double whole_ops = static_cast<double>(b.timeline_ops) * static_cast<double>(m) / static_cast<double>(m2);
  if (whole_ops <= static_cast<double>(StepSchedule::kMaxScheduleOps)) {
    ModelStepOptions whole = options;
    whole.extrapolate = false;
    return Simulate(model, whole).schedule;
  }
  auto schedule = std::make_shared<StepSchedule>(*b.schedule);
  schedule->micro_batches = m;
  return schedule;
}

}  // namespace

ModelLayerTimes PredictModelLayer(const ValidatedModel& model, const ModelStepOptions& options, bool moe) {
  if (model.mesh().topology() == nullptr) {
    Throw(ErrorCode::kFailedPrecondition, "model '{}': predicting a layer needs a mesh with a topology",
          model.config().name);
  }
  if (moe && model.config().moe.experts == 0)
    Throw(ErrorCode::kInvalidArgument, "model '{}': no MoE layer to time (moe.experts is 0)", model.config().name);
  ModelLayerTimes out;
  for (bool backward : {false, true}) {
    StepBuilder builder(model, options);
    const std::vector<DeviceTimes> times = builder.BuildLayer(backward, moe)->Run();
    (backward ? out.backward_seconds : out.forward_seconds) = times.front().end;
  }
  return out;
}

ModelStepTimes PredictModelStep(const ValidatedModel& model, const ModelStepOptions& options) {
  const ModelConfig& config = model.config();
  const Mesh& mesh = model.mesh();
  if (mesh.topology() == nullptr) {
    Throw(ErrorCode::kFailedPrecondition, "model '{}': predicting a step needs a mesh with a topology", config.name);
  }
  const ModelAccounting accounting = AccountModel(model);
  const ParallelDegrees& d = accounting.degrees;
  // Steady state: after the pipeline has filled, every further group of p micro-batches adds the same time
  // (docs/model.md, "Micro-batch extrapolation"); simulate two counts and extend the line.
  // m1 >= max(2p, 4) is chosen so that m - m1 is a multiple of p (interleaved schedules have m % p == 0 anyway).
  const int64_t p = d.pipeline, m = d.micro_batches, base = std::max<int64_t>(2 * p, 4);
  const int64_t m1 = m > base ? base + (m - base) % p : base, m2 = m1 + p;
  ModelStepTimes out;
  if (options.extrapolate && m > m1 + m2) {
    ModelStepOptions quiet = options;
    quiet.record_schedule = false;
    const ModelStepTimes a = Simulate(model.WithMicroBatches(m1), quiet);
    const ModelStepTimes b = Simulate(model.WithMicroBatches(m2), options);
    out = Extrapolate(a, b, static_cast<double>(d.micro_batches - m2) / static_cast<double>(m2 - m1));
    out.schedule = RecordedSchedule(model, options, b, m2);
  } else {
    out = Simulate(model, options);
  }
  out.model_flops = accounting.flops.model;
  out.tokens_per_second = accounting.tokens_per_step / out.step_seconds;
  const ComputeModel compute(*mesh.topology(), options.roofline,
                             ComputeOptions{options.clock, 1, options.calibration.compute_scale});
  out.mfu = out.model_flops / (out.step_seconds * static_cast<double>(mesh.size()) * compute.MatrixPeak(config.dtype));
  CheckSustainedRate(compute, mesh.topology()->device_kind(), config.dtype, &out);
  const StackChoice stack = ModelStackChoice(model);
  out.stack = std::string(StackName(stack.stack));
  out.stack_reason = stack.reason;
  out.validation = FindValidationBand(ClassifyModelRun(model));
  return out;
}

}  // namespace spmdsim
