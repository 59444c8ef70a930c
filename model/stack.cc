// The software stacks' figures (model/stack.h; sources in docs/model.md, "Software stacks").
#include "model/stack.h"

#include <cctype>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace spmdsim {
namespace {

// Host time of one eager PyTorch kernel launch: NVIDIA/dgxc-benchmarking
// microbenchmarks/cpu_overhead (pytorch_kernel_launch_latency.py: back-to-back torch.matmul of tiny matrices,
// one synchronize at the end; its example output: 11.3 us for 4x4, 12.9-17.7 us up to 512x512). The smallest is
// the launch alone.
constexpr double kEagerLaunchSeconds = 11.3e-6;

// Fused kernels (Transformer Engine / Megatron's fused kernels / XLA fusions): one pass in, one pass out.
constexpr KernelPasses kFusedNormForward{2, 0, 1};      // read x, write y
constexpr KernelPasses kFusedNormBackward{3, 0, 1};     // read x and dy, write dx
// Per element of the [T, f] hidden activation (gate and up are each [T, f]).
constexpr KernelPasses kFusedSwigluForward{3, 0, 1};    // read gate and up, write their product
constexpr KernelPasses kFusedSwigluBackward{5, 0, 1};   // read gate, up, dy; write dgate, dup
constexpr KernelPasses kGeluForward{2, 0, 1};
constexpr KernelPasses kGeluBackward{3, 0, 1};
constexpr KernelPasses kFusedRope{2, 0, 1};             // read, write each rotated element
constexpr KernelPasses kResidualAdd{3, 0, 1};           // read two, write one (bias and dropout fused where used)
// Megatron's vocabulary-parallel cross-entropy: the logits cast to fp32 and ~5 fp32 passes (max, exp, sum,
// normalise); backward softmax - one-hot from fp32 to the dtype.
constexpr KernelPasses kCrossEntropyForward{1, 20, 5};
constexpr KernelPasses kCrossEntropyBackward{1, 4, 1};

// Eager PyTorch, as Hugging Face's Llama modules and torchtitan's composite nn.RMSNorm run it.
// RMSNorm: x.to(fp32) [2 in, 4 out], pow(2) [4, 4], mean [4], + eps, rsqrt (tiny), x * rsqrt [4, 4],
// .to(bf16) [4, 2], weight * [2, 2]: 4 dtype passes, 28 fp32 bytes, 8 kernels; its autograd backward runs the
// mirror ops plus the two broadcasting products' reductions: ~6 passes, 60 fp32 bytes, 12 kernels.
constexpr KernelPasses kEagerRmsNormForward{4, 28, 8};
constexpr KernelPasses kEagerRmsNormBackward{6, 60, 12};
// SwiGLU: F.silu(gate) [2 passes] then * up [3 passes]: 5 per hidden element; backward: the product's two
// gradients [3 + 3] and silu's [3]: 9 passes, 3 kernels.
constexpr KernelPasses kEagerSwigluForward{5, 0, 2};
constexpr KernelPasses kEagerSwigluBackward{9, 0, 3};
// Rotary (apply_rotary_pos_emb): rotate_half's neg [0.5 + 0.5] and cat [1 + 1], x * cos [2], rotated * sin [2],
// the sum [3]: 10 passes, 5 kernels; the backward likewise.
constexpr KernelPasses kEagerRope{10, 0, 5};

// The memory-bound kernels a fused stack runs (Transformer Engine / Megatron's fused kernels, XLA's fusions): one
// pass in and one out per op, the cross-entropy as Megatron's; each stack below starts from these.
StackSpec FusedKernels(SoftwareStack stack) {
  StackSpec s;
  s.stack = stack;
  s.norm_forward = kFusedNormForward;
  s.norm_backward = kFusedNormBackward;
  s.swiglu_forward = kFusedSwigluForward;
  s.swiglu_backward = kFusedSwigluBackward;
  s.gelu_forward = kGeluForward;
  s.gelu_backward = kGeluBackward;
  s.rope_forward = kFusedRope;
  s.rope_backward = kFusedRope;
  s.residual_forward = kResidualAdd;
  s.residual_backward = kResidualAdd;
  s.cross_entropy_forward = kCrossEntropyForward;
  s.cross_entropy_backward = kCrossEntropyBackward;
  return s;
}

StackSpec MegatronSpec() {
  StackSpec s = FusedKernels(SoftwareStack::kMegatron);
  s.host_launch_seconds = kEagerLaunchSeconds;
  s.attention = AttentionKernel::kCudnn;
  s.grad_reduce_bytes = 2;  // Megatron-Core DistributedDataParallelConfig.grad_reduce_in_fp32 = False
  s.weight_gather_bytes = 0;
  s.fp8_casts = true;
  s.optimizer_extra_bytes = 4;  // zero_grad_buffer: the fp32 main-gradient buffer zeroed every step
  s.lowp_copy = true;           // _copy_main_params_to_model_params
  s.source = "Megatron-Core / NeMo with Transformer Engine: fused layernorm-linear, bias-activation and "
             "bias-dropout-add kernels, fused rotary embedding, cuDNN fused attention (NVTE_FUSED_ATTN), "
             "gradients reduced in bf16 (megatron/core/distributed/distributed_data_parallel_config.py), "
             "Transformer Engine's fp8 casts; eager PyTorch launches (dgxc-benchmarking cpu_overhead)";
  return s;
}

StackSpec PytorchFsdpSpec() {
  // Unfused where Hugging Face's and torchtitan's modules are composite; GELU, the residual add and the
  // cross-entropy as the fused stacks run them.
  StackSpec s = FusedKernels(SoftwareStack::kPytorchFsdp);
  s.host_launch_seconds = kEagerLaunchSeconds;
  s.norm_forward = kEagerRmsNormForward;
  s.norm_backward = kEagerRmsNormBackward;
  s.swiglu_forward = kEagerSwigluForward;
  s.swiglu_backward = kEagerSwigluBackward;
  s.rope_forward = kEagerRope;
  s.rope_backward = kEagerRope;
  s.attention = AttentionKernel::kFlashAttention2;
  s.grad_reduce_bytes = 4;    // torchtitan's mixed_precision_reduce = "float32"
  s.weight_gather_bytes = 0;  // MixedPrecision param_dtype bf16: the shards are cast before the all-gather
  s.fp8_casts = false;
  s.source = "PyTorch FSDP in eager mode: Hugging Face / torchtitan modules (composite RMSNorm, SwiGLU and "
             "rotary embedding, one kernel per op), SDPA's FlashAttention-2 backend, fp32 gradient "
             "reduce-scatter (torchtitan mixed_precision_reduce), bf16 weight all-gathers; eager launches "
             "(dgxc-benchmarking cpu_overhead)";
  return s;
}

StackSpec MaxTextSpec() {
  StackSpec s = FusedKernels(SoftwareStack::kMaxText);
  s.host_launch_seconds = 0;
  s.attention = AttentionKernel::kCompiled;
  s.grad_reduce_bytes = 4;    // MaxText base.yml weight_dtype: float32 (the gradients are fp32)
  s.weight_gather_bytes = 0;  // Flax casts the fp32 shard to the bf16 dtype before GSPMD's all-gather
  s.fp8_casts = false;
  s.source = "JAX / XLA as MaxText runs it (MaxText/configs/base.yml: weight_dtype float32, scan_layers True): "
             "one compiled program (no host launches), XLA's elementwise fusions; GSPMD reduces each scanned "
             "layer's gradient inside the loop body (reduce-scatter over the shard axes, all-reduce over the "
             "replicas), overlapped with the next layer's backward";
  return s;
}

StackSpec MegatronDeepSpeed2022Spec() {
  // Megatron-LM's fused kernels of 2022 (apex fused layer norm, fused bias-GeLU, bias-dropout-add, scaled masked
  // softmax), no Transformer Engine; DeepSpeed's PipelineEngine (deepspeed/runtime/pipe/engine.py, schedule.py,
  // p2p.py) runs the pipeline: p2p.send / p2p.recv are synchronous (dist.send / recv, or a broadcast in a
  // two-rank group) of the stage's whole output tensor, and after the last backward of the step the schedule
  // issues ReduceTiedGrads (the tied embedding's all-reduce between the first and last stage), ReduceGrads (with
  // bf16, BF16_Optimizer's fp32 gradient accumulators all-reduced over the data ranks in buffers of
  // MEMORY_OPT_ALLREDUCE_SIZE) and OptimizerStep, one after the other.
  StackSpec s = FusedKernels(SoftwareStack::kMegatronDeepSpeed2022);
  s.host_launch_seconds = kEagerLaunchSeconds;
  s.attention = AttentionKernel::kFlashAttention2;  // where a model asks for flash attention: no cuDNN then
  s.grad_reduce_bytes = 4;                          // BF16_Optimizer's fp32 gradients
  s.weight_gather_bytes = 0;
  s.fp8_casts = false;
  s.optimizer_extra_bytes = 4;  // clear_hp_grads: the fp32 gradient accumulators zeroed every step
  s.lowp_copy = true;           // update_lp_params: fp32 weights copied into the bf16 ones
  s.blocking_p2p = true;
  s.full_pipeline_activations = true;
  s.grad_reduce_after_flush = true;
  s.source = "Megatron-DeepSpeed as of 2022: Megatron-LM's fused kernels without Transformer Engine, DeepSpeed's "
             "pipeline engine (blocking send / recv of whole activations; the tied embedding and fp32 data-parallel "
             "gradient all-reduces after the pipeline flush, not overlapped), BF16_Optimizer; eager launches";
  return s;
}

}  // namespace

SoftwareStack ParseStack(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (const std::optional<SoftwareStack> s = ParseName(kSoftwareStackNames, lower)) return *s;
  Throw(ErrorCode::kInvalidArgument, "unknown stack '{}'; valid: {}", name,
        fmt::join(NamesOf(kSoftwareStackNames), ", "));
}

SoftwareStack DefaultStack(const Topology& topology) {
  return topology.platform() == Platform::kGpu ? SoftwareStack::kMegatron : SoftwareStack::kMaxText;
}

SoftwareStack ResolveStack(SoftwareStack stack, const Topology& topology) {
  return stack == SoftwareStack::kAuto ? DefaultStack(topology) : stack;
}

StackChoice ChooseStack(SoftwareStack requested, const Topology& topology, const StackParallelism& p) {
  if (requested != SoftwareStack::kAuto) return {requested, "set by the model's stack:"};
  if (topology.platform() != Platform::kGpu)
    return {SoftwareStack::kMaxText, "auto: not a GPU topology, so JAX / XLA as MaxText runs it"};
  if (p.zero_stage >= 3 && p.zero_ranks > 1 && p.tensor == 1 && p.pipeline == 1)
    return {SoftwareStack::kPytorchFsdp,
            "auto: ZeRO-3 over the data ranks without tensor or pipeline parallelism on GPUs is PyTorch FSDP's "
            "layout (FULL_SHARD / fully_shard)"};
  return {SoftwareStack::kMegatron,
          "auto: GPUs with this parallelism run Megatron-Core (the stack NVIDIA publishes its DGX results with)"};
}

const StackSpec& StackSpecFor(SoftwareStack stack) {
  // Built on first use (thread-safe local statics), so no other file's static initialisation can see them unset.
  static const StackSpec megatron = MegatronSpec(), pytorch_fsdp = PytorchFsdpSpec(), maxtext = MaxTextSpec(),
                         megatron_deepspeed_2022 = MegatronDeepSpeed2022Spec();
  switch (stack) {
    case SoftwareStack::kMegatronDeepSpeed2022: return megatron_deepspeed_2022;
    case SoftwareStack::kMegatron: return megatron;
    case SoftwareStack::kPytorchFsdp: return pytorch_fsdp;
    case SoftwareStack::kMaxText: return maxtext;
    case SoftwareStack::kAuto: break;
  }
  SPMDSIM_CHECK(false, "StackSpecFor needs a resolved stack");
  return megatron;
}

}  // namespace spmdsim
