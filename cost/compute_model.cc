#include "cost/compute_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace spmdsim {
namespace {

// Sources in docs/cost-model.md, "Compute model". GPU tiles: the CTA tiles cuBLAS chooses from, in the classes
// of NVIDIA's matmul guide, in order of decreasing efficiency (256x128 and 128x256, 128x128, 256x64 and 64x256,
// 128x64 and 64x128, 64x64), each stepping k by 64. L2 bandwidth: 5120 B/clk (A100 whitepaper) at the boost
// clock. TPU tiles: one MXU holds a tile_k x tile_n weight block and streams rows of the left operand through
// it, 8 rows (a sublane group) at a time.
constexpr MatmulTile kCublasTiles[] = {{256, 128, 0}, {128, 256, 0}, {128, 128, 1}, {256, 64, 2},
                                       {64, 256, 2},  {128, 64, 3},  {64, 128, 3},  {64, 64, 4}};
// H100: cuDNN flash attention (Transformer Engine's first choice on sm90), forward + backward, causal, head_dim
// 128, bf16, measured by NVIDIA on an "NVIDIA H100 80GB HBM3" (TransformerEngine
// docs/examples/attention/attention.ipynb, section 1.3): b 2, 16 heads, s 2048 in 0.3664 ms (120.3 GFLOP:
// 328 TFLOPS) and b 2, 32 heads (4 KV groups), s 8192 in 7.4875 ms (3848 GFLOP: 514 TFLOPS), of 989 TFLOPS.
constexpr AttentionRate kH100CudnnAttention[] = {{2048, 120.259084288e9 / 0.3664e-3 / 989e12},
                                                 {8192, 3848.290697216e9 / 7.4875e-3 / 989e12}};
constexpr MatmulTile kMxu128[] = {{8, 128, 0}};
constexpr MatmulTile kMxu256[] = {{8, 256, 0}};

constexpr DeviceComputeSpec kSpecs[] = {
    {"NVIDIA H100 80GB HBM3", 132, kCublasTiles, 64, 1979e12, 67e12, 1e-6, 792.1 / 989, 5120 * 1.755e9,
     "H100 SXM datasheet / Hopper whitepaper: 132 SMs, 1979 TFLOPS fp8 dense, 67 TFLOPS fp32 (CUDA cores); "
     "cuBLAS tiles of NVIDIA's matmul guide; launch ~1 us per back-to-back kernel (NVIDIA blog 'Getting Started "
     "with CUDA Graphs'); best measured bf16 matmul 792.1 TFLOPS (stas00/ml-engineering, MAMF table); L2 "
     "8986 GB/s (5120 B/clk at 1755 MHz: Ultrasonics Sonochemistry 99 (2023) 106546, Table 3); fp8 matmul "
     "1382.2 TFLOPS and BabelStream triad 2.97 TB/s (Azure/AI-benchmarking-guide, ND H100 v5 results); cuDNN "
     "flash attention (TransformerEngine attention.ipynb)",
     1382.2 / 1979, 2.97e12 / 3.35e12, kH100CudnnAttention},
    {"NVIDIA A100-SXM4-80GB", 108, kCublasTiles, 64, 0, 19.5e12, 1e-6, 267.9 / 312, 5120 * 1.41e9,
     "A100 whitepaper: 108 SMs, no fp8, 19.5 TFLOPS fp32 (CUDA cores), L2 5120 B/clk (7219 GB/s at 1410 MHz); "
     "cuBLAS tiles of NVIDIA's matmul guide; launch ~1 us per back-to-back kernel (NVIDIA blog 'Getting Started "
     "with CUDA Graphs'); best measured bf16 matmul 267.9 TFLOPS (stas00/ml-engineering, MAMF table); "
     "BabelStream triad 1.70 TB/s (Azure/AI-benchmarking-guide, ND A100 v4 results)",
     0, 1.70e12 / 2.039e12, {}},
    {"TPU v2", 1, kMxu128, 128, 0, 0, 0, 1, 0, "Cloud TPU system architecture: one 128x128 MXU per v2 TensorCore", 0, 1, {}},
    {"TPU v3", 2, kMxu128, 128, 0, 0, 0, 1, 0, "Cloud TPU system architecture: two 128x128 MXUs per v3 TensorCore", 0, 1, {}},
    {"TPU v4", 8, kMxu128, 128, 0, 0, 0, 1, 0,
     "Cloud TPU v4 / TPU v4 paper (Jouppi et al. 2023): 2 TensorCores per chip, 4 MXUs of 128x128 each", 0, 1, {}},
    {"TPU v5 lite", 4, kMxu128, 128, 0, 0, 0, 1, 0, "Cloud TPU v5e: one TensorCore per chip, 4 MXUs of 128x128", 0, 1, {}},
    {"TPU v5", 8, kMxu128, 128, 0, 0, 0, 1, 0, "Cloud TPU v5p: 2 TensorCores per chip, 4 MXUs of 128x128 each", 0, 1, {}},
    {"TPU v6 lite", 2, kMxu256, 256, 0, 0, 0, 1, 0,
     "Cloud TPU v6e (Trillium): one TensorCore per chip, 2 MXUs of 256x256", 0, 1, {}},
};

constexpr size_t kMaxTiles = 16;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool IsFp8(DType dtype) { return dtype == DType::kF8E4M3FN || dtype == DType::kF8E5M2; }

}  // namespace

const DeviceComputeSpec* FindDeviceComputeSpec(std::string_view device_kind) {
  for (const DeviceComputeSpec& spec : kSpecs)
    if (spec.device_kind == device_kind) return &spec;
  return nullptr;
}

ComputeModel::ComputeModel(const Topology& topology, RooflineOptions options)
    : roofline_(topology, options),
      spec_(FindDeviceComputeSpec(topology.device_kind())),
      peak_flops_(topology.peak_flops()),
      memory_bandwidth_Bps_(topology.memory_bandwidth_Bps()),
      options_(options) {
  if (spec_ == nullptr) return;
  memory_bandwidth_Bps_ *= spec_->memory_fraction;
  SPMDSIM_CHECK(!spec_->tiles.empty() && spec_->tiles.size() <= kMaxTiles, "a spec has 1 to {} tiles", kMaxTiles);
  tile_rates_.resize(AllDTypes().size());
  for (DType dtype : AllDTypes()) {
    if (FindMatrixPeak(dtype) > 0) tile_rates_[static_cast<size_t>(dtype)] = TileRates(dtype);
  }
}

std::vector<double> ComputeModel::TileRates(DType dtype) const {
  const bool fp8_units = IsFp8(dtype) && spec_->fp8_flops > 0;
  const double fraction =
      fp8_units && spec_->fp8_matmul_fraction > 0 ? spec_->fp8_matmul_fraction : spec_->matmul_fraction;
  const double rate = MatrixPeak(dtype) * fraction;  // the best tile's rate on the whole device
  const double size = static_cast<double>(DTypeSize(dtype));
  double best_feed = 0;
  for (const MatmulTile& tile : spec_->tiles) best_feed = std::max(best_feed, TileFeed(tile, rate, size));
  std::vector<double> rates;
  for (const MatmulTile& tile : spec_->tiles)
    rates.push_back(rate / spec_->compute_units * TileFeed(tile, rate, size) / best_feed);
  return rates;
}

double ComputeModel::FindMatrixPeak(DType dtype) const {
  if (IsFp8(dtype) && spec_ != nullptr && spec_->fp8_flops > 0) return spec_->fp8_flops;
  DType key = IsFp8(dtype) ? DType::kBF16 : dtype;
  auto it = peak_flops_.find(key);
  if (it == peak_flops_.end()) it = peak_flops_.find(DType::kF32);
  return it == peak_flops_.end() ? 0 : it->second;
}

double ComputeModel::MatrixPeak(DType dtype) const {
  const double peak = FindMatrixPeak(dtype);
  if (peak <= 0) roofline_.Cost(1, 0, IsFp8(dtype) ? DType::kBF16 : dtype);  // throws kNotFound listing the dtypes
  return peak;
}

double ComputeModel::SustainedMatmulFraction(DType dtype) const {
  double fraction = 1.0;
  if (spec_ != nullptr) {
    const bool fp8_units = IsFp8(dtype) && spec_->fp8_flops > 0;
    fraction = fp8_units && spec_->fp8_matmul_fraction > 0 ? spec_->fp8_matmul_fraction : spec_->matmul_fraction;
  }
  return fraction * options_.compute_efficiency;
}

bool ComputeModel::HasMeasuredMatmulRate(DType dtype) const {
  return spec_ != nullptr && SustainedMatmulFraction(dtype) / options_.compute_efficiency < 1.0;
}

double ComputeModel::TileFeed(const MatmulTile& tile, double rate, double size) const {
  if (spec_->l2_bandwidth_Bps <= 0) return 1.0;
  const double intensity = 2.0 * tile.m * tile.n / ((tile.m + tile.n) * size);  // FLOPs per operand byte
  return std::min(1.0, intensity * spec_->l2_bandwidth_Bps / rate);
}

double ComputeModel::ContractionSeconds(int64_t batch, int64_t m, int64_t n, int64_t k, DType dtype,
                                        const MatmulTile** chosen) const {
  if (chosen != nullptr) *chosen = nullptr;
  if (spec_ == nullptr) return 2.0 * batch * m * n * k / MatrixPeak(dtype);
  const std::vector<double>& rates = tile_rates_[static_cast<size_t>(dtype)];
  if (rates.empty()) MatrixPeak(dtype);  // throws kNotFound listing the dtypes the topology has
  const double k_steps = static_cast<double>(CeilDiv(k, spec_->tile_k) * spec_->tile_k);
  // Tile counts, and the classes the library considers: up to the first one with a tile that fills a wave.
  std::array<double, kMaxTiles> counts{};
  int last_class = 0;
  for (const MatmulTile& tile : spec_->tiles) last_class = std::max(last_class, tile.efficiency_class);
  for (size_t i = 0; i < spec_->tiles.size(); ++i) {
    const MatmulTile& tile = spec_->tiles[i];
    counts[i] = static_cast<double>(batch) * static_cast<double>(CeilDiv(m, tile.m) * CeilDiv(n, tile.n));
    if (counts[i] >= spec_->compute_units) last_class = std::min(last_class, tile.efficiency_class);
  }
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < spec_->tiles.size(); ++i) {
    const MatmulTile& tile = spec_->tiles[i];
    if (tile.efficiency_class > last_class) continue;
    const double waves = std::ceil(counts[i] / spec_->compute_units);
    const double seconds = waves * 2.0 * static_cast<double>(tile.m * tile.n) * k_steps / rates[i];
    if (seconds < best) {
      best = seconds;
      if (chosen != nullptr) *chosen = &tile;
    }
  }
  return best;
}

double ComputeModel::MatmulEfficiency(int64_t batch, int64_t m, int64_t n, int64_t k, DType dtype) const {
  SPMDSIM_CHECK(batch > 0 && m > 0 && n > 0 && k > 0, "matmul dims must be positive: {} {} {} {}", batch, m, n, k);
  if (spec_ == nullptr) return 1.0;
  return 2.0 * batch * m * n * k / ContractionSeconds(batch, m, n, k, dtype) / MatrixPeak(dtype);
}

const MatmulTile* ComputeModel::ChosenTile(int64_t batch, int64_t m, int64_t n, int64_t k, DType dtype) const {
  SPMDSIM_CHECK(batch > 0 && m > 0 && n > 0 && k > 0, "matmul dims must be positive: {} {} {} {}", batch, m, n, k);
  const MatmulTile* tile = nullptr;
  ContractionSeconds(batch, m, n, k, dtype, &tile);
  return tile;
}

LocalOpCost ComputeModel::Combine(double compute, double memory, double speed_factor) const {
  LocalOpCost cost;
  cost.compute_seconds = compute / options_.compute_efficiency;
  cost.memory_seconds = memory / options_.memory_efficiency;
  cost.compute_bound = cost.compute_seconds >= cost.memory_seconds;
  const double launch = spec_ != nullptr ? spec_->kernel_launch_seconds : 0.0;
  cost.seconds = (std::max(cost.compute_seconds, cost.memory_seconds) + launch) / speed_factor;
  return cost;
}

LocalOpCost ComputeModel::Cost(double flops, double bytes, ContractionDims dims, DType dtype,
                               double speed_factor) const {
  // Validates the numbers and the dtype (throws as documented); also the whole answer without a spec.
  LocalOpCost plain = roofline_.Cost(flops, bytes, IsFp8(dtype) ? DType::kBF16 : dtype, speed_factor);
  if (spec_ == nullptr || (flops == 0 && bytes == 0)) return plain;  // a reshape launches no kernel
  double compute = 0;
  if (dims.valid()) {
    compute = ContractionSeconds(dims.batch, dims.m, dims.n, dims.k, dtype);
  } else if (flops > 0) {
    compute = flops / (spec_->vector_flops > 0 ? spec_->vector_flops : MatrixPeak(dtype));
  }
  return Combine(compute, bytes / memory_bandwidth_Bps_, speed_factor);
}

LocalOpCost ComputeModel::FlashAttention(int64_t batch, int64_t heads, int64_t kv_heads, int64_t q_len,
                                         int64_t kv_len, int64_t head_dim, bool causal, bool backward,
                                         DType dtype) const {
  SPMDSIM_CHECK(batch > 0 && heads > 0 && kv_heads > 0 && q_len > 0 && kv_len > 0 && head_dim > 0,
                "flash attention dims must be positive");
  const double size = static_cast<double>(DTypeSize(dtype));
  // Two matmuls (Q K^T, P V) per head; causal masking skips about half of the blocks.
  double compute = 0;
  if (const double fraction = AttentionFraction(kv_len); fraction > 0) {
    compute = 4.0 * batch * heads * q_len * kv_len * head_dim / (MatrixPeak(dtype) * fraction);
  } else {
    compute = 2 * ContractionSeconds(batch * heads, q_len, kv_len, head_dim, dtype);
  }
  double bytes = 2.0 * batch * head_dim * (heads * q_len + kv_heads * kv_len) * size;
  if (causal) compute /= 2;
  if (backward) {
    compute *= 2.5;
    bytes *= 2;
  }
  return Combine(compute, bytes / memory_bandwidth_Bps_, 1.0);
}

double ComputeModel::AttentionFraction(int64_t kv_len) const {
  if (spec_ == nullptr || spec_->attention_rates.empty()) return 0;
  const std::span<const AttentionRate> rates = spec_->attention_rates;
  if (kv_len <= rates.front().seq) return rates.front().fraction;
  if (kv_len >= rates.back().seq) return rates.back().fraction;
  size_t i = 1;
  while (rates[i].seq < kv_len) ++i;
  const double x = std::log2(static_cast<double>(kv_len)), x0 = std::log2(static_cast<double>(rates[i - 1].seq)),
               x1 = std::log2(static_cast<double>(rates[i].seq));
  return rates[i - 1].fraction + (rates[i].fraction - rates[i - 1].fraction) * (x - x0) / (x1 - x0);
}

}  // namespace spmdsim
