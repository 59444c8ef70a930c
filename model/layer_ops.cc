// Every op list of one model, made once from its ValidatedModel (model/layer_ops.h).
#include "model/layer_ops.h"

#include <algorithm>

#include "model/internal/layer_emitter.h"

namespace spmdsim {

double LayerShapes::Act() const { return static_cast<double>(tokens) * d_model; }

LayerOps::LayerOps(const ValidatedModel& model) : config_(model.config()) {
  const ModelConfig& c = config_;
  const ParallelDegrees& d = model.degrees();
  LayerShapes& s = shapes_;
  s.sp = c.parallel.sequence_parallel && d.tensor > 1;
  s.fp8 = c.dtype == DType::kF8E4M3FN || c.dtype == DType::kF8E5M2;
  s.act_dtype = s.fp8 ? DType::kBF16 : c.dtype;
  s.act_size = static_cast<double>(DTypeSize(s.act_dtype));
  s.tokens = c.micro_batch * c.seq / d.context;
  s.d_model = c.d_model;
  s.norm_tokens = s.sp ? static_cast<double>(s.tokens) / d.tensor : static_cast<double>(s.tokens);
  // One layer of each kind the model has: dense / MoE x global / windowed.
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    Lists& lists = lists_[Kind(layer)];
    if (!lists.forward.empty()) continue;
    internal::LayerEmitter(c, d, s, &lists.forward).LayerForward(layer, LayerPhase::kForward);
    internal::LayerEmitter(c, d, s, &lists.backward).LayerBackward(layer);
  }
  if (c.mtp_layers > 0 && lists_[Kind(c.layers)].forward.empty()) {
    Lists& lists = lists_[Kind(c.layers)];
    internal::LayerEmitter(c, d, s, &lists.forward).LayerForward(c.layers, LayerPhase::kForward);
    internal::LayerEmitter(c, d, s, &lists.backward).LayerBackward(c.layers);
  }
  internal::LayerEmitter(c, d, s, &embedding_forward_).EmbeddingForward();
  internal::LayerEmitter backward_embedding(c, d, s, &embedding_backward_);
  backward_embedding.set_phase(LayerPhase::kBackward);
  backward_embedding.EmbeddingBackward();
  internal::LayerEmitter(c, d, s, &loss_forward_).LossForward();
  internal::LayerEmitter backward_loss(c, d, s, &loss_backward_);
  backward_loss.set_phase(LayerPhase::kBackward);
  backward_loss.LossBackward();
  if (c.mtp_layers > 0) {
    internal::LayerEmitter(c, d, s, &mtp_forward_).MtpInputForward();
    internal::LayerEmitter backward_mtp(c, d, s, &mtp_backward_);
    backward_mtp.set_phase(LayerPhase::kBackward);
    backward_mtp.MtpInputBackward();
  }
}

bool LayerOps::moe(int64_t layer) const { return config_.is_moe_layer(std::min(layer, config_.layers - 1)); }

size_t LayerOps::Kind(int64_t layer) const {
  const ModelConfig& c = config_;
  const int64_t w = c.attention_window.window;
  const bool windowed = layer < c.layers && c.is_windowed_layer(layer) && w < c.seq;
  return (moe(layer) ? 1 : 0) + (windowed ? 2 : 0);
}

}  // namespace spmdsim
