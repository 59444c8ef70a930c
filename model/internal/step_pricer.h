// StepPricer: puts priced ops on the programs of a StepTimeline's simulated devices (cost/timeline.h) -- the ops
// of a LayerOps list (model/layer_ops.h) each priced by the ComputeModel, their collectives by the
// CollectiveModel over the groups of their role, pipeline sends and a device's own compute -- and, when the
// schedule is recorded, what each op is. The step builder (model/internal/step_builder.h) decides the order.
//
// Example: StepPricer pricer(model, options);
//          pricer.Prepare({0, 8}, /*reduced=*/true);   // two simulated devices, one per pipeline stage
//          pricer.SetDevice(0, 1.0);
//          pricer.RunOps(layer_ops.Forward(3), 3);      // layer 3's forward on device 0's program
//          std::unique_ptr<StepTimeline> timeline = pricer.TakeTimeline();
//
// Thread safety: used by one thread.
#ifndef SPMDSIM_MODEL_INTERNAL_STEP_PRICER_H_
#define SPMDSIM_MODEL_INTERNAL_STEP_PRICER_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "cost/collective_model.h"
#include "cost/compute_model.h"
#include "cost/timeline.h"
#include "model/config.h"
#include "model/layer_ops.h"
#include "model/stack.h"
#include "model/step_options.h"

namespace spmdsim::internal {

// Categories of the timeline breakdown.
enum Category : uint8_t {
  kForward, kBackward, kRecompute, kHead, kOptimizer,                   // compute
  kTensorComm, kDataComm, kPipelineComm, kContextComm, kExpertComm,     // communication
  kNumCategories
};
inline constexpr std::array<const char*, kNumCategories> kCategoryNames = {
    "forward", "backward", "recompute", "head", "optimizer", "tensor", "data", "pipeline", "context", "expert"};

// An op's durations alone, with a collective of the same device in flight and with only its sends in flight.
struct PricedOp {
  double seconds = 0, with_collective = -1, with_p2p = -1;
};

// What one op of a device's program is (ModelStepOptions::record_schedule): its name, the phase that issued it,
// the layer (-1: none), the micro-batch (-1: none) and the model chunk.
struct OpLabel {
  std::string_view op;
  Category phase = kForward;
  int32_t layer = -1, micro_batch = -1, chunk = 0;
};

// A communication role: its mesh axes and the size of its groups.
struct Role {
  std::vector<std::string> axes;
  int64_t size = 1;
};

// Every role of the step on the model's mesh.
struct StepRoles {
  StepRoles(const ModelConfig& c, const ParallelDegrees& d);
  Role tensor, data, context, pipeline, expert;
  Role dp_and_cp;   // data and context: a dense gradient's reduction
  Role expert_dp;   // a routed expert's replicas: the data axes that do not split experts, and the context axes
  Role zero;        // ZeRO's shard group: its axes (all data axes unless zero_axes names fewer) and the context
  Role replicas;    // the data axes ZeRO does not shard over (hybrid sharding)
};

class StepPricer {
 public:
  // Throws Error(kInvalidArgument) for a calibration figure or speed factor that is not > 0.
  StepPricer(const ValidatedModel& model, const ModelStepOptions& options);

  // A new timeline for `simulated` mesh positions, each collective role's groups registered on it: in the
  // reduced simulation each simulated device stands alone for its group (its members are identical).
  void Prepare(std::vector<int64_t> simulated, bool reduced);
  // The ops from now on go to simulated device `device`'s program, computing at `speed` (a straggler's factor).
  void SetDevice(int64_t device, double speed);
  std::unique_ptr<StepTimeline> TakeTimeline() { return std::move(timeline_); }

  // Prices every op of `ops` in order, labelled with layer `layer` (-1: none) and each op's phase.
  void RunOps(const std::vector<LayerOp>& ops, int64_t layer);
  // Starts a collective of the role; returns its handle (nothing and -1 when the role has one member).
  int64_t Start(const Role& role, CollectiveOp op, double bytes, Category category, uint8_t stream = 0);
  void Wait(int64_t handle, Category category);
  void Collective(const Role& role, CollectiveOp op, double bytes, Category category);
  // An op of the device's own (the optimizer), priced alone.
  void Compute(std::string_view what, const LocalOpCost& cost, Category category);
  // Appends a timeline op to the device's program and, when recording, what it is (`what`: a static name).
  void Emit(const TimelineOp& op, std::string_view what);
  // Waits for the ZeRO-3 gather prefetched for the next layer, if any (the step's end, or a lone layer's).
  void WaitPrefetchedGather();

  // What the ops emitted from now on belong to (the schedule's labels); outside a layer.
  void SetLabelContext(Category phase, int64_t micro_batch, int64_t chunk);

  const StepRoles& roles() const { return roles_; }
  const ComputeModel& compute() const { return compute_; }
  const StackSpec& stack() const { return stack_; }
  // The collective's predicted time, scaled by the calibration's comm_scale (cached).
  double CollectiveSeconds(const Role& role, CollectiveOp op, double bytes);
  double PermuteSeconds(const std::vector<std::string>& axes, double bytes,
                        const std::vector<std::pair<int, int>>& pairs);
  // Bytes per weight of the ZeRO-3 / FSDP all-gathers and of the distributed optimizer's weight all-gather: the
  // stack's, else the compute dtype's (fp8 weights with Transformer Engine's fp8 recipe: one byte).
  double WeightGatherBytes() const;
  double slowdown() const { return slowdown_; }
  bool recording() const { return record_; }
  const std::vector<int64_t>& simulated() const { return simulated_; }
  const std::vector<int64_t>& index_of() const { return index_of_; }
  // REQUIRES: ModelStepOptions::record_schedule. Per simulated device, what each op of its program is.
  const std::vector<std::vector<OpLabel>>& labels() const { return labels_of_; }
  // FLOPs of the matrix ops the programs execute, every device of the mesh together (a simulated device of the
  // reduced simulation stands for mesh.size() / simulated devices).
  double ExecutedFlops() const;

 private:
  void RegisterGroups(const Role& role);
  // Prices an op alone and with communication kernels holding SMs beside it (the wave effect).
  PricedOp Price(double flops, double bytes, ContractionDims dims, DType dtype) const;
  // `kernels` the host launches for it (eager stacks: each costs the stack's launch time).
  void Compute(std::string_view what, const PricedOp& op, Category category, int kernels = 1);
  // A compute op's price: its durations and the kernels the host launches for it (0: not run).
  struct OpPrice {
    PricedOp priced;
    int kernels = 1;
  };
  // The prices of a list's compute ops, computed the first time the list is run (a step runs each list many
  // times; the prices do not depend on the device: a straggler's speed applies in Compute).
  const std::vector<OpPrice>& PricesOf(const std::vector<LayerOp>& ops);
  PricedOp MatmulPrice(const LayerOp& op);
  OpPrice MemoryPrice(const LayerOp& op) const;
  const KernelPasses& PassesOf(const LayerOp& op) const;
  PricedOp FlashAttention(const FlashAttentionShape& a);
  // FlashAttention-2 (PyTorch SDPA) against the device's measured cuDNN rate.
  double AttentionRateScale() const;
  // ZeRO-3 / FSDP: a layer's weights all-gathered before use, the next layer's gather prefetched on the second
  // stream while this one computes (FSDP's forward / backward prefetch).
  void GatherLayerWeights(const LayerOp& op);
  const Role& RoleOf(LayerGroup group) const;

  const ModelConfig& c_;
  const Mesh& mesh_;
  ParallelDegrees d_;
  ComputeModel compute_;
  CollectiveModel collectives_;
  const StackSpec& stack_;
  StepRoles roles_;
  DType act_dtype_ = DType::kBF16;
  double size_ = 2, slowdown_ = 0, comm_scale_ = 1, host_launch_seconds_ = 0;
  bool uniform_slowdown_ = false, fp8_ = false, fp8_casts_ = false, record_ = false;
  std::vector<int64_t> simulated_, index_of_;
  std::vector<double> flops_;  // per simulated device: matrix FLOPs of its program
  std::unique_ptr<StepTimeline> timeline_;
  std::map<const Role*, std::vector<int32_t>> group_ids_;
  std::map<std::tuple<const Role*, CollectiveOp, double>, double> collective_cache_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, DType>, PricedOp> matmul_cache_;
  std::map<const std::vector<LayerOp>*, std::vector<OpPrice>> prices_;  // PricesOf
  // The current device.
  int64_t device_ = 0, next_handle_ = 0, prefetched_gather_ = -1;
  double speed_ = 1;
  std::vector<TimelineOp>* ops_ = nullptr;
  std::vector<int64_t> handles_;  // RunOps: the timeline handle of each kStart of the list
  // Recording the schedule: each device's op labels, parallel to its program, and the current label context.
  std::vector<std::vector<OpLabel>> labels_of_;
  std::vector<OpLabel>* labels_ = nullptr;
  std::vector<std::string_view> handle_ops_;  // this device's handle -> its collective's name
  Category phase_ = kForward;
  int32_t layer_ = -1, micro_batch_ = -1, chunk_ = 0;
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_MODEL_INTERNAL_STEP_PRICER_H_
