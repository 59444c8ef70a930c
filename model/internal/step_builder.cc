// StepBuilder: the devices' programs of one optimizer step in Megatron-LM's pipeline order
// (model/internal/step_builder.h; docs/model.md, "The program of one device").
#include "model/internal/step_builder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "model/accounting.h"

namespace spmdsim::internal {

StepBuilder::StepBuilder(const ValidatedModel& model, const ModelStepOptions& options)
    : c_(model.config()), mesh_(model.mesh()), d_(model.degrees()), pricer_(model, options), ops_(model),
      layout_(PipelineLayerLayout(c_, d_.pipeline)) {
  reduced_ = options.reduced && options.speed_factors.empty();
  // The options force blocking transfers (the validation's Megatron-LM of 2022); else the model's
  // parallel.pipeline_transfers, else the stack's own.
  const PipelineTransfers transfers = c_.parallel.pipeline_transfers;
  blocking_p2p_ = options.blocking_p2p || transfers == PipelineTransfers::kBlocking ||
                  (transfers == PipelineTransfers::kStack && pricer_.stack().blocking_p2p);
  after_flush_ = pricer_.stack().grad_reduce_after_flush && c_.parallel.zero_stage <= 1;
  speed_factors_ = options.speed_factors;
  for (const auto& [id, factor] : speed_factors_) {
    if (!(factor > 0) || !std::isfinite(factor))
      Throw(ErrorCode::kInvalidArgument, "model '{}': speed factor of device {} must be > 0, got {}", c_.name, id,
            factor);
  }
}

std::vector<int64_t> StepBuilder::SimulatedPositions() const {
  std::vector<int64_t> out;
  for (int64_t pos = 0; pos < mesh_.size(); ++pos) {
    if (!reduced_ || IsRepresentative(pos)) out.push_back(pos);
  }
  return out;
}

bool StepBuilder::IsRepresentative(int64_t pos) const {
  const std::vector<std::string>& pipeline = c_.parallel.pipeline_axes;
  for (const std::string& axis : mesh_.axis_names()) {
    const bool along_pipeline = std::find(pipeline.begin(), pipeline.end(), axis) != pipeline.end();
    if (!along_pipeline && mesh_.IndexInGroup(pos, std::vector<std::string>{axis}) != 0) return false;
  }
  return true;
}

std::unique_ptr<StepTimeline> StepBuilder::Build() {
  pricer_.Prepare(SimulatedPositions(), reduced_);
  pipeline_groups_ = mesh_.PositionGroups(c_.parallel.pipeline_axes);
  for (size_t i = 0; i < pricer_.simulated().size(); ++i) BuildDevice(static_cast<int64_t>(i));
  return pricer_.TakeTimeline();
}

std::unique_ptr<StepTimeline> StepBuilder::BuildLayer(bool backward, bool moe) {
  reduced_ = true;
  pricer_.Prepare({SimulatedPositions().front()}, reduced_);
  pricer_.SetDevice(0, 1.0);
  int64_t layer = 0;
  while (layer + 1 < c_.layers && ops_.moe(layer) != moe) ++layer;
  pricer_.RunOps(backward ? ops_.Backward(layer) : ops_.Forward(layer), layer);
  pricer_.WaitPrefetchedGather();
  return pricer_.TakeTimeline();
}

void StepBuilder::BuildDevice(int64_t device) {
  device_ = device;
  const int64_t position = pricer_.simulated()[static_cast<size_t>(device)];
  const auto factor = speed_factors_.find(mesh_.DeviceAt(position));
  pricer_.SetDevice(device, factor == speed_factors_.end() ? 1.0 : factor->second);
  pending_grads_.clear();
  unacknowledged_.clear();
  received_paired_ = false;
  prev_ = Neighbour(device, -1);
  next_ = Neighbour(device, +1);
  const int64_t stage = mesh_.IndexInGroup(position, c_.parallel.pipeline_axes);
  const std::vector<PipelineTask> order =
      PipelineOrder(c_.parallel.schedule, d_.pipeline, stage, d_.micro_batches, c_.parallel.virtual_stages);
  const bool pairs = blocking_p2p_ && c_.parallel.virtual_stages > 1;
  for (size_t i = 0; i < order.size(); ++i) {
    if (!order[i].forward) {
      BackwardTask(order[i], stage);
      continue;
    }
    const bool paired = pairs && i + 1 < order.size() && !order[i + 1].forward;
    ForwardTask(order[i], stage, paired ? &order[i + 1] : nullptr);
  }
  Optimizer(stage);
}

// --- pipeline transfers ---

int64_t StepBuilder::Neighbour(int64_t device, int64_t delta) const {
  const int64_t pos = pricer_.simulated()[static_cast<size_t>(device)];
  const int64_t stage = mesh_.IndexInGroup(pos, c_.parallel.pipeline_axes);
  const int64_t target = (stage + delta + d_.pipeline) % d_.pipeline;
  const std::vector<int64_t>& group =
      pipeline_groups_[static_cast<size_t>(mesh_.GroupOf(pos, c_.parallel.pipeline_axes))];
  return pricer_.index_of()[static_cast<size_t>(group[static_cast<size_t>(target)])];
}

double StepBuilder::PipelineSendSeconds() {
  if (!pipe_seconds_) {
    // Megatron sends the activations split over the tensor ranks (SP shards them anyway; without SP its
    // scatter-gather optimisation does): [T / t, h] per rank. DeepSpeed's pipeline engine sends the whole
    // output tensor of the stage (StackSpec::full_pipeline_activations): [T, h] without SP.
    const LayerShapes& s = ops_.shapes();
    const bool whole = pricer_.stack().full_pipeline_activations && !c_.parallel.sequence_parallel;
    const double bytes = s.Act() * s.act_size / (whole ? 1 : d_.tensor);
    std::vector<std::pair<int, int>> pairs;
    for (int64_t i = 0; i + 1 < d_.pipeline; ++i) pairs.emplace_back(static_cast<int>(i), static_cast<int>(i + 1));
    pipe_seconds_ = pricer_.PermuteSeconds(pricer_.roles().pipeline.axes, bytes, pairs);
  }
  return *pipe_seconds_;
}

int64_t StepBuilder::Tag(bool forward, int64_t micro_batch, int64_t virtual_stage) const {
  return ((forward ? 0 : 1) * d_.micro_batches + micro_batch) * (d_.pipeline * c_.parallel.virtual_stages) +
         virtual_stage;
}

bool StepBuilder::IsForwardTag(int64_t tag) const {
  return tag < d_.micro_batches * d_.pipeline * c_.parallel.virtual_stages;
}

// Pipeline transfers. Blocking (Megatron 2022): the receiver acknowledges each message (a 0 s send back) and
// the sender waits for the acknowledgements at its next exchange, after the receives that open its next task:
// Megatron batches a step's sends with the next receives in one batch_isend_irecv and waits for all
// (1F1B: send_forward_recv_backward, send_backward_recv_forward). The interleaved schedule's steady state runs
// a forward and a backward, then exchanges once for the next pair
// (send_forward_backward_recv_forward_backward): the pair's backward receives with its forward (ForwardTask's
// `paired`). The sender resumes when the receiver has the data.
void StepBuilder::SendActivations(int64_t peer, int64_t tag) {
  pricer_.Emit(TimelineOp::Send(peer, tag, PipelineSendSeconds(), kPipelineComm),
               IsForwardTag(tag) ? "send activations" : "send gradients");
  if (blocking_p2p_) unacknowledged_.emplace_back(peer, tag);
}

void StepBuilder::ReceiveActivations(int64_t peer, int64_t tag) {
  pricer_.Emit(TimelineOp::Recv(peer, tag, kPipelineComm),
               IsForwardTag(tag) ? "receive activations" : "receive gradients");
  if (blocking_p2p_) pricer_.Emit(TimelineOp::Send(peer, AckTag(tag), 0, kPipelineComm), "acknowledge");
}

void StepBuilder::AwaitAcknowledgements() {
  for (const auto& [peer, tag] : unacknowledged_)
    pricer_.Emit(TimelineOp::Recv(peer, AckTag(tag), kPipelineComm), "await acknowledgement");
  unacknowledged_.clear();
}

// --- the tasks ---

// A forward task: receive the activations (or embed), the chunk's layers, send them on (or the loss: on the last
// stage, after the MTP modules). `paired`: in blocking mode with virtual stages, the backward task that follows
// this forward one in the schedule's steady state: its receive joins this task's exchange (see SendActivations).
void StepBuilder::ForwardTask(const PipelineTask& task, int64_t stage, const PipelineTask* paired) {
  const int64_t p = d_.pipeline, v = c_.parallel.virtual_stages;
  const int64_t vstage = task.chunk * p + stage, last = p * v - 1;
  const LayerRange chunk = layout_[static_cast<size_t>(vstage)];
  pricer_.SetLabelContext(kForward, task.micro_batch, task.chunk);
  if (vstage > 0) ReceiveActivations(prev_, Tag(true, task.micro_batch, vstage));
  if (paired != nullptr) {
    const int64_t paired_vstage = paired->chunk * p + stage;
    if (paired_vstage < last) ReceiveActivations(next_, Tag(false, paired->micro_batch, paired_vstage));
    received_paired_ = true;
  }
  AwaitAcknowledgements();
  if (vstage == 0) pricer_.RunOps(ops_.EmbeddingForward(), -1);
  for (int64_t i = 0; i < chunk.count; ++i) pricer_.RunOps(ops_.Forward(chunk.first + i), chunk.first + i);
  if (vstage < last) {
    SendActivations(next_, Tag(true, task.micro_batch, vstage + 1));
    return;
  }
  for (int64_t k = 0; k < c_.mtp_layers; ++k) MtpForward(k);
  pricer_.RunOps(ops_.LossForward(), -1);
}

// A backward task: receive the gradient (or the loss backward), the layers in reverse, each with its recompute,
// then their gradients' reduction after the last micro-batch, send the gradient back (or the embedding backward).
void StepBuilder::BackwardTask(const PipelineTask& task, int64_t stage) {
  const int64_t p = d_.pipeline, v = c_.parallel.virtual_stages;
  const int64_t vstage = task.chunk * p + stage, last = p * v - 1;
  const LayerRange chunk = layout_[static_cast<size_t>(vstage)];
  pricer_.SetLabelContext(kBackward, task.micro_batch, task.chunk);
  if (received_paired_) {
    received_paired_ = false;  // received at the forward's exchange
  } else {
    if (vstage < last) ReceiveActivations(next_, Tag(false, task.micro_batch, vstage));
    AwaitAcknowledgements();
  }
  const bool last_micro_batch = task.micro_batch == d_.micro_batches - 1;
  // ZeRO-2/3 keep only their shard of the gradients: reduce-scatter after every micro-batch. A stack that
  // reduces after the flush does it in the optimizer step instead.
  const bool reduce = !after_flush_ && (last_micro_batch || c_.parallel.zero_stage >= 2);
  if (vstage == last) {
    pricer_.RunOps(ops_.LossBackward(), -1);
    for (int64_t k = c_.mtp_layers - 1; k >= 0; --k) MtpBackward(k, reduce);
  }
  for (int64_t i = chunk.count - 1; i >= 0; --i) {
    const int64_t layer = chunk.first + i;
    pricer_.RunOps(ops_.Backward(layer), layer);
    const bool moe = ops_.moe(layer);
    if (reduce) StartGradientReduction(LayerParamsPerDevice(c_, d_, moe), ExpertParamsPerDevice(c_, d_, moe));
  }
  if (vstage > 0) SendActivations(prev_, Tag(false, task.micro_batch, vstage - 1));
  else pricer_.RunOps(ops_.EmbeddingBackward(), -1);
  if (reduce && last_micro_batch && (vstage == 0 || vstage == last))
    StartGradientReduction(VocabParamsPerDevice(c_, d_), 0);
}

// Multi-token prediction module k on the last stage (Megatron-Core MultiTokenPredictionLayer): its inputs
// (LayerOps::MtpInputForward), one layer shaped like the model's last, then its own final norm, logits and loss
// through the shared output layer.
void StepBuilder::MtpForward(int64_t k) {
  pricer_.RunOps(ops_.MtpInputForward(), -1);
  pricer_.RunOps(ops_.Forward(c_.layers + k), c_.layers + k);
  pricer_.RunOps(ops_.LossForward(), -1);
}

void StepBuilder::MtpBackward(int64_t k, bool reduce) {
  pricer_.RunOps(ops_.LossBackward(), -1);
  pricer_.RunOps(ops_.Backward(c_.layers + k), c_.layers + k);
  pricer_.RunOps(ops_.MtpInputBackward(), -1);
  if (reduce) {
    double experts = 0;
    const double params = MtpParamsPerDevice(c_, d_, &experts);
    StartGradientReduction(params, experts);
  }
}

// --- gradients and the optimizer ---

// Data-parallel gradient reduction of one layer's gradients, started as soon as the last micro-batch's
// backward produced them (Megatron's overlap_grad_reduce), in the stack's gradient dtype (model/stack.h
// grad_reduce_bytes): all-reduce, or reduce-scatter with ZeRO >= 1 (distributed optimizer). Dense gradients
// reduce over data and context ranks (hybrid sharding: reduce-scatter over ZeRO's axes, then all-reduce over the
// replicas), the routed experts' (`experts` of the `params`) over the ranks holding the same experts
// (Megatron-Core's expert data-parallel group).
void StepBuilder::StartGradientReduction(double params, double experts) {
  const StepRoles& r = pricer_.roles();
  const double bytes = pricer_.stack().grad_reduce_bytes;
  if (r.dp_and_cp.size > 1) ReduceDenseGradients((params - experts) * bytes);
  const bool whole = c_.parallel.zero_stage == 0 || after_flush_;
  const CollectiveOp op = whole ? CollectiveOp::kAllReduce : CollectiveOp::kReduceScatter;
  if (experts > 0 && r.expert_dp.size > 1)
    pending_grads_.push_back(pricer_.Start(r.expert_dp, op, experts * bytes, kDataComm, 1));
}

void StepBuilder::ReduceDenseGradients(double bytes) {
  const StepRoles& r = pricer_.roles();
  if (c_.parallel.zero_stage == 0 || after_flush_) {
    pending_grads_.push_back(pricer_.Start(r.dp_and_cp, CollectiveOp::kAllReduce, bytes, kDataComm, 1));
    return;
  }
  if (r.zero.size > 1)
    pending_grads_.push_back(pricer_.Start(r.zero, CollectiveOp::kReduceScatter, bytes, kDataComm, 1));
  if (r.replicas.size > 1)
    pending_grads_.push_back(pricer_.Start(r.replicas, CollectiveOp::kAllReduce, bytes / r.zero.size, kDataComm, 1));
}

// The tied embedding's two copies (first and last stage, p > 1) summed once the stage's backward is done: an
// all-reduce of the pair (Megatron-Core finalize_model_grads' _allreduce_word_embedding_grads, DeepSpeed's
// ReduceTiedGrads), priced as the pair's exchange of the gradient shard, which both wait for.
void StepBuilder::ReduceTiedEmbedding(int64_t stage) {
  const int64_t p = d_.pipeline;
  if (!c_.tied_embeddings || p < 2 || (stage != 0 && stage != p - 1)) return;
  const double bytes = VocabParamsPerDevice(c_, d_) * pricer_.stack().grad_reduce_bytes;
  const double seconds = pricer_.PermuteSeconds(pricer_.roles().pipeline.axes, bytes,
                                                {{0, static_cast<int>(p - 1)}, {static_cast<int>(p - 1), 0}});
  const int64_t peer = stage == 0 ? prev_ : next_;
  const int64_t base = 2 * d_.micro_batches * p * c_.parallel.virtual_stages;  // past every activation tag
  pricer_.Emit(TimelineOp::Send(peer, base + (stage == 0 ? 0 : 1), seconds, kDataComm), "tied embedding all-reduce");
  pricer_.Emit(TimelineOp::Recv(peer, base + (stage == 0 ? 1 : 0), kDataComm), "tied embedding all-reduce");
}

// Parameters of one device of the stage (its layers, embedding / output copies and MTP modules), and of them the
// routed experts'.
std::pair<double, double> StepBuilder::StageParams(int64_t stage) const {
  const int64_t p = d_.pipeline;
  double params = 0, experts = 0;
  for (size_t k = static_cast<size_t>(stage); k < layout_.size(); k += static_cast<size_t>(p)) {
    for (int64_t i = 0; i < layout_[k].count; ++i) {
      const bool moe = ops_.moe(layout_[k].first + i);
      params += LayerParamsPerDevice(c_, d_, moe);
      experts += ExpertParamsPerDevice(c_, d_, moe);
    }
  }
  if (stage == 0) params += VocabParamsPerDevice(c_, d_);
  if (stage == p - 1) {
    params += VocabParamsPerDevice(c_, d_);
    double mtp_experts = 0;
    params += c_.mtp_layers * MtpParamsPerDevice(c_, d_, &mtp_experts);
    experts += c_.mtp_layers * mtp_experts;
  }
  return {params, experts};
}

void StepBuilder::Optimizer(int64_t stage) {
  pricer_.SetLabelContext(kOptimizer, -1, 0);
  AwaitAcknowledgements();
  pricer_.WaitPrefetchedGather();
  for (int64_t h : pending_grads_) pricer_.Wait(h, kDataComm);
  pending_grads_.clear();
  ReduceTiedEmbedding(stage);
  const auto [params, experts] = StageParams(stage);
  if (after_flush_) {
    // After the flush, on the critical path: the stage's whole gradients all-reduced over the data ranks (with
    // ZeRO-1 too: BF16_Optimizer reduces them whole, then updates its shard).
    StartGradientReduction(params, experts);
    for (int64_t h : pending_grads_) pricer_.Wait(h, kDataComm);
    pending_grads_.clear();
  }
  const StepRoles& r = pricer_.roles();
  const bool sharded = c_.parallel.zero_stage >= 1;
  const double shard = sharded ? (params - experts) / static_cast<double>(r.zero.size) +
                                     experts / static_cast<double>(r.expert_dp.size)
                               : params;
  // AdamW, fused: read fp32 master weight, gradient, m, v; write master, m, v; one read of the gradients for
  // the global norm (clipping); fp16 loss scaling unscales and checks the gradients (read + write); the
  // stack's own passes (model/stack.h optimizer_extra_bytes, lowp_copy).
  const StackSpec& stack = pricer_.stack();
  const double bytes_per_param = 4 * 4 + 3 * 4 + 4 + (c_.dtype == DType::kF16 ? 8 : 0) +
                                 stack.optimizer_extra_bytes + (stack.lowp_copy ? 4 + ops_.shapes().act_size : 0);
  pricer_.Compute("adamw", pricer_.compute().Cost(10 * shard, shard * bytes_per_param, ContractionDims{}, DType::kF32),
                  kOptimizer);
  if (sharded && c_.parallel.zero_stage < 3) {  // updated weights back to every rank
    const double gather = pricer_.WeightGatherBytes();
    if (r.zero.size > 1) pricer_.Collective(r.zero, CollectiveOp::kAllGather, (params - experts) * gather, kDataComm);
    if (r.expert_dp.size > 1 && experts > 0)
      pricer_.Collective(r.expert_dp, CollectiveOp::kAllGather, experts * gather, kDataComm);
  }
}

}  // namespace spmdsim::internal
