// StepPricer: priced ops on the simulated devices' programs (model/internal/step_pricer.h).
#include "model/internal/step_pricer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.h"

namespace spmdsim::internal {
namespace {

// The compute slowdown while communication is in flight, for ops that carry no durations of their own under
// contention: NCCL runs one CTA per channel, each on an SM (DeviceComputeSpec::collective_units; 16, NCCL's NVLS
// channel count, where the spec has none) -> units / SMs. TPUs do collectives in dedicated ICI hardware and DMA
// engines: 0.
double DefaultCommSlowdown(const DeviceComputeSpec* spec, const Topology& topology) {
  if (spec == nullptr || topology.platform() != Platform::kGpu) return 0;
  const int units = spec->collective_units > 0 ? spec->collective_units : 16;
  return std::min(0.5, static_cast<double>(units) / spec->compute_units);
}

Category PhaseCategory(LayerPhase phase) {
  switch (phase) {
    case LayerPhase::kForward: return kForward;
    case LayerPhase::kBackward: return kBackward;
    case LayerPhase::kRecompute: return kRecompute;
  }
  return kForward;
}

// The breakdown category of a layer op's compute.
Category ComputeCategory(const LayerOp& op) { return op.head ? kHead : PhaseCategory(op.phase); }

Category CommCategory(LayerGroup group) {
  switch (group) {
    case LayerGroup::kTensor: return kTensorComm;
    case LayerGroup::kContext: return kContextComm;
    case LayerGroup::kExpert: return kExpertComm;
    case LayerGroup::kZero: return kDataComm;
  }
  return kTensorComm;
}

}  // namespace

StepRoles::StepRoles(const ModelConfig& c, const ParallelDegrees& d) {
  const ModelParallelism& par = c.parallel;
  tensor = {par.tensor_axes, d.tensor};
  data = {par.data_axes, d.data};
  context = {par.context_axes, d.context};
  pipeline = {par.pipeline_axes, d.pipeline};
  expert = {par.expert_axes, d.expert};
  for (const std::string& a : par.data_axes) dp_and_cp.axes.push_back(a);
  for (const std::string& a : par.context_axes) dp_and_cp.axes.push_back(a);
  dp_and_cp.size = d.data * d.context;
  for (const std::string& a : par.data_axes)
    if (std::find(par.expert_axes.begin(), par.expert_axes.end(), a) == par.expert_axes.end())
      expert_dp.axes.push_back(a);
  for (const std::string& a : par.context_axes) expert_dp.axes.push_back(a);
  expert_dp.size = d.expert_data;
  // Hybrid sharding: ZeRO over its shard axes (and context), replicas over the other data axes.
  const std::vector<std::string>& zero_axes = par.zero_axes.empty() ? par.data_axes : par.zero_axes;
  for (const std::string& a : zero_axes) zero.axes.push_back(a);
  for (const std::string& a : par.context_axes) zero.axes.push_back(a);
  zero.size = d.zero * d.context;
  for (const std::string& a : par.data_axes)
    if (std::find(zero_axes.begin(), zero_axes.end(), a) == zero_axes.end()) replicas.axes.push_back(a);
  replicas.size = d.data / d.zero;
}

StepPricer::StepPricer(const ValidatedModel& model, const ModelStepOptions& options)
    : c_(model.config()), mesh_(model.mesh()), d_(model.degrees()),
      compute_(*mesh_.topology(), options.roofline,
               ComputeOptions{options.clock, options.mechanisms.slowest_device ? mesh_.size() : 1,
                              options.calibration.compute_scale}),
      collectives_(mesh_, options.collectives),
      stack_(StackSpecFor(ModelStackChoice(model).stack)),
      roles_(c_, d_) {
  // fp8 training (Transformer Engine) runs the matmuls in fp8 and keeps activations, attention and
  // communication in bf16.
  fp8_ = c_.dtype == DType::kF8E4M3FN || c_.dtype == DType::kF8E5M2;
  act_dtype_ = fp8_ ? DType::kBF16 : c_.dtype;
  size_ = static_cast<double>(DTypeSize(act_dtype_));
  slowdown_ = options.comm_slowdown >= 0 ? options.comm_slowdown
                                         : DefaultCommSlowdown(compute_.spec(), *mesh_.topology());
  // An explicit slowdown replaces the per-op wave effect with that uniform fraction.
  uniform_slowdown_ = options.comm_slowdown >= 0;
  record_ = options.record_schedule;
  const StepCalibration& k = options.calibration;
  for (double f : {k.compute_scale, k.comm_scale, k.host_launch_scale}) {
    if (!(f > 0) || !std::isfinite(f))
      Throw(ErrorCode::kInvalidArgument, "model '{}': calibration figures must be > 0, got {}", c_.name, f);
  }
  comm_scale_ = k.comm_scale;
  host_launch_seconds_ = options.mechanisms.host_launch ? stack_.host_launch_seconds * k.host_launch_scale : 0;
  fp8_casts_ = options.mechanisms.fp8_casts && stack_.fp8_casts;
}

void StepPricer::Prepare(std::vector<int64_t> simulated, bool reduced) {
  simulated_ = std::move(simulated);
  index_of_.assign(static_cast<size_t>(mesh_.size()), -1);
  for (size_t i = 0; i < simulated_.size(); ++i)
    index_of_[static_cast<size_t>(simulated_[i])] = static_cast<int64_t>(i);
  timeline_ = std::make_unique<StepTimeline>(static_cast<int64_t>(simulated_.size()), slowdown_);
  flops_.assign(simulated_.size(), 0.0);
  if (record_) labels_of_.assign(simulated_.size(), {});
  group_ids_.clear();
  const StepRoles& r = roles_;
  for (const Role* role : {&r.tensor, &r.data, &r.context, &r.expert, &r.dp_and_cp, &r.expert_dp, &r.zero,
                           &r.replicas}) {
    auto& ids = group_ids_[role];
    ids.assign(simulated_.size(), -1);
    if (role->size <= 1) continue;
    if (reduced) {  // every group is the device alone: its members are identical and not simulated
      for (size_t i = 0; i < simulated_.size(); ++i) ids[i] = timeline_->AddGroup({static_cast<int64_t>(i)});
      continue;
    }
    for (const std::vector<int64_t>& group : mesh_.PositionGroups(role->axes)) {
      std::vector<int64_t> members;
      for (int64_t pos : group) members.push_back(index_of_[static_cast<size_t>(pos)]);
      const int32_t id = timeline_->AddGroup(members);
      for (int64_t pos : group) ids[static_cast<size_t>(index_of_[static_cast<size_t>(pos)])] = id;
    }
  }
}

void StepPricer::SetDevice(int64_t device, double speed) {
  device_ = device;
  ops_ = &timeline_->program(device);
  if (record_) labels_ = &labels_of_[static_cast<size_t>(device)];
  handle_ops_.clear();
  next_handle_ = 0;
  prefetched_gather_ = -1;
  speed_ = speed;
}

void StepPricer::RunOps(const std::vector<LayerOp>& ops, int64_t layer) {
  const Category outer_phase = phase_;
  const int32_t outer_layer = layer_;
  layer_ = static_cast<int32_t>(layer);
  handles_.assign(ops.size(), -1);
  const std::vector<OpPrice>& prices = PricesOf(ops);
  for (size_t i = 0; i < ops.size(); ++i) {
    const LayerOp& op = ops[i];
    phase_ = PhaseCategory(op.phase);
    switch (op.kind) {
      case LayerOpKind::kMatmul:
      case LayerOpKind::kFlashAttention:
      case LayerOpKind::kMemory:
        if (prices[i].kernels == 0) break;  // not run (fp8 casts without the stack's fp8 recipe)
        flops_[static_cast<size_t>(device_)] += op.Flops();
        Compute(op.name, prices[i].priced, ComputeCategory(op), prices[i].kernels);
        break;
      case LayerOpKind::kStart:
        handles_[i] = Start(RoleOf(op.group), op.op, op.bytes, CommCategory(op.group), op.stream);
        break;
      case LayerOpKind::kWait:
        Wait(handles_[static_cast<size_t>(op.start)], CommCategory(ops[static_cast<size_t>(op.start)].group));
        break;
      case LayerOpKind::kGatherWeights:
        GatherLayerWeights(op);
        break;
    }
  }
  phase_ = outer_phase;
  layer_ = outer_layer;
}

const Role& StepPricer::RoleOf(LayerGroup group) const {
  switch (group) {
    case LayerGroup::kTensor: return roles_.tensor;
    case LayerGroup::kContext: return roles_.context;
    case LayerGroup::kExpert: return roles_.expert;
    case LayerGroup::kZero: return roles_.zero;
  }
  return roles_.tensor;
}

PricedOp StepPricer::Price(double flops, double bytes, ContractionDims dims, DType dtype) const {
  PricedOp p{compute_.Cost(flops, bytes, dims, dtype).seconds};
  if (const DeviceComputeSpec* spec = compute_.spec(); spec != nullptr && !uniform_slowdown_) {
    if (spec->collective_units > 0)
      p.with_collective = compute_.Cost(flops, bytes, dims, dtype, 1.0, spec->collective_units).seconds;
    if (spec->p2p_units > 0) p.with_p2p = compute_.Cost(flops, bytes, dims, dtype, 1.0, spec->p2p_units).seconds;
  }
  return p;
}

void StepPricer::Emit(const TimelineOp& op, std::string_view what) {
  ops_->push_back(op);
  if (record_) labels_->push_back({what, phase_, layer_, micro_batch_, chunk_});
}

void StepPricer::Compute(std::string_view what, const PricedOp& op, Category category, int kernels) {
  auto scaled = [this](double s) { return s < 0 ? s : s / speed_; };
  Emit(TimelineOp::Compute(op.seconds / speed_, category, scaled(op.with_collective), scaled(op.with_p2p),
                           kernels * host_launch_seconds_),
       what);
}

void StepPricer::Compute(std::string_view what, const LocalOpCost& cost, Category category) {
  Compute(what, PricedOp{cost.seconds}, category);
}

const std::vector<StepPricer::OpPrice>& StepPricer::PricesOf(const std::vector<LayerOp>& ops) {
  auto [it, inserted] = prices_.try_emplace(&ops);
  if (!inserted) return it->second;
  std::vector<OpPrice>& prices = it->second;
  prices.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const LayerOp& op = ops[i];
    if (op.kind == LayerOpKind::kMatmul) prices[i].priced = MatmulPrice(op);
    if (op.kind == LayerOpKind::kFlashAttention) prices[i].priced = FlashAttention(op.attention);
    if (op.kind == LayerOpKind::kMemory) prices[i] = MemoryPrice(op);
  }
  return prices;
}

PricedOp StepPricer::MatmulPrice(const LayerOp& op) {
  const auto im = static_cast<int64_t>(op.m), ik = static_cast<int64_t>(op.k), in = static_cast<int64_t>(op.n);
  const auto ib = static_cast<int64_t>(op.batch);
  // A step repeats a few shapes many times: price each once (the tile search is the costly part).
  const auto key = std::make_tuple(ib, im, in, ik, op.dtype);
  auto it = matmul_cache_.find(key);
  if (it == matmul_cache_.end()) {
    const double bytes = op.batch * (op.m * op.k + op.k * op.n + op.m * op.n) * size_;
    it = matmul_cache_.emplace(key, Price(op.Flops(), bytes, ContractionDims{ib, im, in, ik}, op.dtype)).first;
  }
  return it->second;
}

StepPricer::OpPrice StepPricer::MemoryPrice(const LayerOp& op) const {
  if (op.memory == LayerMemory::kFp8CastTranspose && !fp8_casts_) return {PricedOp{}, 0};
  if (op.memory == LayerMemory::kPlain) {  // the elements moved, of the activation dtype
    const double bytes = op.elements * size_ + op.extra_bytes;
    return {Price(op.elements, bytes, ContractionDims{}, act_dtype_), 1};
  }
  const KernelPasses& k = PassesOf(op);
  const double bytes = op.elements * k.bytes_per_element(size_) + op.extra_bytes;
  PricedOp p = Price(op.elements, bytes, ContractionDims{}, act_dtype_);
  // Every kernel after the first adds its launch gap on the device.
  const double gaps = (k.kernels - 1) * (compute_.spec() != nullptr ? compute_.spec()->kernel_launch_seconds : 0.0);
  p.seconds += gaps;
  if (p.with_collective >= 0) p.with_collective += gaps;
  if (p.with_p2p >= 0) p.with_p2p += gaps;
  return {p, k.kernels};
}

// The stack's passes of a memory-bound op (model/stack.h); LayerNorm is one kernel in every stack, RMSNorm the
// stack's (eager PyTorch: composite).
const KernelPasses& StepPricer::PassesOf(const LayerOp& op) const {
  static constexpr KernelPasses kLayerNormForward{2, 0, 1}, kLayerNormBackward{3, 0, 1};
  static constexpr KernelPasses kCastTranspose{1, 2, 1};
  const bool backward = op.phase == LayerPhase::kBackward;
  const bool swiglu = c_.activation == Activation::kSwiglu;
  switch (op.memory) {
    case LayerMemory::kNorm:
      if (c_.norm == Norm::kLayerNorm) return backward ? kLayerNormBackward : kLayerNormForward;
      return backward ? stack_.norm_backward : stack_.norm_forward;
    case LayerMemory::kResidual: return backward ? stack_.residual_backward : stack_.residual_forward;
    case LayerMemory::kActivation:
      if (swiglu) return backward ? stack_.swiglu_backward : stack_.swiglu_forward;
      return backward ? stack_.gelu_backward : stack_.gelu_forward;
    case LayerMemory::kRope: return backward ? stack_.rope_backward : stack_.rope_forward;
    case LayerMemory::kCrossEntropy: return backward ? stack_.cross_entropy_backward : stack_.cross_entropy_forward;
    case LayerMemory::kFp8CastTranspose: return kCastTranspose;
    case LayerMemory::kPlain: break;
  }
  SPMDSIM_CHECK(false, "a plain memory op has no kernel passes");
  return kCastTranspose;
}

// Causal flash attention of the local heads with the stack's kernel (model/stack.h AttentionKernel): its FLOPs
// (ModelStepTimes::hardware_flops) are those ComputeModel::FlashAttention prices (FlashAttentionShape::Flops).
PricedOp StepPricer::FlashAttention(const FlashAttentionShape& a) {
  auto cost = [&](int units) {
    return compute_.FlashAttention(a.batch, a.heads, a.kv_heads, a.q_len, a.kv_len, a.head_dim, a.causal,
                                   a.backward, act_dtype_, units, AttentionRateScale()).seconds;
  };
  PricedOp p{cost(0)};
  if (const DeviceComputeSpec* spec = compute_.spec(); spec != nullptr && !uniform_slowdown_) {
    if (spec->collective_units > 0) p.with_collective = cost(spec->collective_units);
    if (spec->p2p_units > 0) p.with_p2p = cost(spec->p2p_units);
  }
  return p;
}

// FlashAttention-2 (PyTorch SDPA) against the device's measured cuDNN rate: on H100 at 8192 keys, causal,
// head_dim 128, forward + backward, 11.89 ms against cuDNN's 7.4875 ms (TransformerEngine
// docs/examples/attention/attention.ipynb, section 1.3).
double StepPricer::AttentionRateScale() const {
  return stack_.attention == AttentionKernel::kFlashAttention2 ? 7.4875 / 11.89 : 1.0;
}

double StepPricer::CollectiveSeconds(const Role& role, CollectiveOp op, double bytes) {
  const auto key = std::make_tuple(&role, op, bytes);
  auto it = collective_cache_.find(key);
  if (it != collective_cache_.end()) return it->second;
  const double seconds = collectives_.Cost(op, role.axes, bytes).seconds * comm_scale_;
  collective_cache_.emplace(key, seconds);
  return seconds;
}

double StepPricer::PermuteSeconds(const std::vector<std::string>& axes, double bytes,
                                  const std::vector<std::pair<int, int>>& pairs) {
  return collectives_.Cost(CollectiveOp::kPermute, axes, bytes, pairs).seconds * comm_scale_;
}

int64_t StepPricer::Start(const Role& role, CollectiveOp op, double bytes, Category category, uint8_t stream) {
  if (role.size <= 1) return -1;
  const int32_t group = group_ids_[&role][static_cast<size_t>(device_)];
  const int64_t handle = next_handle_++;
  Emit(TimelineOp::Start(handle, group, CollectiveSeconds(role, op, bytes), category, stream), CollectiveOpName(op));
  if (record_) handle_ops_.push_back(CollectiveOpName(op));  // handles count from 0 on each device
  return handle;
}

void StepPricer::Wait(int64_t handle, Category category) {
  if (handle >= 0) Emit(TimelineOp::Wait(handle, category), record_ ? handle_ops_[static_cast<size_t>(handle)] : "");
}

void StepPricer::Collective(const Role& role, CollectiveOp op, double bytes, Category category) {
  Wait(Start(role, op, bytes, category), category);
}

void StepPricer::GatherLayerWeights(const LayerOp& op) {
  const Role& zero = roles_.zero;
  if (zero.size <= 1) return;
  const double bytes = op.params * WeightGatherBytes();
  if (prefetched_gather_ < 0) prefetched_gather_ = Start(zero, CollectiveOp::kAllGather, bytes, kDataComm, 1);
  Wait(prefetched_gather_, kDataComm);
  prefetched_gather_ = Start(zero, CollectiveOp::kAllGather, bytes, kDataComm, 1);
}

void StepPricer::WaitPrefetchedGather() {
  Wait(prefetched_gather_, kDataComm);
  prefetched_gather_ = -1;
}

double StepPricer::WeightGatherBytes() const {
  if (stack_.weight_gather_bytes > 0) return stack_.weight_gather_bytes;
  return fp8_ && stack_.fp8_casts ? 1.0 : size_;
}

void StepPricer::SetLabelContext(Category phase, int64_t micro_batch, int64_t chunk) {
  phase_ = phase;
  layer_ = -1;
  micro_batch_ = static_cast<int32_t>(micro_batch);
  chunk_ = static_cast<int32_t>(chunk);
}

double StepPricer::ExecutedFlops() const {
  double sum = 0;
  for (double f : flops_) sum += f;
  return sum * static_cast<double>(mesh_.size()) / static_cast<double>(simulated_.size());
}

}  // namespace spmdsim::internal
