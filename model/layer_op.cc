// One op of a transformer layer: its FLOPs and names (model/layer_op.h).
#include "model/layer_op.h"

#include <iterator>

namespace spmdsim {

double FlashAttentionShape::Flops() const {
  return (backward ? 2.5 : 1.0) * 4.0 * static_cast<double>(batch) * static_cast<double>(heads) *
         static_cast<double>(q_len) * static_cast<double>(kv_len) * static_cast<double>(head_dim) / (causal ? 2 : 1);
}

double LayerOp::Flops() const {
  if (kind == LayerOpKind::kMatmul) return 2.0 * batch * m * k * n;
  if (kind == LayerOpKind::kFlashAttention) return attention.Flops();
  return 0;
}

double LayerOpFlops(const std::vector<LayerOp>& ops) {
  double sum = 0;
  for (const LayerOp& op : ops) sum += op.Flops();
  return sum;
}

std::string_view LayerOpIdName(LayerOpId id) {
  static constexpr std::string_view kNames[] = {
      "gather_weights", "fp8_cast", "norm", "residual", "seq_gather", "input_regather", "tensor_reduce",
      "tensor_gather", "qkv", "rope", "kv_gather", "kv_grad_scatter", "flash_attention", "scores", "softmax",
      "dropout", "values", "out", "mla_q_down", "mla_kv_down", "mla_q_up", "mla_kv_up", "mla_concat", "up",
      "activation", "down", "router", "permute", "dispatch", "combine", "unpermute", "embedding", "logits",
      "cross_entropy", "mtp_concat", "mtp_projection"};
  static_assert(std::size(kNames) == static_cast<size_t>(LayerOpId::kMtpProjection) + 1);
  return kNames[static_cast<size_t>(id)];
}

std::string_view LayerBlockName(LayerBlock block) {
  static constexpr std::string_view kNames[] = {"attention", "mlp", "experts", "shared_experts", "embedding",
                                                "loss", "mtp"};
  return kNames[static_cast<size_t>(block)];
}

std::string_view LayerPhaseName(LayerPhase phase) {
  static constexpr std::string_view kNames[] = {"forward", "backward", "recompute"};
  return kNames[static_cast<size_t>(phase)];
}

}  // namespace spmdsim
