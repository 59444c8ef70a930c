// The recorded schedule of a simulated training step (ModelStepOptions::record_schedule): when every op of every
// simulated device ran, on which stream, and what it was; `spmdsim run --trace` and --html draw it.
//
// Example: const StepSchedule& s = *PredictModelStep(model, {.record_schedule = true}).schedule;
//          s.devices[0].events.front().op == "embedding"
// Thread safety: plain values; the name functions are safe to call from any thread.
#ifndef SPMDSIM_MODEL_STEP_SCHEDULE_H_
#define SPMDSIM_MODEL_STEP_SCHEDULE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace spmdsim {

// One interval of the simulated step on one stream of one simulated device.
//   kind        kCompute: an op on the compute stream; kCommunication: a collective or a pipeline send on a
//               communication stream; kExposed: the compute stream waiting for a collective; kBubble: the
//               compute stream waiting for a pipeline receive; kHostWait: the compute stream waiting for the
//               host to launch the op's kernels (eager stacks, model/stack.h host_launch_seconds).
//   category    compute: its breakdown phase ("forward", "backward", "recompute", "head", "optimizer");
//               communication and exposed: the kind ("tensor", "data", "pipeline", "context", "expert");
//               bubble: "pipeline"; host wait: "host". The same names as ModelStepTimes' maps.
//   phase       the part of the step that issued it: "forward", "backward", "recompute", "optimizer".
//   op          what ran: "qkv matmul", "flash attention", "norm", "mlp down matmul", "fp8 cast-transpose",
//               "all_reduce", "send activations", ... (a compute op's duration is the one the timeline ran it
//               for: slower while communication kernels held some of its SMs, the wave effect)
//   layer       the transformer layer (0-based, global; -1: the embedding, the loss head or the optimizer).
//   micro_batch the micro-batch (-1: the optimizer step); chunk the model chunk (virtual stage on this device).
// Names are static strings.
struct StepEvent {
  enum class Stream : uint8_t { kCompute, kCollectives0, kCollectives1, kSends };
  enum class Kind : uint8_t { kCompute, kCommunication, kExposed, kBubble, kHostWait };
  Stream stream = Stream::kCompute;
  Kind kind = Kind::kCompute;
  std::string_view category, phase, op;
  int32_t layer = -1;
  int32_t micro_batch = -1;
  int32_t chunk = 0;
  double start = 0, end = 0;  // seconds from the start of the step
};
std::string_view StepStreamName(StepEvent::Stream stream);  // "compute", "collectives 0", "collectives 1", "sends"
// "compute", "communication", "exposed", "bubble", "host wait"
std::string_view StepEventKindName(StepEvent::Kind kind);

// One simulated device's part of the step: its events (zero-length ones left out) in program order, and its own
// breakdown (the same sums as ModelStepTimes' for the device that finishes last).
struct StepDeviceSchedule {
  int64_t position = 0;   // mesh position
  int device_id = 0;
  int64_t stage = 0;      // pipeline stage
  double end_seconds = 0;
  double compute_seconds = 0, exposed_comm_seconds = 0, bubble_seconds = 0, host_wait_seconds = 0;
  std::map<std::string, double> compute_by_phase, comm_by_kind, exposed_by_kind;
  std::vector<StepEvent> events;
};

// The step as simulated: one StepDeviceSchedule per simulated device (one per pipeline stage in the reduced
// simulation). When the prediction extrapolates over micro-batches (ModelStepOptions::extrapolate) the whole
// step is simulated once more for the schedule if it has at most kMaxScheduleOps ops (the same times to 1e-9,
// tested), else the schedule is the larger of the two simulated runs: micro_batches_shown < micro_batches.
struct StepSchedule {
  static constexpr int64_t kMaxScheduleOps = 2'000'000;
  int64_t micro_batches = 0;        // of the step
  int64_t micro_batches_shown = 0;  // simulated in this schedule
  int64_t last_device = 0;          // index of the device that finishes last (whose times the prediction gives)
  std::vector<StepDeviceSchedule> devices;
};

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_STEP_SCHEDULE_H_
