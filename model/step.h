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
#include <string>
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
  // FLOPs of the matrix ops the simulated programs execute, every device together: the model FLOPs plus
  // recompute, the masked half of unfused attention (Megatron's unfused kernels compute the whole score matrix;
  // flash attention skips it), the padded vocabulary, the flash backward's fifth matmul (2.5 x its forward).
  // >= model_flops (tested on every shipped scenario).
  double hardware_flops = 0;
  // The device's documented sustained matrix rate over its peak in the model's dtype: its best measured matmul
  // rate (DeviceComputeSpec::matmul_fraction, fp8_matmul_fraction) x the scenario's compute_efficiency; 1 (the
  // datasheet peak) where no measurement is documented (TPUs). MFU cannot honestly exceed it.
  double sustained_fraction = 1;
  bool sustained_measured = false;   // false: compute runs at the datasheet peak
  // What a reader must not miss: "MFU 103.9% is above the 100.0% of the peak that TPU v5 sustains ...".
  std::vector<std::string> warnings;
  double comm_slowdown = 0;          // the fraction used
  std::map<std::string, double> compute_by_phase;   // forward, backward, recompute, head, optimizer
  std::map<std::string, double> comm_by_kind;       // tensor, data, pipeline, context, expert (run time)
  std::map<std::string, double> exposed_by_kind;    // the same, exposed
  int64_t simulated_devices = 0;
  int64_t timeline_ops = 0;
};

// Builds every simulated device's program for one optimizer step (forward, backward, recompute, pipeline
// transfers, gradient reduction, optimizer) and runs it on a StepTimeline (cost/timeline.h), each op priced by
// the ComputeModel and each collective by the CollectiveModel of the mesh's topology.
// Throws Error(kFailedPrecondition) when the mesh has no topology.
ModelStepTimes PredictModelStep(const ValidatedModel& model, const ModelStepOptions& options = {});

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_STEP_H_
