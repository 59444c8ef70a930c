// LayerEmitter's feed-forward block: the dense MLP, or the routed experts and the shared experts
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

void LayerEmitter::FeedForwardForward(bool moe) {
  const bool folded = moe && c_.experts_over_tensor();
  if (!folded) EnterTp();
  if (moe) {
    MoeForward();
  } else {
    MlpMatmulsForward(static_cast<double>(tokens_), Ff(false));
  }
  if (!folded) LeaveTp();
}

void LayerEmitter::MlpMatmulsForward(double rows, double ff, double batch) {
  const bool experts = block_ == LayerBlock::kExperts;
  Linear(LayerOpId::kUp, experts ? "expert mlp up matmul" : "mlp up matmul", rows / batch, c_.d_model, FfIn(ff),
         batch);
  Activation(rows * ff);
  Linear(LayerOpId::kDown, experts ? "expert mlp down matmul" : "mlp down matmul", rows / batch, ff, c_.d_model,
         batch);
}

void LayerEmitter::ExpertMatmulsBackward(double rows, double ff, double batch) {
  Matmul(LayerOpId::kDown, kDgrad, "expert mlp down dgrad", rows / batch, c_.d_model, ff, batch);
  Matmul(LayerOpId::kDown, kWgrad, "expert mlp down wgrad", ff, rows / batch, c_.d_model, batch);
  Activation(rows * ff);
  Matmul(LayerOpId::kUp, kDgrad, "expert mlp up dgrad", rows / batch, FfIn(ff), c_.d_model, batch);
  Matmul(LayerOpId::kUp, kWgrad, "expert mlp up wgrad", c_.d_model, rows / batch, FfIn(ff), batch);
}

int32_t LayerEmitter::ExpertAllToAll(LayerOpId id) {
  return Start(id, LayerGroup::kExpert, CollectiveOp::kAllToAll, Rows() * c_.d_model * size_);
}

void LayerEmitter::MoeForward() {
  const double routed = RoutedTokens(), rows = Rows(), h = c_.d_model;
  const bool shared = c_.moe.shared_d_ff > 0, overlap = shared && c_.moe.shared_expert_overlap;
  Linear(LayerOpId::kRouter, "router", routed, h, static_cast<double>(c_.moe.experts));  // router logits
  Elementwise(LayerOpId::kPermute, "permute", routed * h + rows * h);                    // the rows by expert
  int32_t a2a = ExpertAllToAll(LayerOpId::kDispatch);
  if (overlap) SharedExpertForward(/*first_half=*/true);
  Wait(a2a);
  MlpMatmulsForward(rows, Ff(true), LocalExperts());  // grouped GEMM of the local experts
  a2a = ExpertAllToAll(LayerOpId::kCombine);
  if (overlap) SharedExpertForward(/*first_half=*/false);
  Wait(a2a);
  Elementwise(LayerOpId::kUnpermute, "unpermute", rows * h + routed * h);  // unpermute, weighted by the gates
  if (shared && !overlap) {
    SharedExpertForward(true);
    SharedExpertForward(false);
  }
}

void LayerEmitter::SharedExpertForward(bool first_half) {
  const double T = static_cast<double>(tokens_), ff = SharedFf();
  const bool folded = c_.experts_over_tensor();
  const uint8_t stream = c_.moe.shared_expert_overlap ? 1 : 0;
  block_ = LayerBlock::kSharedExperts;
  if (first_half) {
    if (folded) EnterTp(stream);
    Linear(LayerOpId::kUp, "shared expert up matmul", T, c_.d_model, FfIn(ff));
    Activation(T * ff);
  } else {
    Linear(LayerOpId::kDown, "shared expert down matmul", T, ff, c_.d_model);
    if (folded) LeaveTp(stream);
  }
  block_ = LayerBlock::kExperts;
}

void LayerEmitter::SharedExpertBackward(bool second_matmul) {
  const double T = static_cast<double>(tokens_), ff = SharedFf();
  const bool folded = c_.experts_over_tensor();
  const uint8_t stream = c_.moe.shared_expert_overlap ? 1 : 0;
  block_ = LayerBlock::kSharedExperts;
  if (second_matmul) {
    if (folded && sp_) Collective(LayerOpId::kSeqGather, CollectiveOp::kAllGather, Act() * size_, stream);
    Matmul(LayerOpId::kDown, kDgrad, "shared expert down dgrad", T, c_.d_model, ff);
    Matmul(LayerOpId::kDown, kWgrad, "shared expert down wgrad", ff, T, c_.d_model);
    Activation(T * ff);
  } else {
    Matmul(LayerOpId::kUp, kDgrad, "shared expert up dgrad", T, FfIn(ff), c_.d_model);
    Matmul(LayerOpId::kUp, kWgrad, "shared expert up wgrad", c_.d_model, T, FfIn(ff));
    if (folded) LeaveTp(stream);  // the input gradient's reduce-scatter (SP) / all-reduce
  }
  block_ = LayerBlock::kExperts;
}

void LayerEmitter::MlpBackward(bool moe) {
  if (!moe) {
    const double T = static_cast<double>(tokens_), ff = Ff(false);
    Matmul(LayerOpId::kDown, kDgrad, "mlp down dgrad", T, c_.d_model, ff);
    Matmul(LayerOpId::kDown, kWgrad, "mlp down wgrad", ff, T, c_.d_model);
    Activation(T * ff);
    ColumnParallelBackward(LayerOpId::kUp, "mlp up dgrad", "mlp up wgrad", T, FfIn(ff));
    return;
  }
  MoeBackward();
}

void LayerEmitter::MoeBackward() {
  const double routed = RoutedTokens(), rows = Rows(), h = c_.d_model;
  const bool folded = c_.experts_over_tensor(), shared = c_.moe.shared_d_ff > 0;
  const bool overlap = shared && c_.moe.shared_expert_overlap;
  Elementwise(LayerOpId::kUnpermute, "unpermute", routed * h + rows * h);  // unpermute's backward
  int32_t a2a = ExpertAllToAll(LayerOpId::kCombine);
  if (overlap) SharedExpertBackward(true);
  Wait(a2a);
  ExpertMatmulsBackward(rows, Ff(true), LocalExperts());
  a2a = ExpertAllToAll(LayerOpId::kDispatch);
  if (overlap) SharedExpertBackward(false);
  Wait(a2a);
  Elementwise(LayerOpId::kPermute, "permute", rows * h + routed * h);  // permute's backward
  const double experts = static_cast<double>(c_.moe.experts);
  Matmul(LayerOpId::kRouter, kDgrad, "router dgrad", routed, experts, h);
  Matmul(LayerOpId::kRouter, kWgrad, "router wgrad", h, routed, experts);
  if (shared && !overlap) {
    SharedExpertBackward(true);
    SharedExpertBackward(false);
  }
  // Beside experts split over the tensor ranks, the block's input gradient is a partial sum: as a column-parallel
  // layer's (the input re-gather under SP is the shared experts' and the routed rows', already counted).
  if (!folded && HasTensor()) Collective(LayerOpId::kTensorReduce, ReduceOp(), Act() * size_);
}

}  // namespace spmdsim::internal
