// PredictModelStep: the model workload's training step as per-device programs on a StepTimeline
// (model/step.h; the op list and its sources are in docs/model.md).
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "common/error.h"
#include "cost/compute_model.h"
#include "cost/timeline.h"
#include "model/accounting.h"
#include "model/pipeline.h"
#include "model/step.h"

namespace spmdsim {

namespace {

// Categories of the timeline breakdown.
enum Category : uint8_t {
  kForward, kBackward, kRecompute, kHead, kOptimizer,                   // compute
  kTensorComm, kDataComm, kPipelineComm, kContextComm, kExpertComm,     // communication
  kNumCategories
};
constexpr std::array<const char*, kNumCategories> kCategoryNames = {
    "forward", "backward", "recompute", "head", "optimizer", "tensor", "data", "pipeline", "context", "expert"};

// The compute slowdown while communication is in flight, for ops that carry no durations of their own under
// contention: NCCL runs one CTA per channel, each on an SM (DeviceComputeSpec::collective_units; 16, NCCL's NVLS
// channel count, where the spec has none) -> units / SMs. TPUs do collectives in dedicated ICI hardware and DMA
// engines: 0.
double DefaultCommSlowdown(const DeviceComputeSpec* spec, const Topology& topology) {
  if (spec == nullptr || topology.platform() != Platform::kGpu) return 0;
  const int units = spec->collective_units > 0 ? spec->collective_units : 16;
  return std::min(0.5, static_cast<double>(units) / spec->compute_units);
}

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

// The communication roles and their collective groups on the simulated devices.
struct Role {
  std::vector<std::string> axes;
  int64_t size = 1;
};

class StepBuilder {
 public:
  StepBuilder(const ValidatedModel& model, const ModelStepOptions& options)
      : StepBuilder(model.config(), model.mesh(), model.degrees(), options) {}
  StepBuilder(const ModelConfig& c, const Mesh& mesh, const ParallelDegrees& degrees, const ModelStepOptions& options)
      : c_(c), mesh_(mesh), d_(degrees),
        compute_(*mesh.topology(), options.roofline,
                 ComputeOptions{options.clock, options.mechanisms.slowest_device ? mesh.size() : 1,
                                options.calibration.compute_scale}),
        collectives_(mesh, options.collectives),
        stack_(StackSpecFor(ResolveStack(c.stack, *mesh.topology()))) {
    tensor_ = {c.parallel.tensor_axes, d_.tensor};
    data_ = {c.parallel.data_axes, d_.data};
    context_ = {c.parallel.context_axes, d_.context};
    pipeline_ = {c.parallel.pipeline_axes, d_.pipeline};
    expert_ = {c.parallel.expert_axes, d_.expert};
    for (const std::string& a : c.parallel.data_axes) dp_and_cp_.axes.push_back(a);
    for (const std::string& a : c.parallel.context_axes) dp_and_cp_.axes.push_back(a);
    dp_and_cp_.size = d_.data * d_.context;
    // Routed experts' replicas: the data axes that do not split experts, and the context axes.
    for (const std::string& a : c.parallel.data_axes)
      if (std::find(c.parallel.expert_axes.begin(), c.parallel.expert_axes.end(), a) == c.parallel.expert_axes.end())
        expert_dp_.axes.push_back(a);
    for (const std::string& a : c.parallel.context_axes) expert_dp_.axes.push_back(a);
    expert_dp_.size = d_.expert_data;
    // Hybrid sharding: ZeRO over its shard axes (and context), replicas over the other data axes.
    const std::vector<std::string>& zero_axes = c.parallel.zero_axes.empty() ? c.parallel.data_axes
                                                                             : c.parallel.zero_axes;
    for (const std::string& a : zero_axes) zero_.axes.push_back(a);
    for (const std::string& a : c.parallel.context_axes) zero_.axes.push_back(a);
    zero_.size = d_.zero * d_.context;
    for (const std::string& a : c.parallel.data_axes)
      if (std::find(zero_axes.begin(), zero_axes.end(), a) == zero_axes.end()) replicas_.axes.push_back(a);
    replicas_.size = d_.data / d_.zero;
    layout_ = PipelineLayerLayout(c, d_.pipeline);
    sp_ = c.parallel.sequence_parallel && d_.tensor > 1;
    // fp8 training (Transformer Engine) runs the matmuls in fp8 and keeps activations, attention and
    // communication in bf16.
    const bool fp8 = c.dtype == DType::kF8E4M3FN || c.dtype == DType::kF8E5M2;
    fp8_ = fp8;
    act_dtype_ = fp8 ? DType::kBF16 : c.dtype;
    size_ = static_cast<double>(DTypeSize(act_dtype_));
    tokens_ = c.micro_batch * c.seq / d_.context;
    norm_tokens_ = sp_ ? static_cast<double>(tokens_) / d_.tensor : static_cast<double>(tokens_);
    slowdown_ = options.comm_slowdown >= 0 ? options.comm_slowdown
                                           : DefaultCommSlowdown(compute_.spec(), *mesh.topology());
    // An explicit slowdown replaces the per-op wave effect with that uniform fraction.
    uniform_slowdown_ = options.comm_slowdown >= 0;
    reduced_ = options.reduced && options.speed_factors.empty();
    record_ = options.record_schedule;
    blocking_p2p_ = options.blocking_p2p;
    const StepCalibration& k = options.calibration;
    for (double f : {k.compute_scale, k.comm_scale, k.host_launch_scale}) {
      if (!(f > 0) || !std::isfinite(f))
        Throw(ErrorCode::kInvalidArgument, "model '{}': calibration figures must be > 0, got {}", c.name, f);
    }
    comm_scale_ = k.comm_scale;
    host_launch_seconds_ = options.mechanisms.host_launch ? stack_.host_launch_seconds * k.host_launch_scale : 0;
    fp8_casts_ = options.mechanisms.fp8_casts && stack_.fp8_casts;
    speed_factors_ = options.speed_factors;
    for (const auto& [id, factor] : speed_factors_) {
      if (!(factor > 0) || !std::isfinite(factor))
        Throw(ErrorCode::kInvalidArgument, "model '{}': speed factor of device {} must be > 0, got {}", c.name, id,
              factor);
    }
  }

  const ParallelDegrees& degrees() const { return d_; }
  double slowdown() const { return slowdown_; }

  // The simulated devices: every position, or one per pipeline stage (coordinate 0 on every other axis).
  std::vector<int64_t> SimulatedPositions() const {
    std::vector<int64_t> out;
    for (int64_t pos = 0; pos < mesh_.size(); ++pos) {
      if (!reduced_ || IsRepresentative(pos)) out.push_back(pos);
    }
    return out;
  }

  std::unique_ptr<StepTimeline> Build() {
    Prepare(SimulatedPositions());
    for (size_t i = 0; i < simulated_.size(); ++i) BuildDevice(static_cast<int64_t>(i));
    return std::move(timeline_);
  }

  // One layer's forward, or its backward (with its recompute), alone on the first simulated device, its
  // collectives costed for the whole group (the reduced simulation): what Korthikanti et al. 2022 time per layer
  // (Table 4). The first layer of the model that is (or is not) MoE.
  std::unique_ptr<StepTimeline> BuildLayer(bool backward, bool moe) {
    reduced_ = true;
    Prepare({SimulatedPositions().front()});
    device_ = 0;
    ops_ = &timeline_->program(0);
    if (record_) labels_ = &labels_of_[0];
    handle_ops_.clear();
    next_handle_ = 0;
    prefetched_gather_ = -1;
    int64_t layer = 0;
    while (layer + 1 < c_.layers && IsMoe(layer) != moe) ++layer;
    if (backward) LayerBackward(layer);
    else LayerForward(layer, kForward);
    Wait(prefetched_gather_, kDataComm);
    return std::move(timeline_);
  }

  const std::vector<int64_t>& simulated() const { return simulated_; }
  // REQUIRES: ModelStepOptions::record_schedule. Per simulated device, what each op of its program is.
  const std::vector<std::vector<OpLabel>>& labels() const { return labels_of_; }
  // FLOPs of the matrix ops the programs execute, every device of the mesh together (a simulated device of the
  // reduced simulation stands for mesh.size() / simulated devices).
  double ExecutedFlops() const {
    double sum = 0;
    for (double f : flops_) sum += f;
    return sum * static_cast<double>(mesh_.size()) / static_cast<double>(simulated_.size());
  }

 private:
  void Prepare(std::vector<int64_t> simulated) {
    simulated_ = std::move(simulated);
    index_of_.assign(static_cast<size_t>(mesh_.size()), -1);
    for (size_t i = 0; i < simulated_.size(); ++i)
      index_of_[static_cast<size_t>(simulated_[i])] = static_cast<int64_t>(i);
    timeline_ = std::make_unique<StepTimeline>(static_cast<int64_t>(simulated_.size()), slowdown_);
    flops_.assign(simulated_.size(), 0.0);
    if (record_) labels_of_.assign(simulated_.size(), {});
    pipeline_groups_ = mesh_.PositionGroups(c_.parallel.pipeline_axes);
    group_ids_.clear();
    for (const Role* role : {&tensor_, &data_, &context_, &expert_, &dp_and_cp_, &expert_dp_, &zero_, &replicas_})
      RegisterGroups(*role);
  }

  bool IsRepresentative(int64_t pos) const {
    for (const std::string& axis : mesh_.axis_names()) {
      const bool pipeline = std::find(c_.parallel.pipeline_axes.begin(), c_.parallel.pipeline_axes.end(), axis) !=
                            c_.parallel.pipeline_axes.end();
      if (!pipeline && mesh_.IndexInGroup(pos, std::vector<std::string>{axis}) != 0) return false;
    }
    return true;
  }

  // Timeline groups of a role: in the reduced simulation every group is the device alone (its members are
  // identical and not simulated); else the mesh's groups along the role's axes.
  void RegisterGroups(const Role& role) {
    auto& ids = group_ids_[&role];
    ids.assign(simulated_.size(), -1);
    if (role.size <= 1) return;
    if (reduced_) {
      for (size_t i = 0; i < simulated_.size(); ++i) ids[i] = timeline_->AddGroup({static_cast<int64_t>(i)});
      return;
    }
    for (const std::vector<int64_t>& group : mesh_.PositionGroups(role.axes)) {
      std::vector<int64_t> members;
      for (int64_t pos : group) members.push_back(index_of_[static_cast<size_t>(pos)]);
      const int32_t id = timeline_->AddGroup(members);
      for (int64_t pos : group) ids[static_cast<size_t>(index_of_[static_cast<size_t>(pos)])] = id;
    }
  }

  // --- op emitters (on the current device's program) ---

  // Prices an op alone and with communication kernels holding SMs beside it (the wave effect).
  PricedOp Price(double flops, double bytes, ContractionDims dims, DType dtype) const {
    PricedOp p{compute_.Cost(flops, bytes, dims, dtype).seconds};
    if (const DeviceComputeSpec* spec = compute_.spec(); spec != nullptr && !uniform_slowdown_) {
      if (spec->collective_units > 0)
        p.with_collective = compute_.Cost(flops, bytes, dims, dtype, 1.0, spec->collective_units).seconds;
      if (spec->p2p_units > 0) p.with_p2p = compute_.Cost(flops, bytes, dims, dtype, 1.0, spec->p2p_units).seconds;
    }
    return p;
  }
  // Appends an op to the current device's program and, when recording, what it is (`what`: a static name).
  void Emit(const TimelineOp& op, std::string_view what) {
    ops_->push_back(op);
    if (record_) labels_->push_back({what, phase_, layer_, micro_batch_, chunk_});
  }
  // `kernels` the host launches for it (eager stacks: each costs the stack's launch time).
  void Compute(std::string_view what, const PricedOp& op, Category category, int kernels = 1) {
    auto scaled = [this](double s) { return s < 0 ? s : s / speed_; };
    Emit(TimelineOp::Compute(op.seconds / speed_, category, scaled(op.with_collective), scaled(op.with_p2p),
                             kernels * host_launch_seconds_),
         what);
  }
  void Compute(std::string_view what, const LocalOpCost& cost, Category category) {
    Compute(what, PricedOp{cost.seconds}, category);
  }
  // [m, k] x [k, n] (batch of them).
  void Matmul(std::string_view what, double m, double k, double n, Category category, double batch = 1,
              std::optional<DType> dtype = std::nullopt) {
    const auto im = static_cast<int64_t>(m), ik = static_cast<int64_t>(k), in = static_cast<int64_t>(n);
    const auto ib = static_cast<int64_t>(batch);
    const DType type = dtype.value_or(c_.dtype);
    // A step repeats a few shapes many times: price each once (the tile search is the costly part).
    const auto key = std::make_tuple(ib, im, in, ik, type);
    flops_[static_cast<size_t>(device_)] += 2.0 * batch * m * k * n;
    auto it = matmul_cache_.find(key);
    if (it == matmul_cache_.end()) {
      const double flops = 2.0 * batch * m * k * n;
      const double bytes = batch * (m * k + k * n + m * n) * size_;
      it = matmul_cache_.emplace(key, Price(flops, bytes, ContractionDims{ib, im, in, ik}, type)).first;
    }
    Compute(what, it->second, category);
  }
  // A memory-bound op moving `elements_moved` elements of the compute dtype (+ `extra_bytes`).
  void Elementwise(std::string_view what, double elements_moved, Category category, double extra_bytes = 0) {
    const double bytes = elements_moved * size_ + extra_bytes;
    Compute(what, Price(elements_moved, bytes, ContractionDims{}, act_dtype_), category);
  }
  // One memory-bound op of the stack over `elements` elements (its passes and kernels: model/stack.h).
  void Kernels(std::string_view what, const KernelPasses& k, double elements, Category category,
               double extra_bytes = 0) {
    const double bytes = elements * k.bytes_per_element(size_) + extra_bytes;
    PricedOp op = Price(elements, bytes, ContractionDims{}, act_dtype_);
    // Every kernel after the first adds its launch gap on the device.
    const double gaps = (k.kernels - 1) * (compute_.spec() != nullptr ? compute_.spec()->kernel_launch_seconds : 0.0);
    op.seconds += gaps;
    if (op.with_collective >= 0) op.with_collective += gaps;
    if (op.with_p2p >= 0) op.with_p2p += gaps;
    Compute(what, op, category, k.kernels);
  }
  // Transformer Engine's fp8 recipe around the layer's four linears (transformer_engine/pytorch/module/linear.py
  // and layernorm_linear.py / layernorm_mlp.py): the forward casts each linear's bf16 input to fp8 together with
  // the transposed copy its weight gradient needs (fp8_cast_transpose_fused: read 2 bytes, write 1 + 1 per
  // element; one kernel, its amax reduction fused); the backward casts each output gradient the same way before
  // its dgrad and wgrad GEMMs. Weights are cast once per step (weight caching: not priced); the attention core
  // stays bf16. Inputs: QKV [T, h], projection [T, q], FC1 [T, h], FC2 [T, f]; output gradients: [T, q + 2 kv],
  // [T, h], [T, f_in], [T, h] (MoE: the routed rows of the MLP).
  void Fp8Casts(bool moe, bool backward, Category category) {
    if (!fp8_ || !fp8_casts_) return;
    const double T = static_cast<double>(tokens_), h = static_cast<double>(c_.d_model);
    const double rows = moe ? Rows() : T;
    static constexpr KernelPasses kCastTranspose{1, 2, 1};
    if (backward) {
      for (double elements : {T * Qkv(), T * h, rows * FfIn(Ff(moe)), rows * h})
        Kernels("fp8 cast-transpose", kCastTranspose, elements, category);
    } else {
      for (double elements : {T * h, T * AttnWidth(), rows * h, rows * Ff(moe)})
        Kernels("fp8 cast-transpose", kCastTranspose, elements, category);
    }
  }
  double CollectiveSeconds(const Role& role, CollectiveOp op, double bytes) {
    const auto key = std::make_tuple(&role, op, bytes);
    auto it = collective_cache_.find(key);
    if (it != collective_cache_.end()) return it->second;
    const double seconds = collectives_.Cost(op, role.axes, bytes).seconds * comm_scale_;
    collective_cache_.emplace(key, seconds);
    return seconds;
  }
  // Starts a collective of the role; returns its handle (nothing and -1 when the role has one member).
  int64_t Start(const Role& role, CollectiveOp op, double bytes, Category category, uint8_t stream = 0) {
    if (role.size <= 1) return -1;
    const int32_t group = group_ids_[&role][static_cast<size_t>(device_)];
    const int64_t handle = next_handle_++;
    Emit(TimelineOp::Start(handle, group, CollectiveSeconds(role, op, bytes), category, stream), CollectiveOpName(op));
    if (record_) handle_ops_.push_back(CollectiveOpName(op));  // handles count from 0 on each device
    return handle;
  }
  void Wait(int64_t handle, Category category) {
    if (handle >= 0) Emit(TimelineOp::Wait(handle, category), record_ ? handle_ops_[static_cast<size_t>(handle)] : "");
  }
  void Collective(const Role& role, CollectiveOp op, double bytes, Category category) {
    Wait(Start(role, op, bytes, category), category);
  }

  // --- one transformer layer ---

  // Widths per tensor rank (Megatron's query_projection_size / kv_projection_size over TP): the queries, and
  // one of K or V (kv_heads of them: MHA heads, GQA groups, MQA 1; fewer than the ranks: one replicated).
  double AttnWidth() const { return 1.0 * c_.heads / d_.tensor * c_.effective_head_dim(); }
  double KvWidth() const {
    const double kv_local = c_.effective_kv_heads() >= d_.tensor ? 1.0 * c_.effective_kv_heads() / d_.tensor : 1.0;
    return kv_local * static_cast<double>(c_.effective_head_dim());
  }
  double Qkv() const { return AttnWidth() + 2 * KvWidth(); }  // the fused QKV projection's output width
  // Per head: the width Q and K are contracted over, and V's (MLA: qk + rope, v).
  double QkDim() const {
    return c_.is_mla() ? static_cast<double>(c_.mla.qk_head_dim + c_.mla.qk_rope_head_dim)
                       : static_cast<double>(c_.effective_head_dim());
  }
  double VDim() const {
    return c_.is_mla() ? static_cast<double>(c_.mla.v_head_dim) : static_cast<double>(c_.effective_head_dim());
  }
  // K and V of one token on one tensor rank, elements (what context parallelism moves).
  double KvElements() const { return c_.is_mla() ? 1.0 * c_.heads / d_.tensor * (QkDim() + VDim()) : 2 * KvWidth(); }
  double LocalHeads() const { return 1.0 * c_.heads / d_.tensor; }
  // Rotary embedding of q and k (read, write): the queries' and the keys' widths, not V's (MLA: the decoupled
  // rotary parts, k's shared by the heads).
  double RopeElements() const {
    if (c_.is_mla()) return 2.0 * static_cast<double>(tokens_) * (LocalHeads() + 1) * c_.mla.qk_rope_head_dim;
    return 2.0 * static_cast<double>(tokens_) * (AttnWidth() + KvWidth());
  }
  double Act() const { return static_cast<double>(tokens_) * c_.d_model; }  // [T, h] elements

  // Entering the tensor-parallel region: SP all-gathers the norm output (forward). `stream` 1: beside a
  // collective in flight on stream 0 (the shared expert's, under the MoE all_to_all).
  void EnterTp(uint8_t stream = 0, double width = 0) {
    if (sp_) Wait(Start(tensor_, CollectiveOp::kAllGather, Tokens(width) * size_, kTensorComm, stream), kTensorComm);
  }
  // Leaving it: all-reduce (or SP reduce-scatter) of the row-parallel output.
  void LeaveTp(uint8_t stream = 0) {
    if (d_.tensor > 1)
      Wait(Start(tensor_, sp_ ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, Act() * size_, kTensorComm,
                 stream),
           kTensorComm);
  }
  // [T, width] elements (width 0: d_model).
  double Tokens(double width) const { return static_cast<double>(tokens_) * (width > 0 ? width : c_.d_model); }
  double Heads() const { return 1.0 * c_.micro_batch * c_.heads / d_.tensor; }

  // Causal flash attention of the local heads: queries of this context rank against every key, with the
  // stack's kernel (model/stack.h AttentionKernel). MLA's q and k (qk + rope) and v (v) head widths enter as their
  // mean, which keeps both the FLOPs and the bytes. A layer in a sliding window of w keys runs causal within it:
  // sum_i min(i, w) of the s^2 / 2 pairs, priced as a non-causal attention over that many keys per query (its K /
  // V reads then count the window, not the whole sequence).
  // Its FLOPs (ModelStepTimes::hardware_flops) are those ComputeModel::FlashAttention prices: the causal half of
  // the score matrix (the kernel skips the masked blocks), the window's pairs, the backward's 5 matmuls 2.5 x.
  PricedOp FlashAttention(int64_t layer, bool backward) {
    const int64_t heads = c_.heads / d_.tensor;
    const int64_t kv = c_.is_mla() ? heads : std::max<int64_t>(1, c_.effective_kv_heads() / d_.tensor);
    const int64_t head_dim = static_cast<int64_t>(QkDim() + VDim()) / 2;
    const int64_t w = c_.attention_window.window, s = c_.seq;
    const bool windowed = layer < c_.layers && c_.is_windowed_layer(layer) && w < s;  // no context parallelism
    const int64_t q_len = windowed ? s : s / d_.context;
    const int64_t kv_len = windowed ? (w * (w + 1) / 2 + (s - w) * w + s - 1) / s : s;  // the window's pairs / s
    flops_[static_cast<size_t>(device_)] += (backward ? 2.5 : 1.0) * 4.0 * static_cast<double>(c_.micro_batch) *
                                            static_cast<double>(heads) * static_cast<double>(q_len) *
                                            static_cast<double>(kv_len) * static_cast<double>(head_dim) /
                                            (windowed ? 1 : 2);
    auto cost = [&](int units) {
      return compute_.FlashAttention(c_.micro_batch, heads, kv, q_len, kv_len, head_dim, /*causal=*/!windowed,
                                     backward, act_dtype_, units, AttentionRateScale()).seconds;
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
  double AttentionRateScale() const {
    return stack_.attention == AttentionKernel::kFlashAttention2 ? 7.4875 / 11.89 : 1.0;
  }

  void AttentionCoreForward(int64_t layer, Category cat) {
    const LabelScope label(this, cat == kRecompute ? kRecompute : phase_, layer_);
    const double s_q = static_cast<double>(c_.seq) / d_.context, s_kv = static_cast<double>(c_.seq);
    int64_t ring = -1;
    if (d_.context > 1) {  // ring attention: K and V of the other context ranks stream in under the compute
      ring = Start(context_, CollectiveOp::kAllGather, tokens_ * KvElements() * size_ * d_.context, kContextComm, 1);
    }
    if (c_.flash_attention) {
      Compute("flash attention", FlashAttention(layer, /*backward=*/false), cat);
    } else {
      // Materialised scores: a sliding window only masks them (the work is that of the whole causal prefix).
      const double scores = Heads() * s_q * s_kv;
      Matmul("attention scores", s_q, QkDim(), s_kv, cat, Heads(), act_dtype_);      // Q K^T
      // Megatron's causal fused softmax (scaled_upper_triang_masked_softmax) reads only the unmasked lower
      // triangle (about half) and writes every score.
      Elementwise("softmax", 1.5 * scores, cat);
      if (c_.dropout) Elementwise("dropout", 2 * scores, cat, scores);     // dropout: read, write, 1-byte mask
      Matmul("attention values", s_q, s_kv, VDim(), cat, Heads(), act_dtype_);       // P V
    }
    Wait(ring, kContextComm);
  }

  void AttentionCoreBackward(int64_t layer) {
    const double s_q = static_cast<double>(c_.seq) / d_.context, s_kv = static_cast<double>(c_.seq);
    int64_t ring = -1;
    if (d_.context > 1) {  // dK, dV travel back around the ring
      ring = Start(context_, CollectiveOp::kReduceScatter, tokens_ * KvElements() * size_ * d_.context, kContextComm,
                   1);
    }
    if (c_.flash_attention) {
      Compute("flash attention", FlashAttention(layer, /*backward=*/true), kBackward);
    } else {
      const double scores = Heads() * s_q * s_kv;
      Matmul("attention dP", s_q, VDim(), s_kv, kBackward, Heads(), act_dtype_);             // dP = dO V^T
      Matmul("attention dV", s_kv, s_q, VDim(), kBackward, Heads(), act_dtype_);             // dV = P^T dO
      if (c_.dropout) Elementwise("dropout", 2 * scores, kBackward, scores);
      Elementwise("softmax", 2 * scores, kBackward);  // softmax backward: read P and dP in the lower triangle, write dS
      Matmul("attention dQ", s_q, s_kv, QkDim(), kBackward, Heads(), act_dtype_);            // dQ = dS K
      Matmul("attention dK", s_kv, s_q, QkDim(), kBackward, Heads(), act_dtype_);            // dK = dS^T Q
    }
    Wait(ring, kContextComm);
  }

  // A norm over `width` (0: d_model) of the sequence-parallel tokens. LayerNorm is one kernel in every stack;
  // RMSNorm is the stack's (eager PyTorch: composite).
  const KernelPasses& NormPasses(bool backward) const {
    static constexpr KernelPasses kLayerNormForward{2, 0, 1}, kLayerNormBackward{3, 0, 1};
    if (c_.norm == Norm::kLayerNorm) return backward ? kLayerNormBackward : kLayerNormForward;
    return backward ? stack_.norm_backward : stack_.norm_forward;
  }
  void NormForward(Category cat, double width = 0) {
    Kernels("norm", NormPasses(false), norm_tokens_ * Width(width), cat);
  }
  void NormBackward(double width = 0) { Kernels("norm", NormPasses(true), norm_tokens_ * Width(width), kBackward); }
  double Width(double width) const { return width > 0 ? width : static_cast<double>(c_.d_model); }
  // Bias + dropout + residual add: read two, write one (+ a mask byte).
  void ResidualForward(Category cat) {
    Kernels("residual", stack_.residual_forward, norm_tokens_ * c_.d_model, cat,
            c_.dropout ? norm_tokens_ * c_.d_model : 0);
  }
  void ResidualBackward() {
    Kernels("residual", stack_.residual_backward, norm_tokens_ * c_.d_model, kBackward,
            c_.dropout ? norm_tokens_ * c_.d_model : 0);
  }
  // The activation of `elements` hidden elements.
  void ActivationForward(double elements, Category cat) {
    Kernels("mlp activation", c_.activation == Activation::kSwiglu ? stack_.swiglu_forward : stack_.gelu_forward,
            elements, cat);
  }
  void ActivationBackward(double elements) {
    Kernels("mlp activation", c_.activation == Activation::kSwiglu ? stack_.swiglu_backward : stack_.gelu_backward,
            elements,
            kBackward);
  }
  // Rotary embedding of q and k (RopeElements counts a read and a write of each rotated element).
  void Rope(Category cat) {
    Kernels("rope", cat == kBackward ? stack_.rope_backward : stack_.rope_forward, RopeElements() / 2, cat);
  }

  // --- attention: the fused QKV projection, or multi-head latent attention ---

  void AttentionForward(int64_t layer, Category cat) {
    if (c_.is_mla()) {
      MlaForward(layer, cat);
      return;
    }
    const double T = static_cast<double>(tokens_);
    EnterTp();
    Matmul("qkv matmul", T, c_.d_model, Qkv(), cat);
    if (c_.position == PositionEmbedding::kRope) Rope(cat);
    AttentionCoreForward(layer, cat);
    Matmul("attention out matmul", T, AttnWidth(), c_.d_model, cat);
    LeaveTp();
  }

  void AttentionBackward(int64_t layer) {
    const double T = static_cast<double>(tokens_);
    if (sp_) Collective(tensor_, CollectiveOp::kAllGather, Act() * size_, kTensorComm);  // backward of the RS
    const double out_in = c_.is_mla() ? LocalHeads() * VDim() : AttnWidth();
    Matmul("attention out dgrad", T, c_.d_model, out_in, kBackward);                  // output projection dgrad
    Matmul("attention out wgrad", out_in, T, c_.d_model, kBackward);                  // wgrad
    if (c_.is_mla()) {
      MlaBackward(layer);
      return;
    }
    if (c_.recompute == Recompute::kSelective && !c_.flash_attention) AttentionCoreForward(layer, kRecompute);
    AttentionCoreBackward(layer);
    if (c_.position == PositionEmbedding::kRope) Rope(kBackward);
    ColumnParallelBackward("qkv dgrad", "qkv wgrad", T, Qkv());
    NormBackward();
  }

  // Multi-head latent attention as Megatron-Core 0.12 runs it with Transformer Engine (MLASelfAttention,
  // gpt_layer_specs.py; the version of NVIDIA's DeepSeek-V3 recipe): the down projections are column-parallel
  // (each all-gathers the sequence-parallel input) and their outputs are gathered over the tensor ranks; each up
  // projection is a layernorm-column-parallel linear (the q / kv norm, then an SP all-gather of its compressed
  // input); rotary embedding on the decoupled parts; flash attention; the row-parallel output projection.
  double MlaDownWidth() const {
    const MlaConfig& a = c_.mla;
    return static_cast<double>(a.q_lora_rank > 0 ? a.q_lora_rank : c_.heads * (a.qk_head_dim + a.qk_rope_head_dim));
  }
  void GatherOverTensor(double elements) {
    if (d_.tensor > 1) Collective(tensor_, CollectiveOp::kAllGather, elements * size_, kTensorComm);
  }
  // The up projections, their norms and the rotary embedding (what mla_up_proj recompute reruns).
  void MlaUpForward(Category cat) {
    const LabelScope label(this, cat == kRecompute ? kRecompute : phase_, layer_);
    const MlaConfig& a = c_.mla;
    const double T = static_cast<double>(tokens_);
    const double q_width = LocalHeads() * static_cast<double>(a.qk_head_dim + a.qk_rope_head_dim);
    if (a.q_lora_rank > 0) {
      NormForward(cat, static_cast<double>(a.q_lora_rank));
      EnterTp(0, static_cast<double>(a.q_lora_rank));
      Matmul("mla q up matmul", T, static_cast<double>(a.q_lora_rank), q_width, cat);
    }
    NormForward(cat, static_cast<double>(a.kv_lora_rank));
    EnterTp(0, static_cast<double>(a.kv_lora_rank));
    Matmul("mla kv up matmul", T, static_cast<double>(a.kv_lora_rank),
           LocalHeads() * static_cast<double>(a.qk_head_dim + a.v_head_dim), cat);
    Rope(cat);
    // q and k made whole: each head's qk part and rotary part concatenated (k's rotary part broadcast to every
    // head) into contiguous [T, heads / t, qk + rope] tensors: read and write both.
    Elementwise("mla q/k concat", 4 * T * LocalHeads() * QkDim(), cat);
  }
  void MlaForward(int64_t layer, Category cat) {
    const MlaConfig& a = c_.mla;
    const double T = static_cast<double>(tokens_), t = static_cast<double>(d_.tensor);
    const double kv_down = static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim);
    EnterTp();
    Matmul("mla q down matmul", T, c_.d_model, MlaDownWidth() / t, cat);  // q down (or the direct q projection)
    if (a.q_lora_rank > 0) GatherOverTensor(T * MlaDownWidth());
    EnterTp();
    Matmul("mla kv down matmul", T, c_.d_model, kv_down / t, cat);         // kv down + k's rotary part
    GatherOverTensor(T * kv_down);
    MlaUpForward(cat);
    AttentionCoreForward(layer, cat);
    Matmul("attention out matmul", T, LocalHeads() * VDim(), c_.d_model, cat);
    LeaveTp();
  }
  void MlaBackward(int64_t layer) {
    const MlaConfig& a = c_.mla;
    const double T = static_cast<double>(tokens_), t = static_cast<double>(d_.tensor);
    if (a.recompute_up_proj) MlaUpForward(kRecompute);
    AttentionCoreBackward(layer);
    // The concatenations' backward (k's rotary part summed).
    Elementwise("mla q/k concat", 4 * T * LocalHeads() * QkDim(), kBackward);
    Rope(kBackward);
    ColumnParallelBackward("mla kv up dgrad", "mla kv up wgrad", T,
                           LocalHeads() * static_cast<double>(a.qk_head_dim + a.v_head_dim),
                           static_cast<double>(a.kv_lora_rank));
    NormBackward(static_cast<double>(a.kv_lora_rank));
    if (a.q_lora_rank > 0) {
      ColumnParallelBackward("mla q up dgrad", "mla q up wgrad", T,
                             LocalHeads() * static_cast<double>(a.qk_head_dim + a.qk_rope_head_dim),
                             static_cast<double>(a.q_lora_rank));
      NormBackward(static_cast<double>(a.q_lora_rank));
    }
    // The down projections (the gathers' backward is a slice).
    ColumnParallelBackward("mla kv down dgrad", "mla kv down wgrad", T,
                           static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim) / t);
    ColumnParallelBackward("mla q down dgrad", "mla q down wgrad", T, MlaDownWidth() / t);
    NormBackward();
  }

  // --- the feed-forward block: dense MLP, or routed experts (+ shared experts) ---

  double Ff(bool moe) const {
    return moe ? 1.0 * c_.expert_d_ff() / d_.expert_tensor : 1.0 * c_.d_ff / d_.tensor;
  }
  double FfIn(double ff) const { return (c_.activation == Activation::kSwiglu ? 2 : 1) * ff; }
  // The tokens this rank routes (its sequence-parallel share when the experts span the tensor ranks) and the
  // rows its experts take: top_k x capacity per token (Megatron pads every expert to its capacity).
  double RoutedTokens() const { return c_.experts_over_tensor() ? norm_tokens_ : static_cast<double>(tokens_); }
  double Rows() const { return RoutedTokens() * c_.moe.top_k * c_.moe.capacity_factor; }
  double LocalExperts() const { return static_cast<double>(c_.moe.experts / d_.expert); }
  double SharedFf() const { return 1.0 * c_.moe.shared_d_ff / d_.tensor; }

  // A dense MLP's two matmuls and activation on `rows` tokens (`experts`: a grouped GEMM of `batch` experts).
  void MlpMatmulsForward(double rows, double ff, Category cat, bool experts, double batch = 1) {
    Matmul(experts ? "expert mlp up matmul" : "mlp up matmul", rows / batch, c_.d_model, FfIn(ff), cat, batch);
    ActivationForward(rows * ff, cat);
    Matmul(experts ? "expert mlp down matmul" : "mlp down matmul", rows / batch, ff, c_.d_model, cat, batch);
  }
  void MlpMatmulsBackward(double rows, double ff, double batch = 1) {
    Matmul("expert mlp down dgrad", rows / batch, c_.d_model, ff, kBackward, batch);  // of the second matmul
    Matmul("expert mlp down wgrad", ff, rows / batch, c_.d_model, kBackward, batch);           // wgrad
    ActivationBackward(rows * ff);
    Matmul("expert mlp up dgrad", rows / batch, FfIn(ff), c_.d_model, kBackward, batch);     // dgrad of the first
    Matmul("expert mlp up wgrad", c_.d_model, rows / batch, FfIn(ff), kBackward, batch);     // wgrad
  }

  // The expert all_to_all (dispatch or combine) of this rank's routed rows; its handle.
  int64_t ExpertAllToAll() {
    return d_.expert > 1 ? Start(expert_, CollectiveOp::kAllToAll, Rows() * c_.d_model * size_, kExpertComm) : -1;
  }

  void MlpForward(bool moe, Category cat) {
    if (!moe) {
      MlpMatmulsForward(static_cast<double>(tokens_), Ff(false), cat, false);
      return;
    }
    const double routed = RoutedTokens(), rows = Rows(), h = c_.d_model;
    const bool folded = c_.experts_over_tensor(), shared = c_.moe.shared_d_ff > 0;
    const bool overlap = shared && c_.moe.shared_expert_overlap;
    Matmul("router", routed, h, c_.moe.experts, cat);                  // router logits
    Elementwise("permute", routed * h + rows * h, cat);                 // permute the rows by expert
    int64_t a2a = ExpertAllToAll();
    if (overlap) SharedExpertForward(folded, cat, /*first_half=*/true);
    Wait(a2a, kExpertComm);
    MlpMatmulsForward(rows, Ff(true), cat, true, LocalExperts());  // grouped GEMM of the local experts
    a2a = ExpertAllToAll();
    if (overlap) SharedExpertForward(folded, cat, /*first_half=*/false);
    Wait(a2a, kExpertComm);
    Elementwise("unpermute", rows * h + routed * h, cat);                 // unpermute, weighted by the gates
    if (shared && !overlap) {
      SharedExpertForward(folded, cat, true);
      SharedExpertForward(folded, cat, false);
    }
  }
  // The shared experts: a tensor-parallel MLP on every token. Beside experts split over the tensor ranks it takes
  // the layer's gathered input and adds to its partial output; beside experts over the tensor ranks it gathers
  // and reduce-scatters itself, on the second stream when it overlaps the all_to_all (Megatron-Core's
  // SharedExpertMLP: fc1 under the dispatch, fc2 under the combine).
  void SharedExpertForward(bool folded, Category cat, bool first_half) {
    const double T = static_cast<double>(tokens_), ff = SharedFf();
    const uint8_t stream = c_.moe.shared_expert_overlap ? 1 : 0;
    if (first_half) {
      if (folded) EnterTp(stream);
      Matmul("shared expert up matmul", T, c_.d_model, FfIn(ff), cat);
      ActivationForward(T * ff, cat);
      return;
    }
    Matmul("shared expert down matmul", T, ff, c_.d_model, cat);
    if (folded) LeaveTp(stream);
  }
  void SharedExpertBackward(bool folded, bool second_matmul) {
    const double T = static_cast<double>(tokens_), ff = SharedFf();
    const uint8_t stream = c_.moe.shared_expert_overlap ? 1 : 0;
    if (second_matmul) {
      if (folded && sp_)
        Wait(Start(tensor_, CollectiveOp::kAllGather, Act() * size_, kTensorComm, stream), kTensorComm);
      Matmul("shared expert down dgrad", T, c_.d_model, ff, kBackward);
      Matmul("shared expert down wgrad", ff, T, c_.d_model, kBackward);
      ActivationBackward(T * ff);
      return;
    }
    Matmul("shared expert up dgrad", T, FfIn(ff), c_.d_model, kBackward);
    Matmul("shared expert up wgrad", c_.d_model, T, FfIn(ff), kBackward);
    if (folded) LeaveTp(stream);  // the input gradient's reduce-scatter (SP) / all-reduce
  }

  void MlpBackward(bool moe) {
    if (!moe) {
      const double T = static_cast<double>(tokens_), ff = Ff(false);
      Matmul("mlp down dgrad", T, c_.d_model, ff, kBackward);                    // dgrad of the second matmul
      Matmul("mlp down wgrad", ff, T, c_.d_model, kBackward);                    // wgrad
      ActivationBackward(T * ff);
      ColumnParallelBackward("mlp up dgrad", "mlp up wgrad", T, FfIn(ff));
      return;
    }
    const double routed = RoutedTokens(), rows = Rows(), h = c_.d_model;
    const bool folded = c_.experts_over_tensor(), shared = c_.moe.shared_d_ff > 0;
    const bool overlap = shared && c_.moe.shared_expert_overlap;
    Elementwise("unpermute", routed * h + rows * h, kBackward);           // unpermute's backward
    int64_t a2a = ExpertAllToAll();
    if (overlap) SharedExpertBackward(folded, true);
    Wait(a2a, kExpertComm);
    MlpMatmulsBackward(rows, Ff(true), LocalExperts());
    a2a = ExpertAllToAll();
    if (overlap) SharedExpertBackward(folded, false);
    Wait(a2a, kExpertComm);
    Elementwise("permute", rows * h + routed * h, kBackward);           // permute's backward
    Matmul("router dgrad", routed, c_.moe.experts, h, kBackward);            // router dgrad
    Matmul("router wgrad", h, routed, c_.moe.experts, kBackward);            // router wgrad
    if (shared && !overlap) {
      SharedExpertBackward(folded, true);
      SharedExpertBackward(folded, false);
    }
    // Beside experts split over the tensor ranks, the block's input gradient is a partial sum: as a column-parallel
    // layer's (the input re-gather under SP is the shared experts' and the routed rows', already counted).
    if (!folded && d_.tensor > 1)
      Collective(tensor_, sp_ ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, Act() * size_, kTensorComm);
  }

  // Backward of a column-parallel matmul [T, k] x [k, n] (k: `in_width`, 0: d_model): Megatron overlaps the
  // all-reduce (SP: reduce-scatter) of the input gradient with the weight-gradient matmul, and with SP re-gathers
  // the input for the weight gradient under the input-gradient matmul (Korthikanti et al. 2022, section 4.2.2).
  void ColumnParallelBackward(std::string_view what_dgrad, std::string_view what_wgrad, double tokens, double n,
                              double in_width = 0) {
    const double k = Width(in_width), bytes = Tokens(k) * size_;
    const int64_t gather = sp_ ? Start(tensor_, CollectiveOp::kAllGather, bytes, kTensorComm) : -1;
    Matmul(what_dgrad, tokens, n, k, kBackward);                           // dgrad
    Wait(gather, kTensorComm);
    const int64_t reduce = d_.tensor > 1 ? Start(tensor_, sp_ ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce,
                                                 bytes, kTensorComm)
                                         : -1;
    Matmul(what_wgrad, k, tokens, n, kBackward);                           // wgrad
    Wait(reduce, kTensorComm);
  }

  // ZeRO-3 / FSDP: a layer's weights are all-gathered over the data (and context) ranks before use, the next
  // layer's gather prefetched on the second stream while this one computes (FSDP's forward / backward prefetch).
  // Without resharding after the forward, the backward (and its recompute) uses the weights the forward gathered.
  void GatherLayerWeights(bool moe, bool backward) {
    if (c_.parallel.zero_stage < 3 || zero_.size <= 1) return;
    if (backward && !c_.parallel.reshard_after_forward) return;
    const double bytes = LayerParamsPerDevice(c_, d_, moe) * WeightGatherBytes();
    if (prefetched_gather_ < 0) prefetched_gather_ = Start(zero_, CollectiveOp::kAllGather, bytes, kDataComm, 1);
    Wait(prefetched_gather_, kDataComm);
    prefetched_gather_ = Start(zero_, CollectiveOp::kAllGather, bytes, kDataComm, 1);
  }

  // Layer `layer` of the model (>= layers: an MTP module's layer, shaped like the last one).
  bool IsMoe(int64_t layer) const { return c_.is_moe_layer(std::min(layer, c_.layers - 1)); }

  void FeedForwardForward(bool moe, Category cat) {
    const bool folded = moe && c_.experts_over_tensor();
    if (!folded) EnterTp();
    MlpForward(moe, cat);
    if (!folded) LeaveTp();
  }

  void LayerForward(int64_t layer, Category cat) {
    const LabelScope label(this, cat, layer);
    const bool moe = IsMoe(layer);
    GatherLayerWeights(moe, /*backward=*/cat == kRecompute);
    Fp8Casts(moe, /*backward=*/false, cat);
    NormForward(cat);
    AttentionForward(layer, cat);
    ResidualForward(cat);
    NormForward(cat);
    FeedForwardForward(moe, cat);
    ResidualForward(cat);
  }

  void LayerBackward(int64_t layer) {
    const LabelScope label(this, kBackward, layer);
    const bool moe = IsMoe(layer);
    if (c_.recompute == Recompute::kFull) LayerForward(layer, kRecompute);
    else GatherLayerWeights(moe, /*backward=*/true);
    Fp8Casts(moe, /*backward=*/true, kBackward);
    ResidualBackward();
    const bool folded = moe && c_.experts_over_tensor();
    if (sp_ && !folded)
      Collective(tensor_, CollectiveOp::kAllGather, Act() * size_, kTensorComm);  // backward of the RS
    MlpBackward(moe);
    NormBackward();
    ResidualBackward();
    AttentionBackward(layer);
  }

  // --- embedding and loss ---

  double VocabLocal() const { return VocabParamsPerDevice(c_, d_) / c_.d_model; }

  void EmbeddingForward() {
    Elementwise("embedding", 2 * Act(), kHead);  // gather the rows, write the activations
    LeaveTp();                      // vocabulary-parallel embedding: all-reduce (SP: reduce-scatter)
  }
  void EmbeddingBackward() {
    if (sp_) Collective(tensor_, CollectiveOp::kAllGather, Act() * size_, kTensorComm);
    Elementwise("embedding", 3 * Act(), kHead);  // scatter-add into the embedding gradient
  }
  // Final norm, logits over the local vocabulary, vocabulary-parallel cross-entropy (fp32 logits).
  void LossForward() {
    const double T = static_cast<double>(tokens_), V = VocabLocal();
    NormForward(kHead);
    EnterTp();
    Matmul("logits matmul", T, c_.d_model, V, kHead);
    Kernels("cross-entropy", stack_.cross_entropy_forward, T * V, kHead);  // fp32 softmax statistics
    if (d_.tensor > 1) {
      for (int i = 0; i < 3; ++i) Collective(tensor_, CollectiveOp::kAllReduce, T * 4, kTensorComm);
    }
  }
  void LossBackward() {
    const double T = static_cast<double>(tokens_), V = VocabLocal();
    Kernels("cross-entropy", stack_.cross_entropy_backward, T * V, kHead);  // softmax - one-hot (fp32 in, dtype out)
    Matmul("logits dgrad", T, V, c_.d_model, kHead);           // dgrad
    Matmul("logits wgrad", c_.d_model, T, V, kHead);           // wgrad
    if (d_.tensor > 1)
      Collective(tensor_, sp_ ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, Act() * size_, kTensorComm);
    NormBackward();
  }

  // --- the device's program ---

  // The simulated device of the stage `delta` away along the pipeline axes (cyclically), same other coordinates.
  int64_t Neighbour(int64_t device, int64_t delta) const {
    const int64_t pos = simulated_[static_cast<size_t>(device)];
    const int64_t stage = mesh_.IndexInGroup(pos, c_.parallel.pipeline_axes);
    const int64_t target = (stage + delta + d_.pipeline) % d_.pipeline;
    const std::vector<int64_t>& group =
        pipeline_groups_[static_cast<size_t>(mesh_.GroupOf(pos, c_.parallel.pipeline_axes))];
    return index_of_[static_cast<size_t>(group[static_cast<size_t>(target)])];
  }

  double PipelineSendSeconds() {
    if (!pipe_seconds_) {
      // Megatron sends the activations split over the tensor ranks (SP shards them anyway; without SP its
      // scatter-gather optimisation does): [T / t, h] per rank.
      const double bytes = Act() * size_ / d_.tensor;
      std::vector<std::pair<int, int>> pairs;
      for (int64_t s = 0; s + 1 < d_.pipeline; ++s) pairs.emplace_back(static_cast<int>(s), static_cast<int>(s + 1));
      pipe_seconds_ = collectives_.Cost(CollectiveOp::kPermute, pipeline_.axes, bytes, pairs).seconds * comm_scale_;
    }
    return *pipe_seconds_;
  }

  int64_t Tag(bool forward, int64_t micro_batch, int64_t virtual_stage) const {
    return ((forward ? 0 : 1) * d_.micro_batches + micro_batch) * (d_.pipeline * c_.parallel.virtual_stages) +
           virtual_stage;
  }
  bool IsForwardTag(int64_t tag) const { return tag < d_.micro_batches * d_.pipeline * c_.parallel.virtual_stages; }

  // Pipeline transfers. Blocking (Megatron 2022): the receiver acknowledges each message (a 0 s send back) and
  // the sender waits for the acknowledgements at its next exchange, after the receives that open its next task:
  // Megatron batches a step's sends with the next receives in one batch_isend_irecv and waits for all
  // (1F1B: send_forward_recv_backward, send_backward_recv_forward). The interleaved schedule's steady state runs
  // a forward and a backward, then exchanges once for the next pair
  // (send_forward_backward_recv_forward_backward): the pair's backward receives with its forward (RunTask's
  // `paired`). The sender resumes when the receiver has the data.
  void SendActivations(int64_t peer, int64_t tag) {
    Emit(TimelineOp::Send(peer, tag, PipelineSendSeconds(), kPipelineComm),
         IsForwardTag(tag) ? "send activations" : "send gradients");
    if (blocking_p2p_) unacknowledged_.emplace_back(peer, tag);
  }
  void ReceiveActivations(int64_t peer, int64_t tag) {
    Emit(TimelineOp::Recv(peer, tag, kPipelineComm), IsForwardTag(tag) ? "receive activations" : "receive gradients");
    if (blocking_p2p_) Emit(TimelineOp::Send(peer, AckTag(tag), 0, kPipelineComm), "acknowledge");
  }
  void AwaitAcknowledgements() {
    for (const auto& [peer, tag] : unacknowledged_)
      Emit(TimelineOp::Recv(peer, AckTag(tag), kPipelineComm), "await acknowledgement");
    unacknowledged_.clear();
  }
  static int64_t AckTag(int64_t tag) { return -1 - tag; }

  // `paired`: in blocking mode with virtual stages, the backward task that follows this forward one in the
  // schedule's steady state: its receive joins this task's exchange (see SendActivations).
  void RunTask(const PipelineTask& task, int64_t stage, const PipelineTask* paired = nullptr) {
    const int64_t p = d_.pipeline, v = c_.parallel.virtual_stages;
    const int64_t vstage = task.chunk * p + stage, last = p * v - 1;
    const LayerRange chunk = layout_[static_cast<size_t>(vstage)];
    SetLabelContext(task.forward ? kForward : kBackward, task.micro_batch, task.chunk);
    if (task.forward) {
      if (vstage > 0) ReceiveActivations(prev_, Tag(true, task.micro_batch, vstage));
      if (paired != nullptr) {
        const int64_t paired_vstage = paired->chunk * p + stage;
        if (paired_vstage < last) ReceiveActivations(next_, Tag(false, paired->micro_batch, paired_vstage));
        received_paired_ = true;
      }
      AwaitAcknowledgements();
      if (vstage == 0) EmbeddingForward();
      for (int64_t i = 0; i < chunk.count; ++i) LayerForward(chunk.first + i, kForward);
      if (vstage < last) {
        SendActivations(next_, Tag(true, task.micro_batch, vstage + 1));
        return;
      }
      for (int64_t k = 0; k < c_.mtp_layers; ++k) MtpForward(k);
      LossForward();
      return;
    }
    if (received_paired_) {
      received_paired_ = false;  // received at the forward's exchange
    } else {
      if (vstage < last) ReceiveActivations(next_, Tag(false, task.micro_batch, vstage));
      AwaitAcknowledgements();
    }
    const bool last_micro_batch = task.micro_batch == d_.micro_batches - 1;
    // ZeRO-2/3 keep only their shard of the gradients: reduce-scatter after every micro-batch.
    const bool reduce = last_micro_batch || c_.parallel.zero_stage >= 2;
    if (vstage == last) {
      LossBackward();
      for (int64_t k = c_.mtp_layers - 1; k >= 0; --k) MtpBackward(k, reduce);
    }
    for (int64_t i = chunk.count - 1; i >= 0; --i) {
      const bool moe = IsMoe(chunk.first + i);
      LayerBackward(chunk.first + i);
      if (reduce) StartGradientReduction(LayerParamsPerDevice(c_, d_, moe), ExpertParamsPerDevice(c_, d_, moe));
    }
    if (vstage > 0) SendActivations(prev_, Tag(false, task.micro_batch, vstage - 1));
    else EmbeddingBackward();
    if (last_micro_batch && (vstage == 0 || vstage == last)) StartGradientReduction(VocabParamsPerDevice(c_, d_), 0);
  }

  // Multi-token prediction module k on the last stage (Megatron-Core MultiTokenPredictionLayer): the embedding
  // of the tokens shifted by k + 1 (vocabulary-parallel, as the input embedding), the norms of it and of the
  // hidden state, their concatenation projected [2h -> h] by a column-parallel eh_proj whose output is gathered
  // over the tensor ranks, one layer shaped like the model's last, then its own final norm, logits and loss
  // through the shared output layer.
  void MtpForward(int64_t k) {
    const double T = static_cast<double>(tokens_), h = c_.d_model;
    EmbeddingForward();
    NormForward(kHead);
    NormForward(kHead);
    Elementwise("mtp concat", 2 * 2 * norm_tokens_ * h, kHead);  // concatenate: read both, write [T, 2h]
    EnterTp(0, 2 * h);
    Matmul("mtp projection", T, 2 * h, h / d_.tensor, kHead);
    GatherOverTensor(T * h);
    LayerForward(c_.layers + k, kForward);
    LossForward();
  }
  void MtpBackward(int64_t k, bool reduce) {
    const double T = static_cast<double>(tokens_), h = c_.d_model;
    LossBackward();
    LayerBackward(c_.layers + k);
    ColumnParallelBackward("mtp projection dgrad", "mtp projection wgrad", T, h / d_.tensor, 2 * h);
    Elementwise("mtp concat", 2 * 2 * norm_tokens_ * h, kBackward);
    NormBackward();
    NormBackward();
    EmbeddingBackward();
    if (reduce) {
      double experts = 0;
      const double params = MtpParamsPerDevice(c_, d_, &experts);
      StartGradientReduction(params, experts);
    }
  }

  // Data-parallel gradient reduction of one layer's gradients, started as soon as the last micro-batch's
  // backward produced them (Megatron's overlap_grad_reduce), in the stack's gradient dtype (model/stack.h
  // grad_reduce_bytes): all-reduce, or reduce-scatter with ZeRO >= 1 (distributed optimizer). Dense gradients
  // reduce over data and context ranks (hybrid sharding: reduce-scatter over ZeRO's axes, then all-reduce over the
  // replicas), the routed experts' (`experts` of the `params`) over the ranks holding the same experts
  // (Megatron-Core's expert data-parallel group).
  void StartGradientReduction(double params, double experts) {
    const double bytes = stack_.grad_reduce_bytes;
    if (dp_and_cp_.size > 1) ReduceDenseGradients((params - experts) * bytes);
    const CollectiveOp op = c_.parallel.zero_stage >= 1 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
    if (experts > 0 && expert_dp_.size > 1)
      pending_grads_.push_back(Start(expert_dp_, op, experts * bytes, kDataComm, 1));
  }
  void ReduceDenseGradients(double bytes) {
    if (c_.parallel.zero_stage == 0) {
      pending_grads_.push_back(Start(dp_and_cp_, CollectiveOp::kAllReduce, bytes, kDataComm, 1));
      return;
    }
    if (zero_.size > 1) pending_grads_.push_back(Start(zero_, CollectiveOp::kReduceScatter, bytes, kDataComm, 1));
    if (replicas_.size > 1)
      pending_grads_.push_back(Start(replicas_, CollectiveOp::kAllReduce, bytes / zero_.size, kDataComm, 1));
  }
  // Bytes per weight of the ZeRO-3 / FSDP all-gathers and of the distributed optimizer's weight all-gather: the
  // stack's, else the compute dtype's (fp8 weights with Transformer Engine's fp8 recipe: one byte).
  double WeightGatherBytes() const {
    if (stack_.weight_gather_bytes > 0) return stack_.weight_gather_bytes;
    return fp8_ && stack_.fp8_casts ? 1.0 : size_;
  }

  void Optimizer(int64_t stage) {
    SetLabelContext(kOptimizer, -1, 0);
    AwaitAcknowledgements();
    Wait(prefetched_gather_, kDataComm);
    prefetched_gather_ = -1;
    for (int64_t h : pending_grads_) Wait(h, kDataComm);
    pending_grads_.clear();
    const int64_t p = d_.pipeline;
    double params = 0, experts = 0;
    for (size_t k = static_cast<size_t>(stage); k < layout_.size(); k += static_cast<size_t>(p)) {
      for (int64_t i = 0; i < layout_[k].count; ++i) {
        const bool moe = IsMoe(layout_[k].first + i);
        params += LayerParamsPerDevice(c_, d_, moe);
        experts += ExpertParamsPerDevice(c_, d_, moe);
      }
    }
    if (stage == 0) params += VocabParamsPerDevice(c_, d_);
    if (stage == p - 1) {
      params += VocabParamsPerDevice(c_, d_);
      double mtp_experts = 0;
      params += c_.mtp_layers * MtpParamsPerDevice(c_, d_, &mtp_experts);
      experts += c_.mtp_layers * mtp_experts;
    }
    const bool sharded = c_.parallel.zero_stage >= 1;
    const double shard = sharded ? (params - experts) / static_cast<double>(zero_.size) +
                                       experts / static_cast<double>(expert_dp_.size)
                                 : params;
    // AdamW, fused: read fp32 master weight, gradient, m, v; write master, m, v; one read of the gradients for
    // the global norm (clipping); fp16 loss scaling unscales and checks the gradients (read + write); the
    // stack's own passes (model/stack.h optimizer_extra_bytes, lowp_copy).
    const double bytes_per_param = 4 * 4 + 3 * 4 + 4 + (c_.dtype == DType::kF16 ? 8 : 0) +
                                   stack_.optimizer_extra_bytes + (stack_.lowp_copy ? 4 + size_ : 0);
    Compute("adamw", compute_.Cost(10 * shard, shard * bytes_per_param, ContractionDims{}, DType::kF32), kOptimizer);
    if (sharded && c_.parallel.zero_stage < 3) {  // updated weights back to every rank
      if (zero_.size > 1)
        Collective(zero_, CollectiveOp::kAllGather, (params - experts) * WeightGatherBytes(), kDataComm);
      if (expert_dp_.size > 1 && experts > 0)
        Collective(expert_dp_, CollectiveOp::kAllGather, experts * WeightGatherBytes(), kDataComm);
    }
  }

  // What the ops emitted from now on belong to (the schedule's labels); outside a layer.
  void SetLabelContext(Category phase, int64_t micro_batch, int64_t chunk) {
    phase_ = phase;
    layer_ = -1;
    micro_batch_ = static_cast<int32_t>(micro_batch);
    chunk_ = static_cast<int32_t>(chunk);
  }
  // Labels the ops emitted in its scope with a phase and a layer (the schedule), and restores the previous ones.
  class LabelScope {
   public:
    LabelScope(StepBuilder* b, Category phase, int64_t layer) : b_(b), phase_(b->phase_), layer_(b->layer_) {
      b->phase_ = phase;
      b->layer_ = static_cast<int32_t>(layer);
    }
    ~LabelScope() {
      b_->phase_ = phase_;
      b_->layer_ = layer_;
    }
    LabelScope(const LabelScope&) = delete;
    LabelScope& operator=(const LabelScope&) = delete;

   private:
    StepBuilder* b_;
    Category phase_;
    int32_t layer_;
  };

  void BuildDevice(int64_t device) {
    device_ = device;
    ops_ = &timeline_->program(device);
    if (record_) labels_ = &labels_of_[static_cast<size_t>(device)];
    handle_ops_.clear();
    next_handle_ = 0;
    prefetched_gather_ = -1;
    pending_grads_.clear();
    unacknowledged_.clear();
    received_paired_ = false;
    const auto factor = speed_factors_.find(mesh_.DeviceAt(simulated_[static_cast<size_t>(device)]));
    speed_ = factor == speed_factors_.end() ? 1.0 : factor->second;
    prev_ = Neighbour(device, -1);
    next_ = Neighbour(device, +1);
    const int64_t stage = mesh_.IndexInGroup(simulated_[static_cast<size_t>(device)], c_.parallel.pipeline_axes);
    const std::vector<PipelineTask> order =
        PipelineOrder(c_.parallel.schedule, d_.pipeline, stage, d_.micro_batches, c_.parallel.virtual_stages);
    const bool pairs = blocking_p2p_ && c_.parallel.virtual_stages > 1;
    for (size_t i = 0; i < order.size(); ++i) {
      const bool paired = pairs && order[i].forward && i + 1 < order.size() && !order[i + 1].forward;
      RunTask(order[i], stage, paired ? &order[i + 1] : nullptr);
    }
    Optimizer(stage);
  }

  const ModelConfig& c_;
  const Mesh& mesh_;
  ParallelDegrees d_;
  ComputeModel compute_;
  CollectiveModel collectives_;
  Role tensor_, data_, context_, pipeline_, expert_, dp_and_cp_, expert_dp_;
  Role zero_, replicas_;  // ZeRO's shard group (its axes + context) and the replicas across them (hybrid)
  std::vector<LayerRange> layout_;  // the layers of every virtual stage
  bool sp_ = false, reduced_ = true, blocking_p2p_ = false, fp8_ = false, fp8_casts_ = false;
  bool uniform_slowdown_ = false;
  const StackSpec& stack_;
  std::vector<std::pair<int64_t, int64_t>> unacknowledged_;  // blocking p2p: (peer, tag) of sends not yet awaited
  bool received_paired_ = false;  // the next backward's receive was done at the forward's exchange
  DType act_dtype_ = DType::kBF16;
  double size_ = 2, slowdown_ = 0, norm_tokens_ = 0, speed_ = 1, comm_scale_ = 1, host_launch_seconds_ = 0;
  std::map<int, double> speed_factors_;
  int64_t tokens_ = 0;
  std::vector<int64_t> simulated_, index_of_;
  std::vector<double> flops_;  // per simulated device: matrix FLOPs of its program
  std::unique_ptr<StepTimeline> timeline_;
  std::map<const Role*, std::vector<int32_t>> group_ids_;
  std::map<std::tuple<const Role*, CollectiveOp, double>, double> collective_cache_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, DType>, PricedOp> matmul_cache_;
  std::optional<double> pipe_seconds_;
  std::vector<TimelineOp>* ops_ = nullptr;
  // Recording the schedule: each device's op labels, parallel to its program, and the current label context.
  bool record_ = false;
  std::vector<std::vector<OpLabel>> labels_of_;
  std::vector<OpLabel>* labels_ = nullptr;
  std::vector<std::string_view> handle_ops_;  // this device's handle -> its collective's name
  Category phase_ = kForward;
  int32_t layer_ = -1, micro_batch_ = -1, chunk_ = 0;
  int64_t device_ = 0, next_handle_ = 0, prev_ = 0, next_ = 0;
  std::vector<std::vector<int64_t>> pipeline_groups_;
  std::vector<int64_t> pending_grads_;
  int64_t prefetched_gather_ = -1;
};

}  // namespace

namespace {

// The device's documented sustained matrix rate (the rate the step's matmuls are priced at, before the slowest
// device's pace), and a warning when the prediction implies more (MFU above it): the step would then be faster
// than the device can run it (docs/model.md, "FLOPs and MFU").
void CheckSustainedRate(const ComputeModel& compute, const std::string& device_kind, DType dtype, ModelStepTimes* t) {
  t->sustained_fraction = compute.SustainedMatmulFraction(dtype);
  t->sustained_measured = compute.HasMeasuredMatmulRate(dtype);
  if (const BorrowedMatmulRate* borrowed = FindBorrowedMatmulRate(device_kind)) {
    t->sustained_borrowed_from = std::string(borrowed->from);
    // A borrowed rate is no bound on this device: the threshold is the best MFU measured on it.
    if (t->mfu > borrowed->published_mfu) {
      t->warnings.push_back(fmt::format(
          "MFU {:.1f}% is above {:.1f}%, {}: {}'s matmul rate is borrowed from {} ({:.1f}% of the peak, no {} "
          "measurement is published), so the predicted step is likely faster than the device runs it",
          100 * t->mfu, 100 * borrowed->published_mfu, borrowed->published_mfu_source, device_kind, borrowed->from,
          100 * t->sustained_fraction, device_kind));
    }
  }
  if (t->mfu > t->sustained_fraction * (1 + 1e-9)) {
    t->warnings.push_back(fmt::format(
        "MFU {:.1f}% is above the {:.1f}% of the peak that {} sustains ({}): the predicted step is faster than the "
        "device can run it",
        100 * t->mfu, 100 * t->sustained_fraction, device_kind,
        t->sustained_measured ? "its documented matmul rate"
        : t->sustained_borrowed_from.empty()
            ? "the datasheet peak: no measured rate documented"
            : fmt::format("{}'s measured rate, borrowed", t->sustained_borrowed_from)));
  }
}

// The device's breakdown by category (compute phases; communication kinds, run and exposed).
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

// Every pipeline stage's times: those of its simulated device that finishes last.
std::vector<ModelStageTimes> StageTimes(const ValidatedModel& model, const std::vector<int64_t>& simulated,
                                        const std::vector<DeviceTimes>& times) {
  std::vector<ModelStageTimes> stages(static_cast<size_t>(model.degrees().pipeline));
  for (size_t i = 0; i < times.size(); ++i) {
    const int64_t stage = model.mesh().IndexInGroup(simulated[i], model.config().parallel.pipeline_axes);
    ModelStageTimes& s = stages[static_cast<size_t>(stage)];
    if (times[i].end < s.end) continue;
    s = {stage, times[i].end, times[i].compute, times[i].exposed_comm, times[i].pipeline_wait, {}};
    for (int cat = kOptimizer + 1; cat < kNumCategories; ++cat)
      s.exposed_by_kind[kCategoryNames[static_cast<size_t>(cat)]] =
          times[i].exposed_by_category[static_cast<size_t>(cat)];
  }
  return stages;
}

// Runs the timeline of `model` (its micro-batch count as configured) and fills the times (and, with
// options.record_schedule, the schedule).
ModelStepTimes Simulate(const ValidatedModel& model, const ModelStepOptions& options) {
  StepBuilder builder(model, options);
  std::unique_ptr<StepTimeline> timeline = builder.Build();
  ModelStepTimes out;
  for (int64_t i = 0; i < static_cast<int64_t>(builder.simulated().size()); ++i)
    out.timeline_ops += static_cast<int64_t>(timeline->program(i).size());
  std::vector<std::vector<OpInterval>> intervals;
  const std::vector<DeviceTimes> times = timeline->Run(options.record_schedule ? &intervals : nullptr);
  size_t last = 0;
  for (size_t i = 1; i < times.size(); ++i)
    if (times[i].end > times[last].end) last = i;
  const DeviceTimes& t = times[last];
  out.step_seconds = t.end;
  out.compute_seconds = t.compute;
  out.exposed_comm_seconds = t.exposed_comm;
  out.hidden_comm_seconds = std::max(0.0, t.comm - t.exposed_comm);
  out.bubble_seconds = t.pipeline_wait;
  out.host_wait_seconds = t.host_wait;
  out.comm_slowdown = builder.slowdown();
  FillBreakdown(t, &out.compute_by_phase, &out.comm_by_kind, &out.exposed_by_kind);
  out.simulated_devices = static_cast<int64_t>(times.size());
  out.stages = StageTimes(model, builder.simulated(), times);
  out.hardware_flops = builder.ExecutedFlops();
  if (options.record_schedule) out.schedule = MakeSchedule(model, builder, *timeline, times, intervals, last);
  return out;
}

// a + f (b - a), field by field (the additive times).
ModelStepTimes Extrapolate(const ModelStepTimes& a, const ModelStepTimes& b, double f) {
  auto line = [f](double x, double y) { return y + f * (y - x); };
  ModelStepTimes out = b;
  out.step_seconds = line(a.step_seconds, b.step_seconds);
  out.compute_seconds = line(a.compute_seconds, b.compute_seconds);
  out.exposed_comm_seconds = line(a.exposed_comm_seconds, b.exposed_comm_seconds);
  out.hidden_comm_seconds = line(a.hidden_comm_seconds, b.hidden_comm_seconds);
  out.bubble_seconds = line(a.bubble_seconds, b.bubble_seconds);
  out.host_wait_seconds = line(a.host_wait_seconds, b.host_wait_seconds);
  out.hardware_flops = line(a.hardware_flops, b.hardware_flops);
  using Breakdown = std::map<std::string, double> ModelStepTimes::*;
  for (Breakdown field :
       {&ModelStepTimes::compute_by_phase, &ModelStepTimes::comm_by_kind, &ModelStepTimes::exposed_by_kind})
    for (auto& [key, value] : out.*field) value = line((a.*field).at(key), value);
  out.timeline_ops = a.timeline_ops + b.timeline_ops;  // what was simulated
  for (size_t i = 0; i < out.stages.size(); ++i) {
    ModelStageTimes& s = out.stages[i];
    const ModelStageTimes& x = a.stages[i];
    s.end = line(x.end, s.end);
    s.compute_seconds = line(x.compute_seconds, s.compute_seconds);
    s.exposed_comm_seconds = line(x.exposed_comm_seconds, s.exposed_comm_seconds);
    s.bubble_seconds = line(x.bubble_seconds, s.bubble_seconds);
    for (auto& [key, value] : s.exposed_by_kind) value = line(x.exposed_by_kind.at(key), value);
  }
  return out;
}

// The schedule to show for an extrapolated step: the whole step simulated once more when it is small enough
// (StepSchedule::kMaxScheduleOps), else that of the m2-micro-batch run `b` (null unless recording).
std::shared_ptr<const StepSchedule> RecordedSchedule(const ValidatedModel& model, const ModelStepOptions& options,
                                                     const ModelStepTimes& b, int64_t m2) {
  if (!options.record_schedule) return nullptr;
  const int64_t m = model.degrees().micro_batches;
  const double whole_ops = static_cast<double>(b.timeline_ops) * static_cast<double>(m) / static_cast<double>(m2);
  if (whole_ops <= static_cast<double>(StepSchedule::kMaxScheduleOps)) {
    ModelStepOptions whole = options;
    whole.extrapolate = false;
    return Simulate(model, whole).schedule;
  }
  auto schedule = std::make_shared<StepSchedule>(*b.schedule);
  schedule->micro_batches = m;
  return schedule;
}

}  // namespace

std::string_view StepStreamName(StepEvent::Stream stream) {
  switch (stream) {
    case StepEvent::Stream::kCompute:
      return "compute";
    case StepEvent::Stream::kCollectives0:
      return "collectives 0";
    case StepEvent::Stream::kCollectives1:
      return "collectives 1";
    case StepEvent::Stream::kSends:
      return "sends";
  }
  return "?";
}

std::string_view StepEventKindName(StepEvent::Kind kind) {
  switch (kind) {
    case StepEvent::Kind::kCompute:
      return "compute";
    case StepEvent::Kind::kCommunication:
      return "communication";
    case StepEvent::Kind::kExposed:
      return "exposed";
    case StepEvent::Kind::kBubble:
      return "bubble";
    case StepEvent::Kind::kHostWait:
      return "host wait";
  }
  return "?";
}

ModelLayerTimes PredictModelLayer(const ValidatedModel& model, const ModelStepOptions& options, bool moe) {
  if (model.mesh().topology() == nullptr) {
    Throw(ErrorCode::kFailedPrecondition, "model '{}': predicting a layer needs a mesh with a topology",
          model.config().name);
  }
  if (moe && model.config().moe.experts == 0)
    Throw(ErrorCode::kInvalidArgument, "model '{}': no MoE layer to time (moe.experts is 0)", model.config().name);
  ModelLayerTimes out;
  for (bool backward : {false, true}) {
    StepBuilder builder(model, options);
    const std::vector<DeviceTimes> times = builder.BuildLayer(backward, moe)->Run();
    (backward ? out.backward_seconds : out.forward_seconds) = times.front().end;
  }
  return out;
}

ModelStepTimes PredictModelStep(const ValidatedModel& model, const ModelStepOptions& options) {
  const ModelConfig& config = model.config();
  const Mesh& mesh = model.mesh();
  if (mesh.topology() == nullptr) {
    Throw(ErrorCode::kFailedPrecondition, "model '{}': predicting a step needs a mesh with a topology", config.name);
  }
  const ModelAccounting accounting = AccountModel(model);
  const ParallelDegrees& d = accounting.degrees;
  // Steady state: after the pipeline has filled, every further group of p micro-batches adds the same time
  // (docs/model.md, "Micro-batch extrapolation"); simulate two counts and extend the line.
  // m1 >= max(2p, 4) is chosen so that m - m1 is a multiple of p (interleaved schedules have m % p == 0 anyway).
  const int64_t p = d.pipeline, m = d.micro_batches, base = std::max<int64_t>(2 * p, 4);
  const int64_t m1 = m > base ? base + (m - base) % p : base, m2 = m1 + p;
  ModelStepTimes out;
  if (options.extrapolate && m > m1 + m2) {
    ModelStepOptions quiet = options;
    quiet.record_schedule = false;
    const ModelStepTimes a = Simulate(model.WithMicroBatches(m1), quiet);
    const ModelStepTimes b = Simulate(model.WithMicroBatches(m2), options);
    out = Extrapolate(a, b, static_cast<double>(d.micro_batches - m2) / static_cast<double>(m2 - m1));
    out.schedule = RecordedSchedule(model, options, b, m2);
  } else {
    out = Simulate(model, options);
  }
  out.model_flops = accounting.flops.model;
  out.tokens_per_second = accounting.tokens_per_step / out.step_seconds;
  const ComputeModel compute(*mesh.topology(), options.roofline,
                             ComputeOptions{options.clock, 1, options.calibration.compute_scale});
  out.mfu = out.model_flops / (out.step_seconds * static_cast<double>(mesh.size()) * compute.MatrixPeak(config.dtype));
  CheckSustainedRate(compute, mesh.topology()->device_kind(), config.dtype, &out);
  return out;
}

}  // namespace spmdsim
