// PredictModelStep: the model workload's training step as per-device programs on a StepTimeline
// (model/step.h; the op list and its sources are in docs/model.md).
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>

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

// The default compute slowdown while communication is in flight: NCCL runs one CTA per channel, each on an SM,
// with 16 channels on these collectives (NCCL's NVLS / ring channel count, cost/nccl_model.cc) -> 16 / SMs.
// TPUs do collectives in dedicated ICI hardware and DMA engines: 0.
double DefaultCommSlowdown(const DeviceComputeSpec* spec, const Topology& topology) {
  if (spec == nullptr || topology.platform() != Platform::kGpu) return 0;
  return std::min(0.5, 16.0 / spec->compute_units);
}

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
      : c_(c), mesh_(mesh), d_(degrees), compute_(*mesh.topology(), options.roofline),
        collectives_(mesh, options.collectives) {
    tensor_ = {c.parallel.tensor_axes, d_.tensor};
    data_ = {c.parallel.data_axes, d_.data};
    context_ = {c.parallel.context_axes, d_.context};
    pipeline_ = {c.parallel.pipeline_axes, d_.pipeline};
    expert_ = {c.parallel.expert_axes, d_.expert};
    for (const std::string& a : c.parallel.data_axes) dp_and_cp_.axes.push_back(a);
    for (const std::string& a : c.parallel.context_axes) dp_and_cp_.axes.push_back(a);
    dp_and_cp_.size = d_.data * d_.context;
    sp_ = c.parallel.sequence_parallel && d_.tensor > 1;
    // fp8 training (Transformer Engine) runs the matmuls in fp8 and keeps activations, attention and
    // communication in bf16.
    const bool fp8 = c.dtype == DType::kF8E4M3FN || c.dtype == DType::kF8E5M2;
    act_dtype_ = fp8 ? DType::kBF16 : c.dtype;
    size_ = static_cast<double>(DTypeSize(act_dtype_));
    tokens_ = c.micro_batch * c.seq / d_.context;
    norm_tokens_ = sp_ ? static_cast<double>(tokens_) / d_.tensor : static_cast<double>(tokens_);
    slowdown_ = options.comm_slowdown >= 0 ? options.comm_slowdown
                                           : DefaultCommSlowdown(compute_.spec(), *mesh.topology());
    reduced_ = options.reduced && options.speed_factors.empty();
    record_ = options.record_schedule;
    blocking_p2p_ = options.blocking_p2p;
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
    simulated_ = SimulatedPositions();
    index_of_.assign(static_cast<size_t>(mesh_.size()), -1);
    for (size_t i = 0; i < simulated_.size(); ++i) index_of_[static_cast<size_t>(simulated_[i])] = static_cast<int64_t>(i);
    timeline_ = std::make_unique<StepTimeline>(static_cast<int64_t>(simulated_.size()), slowdown_);
    if (record_) labels_of_.assign(simulated_.size(), {});
    pipeline_groups_ = mesh_.PositionGroups(c_.parallel.pipeline_axes);
    for (const Role* role : {&tensor_, &data_, &context_, &expert_, &dp_and_cp_}) RegisterGroups(*role);
    for (size_t i = 0; i < simulated_.size(); ++i) BuildDevice(static_cast<int64_t>(i));
    return std::move(timeline_);
  }

  const std::vector<int64_t>& simulated() const { return simulated_; }
  // REQUIRES: ModelStepOptions::record_schedule. Per simulated device, what each op of its program is.
  const std::vector<std::vector<OpLabel>>& labels() const { return labels_of_; }

 private:
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

  // Appends an op to the current device's program and, when recording, what it is.
  void Emit(const TimelineOp& op, std::string_view what) {
    ops_->push_back(op);
    if (record_) labels_->push_back({what, phase_, layer_, micro_batch_, chunk_});
  }
  void Compute(std::string_view what, const LocalOpCost& cost, Category category) {
    Emit(TimelineOp::Compute(cost.seconds / speed_, category), what);
  }
  // [m, k] x [k, n] (batch of them).
  void Matmul(std::string_view what, double m, double k, double n, Category category, double batch = 1,
              std::optional<DType> dtype = std::nullopt) {
    const auto im = static_cast<int64_t>(m), ik = static_cast<int64_t>(k), in = static_cast<int64_t>(n);
    const auto ib = static_cast<int64_t>(batch);
    const DType type = dtype.value_or(c_.dtype);
    // A step repeats a few shapes many times: price each once (the tile search is the costly part).
    const auto key = std::make_tuple(ib, im, in, ik, type);
    auto it = matmul_cache_.find(key);
    if (it == matmul_cache_.end()) {
      const double flops = 2.0 * batch * m * k * n;
      const double bytes = batch * (m * k + k * n + m * n) * size_;
      it = matmul_cache_.emplace(key, compute_.Cost(flops, bytes, ContractionDims{ib, im, in, ik}, type)).first;
    }
    Compute(what, it->second, category);
  }
  // A memory-bound op moving `elements_moved` elements of the compute dtype (+ `extra_bytes`).
  void Elementwise(std::string_view what, double elements_moved, Category category, double extra_bytes = 0) {
    const double bytes = elements_moved * size_ + extra_bytes;
    Compute(what, compute_.Cost(elements_moved, bytes, ContractionDims{}, act_dtype_), category);
  }
  double CollectiveSeconds(const Role& role, CollectiveOp op, double bytes) {
    const auto key = std::make_tuple(&role, op, bytes);
    auto it = collective_cache_.find(key);
    if (it != collective_cache_.end()) return it->second;
    const double seconds = collectives_.Cost(op, role.axes, bytes).seconds;
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
  // Rotary embedding of q and k (read, write): the queries' and the keys' widths, not V's.
  double RopeElements() const { return 2.0 * static_cast<double>(tokens_) * (AttnWidth() + KvWidth()); }
  double Ff(bool moe) const { return 1.0 * (moe ? c_.expert_d_ff() : c_.d_ff) / d_.tensor; }
  double FfIn(bool moe) const { return (c_.activation == Activation::kSwiglu ? 2 : 1) * Ff(moe); }
  double Act() const { return static_cast<double>(tokens_) * c_.d_model; }  // [T, h] elements

  // Entering the tensor-parallel region: SP all-gathers the norm output (forward).
  void EnterTp() {
    if (sp_) Collective(tensor_, CollectiveOp::kAllGather, Act() * size_, kTensorComm);
  }
  // Leaving it: all-reduce (or SP reduce-scatter) of the row-parallel output.
  void LeaveTp() {
    if (d_.tensor > 1)
      Collective(tensor_, sp_ ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, Act() * size_, kTensorComm);
  }
  double Heads() const { return 1.0 * c_.micro_batch * c_.heads / d_.tensor; }

  // Causal flash attention of the local heads: queries of this context rank against every key.
  LocalOpCost FlashAttention(bool backward) const {
    const int64_t heads = c_.heads / d_.tensor;
    const int64_t kv = std::max<int64_t>(1, c_.effective_kv_heads() / d_.tensor);
    return compute_.FlashAttention(c_.micro_batch, heads, kv, c_.seq / d_.context, c_.seq, c_.effective_head_dim(),
                                   /*causal=*/true, backward, act_dtype_);
  }

  void AttentionCoreForward(Category cat) {
    const Category phase = phase_;
    phase_ = cat == kRecompute ? kRecompute : phase_;
    const double s_q = static_cast<double>(c_.seq) / d_.context, s_kv = static_cast<double>(c_.seq);
    const double hd = static_cast<double>(c_.effective_head_dim());
    int64_t ring = -1;
    if (d_.context > 1) {  // ring attention: K and V of the other context ranks stream in under the compute
      const double kv_bytes = 2.0 * tokens_ * KvWidth() * size_;
      ring = Start(context_, CollectiveOp::kAllGather, kv_bytes * d_.context, kContextComm, 1);
    }
    if (c_.flash_attention) {
      Compute("flash attention", FlashAttention(/*backward=*/false), cat);
    } else {
      const double scores = Heads() * s_q * s_kv;
      Matmul("attention scores", s_q, hd, s_kv, cat, Heads(), act_dtype_);  // Q K^T
      // Megatron's causal fused softmax (scaled_upper_triang_masked_softmax) reads only the unmasked lower
      // triangle (about half) and writes every score.
      Elementwise("softmax", 1.5 * scores, cat);
      if (c_.dropout) Elementwise("dropout", 2 * scores, cat, scores);  // dropout: read, write, 1-byte mask
      Matmul("attention values", s_q, s_kv, hd, cat, Heads(), act_dtype_);  // P V
    }
    Wait(ring, kContextComm);
    phase_ = phase;
  }

  void AttentionCoreBackward() {
    const double s_q = static_cast<double>(c_.seq) / d_.context, s_kv = static_cast<double>(c_.seq);
    const double hd = static_cast<double>(c_.effective_head_dim());
    int64_t ring = -1;
    if (d_.context > 1) {  // dK, dV travel back around the ring
      const double kv_bytes = 2.0 * tokens_ * KvWidth() * size_;
      ring = Start(context_, CollectiveOp::kReduceScatter, kv_bytes * d_.context, kContextComm, 1);
    }
    if (c_.flash_attention) {
      Compute("flash attention", FlashAttention(/*backward=*/true), kBackward);
    } else {
      const double scores = Heads() * s_q * s_kv;
      Matmul("attention dP", s_q, hd, s_kv, kBackward, Heads(), act_dtype_);  // dP = dO V^T
      Matmul("attention dV", s_kv, s_q, hd, kBackward, Heads(), act_dtype_);  // dV = P^T dO
      if (c_.dropout) Elementwise("dropout", 2 * scores, kBackward, scores);
      Elementwise("softmax", 2 * scores, kBackward);  // softmax backward: read P and dP in the lower triangle, write dS
      Matmul("attention dQ", s_q, s_kv, hd, kBackward, Heads(), act_dtype_);  // dQ = dS K
      Matmul("attention dK", s_kv, s_q, hd, kBackward, Heads(), act_dtype_);  // dK = dS^T Q
    }
    Wait(ring, kContextComm);
  }

  void NormForward(Category cat) { Elementwise("norm", 2 * norm_tokens_ * c_.d_model, cat); }
  void NormBackward() { Elementwise("norm", 3 * norm_tokens_ * c_.d_model, kBackward); }
  // Bias + dropout + residual add: read two, write one (+ a mask byte).
  void ResidualForward(Category cat) {
    Elementwise("residual", 3 * norm_tokens_ * c_.d_model, cat, c_.dropout ? norm_tokens_ * c_.d_model : 0);
  }
  void ResidualBackward() {
    Elementwise("residual", 3 * norm_tokens_ * c_.d_model, kBackward, c_.dropout ? norm_tokens_ * c_.d_model : 0);
  }

  void MlpForward(bool moe, Category cat) {
    const double T = static_cast<double>(tokens_);
    double routed = T;
    if (moe) {
      Matmul("router", T, c_.d_model, c_.moe.experts, cat);  // router logits
      routed = T * c_.moe.top_k * c_.moe.capacity_factor;
      if (d_.expert > 1) Collective(expert_, CollectiveOp::kAllToAll, routed * c_.d_model * size_, kExpertComm);
    }
    Matmul("mlp up matmul", routed, c_.d_model, FfIn(moe), cat);
    Elementwise("mlp activation", (c_.activation == Activation::kSwiglu ? 3 : 2) * routed * Ff(moe), cat);
    Matmul("mlp down matmul", routed, Ff(moe), c_.d_model, cat);
    if (moe && d_.expert > 1) Collective(expert_, CollectiveOp::kAllToAll, routed * c_.d_model * size_, kExpertComm);
  }

  void MlpBackward(bool moe) {
    const double T = static_cast<double>(tokens_);
    double routed = T;
    if (moe) {
      routed = T * c_.moe.top_k * c_.moe.capacity_factor;
      if (d_.expert > 1) Collective(expert_, CollectiveOp::kAllToAll, routed * c_.d_model * size_, kExpertComm);
    }
    Matmul("mlp down dgrad", routed, c_.d_model, Ff(moe), kBackward);  // dgrad of the second matmul
    Matmul("mlp down wgrad", Ff(moe), routed, c_.d_model, kBackward);  // wgrad
    Elementwise("mlp activation", (c_.activation == Activation::kSwiglu ? 5 : 3) * routed * Ff(moe), kBackward);
    ColumnParallelBackward("mlp up dgrad", "mlp up wgrad", routed, FfIn(moe));
    if (moe) {
      if (d_.expert > 1) Collective(expert_, CollectiveOp::kAllToAll, routed * c_.d_model * size_, kExpertComm);
      Matmul("router dgrad", T, c_.moe.experts, c_.d_model, kBackward);
      Matmul("router wgrad", c_.d_model, T, c_.moe.experts, kBackward);
    }
  }

  // Backward of a column-parallel matmul [T, h] x [h, n]: Megatron overlaps the all-reduce (SP:
  // reduce-scatter) of the input gradient with the weight-gradient matmul, and with SP re-gathers the input
  // for the weight gradient under the input-gradient matmul (Korthikanti et al. 2022, section 4.2.2).
  void ColumnParallelBackward(std::string_view what_dgrad, std::string_view what_wgrad, double tokens, double n) {
    const int64_t gather = sp_ ? Start(tensor_, CollectiveOp::kAllGather, Act() * size_, kTensorComm) : -1;
    Matmul(what_dgrad, tokens, n, c_.d_model, kBackward);                  // dgrad
    Wait(gather, kTensorComm);
    const int64_t reduce =
        d_.tensor > 1 ? Start(tensor_, sp_ ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, Act() * size_,
                              kTensorComm)
                      : -1;
    Matmul(what_wgrad, c_.d_model, tokens, n, kBackward);                  // wgrad
    Wait(reduce, kTensorComm);
  }

  // ZeRO-3 / FSDP: a layer's weights are all-gathered over the data (and context) ranks before use, the next
  // layer's gather prefetched on the second stream while this one computes (FSDP's forward / backward prefetch).
  void GatherLayerWeights(bool moe) {
    if (c_.parallel.zero_stage < 3 || dp_and_cp_.size <= 1) return;
    const double bytes = LayerParamsPerDevice(c_, d_, moe) * size_;
    if (prefetched_gather_ < 0) prefetched_gather_ = Start(dp_and_cp_, CollectiveOp::kAllGather, bytes, kDataComm, 1);
    Wait(prefetched_gather_, kDataComm);
    prefetched_gather_ = Start(dp_and_cp_, CollectiveOp::kAllGather, bytes, kDataComm, 1);
  }

  void LayerForward(bool moe, Category cat) {
    const double T = static_cast<double>(tokens_);
    const Category phase = phase_;
    phase_ = cat;
    GatherLayerWeights(moe);
    NormForward(cat);
    EnterTp();
    Matmul("qkv matmul", T, c_.d_model, Qkv(), cat);
    if (c_.position == PositionEmbedding::kRope) Elementwise("rope", RopeElements(), cat);
    AttentionCoreForward(cat);
    Matmul("attention out matmul", T, AttnWidth(), c_.d_model, cat);
    LeaveTp();
    ResidualForward(cat);
    NormForward(cat);
    EnterTp();
    MlpForward(moe, cat);
    LeaveTp();
    ResidualForward(cat);
    phase_ = phase;
  }

  void LayerBackward(bool moe) {
    const double T = static_cast<double>(tokens_);
    if (c_.recompute == Recompute::kFull) LayerForward(moe, kRecompute);
    else GatherLayerWeights(moe);
    ResidualBackward();
    if (sp_) Collective(tensor_, CollectiveOp::kAllGather, Act() * size_, kTensorComm);  // backward of the RS
    MlpBackward(moe);
    NormBackward();
    ResidualBackward();
    if (sp_) Collective(tensor_, CollectiveOp::kAllGather, Act() * size_, kTensorComm);
    Matmul("attention out dgrad", T, c_.d_model, AttnWidth(), kBackward);  // output projection dgrad
    Matmul("attention out wgrad", AttnWidth(), T, c_.d_model, kBackward);  // wgrad
    if (c_.recompute == Recompute::kSelective && !c_.flash_attention) AttentionCoreForward(kRecompute);
    AttentionCoreBackward();
    if (c_.position == PositionEmbedding::kRope) Elementwise("rope", RopeElements(), kBackward);
    ColumnParallelBackward("qkv dgrad", "qkv wgrad", T, Qkv());
    NormBackward();
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
    // cast to fp32, max, exp, sum, normalise: ~5 fp32 passes
    Elementwise("cross-entropy", T * V, kHead, 5 * 4 * T * V);
    if (d_.tensor > 1) {
      for (int i = 0; i < 3; ++i) Collective(tensor_, CollectiveOp::kAllReduce, T * 4, kTensorComm);
    }
  }
  void LossBackward() {
    const double T = static_cast<double>(tokens_), V = VocabLocal();
    Elementwise("cross-entropy", T * V, kHead, 4 * T * V);  // softmax - one-hot (fp32 in, dtype out)
    Matmul("logits dgrad", T, V, c_.d_model, kHead);  // dgrad
    Matmul("logits wgrad", c_.d_model, T, V, kHead);  // wgrad
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
      pipe_seconds_ = collectives_.Cost(CollectiveOp::kPermute, pipeline_.axes, bytes, pairs).seconds;
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
    const int64_t per_chunk = c_.layers / (p * v);
    SetLabelContext(task.forward ? kForward : kBackward, -1, task.micro_batch, task.chunk);
    if (task.forward) {
      if (vstage > 0) ReceiveActivations(prev_, Tag(true, task.micro_batch, vstage));
      if (paired != nullptr) {
        const int64_t paired_vstage = paired->chunk * p + stage;
        if (paired_vstage < last) ReceiveActivations(next_, Tag(false, paired->micro_batch, paired_vstage));
        received_paired_ = true;
      }
      AwaitAcknowledgements();
      if (vstage == 0) EmbeddingForward();
      for (int64_t i = 0; i < per_chunk; ++i) {
        layer_ = static_cast<int32_t>(vstage * per_chunk + i);
        LayerForward(c_.is_moe_layer(vstage * per_chunk + i), kForward);
      }
      layer_ = -1;
      if (vstage < last) SendActivations(next_, Tag(true, task.micro_batch, vstage + 1));
      else LossForward();
      return;
    }
    if (received_paired_) {
      received_paired_ = false;  // received at the forward's exchange
    } else {
      if (vstage < last) ReceiveActivations(next_, Tag(false, task.micro_batch, vstage));
      AwaitAcknowledgements();
    }
    if (vstage == last) LossBackward();
    const bool last_micro_batch = task.micro_batch == d_.micro_batches - 1;
    for (int64_t i = per_chunk - 1; i >= 0; --i) {
      const bool moe = c_.is_moe_layer(vstage * per_chunk + i);
      layer_ = static_cast<int32_t>(vstage * per_chunk + i);
      LayerBackward(moe);
      // ZeRO-2/3 keep only their shard of the gradients: reduce-scatter after every micro-batch.
      if (last_micro_batch || c_.parallel.zero_stage >= 2) StartGradientReduction(LayerParamsPerDevice(c_, d_, moe));
    }
    layer_ = -1;
    if (vstage > 0) SendActivations(prev_, Tag(false, task.micro_batch, vstage - 1));
    else EmbeddingBackward();
    if (last_micro_batch && (vstage == 0 || vstage == last))
      StartGradientReduction(VocabParamsPerDevice(c_, d_));
  }

  // Data-parallel gradient reduction of one layer's gradients, started as soon as the last micro-batch's
  // backward produced them (Megatron's overlap_grad_reduce), in fp32 (Megatron accumulates and reduces main
  // gradients in fp32 with bf16 training): all-reduce, or reduce-scatter with ZeRO >= 1 (distributed optimizer).
  // Dense gradients reduce over data and context ranks.
  void StartGradientReduction(double params) {
    const Role& role = dp_and_cp_;
    if (role.size <= 1) return;
    const CollectiveOp op = c_.parallel.zero_stage >= 1 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
    pending_grads_.push_back(Start(role, op, params * 4, kDataComm, 1));
  }

  void Optimizer(int64_t stage) {
    SetLabelContext(kOptimizer, -1, -1, 0);
    AwaitAcknowledgements();
    Wait(prefetched_gather_, kDataComm);
    prefetched_gather_ = -1;
    for (int64_t h : pending_grads_) Wait(h, kDataComm);
    pending_grads_.clear();
    const Role& role = dp_and_cp_;
    double params = 0;
    const int64_t p = d_.pipeline, v = c_.parallel.virtual_stages, per_chunk = c_.layers / (p * v);
    for (int64_t chunk = 0; chunk < v; ++chunk)
      for (int64_t i = 0; i < per_chunk; ++i)
        params += LayerParamsPerDevice(c_, d_, c_.is_moe_layer((chunk * p + stage) * per_chunk + i));
    if (stage == 0) params += VocabParamsPerDevice(c_, d_);
    if (stage == p - 1) params += VocabParamsPerDevice(c_, d_);
    const double shard = c_.parallel.zero_stage >= 1 ? params / role.size : params;
    // AdamW, fused: read fp32 master weight, gradient, m, v; write master, m, v and the dtype copy; plus one
    // read of the gradients for the global norm (clipping).
    Compute("adamw", compute_.Cost(10 * shard, shard * (4 * 4 + 3 * 4 + size_ + 4), ContractionDims{}, DType::kF32),
            kOptimizer);
    if (c_.parallel.zero_stage >= 1 && c_.parallel.zero_stage < 3 && role.size > 1)
      Collective(role, CollectiveOp::kAllGather, params * size_, kDataComm);  // updated weights back to every rank
  }

  // What the ops emitted from now on belong to (the schedule's labels).
  void SetLabelContext(Category phase, int32_t layer, int64_t micro_batch, int64_t chunk) {
    phase_ = phase;
    layer_ = layer;
    micro_batch_ = static_cast<int32_t>(micro_batch);
    chunk_ = static_cast<int32_t>(chunk);
  }

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
  Role tensor_, data_, context_, pipeline_, expert_, dp_and_cp_;
  bool sp_ = false, reduced_ = true, blocking_p2p_ = false;
  std::vector<std::pair<int64_t, int64_t>> unacknowledged_;  // blocking p2p: (peer, tag) of sends not yet awaited
  bool received_paired_ = false;  // the next backward's receive was done at the forward's exchange
  DType act_dtype_ = DType::kBF16;
  double size_ = 2, slowdown_ = 0, norm_tokens_ = 0, speed_ = 1;
  std::map<int, double> speed_factors_;
  int64_t tokens_ = 0;
  std::vector<int64_t> simulated_, index_of_;
  std::unique_ptr<StepTimeline> timeline_;
  std::map<const Role*, std::vector<int32_t>> group_ids_;
  std::map<std::tuple<const Role*, CollectiveOp, double>, double> collective_cache_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, DType>, LocalOpCost> matmul_cache_;
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

// One simulated device's schedule: its ops that took time, labelled, and its breakdown.
StepDeviceSchedule DeviceSchedule(const std::vector<TimelineOp>& program, const std::vector<OpLabel>& labels,
                                  const std::vector<OpInterval>& intervals, const DeviceTimes& t) {
  StepDeviceSchedule out;
  for (size_t i = 0; i < program.size(); ++i) {
    const OpInterval& when = intervals[i];
    if (!(when.end > when.start)) continue;
    const TimelineOp& op = program[i];
    const OpLabel& label = labels[i];
    out.events.push_back({StreamOf(op), EventKindOf(op), kCategoryNames[op.category], kCategoryNames[label.phase],
                          label.op, label.layer, label.micro_batch, label.chunk, when.start, when.end});
  }
  out.end_seconds = t.end;
  out.compute_seconds = t.compute;
  out.exposed_comm_seconds = t.exposed_comm;
  out.bubble_seconds = t.pipeline_wait;
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
  out.comm_slowdown = builder.slowdown();
  FillBreakdown(t, &out.compute_by_phase, &out.comm_by_kind, &out.exposed_by_kind);
  out.simulated_devices = static_cast<int64_t>(times.size());
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
  using Breakdown = std::map<std::string, double> ModelStepTimes::*;
  for (Breakdown field : {&ModelStepTimes::compute_by_phase, &ModelStepTimes::comm_by_kind, &ModelStepTimes::exposed_by_kind})
    for (auto& [key, value] : out.*field) value = line((a.*field).at(key), value);
  out.timeline_ops = a.timeline_ops + b.timeline_ops;  // what was simulated
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
  }
  return "?";
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
  const double peak = ComputeModel(*mesh.topology(), options.roofline).MatrixPeak(config.dtype);
  out.mfu = out.model_flops / (out.step_seconds * static_cast<double>(mesh.size()) * peak);
  return out;
}

}  // namespace spmdsim
