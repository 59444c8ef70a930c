// The software stacks (model/stack.h): their names, defaults and figures, and what each does to the predicted
// step of the same model and parallelism.
#include "model/stack.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "mesh/mesh_utils.h"
#include "model/calibration.h"
#include "model/model.h"
#include "tests/model/small_model.h"

namespace spmdsim {
namespace {

using testing_model::MeshOn;

TEST(SoftwareStack, NamesParseAndTheDefaultFollowsThePlatform) {
  for (SoftwareStack s : {SoftwareStack::kAuto, SoftwareStack::kMegatron, SoftwareStack::kPytorchFsdp,
                          SoftwareStack::kMaxText, SoftwareStack::kMegatronDeepSpeed2022})
    EXPECT_EQ(ParseStack(StackName(s)), s);
  EXPECT_EQ(StackName(SoftwareStack::kMegatronDeepSpeed2022), "megatron-deepspeed-2022");
  EXPECT_EQ(ParseStack("PyTorch-FSDP"), SoftwareStack::kPytorchFsdp);
  try {
    ParseStack("deepspeed");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), ::testing::HasSubstr("valid: auto, megatron, pytorch-fsdp, maxtext"));
  }
  EXPECT_EQ(DefaultStack(Topology::Parse("dgx-h100:1")), SoftwareStack::kMegatron);
  EXPECT_EQ(DefaultStack(Topology::Parse("tpu-v5e:4x4")), SoftwareStack::kMaxText);
  EXPECT_EQ(ResolveStack(SoftwareStack::kPytorchFsdp, Topology::Parse("tpu-v5e:4x4")), SoftwareStack::kPytorchFsdp);
}

TEST(SoftwareStack, FiguresComeFromEachStacksSource) {
  const StackSpec& megatron = StackSpecFor(SoftwareStack::kMegatron);
  const StackSpec& fsdp = StackSpecFor(SoftwareStack::kPytorchFsdp);
  const StackSpec& maxtext = StackSpecFor(SoftwareStack::kMaxText);
  // Eager PyTorch launches each kernel from the host (dgxc-benchmarking cpu_overhead: 11.3 us); XLA runs one
  // compiled program.
  EXPECT_DOUBLE_EQ(fsdp.host_launch_seconds, 11.3e-6);
  EXPECT_DOUBLE_EQ(maxtext.host_launch_seconds, 0);
  // Hugging Face's RMSNorm in eager PyTorch: eight kernels, 4 bf16 passes and 28 fp32 bytes per element.
  EXPECT_EQ(fsdp.norm_forward.kernels, 8);
  EXPECT_DOUBLE_EQ(fsdp.norm_forward.bytes_per_element(2), 36);
  EXPECT_DOUBLE_EQ(megatron.norm_forward.bytes_per_element(2), 4);
  // Gradient reduction dtypes: Megatron-Core's grad_reduce_in_fp32 = False; torchtitan's float32 reduce.
  EXPECT_EQ(megatron.grad_reduce_bytes, 2);
  EXPECT_EQ(fsdp.grad_reduce_bytes, 4);
  EXPECT_TRUE(megatron.fp8_casts);
  EXPECT_FALSE(fsdp.fp8_casts);
  EXPECT_EQ(fsdp.attention, AttentionKernel::kFlashAttention2);
}

// The same Llama-style model with FSDP on one DGX H100: eager PyTorch (unfused RMSNorm, SwiGLU and rotary, host
// launches, FlashAttention-2, fp32 gradient reduce-scatter) is slower than Megatron-Core with Transformer Engine.
TEST(SoftwareStack, EagerFsdpIsSlowerThanMegatronOnTheSameModel) {
  ModelConfig c = testing_model::SmallModel();
  c.parallel = {.data_axes = {"data"}, .zero_stage = 3};
  const Mesh mesh = MeshOn("dgx-h100:1", {{"data", 8}});
  c.stack = SoftwareStack::kMegatron;
  const ModelStepTimes megatron = PredictModelStep(ValidateModel(c, mesh));
  c.stack = SoftwareStack::kPytorchFsdp;
  const ModelStepTimes fsdp = PredictModelStep(ValidateModel(c, mesh));
  EXPECT_GT(fsdp.step_seconds, 1.05 * megatron.step_seconds);
  EXPECT_GT(fsdp.compute_by_phase.at("forward"), megatron.compute_by_phase.at("forward"));
  EXPECT_GT(fsdp.comm_by_kind.at("data"), megatron.comm_by_kind.at("data"));  // fp32 reduce-scatter
}

// FSDP without resharding after the forward gathers each layer's weights once per micro-batch instead of twice
// (forward and backward); the gradient reduce-scatter is the same: less data-parallel time, more than half of it.
TEST(SoftwareStack, FsdpKeepingWeightsFromForwardToBackwardGathersOnce) {
  ModelConfig c = testing_model::SmallModel();
  c.stack = SoftwareStack::kPytorchFsdp;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 3};
  const Mesh mesh = MeshOn("dgx-h100:2", {{"data", 16}});
  const ModelStepTimes full_shard = PredictModelStep(ValidateModel(c, mesh));
  c.parallel.reshard_after_forward = false;
  const ModelStepTimes shard_grad_op = PredictModelStep(ValidateModel(c, mesh));
  EXPECT_LT(shard_grad_op.comm_by_kind.at("data"), full_shard.comm_by_kind.at("data"));
  EXPECT_GT(shard_grad_op.comm_by_kind.at("data"), 0.5 * full_shard.comm_by_kind.at("data"));
}

// Host launches: a model of tiny layers launched from the host waits on the host; the same model compiled
// (maxtext) does not.
TEST(SoftwareStack, TinyKernelsWaitForTheHostInEagerStacks) {
  ModelConfig c = LlamaModel(256, 4, 4, 4, 512, 128);
  c.global_batch = 1;
  const Mesh mesh = MeshOn("gpu:1x1", {{"data", 1}});
  c.stack = SoftwareStack::kPytorchFsdp;
  const ModelStepTimes eager = PredictModelStep(ValidateModel(c, mesh));
  c.stack = SoftwareStack::kMaxText;
  const ModelStepTimes compiled = PredictModelStep(ValidateModel(c, mesh));
  EXPECT_GT(eager.host_wait_seconds, 0);
  EXPECT_EQ(compiled.host_wait_seconds, 0);
  EXPECT_GT(eager.step_seconds, compiled.step_seconds);
}

// Transformer Engine's fp8 casts are priced: the same fp8 layer on the megatron stack (casts) and with the cast
// passes removed (maxtext prices fp8 GEMMs without a cast recipe) differ by at least the casts' HBM traffic.
TEST(SoftwareStack, TransformerEngineFp8CastsCostTime) {
  ModelConfig c = testing_model::SmallModel();
  c.dtype = DType::kF8E4M3FN;
  c.parallel = {.tensor_axes = {"tensor"}, .sequence_parallel = true};
  const Mesh mesh = MeshOn("dgx-h100:1", {{"tensor", 8}});
  c.stack = SoftwareStack::kMegatron;
  const ModelLayerTimes te = PredictModelLayer(ValidateModel(c, mesh));
  c.stack = SoftwareStack::kMaxText;
  const ModelLayerTimes no_casts = PredictModelLayer(ValidateModel(c, mesh));
  // Forward: QKV, projection, FC1, FC2 inputs ([T, h], [T, q], [T, h], [T, f]) cast with their transposes (read
  // 2 bytes, write 1 + 1 per element) at the measured streaming rate, minus what the host launches hide.
  const double T = 2048, h = 2048, q = 2048.0 / 8, f = 5632.0 / 8;
  const double forward_casts = 4 * T * (h + q + h + f) / 2.97e12;
  EXPECT_GT(te.forward_seconds - no_casts.forward_seconds, 0.9 * forward_casts);
  EXPECT_GT(te.backward_seconds, no_casts.backward_seconds);
}

// Hybrid sharding: ZeRO over the slice axis only; gradients reduce-scatter inside the slice and all-reduce the
// shard across slices over DCN, which grows with the slice count.
TEST(SoftwareStack, HybridShardingReducesAcrossSlicesOverDcn) {
  ModelConfig c = testing_model::SmallModel();
  c.stack = SoftwareStack::kMaxText;
  c.recompute = Recompute::kFull;
  c.parallel = {.data_axes = {"dcn", "fsdp"}, .zero_stage = 3, .zero_axes = {"fsdp"}};
  auto mesh_of = [](int slices) {
    auto topology = std::make_shared<const Topology>(Topology::Parse("tpu-v5e:4x4", slices));
    return MakeDeviceMesh(topology, {{"dcn", 1}, {"fsdp", 16}}, {{"dcn", slices}, {"fsdp", 1}});
  };
  // The same work per device: 2 sequences per device per step.
  c.global_batch = 32;
  const ValidatedModel one = ValidateModel(c, mesh_of(1));
  c.global_batch = 128;
  const ValidatedModel four = ValidateModel(c, mesh_of(4));
  EXPECT_EQ(four.degrees().zero, 16);
  EXPECT_EQ(four.degrees().data, 64);
  EXPECT_GT(PredictModelStep(four).comm_by_kind.at("data"), PredictModelStep(one).comm_by_kind.at("data"));
  ModelConfig bad = c;
  bad.parallel.zero_axes = {"pipe"};
  EXPECT_THROW(ValidateModel(bad, mesh_of(1)), Error);
}

// `auto` on GPUs: PyTorch FSDP where the parallelism is FSDP's (ZeRO-3 over the data ranks, no TP or PP),
// Megatron-Core otherwise; MaxText off GPUs; an explicit stack is kept. The step says which and why.
TEST(SoftwareStack, AutoPicksPytorchFsdpWhereTheParallelismIsFsdpAndSaysWhy) {
  const Topology gpu = Topology::Parse("dgx-h100:1");
  EXPECT_EQ(ChooseStack(SoftwareStack::kAuto, gpu, {.zero_stage = 3, .zero_ranks = 8}).stack,
            SoftwareStack::kPytorchFsdp);
  EXPECT_EQ(ChooseStack(SoftwareStack::kAuto, gpu, {.zero_stage = 3, .zero_ranks = 2, .tensor = 4}).stack,
            SoftwareStack::kMegatron);
  EXPECT_EQ(ChooseStack(SoftwareStack::kAuto, gpu, {.zero_stage = 3, .zero_ranks = 4, .pipeline = 2}).stack,
            SoftwareStack::kMegatron);
  EXPECT_EQ(ChooseStack(SoftwareStack::kAuto, gpu, {.zero_stage = 1, .zero_ranks = 8}).stack,
            SoftwareStack::kMegatron);
  EXPECT_EQ(ChooseStack(SoftwareStack::kAuto, Topology::Parse("tpu-v5e:4x4"), {.zero_stage = 3, .zero_ranks = 16})
                .stack,
            SoftwareStack::kMaxText);
  const StackChoice explicit_choice = ChooseStack(SoftwareStack::kMegatron, gpu, {.zero_stage = 3, .zero_ranks = 8});
  EXPECT_EQ(explicit_choice.stack, SoftwareStack::kMegatron);
  EXPECT_THAT(explicit_choice.reason, ::testing::HasSubstr("set by the model's stack:"));

  ModelConfig c = testing_model::SmallModel();
  c.parallel = {.data_axes = {"data"}, .zero_stage = 3};
  const Mesh mesh = MeshOn("dgx-h100:1", {{"data", 8}});
  const ModelStepTimes automatic = PredictModelStep(ValidateModel(c, mesh));
  EXPECT_EQ(automatic.stack, "pytorch-fsdp");
  EXPECT_THAT(automatic.stack_reason, ::testing::HasSubstr("ZeRO-3 over the data ranks"));
  c.stack = SoftwareStack::kPytorchFsdp;
  EXPECT_DOUBLE_EQ(PredictModelStep(ValidateModel(c, mesh)).step_seconds, automatic.step_seconds);
  c.stack = SoftwareStack::kAuto;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}};
  const ModelStepTimes megatron =
      PredictModelStep(ValidateModel(c, MeshOn("dgx-h100:1", {{"data", 2}, {"tensor", 4}})));
  EXPECT_EQ(megatron.stack, "megatron");
  EXPECT_THAT(megatron.stack_reason, ::testing::HasSubstr("auto: GPUs"));
}

// Megatron-DeepSpeed of 2022 (DeepSpeed's pipeline engine): blocking transfers of the whole activation, the fp32
// gradients all-reduced after the flush (exposed, not beside the backward), the tied embedding all-reduced. The
// same model on the megatron stack with its transfers made blocking too differs in those only (and the attention
// kernel, the same on a model without flash attention).
TEST(SoftwareStack, MegatronDeepSpeed2022BlocksTransfersAndReducesGradientsAfterTheFlush) {
  const StackSpec& ds = StackSpecFor(SoftwareStack::kMegatronDeepSpeed2022);
  EXPECT_TRUE(ds.blocking_p2p);
  EXPECT_TRUE(ds.full_pipeline_activations);
  EXPECT_TRUE(ds.grad_reduce_after_flush);
  EXPECT_EQ(ds.grad_reduce_bytes, 4);
  EXPECT_FALSE(ds.fp8_casts);

  ModelConfig c = GptModel(2048, 8, 16, 4 * 2048);
  c.flash_attention = false;
  c.global_batch = 16;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}, .pipeline_axes = {"pipe"}};
  const Mesh mesh = MeshOn("dgx-h100:4", {{"data", 4}, {"pipe", 2}, {"tensor", 4}});
  c.stack = SoftwareStack::kMegatronDeepSpeed2022;
  const ModelStepTimes ds2022 = PredictModelStep(ValidateModel(c, mesh));
  // The gradient all-reduce runs after the last backward: all of it exposed.
  EXPECT_GT(ds2022.comm_by_kind.at("data"), 0);
  EXPECT_NEAR(ds2022.exposed_by_kind.at("data"), ds2022.comm_by_kind.at("data"),
              0.05 * ds2022.comm_by_kind.at("data"));
  c.stack = SoftwareStack::kMegatron;
  c.parallel.pipeline_transfers = PipelineTransfers::kBlocking;
  const ModelStepTimes megatron = PredictModelStep(ValidateModel(c, mesh));
  // Megatron-Core reduces bf16 gradients layer by layer beside the backward: less of it, and less exposed.
  EXPECT_GT(ds2022.comm_by_kind.at("data"), 1.5 * megatron.comm_by_kind.at("data"));
  EXPECT_GT(ds2022.exposed_by_kind.at("data"), 1.5 * megatron.exposed_by_kind.at("data"));
  EXPECT_GT(ds2022.step_seconds, megatron.step_seconds);
  // Whole activations over the pipeline: t times the bytes of Megatron's scattered ones.
  EXPECT_GT(ds2022.comm_by_kind.at("pipeline"), 2 * megatron.comm_by_kind.at("pipeline"));

  // A scenario's parallel.pipeline_transfers overrides the stack: overlapped sends are never slower.
  c.stack = SoftwareStack::kMegatronDeepSpeed2022;
  c.parallel.pipeline_transfers = PipelineTransfers::kOverlapped;
  const ModelStepTimes overlapped = PredictModelStep(ValidateModel(c, mesh));
  EXPECT_LE(overlapped.step_seconds, ds2022.step_seconds);
  EXPECT_LT(overlapped.bubble_seconds, ds2022.bubble_seconds);
}

}  // namespace
}  // namespace spmdsim
