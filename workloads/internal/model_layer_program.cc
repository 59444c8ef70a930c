// The data run's transformer layer from its description (workloads/internal/model_layer_program.h).
#include "workloads/internal/model_layer_program.h"

#include <cmath>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "common/error.h"

namespace spmdsim::internal {
namespace {

constexpr double kNormEpsilon = 1e-5;  // Megatron-LM's --norm-epsilon default

// The einsums of an MLP: the dense one's and the shared experts' over tokens, the routed experts' with their
// expert dimension e.
struct MlpForm {
  std::string prefix;      // of the step names: "mlp/", "moe/", "moe/shared/"
  std::string w1, w2, w3;  // its weights
  bool experts = false;
  std::string out;         // the name of its output
  std::string dx_sum;      // the name of its input gradient's sum (swiglu)
};

MlpForm FormOf(LayerBlock block) {
  switch (block) {
    case LayerBlock::kExperts:
      return {"moe/", "moe.w1", "moe.w2", "moe.w3", true, "expert_out", "dx_experts"};
    case LayerBlock::kSharedExperts:
      return {"moe/shared/", "moe.shared.w1", "moe.shared.w2", "moe.shared.w3", false, "out_partial", "dx"};
    default:
      return {"mlp/", "mlp.w1", "mlp.w2", "mlp.w3", false, "out_partial", "dx_partial"};
  }
}

// An MLP's gradients as its backward emits them: of its activation, its hidden input(s), and its input.
struct MlpGrads {
  std::string da, dh1, dh3, dx;
};

}  // namespace

// One layer's forward as it is emitted: the ops' values so far.
struct LayerProgram::ForwardState {
  std::string pre;
  int64_t j = 0;
  std::string x;            // the layer's input
  LayerValues* lv = nullptr;
  std::string cur;          // the current block's value
  std::string masked;       // attention: the masked scores
  std::string xe, oe;       // MoE: the rows dispatched to every expert, the experts' outputs
  std::string routed, shared;  // MoE: the routed and shared experts' partial outputs
  std::string y;            // the layer's output
};

// One layer's backward as it is emitted.
struct LayerProgram::BackwardState {
  std::string pre;
  int64_t j = 0;
  std::string dy;           // the layer's output gradient
  const LayerValues* lv = nullptr;
  std::string cur;          // the gradient flowing back through the current block
  std::string block_dy;     // the block's (gathered) output gradient
  std::string input;        // the input of the block's column-parallel linear (re-gathered under SP)
  MlpGrads mlp, shared;     // the dense MLP's or routed experts' gradients; the shared experts'
  std::string dO, dp, dss, dq, dk, dv;  // attention
  std::string dgates, doe, dxr, dlogits, dx_dispatch, dx_router;  // MoE
  bool ff_summed = false;   // MoE: the block's input gradient summed
  std::string dr;           // the attention residual's gradient
  std::string dx;           // the layer's input gradient
};

LayerProgram::LayerProgram(ProgramBuilder* b, const ModelConfig& c, const ModelDims& d, const LayerOps& ops,
                           LayerWeights* weights)
    : b_(*b), c_(c), d_(d), ops_(ops), weights_(weights) {}

// --- norms and rotary embeddings ---

NormValues LayerProgram::NormForward(const std::string& pre, const std::string& x, const std::string& scale,
                                     const std::string& bias) {
  NormValues n;
  std::string centred = x;
  if (c_.norm == Norm::kLayerNorm) {
    const std::string mu = b_.Reduce(pre + "mean", "mean", x, {2}, true);
    centred = b_.Op(pre + "centred", "sub", {x, mu});
  }
  const std::string sq = b_.Op(pre + "square", "square", {centred});
  const std::string var = b_.Reduce(pre + "variance", "mean", sq, {2}, true);
  n.rs = b_.Op(pre + "rsqrt", "rsqrt", {b_.Op(pre + "variance_eps", "add", {var}, kNormEpsilon)});
  n.xhat = b_.Mul(pre + "normalized", centred, n.rs);
  n.y = b_.Mul(pre + "scaled", n.xhat, scale);
  if (!bias.empty()) n.y = b_.Add(pre + "out", n.y, bias);
  return n;
}

NormGrads LayerProgram::NormBackward(const std::string& pre, const std::string& dy, const NormValues& n,
                                     const std::string& scale) {
  NormGrads g;
  g.dscale = b_.Reduce(pre + "dscale_local", "sum", b_.Mul(pre + "dy_xhat", dy, n.xhat), {0, 1}, false);
  if (c_.norm == Norm::kLayerNorm) g.dbias = b_.Reduce(pre + "dbias_local", "sum", dy, {0, 1}, false);
  const std::string dxhat = b_.Mul(pre + "dxhat", dy, scale);
  const std::string m2 =
      b_.Reduce(pre + "mean_dxhat_xhat", "mean", b_.Mul(pre + "dxhat_xhat", dxhat, n.xhat), {2}, true);
  std::string inner = b_.Op(pre + "minus_proj", "sub", {dxhat, b_.Mul(pre + "xhat_proj", n.xhat, m2)});
  if (c_.norm == Norm::kLayerNorm) {
    const std::string m1 = b_.Reduce(pre + "mean_dxhat", "mean", dxhat, {2}, true);
    inner = b_.Op(pre + "minus_mean", "sub", {inner, m1});
  }
  g.dx = b_.Mul(pre + "dx", inner, n.rs);
  return g;
}

void LayerProgram::AccumulateNorm(const std::string& key_prefix, const NormGrads& g) {
  weights_->Accumulate(key_prefix + "scale", g.dscale);
  if (!g.dbias.empty()) weights_->Accumulate(key_prefix + "bias", g.dbias);
}

// Rotary embedding of q ([b, S, kv, g, k]) or k ([b, S, kv, k]) on this device: x cos + rotate_half(x) sin,
// rotate_half(x) = concat(-x2, x1) over the halves of the last dimension. `transpose`: its adjoint, for the
// backward: dy cos + rotate_half^T(dy sin), rotate_half^T(y) = concat(y2, -y1).
std::string LayerProgram::RopeApply(const std::string& pre, const std::string& x, bool is_q, bool transpose) {
  std::vector<int64_t> shape = {d_.rows, d_.local_seq, d_.n / d_.tensor};
  if (is_q) shape.push_back(d_.g);
  shape.push_back(d_.k);
  const int last = static_cast<int>(shape.size()) - 1;
  auto half = [&](const std::string& name, const std::string& v, bool second) {
    ProgramStep s = ProgramBuilder::Named(name, "slice", {v});
    s.start.assign(shape.size(), 0);
    s.limit = shape;
    if (second) s.start[last] = d_.k / 2;
    else s.limit[last] = d_.k / 2;
    return b_.Step(std::move(s));
  };
  const std::string suffix = is_q ? "_q" : "_k";
  const std::string cos = "rope_cos" + suffix, sin = "rope_sin" + suffix;
  const std::string rotated_in = transpose ? b_.Mul(pre + "times_sin", x, sin) : x;
  const std::string x1 = half(pre + "first_half", rotated_in, false);
  const std::string x2 = half(pre + "second_half", rotated_in, true);
  ProgramStep cat =
      transpose ? ProgramBuilder::Named(pre + "rotated", "concatenate", {x2, b_.Op(pre + "neg_first", "neg", {x1})})
                : ProgramBuilder::Named(pre + "rotated", "concatenate", {b_.Op(pre + "neg_second", "neg", {x2}), x1});
  cat.axis = last;
  const std::string rotated = b_.Step(std::move(cat));
  const std::string straight = b_.Mul(pre + "times_cos", x, cos);
  return b_.Add(pre + "out", straight, transpose ? rotated : b_.Mul(pre + "rotated_sin", rotated, sin));
}

// --- collectives ---

std::string LayerProgram::Collective(const LayerOp& op, const std::string& name, const std::string& x, int axis) {
  const ModelParallelism& par = c_.parallel;
  const std::vector<std::string>& axes = op.group == LayerGroup::kTensor    ? par.tensor_axes
                                         : op.group == LayerGroup::kContext ? par.context_axes
                                                                            : par.expert_axes;
  SPMDSIM_CHECK(op.group != LayerGroup::kZero, "the data run gathers ZeRO-3 weights where first used");
  switch (op.op) {
    case CollectiveOp::kAllGather: return b_.Collective(name, "all_gather", x, axes, axis);
    case CollectiveOp::kReduceScatter: return b_.Collective(name, "psum_scatter", x, axes, axis);
    case CollectiveOp::kAllReduce: return b_.Collective(name, "psum", x, axes);
    default: break;
  }
  SPMDSIM_CHECK(false, "the layer has no such collective");
  return x;
}

std::string LayerProgram::ExpertAllToAll(const std::string& name, const std::string& x, bool dispatch) {
  ProgramStep s = ProgramBuilder::Named(name, "all_to_all", {x}, c_.parallel.expert_axes);
  s.split_axis = dispatch ? 0 : 1;
  s.concat_axis = dispatch ? 1 : 0;
  s.tiled = true;
  return b_.Step(std::move(s));
}

// Megatron's ring attention moves K and V of a chunk as one buffer: so does the data run (one all-gather of
// [b, s, n, 2k] on the sequence, one reduce-scatter of their gradients).
std::string LayerProgram::ConcatKv(const std::string& name, const std::string& k, const std::string& v) {
  ProgramStep s = ProgramBuilder::Named(name, "concatenate", {k, v});
  s.axis = 3;
  return b_.Step(std::move(s));
}

std::pair<std::string, std::string> LayerProgram::SplitKv(const std::string& pre, const std::string& kv,
                                                          int64_t seq) {
  const std::vector<int64_t> shape = {d_.rows, seq, d_.n / d_.tensor, 2 * d_.k};
  auto part = [&](const std::string& name, bool second) {
    ProgramStep s = ProgramBuilder::Named(name, "slice", {kv});
    s.start.assign(shape.size(), 0);
    s.limit = shape;
    if (second) s.start[3] = d_.k;
    else s.limit[3] = d_.k;
    return b_.Step(std::move(s));
  };
  return {part(pre + "k", false), part(pre + "v", true)};
}

// --- the forward ---

std::string LayerProgram::Forward(const std::string& pre, int64_t j, const std::string& x, LayerValues* lv) {
  ForwardState s;
  s.pre = pre;
  s.j = j;
  s.x = x;
  s.lv = lv;
  for (const LayerOp& op : ops_.Forward(j)) {
    switch (op.kind) {
      case LayerOpKind::kGatherWeights:  // gathered where first used (the model program's weights)
      case LayerOpKind::kWait:           // computed at its start: its value is ready there
        break;
      case LayerOpKind::kStart:
        ForwardCollective(op, s);
        break;
      default:
        ForwardCompute(op, s);
    }
  }
  SPMDSIM_CHECK(!s.y.empty(), "a layer ends with its residual");
  return s.y;
}

void LayerProgram::ForwardCollective(const LayerOp& op, ForwardState& s) {
  const std::string& pre = s.pre;
  const bool attention = op.block == LayerBlock::kAttention;
  switch (op.id) {
    case LayerOpId::kSeqGather:
      s.cur = Collective(op, pre + (attention ? "attn/x" : "mlp/x") + "_all_gather", s.cur, 1);
      return;
    case LayerOpId::kTensorReduce:
      if (attention) s.cur = Collective(op, pre + "attn/out", s.cur, 1);
      else s.cur = Collective(op, pre + (op.block == LayerBlock::kMlp ? "mlp/out" : "moe/out"), FeedForwardOutput(s),
                              1);
      return;
    case LayerOpId::kKvGather: {
      LayerValues& lv = *s.lv;
      const std::string kv = Collective(op, pre + "attn/kv_all_gather", ConcatKv(pre + "attn/kv", lv.k, lv.v), 1);
      std::tie(lv.k, lv.v) = SplitKv(pre + "attn/gathered_", kv, d_.S);
      return;
    }
    case LayerOpId::kDispatch:
      s.xe = ExpertAllToAll(pre + "moe/dispatch", s.xe, true);
      return;
    case LayerOpId::kCombine:
      s.oe = ExpertAllToAll(pre + "moe/combine", s.oe, false);
      return;
    default:
      SPMDSIM_CHECK(false, "the data run has no such collective in a layer's forward");
  }
}

void LayerProgram::ForwardCompute(const LayerOp& op, ForwardState& s) {
  const std::string& pre = s.pre;
  LayerValues& lv = *s.lv;
  const bool attention = op.block == LayerBlock::kAttention;
  switch (op.id) {
    case LayerOpId::kFp8Cast:  // float32 data: nothing to cast
    case LayerOpId::kDropout:  // no dropout in the data run
      return;
    case LayerOpId::kNorm: {
      const std::string n = attention ? "norm1" : "norm2";
      const std::string bias = c_.norm == Norm::kLayerNorm ? W(s.j, n + ".bias") : "";
      NormValues& values = attention ? lv.n1 : lv.n2;
      values = NormForward(pre + n + "/", attention ? s.x : lv.r, W(s.j, n + ".scale"), bias);
      s.cur = values.y;
      return;
    }
    case LayerOpId::kQkv:
      lv.X = s.cur;
      lv.q = b_.Einsum(pre + "attn/q", "bsd,dngk->bsngk", {lv.X, W(s.j, "attn.wq")});
      lv.k = b_.Einsum(pre + "attn/k", "bsd,dnk->bsnk", {lv.X, W(s.j, "attn.wk")});
      lv.v = b_.Einsum(pre + "attn/v", "bsd,dnk->bsnk", {lv.X, W(s.j, "attn.wv")});
      return;
    case LayerOpId::kRope:
      lv.q = RopeApply(pre + "attn/q_rope/", lv.q, true, false);
      lv.k = RopeApply(pre + "attn/k_rope/", lv.k, false, false);
      return;
    case LayerOpId::kFlashAttention:
    case LayerOpId::kScores:
    case LayerOpId::kSoftmax:
    case LayerOpId::kValues:
      AttentionCoreForward(op, s);
      return;
    case LayerOpId::kOut:
      s.cur = b_.Einsum(pre + "attn/out_partial", "bqngk,ngkd->bqd", {lv.o, W(s.j, "attn.wo")});
      return;
    case LayerOpId::kResidual:
      if (attention) lv.r = b_.Add(pre + "residual1", s.x, s.cur);
      else s.y = b_.Add(pre + "residual2", lv.r, FeedForwardOutput(s));
      return;
    case LayerOpId::kRouter:
      RouterForward(s);
      return;
    case LayerOpId::kPermute:  // dense dispatch (GShard's einsum): every token's row to every expert
      s.xe = b_.Einsum(pre + "moe/dispatch_rows", "bsd,bse->ebsd", {lv.X2, lv.mask});
      return;
    case LayerOpId::kUnpermute:
      lv.ob = s.oe;
      s.routed = b_.Einsum(pre + "moe/out_partial", "ebsd,bse->bsd", {lv.ob, lv.gates});
      return;
    case LayerOpId::kUp:
    case LayerOpId::kActivation:
    case LayerOpId::kDown:
      MlpForward(op, s);
      return;
    default:
      SPMDSIM_CHECK(false, "the data run has no such op in a layer's forward (refused by CheckModelRunsWithData)");
  }
}

// The attention core materialised (the fused kernel too): scaled scores, the causal (or window) mask, softmax,
// the values. The unfused core's three ops each emit their part; the fused one all of them.
void LayerProgram::AttentionCoreForward(const LayerOp& op, ForwardState& s) {
  const std::string& pre = s.pre;
  LayerValues& lv = *s.lv;
  const bool fused = op.id == LayerOpId::kFlashAttention;
  if (fused || op.id == LayerOpId::kScores) {
    const std::string sc = b_.Einsum(pre + "attn/scores", "bqngk,bsnk->bngqs", {lv.q, lv.k});
    const std::string ss = b_.Op(pre + "attn/scaled", "mul", {sc}, 1.0 / std::sqrt(static_cast<double>(d_.k)));
    s.masked = b_.Add(pre + "attn/masked", ss, c_.is_windowed_layer(s.j) ? "window_mask" : "causal_mask");
  }
  if (fused || op.id == LayerOpId::kSoftmax) lv.pr = b_.Op(pre + "attn/probs", "softmax", {s.masked}, std::nullopt, 4);
  if (fused || op.id == LayerOpId::kValues) lv.o = b_.Einsum(pre + "attn/context", "bngqs,bsnk->bqngk", {lv.pr, lv.v});
}

void LayerProgram::MlpForward(const LayerOp& op, ForwardState& s) {
  const MlpForm f = FormOf(op.block);
  const std::string p = s.pre + f.prefix;
  const bool shared = op.block == LayerBlock::kSharedExperts;
  MlpValues& m = shared ? s.lv->shared : s.lv->mlp;
  const std::string up = f.experts ? "ebsd,edf->ebsf" : "bsd,df->bsf";
  switch (op.id) {
    case LayerOpId::kUp:
      if (op.block == LayerBlock::kMlp) s.lv->X2 = s.cur;
      m.input = op.block == LayerBlock::kExperts ? s.xe : s.lv->X2;
      m.h1 = b_.Einsum(p + "h", up, {m.input, W(s.j, f.w1)});
      if (c_.activation == Activation::kSwiglu) m.h3 = b_.Einsum(p + "up", up, {m.input, W(s.j, f.w3)});
      return;
    case LayerOpId::kActivation:
      if (c_.activation == Activation::kSwiglu) {
        m.s1 = b_.Op(p + "silu", "silu", {m.h1});
        m.a = b_.Mul(p + "act", m.s1, m.h3);
      } else {
        m.a = b_.Op(p + "act", "gelu", {m.h1});
      }
      return;
    default: {  // kDown
      const std::string out =
          b_.Einsum(p + f.out, f.experts ? "ebsf,efd->ebsd" : "bsf,fd->bsd", {m.a, W(s.j, f.w2)});
      if (op.block == LayerBlock::kExperts) s.oe = out;
      else if (shared) s.shared = out;
      else s.cur = out;
    }
  }
}

void LayerProgram::RouterForward(ForwardState& s) {
  const std::string pre = s.pre + "moe/";
  LayerValues& lv = *s.lv;
  lv.X2 = s.cur;
  const std::string logits = b_.Einsum(pre + "router_logits", "bsd,de->bse", {lv.X2, W(s.j, "moe.router")});
  lv.probs = b_.Op(pre + "router_probs", "softmax", {logits}, std::nullopt, 2);
  std::string rest = lv.probs;
  for (int64_t i = 0; i < c_.moe.top_k; ++i) {
    const std::string mx = b_.Reduce(fmt::format("{}top{}_max", pre, i), "max_reduce", rest, {2}, true);
    const std::string sel = b_.Cast(fmt::format("{}top{}_mask", pre, i),
                                    b_.Op(fmt::format("{}top{}_ge", pre, i), "greater_equal", {rest, mx}));
    lv.mask = i == 0 ? sel : b_.Add(fmt::format("{}top{}_mask_sum", pre, i), lv.mask, sel);
    // Probabilities are in [0, 1]: subtracting 2 puts the chosen expert below every other.
    if (i + 1 < c_.moe.top_k) {
      rest = b_.Op(fmt::format("{}top{}_rest", pre, i), "sub",
                   {rest, b_.Op(fmt::format("{}top{}_drop", pre, i), "mul", {sel}, 2.0)});
    }
  }
  lv.gates = b_.Mul(pre + "gates", lv.probs, lv.mask);
}

std::string LayerProgram::FeedForwardOutput(ForwardState& s) {
  if (!s.routed.empty()) {
    s.cur = s.shared.empty() ? s.routed : b_.Add(s.pre + "moe/with_shared", s.routed, s.shared);
    s.routed.clear();
  }
  return s.cur;
}

// --- the backward ---

std::string LayerProgram::Backward(const std::string& pre, int64_t j, const std::string& dy, const LayerValues& lv) {
  BackwardState s;
  s.pre = pre;
  s.j = j;
  s.dy = dy;
  s.lv = &lv;
  s.cur = dy;
  const std::vector<LayerOp>& ops = ops_.Backward(j);
  for (const LayerOp& op : ops) {
    if (op.phase == LayerPhase::kRecompute) continue;  // the data run keeps the forward's values
    switch (op.kind) {
      case LayerOpKind::kGatherWeights:  // gathered where first used (the model program's weights)
        break;
      case LayerOpKind::kStart:  // computed where started, but for the ring's gradients: ready at its wait
        if (op.id != LayerOpId::kKvGradScatter) BackwardCollective(op, s);
        break;
      case LayerOpKind::kWait:
        if (op.id == LayerOpId::kKvGradScatter) BackwardCollective(ops[static_cast<size_t>(op.start)], s);
        break;
      default:
        BackwardCompute(op, s);
    }
  }
  SPMDSIM_CHECK(!s.dx.empty(), "a layer's backward ends with its first norm");
  return s.dx;
}

void LayerProgram::BackwardCollective(const LayerOp& op, BackwardState& s) {
  const std::string& pre = s.pre;
  const bool attention = op.block == LayerBlock::kAttention;
  switch (op.id) {
    case LayerOpId::kSeqGather: {
      const std::string name = attention ? "attn/dout" : op.block == LayerBlock::kMlp ? "mlp/dy" : "moe/dy";
      s.cur = s.block_dy = Collective(op, pre + name + "_all_gather", s.cur, 1);
      return;
    }
    case LayerOpId::kInputRegather:  // Megatron keeps the norm's output sharded and gathers it again
      s.input = Collective(op, pre + (attention ? "attn/x_regather" : "mlp/x_regather"),
                           attention ? s.lv->n1.y : s.lv->n2.y, 1);
      return;
    case LayerOpId::kTensorReduce:
      if (op.block == LayerBlock::kExperts) s.cur = Collective(op, pre + "moe/dx", FeedForwardInputGrad(s), 1);
      else s.cur = Collective(op, pre + (attention ? "attn/dx" : "mlp/dx"), s.cur, 1);
      return;
    case LayerOpId::kKvGradScatter: {
      const std::string dkv = ConcatKv(pre + "attn/dkv", s.dk, s.dv);
      std::tie(s.dk, s.dv) = SplitKv(pre + "attn/scattered_", Collective(op, pre + "attn/dkv_psum_scatter", dkv, 1),
                                     d_.local_seq);
      return;
    }
    case LayerOpId::kCombine:  // the combine's backward: the gradients of the combined rows to their experts
      s.doe = ExpertAllToAll(pre + "moe/d_combine", s.doe, true);
      return;
    case LayerOpId::kDispatch:  // the dispatch's backward: the rows' gradients back
      s.dxr = ExpertAllToAll(pre + "moe/d_dispatch", s.dxr, false);
      return;
    default:
      SPMDSIM_CHECK(false, "the data run has no such collective in a layer's backward");
  }
}

void LayerProgram::BackwardCompute(const LayerOp& op, BackwardState& s) {
  const std::string& pre = s.pre;
  const LayerValues& lv = *s.lv;
  const std::string gk = fmt::format("{}/", s.j);
  const bool dgrad = op.pass == MatmulPass::kDgrad;
  switch (op.id) {
    case LayerOpId::kFp8Cast:
    case LayerOpId::kDropout:
      return;
    case LayerOpId::kResidual:  // entering a sub-layer's backward: its output gradient
      s.input.clear();
      if (op.block == LayerBlock::kAttention) s.cur = s.dr = b_.Add(pre + "residual1_grad", s.dy, s.cur);
      s.block_dy = s.cur;
      return;
    case LayerOpId::kNorm:
      NormBackwardOf(op, s);
      return;
    case LayerOpId::kOut:
      if (dgrad) {
        s.dO = b_.Einsum(pre + "attn/d_context", "bqd,ngkd->bqngk", {s.block_dy, W(s.j, "attn.wo")});
      } else {
        weights_->Accumulate(gk + "attn.wo", b_.Einsum(pre + "attn/dwo_local", "bqngk,bqd->ngkd", {lv.o, s.block_dy}));
      }
      return;
    case LayerOpId::kFlashAttention:
    case LayerOpId::kScores:
    case LayerOpId::kSoftmax:
    case LayerOpId::kValues:
      AttentionCoreBackward(op, s);
      return;
    case LayerOpId::kRope:
      s.dq = RopeApply(pre + "attn/dq_rope/", s.dq, true, true);
      s.dk = RopeApply(pre + "attn/dk_rope/", s.dk, false, true);
      return;
    case LayerOpId::kQkv:
      if (dgrad) {
        const std::string dxq = b_.Einsum(pre + "attn/dx_q", "bsngk,dngk->bsd", {s.dq, W(s.j, "attn.wq")});
        const std::string dxk = b_.Einsum(pre + "attn/dx_k", "bsnk,dnk->bsd", {s.dk, W(s.j, "attn.wk")});
        const std::string dxv = b_.Einsum(pre + "attn/dx_v", "bsnk,dnk->bsd", {s.dv, W(s.j, "attn.wv")});
        s.cur = b_.Add(pre + "attn/dx_partial", b_.Add(pre + "attn/dx_qk", dxq, dxk), dxv);
        return;
      }
      {
        const std::string& X = s.input.empty() ? lv.X : s.input;
        weights_->Accumulate(gk + "attn.wq", b_.Einsum(pre + "attn/dwq_local", "bsd,bsngk->dngk", {X, s.dq}));
        weights_->Accumulate(gk + "attn.wk", b_.Einsum(pre + "attn/dwk_local", "bsd,bsnk->dnk", {X, s.dk}));
        weights_->Accumulate(gk + "attn.wv", b_.Einsum(pre + "attn/dwv_local", "bsd,bsnk->dnk", {X, s.dv}));
      }
      return;
    case LayerOpId::kUp:
    case LayerOpId::kActivation:
    case LayerOpId::kDown:
      MlpBackward(op, s);
      return;
    case LayerOpId::kUnpermute: {  // the gates' gradients (partial sums over the tensor ranks: d_ff is split)
      const std::string partial = b_.Einsum(pre + "moe/d_gates_partial", "ebsd,bsd->bse", {lv.ob, s.block_dy});
      s.dgates = b_.Psum(pre + "moe/d_gates", partial, c_.parallel.tensor_axes);
      s.doe = b_.Einsum(pre + "moe/d_combined", "bsd,bse->ebsd", {s.block_dy, lv.gates});
      return;
    }
    case LayerOpId::kPermute:
      s.dx_dispatch = b_.Einsum(pre + "moe/dx_dispatch", "ebsd,bse->bsd", {s.dxr, lv.mask});
      return;
    case LayerOpId::kRouter:
      RouterBackward(op, s);
      return;
    default:
      SPMDSIM_CHECK(false, "the data run has no such op in a layer's backward (refused by CheckModelRunsWithData)");
  }
}

void LayerProgram::AttentionCoreBackward(const LayerOp& op, BackwardState& s) {
  const std::string& pre = s.pre;
  const LayerValues& lv = *s.lv;
  const bool fused = op.id == LayerOpId::kFlashAttention, dgrad = op.pass == MatmulPass::kDgrad;
  const bool values = op.id == LayerOpId::kValues, scores = op.id == LayerOpId::kScores;
  if (fused || (values && dgrad)) s.dp = b_.Einsum(pre + "attn/d_probs", "bqngk,bsnk->bngqs", {s.dO, lv.v});
  if (fused || (values && !dgrad)) s.dv = b_.Einsum(pre + "attn/dv", "bngqs,bqngk->bsnk", {lv.pr, s.dO});
  if (fused || op.id == LayerOpId::kSoftmax) {
    const std::string ds = b_.Op(pre + "attn/d_masked", "softmax_grad", {lv.pr, s.dp}, std::nullopt, 4);
    s.dss = b_.Op(pre + "attn/d_scores", "mul", {ds}, 1.0 / std::sqrt(static_cast<double>(d_.k)));
  }
  if (fused || (scores && dgrad)) s.dq = b_.Einsum(pre + "attn/dq", "bngqs,bsnk->bqngk", {s.dss, lv.k});
  if (fused || (scores && !dgrad)) s.dk = b_.Einsum(pre + "attn/dk", "bngqs,bqngk->bsnk", {s.dss, lv.q});
}

void LayerProgram::MlpBackward(const LayerOp& op, BackwardState& s) {
  const MlpForm f = FormOf(op.block);
  const std::string p = s.pre + f.prefix, gk = fmt::format("{}/", s.j);
  const bool shared = op.block == LayerBlock::kSharedExperts;
  const MlpValues& m = shared ? s.lv->shared : s.lv->mlp;
  MlpGrads& g = shared ? s.shared : s.mlp;
  const std::string& dy = f.experts ? s.doe : s.block_dy;  // the gradient of the MLP's output
  const bool dgrad = op.pass == MatmulPass::kDgrad;
  if (op.id == LayerOpId::kActivation) {
    std::tie(g.dh1, g.dh3) = ActivationBackward(p, g.da, m);
    return;
  }
  if (op.id == LayerOpId::kDown) {
    if (dgrad) {
      g.da = b_.Einsum(p + "d_act", f.experts ? "ebsd,efd->ebsf" : "bsd,fd->bsf", {dy, W(s.j, f.w2)});
    } else {
      const std::string eq = f.experts ? "ebsf,ebsd->efd" : "bsf,bsd->fd";
      weights_->Accumulate(gk + f.w2, b_.Einsum(p + "dw2_local", eq, {m.a, dy}));
    }
    return;
  }
  const std::string dx_eq = f.experts ? "ebsf,edf->ebsd" : "bsf,df->bsd";
  if (dgrad) {  // kUp's input gradient: of the gate, and of swiglu's up projection
    g.dx = b_.Einsum(p + "dx_gate", dx_eq, {g.dh1, W(s.j, f.w1)});
    if (!g.dh3.empty()) g.dx = b_.Add(p + f.dx_sum, g.dx, b_.Einsum(p + "dx_up", dx_eq, {g.dh3, W(s.j, f.w3)}));
    if (op.block == LayerBlock::kMlp) s.cur = g.dx;
    if (op.block == LayerBlock::kExperts) s.dxr = g.dx;
    return;
  }
  const std::string w_eq = f.experts ? "ebsd,ebsf->edf" : "bsd,bsf->df";
  const std::string& input = op.block == LayerBlock::kMlp && !s.input.empty() ? s.input : m.input;
  weights_->Accumulate(gk + f.w1, b_.Einsum(p + "dw1_local", w_eq, {input, g.dh1}));
  if (!g.dh3.empty()) weights_->Accumulate(gk + f.w3, b_.Einsum(p + "dw3_local", w_eq, {input, g.dh3}));
}

void LayerProgram::RouterBackward(const LayerOp& op, BackwardState& s) {
  const std::string pre = s.pre + "moe/", gk = fmt::format("{}/", s.j);
  const LayerValues& lv = *s.lv;
  if (op.pass == MatmulPass::kWgrad) {
    weights_->Accumulate(gk + "moe.router", b_.Einsum(pre + "drouter_local", "bsd,bse->de", {lv.X2, s.dlogits}));
    return;
  }
  s.dlogits = b_.Op(pre + "d_router_logits", "softmax_grad",
                    {lv.probs, b_.Mul(pre + "d_router_probs", s.dgates, lv.mask)}, std::nullopt, 2);
  // The router (the same on every tensor rank): its input gradient enters the sum over tensor ranks once.
  s.dx_router = b_.Einsum(pre + "dx_router", "bse,de->bsd", {s.dlogits, W(s.j, "moe.router")});
  if (d_.tensor > 1) {
    s.dx_router = b_.Op(pre + "dx_router_share", "mul", {s.dx_router}, 1.0 / static_cast<double>(d_.tensor));
  }
}

std::string LayerProgram::FeedForwardInputGrad(BackwardState& s) {
  if (!s.ff_summed) {
    s.cur = b_.Add(s.pre + "moe/dx_partial", s.dx_dispatch, s.dx_router);
    if (!s.shared.dx.empty()) s.cur = b_.Add(s.pre + "moe/dx_with_shared", s.cur, s.shared.dx);
    s.ff_summed = true;
  }
  return s.cur;
}

void LayerProgram::NormBackwardOf(const LayerOp& op, BackwardState& s) {
  const bool attention = op.block == LayerBlock::kAttention;
  const std::string n = attention ? "norm1" : "norm2";
  const std::string dy = op.block == LayerBlock::kExperts ? FeedForwardInputGrad(s) : s.cur;
  const NormGrads g = NormBackward(s.pre + n + "/", dy, attention ? s.lv->n1 : s.lv->n2, W(s.j, n + ".scale"));
  AccumulateNorm(fmt::format("{}/{}.", s.j, n), g);
  if (attention) s.dx = b_.Add(s.pre + "dx", s.dr, g.dx);
  else s.cur = g.dx;
}

std::pair<std::string, std::string> LayerProgram::ActivationBackward(const std::string& p, const std::string& da,
                                                                     const MlpValues& m) {
  if (c_.activation != Activation::kSwiglu) return {b_.Op(p + "dh", "gelu_grad", {m.h1, da}), ""};
  const std::string dh3 = b_.Mul(p + "d_up", da, m.s1);
  const std::string sg = b_.Op(p + "sigmoid", "sigmoid", {m.h1});
  const std::string one_minus = b_.Op(p + "one_minus_sigmoid", "add", {b_.Op(p + "neg_sigmoid", "neg", {sg})}, 1.0);
  const std::string t1 = b_.Op(p + "silu_grad_inner", "add", {b_.Mul(p + "h_one_minus", m.h1, one_minus)}, 1.0);
  const std::string dsilu = b_.Mul(p + "silu_grad", sg, t1);
  return {b_.Mul(p + "dh", b_.Mul(p + "d_silu", da, m.h3), dsilu), dh3};
}

}  // namespace spmdsim::internal
