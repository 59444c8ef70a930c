#include "cost/compute_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim {
namespace {

// The tile-model tests price at the "maximum achievable" (burst) rates, whose figures they quote.
constexpr ComputeOptions kBurst{.clock = ClockRegime::kBurst};

TEST(DeviceComputeSpec, KnownDevicesHaveDocumentedFigures) {
  const DeviceComputeSpec* h100 = FindDeviceComputeSpec(Topology::Parse("dgx-h100:1").device_kind());
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->compute_units, 132);
  EXPECT_EQ(h100->fp8_flops, 1979e12);
  const DeviceComputeSpec* a100 = FindDeviceComputeSpec(Topology::Parse("dgx-a100:1").device_kind());
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->compute_units, 108);
  const DeviceComputeSpec* v5e = FindDeviceComputeSpec(Topology::Parse("tpu-v5e:2x2").device_kind());
  ASSERT_NE(v5e, nullptr);
  EXPECT_EQ(v5e->compute_units, 4);
  ASSERT_EQ(v5e->tiles.size(), 1u);
  EXPECT_EQ(v5e->tiles[0].n, 128);   // the MXU's width
  EXPECT_EQ(h100->tiles.size(), 8u);  // cuBLAS's tiles, 256x128 down to 64x64 (NVIDIA's matmul guide)
  EXPECT_EQ(a100->l2_bandwidth_Bps, 5120 * 1.41e9);
  for (const char* preset : {"tpu-v4:2x2x1", "tpu-v5p:2x2x1", "tpu-v6e:2x2"})
    EXPECT_NE(FindDeviceComputeSpec(Topology::Parse(preset).device_kind()), nullptr) << preset;
  EXPECT_EQ(FindDeviceComputeSpec("cpu"), nullptr);
}

TEST(ComputeModel, HeaderExampleOnH100) {
  ComputeModel model(Topology::Parse("dgx-h100:1"), {}, kBurst);
  const int64_t n = 4096;
  const double flops = 2.0 * n * n * n, bytes = 3.0 * n * n * 2;
  LocalOpCost cost = model.Cost(flops, bytes, {1, n, n, n}, DType::kBF16);
  // 256x128 tiles: 512 tiles in 4 waves of 132 SMs: 528 tile-times of 2*256*128*4096 FLOPs, at the best
  // measured matmul rate (792.1 of 989 TFLOPS), and each wave's 2.35 us of operand fill and output write.
  const double best = 792.1e12, wave = 2.35e-6;
  EXPECT_NEAR(model.spec()->matmul_fraction * 989e12, best, 1e3);
  EXPECT_NEAR(model.spec()->wave_overhead_seconds, wave, 1e-15);
  EXPECT_NEAR(cost.compute_seconds, 528 * 2.0 * 128 * 256 * 4096 / best + 4 * wave, 1e-12);
  EXPECT_NEAR(cost.compute_seconds * 1e6, 188.3, 0.1);
  EXPECT_NEAR(model.MatmulEfficiency(1, n, n, n), flops / cost.compute_seconds / 989e12, 1e-12);
  const MatmulTile* tile = model.ChosenTile(1, n, n, n);
  ASSERT_NE(tile, nullptr);
  EXPECT_EQ(tile->m * tile->n, 256 * 128);
  EXPECT_TRUE(cost.compute_bound);
  EXPECT_NEAR(cost.seconds, cost.compute_seconds + 1e-6, 1e-15);  // plus one kernel launch
}

TEST(ComputeModel, TileQuantisationChargesPartialTilesInFull) {
  ComputeModel model(Topology::Parse("dgx-a100:1"), {}, kBurst);
  const double best = model.spec()->matmul_fraction;  // 267.9 / 312
  EXPECT_NEAR(best, 267.9 / 312, 1e-12);
  // 108 matmuls of one 256x128 tile each: one full wave.
  EXPECT_NEAR(model.MatmulEfficiency(108, 256, 128, 1024), best, 1e-12);
  // n = 129: two 256x128 tiles per matmul (216: two waves), 129 of their 256 columns used.
  EXPECT_NEAR(model.MatmulEfficiency(108, 256, 129, 1024), best * 129.0 / 256.0, 1e-12);
}

TEST(ComputeModel, WaveQuantisationIdlesSmsInTheLastWave) {
  ComputeModel model(Topology::Parse("dgx-a100:1"), {}, kBurst);
  const double best = model.spec()->matmul_fraction;
  // 109 tiles of 256x128 on 108 SMs: two waves for 109 tiles' work (the matmul guide's example of a tail wave;
  // the large tiles fill a wave, so the library keeps them).
  EXPECT_NEAR(model.MatmulEfficiency(1, 256 * 109, 128, 4096), best * 109.0 / 216.0, 1e-12);
  EXPECT_NEAR(model.MatmulEfficiency(1, 256 * 216, 128, 4096), best, 1e-12);
  // Batched: 108 matmuls of one tile each fill one wave exactly.
  EXPECT_NEAR(model.MatmulEfficiency(108, 128, 256, 64), best, 1e-12);
}

TEST(ComputeModel, AMatmulTooSmallForAWaveOfLargeTilesUsesSmallerOnes) {
  ComputeModel model(Topology::Parse("dgx-a100:1"), {}, kBurst);
  // [256, 54 * 128]: 54 tiles of 256x128 would leave half of the 108 SMs idle; 108 tiles of 128x128 fill them.
  EXPECT_NEAR(model.MatmulEfficiency(1, 256, 54 * 128, 4096), model.spec()->matmul_fraction, 1e-12);
  const MatmulTile* tile = model.ChosenTile(1, 256, 54 * 128, 4096);
  ASSERT_NE(tile, nullptr);
  EXPECT_EQ(tile->m, 128);
  EXPECT_EQ(tile->n, 128);
  // The header's example on H100: 128x64 tiles, one wave, fed half as well as 256x128.
  ComputeModel h100(Topology::Parse("dgx-h100:1"), {}, kBurst);
  const double seconds = h100.Cost(2.0 * 256 * 4096 * 4096, 0, {1, 256, 4096, 4096}, DType::kBF16).compute_seconds;
  EXPECT_NEAR(seconds, 2.0 * 128 * 64 * 4096 / (792.1e12 / 132 * 0.5) + 2.35e-6, 1e-12);
  EXPECT_NEAR(seconds * 1e6, 24.7, 0.05);
}

// A tile loads (tile_m + tile_n) x tile_k operands per 2 tile_m tile_n tile_k FLOPs; on H100 (792 TFLOPS
// measured, 8986 GB/s of L2) a 128x128 tile is fed 64 / 85.3 = 0.75 as well as a 256x128 one, on A100 (268
// TFLOPS, 7219 GB/s) both are fully fed.
TEST(ComputeModel, SmallerTilesReuseLessAndStarveOnL2WhereTheMathIsFast) {
  ComputeModel h100(Topology::Parse("dgx-h100:1"), {}, kBurst);
  ComputeModel a100(Topology::Parse("dgx-a100:1"), {}, kBurst);
  // Half a wave of [128, 128] outputs: a 256x128 tile would waste half of itself, a 128x128 one runs at 0.75 of
  // the best rate on H100 and at the full rate on A100; half of the SMs are idle either way.
  // (H100's one wave also pays its 2.35 us of fill and write: the efficiencies are of the tile time alone.)
  const double h100_flops = 2.0 * 66 * 128 * 128 * 4096, wave = 2.35e-6;
  const auto tile_efficiency = [&](DType dtype, double peak) {
    const double seconds = h100.Cost(h100_flops, 0, {66, 128, 128, 4096}, dtype).compute_seconds - wave;
    return h100_flops / seconds / peak;
  };
  EXPECT_NEAR(tile_efficiency(DType::kBF16, 989e12), h100.spec()->matmul_fraction * 0.75 * 0.5, 1e-12);
  EXPECT_NEAR(a100.MatmulEfficiency(54, 128, 128, 4096), a100.spec()->matmul_fraction * 0.5, 1e-12);
  // 64x64 tiles (32 FLOP/B) starve on A100 too: 32 x 7219e9 / 267.9e12 = 0.862 of the best rate (a quarter wave).
  EXPECT_NEAR(a100.MatmulEfficiency(27, 64, 64, 4096),
              a100.spec()->matmul_fraction * 32 * 5120 * 1.41e9 / 267.9e12 * 0.25, 1e-12);
  // fp8 halves the bytes per operand; its best measured rate (1382.2 of 1979 TFLOPS) is a smaller fraction of its
  // peak than bf16's, so the 128x128 tile (128 FLOP/B) is fed 0.83 of its need and 256x128 fully.
  const double fp8_rate = 1382.2e12, l2 = 5120 * 1.755e9;
  EXPECT_NEAR(tile_efficiency(DType::kF8E4M3FN, 1979e12), fp8_rate / 1979e12 * (128 * l2 / fp8_rate) * 0.5, 1e-12);
}

TEST(ComputeModel, TpuPadsToTheMxu) {
  ComputeModel v5e(Topology::Parse("tpu-v5e:2x2"));
  const double best = v5e.spec()->matmul_fraction;  // XLA's measured 181.8 of 197 TFLOPS
  EXPECT_NEAR(best, 181.823 / 197, 1e-12);
  EXPECT_NEAR(v5e.MatmulEfficiency(1, 1024, 1024, 1024), best, 1e-12);
  EXPECT_NEAR(v5e.MatmulEfficiency(1, 1024, 64, 1024), 0.5 * best, 1e-12);   // half of each 128-wide MXU idle
  EXPECT_NEAR(v5e.MatmulEfficiency(1, 1024, 1024, 192), 0.75 * best, 1e-12);  // k padded to 256
  ComputeModel v6e(Topology::Parse("tpu-v6e:2x2"));
  EXPECT_NEAR(v6e.MatmulEfficiency(1, 1024, 128, 1024), 0.5, 1e-12);  // 256x256 MXUs
}

TEST(ComputeModel, MemoryBoundOpsRunAtHbmBandwidth) {
  ComputeModel model(Topology::Parse("dgx-h100:1"));
  // gelu over 1e8 bf16 elements: ~8 flops each on CUDA cores, 4e8 bytes at 3.35 TB/s.
  LocalOpCost cost = model.Cost(8e8, 4e8, {}, DType::kBF16);
  EXPECT_NEAR(cost.compute_seconds, 8e8 / 67e12, 1e-15);
  // At the measured BabelStream triad rate (2.97 of the datasheet's 3.35 TB/s), not the datasheet's.
  EXPECT_NEAR(cost.memory_seconds, 4e8 / 2.97e12, 1e-15);
  ComputeModel a100(Topology::Parse("dgx-a100:1"));
  EXPECT_NEAR(a100.Cost(8e8, 4e8, {}, DType::kBF16).memory_seconds, 4e8 / 1.70e12, 1e-15);
  EXPECT_FALSE(cost.compute_bound);
  EXPECT_NEAR(cost.seconds, cost.memory_seconds + 1e-6, 1e-15);
}

TEST(ComputeModel, Fp8UsesTheFp8PeakWhereTheDeviceHasOne) {
  ComputeModel h100(Topology::Parse("dgx-h100:1"), {}, kBurst);
  EXPECT_EQ(h100.MatrixPeak(DType::kF8E4M3FN), 1979e12);
  EXPECT_EQ(h100.MatrixPeak(DType::kBF16), 989e12);
  ComputeModel a100(Topology::Parse("dgx-a100:1"), {}, kBurst);
  EXPECT_EQ(a100.MatrixPeak(DType::kF8E5M2), 312e12);  // no fp8 units: the bf16 peak
  const int64_t n = 8192;
  const double flops = 2.0 * n * n * n;
  // Each at its best measured rate: fp8 1382.2 TFLOPS (Azure's cuBLASLt table), bf16 792.1 (MAMF), beside the
  // same 2.35 us per wave (16 waves of 256x128 tiles).
  const double waves = 16 * 2.35e-6;
  EXPECT_NEAR((h100.Cost(flops, 0, {1, n, n, n}, DType::kF8E4M3FN).compute_seconds - waves) * 1382.2 / 792.1,
              h100.Cost(flops, 0, {1, n, n, n}, DType::kBF16).compute_seconds - waves, 1e-9);
  // Without fp8 units, fp8 is a bf16 matmul.
  EXPECT_DOUBLE_EQ(a100.Cost(flops, 0, {1, n, n, n}, DType::kF8E5M2).compute_seconds,
                   a100.Cost(flops, 0, {1, n, n, n}, DType::kBF16).compute_seconds);
}

// Azure's cuBLASLt fp8 size sweep on one H100 (Azure/AI-benchmarking-guide, ND H100 v5 results: random data,
// 10,000 warm-up iterations): the tile model with its per-wave fill and write, at the burst rate, within 6% of
// every shape from 2048^3 up and of the skinny [802816, 768] x [768, 192]; the smallest (1024^3, one wave of a few
// microseconds) is 26% fast, what a kernel's fixed launch and setup cost beyond the 1 us launch leaves.
TEST(ComputeModel, H100Fp8MatmulsFollowAzuresSizeSweep) {
  ComputeModel h100(Topology::Parse("dgx-h100:1"), {}, kBurst);
  struct Shape {
    int64_t m, n, k;
    double tflops;
  };
  const Shape sweep[] = {{2048, 2048, 2048, 1011.3},    {4096, 4096, 4096, 1216.9},    {8192, 8192, 8192, 1290.1},
                         {16384, 16384, 16384, 1377.3}, {32768, 32768, 32768, 1382.2}, {6144, 12288, 12288, 1351.4},
                         {802816, 192, 768, 663.8}};
  for (const Shape& s : sweep) {
    const double flops = 2.0 * s.m * s.n * s.k;
    const double model = flops / h100.Cost(flops, 0, {1, s.m, s.n, s.k}, DType::kF8E4M3FN).seconds / 1e12;
    EXPECT_NEAR(model / s.tflops, 1.0, 0.06) << s.m << "x" << s.n << "x" << s.k << ": " << model;
  }
  const double small = 2.0 * kGiB;
  EXPECT_NEAR(small / h100.Cost(small, 0, {1, 1024, 1024, 1024}, DType::kF8E4M3FN).seconds / 1e12 / 274.1, 1.26,
              0.02);
}

TEST(ComputeModel, WithoutASpecItIsThePlainRoofline) {
  Topology cpu = Topology::Parse("cpu:2");
  ComputeModel model(cpu);
  Roofline roofline(cpu);
  LocalOpCost a = model.Cost(2e9, 3e6, {1, 1000, 1000, 1000}, DType::kF32, 0.5);
  LocalOpCost b = roofline.Cost(2e9, 3e6, DType::kF32, 0.5);
  EXPECT_DOUBLE_EQ(a.seconds, b.seconds);
  EXPECT_DOUBLE_EQ(a.compute_seconds, b.compute_seconds);
}

TEST(ComputeModel, EfficienciesAndSpeedFactorApply) {
  Topology h100 = Topology::Parse("dgx-h100:1");
  ComputeModel full(h100);
  ComputeModel half(h100, {.compute_efficiency = 0.5, .memory_efficiency = 1.0});
  const int64_t n = 4096;
  const double flops = 2.0 * n * n * n;
  EXPECT_NEAR(half.Cost(flops, 0, {1, n, n, n}, DType::kBF16).compute_seconds,
              2 * full.Cost(flops, 0, {1, n, n, n}, DType::kBF16).compute_seconds, 1e-15);
  EXPECT_NEAR(full.Cost(flops, 0, {1, n, n, n}, DType::kBF16, 0.5).seconds,
              2 * full.Cost(flops, 0, {1, n, n, n}, DType::kBF16).seconds, 1e-15);
  EXPECT_THROW(ComputeModel(h100, {.compute_efficiency = 0}), Error);
  EXPECT_THROW(full.Cost(-1, 0, {}, DType::kBF16), Error);
}

TEST(ComputeModel, ReshapeCostsNothing) {
  ComputeModel model(Topology::Parse("dgx-h100:1"));
  EXPECT_EQ(model.Cost(0, 0, {}, DType::kBF16).seconds, 0);
}

TEST(ComputeModel, FlashAttentionFlopsAndBytes) {
  ComputeModel model(Topology::Parse("tpu-v5e:2x2"));
  // b=2, 8 heads (2 KV heads), s=1024, d=128: tiles fill the MXUs exactly, so compute is the ideal FLOPs.
  LocalOpCost fwd = model.FlashAttention(2, 8, 2, 1024, 1024, 128, false, false, DType::kBF16);
  EXPECT_NEAR(fwd.compute_seconds, 4.0 * 2 * 8 * 1024 * 1024 * 128 / (197e12 * model.spec()->matmul_fraction), 1e-15);
  EXPECT_NEAR(fwd.memory_seconds, 2.0 * 2 * 128 * (8 * 1024 + 2 * 1024) * 2 / 819e9, 1e-15);
  LocalOpCost causal = model.FlashAttention(2, 8, 2, 1024, 1024, 128, true, false, DType::kBF16);
  EXPECT_NEAR(causal.compute_seconds, fwd.compute_seconds / 2, 1e-15);
  LocalOpCost bwd = model.FlashAttention(2, 8, 2, 1024, 1024, 128, false, true, DType::kBF16);
  EXPECT_NEAR(bwd.compute_seconds, 2.5 * fwd.compute_seconds, 1e-15);
  EXPECT_NEAR(bwd.memory_seconds, 2 * fwd.memory_seconds, 1e-15);
}

TEST(ComputeModel, FlashAttentionAtTheMeasuredRateOnH100) {
  ComputeModel h100(Topology::Parse("dgx-h100:1"), {}, kBurst);
  // NVIDIA's cuDNN measurements (TransformerEngine attention.ipynb): causal, head_dim 128, forward + backward.
  const double at_2k = 4.0 * 2 * 16 * 2048 * 2048 * 128 / 2 * 3.5 / 0.3664e-3 / 989e12;
  const double at_8k = 4.0 * 2 * 32 * 8192.0 * 8192 * 128 / 2 * 3.5 / 7.4875e-3 / 989e12;
  EXPECT_NEAR(at_2k, 0.332, 1e-3);
  EXPECT_NEAR(at_8k, 0.520, 1e-3);
  EXPECT_NEAR(h100.AttentionFraction(2048), at_2k, 1e-12);
  EXPECT_NEAR(h100.AttentionFraction(8192), at_8k, 1e-12);
  EXPECT_NEAR(h100.AttentionFraction(4096), (at_2k + at_8k) / 2, 1e-12);  // halfway in log2
  EXPECT_NEAR(h100.AttentionFraction(512), at_2k, 1e-12);                 // the end points outside
  EXPECT_NEAR(h100.AttentionFraction(32768), at_8k, 1e-12);
  // The notebook's first configuration reproduces its measured time.
  LocalOpCost fwd = h100.FlashAttention(2, 16, 16, 2048, 2048, 128, true, false, DType::kBF16);
  LocalOpCost bwd = h100.FlashAttention(2, 16, 16, 2048, 2048, 128, true, true, DType::kBF16);
  EXPECT_NEAR(fwd.compute_seconds + bwd.compute_seconds, 0.3664e-3, 1e-9);
  EXPECT_TRUE(fwd.compute_bound);
  // Devices without a measurement price the two matmuls with the tile model (A100: 4096 tiles of 256x128 in 38
  // waves of 108 SMs at 267.9 TFLOPS).
  ComputeModel a100(Topology::Parse("dgx-a100:1"), {}, kBurst);
  EXPECT_EQ(a100.AttentionFraction(2048), 0);
  LocalOpCost a = a100.FlashAttention(2, 16, 16, 2048, 2048, 128, false, false, DType::kBF16);
  EXPECT_NEAR(a.compute_seconds, 2 * 38 * 108 * 2.0 * 256 * 128 * 128 / 267.9e12, 1e-12);
}

// A training step runs at the power cap: the sustained figures (H200 SXM MSMF standing for H100 SXM: 708.5 bf16
// and 1288.7 fp8 TFLOPS; A100 cuBLAS on random data at its 400 W cap: 257 TFLOPS) are the default.
TEST(ComputeModel, SustainedIsTheDefaultAndBurstIsTheMaximumAchievable) {
  const Topology h100 = Topology::Parse("dgx-h100:1");
  ComputeModel sustained(h100), burst(h100, {}, kBurst);
  EXPECT_NEAR(sustained.MatmulFraction(DType::kBF16), 708.5 / 989, 1e-12);
  EXPECT_NEAR(sustained.MatmulFraction(DType::kF8E4M3FN), 1288.7 / 1979, 1e-12);
  EXPECT_NEAR(burst.MatmulFraction(DType::kBF16), 792.1 / 989, 1e-12);
  const int64_t n = 8192;
  const double flops = 2.0 * n * n * n;
  EXPECT_NEAR(sustained.Cost(flops, 0, {1, n, n, n}, DType::kBF16).compute_seconds /
                  burst.Cost(flops, 0, {1, n, n, n}, DType::kBF16).compute_seconds,
              792.1 / 708.5, 1e-9);
  // Attention, measured in bursts, runs at the settled clock (MSMF / MAMF on one H200: 708.5 / 841.9).
  EXPECT_NEAR(sustained.FlashAttention(2, 16, 16, 2048, 2048, 128, true, false, DType::kBF16).compute_seconds /
                  burst.FlashAttention(2, 16, 16, 2048, 2048, 128, true, false, DType::kBF16).compute_seconds,
              841.9 / 708.5, 1e-9);
  ComputeModel a100(Topology::Parse("dgx-a100:1"));
  EXPECT_NEAR(a100.MatmulFraction(DType::kBF16), 257.0 / 312, 1e-12);
  // Memory-bound work is not clock-bound.
  EXPECT_DOUBLE_EQ(sustained.Cost(1e6, 1e9, {}, DType::kBF16).memory_seconds,
                   burst.Cost(1e6, 1e9, {}, DType::kBF16).memory_seconds);
}

// The expected slowest of n devices paces a synchronous step: the node spread (4.5% over 40 samples) read as a
// normal with sigma = 4.5% / 4.322, Blom's expected minimum, and the 0.6% loss of a fully busy node.
TEST(ComputeModel, TheSlowestOfTheSynchronousDevicesPacesTheStep) {
  const Topology h100 = Topology::Parse("dgx-h100:1");
  ComputeModel one(h100), eight(h100, {}, {.synchronous_devices = 8}), many(h100, {}, {.synchronous_devices = 2048});
  EXPECT_EQ(one.pace(), 1.0);
  const double loss = 1 - 698.6 / 702.9, sigma = 0.045 / 4.322;
  EXPECT_NEAR(eight.pace(), (1 - loss) * (1 - sigma * 1.4297), 2e-4);  // Phi^-1(7.625 / 8.25)
  EXPECT_NEAR(many.pace(), (1 - loss) * (1 - sigma * 3.4340), 2e-4);   // Phi^-1(2047.625 / 2048.25)
  EXPECT_LT(many.pace(), eight.pace());
  const int64_t n = 4096;
  EXPECT_NEAR(eight.Cost(2.0 * n * n * n, 0, {1, n, n, n}, DType::kBF16).compute_seconds * eight.pace(),
              one.Cost(2.0 * n * n * n, 0, {1, n, n, n}, DType::kBF16).compute_seconds, 1e-12);
  EXPECT_EQ(ComputeModel(h100, {}, {.clock = ClockRegime::kBurst, .synchronous_devices = 8}).pace(), 1.0);
  EXPECT_THROW(ComputeModel(h100, {}, {.synchronous_devices = 0}), Error);
  EXPECT_THROW(ComputeModel(h100, {}, {.rate_scale = 0}), Error);
}

// Communication kernels hold SMs: a GEMM beside them recounts its waves on the SMs left (NVIDIA forum: a
// 132-tile GEMM beside a 24-CTA all_gather takes two waves instead of one); other compute scales with the SMs
// left; memory-bound work does not change.
TEST(ComputeModel, CommunicationKernelsTakeSmsFromTheWaves) {
  ComputeModel h100(Topology::Parse("dgx-h100:1"));
  EXPECT_EQ(h100.spec()->collective_units, 24);
  const ContractionDims one_wave{1, 256 * 11, 128 * 12, 4096};  // 132 tiles of 256x128
  const double flops = 2.0 * one_wave.m * one_wave.n * one_wave.k;
  const double alone = h100.Cost(flops, 0, one_wave, DType::kBF16).compute_seconds;
  EXPECT_NEAR(h100.Cost(flops, 0, one_wave, DType::kBF16, 1.0, 24).compute_seconds, 2 * alone, 1e-12);
  EXPECT_NEAR(h100.Cost(1e12, 0, {}, DType::kBF16, 1.0, 24).compute_seconds,
              h100.Cost(1e12, 0, {}, DType::kBF16).compute_seconds * 132 / 108, 1e-12);
  EXPECT_DOUBLE_EQ(h100.Cost(1e6, 1e9, {}, DType::kBF16, 1.0, 24).memory_seconds,
                   h100.Cost(1e6, 1e9, {}, DType::kBF16).memory_seconds);
}

TEST(ComputeModel, TpuV5eMatmulAtXlasMeasuredRate) {
  ComputeModel v5e(Topology::Parse("tpu-v5e:2x2")), v5p(Topology::Parse("tpu-v5p:2x2x1"));
  // XLA's jnp.matmul, bf16 8192^3 on v5e: 181.8 TFLOPS (JAX's Pallas TPU matmul notebook); v5p takes it.
  EXPECT_NEAR(v5e.MatmulEfficiency(1, 8192, 8192, 8192), 181.823 / 197, 1e-9);
  EXPECT_NEAR(v5p.MatmulFraction(DType::kBF16), 181.823 / 197, 1e-12);
}

}  // namespace
}  // namespace spmdsim
