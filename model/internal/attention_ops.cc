// LayerEmitter's attention: the fused QKV projection and the attention core, or multi-head latent attention
// (model/internal/layer_emitter.h).
#include "model/internal/layer_emitter.h"

namespace spmdsim::internal {
namespace {

constexpr LayerPhase kForward = LayerPhase::kForward;
constexpr LayerPhase kBackward = LayerPhase::kBackward;
constexpr LayerPhase kRecompute = LayerPhase::kRecompute;
constexpr MatmulPass kDgrad = MatmulPass::kDgrad;
constexpr MatmulPass kWgrad = MatmulPass::kWgrad;

}  // namespace

FlashAttentionShape LayerEmitter::FlashShape(int64_t layer, bool backward) const {
  FlashAttentionShape a;
  a.batch = c_.micro_batch;
  a.heads = c_.heads / d_.tensor;
  a.kv_heads = c_.is_mla() ? a.heads : std::max<int64_t>(1, c_.effective_kv_heads() / d_.tensor);
  a.head_dim = static_cast<int64_t>(QkDim() + VDim()) / 2;
  const int64_t w = c_.attention_window.window, s = c_.seq;
  const bool windowed = layer < c_.layers && c_.is_windowed_layer(layer) && w < s;  // no context parallelism
  a.q_len = windowed ? s : s / d_.context;
  a.kv_len = windowed ? (w * (w + 1) / 2 + (s - w) * w + s - 1) / s : s;  // the window's pairs / s
  a.causal = !windowed;
  a.backward = backward;
  return a;
}

void LayerEmitter::FlashAttention(int64_t layer, bool backward) {
  LayerOp op = Base(LayerOpKind::kFlashAttention, LayerOpId::kFlashAttention, "flash attention");
  op.attention = FlashShape(layer, backward);
  out_->push_back(op);
}

int32_t LayerEmitter::KvExchange(LayerOpId id, CollectiveOp collective) {
  return Start(id, LayerGroup::kContext, collective, tokens_ * KvElements() * size_ * d_.context, 1);
}

void LayerEmitter::AttentionCoreForward(int64_t layer) {
  const double s_q = static_cast<double>(c_.seq) / d_.context, s_kv = static_cast<double>(c_.seq);
  const int32_t ring = KvExchange(LayerOpId::kKvGather, CollectiveOp::kAllGather);
  if (c_.flash_attention) {
    FlashAttention(layer, /*backward=*/false);
  } else {
    // Materialised scores: a sliding window only masks them (the work is that of the whole causal prefix).
    const double scores = Heads() * s_q * s_kv;
    Matmul(LayerOpId::kScores, MatmulPass::kForward, "attention scores", s_q, QkDim(), s_kv, Heads(),
           s_.act_dtype);  // Q K^T
    // Megatron's causal fused softmax (scaled_upper_triang_masked_softmax) reads only the unmasked lower
    // triangle (about half) and writes every score.
    Elementwise(LayerOpId::kSoftmax, "softmax", 1.5 * scores);
    if (c_.dropout) Elementwise(LayerOpId::kDropout, "dropout", 2 * scores, scores);  // read, write, 1-byte mask
    Matmul(LayerOpId::kValues, MatmulPass::kForward, "attention values", s_q, s_kv, VDim(), Heads(),
           s_.act_dtype);  // P V
  }
  Wait(ring);
}

void LayerEmitter::AttentionCoreBackward(int64_t layer) {
  const double s_q = static_cast<double>(c_.seq) / d_.context, s_kv = static_cast<double>(c_.seq);
  const int32_t ring = KvExchange(LayerOpId::kKvGradScatter, CollectiveOp::kReduceScatter);  // dK, dV back
  if (c_.flash_attention) {
    FlashAttention(layer, /*backward=*/true);
  } else {
    const double scores = Heads() * s_q * s_kv;
    const DType act = s_.act_dtype;
    Matmul(LayerOpId::kValues, kDgrad, "attention dP", s_q, VDim(), s_kv, Heads(), act);  // dP = dO V^T
    Matmul(LayerOpId::kValues, kWgrad, "attention dV", s_kv, s_q, VDim(), Heads(), act);  // dV = P^T dO
    if (c_.dropout) Elementwise(LayerOpId::kDropout, "dropout", 2 * scores, scores);
    // softmax backward: read P and dP in the lower triangle, write dS
    Elementwise(LayerOpId::kSoftmax, "softmax", 2 * scores);
    Matmul(LayerOpId::kScores, kDgrad, "attention dQ", s_q, s_kv, QkDim(), Heads(), act);  // dQ = dS K
    Matmul(LayerOpId::kScores, kWgrad, "attention dK", s_kv, s_q, QkDim(), Heads(), act);  // dK = dS^T Q
  }
  Wait(ring);
}

void LayerEmitter::AttentionForward(int64_t layer) {
  if (c_.is_mla()) {
    MlaForward(layer);
    return;
  }
  const double T = static_cast<double>(tokens_);
  EnterTp();
  Linear(LayerOpId::kQkv, "qkv matmul", T, c_.d_model, Qkv());
  if (c_.position == PositionEmbedding::kRope) Rope();
  AttentionCoreForward(layer);
  Linear(LayerOpId::kOut, "attention out matmul", T, AttnWidth(), c_.d_model);
  LeaveTp();
}

void LayerEmitter::AttentionBackward(int64_t layer) {
  const double T = static_cast<double>(tokens_);
  if (sp_) Collective(LayerOpId::kSeqGather, CollectiveOp::kAllGather, Act() * size_);  // backward of the RS
  const double out_in = c_.is_mla() ? LocalHeads() * VDim() : AttnWidth();
  Matmul(LayerOpId::kOut, kDgrad, "attention out dgrad", T, c_.d_model, out_in);
  Matmul(LayerOpId::kOut, kWgrad, "attention out wgrad", out_in, T, c_.d_model);
  if (c_.is_mla()) {
    MlaBackward(layer);
    return;
  }
  if (c_.recompute == Recompute::kSelective && !c_.flash_attention) {
    phase_ = kRecompute;
    AttentionCoreForward(layer);
    phase_ = kBackward;
  }
  AttentionCoreBackward(layer);
  if (c_.position == PositionEmbedding::kRope) Rope();
  ColumnParallelBackward(LayerOpId::kQkv, "qkv dgrad", "qkv wgrad", T, Qkv());
  NormBackward();
}

void LayerEmitter::MlaUpForward() {
  const MlaConfig& a = c_.mla;
  const double T = static_cast<double>(tokens_);
  const double q_width = LocalHeads() * static_cast<double>(a.qk_head_dim + a.qk_rope_head_dim);
  if (a.q_lora_rank > 0) {
    NormForward(static_cast<double>(a.q_lora_rank));
    EnterTp(0, static_cast<double>(a.q_lora_rank));
    Linear(LayerOpId::kMlaQUp, "mla q up matmul", T, static_cast<double>(a.q_lora_rank), q_width);
  }
  NormForward(static_cast<double>(a.kv_lora_rank));
  EnterTp(0, static_cast<double>(a.kv_lora_rank));
  Linear(LayerOpId::kMlaKvUp, "mla kv up matmul", T, static_cast<double>(a.kv_lora_rank),
         LocalHeads() * static_cast<double>(a.qk_head_dim + a.v_head_dim));
  Rope();
  // q and k made whole: each head's qk part and rotary part concatenated (k's rotary part broadcast to every
  // head) into contiguous [T, heads / t, qk + rope] tensors: read and write both.
  Elementwise(LayerOpId::kMlaConcat, "mla q/k concat", 4 * T * LocalHeads() * QkDim());
}

void LayerEmitter::MlaForward(int64_t layer) {
  const MlaConfig& a = c_.mla;
  const double T = static_cast<double>(tokens_), t = static_cast<double>(d_.tensor);
  const double kv_down = static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim);
  EnterTp();
  // q down (or the direct q projection)
  Linear(LayerOpId::kMlaQDown, "mla q down matmul", T, c_.d_model, MlaDownWidth() / t);
  if (a.q_lora_rank > 0) GatherOverTensor(T * MlaDownWidth());
  EnterTp();
  Linear(LayerOpId::kMlaKvDown, "mla kv down matmul", T, c_.d_model, kv_down / t);  // kv down + k's rotary part
  GatherOverTensor(T * kv_down);
  MlaUpForward();
  AttentionCoreForward(layer);
  Linear(LayerOpId::kOut, "attention out matmul", T, LocalHeads() * VDim(), c_.d_model);
  LeaveTp();
}

void LayerEmitter::MlaBackward(int64_t layer) {
  const MlaConfig& a = c_.mla;
  const double T = static_cast<double>(tokens_), t = static_cast<double>(d_.tensor);
  if (a.recompute_up_proj) {
    phase_ = kRecompute;
    MlaUpForward();
    phase_ = kBackward;
  }
  AttentionCoreBackward(layer);
  // The concatenations' backward (k's rotary part summed).
  Elementwise(LayerOpId::kMlaConcat, "mla q/k concat", 4 * T * LocalHeads() * QkDim());
  Rope();
  ColumnParallelBackward(LayerOpId::kMlaKvUp, "mla kv up dgrad", "mla kv up wgrad", T,
                         LocalHeads() * static_cast<double>(a.qk_head_dim + a.v_head_dim),
                         static_cast<double>(a.kv_lora_rank));
  NormBackward(static_cast<double>(a.kv_lora_rank));
  if (a.q_lora_rank > 0) {
    ColumnParallelBackward(LayerOpId::kMlaQUp, "mla q up dgrad", "mla q up wgrad", T,
                           LocalHeads() * static_cast<double>(a.qk_head_dim + a.qk_rope_head_dim),
                           static_cast<double>(a.q_lora_rank));
    NormBackward(static_cast<double>(a.q_lora_rank));
  }
  // The down projections (the gathers' backward is a slice).
  ColumnParallelBackward(LayerOpId::kMlaKvDown, "mla kv down dgrad", "mla kv down wgrad", T,
                         static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim) / t);
  ColumnParallelBackward(LayerOpId::kMlaQDown, "mla q down dgrad", "mla q down wgrad", T, MlaDownWidth() / t);
  NormBackward();
}

}  // namespace spmdsim::internal
