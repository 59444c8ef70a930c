// The model workload's training step as a shard_map program (docs/model.md, "Running with data").
//
// Layout (Megatron-LM; Shoeybi et al. 2019, Korthikanti et al. 2022, Narayanan et al. 2021):
//   embedding     vocab-parallel: E [V, d] split on V over tensor_axes; tokens are one-hot rows [b, s, V] split
//                 the same way, so x0 = onehot @ E is a partial sum reduced over tensor_axes (psum, or
//                 psum_scatter on seq with SP).
//                 Learned positions [S, d] are added (split on seq under SP).
//   layers        pre-norm: x + attn(norm1(x)), then + mlp(norm2(.)); attention column/row parallel over heads
//                 (KV heads split, GQA groups kept whole), rotary embeddings on q and k (rope), causal mask; MLP
//                 over d_ff. Each layer's steps come from the step's description of it (model/layer_ops.h), op
//                 by op: workloads/internal/model_layer_program.h.
//   head          final norm, logits = h @ W_out with W_out [d, V] split on V (tied: h @ E^T); vocab-parallel
//                 cross-entropy (pmax / psum of the softmax statistics over tensor_axes); loss = mean over all
//                 tokens of the global batch.
//   context       the sequence split over context_axes; attention all_gathers the keys and values on seq, as
//                 one buffer (psum_scatter of their gradients); gradients psum'd over context_axes as over data_axes.
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
#include "workloads/internal/model_layer_program.h"
#include "workloads/internal/program_builder.h"

namespace spmdsim::internal {
namespace {

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
Array OneHot(const std::vector<int64_t>& ids, const ModelDims& d) {
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

class ModelBuilder final : public LayerWeights {
 public:
  ModelBuilder(const ValidatedModel& model, ModelProgram* out)
      : c_(model.config()), out_(out), p_(&out->program), sh_(Sharding(c_)), b_(p_, sh_), d_(DimsOf(model)),
        pp_(d_.stages > 1), ops_(model), layers_(&b_, c_, d_, ops_, this) {}

  void Build() {
    p_->name = c_.name;
    p_->rtol = c_.rtol;
    p_->atol = c_.atol;
    AddInputs();
    if (pp_) {
      stage_ = b_.Step(ProgramBuilder::Named("stage_index", "axis_index", {}, c_.parallel.pipeline_axes));
      const std::string sf = b_.Cast("stage_f32", stage_);
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
  static ModelDims DimsOf(const ValidatedModel& model) {
    const ModelConfig& c = model.config();
    const ParallelDegrees& deg = model.degrees();
    return ModelDims{.V = c.vocab, .d = c.d_model, .n = c.effective_kv_heads(), .g = c.heads / c.effective_kv_heads(),
                     .k = c.effective_head_dim(), .f = c.d_ff, .S = c.seq, .B = c.global_batch,
                     .stages = deg.pipeline, .layers_per_stage = c.layers / deg.pipeline,
                     .micro_batches = deg.micro_batches, .rows = c.micro_batch, .tensor = deg.tensor,
                     .data = deg.data, .context = deg.context, .local_seq = c.seq / deg.context};
  }

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

  // The weights of stage-layer j (the same structure on every stage: CheckModelRunsWithData).
  std::vector<WeightShape> WeightsOf(int64_t j) const {
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
      const std::vector<WeightShape> weights = WeightsOf(j);
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
  std::string Weight(int64_t j, const std::string& w) override {
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
    for (const WeightShape& w : WeightsOf(j))
      if (w.name == name) return w;
    SPMDSIM_CHECK(false, "unknown layer weight");
    return {};
  }

  // A micro-batch's one-hot rows [rows, S, V / t] of `which` ("tokens" / "targets").
  std::string MicroBatch(const std::string& pre, const std::string& which, int64_t m) {
    const std::string key = fmt::format("{}/{}", which, m);
    if (auto it = micro_cache_.find(key); it != micro_cache_.end()) return it->second;
    ProgramStep s = ProgramBuilder::Named(fmt::format("{}{}_mb{}_slice", pre, which, m), "slice", {which});
    s.start = {m, 0, 0, 0};
    s.limit = {m + 1, d_.rows, d_.local_seq, d_.V / d_.tensor};
    const std::string sliced = b_.Step(std::move(s));
    const std::string v = b_.Einsum(fmt::format("{}{}_mb{}", pre, which, m), "mbsv->bsv", {sliced});
    micro_cache_[key] = v;
    return v;
  }

  bool Rope() const { return c_.position == PositionEmbedding::kRope; }
  // Learned positions are split on seq like the activations: over context axes, then tensor axes under SP.
  PartitionSpec PositionsSpec() const {
    std::vector<std::string> axes = c_.parallel.context_axes;
    if (b_.sequence_parallel()) axes.insert(axes.end(), sh_.tensor_axes.begin(), sh_.tensor_axes.end());
    return PartitionSpec({EntryOf(axes), PartitionSpec::Entry::None()});
  }

  void Accumulate(const std::string& key, const std::string& value) override {
    auto [it, inserted] = grads_.emplace(key, value);
    if (!inserted) it->second = b_.Add(value + "_acc", it->second, value);
  }

  // The embedding of micro-batch m: a partial sum over the vocabulary shards, reduced over tensor_axes.
  std::string Embed(const std::string& pre, int64_t m) {
    const std::string oh = MicroBatch(pre, "tokens", m);
    const std::string partial = b_.Einsum(pre + "embed_partial", "bsv,vd->bsd", {oh, "embed"});
    const std::string x = b_.ReduceTensor(pre + "embed", partial);
    return Rope() ? x : b_.Add(pre + "embed_positions", x, "positions");
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
    hv->n = layers_.NormForward(pre + "final_norm/", x, "final_norm.scale",
                        c_.norm == Norm::kLayerNorm ? "final_norm.bias" : "");
    hv->H = b_.GatherSeq(pre + "head/x", hv->n.y);
    const std::string logits = b_.Einsum(pre + "head/logits", LogitsWeightEquation(), {hv->H, OutputWeight()});
    const std::vector<std::string>& t = sh_.tensor_axes;
    const std::string mx = b_.Step(ProgramBuilder::Named(pre + "head/max", "pmax",
                                         {b_.Reduce(pre + "head/max_local", "max_reduce", logits, {2}, true)}, t));
    const std::string shifted = b_.Op(pre + "head/shifted", "sub", {logits, mx});
    const std::string e = b_.Op(pre + "head/exp", "exp", {shifted});
    const std::string se = b_.Psum(pre + "head/sum_exp", b_.Reduce(pre + "head/sum_exp_local", "sum", e, {2}, true), t);
    const std::string lse = b_.Op(pre + "head/log_sum_exp", "log", {se});
    hv->targets = MicroBatch(pre, "targets", m);
    const std::string tl = b_.Psum(pre + "head/target_logit",
                                b_.Reduce(pre + "head/target_logit_local", "sum",
                                       b_.Mul(pre + "head/target_picked", shifted, hv->targets), {2}, true), t);
    // softmax over the whole vocabulary, this rank's columns: exp(shifted - lse).
    hv->p = b_.Op(pre + "head/probs", "exp", {b_.Op(pre + "head/log_probs", "sub", {shifted, lse})});
    const std::string token_loss = b_.Op(pre + "head/token_loss", "sub", {lse, tl});
    std::string loss = b_.Reduce(pre + "head/loss_local", "sum", token_loss, {}, false);
    if (pp_) loss = b_.Mul(pre + "head/loss_masked", loss, is_last_);
    return loss;
  }

  // The backward of the head from the loss (mean over every token of the global batch); returns dx (zero off the
  // last stage).
  std::string HeadBackward(const std::string& pre, const HeadValues& hv) {
    const double inv_tokens = 1.0 / static_cast<double>(d_.B * d_.S);
    std::string dl = b_.Op(pre + "head/dlogits_unscaled", "sub", {hv.p, hv.targets});
    dl = b_.Op(pre + "head/dlogits_mean", "mul", {dl}, inv_tokens);
    if (pp_) dl = b_.Mul(pre + "head/dlogits", dl, is_last_);
    if (c_.tied_embeddings) {
      Accumulate("embed", b_.Einsum(pre + "head/dembed_local", "bsd,bsv->vd", {hv.H, dl}));
    } else {
      Accumulate("head", b_.Einsum(pre + "head/dhead_local", "bsd,bsv->dv", {hv.H, dl}));
    }
    const std::string eq = c_.tied_embeddings ? "bsv,vd->bsd" : "bsv,dv->bsd";
    const std::string dhp = b_.Einsum(pre + "head/dx_partial", eq, {dl, OutputWeight()});
    const std::string dh = b_.ReduceTensor(pre + "head/dx", dhp);
    NormGrads g = layers_.NormBackward(pre + "final_norm/", dh, hv.n, "final_norm.scale");
    layers_.AccumulateNorm("final_norm.", g);
    return g.dx;
  }

  void EmbedBackward(const std::string& pre, const std::string& dx, int64_t m) {
    std::string d = pp_ ? b_.Mul(pre + "embed/dx_first_stage", dx, is_first_) : dx;
    const std::string D = b_.GatherSeq(pre + "embed/dx", d);
    Accumulate("embed", b_.Einsum(pre + "embed/dembed_local", "bsv,bsd->vd", {MicroBatch(pre, "tokens", m), D}));
    if (!Rope()) Accumulate("positions", b_.Reduce(pre + "embed/dpositions_local", "sum", d, {0}, false));
  }

  std::string Ppermute(const std::string& name, const std::string& x, bool forward) {
    ProgramStep s = ProgramBuilder::Named(name, "ppermute", {x}, c_.parallel.pipeline_axes);
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
        x = recv.empty() ? emb : b_.Add(pre + "stage_input", b_.Mul(pre + "embed_first_stage", emb, is_first_), recv);
      } else {
        x = recv;
      }
      for (int64_t j = 0; j < d_.layers_per_stage; ++j) {
        x = layers_.Forward(fmt::format("{}l{}/", pre, j), j, x, &layer_values_[t][j]);
      }
      if (t >= P - 1) losses.push_back(HeadForward(pre, x, t - (P - 1), &head_values_[t]));
      if (pp_ && t + 1 < T) recv = Ppermute(pre + "send", x, true);
    }
    std::string total = losses[0];
    for (size_t i = 1; i < losses.size(); ++i) total = b_.Add(fmt::format("fwd/loss_sum{}", i), total, losses[i]);
    std::vector<std::string> axes = sh_.batch_axes;
    axes.insert(axes.end(), c_.parallel.pipeline_axes.begin(), c_.parallel.pipeline_axes.end());
    const std::string summed = b_.Psum("fwd/loss_sum", total, axes);
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
        dx = recv.empty() ? dh : b_.Add(pre + "stage_grad", dh, recv);
      } else {
        dx = recv;
      }
      for (int64_t j = d_.layers_per_stage - 1; j >= 0; --j) {
        dx = layers_.Backward(fmt::format("{}l{}/", pre, j), j, dx, layer_values_[tf][j]);
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
    return b_.Psum(name, local, axes);
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
      Output(b_.Psum("grad/positions", grads_.at("positions"), axes), PositionsSpec(), {{"grad/positions"}, false});
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
      for (const WeightShape& w : WeightsOf(j)) {
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
            g = b_.Step(ProgramBuilder::Named(name + "_tensor_pmean", "pmean", {g}, sh_.tensor_axes));
          }
          g = b_.Psum(name, g, ReplicatedGradAxes(w));
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
  ModelDims d_;
  bool pp_ = false;
  LayerOps ops_;          // the layers' ops, as the simulated step prices them (model/layer_ops.h)
  LayerProgram layers_;   // the layers' program steps, from ops_
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
