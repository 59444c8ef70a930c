// The ops of one transformer layer, forward and backward, and of the embedding, loss and MTP inputs around the
// layers: one description per model, built once from its ValidatedModel, that the simulated step prices on its
// timeline (model/step.h) and the data run turns into program steps (workloads/internal/model_layer_program.h).
// docs/model.md, "One description of the layer".
//
// Each op says what it computes (`id`, in which `block`), in which phase of the step (forward, backward,
// recompute), and its shape: a matmul's [m, k] x [k, n] x batch, the fused attention core's heads and lengths, a
// memory-bound op's elements, a collective's op, group (tensor, context, expert, ZeRO) and bytes in nccl-tests'
// convention (cost/collective_model.h: the output of an all-gather, the input of the others). A collective is a
// kStart and a kWait: the ops between them run beside it (the step overlaps them; the data run computes it where
// its value is ready). Collectives over a group without axes are left out; one over axes of size 1 is kept (the
// data run's shard_map needs it, the step prices nothing for it).
//
// Example (Llama-style, TP 2 with SP, one layer's forward):
//   LayerOps ops(ValidateModel(config, mesh));
//   for (const LayerOp& op : ops.Forward(0)) ...   // norm, all_gather (start, wait), qkv matmul, rope,
//                                                  // flash attention, attention out matmul, reduce_scatter, ...
//   LayerOpFlops(ops.Forward(0)) == the layer's matrix FLOPs on one device for one micro-batch
//
// Thread safety: immutable after construction; safe to share between threads.
#ifndef SPMDSIM_MODEL_LAYER_OPS_H_
#define SPMDSIM_MODEL_LAYER_OPS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/layer_op.h"

namespace spmdsim {

// Every op list of one model. Layer `layer` >= layers is an MTP module's layer, shaped like the last one.
class LayerOps {
 public:
  explicit LayerOps(const ValidatedModel& model);

  // One layer's forward; its backward, the recompute it runs first included (phase kRecompute).
  const std::vector<LayerOp>& Forward(int64_t layer) const { return lists_[Kind(layer)].forward; }
  const std::vector<LayerOp>& Backward(int64_t layer) const { return lists_[Kind(layer)].backward; }
  // The embedding: lookup and its tensor reduction; backward: the scatter-add.
  const std::vector<LayerOp>& EmbeddingForward() const { return embedding_forward_; }
  const std::vector<LayerOp>& EmbeddingBackward() const { return embedding_backward_; }
  // Final norm, logits, vocabulary-parallel cross-entropy; backward: from the loss to the last layer's output.
  const std::vector<LayerOp>& LossForward() const { return loss_forward_; }
  const std::vector<LayerOp>& LossBackward() const { return loss_backward_; }
  // An MTP module's inputs (embedding, norms, concatenation, eh_proj), before its layer; backward: after it.
  const std::vector<LayerOp>& MtpInputForward() const { return mtp_forward_; }
  const std::vector<LayerOp>& MtpInputBackward() const { return mtp_backward_; }

  const LayerShapes& shapes() const { return shapes_; }
  bool moe(int64_t layer) const;  // whether layer `layer` (>= layers: MTP) has routed experts

 private:
  struct Lists {
    std::vector<LayerOp> forward, backward;
  };
  // 0..3: dense / MoE x global / windowed (a windowed layer's flash attention differs).
  size_t Kind(int64_t layer) const;

  ModelConfig config_;
  LayerShapes shapes_;
  std::array<Lists, 4> lists_;
  std::vector<LayerOp> embedding_forward_, embedding_backward_, loss_forward_, loss_backward_;
  std::vector<LayerOp> mtp_forward_, mtp_backward_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_LAYER_OPS_H_
