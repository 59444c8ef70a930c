// mlp and transformer_block: Megatron-style layers written as shard_map programs (workloads/internal/program.h), so
// they share the interpreter, the cost accounting and the one-device reference check.
//
// Collectives per layer (Shoeybi et al. 2019, "Megatron-LM", sec. 3; Korthikanti et al. 2022 for sequence
// parallelism; FSDP as ZeRO-3, Rajbhandari et al. 2020):
//   tensor parallel      forward: one psum of the block output over tensor_axes (f); backward: one psum of the
//                        input gradient (g). Sequence parallel replaces each psum by all_gather (before the block,
//                        on seq) + psum_scatter (after it, on seq).
//   FSDP                 every weight all_gathered over fsdp_axes before use (forward; reused in backward), its
//                        gradient psum_scattered back to the shard.
//   data parallel        weight gradients psum'd over the batch axes that are not FSDP axes.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "common/error.h"
#include "common/host_memory.h"
#include "common/strings.h"
#include "workloads/internal/program.h"
#include "workloads/internal/program_builder.h"
#include "workloads/workloads.h"

namespace spmdsim {

namespace {

using internal::AddInput;
using internal::EntryOf;
using internal::ProgramBuilder;


void CheckDims(const std::string& kind, const std::string& name, std::initializer_list<std::pair<const char*,
               int64_t>> dims) {
  for (const auto& [dim, value] : dims) {
    if (value < 1) {
      Throw(ErrorCode::kInvalidArgument, "{} '{}': {} must be >= 1, got {}", kind, name, dim, value);
    }
  }
}

PartitionSpec ActivationSpec(const LayerSharding& sh) {
  const bool sp = sh.sequence_parallel && !sh.tensor_axes.empty();
  return PartitionSpec({EntryOf(sh.batch_axes), sp ? EntryOf(sh.tensor_axes) : PartitionSpec::Entry::None(),
                        PartitionSpec::Entry::None()});
}

// The MLP on activation `x` (global [b, s, d]); returns the output value; appends the backward to `bwd` when
// `dy` is given, returning the input gradient in *dx.
struct MlpNames {
  std::string y, dx, dw1, dw2;
};

MlpNames AddMlp(ProgramBuilder& b, const std::string& prefix, const std::string& x, const std::string& w1,
                const std::string& w2, const std::string& activation, const std::string& dy, bool backward) {
  MlpNames n;
  const std::string W1 = b.GatherWeight(w1, 0);
  const std::string W2 = b.GatherWeight(w2, 1);
  const std::string X = b.GatherSeq("fwd/" + prefix + "x", x);
  const std::string h = b.Einsum("fwd/" + prefix + "h", "bsd,df->bsf", {X, W1});
  const std::string a = b.Op("fwd/" + prefix + "act", activation, {h});
  const std::string z = b.Einsum("fwd/" + prefix + "out_partial", "bsf,fd->bsd", {a, W2});
  n.y = b.ReduceTensor("fwd/" + prefix + "out", z);
  if (!backward) return n;
  const std::string DY = b.GatherSeq("bwd/" + prefix + "dy", dy);
  const std::string da = b.Einsum("bwd/" + prefix + "d_act", "bsd,fd->bsf", {DY, W2});
  const std::string dh = b.Op("bwd/" + prefix + "dh", activation + "_grad", {h, da});
  const std::string dw2 = b.Einsum("bwd/" + prefix + "dw2_local", "bsf,bsd->fd", {a, DY});
  const std::string dw1 = b.Einsum("bwd/" + prefix + "dw1_local", "bsd,bsf->df", {X, dh});
  const std::string dxp = b.Einsum("bwd/" + prefix + "dx_partial", "bsf,df->bsd", {dh, W1});
  n.dx = b.ReduceTensor("bwd/" + prefix + "dx", dxp);
  n.dw1 = b.ReduceWeightGrad("bwd/" + prefix + "dw1", dw1, 0);
  n.dw2 = b.ReduceWeightGrad("bwd/" + prefix + "dw2", dw2, 1);
  return n;
}

// A layer's program with its name and check tolerances, after its sharding axes are checked against the mesh.
template <typename LayerConfig>
ShardMapConfig StartLayerProgram(std::string_view kind, const LayerConfig& c, const Mesh& mesh) {
  const LayerSharding& sh = c.sharding;
  for (const auto* axes : {&sh.batch_axes, &sh.fsdp_axes, &sh.tensor_axes}) {
    mesh.ValidateAxes(*axes, fmt::format("sharding axes of {} '{}'", kind, c.name));
  }
  ShardMapConfig p;
  p.name = c.name;
  p.rtol = c.rtol;
  p.atol = c.atol;
  p.check = c.check;
  return p;
}

}  // namespace

LayerSharding LayerSharding::FromLogicalRules(const LogicalAxisRules& rules) {
  LayerSharding sh;
  auto first = [&rules](std::initializer_list<const char*> names) -> std::optional<std::vector<std::string>> {
    for (const char* name : names) {
      for (const LogicalAxisRule& r : rules) {
        if (r.logical_name == name) return r.mesh_axes.axes();
      }
    }
    return std::nullopt;
  };
  if (auto a = first({"batch"})) sh.batch_axes = *a;
  if (auto a = first({"embed"})) sh.fsdp_axes = *a;
  if (auto a = first({"mlp", "heads"})) sh.tensor_axes = *a;
  if (auto a = first({"length", "seq"})) {
    sh.sequence_parallel = !a->empty() && *a == sh.tensor_axes;
  }
  return sh;
}

std::string LayerSharding::ToString() const {
  return fmt::format("batch=({}) fsdp=({}) tensor=({}) sp={}", fmt::join(batch_axes, ","), fmt::join(fsdp_axes, ","),
                     fmt::join(tensor_axes, ","), sequence_parallel);
}

ShardMapConfig MlpProgram(const MlpConfig& c, const Mesh& mesh, bool abstract) {
  CheckDims("mlp", c.name, {{"batch", c.batch}, {"seq", c.seq}, {"d_model", c.d_model}, {"d_ff", c.d_ff}});
  if (c.activation != "gelu" && c.activation != "relu") {
    Throw(ErrorCode::kInvalidArgument, "mlp '{}': activation must be gelu or relu, got '{}'", c.name, c.activation);
  }
  const LayerSharding& sh = c.sharding;
  ShardMapConfig p = StartLayerProgram("mlp", c, mesh);
  const PartitionSpec act = ActivationSpec(sh);
  const double init = 1.0 / std::sqrt(static_cast<double>(c.d_model));
  AddInput(&p, "x", {c.batch, c.seq, c.d_model}, c.dtype, c.seed, 1.0, act, abstract);
  AddInput(&p, "w1", {c.d_model, c.d_ff}, c.dtype, c.seed + 1, init,
           PartitionSpec({EntryOf(sh.fsdp_axes), EntryOf(sh.tensor_axes)}), abstract);
  AddInput(&p, "w2", {c.d_ff, c.d_model}, c.dtype, c.seed + 2, init,
           PartitionSpec({EntryOf(sh.tensor_axes), EntryOf(sh.fsdp_axes)}), abstract);
  if (c.backward) AddInput(&p, "dy", {c.batch, c.seq, c.d_model}, c.dtype, c.seed + 3, 1.0, act, abstract);
  ProgramBuilder b(&p, sh);
  MlpNames n = AddMlp(b, "", "x", "w1", "w2", c.activation, "dy", c.backward);
  p.outputs.push_back({n.y, act});
  if (c.backward) {
    p.outputs.push_back({n.dx, act});
    p.outputs.push_back({n.dw1, PartitionSpec({EntryOf(sh.fsdp_axes), EntryOf(sh.tensor_axes)})});
    p.outputs.push_back({n.dw2, PartitionSpec({EntryOf(sh.tensor_axes), EntryOf(sh.fsdp_axes)})});
  }
  return p;
}

namespace {

// The specs of a transformer block's activations and weights under its LayerSharding.
struct BlockSpecs {
  PartitionSpec act, qkv, wo, w1, w2;
};

BlockSpecs BlockSpecsOf(const LayerSharding& sh) {
  return {ActivationSpec(sh),
          PartitionSpec({EntryOf(sh.fsdp_axes), EntryOf(sh.tensor_axes), PartitionSpec::Entry::None()}),
          PartitionSpec({EntryOf(sh.tensor_axes), PartitionSpec::Entry::None(), EntryOf(sh.fsdp_axes)}),
          PartitionSpec({EntryOf(sh.fsdp_axes), EntryOf(sh.tensor_axes)}),
          PartitionSpec({EntryOf(sh.tensor_axes), EntryOf(sh.fsdp_axes)})};
}

// The block's inputs: x, the attention's wq, wk, wv, wo, the MLP's w1, w2, and dy for the backward.
void AddBlockInputs(const TransformerBlockConfig& c, const BlockSpecs& spec, bool abstract, ShardMapConfig* p) {
  const int64_t hd = c.d_model / c.heads;
  const double init = 1.0 / std::sqrt(static_cast<double>(c.d_model));
  AddInput(p, "x", {c.batch, c.seq, c.d_model}, c.dtype, c.seed, 1.0, spec.act, abstract);
  AddInput(p, "wq", {c.d_model, c.heads, hd}, c.dtype, c.seed + 1, init, spec.qkv, abstract);
  AddInput(p, "wk", {c.d_model, c.heads, hd}, c.dtype, c.seed + 2, init, spec.qkv, abstract);
  AddInput(p, "wv", {c.d_model, c.heads, hd}, c.dtype, c.seed + 3, init, spec.qkv, abstract);
  AddInput(p, "wo", {c.heads, hd, c.d_model}, c.dtype, c.seed + 4, init, spec.wo, abstract);
  AddInput(p, "w1", {c.d_model, c.d_ff}, c.dtype, c.seed + 5, init, spec.w1, abstract);
  AddInput(p, "w2", {c.d_ff, c.d_model}, c.dtype, c.seed + 6, init, spec.w2, abstract);
  if (c.backward) AddInput(p, "dy", {c.batch, c.seq, c.d_model}, c.dtype, c.seed + 7, 1.0, spec.act, abstract);
}

// The attention's forward values that its backward reads (the gathered input and weights, q, k, v, the
// probabilities and the context), and its output.
struct AttentionValues {
  std::string x, wq, wk, wv, wo, q, k, v, probs, context, out;
};

// Attention (non-causal, no normalisation layers: see docs/workloads.md); `scale` is 1 / sqrt(head dim).
AttentionValues AddAttention(ProgramBuilder& b, double scale) {
  AttentionValues a;
  a.wq = b.GatherWeight("wq", 0);
  a.wk = b.GatherWeight("wk", 0);
  a.wv = b.GatherWeight("wv", 0);
  a.wo = b.GatherWeight("wo", 2);
  a.x = b.GatherSeq("fwd/attn/x", "x");
  a.q = b.Einsum("fwd/attn/q", "bsd,dhk->bshk", {a.x, a.wq});
  a.k = b.Einsum("fwd/attn/k", "bsd,dhk->bshk", {a.x, a.wk});
  a.v = b.Einsum("fwd/attn/v", "bsd,dhk->bshk", {a.x, a.wv});
  const std::string s = b.Einsum("fwd/attn/scores", "bqhk,bshk->bhqs", {a.q, a.k});
  const std::string ss = b.Op("fwd/attn/scaled", "mul", {s}, scale);
  a.probs = b.Op("fwd/attn/probs", "softmax", {ss}, std::nullopt, 3);
  a.context = b.Einsum("fwd/attn/context", "bhqs,bshk->bqhk", {a.probs, a.v});
  const std::string z = b.Einsum("fwd/attn/out_partial", "bqhk,hkd->bqd", {a.context, a.wo});
  a.out = b.ReduceTensor("fwd/attn/out", z);
  return a;
}

// The MLP's backward (dy flows through the residual and the MLP) after the block's forward, whose first residual
// is `r`: the gradient that reaches the attention, and the MLP's local weight gradients in *dw1l and *dw2l.
std::string AddMlpBackward(ProgramBuilder& b, const LayerSharding& sh, const std::string& r, std::string* dw1l,
                           std::string* dw2l) {
  const std::string W1 = sh.fsdp_axes.empty() ? "w1" : "fwd/w1_all_gather";
  const std::string W2 = sh.fsdp_axes.empty() ? "w2" : "fwd/w2_all_gather";
  const std::string R = b.sequence_parallel() ? "fwd/mlp/x_all_gather" : r;
  const std::string DY = b.GatherSeq("bwd/mlp/dy", "dy");
  const std::string da = b.Einsum("bwd/mlp/d_act", "bsd,fd->bsf", {DY, W2});
  const std::string dh = b.Op("bwd/mlp/dh", "gelu_grad", {"fwd/mlp/h", da});
  *dw2l = b.Einsum("bwd/mlp/dw2_local", "bsf,bsd->fd", {"fwd/mlp/act", DY});
  *dw1l = b.Einsum("bwd/mlp/dw1_local", "bsd,bsf->df", {R, dh});
  const std::string drp = b.Einsum("bwd/mlp/dx_partial", "bsf,df->bsd", {dh, W1});
  const std::string drm = b.ReduceTensor("bwd/mlp/dx", drp);
  return b.Op("bwd/residual1", "add", {"dy", drm});
}

// The attention's backward from `dr`, the gradient at the first residual: the block's dx and every weight's
// gradient become the program's outputs (dx, then wq, wk, wv, wo, w1, w2).
void AddAttentionBackward(ProgramBuilder& b, const AttentionValues& a, const std::string& dr, double scale,
                          const std::string& dw1l, const std::string& dw2l, const BlockSpecs& spec,
                          ShardMapConfig* p) {
  const std::string DR = b.GatherSeq("bwd/attn/dout", dr);
  const std::string dO = b.Einsum("bwd/attn/d_context", "bqd,hkd->bqhk", {DR, a.wo});
  const std::string dwol = b.Einsum("bwd/attn/dwo_local", "bqhk,bqd->hkd", {a.context, DR});
  const std::string dp = b.Einsum("bwd/attn/d_probs", "bqhk,bshk->bhqs", {dO, a.v});
  const std::string dv = b.Einsum("bwd/attn/dv", "bhqs,bqhk->bshk", {a.probs, dO});
  const std::string ds = b.Op("bwd/attn/d_scaled", "softmax_grad", {a.probs, dp}, std::nullopt, 3);
  const std::string dss = b.Op("bwd/attn/d_scores", "mul", {ds}, scale);
  const std::string dq = b.Einsum("bwd/attn/dq", "bhqs,bshk->bqhk", {dss, a.k});
  const std::string dk = b.Einsum("bwd/attn/dk", "bhqs,bqhk->bshk", {dss, a.q});
  const std::string dwql = b.Einsum("bwd/attn/dwq_local", "bsd,bshk->dhk", {a.x, dq});
  const std::string dwkl = b.Einsum("bwd/attn/dwk_local", "bsd,bshk->dhk", {a.x, dk});
  const std::string dwvl = b.Einsum("bwd/attn/dwv_local", "bsd,bshk->dhk", {a.x, dv});
  const std::string dxq = b.Einsum("bwd/attn/dx_q", "bshk,dhk->bsd", {dq, a.wq});
  const std::string dxk = b.Einsum("bwd/attn/dx_k", "bshk,dhk->bsd", {dk, a.wk});
  const std::string dxv = b.Einsum("bwd/attn/dx_v", "bshk,dhk->bsd", {dv, a.wv});
  const std::string dxqk = b.Op("bwd/attn/dx_qk", "add", {dxq, dxk});
  const std::string dxp = b.Op("bwd/attn/dx_partial", "add", {dxqk, dxv});
  const std::string dxa = b.ReduceTensor("bwd/attn/dx", dxp);
  const std::string dx = b.Op("bwd/dx", "add", {dr, dxa});
  p->outputs.push_back({dx, spec.act});
  p->outputs.push_back({b.ReduceWeightGrad("bwd/attn/dwq", dwql, 0), spec.qkv});
  p->outputs.push_back({b.ReduceWeightGrad("bwd/attn/dwk", dwkl, 0), spec.qkv});
  p->outputs.push_back({b.ReduceWeightGrad("bwd/attn/dwv", dwvl, 0), spec.qkv});
  p->outputs.push_back({b.ReduceWeightGrad("bwd/attn/dwo", dwol, 2), spec.wo});
  p->outputs.push_back({b.ReduceWeightGrad("bwd/mlp/dw1", dw1l, 0), spec.w1});
  p->outputs.push_back({b.ReduceWeightGrad("bwd/mlp/dw2", dw2l, 1), spec.w2});
}

}  // namespace

ShardMapConfig TransformerBlockProgram(const TransformerBlockConfig& c, const Mesh& mesh, bool abstract) {
  CheckDims("transformer_block", c.name,
            {{"batch", c.batch}, {"seq", c.seq}, {"d_model", c.d_model}, {"d_ff", c.d_ff}, {"heads", c.heads}});
  if (c.d_model % c.heads != 0) {
    Throw(ErrorCode::kInvalidArgument, "transformer_block '{}': d_model {} is not a multiple of heads {}", c.name,
          c.d_model, c.heads);
  }
  const LayerSharding& sh = c.sharding;
  ShardMapConfig p = StartLayerProgram("transformer_block", c, mesh);
  const BlockSpecs spec = BlockSpecsOf(sh);
  AddBlockInputs(c, spec, abstract, &p);
  ProgramBuilder b(&p, sh);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d_model / c.heads));
  const AttentionValues attn = AddAttention(b, scale);
  const std::string r = b.Op("fwd/residual1", "add", {"x", attn.out});
  // The MLP's forward; its backward is built below once the output gradient is known.
  MlpNames m = AddMlp(b, "mlp/", r, "w1", "w2", "gelu", "", false);
  const std::string y = b.Op("fwd/y", "add", {r, m.y});
  p.outputs.push_back({y, spec.act});
  if (!c.backward) return p;
  std::string dw1l, dw2l;
  const std::string dr = AddMlpBackward(b, sh, r, &dw1l, &dw2l);
  AddAttentionBackward(b, attn, dr, scale, dw1l, dw2l, spec, &p);
  return p;
}

WorkloadResult RunMlp(const WorkloadContext& context, const MlpConfig& config) {
  return internal::RunProgram(context, MlpProgram(config, context.mesh, context.abstract), WorkloadKind::kMlp);
}

WorkloadResult RunTransformerBlock(const WorkloadContext& context, const TransformerBlockConfig& config) {
  return internal::RunProgram(context, TransformerBlockProgram(config, context.mesh, context.abstract),
                              WorkloadKind::kTransformerBlock);
}

}  // namespace spmdsim
