// The options of the simulated training step (model/step.h PredictModelStep): how it is simulated, the
// pricing mechanisms, a calibration profile's figures, and whether its schedule is recorded.
//
// Example: PredictModelStep(model, ModelStepOptions{.blocking_p2p = true, .record_schedule = true});
// Thread safety: plain values.
#ifndef SPMDSIM_MODEL_STEP_OPTIONS_H_
#define SPMDSIM_MODEL_STEP_OPTIONS_H_

#include <map>

#include "cost/collective_model.h"
#include "cost/compute_model.h"
#include "cost/roofline.h"

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

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_STEP_OPTIONS_H_
