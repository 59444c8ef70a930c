// LayerEmitter: a layer's forward and backward, the embedding, loss and MTP inputs, the op appenders and the
// pieces every block uses (model/internal/layer_emitter.h).
#include "model/internal/layer_emitter.h"

namespace spmdsim::internal {
namespace {

constexpr LayerPhase kForward = LayerPhase::kForward;
constexpr LayerPhase kBackward = LayerPhase::kBackward;
constexpr LayerPhase kRecompute = LayerPhase::kRecompute;
constexpr MatmulPass kDgrad = MatmulPass::kDgrad;
constexpr MatmulPass kWgrad = MatmulPass::kWgrad;

}  // namespace

void LayerEmitter::LayerForward(int64_t layer, LayerPhase phase) {
  const LayerPhase outer = phase_;
  phase_ = phase;
  const bool moe = IsMoe(layer);
  block_ = LayerBlock::kAttention;
  GatherLayerWeights(moe, /*backward=*/phase == kRecompute);
  Fp8Casts(moe, /*backward=*/false);
  NormForward();
  AttentionForward(layer);
  ResidualForward();
  block_ = FeedForwardBlock(moe);
  NormForward();
  FeedForwardForward(moe);
  ResidualForward();
  phase_ = outer;
}

void LayerEmitter::LayerBackward(int64_t layer) {
  phase_ = kBackward;
  const bool moe = IsMoe(layer);
  if (c_.recompute == Recompute::kFull) {
    LayerForward(layer, kRecompute);
  } else {
    block_ = LayerBlock::kAttention;
    GatherLayerWeights(moe, /*backward=*/true);
  }
  block_ = LayerBlock::kAttention;
  Fp8Casts(moe, /*backward=*/true);
  block_ = FeedForwardBlock(moe);
  ResidualBackward();
  const bool folded = moe && c_.experts_over_tensor();
  if (sp_ && !folded) Collective(LayerOpId::kSeqGather, CollectiveOp::kAllGather, Act() * size_);  // of the RS
  MlpBackward(moe);
  NormBackward();
  block_ = LayerBlock::kAttention;
  ResidualBackward();
  AttentionBackward(layer);
}

void LayerEmitter::EmbeddingForward() {
  const LayerBlock outer = block_;
  block_ = LayerBlock::kEmbedding;
  head_ = true;
  Elementwise(LayerOpId::kEmbedding, "embedding", 2 * Act());  // gather the rows, write the activations
  head_ = false;
  LeaveTp();  // vocabulary-parallel embedding: all-reduce (SP: reduce-scatter)
  block_ = outer;
}

void LayerEmitter::EmbeddingBackward() {
  const LayerBlock outer = block_;
  block_ = LayerBlock::kEmbedding;
  if (sp_) Collective(LayerOpId::kSeqGather, CollectiveOp::kAllGather, Act() * size_);
  head_ = true;
  Elementwise(LayerOpId::kEmbedding, "embedding", 3 * Act());  // scatter-add into the embedding gradient
  head_ = false;
  block_ = outer;
}

void LayerEmitter::LossForward() {
  const double T = static_cast<double>(tokens_), V = VocabLocal();
  block_ = LayerBlock::kLoss;
  head_ = true;
  NormForward();
  EnterTp();
  Matmul(LayerOpId::kLogits, MatmulPass::kForward, "logits matmul", T, c_.d_model, V);
  Kernels(LayerOpId::kCrossEntropy, "cross-entropy", LayerMemory::kCrossEntropy, T * V);  // fp32 statistics
  if (HasTensor()) {
    for (int i = 0; i < 3; ++i) Collective(LayerOpId::kCrossEntropy, CollectiveOp::kAllReduce, T * 4);
  }
  head_ = false;
}

void LayerEmitter::LossBackward() {
  const double T = static_cast<double>(tokens_), V = VocabLocal();
  block_ = LayerBlock::kLoss;
  head_ = true;
  // softmax - one-hot (fp32 in, dtype out)
  Kernels(LayerOpId::kCrossEntropy, "cross-entropy", LayerMemory::kCrossEntropy, T * V);
  Matmul(LayerOpId::kLogits, kDgrad, "logits dgrad", T, V, c_.d_model);
  Matmul(LayerOpId::kLogits, kWgrad, "logits wgrad", c_.d_model, T, V);
  head_ = false;
  if (HasTensor()) Collective(LayerOpId::kTensorReduce, ReduceOp(), Act() * size_);
  NormBackward();
}

void LayerEmitter::MtpInputForward() {
  const double T = static_cast<double>(tokens_), h = c_.d_model;
  EmbeddingForward();
  block_ = LayerBlock::kMtp;
  head_ = true;
  NormForward();
  NormForward();
  Elementwise(LayerOpId::kMtpConcat, "mtp concat", 2 * 2 * s_.norm_tokens * h);  // read both, write [T, 2h]
  EnterTp(0, 2 * h);
  Matmul(LayerOpId::kMtpProjection, MatmulPass::kForward, "mtp projection", T, 2 * h, h / d_.tensor);
  head_ = false;
  GatherOverTensor(T * h);
}

void LayerEmitter::MtpInputBackward() {
  const double T = static_cast<double>(tokens_), h = c_.d_model;
  block_ = LayerBlock::kMtp;
  ColumnParallelBackward(LayerOpId::kMtpProjection, "mtp projection dgrad", "mtp projection wgrad", T,
                         h / d_.tensor, 2 * h);
  Elementwise(LayerOpId::kMtpConcat, "mtp concat", 2 * 2 * s_.norm_tokens * h);
  NormBackward();
  NormBackward();
  EmbeddingBackward();
}

LayerOp LayerEmitter::Base(LayerOpKind kind, LayerOpId id, std::string_view name) const {
  LayerOp op;
  op.kind = kind;
  op.id = id;
  op.block = block_;
  op.phase = phase_;
  op.head = head_;
  op.name = name;
  return op;
}

void LayerEmitter::Matmul(LayerOpId id, MatmulPass pass, std::string_view name, double m, double k, double n,
                          double batch, std::optional<DType> dtype) {
  LayerOp op = Base(LayerOpKind::kMatmul, id, name);
  op.pass = pass;
  op.m = m;
  op.k = k;
  op.n = n;
  op.batch = batch;
  op.dtype = dtype.value_or(c_.dtype);
  out_->push_back(op);
}

void LayerEmitter::Linear(LayerOpId id, std::string_view name, double m, double k, double n, double batch) {
  Matmul(id, MatmulPass::kForward, name, m, k, n, batch);
}

void LayerEmitter::Elementwise(LayerOpId id, std::string_view name, double elements_moved, double extra_bytes) {
  Kernels(id, name, LayerMemory::kPlain, elements_moved, extra_bytes);
}

void LayerEmitter::Kernels(LayerOpId id, std::string_view name, LayerMemory memory, double elements,
                           double extra_bytes) {
  LayerOp op = Base(LayerOpKind::kMemory, id, name);
  op.memory = memory;
  op.elements = elements;
  op.extra_bytes = extra_bytes;
  out_->push_back(op);
}

bool LayerEmitter::HasAxes(LayerGroup group) const {
  switch (group) {
    case LayerGroup::kTensor: return !c_.parallel.tensor_axes.empty();
    case LayerGroup::kContext: return !c_.parallel.context_axes.empty();
    case LayerGroup::kExpert: return !c_.parallel.expert_axes.empty();
    case LayerGroup::kZero: return !c_.parallel.data_axes.empty() || !c_.parallel.context_axes.empty();
  }
  return false;
}

int32_t LayerEmitter::Start(LayerOpId id, LayerGroup group, CollectiveOp collective, double bytes, uint8_t stream) {
  if (!HasAxes(group)) return -1;
  LayerOp op = Base(LayerOpKind::kStart, id, CollectiveOpName(collective));
  op.op = collective;
  op.group = group;
  op.bytes = bytes;
  op.stream = stream;
  out_->push_back(op);
  return static_cast<int32_t>(out_->size() - 1);
}

void LayerEmitter::Wait(int32_t start) {
  if (start < 0) return;
  const LayerOp& started = (*out_)[static_cast<size_t>(start)];
  LayerOp op = Base(LayerOpKind::kWait, started.id, started.name);
  op.start = start;
  out_->push_back(op);
}

void LayerEmitter::Collective(LayerOpId id, CollectiveOp collective, double bytes, uint8_t stream) {
  Wait(Start(id, LayerGroup::kTensor, collective, bytes, stream));
}

double LayerEmitter::KvWidth() const {
  const double kv_local = c_.effective_kv_heads() >= d_.tensor ? 1.0 * c_.effective_kv_heads() / d_.tensor : 1.0;
  return kv_local * static_cast<double>(c_.effective_head_dim());
}

double LayerEmitter::QkDim() const {
  return c_.is_mla() ? static_cast<double>(c_.mla.qk_head_dim + c_.mla.qk_rope_head_dim)
                     : static_cast<double>(c_.effective_head_dim());
}

double LayerEmitter::VDim() const {
  return c_.is_mla() ? static_cast<double>(c_.mla.v_head_dim) : static_cast<double>(c_.effective_head_dim());
}

double LayerEmitter::RopeElements() const {
  if (c_.is_mla()) return 2.0 * static_cast<double>(tokens_) * (LocalHeads() + 1) * c_.mla.qk_rope_head_dim;
  return 2.0 * static_cast<double>(tokens_) * (AttnWidth() + KvWidth());
}

double LayerEmitter::MlaDownWidth() const {
  const MlaConfig& a = c_.mla;
  return static_cast<double>(a.q_lora_rank > 0 ? a.q_lora_rank : c_.heads * (a.qk_head_dim + a.qk_rope_head_dim));
}

void LayerEmitter::GatherLayerWeights(bool moe, bool backward) {
  if (c_.parallel.zero_stage < 3 || !HasAxes(LayerGroup::kZero)) return;
  if (backward && !c_.parallel.reshard_after_forward) return;
  LayerOp op = Base(LayerOpKind::kGatherWeights, LayerOpId::kGatherWeights, "all_gather");
  op.op = CollectiveOp::kAllGather;
  op.group = LayerGroup::kZero;
  op.stream = 1;
  op.params = LayerParamsPerDevice(c_, d_, moe);
  out_->push_back(op);
}

void LayerEmitter::Fp8Casts(bool moe, bool backward) {
  if (!s_.fp8) return;
  const double T = static_cast<double>(tokens_), h = static_cast<double>(c_.d_model);
  const double rows = moe ? Rows() : T;
  if (backward) {
    for (double elements : {T * Qkv(), T * h, rows * FfIn(Ff(moe)), rows * h})
      Kernels(LayerOpId::kFp8Cast, "fp8 cast-transpose", LayerMemory::kFp8CastTranspose, elements);
  } else {
    for (double elements : {T * h, T * AttnWidth(), rows * h, rows * Ff(moe)})
      Kernels(LayerOpId::kFp8Cast, "fp8 cast-transpose", LayerMemory::kFp8CastTranspose, elements);
  }
}

void LayerEmitter::NormBackward(double width) {
  const LayerPhase outer = phase_;
  phase_ = kBackward;
  Kernels(LayerOpId::kNorm, "norm", LayerMemory::kNorm, NormElements(width));
  phase_ = outer;
}

void LayerEmitter::ResidualForward() {
  Kernels(LayerOpId::kResidual, "residual", LayerMemory::kResidual, s_.norm_tokens * c_.d_model,
          c_.dropout ? s_.norm_tokens * c_.d_model : 0);
}

void LayerEmitter::Activation(double elements) {
  Kernels(LayerOpId::kActivation, "mlp activation", LayerMemory::kActivation, elements);
}

void LayerEmitter::EnterTp(uint8_t stream, double width) {
  if (sp_) Collective(LayerOpId::kSeqGather, CollectiveOp::kAllGather, Tokens(width) * size_, stream);
}

void LayerEmitter::LeaveTp(uint8_t stream) {
  if (HasTensor()) Collective(LayerOpId::kTensorReduce, ReduceOp(), Act() * size_, stream);
}

void LayerEmitter::GatherOverTensor(double elements) {
  if (HasTensor()) Collective(LayerOpId::kTensorGather, CollectiveOp::kAllGather, elements * size_);
}

void LayerEmitter::ColumnParallelBackward(LayerOpId id, std::string_view dgrad, std::string_view wgrad, double tokens,
                                          double n, double in_width) {
  const double k = Width(in_width), bytes = Tokens(k) * size_;
  const int32_t gather =
      sp_ ? Start(LayerOpId::kInputRegather, LayerGroup::kTensor, CollectiveOp::kAllGather, bytes) : -1;
  Matmul(id, kDgrad, dgrad, tokens, n, k);
  Wait(gather);
  const int32_t reduce = Start(LayerOpId::kTensorReduce, LayerGroup::kTensor, ReduceOp(), bytes);
  Matmul(id, kWgrad, wgrad, k, tokens, n);
  Wait(reduce);
}

}  // namespace spmdsim::internal
