// One op of a transformer layer as the simulated step prices it and the data run computes it
// (model/layer_ops.h makes the lists): what it computes, in which phase of the step, and its shape.
//
// Example: LayerOp op = ...;  // a matmul of [T, h] x [h, 3h]
//          op.kind == LayerOpKind::kMatmul, op.id == LayerOpId::kQkv, op.Flops() == 2 T h 3h
// Thread safety: plain values.
#ifndef SPMDSIM_MODEL_LAYER_OP_H_
#define SPMDSIM_MODEL_LAYER_OP_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "cost/collective_model.h"

namespace spmdsim {

// The phase of the step that runs an op (the schedule's `phase`).
enum class LayerPhase : uint8_t { kForward, kBackward, kRecompute };

// What kind of work an op is.
enum class LayerOpKind : uint8_t {
  kMatmul,          // [m, k] x [k, n], `batch` of them
  kFlashAttention,  // the fused attention core (ComputeModel::FlashAttention), `attention`
  kMemory,          // a memory-bound op over `elements` elements of the activation dtype (`memory`: its kernel)
  kStart,           // starts a collective: `op` over `group`, `bytes`, on collective stream `stream`
  kWait,            // waits for the collective started by op `start` of the same list
  kGatherWeights,   // ZeRO-3 / FSDP: the layer's `params` all-gathered over kZero (the step prefetches the next)
};

// The memory-bound kernels; the step prices each with its software stack's passes (model/stack.h).
enum class LayerMemory : uint8_t {
  kPlain,             // `elements` read and written once each in all (softmax, dropout, permute, concat, ...)
  kNorm,              // the norm's passes (LayerNorm: one kernel; RMSNorm: the stack's)
  kResidual,          // bias + dropout + residual add
  kActivation,        // gelu or swiglu on the hidden elements
  kRope,              // rotary embedding of the rotated elements
  kCrossEntropy,      // per logit
  kFp8CastTranspose,  // Transformer Engine's fp8 cast with the transposed copy (read 2 bytes, write 1 + 1)
};

// Which part of the model an op belongs to.
enum class LayerBlock : uint8_t {
  kAttention,      // the attention sub-layer (its norm and residual included)
  kMlp,            // the feed-forward sub-layer of a dense layer (its norm and residual included)
  kExperts,        // the feed-forward sub-layer of a MoE layer: router, dispatch, routed experts, combine
  kSharedExperts,  // the shared experts of a MoE layer
  kEmbedding,      // the input embedding (and an MTP module's)
  kLoss,           // final norm, logits, cross-entropy
  kMtp,            // an MTP module's norms, concatenation and projection
};

// What an op computes. Matmuls of the backward are the input gradient (kDgrad) and weight gradient (kWgrad) of
// the forward matmul of the same id; the four matmuls of an unfused attention core's backward are kValues'
// (dP = dO V^T, dV = P^T dO) and kScores' (dQ = dS K, dK = dS^T Q).
enum class LayerOpId : uint8_t {
  kGatherWeights,   // ZeRO-3 / FSDP weight gather
  kFp8Cast,         // fp8: a linear's input (forward) or output gradient (backward) cast with its transpose
  kNorm,            // the sub-layer's pre-norm (the loss: the final norm; MTP: its two input norms)
  kResidual,        // bias + dropout + residual add
  kSeqGather,       // SP: the sub-layer's input gathered on the sequence (backward: its output gradient)
  kInputRegather,   // SP: a column-parallel linear's input gathered again for its weight gradient (backward)
  kTensorReduce,    // partial sums over the tensor ranks: all-reduce, or SP reduce-scatter on the sequence
  kTensorGather,    // a column-parallel output gathered over the tensor ranks (MLA's down projections, eh_proj)
  kQkv,             // the fused Q, K, V projection
  kRope,            // rotary embedding of q and k
  kKvGather,        // context parallelism: every rank's K and V (ring attention, priced as one all-gather)
  kKvGradScatter,   // context parallelism: dK, dV back to their ranks (a reduce-scatter)
  kFlashAttention,  // the fused attention core
  kScores,          // unfused core: Q K^T
  kSoftmax,         // unfused core: the causal softmax (backward: its gradient)
  kDropout,         // unfused core: attention dropout
  kValues,          // unfused core: P V
  kOut,             // the attention output projection
  kMlaQDown, kMlaKvDown, kMlaQUp, kMlaKvUp,  // MLA's projections
  kMlaConcat,       // MLA: q and k made whole (each head's qk and rotary parts concatenated)
  kUp,              // an MLP's first matmul (swiglu: gate and up together), of the block's MLP
  kActivation,      // an MLP's activation
  kDown,            // an MLP's second matmul
  kRouter,          // MoE: router logits
  kPermute,         // MoE: the routed rows permuted by expert (backward: its adjoint)
  kDispatch,        // MoE: the all_to_all sending each rank's routed rows to their experts (backward: back)
  kCombine,         // MoE: the all_to_all returning the experts' rows (backward: the gradients out)
  kUnpermute,       // MoE: the rows unpermuted and weighted by the gates
  kEmbedding,       // the embedding lookup (backward: the scatter-add into its gradient)
  kLogits,          // the output layer
  kCrossEntropy,    // the vocabulary-parallel cross-entropy (forward: with its three statistics all-reduces)
  kMtpConcat,       // MTP: the two normalised inputs concatenated
  kMtpProjection,   // MTP: eh_proj
};

// Which of a forward matmul's GEMMs a matmul op is.
enum class MatmulPass : uint8_t { kForward, kDgrad, kWgrad };

// The communication groups of the layer's collectives.
enum class LayerGroup : uint8_t {
  kTensor,   // the tensor axes
  kContext,  // the context axes
  kExpert,   // the expert axes
  kZero,     // ZeRO's shard axes and the context axes
};

// The fused attention core's shape, as ComputeModel::FlashAttention takes it.
struct FlashAttentionShape {
  int64_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
  bool causal = true;  // false: a sliding window priced as non-causal attention over its pairs per query
  bool backward = false;
  // The FLOPs the kernel executes: 4 b heads q kv head_dim, halved when causal (the masked blocks skipped),
  // x 2.5 backward (five matmuls instead of two).
  double Flops() const;
};

struct LayerOp {
  LayerOpKind kind = LayerOpKind::kMatmul;
  LayerOpId id = LayerOpId::kNorm;
  LayerBlock block = LayerBlock::kAttention;
  LayerPhase phase = LayerPhase::kForward;
  bool head = false;        // its compute is the step's "head" category (embedding, loss, MTP inputs)
  MatmulPass pass = MatmulPass::kForward;
  std::string_view name;    // the schedule's label ("qkv matmul", "norm", "all_gather"); a static string
  // kMatmul: [m, k] x [k, n], `batch` of them, at `dtype`'s rate (operands and result of the activation dtype)
  double batch = 1, m = 0, n = 0, k = 0;
  DType dtype = DType::kBF16;
  FlashAttentionShape attention{};  // kFlashAttention
  LayerMemory memory = LayerMemory::kPlain;  // kMemory
  double elements = 0;      // kMemory: elements of the activation dtype (kPlain: moved)
  double extra_bytes = 0;   // kMemory: bytes beyond them (dropout masks)
  CollectiveOp op = CollectiveOp::kAllReduce;  // kStart
  LayerGroup group = LayerGroup::kTensor;      // kStart
  double bytes = 0;         // kStart: nccl-tests' message size
  uint8_t stream = 0;       // kStart: the collective stream (0: tensor / expert traffic; 1: beside it)
  int32_t start = -1;       // kWait: the index of its kStart in the list
  double params = 0;        // kGatherWeights: parameters per device gathered (before the bytes per weight)
  // Matrix FLOPs: 2 batch m k n of a matmul, FlashAttentionShape::Flops of the fused core, 0 otherwise.
  double Flops() const;
};

// The sum of the ops' Flops().
double LayerOpFlops(const std::vector<LayerOp>& ops);

// The shapes the layer's ops are built from, shared with the rest of the step (pipeline sends, the optimizer).
struct LayerShapes {
  int64_t tokens = 0;       // of one micro-batch on one context rank: micro_batch x seq / context
  double norm_tokens = 0;   // the tokens a norm or residual sees: tokens / tensor with SP
  bool sp = false;          // sequence parallelism (over more than one tensor rank)
  bool fp8 = false;         // fp8 compute dtype: matmuls in fp8, activations and communication in bf16
  DType act_dtype = DType::kBF16;  // activations, attention and communication
  double act_size = 2;      // its bytes
  int64_t d_model = 0;
  double Act() const;       // [tokens, d_model] elements
};

std::string_view LayerOpIdName(LayerOpId id);      // "qkv", "tensor_reduce", ...
std::string_view LayerBlockName(LayerBlock block);  // "attention", "mlp", "experts", ...
std::string_view LayerPhaseName(LayerPhase phase);  // "forward", "backward", "recompute"

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_LAYER_OP_H_
