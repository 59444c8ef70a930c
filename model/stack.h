// The software stack a model is trained with: how the step's ops become kernels, who launches them, and what
// the stack's own kernels and collectives cost (docs/model.md, "Software stacks"). The same model and
// parallelism runs at different speeds under Megatron-Core / NeMo with Transformer Engine, PyTorch FSDP in eager
// mode, and JAX / XLA (MaxText); each figure below comes from the stack's source or a published microbenchmark,
// cited in StackSpecFor's comments and in docs/model.md.
//
// Example: const StackSpec& s = StackSpecFor(SoftwareStack::kPytorchFsdp);
//          s.norm_forward.bytes_per_element(2) == 36 (HF RMSNorm in eager PyTorch: eight kernels)
// Thread safety: immutable tables; safe to use from any thread.
#ifndef SPMDSIM_MODEL_STACK_H_
#define SPMDSIM_MODEL_STACK_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/enum_names.h"
#include "mesh/topology.h"

namespace spmdsim {

enum class SoftwareStack {
  kAuto,         // the stack a user of the topology most likely runs (DefaultStack)
  kMegatron,     // Megatron-Core / NeMo with Transformer Engine (fused kernels, cuDNN attention, fp8 casts)
  kPytorchFsdp,  // PyTorch FSDP, eager: kernels launched from the host, unfused norms and activations
  kMaxText,      // JAX / XLA as MaxText runs it: one compiled program, XLA's fusions
  // Megatron-DeepSpeed as run in 2022 (BLOOM era): Megatron-LM's fused kernels under DeepSpeed's pipeline engine
  // (blocking transfers of whole activations, gradients all-reduced in fp32 after the pipeline flush).
  kMegatronDeepSpeed2022,
};

// The stacks' names, as a scenario file and `--stack` write them (common/enum_names.h).
inline constexpr EnumName<SoftwareStack> kSoftwareStackNames[] = {
    {SoftwareStack::kAuto, "auto"},
    {SoftwareStack::kMegatron, "megatron"},
    {SoftwareStack::kPytorchFsdp, "pytorch-fsdp"},
    {SoftwareStack::kMaxText, "maxtext"},
    {SoftwareStack::kMegatronDeepSpeed2022, "megatron-deepspeed-2022"}};
inline std::string_view StackName(SoftwareStack stack) { return NameOf(kSoftwareStackNames, stack); }
// A name of kSoftwareStackNames, in any case; throws Error(kInvalidArgument) naming the valid names for anything
// else.
SoftwareStack ParseStack(std::string_view name);
// GPU topologies: kMegatron (the stack NVIDIA publishes its DGX training results with); TPU and CPU: kMaxText.
SoftwareStack DefaultStack(const Topology& topology);
// `stack` itself, or DefaultStack when it is kAuto.
SoftwareStack ResolveStack(SoftwareStack stack, const Topology& topology);

// The parallelism `auto` looks at: ZeRO's stage and shard ranks (data x context), tensor and pipeline degrees.
struct StackParallelism {
  int zero_stage = 0;
  int64_t zero_ranks = 1;
  int64_t tensor = 1, pipeline = 1;
};

// The stack a model is priced with and why, as the reports print it.
struct StackChoice {
  SoftwareStack stack = SoftwareStack::kMegatron;
  std::string reason;  // "set by the model's stack:" or what `auto` saw
};

// `requested` itself, or for kAuto: on GPUs PyTorch FSDP where the parallelism is FSDP's (ZeRO-3 over more than
// one rank, no tensor or pipeline parallelism: Megatron-Core shards that way only beside TP / PP, PyTorch FSDP
// and DeepSpeed ZeRO-3 alone), else Megatron-Core; MaxText on TPUs and CPUs. DefaultStack where the parallelism
// says nothing.
// Example: ChooseStack(kAuto, dgx-h100:8, {.zero_stage = 3, .zero_ranks = 8}).stack == kPytorchFsdp.
StackChoice ChooseStack(SoftwareStack requested, const Topology& topology, const StackParallelism& parallelism);

// The HBM traffic and kernel count of one memory-bound op of the layer, per element of its tensor (the
// activations it normalises / activates / rotates). Bytes are `dtype_passes` passes of the activation dtype plus
// `fp32_bytes` of float32 intermediates (eager PyTorch upcasts).
struct KernelPasses {
  double dtype_passes = 0;
  double fp32_bytes = 0;
  int kernels = 1;
  double bytes_per_element(double dtype_size) const { return dtype_passes * dtype_size + fp32_bytes; }
};

// How the stack runs flash attention (the kernel and so its measured rate).
enum class AttentionKernel {
  kCudnn,            // Transformer Engine's fused attention (cuDNN), the device's measured rates
  kFlashAttention2,  // PyTorch SDPA's flash backend (FlashAttention-2)
  kCompiled,         // XLA / Pallas on TPU: the attention matmuls at the matrix rate
};

struct StackSpec {
  SoftwareStack stack = SoftwareStack::kMegatron;
  // Host time to launch one kernel (eager PyTorch's dispatch + launch); 0 where one compiled program runs.
  double host_launch_seconds = 0;
  KernelPasses norm_forward, norm_backward;      // RMSNorm (LayerNorm is one fused kernel in every stack)
  KernelPasses swiglu_forward, swiglu_backward;  // per element of the [T, f] hidden activation
  KernelPasses gelu_forward, gelu_backward;
  KernelPasses rope_forward, rope_backward;      // per rotated element (q and k)
  KernelPasses residual_forward, residual_backward;  // residual add (with bias and dropout where fused)
  KernelPasses cross_entropy_forward, cross_entropy_backward;  // per logit
  AttentionKernel attention = AttentionKernel::kCudnn;
  // Bytes per parameter of the data-parallel gradient reduction (fp32 4, bf16 2) and of ZeRO-3 / FSDP weight
  // all-gathers (0: the compute dtype's size).
  double grad_reduce_bytes = 4;
  double weight_gather_bytes = 0;
  // Transformer Engine's fp8 recipe (fp8 dtypes only): the casts of activations, gradients and weights are
  // priced as memory-bound kernels (docs/model.md, "fp8").
  bool fp8_casts = false;
  // Bytes per parameter the stack's optimizer step moves beyond AdamW itself (fused: read fp32 weight,
  // gradient, m, v; write weight, m, v: 28) and the gradient norm (one read: 4): Megatron zeroes its fp32
  // main-gradient buffer each step (write 4) and copies the updated fp32 weights into its low-precision model
  // weights (read 4 + write the dtype: `lowp_copy`). An fp16 step also unscales the gradients and checks them
  // for infinities (read + write 4), in every stack (loss scaling).
  double optimizer_extra_bytes = 0;
  bool lowp_copy = false;
  // How the stack's pipeline and data-parallel steps run (DeepSpeed's pipeline engine, 2022):
  // `blocking_p2p`: every send and receive waits for its transfer (ModelStepOptions::blocking_p2p; a model's
  // parallel.pipeline_transfers overrides it); `full_pipeline_activations`: each tensor rank sends the whole
  // [T, h] activation (no scatter over the tensor ranks; with sequence parallelism it is split anyway);
  // `grad_reduce_after_flush`: the data-parallel gradients are all-reduced once, after the last micro-batch's
  // backward has finished on the stage, instead of layer by layer beside the backward.
  bool blocking_p2p = false;
  bool full_pipeline_activations = false;
  bool grad_reduce_after_flush = false;
  std::string_view source;
};

// REQUIRES: stack != kAuto.
const StackSpec& StackSpecFor(SoftwareStack stack);

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_STACK_H_
