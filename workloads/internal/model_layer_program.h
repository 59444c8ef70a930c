// The data run's transformer layer (docs/model.md, "Running with data"): one layer's forward and backward as
// shard_map program steps, generated from the same description the simulated step prices (model/layer_ops.h):
// each op of LayerOps::Forward / Backward becomes the steps that compute it on float32 data, each collective
// the program's collective over the same axes, of the same size. What the data run does not run is skipped
// (recompute, fp8 casts, dropout, ZeRO-3's per-layer gathers: its weights are gathered once, where first used);
// what it runs otherwise is said where it is emitted (the fused attention core materialised with a mask; MoE
// dispatch dense: every token's row to every expert, so the all_to_alls carry experts / (top_k x capacity) times
// the step's rows).
//
// Example: LayerProgram layers(&builder, config, dims, layer_ops, &weights);
//   std::string y = layers.Forward("fwd/l0/", 0, x, &values);        // norm1/..., attn/q, ..., residual2
//   std::string dx = layers.Backward("bwd/l0/", 0, dy, values);      // weight gradients to weights.Accumulate
//
// Thread safety: a LayerProgram is used by one thread; it writes only its builder's program.
#ifndef SPMDSIM_WORKLOADS_INTERNAL_MODEL_LAYER_PROGRAM_H_
#define SPMDSIM_WORKLOADS_INTERNAL_MODEL_LAYER_PROGRAM_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/layer_ops.h"
#include "model/model.h"
#include "workloads/internal/program_builder.h"

namespace spmdsim::internal {

// The data run's sizes: vocabulary, d_model, KV heads n, query groups g, head dim k, d_ff, sequence, batch.
struct ModelDims {
  int64_t V, d, n, g, k, f, S, B;
  int64_t stages, layers_per_stage, micro_batches, rows;  // rows: sequences per micro-batch on one data rank
  int64_t tensor, data, context;
  int64_t local_seq;  // S / context: the tokens of a sequence on one context rank
};

// What the layers need from the model program around them.
class LayerWeights {
 public:
  virtual ~LayerWeights() = default;
  // The local (gathered) value of weight `name` ("attn.wq") of stage-layer j.
  virtual std::string Weight(int64_t j, const std::string& name) = 0;
  // Adds a local gradient (summed over this device's tokens) to the one of `key` ("3/attn.wq", "final_norm.scale").
  virtual void Accumulate(const std::string& key, const std::string& value) = 0;
};

// A norm's values the backward needs.
struct NormValues {
  std::string y, xhat, rs;
};
// dx of a norm (local), and the local gradients of its scale and bias (summed over batch and seq).
struct NormGrads {
  std::string dx, dscale, dbias;
};

// An MLP's values (the dense MLP, the routed experts' or the shared experts'): its input, the first matmul's
// outputs (h1: gelu's input or swiglu's gate; h3: swiglu's up), silu(h1) and the activation.
struct MlpValues {
  std::string input, h1, h3, s1, a;
};

// What a layer's forward keeps for its backward.
struct LayerValues {
  NormValues n1, n2;
  std::string X, q, k, v, pr, o;  // attention (X: the gathered normalized input)
  std::string r;                  // the attention residual's output
  std::string X2;                 // the feed-forward block's gathered normalized input
  MlpValues mlp, shared;          // the dense MLP's or the routed experts'; the shared experts'
  std::string probs, mask, gates, ob;  // MoE: router softmax, top-k mask, gates, the experts' combined rows
};

class LayerProgram {
 public:
  LayerProgram(ProgramBuilder* b, const ModelConfig& c, const ModelDims& d, const LayerOps& ops,
               LayerWeights* weights);

  // Stage-layer j's forward of x (prefix `pre`); returns its output.
  std::string Forward(const std::string& pre, int64_t j, const std::string& x, LayerValues* lv);
  // Its backward from the output gradient dy; returns the input gradient (weight gradients accumulated).
  std::string Backward(const std::string& pre, int64_t j, const std::string& dy, const LayerValues& lv);

  NormValues NormForward(const std::string& pre, const std::string& x, const std::string& scale,
                         const std::string& bias);
  NormGrads NormBackward(const std::string& pre, const std::string& dy, const NormValues& n,
                         const std::string& scale);
  // The norm's gradients accumulated under `key_prefix` ("3/norm1." -> "3/norm1.scale", "3/norm1.bias").
  void AccumulateNorm(const std::string& key_prefix, const NormGrads& g);

 private:
  struct ForwardState;
  struct BackwardState;
  void ForwardCompute(const LayerOp& op, ForwardState& s);
  void ForwardCollective(const LayerOp& op, ForwardState& s);
  void AttentionCoreForward(const LayerOp& op, ForwardState& s);
  void MlpForward(const LayerOp& op, ForwardState& s);
  void RouterForward(ForwardState& s);
  // The feed-forward block's output: the routed experts' with the shared experts' added.
  std::string FeedForwardOutput(ForwardState& s);
  void BackwardCompute(const LayerOp& op, BackwardState& s);
  void BackwardCollective(const LayerOp& op, BackwardState& s);
  void AttentionCoreBackward(const LayerOp& op, BackwardState& s);
  void MlpBackward(const LayerOp& op, BackwardState& s);
  void RouterBackward(const LayerOp& op, BackwardState& s);
  void NormBackwardOf(const LayerOp& op, BackwardState& s);
  // The feed-forward block's input gradient: the routed rows', the router's and the shared experts' partial sums.
  std::string FeedForwardInputGrad(BackwardState& s);
  std::string RopeApply(const std::string& pre, const std::string& x, bool is_q, bool transpose);
  // The activation's gradient: swiglu (dh1 for the gate, dh3 for the up projection) or gelu (dh1).
  std::pair<std::string, std::string> ActivationBackward(const std::string& p, const std::string& da,
                                                         const MlpValues& m);
  // The program's collective for a description's (its op over its group's axes, on dimension `axis`).
  std::string Collective(const LayerOp& op, const std::string& name, const std::string& x, int axis = 0);
  // The MoE all_to_all over the expert axes (tiled): dispatch (split experts, concat rows) or the reverse.
  std::string ExpertAllToAll(const std::string& name, const std::string& x, bool dispatch);
  // K and V (or their gradients) as one array and back: concatenated on the head dimension.
  std::string ConcatKv(const std::string& name, const std::string& k, const std::string& v);
  std::pair<std::string, std::string> SplitKv(const std::string& pre, const std::string& kv, int64_t seq);
  bool Rope() const { return c_.position == PositionEmbedding::kRope; }
  std::string W(int64_t j, const std::string& name) { return weights_->Weight(j, name); }

  ProgramBuilder& b_;
  const ModelConfig& c_;
  const ModelDims& d_;
  const LayerOps& ops_;
  LayerWeights* weights_;
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_WORKLOADS_INTERNAL_MODEL_LAYER_PROGRAM_H_
