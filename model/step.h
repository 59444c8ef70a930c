// The model workload's simulated training step (docs/model.md): every device's program of forward, backward,
// recompute, pipeline transfers, gradient reduction and optimizer on compute and communication streams
// (cost/timeline.h), each op priced by the cost model of the mesh's topology.
//
// Example: ModelStepTimes t = PredictModelStep(ValidateModel(config, mesh));
//          t.step_seconds, t.mfu, t.exposed_comm_seconds, t.bubble_seconds
// Thread safety: free functions over values; safe to call concurrently.
#ifndef SPMDSIM_MODEL_STEP_H_
#define SPMDSIM_MODEL_STEP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cost/collective_model.h"
#include "cost/roofline.h"
#include "model/config.h"

namespace spmdsim {

struct ModelStepOptions {
  // Simulate one device per pipeline stage instead of every device. Exact for this workload: the devices of a
  // stage run the same program on the same shapes, no device is slower, and every collective is charged the
  // cost of its slowest group, so each member of a group starts and ends it at the same time
  // (tests compare both).
  bool reduced = true;
  // With more micro-batches m than m1 + m2 (p pipeline stages, m1 = max(2 p, 4) plus (m - that) mod p, m2 =
  // m1 + p), simulate m1 and m2 micro-batches and extend the line: after the pipeline has filled, each further
  // group of p micro-batches adds the same time (tests compare it with the whole simulation).
  bool extrapolate = true;
  // Fraction of a device's compute lost while its own communication is in flight (NCCL runs one CTA per channel
  // on an SM). < 0: the device's default (docs/model.md); 0: none.
  double comm_slowdown = -1;
  RooflineOptions roofline{};       // the user's compute / HBM efficiency knobs (default 1)
  // Stragglers: device id -> speed factor (> 0; 0.5 computes at half speed). Devices are then no longer
  // interchangeable: every device is simulated (`reduced` is ignored).
  std::map<int, double> speed_factors{};
  CollectiveOptions collectives{};
  // Pipeline transfers as Megatron-LM of 2022 ran them: every send and receive waits for its transfer
  // (batch_isend_irecv, wait, torch.cuda.synchronize), a send and the next receive as one exchange; the sender
  // resumes when the receiver has the data. false: eager sends, overlapped with the sender's compute (Megatron
  // core's overlapped p2p). docs/model.md, "Blocking pipeline transfers".
  bool blocking_p2p = false;
  // Also record the schedule (ModelStepTimes::schedule): when every op of every simulated device ran, for
  // `spmdsim run --trace` and --html. Off by default (plan evaluates thousands of steps).
  bool record_schedule = false;
};

// One interval of the simulated step on one stream of one simulated device.
//   kind        kCompute: an op on the compute stream; kCommunication: a collective or a pipeline send on a
//               communication stream; kExposed: the compute stream waiting for a collective; kBubble: the
//               compute stream waiting for a pipeline receive.
//   category    compute: its breakdown phase ("forward", "backward", "recompute", "head", "optimizer");
//               communication and exposed: the kind ("tensor", "data", "pipeline", "context", "expert");
//               bubble: "pipeline". The same names as ModelStepTimes' maps.
//   phase       the part of the step that issued it: "forward", "backward", "recompute", "optimizer".
//   op          what ran: "qkv matmul", "attention", "mlp down matmul", "all-reduce", "send activations", ...
//   layer       the transformer layer (0-based, global; -1: the embedding, the loss head or the optimizer).
//   micro_batch the micro-batch (-1: the optimizer step); chunk the model chunk (virtual stage on this device).
// Names are static strings.
struct StepEvent {
  enum class Stream : uint8_t { kCompute, kCollectives0, kCollectives1, kSends };
  enum class Kind : uint8_t { kCompute, kCommunication, kExposed, kBubble };
  Stream stream = Stream::kCompute;
  Kind kind = Kind::kCompute;
  std::string_view category, phase, op;
  int32_t layer = -1;
  int32_t micro_batch = -1;
  int32_t chunk = 0;
  double start = 0, end = 0;  // seconds from the start of the step
};
std::string_view StepStreamName(StepEvent::Stream stream);  // "compute", "collectives 0", "collectives 1", "sends"
std::string_view StepEventKindName(StepEvent::Kind kind);   // "compute", "communication", "exposed", "bubble"

// One simulated device's part of the step: its events (zero-length ones left out) in program order, and its own
// breakdown (the same sums as ModelStepTimes' for the device that finishes last).
struct StepDeviceSchedule {
  int64_t position = 0;   // mesh position
  int device_id = 0;
  int64_t stage = 0;      // pipeline stage
  double end_seconds = 0;
  double compute_seconds = 0, exposed_comm_seconds = 0, bubble_seconds = 0;
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

// The predicted step. Times are those of the device that finishes last (the first such in mesh order).
struct ModelStepTimes {
  double step_seconds = 0;
  double compute_seconds = 0;        // its compute stream busy (slowdown included)
  double exposed_comm_seconds = 0;   // its compute stream waiting for collectives
  double hidden_comm_seconds = 0;    // collectives it ran while computing (total - exposed, >= 0)
  double bubble_seconds = 0;         // its compute stream waiting for pipeline receives
  double model_flops = 0;            // ModelFlops::model (forward + backward, no recompute)
  double tokens_per_second = 0;
  double mfu = 0;                    // model_flops / (step_seconds x devices x matrix peak of the dtype)
  double comm_slowdown = 0;          // the fraction used
  std::map<std::string, double> compute_by_phase;   // forward, backward, recompute, head, optimizer
  std::map<std::string, double> comm_by_kind;       // tensor, data, pipeline, context, expert (run time)
  std::map<std::string, double> exposed_by_kind;    // the same, exposed
  int64_t simulated_devices = 0;
  int64_t timeline_ops = 0;
  std::shared_ptr<const StepSchedule> schedule;  // ModelStepOptions::record_schedule; null otherwise
};

// Builds every simulated device's program for one optimizer step (forward, backward, recompute, pipeline
// transfers, gradient reduction, optimizer) and runs it on a StepTimeline (cost/timeline.h), each op priced by
// the ComputeModel and each collective by the CollectiveModel of the mesh's topology.
// Throws Error(kFailedPrecondition) when the mesh has no topology.
ModelStepTimes PredictModelStep(const ValidatedModel& model, const ModelStepOptions& options = {});

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_STEP_H_
