#include "cost/compute_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {
namespace {

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
  EXPECT_EQ(v5e->tile_n, 128);
  for (const char* preset : {"tpu-v4:2x2x1", "tpu-v5p:2x2x1", "tpu-v6e:2x2"})
    EXPECT_NE(FindDeviceComputeSpec(Topology::Parse(preset).device_kind()), nullptr) << preset;
  EXPECT_EQ(FindDeviceComputeSpec("cpu"), nullptr);
}

TEST(ComputeModel, HeaderExampleOnH100) {
  ComputeModel model(Topology::Parse("dgx-h100:1"));
  const int64_t n = 4096;
  const double flops = 2.0 * n * n * n, bytes = 3.0 * n * n * 2;
  LocalOpCost cost = model.Cost(flops, bytes, {1, n, n, n}, DType::kBF16);
  // 512 tiles in 4 waves of 132 SMs: 528 tile-times of 2*128*256*4096 FLOPs, at the best measured matmul rate
  // (792.1 of 989 TFLOPS).
  const double best = 792.1e12;
  EXPECT_NEAR(model.spec()->matmul_fraction * 989e12, best, 1e3);
  EXPECT_NEAR(cost.compute_seconds, 528 * 2.0 * 128 * 256 * 4096 / best, 1e-12);
  EXPECT_NEAR(cost.compute_seconds * 1e6, 178.9, 0.1);
  EXPECT_NEAR(model.MatmulEfficiency(1, n, n, n), 512.0 / 528.0 * best / 989e12, 1e-12);
  EXPECT_TRUE(cost.compute_bound);
  EXPECT_NEAR(cost.seconds, cost.compute_seconds + 1e-6, 1e-15);  // plus one kernel launch
}

TEST(ComputeModel, TileQuantisationChargesPartialTilesInFull) {
  ComputeModel model(Topology::Parse("dgx-a100:1"));
  // n = 257 needs two 256-wide tiles: efficiency about 257/512 of the n = 256 case.
  const double best = model.spec()->matmul_fraction;  // 267.9 / 312
  const double full = model.MatmulEfficiency(1, 128 * 108, 256, 1024);
  const double ragged = model.MatmulEfficiency(1, 128 * 108, 257, 1024);
  EXPECT_NEAR(full, best, 1e-12);
  EXPECT_NEAR(best, 267.9 / 312, 1e-12);
  EXPECT_NEAR(ragged, best * 257.0 / 512.0, 1e-12);
}

TEST(ComputeModel, WaveQuantisationIdlesSmsInTheLastWave) {
  ComputeModel model(Topology::Parse("dgx-a100:1"));
  // 109 tiles on 108 SMs: two waves for 109 tiles' work (the matmul guide's example of a tail wave).
  const double best = model.spec()->matmul_fraction;
  EXPECT_NEAR(model.MatmulEfficiency(1, 128 * 109, 256, 4096), best * 109.0 / 216.0, 1e-12);
  EXPECT_NEAR(model.MatmulEfficiency(1, 128 * 216, 256, 4096), best, 1e-12);
  // Batched: 108 matmuls of one tile each fill one wave exactly.
  EXPECT_NEAR(model.MatmulEfficiency(108, 128, 256, 64), best, 1e-12);
}

TEST(ComputeModel, TpuPadsToTheMxu) {
  ComputeModel v5e(Topology::Parse("tpu-v5e:2x2"));
  EXPECT_DOUBLE_EQ(v5e.MatmulEfficiency(1, 1024, 1024, 1024), 1.0);
  EXPECT_NEAR(v5e.MatmulEfficiency(1, 1024, 64, 1024), 0.5, 1e-12);   // half of each 128-wide MXU idle
  EXPECT_NEAR(v5e.MatmulEfficiency(1, 1024, 1024, 192), 0.75, 1e-12);  // k padded to 256
  ComputeModel v6e(Topology::Parse("tpu-v6e:2x2"));
  EXPECT_NEAR(v6e.MatmulEfficiency(1, 1024, 128, 1024), 0.5, 1e-12);  // 256x256 MXUs
}

TEST(ComputeModel, MemoryBoundOpsRunAtHbmBandwidth) {
  ComputeModel model(Topology::Parse("dgx-h100:1"));
  // gelu over 1e8 bf16 elements: ~8 flops each on CUDA cores, 4e8 bytes at 3.35 TB/s.
  LocalOpCost cost = model.Cost(8e8, 4e8, {}, DType::kBF16);
  EXPECT_NEAR(cost.compute_seconds, 8e8 / 67e12, 1e-15);
  EXPECT_NEAR(cost.memory_seconds, 4e8 / 3350e9, 1e-15);
  EXPECT_FALSE(cost.compute_bound);
  EXPECT_NEAR(cost.seconds, cost.memory_seconds + 1e-6, 1e-15);
}

TEST(ComputeModel, Fp8UsesTheFp8PeakWhereTheDeviceHasOne) {
  ComputeModel h100(Topology::Parse("dgx-h100:1"));
  EXPECT_EQ(h100.MatrixPeak(DType::kF8E4M3FN), 1979e12);
  EXPECT_EQ(h100.MatrixPeak(DType::kBF16), 989e12);
  ComputeModel a100(Topology::Parse("dgx-a100:1"));
  EXPECT_EQ(a100.MatrixPeak(DType::kF8E5M2), 312e12);  // no fp8 units: the bf16 peak
  const int64_t n = 8192;
  const double flops = 2.0 * n * n * n;
  EXPECT_NEAR(h100.Cost(flops, 0, {1, n, n, n}, DType::kF8E4M3FN).compute_seconds * 2,
              h100.Cost(flops, 0, {1, n, n, n}, DType::kBF16).compute_seconds, 1e-6);
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
  EXPECT_NEAR(fwd.compute_seconds, 4.0 * 2 * 8 * 1024 * 1024 * 128 / 197e12, 1e-15);
  EXPECT_NEAR(fwd.memory_seconds, 2.0 * 2 * 128 * (8 * 1024 + 2 * 1024) * 2 / 819e9, 1e-15);
  LocalOpCost causal = model.FlashAttention(2, 8, 2, 1024, 1024, 128, true, false, DType::kBF16);
  EXPECT_NEAR(causal.compute_seconds, fwd.compute_seconds / 2, 1e-15);
  LocalOpCost bwd = model.FlashAttention(2, 8, 2, 1024, 1024, 128, false, true, DType::kBF16);
  EXPECT_NEAR(bwd.compute_seconds, 2.5 * fwd.compute_seconds, 1e-15);
  EXPECT_NEAR(bwd.memory_seconds, 2 * fwd.memory_seconds, 1e-15);
}

}  // namespace
}  // namespace spmdsim
