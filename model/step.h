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

#include "model/config.h"
#include "model/step_options.h"
#include "model/step_schedule.h"
#include "model/validation_band.h"

namespace spmdsim {

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
  // The measured error band of the step's class (hardware x stack x parallelism) over the published runs of
  // docs/model-validation.md (model/validation_band.h); rows == 0 when none is of this class. It holds for the
  // documented figures: a calibration (ModelStepOptions::calibration) fitted on the user's own run replaces it.
  ValidationBand validation;
  double comm_slowdown = 0;          // the fraction used
  // The software stack the step was priced with ("megatron", ...) and why (ModelStackChoice: the model's
  // `stack:`, or what `auto` saw in the parallelism).
  std::string stack, stack_reason;
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
