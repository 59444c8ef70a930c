// The breakdowns and the recorded schedule of a simulated step (model/internal/schedule_recorder.h).
#include "model/internal/schedule_recorder.h"

#include <utility>

namespace spmdsim::internal {
namespace {

StepEvent::Stream StreamOf(const TimelineOp& op) {
  switch (op.kind) {
    case TimelineOp::Kind::kStart:
      return op.stream == 0 ? StepEvent::Stream::kCollectives0 : StepEvent::Stream::kCollectives1;
    case TimelineOp::Kind::kSend:
      return StepEvent::Stream::kSends;
    default:
      return StepEvent::Stream::kCompute;
  }
}

StepEvent::Kind EventKindOf(const TimelineOp& op) {
  switch (op.kind) {
    case TimelineOp::Kind::kCompute:
      return StepEvent::Kind::kCompute;
    case TimelineOp::Kind::kWait:
      return StepEvent::Kind::kExposed;
    case TimelineOp::Kind::kRecv:
      return StepEvent::Kind::kBubble;
    default:
      return StepEvent::Kind::kCommunication;
  }
}

// One simulated device's schedule: its ops that took time, labelled (each preceded by the compute stream's wait
// for the host to launch it, where there was one), and its breakdown.
StepDeviceSchedule DeviceSchedule(const std::vector<TimelineOp>& program, const std::vector<OpLabel>& labels,
                                  const std::vector<OpInterval>& intervals, const DeviceTimes& t) {
  StepDeviceSchedule out;
  for (size_t i = 0; i < program.size(); ++i) {
    const OpInterval& when = intervals[i];
    const TimelineOp& op = program[i];
    const OpLabel& label = labels[i];
    const std::string_view phase = kCategoryNames[label.phase];
    if (when.host_wait_end > when.host_wait_start) {
      out.events.push_back({StepEvent::Stream::kCompute, StepEvent::Kind::kHostWait, "host", phase, label.op,
                            label.layer, label.micro_batch, label.chunk, when.host_wait_start, when.host_wait_end});
    }
    if (!(when.end > when.start)) continue;
    out.events.push_back({StreamOf(op), EventKindOf(op), kCategoryNames[op.category], phase, label.op, label.layer,
                          label.micro_batch, label.chunk, when.start, when.end});
  }
  out.end_seconds = t.end;
  out.compute_seconds = t.compute;
  out.exposed_comm_seconds = t.exposed_comm;
  out.bubble_seconds = t.pipeline_wait;
  out.host_wait_seconds = t.host_wait;
  FillBreakdown(t, &out.compute_by_phase, &out.comm_by_kind, &out.exposed_by_kind);
  return out;
}

}  // namespace

void FillBreakdown(const DeviceTimes& t, std::map<std::string, double>* compute_by_phase,
                   std::map<std::string, double>* comm_by_kind, std::map<std::string, double>* exposed_by_kind) {
  for (int cat = 0; cat < kNumCategories; ++cat) {
    const auto u = static_cast<size_t>(cat);
    if (cat <= kOptimizer) {
      (*compute_by_phase)[kCategoryNames[u]] = t.compute_by_category[u];
    } else {
      (*comm_by_kind)[kCategoryNames[u]] = t.comm_by_category[u];
      (*exposed_by_kind)[kCategoryNames[u]] = t.exposed_by_category[u];
    }
  }
}

std::shared_ptr<const StepSchedule> MakeSchedule(const ValidatedModel& model, const StepBuilder& builder,
                                                 StepTimeline& timeline, const std::vector<DeviceTimes>& times,
                                                 const std::vector<std::vector<OpInterval>>& intervals, size_t last) {
  auto schedule = std::make_shared<StepSchedule>();
  schedule->micro_batches = schedule->micro_batches_shown = builder.degrees().micro_batches;
  schedule->last_device = static_cast<int64_t>(last);
  const Mesh& mesh = model.mesh();
  for (size_t i = 0; i < times.size(); ++i) {
    StepDeviceSchedule device = DeviceSchedule(timeline.program(static_cast<int64_t>(i)), builder.labels()[i],
                                               intervals[i], times[i]);
    device.position = builder.simulated()[i];
    device.device_id = mesh.DeviceAt(device.position);
    device.stage = mesh.IndexInGroup(device.position, model.config().parallel.pipeline_axes);
    schedule->devices.push_back(std::move(device));
  }
  return schedule;
}

}  // namespace spmdsim::internal
