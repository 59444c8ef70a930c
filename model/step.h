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
#include "cost/compute_model.h"
#include "cost/roofline.h"
#include "model/config.h"

namespace spmdsim {

// Figures fitted to a user's measured steps (model/calibration.h FitCalibration): multipliers on the documented
// defaults. 1: uncalibrated (the default, and the prediction the validation reports).
struct StepCalibration {
  double compute_scale = 1;      // compute-bound work (matmul, attention, vector) runs at this x its rate
  double comm_scale = 1;         // every collective and pipeline transfer takes this x its predicted time
  double host_launch_scale = 1;  // the stack's host launch time per kernel x this (eager stacks)
  bool identity() const { return compute_scale == 1 && comm_scale == 1 && host_launch_scale == 1; }
};

// Pricing mechanisms that can be turned off one at a time (docs/model-validation.md measures each one's share of
// the prediction that way); all on by default. The clock regime and the wave effect have their own options
// (`clock`, `comm_slowdown`).
struct StepMechanisms {
  bool slowest_device = true;  // sustained compute paced by the expected slowest of the mesh's devices
  bool host_launch = true;     // a kernel waits for the host to launch it when the device runs ahead
  bool fp8_casts = true;       // Transformer Engine's fp8 cast / transpose / amax kernels (the stack's)
};

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
  // on an SM). < 0 (default): every op priced on the SMs communication kernels leave it (the wave effect,
  // docs/model.md); >= 0: this uniform fraction instead (0: none).
  double comm_slowdown = -1;
  RooflineOptions roofline{};       // the user's compute / HBM efficiency knobs (default 1)
  // Stragglers: device id -> speed factor (> 0; 0.5 computes at half speed). Devices are then no longer
  // interchangeable: every device is simulated (`reduced` is ignored).
  std::map<int, double> speed_factors{};
  CollectiveOptions collectives{};
  // The clock the compute is priced at: sustained (a step keeps the devices at their power cap; the default) or
  // burst (the "maximum achievable" rates of short benchmarks). cost/compute_model.h ClockRegime.
  ClockRegime clock = ClockRegime::kSustained;
  // A calibration profile's figures (all > 0; Throws Error(kInvalidArgument) otherwise).
  StepCalibration calibration{};
  // Pipeline transfers as Megatron-LM of 2022 ran them: every send and receive waits for its transfer
  // (batch_isend_irecv, wait, torch.cuda.synchronize), a send and the next receive as one exchange; the sender
  // resumes when the receiver has the data. false: eager sends, overlapped with the sender's compute (Megatron
  // core's overlapped p2p). docs/model.md, "Blocking pipeline transfers".
  bool blocking_p2p = false;
  StepMechanisms mechanisms{};
  // Also record the schedule (ModelStepTimes::schedule): when every op of every simulated device ran, for
  // `spmdsim run --trace` and --html. Off by default (plan evaluates thousands of steps).
  bool record_schedule = false;
};

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

// One pipeline stage's times: those of its device that finishes last.
struct ModelStageTimes {
  int64_t stage = 0;
  double end = 0, compute_seconds = 0, exposed_comm_seconds = 0, bubble_seconds = 0;
  std::map<std::string, double> exposed_by_kind;    // tensor, data, pipeline, context, expert
};

// The predicted step. Times are those of the device that finishes last (the first such in mesh order).
struct ModelStepTimes {
  double step_seconds = 0;
  double compute_seconds = 0;        // its compute stream busy (slowdown included)
  double exposed_comm_seconds = 0;   // its compute stream waiting for collectives
  double hidden_comm_seconds = 0;    // collectives it ran while computing (total - exposed, >= 0)
  double bubble_seconds = 0;         // its compute stream waiting for pipeline receives
  double host_wait_seconds = 0;      // its compute stream waiting for the host to launch kernels (eager stacks)
  double model_flops = 0;            // ModelFlops::model (forward + backward, no recompute)
  double tokens_per_second = 0;
  double mfu = 0;                    // model_flops / (step_seconds x devices x matrix peak of the dtype)
  // FLOPs of the matrix ops the simulated programs execute, every device together: the model FLOPs plus
  // recompute, the masked half of unfused attention (Megatron's unfused kernels compute the whole score matrix;
  // flash attention skips it), the padded vocabulary, the flash backward's fifth matmul (2.5 x its forward).
  // >= model_flops (tested on every shipped scenario).
  double hardware_flops = 0;
  // The device's documented sustained matrix rate over its peak in the model's dtype, the rate the step's matmuls
  // are priced at: ComputeModel::SustainedMatmulFraction under the step's clock regime (sustained at the power
  // cap by default: DeviceComputeSpec::sustained_matmul_fraction; burst or no sustained figure:
  // matmul_fraction) x the scenario's compute_efficiency x a calibration's compute_scale; 1 (the datasheet peak)
  // where no measurement is documented (TPU v2-v4, v6e). MFU cannot honestly exceed it.
  double sustained_fraction = 1;
  bool sustained_measured = false;   // false: compute runs at the datasheet peak, or at a borrowed rate
  // The device whose measured matmul rate this one's compute is priced at (empty: its own, or the peak).
  std::string sustained_borrowed_from;
  // What a reader must not miss: "MFU 103.9% is above the 92.3% of the peak that TPU v5 sustains ...".
  std::vector<std::string> warnings;
  double comm_slowdown = 0;          // the fraction used
  std::map<std::string, double> compute_by_phase;   // forward, backward, recompute, head, optimizer
  std::map<std::string, double> comm_by_kind;       // tensor, data, pipeline, context, expert (run time)
  std::map<std::string, double> exposed_by_kind;    // the same, exposed
  int64_t simulated_devices = 0;
  int64_t timeline_ops = 0;
  // Every pipeline stage's own times (the device that finishes last waits for the slowest stage: its
  // bubble_seconds include that stage's excess; the stages show where the time goes).
  std::vector<ModelStageTimes> stages;
  std::shared_ptr<const StepSchedule> schedule;  // ModelStepOptions::record_schedule; null otherwise
};

// One transformer layer of the first pipeline stage, as Korthikanti et al. 2022 (Table 4) time it: its forward
// alone, and its backward alone (its recompute included), each with its tensor / context / expert collectives
// exposed as the step would expose them and the data-parallel ones left out (they overlap the next layers).
struct ModelLayerTimes {
  double forward_seconds = 0;
  double backward_seconds = 0;
  double total() const { return forward_seconds + backward_seconds; }
};
// `moe`: time an MoE layer (Throws Error(kInvalidArgument) when the model has none); else a dense one.
// Throws Error(kFailedPrecondition) when the mesh has no topology.
ModelLayerTimes PredictModelLayer(const ValidatedModel& model, const ModelStepOptions& options = {}, bool moe = false);

// Builds every simulated device's program for one optimizer step (forward, backward, recompute, pipeline
// transfers, gradient reduction, optimizer) and runs it on a StepTimeline (cost/timeline.h), each op priced by
// the ComputeModel and each collective by the CollectiveModel of the mesh's topology.
// Throws Error(kFailedPrecondition) when the mesh has no topology.
ModelStepTimes PredictModelStep(const ValidatedModel& model, const ModelStepOptions& options = {});

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_STEP_H_
