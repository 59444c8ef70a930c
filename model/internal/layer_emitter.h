// LayerEmitter: appends the ops of one LayerOps list (model/layer_ops.h), one part of Megatron's layer at a
// time (docs/model.md, "The program of one device" and "Models people train now"), each op labelled with the
// phase, block and head flag set when it is appended. Its methods are defined by concern: layer_emitter.cc (a
// layer's forward and backward, the embedding, loss and MTP inputs, the op appenders and the pieces every block
// uses), attention_ops.cc (attention and MLA), feed_forward_ops.cc (the MLP, the routed and shared experts).
//
// Example: std::vector<LayerOp> ops;
//          LayerEmitter(config, degrees, shapes, &ops).LayerForward(3, LayerPhase::kForward);
// Thread safety: used by one thread; it writes only its list.
#ifndef SPMDSIM_MODEL_INTERNAL_LAYER_EMITTER_H_
#define SPMDSIM_MODEL_INTERNAL_LAYER_EMITTER_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "cost/collective_model.h"
#include "model/accounting.h"
#include "model/config.h"
#include "model/layer_op.h"

namespace spmdsim::internal {

class LayerEmitter {
 public:
  LayerEmitter(const ModelConfig& c, const ParallelDegrees& d, const LayerShapes& s, std::vector<LayerOp>* out)
      : c_(c), d_(d), s_(s), out_(out), tokens_(s.tokens), size_(s.act_size),
        sp_(c.parallel.sequence_parallel && !c.parallel.tensor_axes.empty()) {}
  void set_phase(LayerPhase phase) { phase_ = phase; }

  // --- one transformer layer ---
  void LayerForward(int64_t layer, LayerPhase phase);
  void LayerBackward(int64_t layer);

  // --- embedding, loss and MTP inputs ---
  void EmbeddingForward();
  void EmbeddingBackward();
  // Final norm, logits over the local vocabulary, vocabulary-parallel cross-entropy (fp32 logits).
  void LossForward();
  void LossBackward();
  // Multi-token prediction module's inputs (Megatron-Core MultiTokenPredictionLayer): the embedding of the
  // tokens shifted by k + 1 (vocabulary-parallel, as the input embedding), the norms of it and of the hidden
  // state, their concatenation projected [2h -> h] by a column-parallel eh_proj whose output is gathered over the
  // tensor ranks; its layer, final norm, logits and loss follow (the step runs them).
  void MtpInputForward();
  void MtpInputBackward();
 private:
  // --- op appenders ---
  LayerOp Base(LayerOpKind kind, LayerOpId id, std::string_view name) const;
  // [m, k] x [k, n] (batch of them), at the compute dtype's rate unless `dtype`.
  void Matmul(LayerOpId id, MatmulPass pass, std::string_view name, double m, double k, double n, double batch = 1,
              std::optional<DType> dtype = std::nullopt);
  // A forward matmul.
  void Linear(LayerOpId id, std::string_view name, double m, double k, double n, double batch = 1);
  // A memory-bound op moving `elements_moved` elements of the activation dtype (+ `extra_bytes`).
  void Elementwise(LayerOpId id, std::string_view name, double elements_moved, double extra_bytes = 0);
  // One memory-bound kernel of the stack over `elements` elements.
  void Kernels(LayerOpId id, std::string_view name, LayerMemory memory, double elements, double extra_bytes = 0);
  bool HasAxes(LayerGroup group) const;
  bool HasTensor() const { return HasAxes(LayerGroup::kTensor); }
  // Starts a collective; returns its op's index (-1 and nothing when the group has no axes).
  int32_t Start(LayerOpId id, LayerGroup group, CollectiveOp collective, double bytes, uint8_t stream = 0);
  void Wait(int32_t start);
  // A tensor-parallel collective waited for at once.
  void Collective(LayerOpId id, CollectiveOp collective, double bytes, uint8_t stream = 0);
  CollectiveOp ReduceOp() const { return sp_ ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce; }

  // --- shapes (Megatron's widths per tensor rank) ---
  double Act() const { return s_.Act(); }  // [T, h] elements
  // [T, width] elements (width 0: d_model).
  double Tokens(double width) const { return static_cast<double>(tokens_) * (width > 0 ? width : c_.d_model); }
  double Width(double width) const { return width > 0 ? width : static_cast<double>(c_.d_model); }
  double Heads() const { return 1.0 * c_.micro_batch * c_.heads / d_.tensor; }
  double LocalHeads() const { return 1.0 * c_.heads / d_.tensor; }
  // The queries' width, and one of K or V (kv_heads of them: MHA heads, GQA groups, MQA 1; fewer than the
  // ranks: one replicated): Megatron's query_projection_size / kv_projection_size over TP.
  double AttnWidth() const { return 1.0 * c_.heads / d_.tensor * c_.effective_head_dim(); }
  double KvWidth() const;
  double Qkv() const { return AttnWidth() + 2 * KvWidth(); }  // the fused QKV projection's output width
  // Per head: the width Q and K are contracted over, and V's (MLA: qk + rope, v).
  double QkDim() const;
  double VDim() const;
  // K and V of one token on one tensor rank, elements (what context parallelism moves).
  double KvElements() const { return c_.is_mla() ? 1.0 * c_.heads / d_.tensor * (QkDim() + VDim()) : 2 * KvWidth(); }
  // Rotary embedding of q and k (read, write): the queries' and the keys' widths, not V's (MLA: the decoupled
  // rotary parts, k's shared by the heads).
  double RopeElements() const;
  double MlaDownWidth() const;
  double Ff(bool moe) const { return moe ? 1.0 * c_.expert_d_ff() / d_.expert_tensor : 1.0 * c_.d_ff / d_.tensor; }
  double FfIn(double ff) const { return (c_.activation == Activation::kSwiglu ? 2 : 1) * ff; }
  // The tokens this rank routes (its sequence-parallel share when the experts span the tensor ranks) and the
  // rows its experts take: top_k x capacity per token (Megatron pads every expert to its capacity).
  double RoutedTokens() const { return c_.experts_over_tensor() ? s_.norm_tokens : static_cast<double>(tokens_); }
  double Rows() const { return RoutedTokens() * c_.moe.top_k * c_.moe.capacity_factor; }
  double LocalExperts() const { return static_cast<double>(c_.moe.experts / d_.expert); }
  double SharedFf() const { return 1.0 * c_.moe.shared_d_ff / d_.tensor; }
  double VocabLocal() const { return VocabParamsPerDevice(c_, d_) / c_.d_model; }
  bool IsMoe(int64_t layer) const { return c_.is_moe_layer(std::min(layer, c_.layers - 1)); }
  static LayerBlock FeedForwardBlock(bool moe) { return moe ? LayerBlock::kExperts : LayerBlock::kMlp; }

  // --- the pieces of a layer ---
  // ZeRO-3 / FSDP: a layer's weights are all-gathered over the data (and context) ranks before use. Without
  // resharding after the forward, the backward (and its recompute) uses the weights the forward gathered.
  void GatherLayerWeights(bool moe, bool backward);
  // Transformer Engine's fp8 recipe around the layer's four linears (transformer_engine/pytorch/module/linear.py
  // and layernorm_linear.py / layernorm_mlp.py): the forward casts each linear's bf16 input to fp8 together with
  // the transposed copy its weight gradient needs (fp8_cast_transpose_fused: read 2 bytes, write 1 + 1 per
  // element; one kernel, its amax reduction fused); the backward casts each output gradient the same way before
  // its dgrad and wgrad GEMMs. Weights are cast once per step (weight caching: not priced); the attention core
  // stays bf16. Inputs: QKV [T, h], projection [T, q], FC1 [T, h], FC2 [T, f]; output gradients: [T, q + 2 kv],
  // [T, h], [T, f_in], [T, h] (MoE: the routed rows of the MLP).
  void Fp8Casts(bool moe, bool backward);
  // A norm over `width` (0: d_model) of the sequence-parallel tokens.
  void NormForward(double width = 0) { Kernels(LayerOpId::kNorm, "norm", LayerMemory::kNorm, NormElements(width)); }
  void NormBackward(double width = 0);
  double NormElements(double width) const { return s_.norm_tokens * Width(width); }
  // Bias + dropout + residual add: read two, write one (+ a mask byte).
  void ResidualForward();
  void ResidualBackward() { ResidualForward(); }  // the same kernel's backward passes (the phase says which)
  // The activation of `elements` hidden elements.
  void Activation(double elements);
  // Rotary embedding of q and k (RopeElements counts a read and a write of each rotated element).
  void Rope() { Kernels(LayerOpId::kRope, "rope", LayerMemory::kRope, RopeElements() / 2); }
  // Entering the tensor-parallel region: SP all-gathers the norm output (forward). `stream` 1: beside a
  // collective in flight on stream 0 (the shared expert's, under the MoE all_to_all).
  void EnterTp(uint8_t stream = 0, double width = 0);
  // Leaving it: all-reduce (or SP reduce-scatter) of the row-parallel output.
  void LeaveTp(uint8_t stream = 0);
  void GatherOverTensor(double elements);
  // Backward of a column-parallel matmul [T, k] x [k, n] (k: `in_width`, 0: d_model): Megatron overlaps the
  // all-reduce (SP: reduce-scatter) of the input gradient with the weight-gradient matmul, and with SP re-gathers
  // the input for the weight gradient under the input-gradient matmul (Korthikanti et al. 2022, section 4.2.2).
  void ColumnParallelBackward(LayerOpId id, std::string_view dgrad, std::string_view wgrad, double tokens, double n,
                              double in_width = 0);

  // --- attention: the fused QKV projection, or multi-head latent attention ---
  // The fused attention core's shape: the local heads, queries of this context rank against every key. MLA's q
  // and k (qk + rope) and v (v) head widths enter as their mean, which keeps both the FLOPs and the bytes. A layer
  // in a sliding window of w keys runs causal within it: sum_i min(i, w) of the s^2 / 2 pairs, priced as a
  // non-causal attention over that many keys per query (its K / V reads then count the window).
  FlashAttentionShape FlashShape(int64_t layer, bool backward) const;
  void FlashAttention(int64_t layer, bool backward);
  // Ring attention's K and V of the other context ranks stream in under the compute (priced as an all-gather).
  int32_t KvExchange(LayerOpId id, CollectiveOp collective);
  void AttentionCoreForward(int64_t layer);
  void AttentionCoreBackward(int64_t layer);
  void AttentionForward(int64_t layer);
  void AttentionBackward(int64_t layer);
  // Multi-head latent attention as Megatron-Core 0.12 runs it with Transformer Engine (MLASelfAttention,
  // gpt_layer_specs.py; the version of NVIDIA's DeepSeek-V3 recipe): the down projections are column-parallel
  // (each all-gathers the sequence-parallel input) and their outputs are gathered over the tensor ranks; each up
  // projection is a layernorm-column-parallel linear (the q / kv norm, then an SP all-gather of its compressed
  // input); rotary embedding on the decoupled parts; flash attention; the row-parallel output projection.
  // The up projections, their norms and the rotary embedding (what mla_up_proj recompute reruns).
  void MlaUpForward();
  void MlaForward(int64_t layer);
  void MlaBackward(int64_t layer);

  // --- the feed-forward block: dense MLP, or routed experts (+ shared experts) ---
  void FeedForwardForward(bool moe);
  // An MLP's two matmuls and activation on `rows` tokens (the routed experts: a grouped GEMM of `batch` experts).
  void MlpMatmulsForward(double rows, double ff, double batch = 1);
  void ExpertMatmulsBackward(double rows, double ff, double batch);
  // The expert all_to_all (dispatch or combine) of this rank's routed rows; its op's index.
  int32_t ExpertAllToAll(LayerOpId id);
  void MoeForward();
  // The shared experts: a tensor-parallel MLP on every token. Beside experts split over the tensor ranks it takes
  // the layer's gathered input and adds to its partial output; beside experts over the tensor ranks it gathers
  // and reduce-scatters itself, on the second stream when it overlaps the all_to_all (Megatron-Core's
  // SharedExpertMLP: fc1 under the dispatch, fc2 under the combine).
  void SharedExpertForward(bool first_half);
  void SharedExpertBackward(bool second_matmul);
  void MlpBackward(bool moe);
  void MoeBackward();

  const ModelConfig& c_;
  const ParallelDegrees& d_;
  const LayerShapes& s_;
  std::vector<LayerOp>* out_;
  int64_t tokens_;
  double size_;
  bool sp_;  // the collectives of sequence parallelism (over the tensor axes, even of size 1)
  LayerPhase phase_ = LayerPhase::kForward;
  bool head_ = false;
  LayerBlock block_ = LayerBlock::kAttention;
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_MODEL_INTERNAL_LAYER_EMITTER_H_
