// StepBuilder: every simulated device's program of one optimizer step, in Megatron-LM's pipeline order
// (model/pipeline.h PipelineOrder): each task's receive, its chunk's layers (LayerOps, model/layer_ops.h), the
// embedding or loss at the ends, its send; the data-parallel gradient reductions as the last micro-batch's
// backward produces them; the optimizer. Its StepPricer prices every op on a StepTimeline (docs/model.md, "The
// program of one device").
//
// Example: StepBuilder builder(model, options);
//          std::vector<DeviceTimes> times = builder.Build()->Run();
//
// Thread safety: used by one thread.
#ifndef SPMDSIM_MODEL_INTERNAL_STEP_BUILDER_H_
#define SPMDSIM_MODEL_INTERNAL_STEP_BUILDER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "cost/timeline.h"
#include "model/config.h"
#include "model/internal/step_pricer.h"
#include "model/layer_ops.h"
#include "model/pipeline.h"
#include "model/step_options.h"

namespace spmdsim::internal {

class StepBuilder {
 public:
  // Throws Error(kInvalidArgument) for a calibration figure or speed factor that is not > 0.
  StepBuilder(const ValidatedModel& model, const ModelStepOptions& options);

  const ParallelDegrees& degrees() const { return d_; }
  double slowdown() const { return pricer_.slowdown(); }

  // The simulated devices: every position, or one per pipeline stage (coordinate 0 on every other axis).
  std::vector<int64_t> SimulatedPositions() const;
  std::unique_ptr<StepTimeline> Build();
  // One layer's forward, or its backward (with its recompute), alone on the first simulated device, its
  // collectives costed for the whole group (the reduced simulation): what Korthikanti et al. 2022 time per layer
  // (Table 4). The first layer of the model that is (or is not) MoE.
  std::unique_ptr<StepTimeline> BuildLayer(bool backward, bool moe);

  const std::vector<int64_t>& simulated() const { return pricer_.simulated(); }
  // REQUIRES: ModelStepOptions::record_schedule. Per simulated device, what each op of its program is.
  const std::vector<std::vector<OpLabel>>& labels() const { return pricer_.labels(); }
  double ExecutedFlops() const { return pricer_.ExecutedFlops(); }

 private:
  bool IsRepresentative(int64_t pos) const;
  // The simulated device of the stage `delta` away along the pipeline axes (cyclically), same other coordinates.
  int64_t Neighbour(int64_t device, int64_t delta) const;
  double PipelineSendSeconds();
  int64_t Tag(bool forward, int64_t micro_batch, int64_t virtual_stage) const;
  bool IsForwardTag(int64_t tag) const;
  static int64_t AckTag(int64_t tag) { return -1 - tag; }
  void SendActivations(int64_t peer, int64_t tag);
  void ReceiveActivations(int64_t peer, int64_t tag);
  void AwaitAcknowledgements();
  void ForwardTask(const PipelineTask& task, int64_t stage, const PipelineTask* paired);
  void BackwardTask(const PipelineTask& task, int64_t stage);
  void MtpForward(int64_t k);
  void MtpBackward(int64_t k, bool reduce);
  void StartGradientReduction(double params, double experts);
  void ReduceDenseGradients(double bytes);
  void ReduceTiedEmbedding(int64_t stage);
  std::pair<double, double> StageParams(int64_t stage) const;
  void Optimizer(int64_t stage);
  void BuildDevice(int64_t device);

  const ModelConfig& c_;
  const Mesh& mesh_;
  ParallelDegrees d_;
  StepPricer pricer_;
  LayerOps ops_;
  std::vector<LayerRange> layout_;  // the layers of every virtual stage
  bool reduced_ = true, blocking_p2p_ = false;
  bool after_flush_ = false;  // StackSpec::grad_reduce_after_flush (ZeRO 0 / 1): gradients reduced in Optimizer
  std::map<int, double> speed_factors_;
  std::vector<std::vector<int64_t>> pipeline_groups_;
  std::optional<double> pipe_seconds_;
  // The current device.
  int64_t device_ = 0, prev_ = 0, next_ = 0;
  std::vector<int64_t> pending_grads_;
  std::vector<std::pair<int64_t, int64_t>> unacknowledged_;  // blocking p2p: (peer, tag) of sends not yet awaited
  bool received_paired_ = false;  // the next backward's receive was done at the forward's exchange
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_MODEL_INTERNAL_STEP_BUILDER_H_
