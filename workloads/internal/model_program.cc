// The model workload's training step as a shard_map program (docs/model.md, "Running with data").
//
// Layout (Megatron-LM; Shoeybi et al. 2019, Korthikanti et al. 2022, Narayanan et al. 2021):
//   embedding     vocab-parallel: E [V, d] split on V over tensor_axes; tokens are one-hot rows [b, s, V] split
//                 the same way, so x0 = onehot @ E is a partial sum reduced over tensor_axes (psum, or
//                 psum_scatter on seq with SP).
//                 Learned positions [S, d] are added (split on seq under SP).
//   layers        pre-norm: x + attn(norm1(x)), then + mlp(norm2(.)); attention column/row parallel over heads
//                 (KV heads split, GQA groups kept whole), rotary embeddings on q and k (rope), causal mask; MLP
//                 over d_ff.
//   head          final norm, logits = h @ W_out with W_out [d, V] split on V (tied: h @ E^T); vocab-parallel
//                 cross-entropy (pmax / psum of the softmax statistics over tensor_axes); loss = mean over all
//                 tokens of the global batch.
//   context       the sequence split over context_axes; attention all_gathers the keys and values on seq
//                 (psum_scatter of their gradients); gradients psum'd over context_axes as over data_axes.
//   data          the batch split over data_axes, weight gradients psum'd over them (ZeRO-3: layer weights
//                 all_gathered and their gradients psum_scattered, ProgramBuilder's FSDP).
//   pipeline      layers split evenly over pipeline_axes, each stage's weights stacked on a leading stage
//                 dimension [P, ...]. Lockstep ticks (as MaxText's pipeline): at forward tick t stage s works on
//                 micro-batch t - s, then ppermutes its output to s + 1; the backward mirrors it (tick t' uses the
//                 activations of forward tick T-1-t', for every stage), gradients ppermuted to s - 1. Stage 0
//                 takes the embedding and the last stage the head by masks from axis_index; the slots where a
//                 stage has no micro-batch compute on finite data whose gradients are exactly zero.
//   experts      MoE layers (GShard / Switch, dropless): router softmax, top-k mask, every token's row sent to
//                every expert (zero unless chosen) with all_to_all over expert_axes, expert MLPs with d_ff split
//                over tensor_axes, all_to_all back, combined with the gates.
//   micro-batches gradient accumulation: the local gradients of every micro-batch are added before the
//                 reduction over data_axes.
#include "workloads/internal/model_program.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>

#include "common/error.h"
#include "common/host_memory.h"
#include "ops/random.h"
#include "ops/ops.h"
#include "workloads/internal/program_builder.h"

namespace spmdsim::internal {
namespace {

constexpr double kNormEpsilon = 1e-5;  // Megatron-LM's --norm-epsilon default
// Model FLOPs (forward + backward, every device together) above which the data run is refused: ~15 s of this
// simulator's float32 arithmetic, the one-device reference included (a 1.1e10-FLOP step took 3.1 s on 2 cores).
constexpr double kMaxDataRunFlops = 5e10;

// A layer weight: its shape, which dimension FSDP splits (-1: none) and its spec entries (fsdp / tensor / none).
struct WeightShape {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<char> roles;  // per dimension: 'f' fsdp, 't' tensor, 'e' expert, '-' unsplit
  double init_scale = 0;    // Normal(0, scale); 0: a norm gain (1 + Normal(0, 0.1)); < 0: a bias (Normal(0, 0.1))
  int FsdpDim() const {
    for (size_t i = 0; i < roles.size(); ++i)
      if (roles[i] == 'f') return static_cast<int>(i);
    return -1;
  }
};

struct Dims {
  int64_t V, d, n, g, k, f, S, B;
  int64_t stages, layers_per_stage, micro_batches, rows;  // rows: sequences per micro-batch on one data rank
  int64_t tensor, data, context;
  int64_t local_seq;  // S / context: the tokens of a sequence on one context rank
};

// The data of the step: tokens and next tokens of every sequence, uniform over the vocabulary.
struct TokenData {
  std::vector<int64_t> inputs, targets;  // [B * S] each, row-major
};

TokenData MakeTokens(const ModelConfig& c) {
  TokenData t;
  std::mt19937_64 gen(c.seed);
  for (int64_t b = 0; b < c.global_batch; ++b) {
    std::vector<int64_t> seq(static_cast<size_t>(c.seq + 1));
    for (int64_t& v : seq) v = static_cast<int64_t>(gen() % static_cast<uint64_t>(c.vocab));
    t.inputs.insert(t.inputs.end(), seq.begin(), seq.end() - 1);
    t.targets.insert(t.targets.end(), seq.begin() + 1, seq.end());
  }
  return t;
}

// One-hot rows [M, B / M, S, V] of `ids` (the global batch in order, reshaped into M micro-batches).
Array OneHot(const std::vector<int64_t>& ids, const Dims& d) {
  std::vector<float> v(static_cast<size_t>(d.B * d.S * d.V), 0.0f);
  for (size_t i = 0; i < ids.size(); ++i) v[i * static_cast<size_t>(d.V) + static_cast<size_t>(ids[i])] = 1.0f;
  return Array::FromVector<float>(v, {d.micro_batches, d.B / d.micro_batches, d.S, d.V});
}

// Rotary position embedding tables (Su et al. 2021, as Llama / Megatron apply them: the two halves of the head
// dimension rotated together): angle(s, i) = s * 10000^(-2i / k) for i < k / 2, repeated over both halves,
// shaped [S, 1 ... 1, k] to broadcast against [b, S, heads..., k].
Array RopeTable(int64_t seq, int64_t k, int broadcast_dims, bool sine) {
  std::vector<float> v(static_cast<size_t>(seq * k));
  for (int64_t pos = 0; pos < seq; ++pos) {
    for (int64_t i = 0; i < k; ++i) {
      const double inv_freq = std::pow(10000.0, -2.0 * static_cast<double>(i % (k / 2)) / static_cast<double>(k));
      const double angle = static_cast<double>(pos) * inv_freq;
      v[static_cast<size_t>(pos * k + i)] = static_cast<float>(sine ? std::sin(angle) : std::cos(angle));
    }
  }
  std::vector<int64_t> shape = {seq};
  for (int i = 0; i < broadcast_dims; ++i) shape.push_back(1);
  shape.push_back(k);
  return Array::FromVector<float>(v, shape);
}

// -1e9 where query q may not see key k: k > q, and with a sliding window of w keys also k <= q - w (each query
// sees itself and the w - 1 keys before it).
Array CausalMask(int64_t s, int64_t window = 0) {
  std::vector<float> v(static_cast<size_t>(s * s), 0.0f);
  for (int64_t q = 0; q < s; ++q)
    for (int64_t key = 0; key < s; ++key)
      if (key > q || (window > 0 && key <= q - window)) v[static_cast<size_t>(q * s + key)] = -1e9f;
  return Array::FromVector<float>(v, {s, s});
}

class ModelBuilder {
 public:
  ModelBuilder(const ValidatedModel& model, ModelProgram* out)
      : c_(model.config()), out_(out), p_(&out->program), sh_(Sharding(c_)), b_(p_, sh_) {
    const ModelConfig& c = c_;
    const ParallelDegrees& deg = model.degrees();
    d_ = Dims{.V = c.vocab, .d = c.d_model, .n = c.effective_kv_heads(), .g = c.heads / c.effective_kv_heads(),
              .k = c.effective_head_dim(), .f = c.d_ff, .S = c.seq, .B = c.global_batch,
              .stages = deg.pipeline, .layers_per_stage = c.layers / deg.pipeline,
              .micro_batches = deg.micro_batches, .rows = c.micro_batch, .tensor = deg.tensor, .data = deg.data,
              .context = deg.context, .local_seq = c.seq / deg.context};
    pp_ = d_.stages > 1;
  }

  void Build() {
    p_->name = c_.name;
    p_->rtol = c_.rtol;
    p_->atol = c_.atol;
    AddInputs();
    if (pp_) {
      stage_ = b_.Step(Named("stage_index", "axis_index", {}, c_.parallel.pipeline_axes));
      const std::string sf = b_.Step(Cast("stage_f32", stage_));
      // 1 on stage 0, else 0: relu(1 - s); 1 on the last stage: relu(s - (P - 2)).
      const std::string one_minus = b_.Op("one_minus_stage", "add", {b_.Op("neg_stage", "neg", {sf})}, 1.0);
      is_first_ = b_.Op("is_first_stage", "relu", {one_minus});
      const std::string from_last = b_.Op("stage_minus", "sub", {sf}, static_cast<double>(d_.stages - 2));
      is_last_ = b_.Op("is_last_stage", "relu", {from_last});
    }
    Forward();
    Backward();
    Outputs();
  }

 private:
  static LayerSharding Sharding(const ModelConfig& c) {
    LayerSharding sh;
    // Every axis that splits tokens: the batch over data axes, the sequence over context axes.
    sh.batch_axes = c.parallel.data_axes;
    sh.batch_axes.insert(sh.batch_axes.end(), c.parallel.context_axes.begin(), c.parallel.context_axes.end());
    if (c.parallel.zero_stage == 3) sh.fsdp_axes = c.parallel.data_axes;
    sh.tensor_axes = c.parallel.tensor_axes;
    sh.sequence_parallel = c.parallel.sequence_parallel;
    return sh;
  }

  static ProgramStep Named(const std::string& name, const std::string& op, std::vector<std::string> args,
                           std::vector<std::string> axes = {}) {
    ProgramStep s;
    s.name = name;
    s.op = op;
    s.args = std::move(args);
    s.axes = std::move(axes);
    return s;
  }
  static ProgramStep Cast(const std::string& name, const std::string& x) {
    ProgramStep s = Named(name, "cast", {x});
    s.dtype = DType::kF32;
    return s;
  }
  std::string Reduce(const std::string& name, const std::string& op, const std::string& x, std::vector<int> dims,
                     bool keepdims) {
    ProgramStep s = Named(name, op, {x});
    s.dims = std::move(dims);
    s.keepdims = keepdims;
    return b_.Step(std::move(s));
  }
  std::string Psum(const std::string& name, const std::string& x, const std::vector<std::string>& axes) {
    return b_.Step(Named(name, "psum", {x}, axes));
  }
  std::string Add(const std::string& name, const std::string& a, const std::string& b) {
    return b_.Op(name, "add", {a, b});
  }
  std::string Mul(const std::string& name, const std::string& a, const std::string& b) {
    return b_.Op(name, "mul", {a, b});
  }

  // The weights of stage-layer j (the same structure on every stage: CheckModelRunsWithData).
  std::vector<WeightShape> LayerWeights(int64_t j) const {
    const double s_in = 1.0 / std::sqrt(static_cast<double>(d_.d));
    std::vector<WeightShape> w = {
        {"norm1.scale", {d_.d}, {'-'}, 0},
        {"attn.wq", {d_.d, d_.n, d_.g, d_.k}, {'f', 't', '-', '-'}, s_in},
        {"attn.wk", {d_.d, d_.n, d_.k}, {'f', 't', '-'}, s_in},
        {"attn.wv", {d_.d, d_.n, d_.k}, {'f', 't', '-'}, s_in},
        {"attn.wo", {d_.n, d_.g, d_.k, d_.d}, {'t', '-', '-', 'f'},
         1.0 / std::sqrt(static_cast<double>(d_.n * d_.g * d_.k))},
        {"norm2.scale", {d_.d}, {'-'}, 0},
    };
    if (c_.is_moe_layer(j)) {
      const int64_t e = c_.moe.experts, fe = c_.expert_d_ff();
      w.push_back({"moe.router", {d_.d, e}, {'-', '-'}, s_in});
      w.push_back({"moe.w1", {e, d_.d, fe}, {'e', '-', 't'}, s_in});
      w.push_back({"moe.w2", {e, fe, d_.d}, {'e', 't', '-'}, 1.0 / std::sqrt(static_cast<double>(fe))});
      if (c_.activation == Activation::kSwiglu) w.push_back({"moe.w3", {e, d_.d, fe}, {'e', '-', 't'}, s_in});
      if (const int64_t fs = c_.moe.shared_d_ff; fs > 0) {  // the shared experts: a dense MLP beside them
        w.push_back({"moe.shared.w1", {d_.d, fs}, {'f', 't'}, s_in});
        w.push_back({"moe.shared.w2", {fs, d_.d}, {'t', 'f'}, 1.0 / std::sqrt(static_cast<double>(fs))});
        if (c_.activation == Activation::kSwiglu) w.push_back({"moe.shared.w3", {d_.d, fs}, {'f', 't'}, s_in});
      }
    } else {
      w.push_back({"mlp.w1", {d_.d, d_.f}, {'f', 't'}, s_in});
      w.push_back({"mlp.w2", {d_.f, d_.d}, {'t', 'f'}, 1.0 / std::sqrt(static_cast<double>(d_.f))});
      if (c_.activation == Activation::kSwiglu) w.push_back({"mlp.w3", {d_.d, d_.f}, {'f', 't'}, s_in});
    }
    if (c_.norm == Norm::kLayerNorm) {
      w.push_back({"norm1.bias", {d_.d}, {'-'}, -1});
      w.push_back({"norm2.bias", {d_.d}, {'-'}, -1});
    }
    return w;
  }

  PartitionSpec SpecOf(const WeightShape& w, bool stacked) const {
    std::vector<PartitionSpec::Entry> e;
    if (stacked) e.push_back(EntryOf(c_.parallel.pipeline_axes));
    for (char r : w.roles)
      e.push_back(r == 'f'   ? EntryOf(sh_.fsdp_axes)
                  : r == 't' ? EntryOf(sh_.tensor_axes)
                  : r == 'e' ? EntryOf(c_.parallel.expert_axes)
                             : PartitionSpec::Entry::None());
    return PartitionSpec(e);
  }

  // The global value of a weight of layer `layer` (the same whatever the layout: seeded by layer and name).
  Array WeightValue(const WeightShape& w, int64_t layer, uint64_t index) const {
    const uint64_t seed = c_.seed * 1000003 + 1000 + static_cast<uint64_t>(layer) * 64 + index;
    if (w.init_scale > 0) return RandomArray(w.shape, DType::kF32, seed, w.init_scale);
    if (w.init_scale < 0) return RandomArray(w.shape, DType::kF32, seed, 0.1);
    return spmdsim::Add(RandomArray(w.shape, DType::kF32, seed, 0.1), 1.0);
  }

  static std::string LayerName(int64_t layer, const std::string& w) { return fmt::format("layers.{}.{}", layer, w); }

  void AddInputs() {
    const TokenData tokens = MakeTokens(c_);
    const PartitionSpec onehot({PartitionSpec::Entry::None(), EntryOf(c_.parallel.data_axes),
                                EntryOf(c_.parallel.context_axes), EntryOf(sh_.tensor_axes)});
    const PartitionSpec::Entry seq = EntryOf(c_.parallel.context_axes);
    const PartitionSpec::Entry none = PartitionSpec::Entry::None();
    CheckFitsHostMemory(fmt::format("model '{}': one-hot tokens and targets", c_.name),
                        2 * ArrayBytes(std::vector<int64_t>{d_.B, d_.S, d_.V}, 4));
    p_->inputs.push_back({"tokens", OneHot(tokens.inputs, d_), onehot});
    p_->inputs.push_back({"targets", OneHot(tokens.targets, d_), onehot});
    // Context ranks hold their query rows of the mask and their positions of the rotary tables.
    p_->inputs.push_back({"causal_mask", CausalMask(d_.S), PartitionSpec({seq, none})});
    if (c_.attention_window.window > 0) {
      p_->inputs.push_back({"window_mask", CausalMask(d_.S, c_.attention_window.window), PartitionSpec({seq, none})});
    }
    if (Rope()) {
      const PartitionSpec q_spec({seq, none, none, none}), k_spec({seq, none, none});
      p_->inputs.push_back({"rope_cos_q", RopeTable(d_.S, d_.k, 2, false), q_spec});
      p_->inputs.push_back({"rope_sin_q", RopeTable(d_.S, d_.k, 2, true), q_spec});
      p_->inputs.push_back({"rope_cos_k", RopeTable(d_.S, d_.k, 1, false), k_spec});
      p_->inputs.push_back({"rope_sin_k", RopeTable(d_.S, d_.k, 1, true), k_spec});
    }
    if (pp_) {
      p_->inputs.push_back({"stage_ones", Array::Full({d_.stages}, DType::kF32, 1.0),
                            PartitionSpec({EntryOf(c_.parallel.pipeline_axes)})});
    }
    const double s_in = 1.0 / std::sqrt(static_cast<double>(d_.d));
    p_->inputs.push_back({"embed", RandomArray({d_.V, d_.d}, DType::kF32, c_.seed * 1000003 + 1, 1.0),
                          PartitionSpec({EntryOf(sh_.tensor_axes), PartitionSpec::Entry::None()})});
    if (!Rope()) {  // learned positions [S, d], split on seq like the activations under SP
      p_->inputs.push_back({"positions", RandomArray({d_.S, d_.d}, DType::kF32, c_.seed * 1000003 + 3, 0.5),
                            PositionsSpec()});
    }
    if (!c_.tied_embeddings) {
      p_->inputs.push_back({"head", RandomArray({d_.d, d_.V}, DType::kF32, c_.seed * 1000003 + 2, s_in),
                            PartitionSpec({PartitionSpec::Entry::None(), EntryOf(sh_.tensor_axes)})});
    }
    const WeightShape final_scale{"final_norm.scale", {d_.d}, {'-'}, 0};
    const PartitionSpec vector({PartitionSpec::Entry::None()});
    p_->inputs.push_back({"final_norm.scale", WeightValue(final_scale, -1, 0), vector});
    if (c_.norm == Norm::kLayerNorm) {
      const WeightShape bias{"final_norm.bias", {d_.d}, {'-'}, -1};
      p_->inputs.push_back({"final_norm.bias", WeightValue(bias, -1, 1), vector});
    }
    for (int64_t j = 0; j < (pp_ ? d_.layers_per_stage : c_.layers); ++j) {
      const std::vector<WeightShape> weights = LayerWeights(j);
      for (size_t wi = 0; wi < weights.size(); ++wi) {
        const WeightShape& w = weights[wi];
        if (!pp_) {
          p_->inputs.push_back({LayerName(j, w.name), WeightValue(w, j, wi), SpecOf(w, false)});
          continue;
        }
        std::vector<Array> per_stage;
        for (int64_t s = 0; s < d_.stages; ++s) {
          std::vector<int64_t> shape = w.shape;
          shape.insert(shape.begin(), 1);
          per_stage.push_back(Reshape(WeightValue(w, s * d_.layers_per_stage + j, wi), shape));
        }
        p_->inputs.push_back({fmt::format("stages.{}.{}", j, w.name), Concatenate(per_stage, 0), SpecOf(w, true)});
      }
    }
  }

  // The einsum letters of a rank-r weight ("abcd"), never 'p' (the stage letter).
  static std::string Letters(size_t rank) { return std::string("abcdefgh").substr(0, rank); }

  // The local (gathered) weight `w` of stage-layer j, as the layer body uses it.
  std::string W(int64_t j, const std::string& w) {
    const std::string key = fmt::format("{}/{}", j, w);
    if (auto it = weight_cache_.find(key); it != weight_cache_.end()) return it->second;
    const WeightShape shape = FindWeight(j, w);
    std::string v;
    if (!pp_) {
      const std::string in = LayerName(j, w);
      v = shape.FsdpDim() >= 0 ? b_.GatherWeight(in, shape.FsdpDim()) : in;
    } else {
      const std::string in = fmt::format("stages.{}.{}", j, w);
      const std::string gathered = shape.FsdpDim() >= 0 ? b_.GatherWeight(in, shape.FsdpDim() + 1) : in;
      const std::string l = Letters(shape.shape.size());
      v = b_.Einsum(fmt::format("fwd/stages.{}.{}_local", j, w), "p" + l + "->" + l, {gathered});
    }
    weight_cache_[key] = v;
    return v;
  }

  WeightShape FindWeight(int64_t j, const std::string& name) const {
    for (const WeightShape& w : LayerWeights(j))
      if (w.name == name) return w;
    SPMDSIM_CHECK(false, "unknown layer weight");
    return {};
  }

  // A micro-batch's one-hot rows [rows, S, V / t] of `which` ("tokens" / "targets").
  std::string MicroBatch(const std::string& pre, const std::string& which, int64_t m) {
    const std::string key = fmt::format("{}/{}", which, m);
    if (auto it = micro_cache_.find(key); it != micro_cache_.end()) return it->second;
    ProgramStep s = Named(fmt::format("{}{}_mb{}_slice", pre, which, m), "slice", {which});
    s.start = {m, 0, 0, 0};
    s.limit = {m + 1, d_.rows, d_.local_seq, d_.V / d_.tensor};
    const std::string sliced = b_.Step(std::move(s));
    const std::string v = b_.Einsum(fmt::format("{}{}_mb{}", pre, which, m), "mbsv->bsv", {sliced});
    micro_cache_[key] = v;
    return v;
  }

  struct NormValues {
    std::string y, xhat, rs;
  };

  NormValues NormForward(const std::string& pre, const std::string& x, const std::string& scale,
                         const std::string& bias) {
    NormValues n;
    std::string centred = x;
    if (c_.norm == Norm::kLayerNorm) {
      const std::string mu = Reduce(pre + "mean", "mean", x, {2}, true);
      centred = b_.Op(pre + "centred", "sub", {x, mu});
    }
    const std::string sq = b_.Op(pre + "square", "square", {centred});
    const std::string var = Reduce(pre + "variance", "mean", sq, {2}, true);
    n.rs = b_.Op(pre + "rsqrt", "rsqrt", {b_.Op(pre + "variance_eps", "add", {var}, kNormEpsilon)});
    n.xhat = Mul(pre + "normalized", centred, n.rs);
    n.y = Mul(pre + "scaled", n.xhat, scale);
    if (!bias.empty()) n.y = Add(pre + "out", n.y, bias);
    return n;
  }

  // dx of the norm (local), and the local gradients of its scale and bias (summed over batch and seq).
  struct NormGrads {
    std::string dx, dscale, dbias;
  };
  NormGrads NormBackward(const std::string& pre, const std::string& dy, const NormValues& n,
                         const std::string& scale) {
    NormGrads g;
    g.dscale = Reduce(pre + "dscale_local", "sum", Mul(pre + "dy_xhat", dy, n.xhat), {0, 1}, false);
    if (c_.norm == Norm::kLayerNorm) g.dbias = Reduce(pre + "dbias_local", "sum", dy, {0, 1}, false);
    const std::string dxhat = Mul(pre + "dxhat", dy, scale);
    const std::string m2 = Reduce(pre + "mean_dxhat_xhat", "mean", Mul(pre + "dxhat_xhat", dxhat, n.xhat), {2}, true);
    std::string inner = b_.Op(pre + "minus_proj", "sub", {dxhat, Mul(pre + "xhat_proj", n.xhat, m2)});
    if (c_.norm == Norm::kLayerNorm) {
      const std::string m1 = Reduce(pre + "mean_dxhat", "mean", dxhat, {2}, true);
      inner = b_.Op(pre + "minus_mean", "sub", {inner, m1});
    }
    g.dx = Mul(pre + "dx", inner, n.rs);
    return g;
  }

  bool Rope() const { return c_.position == PositionEmbedding::kRope; }
  // Learned positions are split on seq like the activations: over context axes, then tensor axes under SP.
  PartitionSpec PositionsSpec() const {
    std::vector<std::string> axes = c_.parallel.context_axes;
    if (b_.sequence_parallel()) axes.insert(axes.end(), sh_.tensor_axes.begin(), sh_.tensor_axes.end());
    return PartitionSpec({EntryOf(axes), PartitionSpec::Entry::None()});
  }

  // Context parallelism: the whole sequence's keys / values from every context rank (all_gather on seq), and the
  // adjoint for their gradients (psum_scatter on seq). Identity without context axes.
  std::string GatherContext(const std::string& name, const std::string& x) {
    if (c_.parallel.context_axes.empty()) return x;
    return b_.Collective(name, "all_gather", x, c_.parallel.context_axes, 1);
  }
  std::string ScatterContext(const std::string& name, const std::string& x) {
    if (c_.parallel.context_axes.empty()) return x;
    return b_.Collective(name, "psum_scatter", x, c_.parallel.context_axes, 1);
  }

  // Rotary embedding of q ([b, S, kv, g, k]) or k ([b, S, kv, k]) on this device: x cos + rotate_half(x) sin,
  // rotate_half(x) = concat(-x2, x1) over the halves of the last dimension. `transpose`: its adjoint, for the
  // backward: dy cos + rotate_half^T(dy sin), rotate_half^T(y) = concat(y2, -y1).
  std::string RopeApply(const std::string& pre, const std::string& x, bool is_q, bool transpose) {
    std::vector<int64_t> shape = {d_.rows, d_.local_seq, d_.n / d_.tensor};
    if (is_q) shape.push_back(d_.g);
    shape.push_back(d_.k);
    const int last = static_cast<int>(shape.size()) - 1;
    auto half = [&](const std::string& name, const std::string& v, bool second) {
      ProgramStep s = Named(name, "slice", {v});
      s.start.assign(shape.size(), 0);
      s.limit = shape;
      if (second) s.start[last] = d_.k / 2;
      else s.limit[last] = d_.k / 2;
      return b_.Step(std::move(s));
    };
    const std::string suffix = is_q ? "_q" : "_k";
    const std::string cos = "rope_cos" + suffix, sin = "rope_sin" + suffix;
    const std::string rotated_in = transpose ? Mul(pre + "times_sin", x, sin) : x;
    const std::string x1 = half(pre + "first_half", rotated_in, false);
    const std::string x2 = half(pre + "second_half", rotated_in, true);
    ProgramStep cat = transpose ? Named(pre + "rotated", "concatenate", {x2, b_.Op(pre + "neg_first", "neg", {x1})})
                                : Named(pre + "rotated", "concatenate", {b_.Op(pre + "neg_second", "neg", {x2}), x1});
    cat.axis = last;
    const std::string rotated = b_.Step(std::move(cat));
    const std::string straight = Mul(pre + "times_cos", x, cos);
    return Add(pre + "out", straight, transpose ? rotated : Mul(pre + "rotated_sin", rotated, sin));
  }

  struct LayerValues {
    NormValues n1, n2;
    std::string X, q, k, v, pr, o;  // attention (X: the gathered normalized input)
    std::string X2, h1, h3, s1, a;  // MLP (h1: x W1 = gelu's input or swiglu's gate; h3: swiglu's up)
    std::string probs, mask, gates, xr, ob;  // MoE: router softmax, top-k mask, gates, expert inputs and outputs
    std::string sh1, sh3, ss1, sa;           // MoE: the shared experts' MLP (as h1, h3, s1, a)
    std::string r;
  };

  std::string LayerForward(const std::string& pre, int64_t j, const std::string& x, LayerValues* lv) {
    const std::string bias1 = c_.norm == Norm::kLayerNorm ? W(j, "norm1.bias") : "";
    lv->n1 = NormForward(pre + "norm1/", x, W(j, "norm1.scale"), bias1);
    lv->X = b_.GatherSeq(pre + "attn/x", lv->n1.y);
    lv->q = b_.Einsum(pre + "attn/q", "bsd,dngk->bsngk", {lv->X, W(j, "attn.wq")});
    lv->k = b_.Einsum(pre + "attn/k", "bsd,dnk->bsnk", {lv->X, W(j, "attn.wk")});
    if (Rope()) {
      lv->q = RopeApply(pre + "attn/q_rope/", lv->q, true, false);
      lv->k = RopeApply(pre + "attn/k_rope/", lv->k, false, false);
    }
    lv->v = b_.Einsum(pre + "attn/v", "bsd,dnk->bsnk", {lv->X, W(j, "attn.wv")});
    lv->k = GatherContext(pre + "attn/k_all_gather", lv->k);
    lv->v = GatherContext(pre + "attn/v_all_gather", lv->v);
    const std::string sc = b_.Einsum(pre + "attn/scores", "bqngk,bsnk->bngqs", {lv->q, lv->k});
    const std::string ss = b_.Op(pre + "attn/scaled", "mul", {sc}, 1.0 / std::sqrt(static_cast<double>(d_.k)));
    const std::string sm = Add(pre + "attn/masked", ss, c_.is_windowed_layer(j) ? "window_mask" : "causal_mask");
    lv->pr = b_.Op(pre + "attn/probs", "softmax", {sm}, std::nullopt, 4);
    lv->o = b_.Einsum(pre + "attn/context", "bngqs,bsnk->bqngk", {lv->pr, lv->v});
    const std::string z = b_.Einsum(pre + "attn/out_partial", "bqngk,ngkd->bqd", {lv->o, W(j, "attn.wo")});
    const std::string attn = b_.ReduceTensor(pre + "attn/out", z);
    lv->r = Add(pre + "residual1", x, attn);
    const std::string bias2 = c_.norm == Norm::kLayerNorm ? W(j, "norm2.bias") : "";
    lv->n2 = NormForward(pre + "norm2/", lv->r, W(j, "norm2.scale"), bias2);
    lv->X2 = b_.GatherSeq(pre + "mlp/x", lv->n2.y);
    if (c_.is_moe_layer(j)) return Add(pre + "residual2", lv->r, MoeForward(pre + "moe/", j, lv));
    lv->h1 = b_.Einsum(pre + "mlp/h", "bsd,df->bsf", {lv->X2, W(j, "mlp.w1")});
    if (c_.activation == Activation::kSwiglu) {
      lv->h3 = b_.Einsum(pre + "mlp/up", "bsd,df->bsf", {lv->X2, W(j, "mlp.w3")});
      lv->s1 = b_.Op(pre + "mlp/silu", "silu", {lv->h1});
      lv->a = Mul(pre + "mlp/act", lv->s1, lv->h3);
    } else {
      lv->a = b_.Op(pre + "mlp/act", "gelu", {lv->h1});
    }
    const std::string z2 = b_.Einsum(pre + "mlp/out_partial", "bsf,fd->bsd", {lv->a, W(j, "mlp.w2")});
    const std::string mlp = b_.ReduceTensor(pre + "mlp/out", z2);
    return Add(pre + "residual2", lv->r, mlp);
  }

  void Accumulate(const std::string& key, const std::string& value) {
    auto [it, inserted] = grads_.emplace(key, value);
    if (!inserted) it->second = Add(value + "_acc", it->second, value);
  }

  std::string LayerBackward(const std::string& pre, int64_t j, const std::string& dy, const LayerValues& lv) {
    const std::string gk = fmt::format("{}/", j);
    const std::string dn2 = c_.is_moe_layer(j) ? MoeBackward(pre + "moe/", j, dy, lv) : MlpBackward(pre, j, dy, lv);
    NormGrads g2 = NormBackward(pre + "norm2/", dn2, lv.n2, W(j, "norm2.scale"));
    Accumulate(gk + "norm2.scale", g2.dscale);
    if (!g2.dbias.empty()) Accumulate(gk + "norm2.bias", g2.dbias);
    const std::string dr = Add(pre + "residual1_grad", dy, g2.dx);
    return AttentionBackward(pre, j, dr, lv);
  }

  // The activation's gradient: swiglu (dh1 for the gate x w1, dh3 for the up projection x w3) or gelu (dh1).
  // `p` prefixes the step names.
  std::pair<std::string, std::string> ActivationBackward(const std::string& p, const std::string& da,
                                                         const std::string& h1, const std::string& h3,
                                                         const std::string& s1) {
    if (c_.activation != Activation::kSwiglu) return {b_.Op(p + "dh", "gelu_grad", {h1, da}), ""};
    const std::string dh3 = Mul(p + "d_up", da, s1);
    const std::string sg = b_.Op(p + "sigmoid", "sigmoid", {h1});
    const std::string one_minus = b_.Op(p + "one_minus_sigmoid", "add", {b_.Op(p + "neg_sigmoid", "neg", {sg})}, 1.0);
    const std::string t1 = b_.Op(p + "silu_grad_inner", "add", {Mul(p + "h_one_minus", h1, one_minus)}, 1.0);
    const std::string dsilu = Mul(p + "silu_grad", sg, t1);
    return {Mul(p + "dh", Mul(p + "d_silu", da, h3), dsilu), dh3};
  }

  std::string MlpBackward(const std::string& pre, int64_t j, const std::string& dy, const LayerValues& lv) {
    const std::string gk = fmt::format("{}/", j);
    const std::string DY = b_.GatherSeq(pre + "mlp/dy", dy);
    const std::string da = b_.Einsum(pre + "mlp/d_act", "bsd,fd->bsf", {DY, W(j, "mlp.w2")});
    Accumulate(gk + "mlp.w2", b_.Einsum(pre + "mlp/dw2_local", "bsf,bsd->fd", {lv.a, DY}));
    const auto [dh1, dh3] = ActivationBackward(pre + "mlp/", da, lv.h1, lv.h3, lv.s1);
    Accumulate(gk + "mlp.w1", b_.Einsum(pre + "mlp/dw1_local", "bsd,bsf->df", {lv.X2, dh1}));
    std::string dxp = b_.Einsum(pre + "mlp/dx_gate", "bsf,df->bsd", {dh1, W(j, "mlp.w1")});
    if (!dh3.empty()) {
      Accumulate(gk + "mlp.w3", b_.Einsum(pre + "mlp/dw3_local", "bsd,bsf->df", {lv.X2, dh3}));
      dxp = Add(pre + "mlp/dx_partial", dxp, b_.Einsum(pre + "mlp/dx_up", "bsf,df->bsd", {dh3, W(j, "mlp.w3")}));
    }
    return b_.ReduceTensor(pre + "mlp/dx", dxp);
  }

  // An all_to_all over the expert axes (tiled): dispatch (split experts, concat rows) or combine (the reverse).
  std::string ExpertAllToAll(const std::string& name, const std::string& x, bool dispatch) {
    ProgramStep s = Named(name, "all_to_all", {x}, c_.parallel.expert_axes);
    s.split_axis = dispatch ? 0 : 1;
    s.concat_axis = dispatch ? 1 : 0;
    s.tiled = true;
    return b_.Step(std::move(s));
  }

  // The MoE block on the gathered normalized input lv->X2 (GShard / Switch with softmax top-k gates, dropless):
  // each token's row goes to every expert, zero unless the expert is one of its top_k; the rows are exchanged
  // with all_to_all over the expert axes (each rank holds experts / ep experts), run through the experts' MLPs
  // (d_ff split over tensor ranks), sent back and combined with the gates. Returns the block's output.
  std::string MoeForward(const std::string& pre, int64_t j, LayerValues* lv) {
    const std::string logits = b_.Einsum(pre + "router_logits", "bsd,de->bse", {lv->X2, W(j, "moe.router")});
    lv->probs = b_.Op(pre + "router_probs", "softmax", {logits}, std::nullopt, 2);
    std::string rest = lv->probs;
    for (int64_t i = 0; i < c_.moe.top_k; ++i) {
      const std::string mx = Reduce(fmt::format("{}top{}_max", pre, i), "max_reduce", rest, {2}, true);
      const std::string sel = b_.Step(Cast(fmt::format("{}top{}_mask", pre, i),
                                           b_.Op(fmt::format("{}top{}_ge", pre, i), "greater_equal", {rest, mx})));
      lv->mask = i == 0 ? sel : Add(fmt::format("{}top{}_mask_sum", pre, i), lv->mask, sel);
      // Probabilities are in [0, 1]: subtracting 2 puts the chosen expert below every other.
      if (i + 1 < c_.moe.top_k) {
        rest = b_.Op(fmt::format("{}top{}_rest", pre, i), "sub",
                     {rest, b_.Op(fmt::format("{}top{}_drop", pre, i), "mul", {sel}, 2.0)});
      }
    }
    lv->gates = Mul(pre + "gates", lv->probs, lv->mask);
    const std::string xe = b_.Einsum(pre + "dispatch_rows", "bsd,bse->ebsd", {lv->X2, lv->mask});
    lv->xr = ExpertAllToAll(pre + "dispatch", xe, true);
    lv->h1 = b_.Einsum(pre + "h", "ebsd,edf->ebsf", {lv->xr, W(j, "moe.w1")});
    if (c_.activation == Activation::kSwiglu) {
      lv->h3 = b_.Einsum(pre + "up", "ebsd,edf->ebsf", {lv->xr, W(j, "moe.w3")});
      lv->s1 = b_.Op(pre + "silu", "silu", {lv->h1});
      lv->a = Mul(pre + "act", lv->s1, lv->h3);
    } else {
      lv->a = b_.Op(pre + "act", "gelu", {lv->h1});
    }
    const std::string oe = b_.Einsum(pre + "expert_out", "ebsf,efd->ebsd", {lv->a, W(j, "moe.w2")});
    lv->ob = ExpertAllToAll(pre + "combine", oe, false);
    std::string yp = b_.Einsum(pre + "out_partial", "ebsd,bse->bsd", {lv->ob, lv->gates});
    if (c_.moe.shared_d_ff > 0) yp = Add(pre + "with_shared", yp, SharedForward(pre + "shared/", j, lv));
    return b_.ReduceTensor(pre + "out", yp);
  }

  // The shared experts on the gathered input: a dense MLP whose output (a partial sum over tensor ranks) adds to
  // the routed experts'.
  std::string SharedForward(const std::string& pre, int64_t j, LayerValues* lv) {
    lv->sh1 = b_.Einsum(pre + "h", "bsd,df->bsf", {lv->X2, W(j, "moe.shared.w1")});
    if (c_.activation == Activation::kSwiglu) {
      lv->sh3 = b_.Einsum(pre + "up", "bsd,df->bsf", {lv->X2, W(j, "moe.shared.w3")});
      lv->ss1 = b_.Op(pre + "silu", "silu", {lv->sh1});
      lv->sa = Mul(pre + "act", lv->ss1, lv->sh3);
    } else {
      lv->sa = b_.Op(pre + "act", "gelu", {lv->sh1});
    }
    return b_.Einsum(pre + "out_partial", "bsf,fd->bsd", {lv->sa, W(j, "moe.shared.w2")});
  }

  // Its backward from the gathered output gradient DY; returns its partial input gradient.
  std::string SharedBackward(const std::string& pre, int64_t j, const std::string& DY, const LayerValues& lv) {
    const std::string gk = fmt::format("{}/", j);
    const std::string da = b_.Einsum(pre + "d_act", "bsd,fd->bsf", {DY, W(j, "moe.shared.w2")});
    Accumulate(gk + "moe.shared.w2", b_.Einsum(pre + "dw2_local", "bsf,bsd->fd", {lv.sa, DY}));
    const auto [dh1, dh3] = ActivationBackward(pre, da, lv.sh1, lv.sh3, lv.ss1);
    Accumulate(gk + "moe.shared.w1", b_.Einsum(pre + "dw1_local", "bsd,bsf->df", {lv.X2, dh1}));
    std::string dx = b_.Einsum(pre + "dx_gate", "bsf,df->bsd", {dh1, W(j, "moe.shared.w1")});
    if (!dh3.empty()) {
      Accumulate(gk + "moe.shared.w3", b_.Einsum(pre + "dw3_local", "bsd,bsf->df", {lv.X2, dh3}));
      dx = Add(pre + "dx", dx, b_.Einsum(pre + "dx_up", "bsf,df->bsd", {dh3, W(j, "moe.shared.w3")}));
    }
    return dx;
  }

  std::string MoeBackward(const std::string& pre, int64_t j, const std::string& dy, const LayerValues& lv) {
    const std::string gk = fmt::format("{}/", j);
    const std::string DY = b_.GatherSeq(pre + "dy", dy);
    // The expert outputs are partial sums over tensor ranks (d_ff split): so are the gates' gradients.
    const std::string dgates = Psum(pre + "d_gates", b_.Einsum(pre + "d_gates_partial", "ebsd,bsd->bse", {lv.ob, DY}),
                                    sh_.tensor_axes);
    const std::string dob = b_.Einsum(pre + "d_combined", "bsd,bse->ebsd", {DY, lv.gates});
    const std::string doe = ExpertAllToAll(pre + "d_combine", dob, true);
    const std::string da = b_.Einsum(pre + "d_act", "ebsd,efd->ebsf", {doe, W(j, "moe.w2")});
    Accumulate(gk + "moe.w2", b_.Einsum(pre + "dw2_local", "ebsf,ebsd->efd", {lv.a, doe}));
    const auto [dh1, dh3] = ActivationBackward(pre, da, lv.h1, lv.h3, lv.s1);
    Accumulate(gk + "moe.w1", b_.Einsum(pre + "dw1_local", "ebsd,ebsf->edf", {lv.xr, dh1}));
    std::string dxr = b_.Einsum(pre + "dx_gate", "ebsf,edf->ebsd", {dh1, W(j, "moe.w1")});
    if (!dh3.empty()) {
      Accumulate(gk + "moe.w3", b_.Einsum(pre + "dw3_local", "ebsd,ebsf->edf", {lv.xr, dh3}));
      dxr = Add(pre + "dx_experts", dxr, b_.Einsum(pre + "dx_up", "ebsf,edf->ebsd", {dh3, W(j, "moe.w3")}));
    }
    const std::string dxe = ExpertAllToAll(pre + "d_dispatch", dxr, false);
    const std::string dx_disp = b_.Einsum(pre + "dx_dispatch", "ebsd,bse->bsd", {dxe, lv.mask});
    // The router (the same on every tensor rank): its input gradient enters the sum over tensor ranks once.
    const std::string dlogits = b_.Op(pre + "d_router_logits", "softmax_grad",
                                      {lv.probs, Mul(pre + "d_router_probs", dgates, lv.mask)}, std::nullopt, 2);
    Accumulate(gk + "moe.router", b_.Einsum(pre + "drouter_local", "bsd,bse->de", {lv.X2, dlogits}));
    std::string dx_router = b_.Einsum(pre + "dx_router", "bse,de->bsd", {dlogits, W(j, "moe.router")});
    if (d_.tensor > 1) {
      dx_router = b_.Op(pre + "dx_router_share", "mul", {dx_router}, 1.0 / static_cast<double>(d_.tensor));
    }
    std::string dxp = Add(pre + "dx_partial", dx_disp, dx_router);
    if (c_.moe.shared_d_ff > 0) dxp = Add(pre + "dx_with_shared", dxp, SharedBackward(pre + "shared/", j, DY, lv));
    return b_.ReduceTensor(pre + "dx", dxp);
  }

  std::string AttentionBackward(const std::string& pre, int64_t j, const std::string& dr, const LayerValues& lv) {
    const std::string gk = fmt::format("{}/", j);
    const std::string DR = b_.GatherSeq(pre + "attn/dout", dr);
    const std::string dO = b_.Einsum(pre + "attn/d_context", "bqd,ngkd->bqngk", {DR, W(j, "attn.wo")});
    Accumulate(gk + "attn.wo", b_.Einsum(pre + "attn/dwo_local", "bqngk,bqd->ngkd", {lv.o, DR}));
    const std::string dp = b_.Einsum(pre + "attn/d_probs", "bqngk,bsnk->bngqs", {dO, lv.v});
    const std::string dv = ScatterContext(pre + "attn/dv_psum_scatter",
                                          b_.Einsum(pre + "attn/dv", "bngqs,bqngk->bsnk", {lv.pr, dO}));
    const std::string ds = b_.Op(pre + "attn/d_masked", "softmax_grad", {lv.pr, dp}, std::nullopt, 4);
    const std::string dss = b_.Op(pre + "attn/d_scores", "mul", {ds}, 1.0 / std::sqrt(static_cast<double>(d_.k)));
    std::string dq = b_.Einsum(pre + "attn/dq", "bngqs,bsnk->bqngk", {dss, lv.k});
    std::string dk = ScatterContext(pre + "attn/dk_psum_scatter",
                                    b_.Einsum(pre + "attn/dk", "bngqs,bqngk->bsnk", {dss, lv.q}));
    if (Rope()) {
      dq = RopeApply(pre + "attn/dq_rope/", dq, true, true);
      dk = RopeApply(pre + "attn/dk_rope/", dk, false, true);
    }
    Accumulate(gk + "attn.wq", b_.Einsum(pre + "attn/dwq_local", "bsd,bsngk->dngk", {lv.X, dq}));
    Accumulate(gk + "attn.wk", b_.Einsum(pre + "attn/dwk_local", "bsd,bsnk->dnk", {lv.X, dk}));
    Accumulate(gk + "attn.wv", b_.Einsum(pre + "attn/dwv_local", "bsd,bsnk->dnk", {lv.X, dv}));
    const std::string dxq = b_.Einsum(pre + "attn/dx_q", "bsngk,dngk->bsd", {dq, W(j, "attn.wq")});
    const std::string dxk = b_.Einsum(pre + "attn/dx_k", "bsnk,dnk->bsd", {dk, W(j, "attn.wk")});
    const std::string dxv = b_.Einsum(pre + "attn/dx_v", "bsnk,dnk->bsd", {dv, W(j, "attn.wv")});
    const std::string adxp = Add(pre + "attn/dx_partial", Add(pre + "attn/dx_qk", dxq, dxk), dxv);
    const std::string dn1 = b_.ReduceTensor(pre + "attn/dx", adxp);
    NormGrads g1 = NormBackward(pre + "norm1/", dn1, lv.n1, W(j, "norm1.scale"));
    Accumulate(gk + "norm1.scale", g1.dscale);
    if (!g1.dbias.empty()) Accumulate(gk + "norm1.bias", g1.dbias);
    return Add(pre + "dx", dr, g1.dx);
  }

  // The embedding of micro-batch m: a partial sum over the vocabulary shards, reduced over tensor_axes.
  std::string Embed(const std::string& pre, int64_t m) {
    const std::string oh = MicroBatch(pre, "tokens", m);
    const std::string partial = b_.Einsum(pre + "embed_partial", "bsv,vd->bsd", {oh, "embed"});
    const std::string x = b_.ReduceTensor(pre + "embed", partial);
    return Rope() ? x : Add(pre + "embed_positions", x, "positions");
  }

  struct HeadValues {
    NormValues n;
    std::string H, p, dlogits_scale, targets;
  };

  std::string LogitsWeightEquation() const { return c_.tied_embeddings ? "bsd,vd->bsv" : "bsd,dv->bsv"; }
  std::string OutputWeight() const { return c_.tied_embeddings ? "embed" : "head"; }

  // Final norm, logits, vocab-parallel cross-entropy of micro-batch m; returns the local loss sum (masked to the
  // last stage).
  std::string HeadForward(const std::string& pre, const std::string& x, int64_t m, HeadValues* hv) {
    hv->n = NormForward(pre + "final_norm/", x, "final_norm.scale",
                        c_.norm == Norm::kLayerNorm ? "final_norm.bias" : "");
    hv->H = b_.GatherSeq(pre + "head/x", hv->n.y);
    const std::string logits = b_.Einsum(pre + "head/logits", LogitsWeightEquation(), {hv->H, OutputWeight()});
    const std::vector<std::string>& t = sh_.tensor_axes;
    const std::string mx = b_.Step(Named(pre + "head/max", "pmax",
                                         {Reduce(pre + "head/max_local", "max_reduce", logits, {2}, true)}, t));
    const std::string shifted = b_.Op(pre + "head/shifted", "sub", {logits, mx});
    const std::string e = b_.Op(pre + "head/exp", "exp", {shifted});
    const std::string se = Psum(pre + "head/sum_exp", Reduce(pre + "head/sum_exp_local", "sum", e, {2}, true), t);
    const std::string lse = b_.Op(pre + "head/log_sum_exp", "log", {se});
    hv->targets = MicroBatch(pre, "targets", m);
    const std::string tl = Psum(pre + "head/target_logit",
                                Reduce(pre + "head/target_logit_local", "sum",
                                       Mul(pre + "head/target_picked", shifted, hv->targets), {2}, true), t);
    // softmax over the whole vocabulary, this rank's columns: exp(shifted - lse).
    hv->p = b_.Op(pre + "head/probs", "exp", {b_.Op(pre + "head/log_probs", "sub", {shifted, lse})});
    const std::string token_loss = b_.Op(pre + "head/token_loss", "sub", {lse, tl});
    std::string loss = Reduce(pre + "head/loss_local", "sum", token_loss, {}, false);
    if (pp_) loss = Mul(pre + "head/loss_masked", loss, is_last_);
    return loss;
  }

  // The backward of the head from the loss (mean over every token of the global batch); returns dx (zero off the
  // last stage).
  std::string HeadBackward(const std::string& pre, const HeadValues& hv) {
    const double inv_tokens = 1.0 / static_cast<double>(d_.B * d_.S);
    std::string dl = b_.Op(pre + "head/dlogits_unscaled", "sub", {hv.p, hv.targets});
    dl = b_.Op(pre + "head/dlogits_mean", "mul", {dl}, inv_tokens);
    if (pp_) dl = Mul(pre + "head/dlogits", dl, is_last_);
    if (c_.tied_embeddings) {
      Accumulate("embed", b_.Einsum(pre + "head/dembed_local", "bsd,bsv->vd", {hv.H, dl}));
    } else {
      Accumulate("head", b_.Einsum(pre + "head/dhead_local", "bsd,bsv->dv", {hv.H, dl}));
    }
    const std::string eq = c_.tied_embeddings ? "bsv,vd->bsd" : "bsv,dv->bsd";
    const std::string dhp = b_.Einsum(pre + "head/dx_partial", eq, {dl, OutputWeight()});
    const std::string dh = b_.ReduceTensor(pre + "head/dx", dhp);
    NormGrads g = NormBackward(pre + "final_norm/", dh, hv.n, "final_norm.scale");
    Accumulate("final_norm.scale", g.dscale);
    if (!g.dbias.empty()) Accumulate("final_norm.bias", g.dbias);
    return g.dx;
  }

  void EmbedBackward(const std::string& pre, const std::string& dx, int64_t m) {
    std::string d = pp_ ? Mul(pre + "embed/dx_first_stage", dx, is_first_) : dx;
    const std::string D = b_.GatherSeq(pre + "embed/dx", d);
    Accumulate("embed", b_.Einsum(pre + "embed/dembed_local", "bsv,bsd->vd", {MicroBatch(pre, "tokens", m), D}));
    if (!Rope()) Accumulate("positions", Reduce(pre + "embed/dpositions_local", "sum", d, {0}, false));
  }

  std::string Ppermute(const std::string& name, const std::string& x, bool forward) {
    ProgramStep s = Named(name, "ppermute", {x}, c_.parallel.pipeline_axes);
    for (int64_t i = 0; i + 1 < d_.stages; ++i) s.pairs.push_back(forward ? std::pair{i, i + 1} : std::pair{i + 1, i});
    return b_.Step(std::move(s));
  }

  int64_t Ticks() const { return d_.micro_batches + d_.stages - 1; }

  void Forward() {
    const int64_t T = Ticks(), M = d_.micro_batches, P = d_.stages;
    layer_values_.assign(static_cast<size_t>(T), std::vector<LayerValues>(static_cast<size_t>(d_.layers_per_stage)));
    head_values_.assign(static_cast<size_t>(T), HeadValues{});
    std::string recv;
    std::vector<std::string> losses;
    for (int64_t t = 0; t < T; ++t) {
      const std::string pre = pp_ || M > 1 ? fmt::format("fwd/t{}/", t) : "fwd/";
      std::string x;
      if (t < M) {
        const std::string emb = Embed(pre, t);
        x = recv.empty() ? emb : Add(pre + "stage_input", Mul(pre + "embed_first_stage", emb, is_first_), recv);
      } else {
        x = recv;
      }
      for (int64_t j = 0; j < d_.layers_per_stage; ++j) {
        x = LayerForward(fmt::format("{}l{}/", pre, j), j, x, &layer_values_[t][j]);
      }
      if (t >= P - 1) losses.push_back(HeadForward(pre, x, t - (P - 1), &head_values_[t]));
      if (pp_ && t + 1 < T) recv = Ppermute(pre + "send", x, true);
    }
    std::string total = losses[0];
    for (size_t i = 1; i < losses.size(); ++i) total = Add(fmt::format("fwd/loss_sum{}", i), total, losses[i]);
    std::vector<std::string> axes = sh_.batch_axes;
    axes.insert(axes.end(), c_.parallel.pipeline_axes.begin(), c_.parallel.pipeline_axes.end());
    const std::string summed = Psum("fwd/loss_sum", total, axes);
    loss_ = b_.Op("loss", "mul", {summed}, 1.0 / static_cast<double>(d_.B * d_.S));
  }

  void Backward() {
    const int64_t T = Ticks(), M = d_.micro_batches, P = d_.stages;
    std::string recv;
    for (int64_t tb = 0; tb < T; ++tb) {
      const int64_t tf = T - 1 - tb;  // every stage's forward tick of the micro-batch it now runs backward
      const std::string pre = pp_ || M > 1 ? fmt::format("bwd/t{}/", tb) : "bwd/";
      std::string dx;
      if (tb < M) {
        const std::string dh = HeadBackward(pre, head_values_[tf]);
        dx = recv.empty() ? dh : Add(pre + "stage_grad", dh, recv);
      } else {
        dx = recv;
      }
      for (int64_t j = d_.layers_per_stage - 1; j >= 0; --j) {
        dx = LayerBackward(fmt::format("{}l{}/", pre, j), j, dx, layer_values_[tf][j]);
      }
      if (tb >= P - 1) EmbedBackward(pre, dx, M - 1 - (tb - (P - 1)));
      if (pp_ && tb + 1 < T) recv = Ppermute(pre + "send", dx, false);
    }
  }

  // A replicated weight's gradient: summed over the data (and pipeline) ranks, and over tensor ranks when sequence
  // parallelism split the tokens it was summed over.
  std::string ReduceReplicated(const std::string& name, const std::string& local, bool token_split_by_sp) {
    std::vector<std::string> axes = sh_.batch_axes;
    axes.insert(axes.end(), c_.parallel.pipeline_axes.begin(), c_.parallel.pipeline_axes.end());
    if (token_split_by_sp && b_.sequence_parallel())
      axes.insert(axes.end(), sh_.tensor_axes.begin(), sh_.tensor_axes.end());
    return Psum(name, local, axes);
  }

  // The axes a layer weight without an FSDP dimension has its gradient psum'd over: experts over the data axes that
  // do not split them; the router over every data axis (its input is the gathered sequence); the norms also over
  // tensor ranks under SP (each saw its sequence shard).
  std::vector<std::string> ReplicatedGradAxes(const WeightShape& w) const {
    std::vector<std::string> axes;
    const std::vector<std::string>& experts = c_.parallel.expert_axes;
    const bool expert = std::find(w.roles.begin(), w.roles.end(), 'e') != w.roles.end();
    for (const std::string& a : sh_.batch_axes)
      if (!expert || std::find(experts.begin(), experts.end(), a) == experts.end()) axes.push_back(a);
    if (!expert && w.name != "moe.router" && b_.sequence_parallel())
      axes.insert(axes.end(), sh_.tensor_axes.begin(), sh_.tensor_axes.end());
    return axes;
  }

  void Output(const std::string& value, const PartitionSpec& spec, ModelOutputLabel label) {
    p_->outputs.push_back({value, spec});
    out_->labels.push_back(std::move(label));
  }

  void Outputs() {
    const PartitionSpec replicated_vector({PartitionSpec::Entry::None()});
    Output(loss_, PartitionSpec(), {{"loss"}, false});
    Output(ReduceReplicated("grad/embed", grads_.at("embed"), false),
           PartitionSpec({EntryOf(sh_.tensor_axes), PartitionSpec::Entry::None()}), {{"grad/embed"}, false});
    if (!Rope()) {
      std::vector<std::string> axes = c_.parallel.data_axes;  // not the context axes: they split the positions
      axes.insert(axes.end(), c_.parallel.pipeline_axes.begin(), c_.parallel.pipeline_axes.end());
      Output(Psum("grad/positions", grads_.at("positions"), axes), PositionsSpec(), {{"grad/positions"}, false});
    }
    if (!c_.tied_embeddings) {
      Output(ReduceReplicated("grad/head", grads_.at("head"), false),
             PartitionSpec({PartitionSpec::Entry::None(), EntryOf(sh_.tensor_axes)}), {{"grad/head"}, false});
    }
    Output(ReduceReplicated("grad/final_norm.scale", grads_.at("final_norm.scale"), true), replicated_vector,
           {{"grad/final_norm.scale"}, false});
    if (c_.norm == Norm::kLayerNorm) {
      Output(ReduceReplicated("grad/final_norm.bias", grads_.at("final_norm.bias"), true), replicated_vector,
             {{"grad/final_norm.bias"}, false});
    }
    for (int64_t j = 0; j < d_.layers_per_stage; ++j) {
      for (const WeightShape& w : LayerWeights(j)) {
        std::string g = grads_.at(fmt::format("{}/{}", j, w.name));
        ModelOutputLabel label;
        label.stacked = pp_;
        for (int64_t s = 0; s < d_.stages; ++s) {
          label.names.push_back("grad/" + LayerName(s * d_.layers_per_stage + j, w.name));
        }
        const std::string name = pp_ ? fmt::format("grad/stages.{}.{}", j, w.name) : label.names[0];
        if (pp_) {
          const std::string l = Letters(w.shape.size());
          g = b_.Einsum(name + "_stacked", l + ",p->p" + l, {g, "stage_ones"});
        }
        const int fsdp = w.FsdpDim();
        if (fsdp >= 0) {
          // Matrices: psum_scatter over FSDP axes, psum over the rest of the data axes (ProgramBuilder).
          g = b_.ReduceWeightGrad(name, g, fsdp + (pp_ ? 1 : 0));
        } else {
          // Under SP the router's input is all_gathered (varying over tensor ranks for shard_map's check), though
          // every tensor rank computes the same gradient: pmean states that.
          if (w.name == "moe.router" && b_.sequence_parallel()) {
            g = b_.Step(Named(name + "_tensor_pmean", "pmean", {g}, sh_.tensor_axes));
          }
          g = Psum(name, g, ReplicatedGradAxes(w));
        }
        Output(g, SpecOf(w, pp_), label);
      }
    }
  }

  const ModelConfig& c_;
  ModelProgram* out_;
  ShardMapConfig* p_;
  LayerSharding sh_;
  ProgramBuilder b_;
  Dims d_{};
  bool pp_ = false;
  std::string stage_, is_first_, is_last_, loss_;
  std::map<std::string, std::string> weight_cache_, micro_cache_, grads_;
  std::vector<std::vector<LayerValues>> layer_values_;
  std::vector<HeadValues> head_values_;
};

}  // namespace

ModelConfig OneDeviceModel(const ModelConfig& config) {
  ModelConfig c = config;
  c.parallel = ModelParallelism{};
  c.micro_batch = c.global_batch;
  c.name = config.name + " (one device)";
  return c;
}

void CheckModelRunsWithData(const ValidatedModel& model) {
  const ModelConfig& c = model.config();
  const ParallelDegrees& deg = model.degrees();
  auto refuse = [&c](ErrorCode code, const std::string& why) {
    Throw(code, "model '{}': {}; run it with --abstract (shapes only: the accounting and the predicted step)",
          c.name, why);
  };
  if (c.is_mla())
    refuse(ErrorCode::kUnimplemented, "the data run has no multi-head latent attention (mla)");
  if (c.mtp_layers > 0) refuse(ErrorCode::kUnimplemented, "the data run has no multi-token prediction (mtp_layers)");
  const ModelParallelism& par = c.parallel;
  if (par.first_stage_layers >= 0 || par.last_stage_layers >= 0 || par.embedding_in_split || par.loss_in_split)
    refuse(ErrorCode::kUnimplemented, "the data run stacks each stage's layers, so the stages must hold as many "
                                      "(no first_stage_layers, last_stage_layers, account_for_embedding / _loss)");
  if (c.experts_over_tensor())
    refuse(ErrorCode::kUnimplemented, "the data run splits experts over data axes only (not the tensor axes)");
  if (deg.pipeline > 1 && c.moe.experts > 0 && c.moe.first_dense > 0)
    refuse(ErrorCode::kUnimplemented, "the data run stacks each stage's layers, so every stage needs the same MoE "
                                      "layers: moe.first_dense needs a single stage");
  if (deg.pipeline > 1 && c.attention_window.global_every > 0 &&
      (c.layers / deg.pipeline) % c.attention_window.global_every != 0)
    refuse(ErrorCode::kUnimplemented,
           fmt::format("the data run stacks each stage's layers, so every stage needs the same windowed layers: the "
                       "layers per stage ({}) must be a multiple of attention_window.global_every = {}",
                       c.layers / deg.pipeline, c.attention_window.global_every));
  if (c.moe.experts > 0 && (c.layers / deg.pipeline) % c.moe.every != 0)
    refuse(ErrorCode::kUnimplemented,
           fmt::format("the data run stacks each stage's layers, so every stage needs the same MoE layers: the "
                       "layers per stage ({}) must be a multiple of moe.every = {}", c.layers / deg.pipeline,
                       c.moe.every));
  if (c.effective_kv_heads() % deg.tensor != 0)
    refuse(ErrorCode::kUnimplemented,
           fmt::format("the data run splits KV heads over tensor ranks: kv_heads = {} must be a multiple of the "
                       "tensor-parallel degree {} (replicated KV heads are only accounted)",
                       c.effective_kv_heads(), deg.tensor));
  if (c.vocab % deg.tensor != 0)
    refuse(ErrorCode::kUnimplemented,
           fmt::format("the data run splits the vocabulary over tensor ranks unpadded: vocab = {} must be a multiple "
                       "of the tensor-parallel degree {}", c.vocab, deg.tensor));
  if (c.position == PositionEmbedding::kRope && c.effective_head_dim() % 2 != 0)
    refuse(ErrorCode::kInvalidArgument,
           fmt::format("rotary embeddings rotate the halves of the head dimension: head_dim = {} must be even",
                       c.effective_head_dim()));
  const ModelAccounting a = AccountModel(model);
  const double onehot = 6.0 * static_cast<double>(c.global_batch) * c.seq * c.vocab * c.d_model;
  const double flops = a.flops.model + onehot;
  if (flops > kMaxDataRunFlops)
    // Nothing ran out (RESOURCE_EXHAUSTED, Python's MemoryError, is kept for memory that does not fit): the
    // scenario is valid and runs with --abstract; running it with data is what this mode does not take.
    // FAILED_PRECONDITION (Python's ValueError), docs/model.md, "Running with data".
    refuse(ErrorCode::kFailedPrecondition,
           fmt::format("too big to run with data: a training step is {:.3g} FLOPs (forward + backward), more than "
                       "the {:.3g} the data run allows on this machine", flops, kMaxDataRunFlops));
}

ModelProgram BuildModelProgram(const ValidatedModel& model) {
  ModelProgram out;
  ModelBuilder builder(model, &out);
  builder.Build();
  return out;
}

}  // namespace spmdsim::internal
