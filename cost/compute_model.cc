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
     "flash attention (TransformerEngine attention.ipynb); sustained at the 700 W cap: H200 SXM MSMF 708.5 bf16 / "
     "1288.7 fp8 TFLOPS at ~1465 / ~1374 MHz against MAMF 841.9 at 1980 MHz, all 8 GPUs busy 698.6 mean with a "
     "4.5% spread (stas00/ml-engineering branch fast-mamf, compute/accelerator/README.md and benchmarks/README.md; "
     "H100 SXM and H200 SXM share the die, SM count, clocks and 700 W cap, and their cuBLASLt GEMM rates agree "
     "within 2.4%: Azure/AI-benchmarking-guide NDv5 results); NCCL's all_gather runs 24 CTAs (NVIDIA developer "
     "forum, 'Compute-Communication Overlap Causes Severe GEMM Performance Degradation because of Tail Effect'), "
     "send/recv 2 channels per peer (NCCL's log in NVIDIA/nccl issue 1189); 2.35 us per wave of tiles beyond their "
     "multiply-accumulates: the median excess per wave of Azure's cuBLASLt fp8 size sweep (ND H100 v5 results: "
     "2048^3 1011.3, 4096^3 1216.9, 8192^3 1290.1 TFLOPS) over the tile model, applied to every dtype",
     1382.2 / 1979, 2.97e12 / 3.35e12, kH100CudnnAttention,
     708.5 / 989, 1288.7 / 1979, 708.5 / 841.9, 0.045, 1 - 698.6 / 702.9, 24, 2, 2.35e-6},
    {"NVIDIA A100-SXM4-80GB", 108, kCublasTiles, 64, 0, 19.5e12, 1e-6, 267.9 / 312, 5120 * 1.41e9,
     "A100 whitepaper: 108 SMs, no fp8, 19.5 TFLOPS fp32 (CUDA cores), L2 5120 B/clk (7219 GB/s at 1410 MHz); "
     "cuBLAS tiles of NVIDIA's matmul guide; launch ~1 us per back-to-back kernel (NVIDIA blog 'Getting Started "
     "with CUDA Graphs'); best measured bf16 matmul 267.9 TFLOPS (stas00/ml-engineering, MAMF table); "
     "BabelStream triad 1.70 TB/s (Azure/AI-benchmarking-guide, ND A100 v4 results); sustained at the 400 W cap: "
     "cuBLAS 8192^3 on random data 257 TFLOPS (295 on zeros; Horace He, 'Strangely, Matrix Multiplications on "
     "GPUs Run Faster When Given Predictable Data'), 312 x 1305 / 1410 MHz x 0.895 = 258 from NVIDIA's power-"
     "limited HPL clock; node spread as measured on H200 (no A100 figure); NCCL runs 24 channels on an 8-GPU "
     "NVSwitch A100 node (NCCL's log in NVIDIA/nccl-tests issue 100)",
     0, 1.70e12 / 2.039e12, {},
     257.0 / 312, 0, 1305.0 / 1410, 0.045, 1 - 698.6 / 702.9, 24, 2},
    {"TPU v2", 1, kMxu128, 128, 0, 0, 0, 1, 0, "Cloud TPU system architecture: one 128x128 MXU per v2 TensorCore",
     0, 1, {}},
    {"TPU v3", 2, kMxu128, 128, 0, 0, 0, 1, 0, "Cloud TPU system architecture: two 128x128 MXUs per v3 TensorCore",
     0, 1, {}},
    {"TPU v4", 8, kMxu128, 128, 0, 0, 0, 1, 0,
     "Cloud TPU v4 / TPU v4 paper (Jouppi et al. 2023): 2 TensorCores per chip, 4 MXUs of 128x128 each", 0, 1, {}},
    // TPU v5e: XLA's jnp.matmul of bf16 8192^3 on one v5e reaches 181.8 TFLOPS, 92.3% of the 197 TFLOPS peak
    // (JAX documentation, Pallas TPU "Matrix Multiplication" notebook, docs/pallas/tpu/matmul.ipynb: the XLA
    // reference cell's output; inputs jnp.ones, timed with timeit over 100 calls). v5p has no published matmul
    // measurement: it borrows v5e's (the same 128x128 MXUs and compiler), an assumption docs/cost-model.md states.
    {"TPU v5 lite", 4, kMxu128, 128, 0, 0, 0, 181.823e12 / 197e12, 0,
     "Cloud TPU v5e: one TensorCore per chip, 4 MXUs of 128x128; XLA bf16 8192^3 matmul 181.8 TFLOPS (JAX docs, "
     "Pallas TPU matmul notebook)", 0, 1, {}},
    // v5p's own figures give no lower rate than v5e's either: 459 TFLOPS over 8 MXUs is 1.75 GHz against v5e's
    // 1.50, and its HBM feeds 6.0 B per kFLOP against v5e's 4.2 (2765 / 459 vs 819 / 197 GB/s per TFLOPS), so the
    // borrowed fraction is kept and flagged: the step model warns above the best MFU MaxText publishes for v5p,
    // 71.47% (MaxText docs "Runtime Performance Results", TPU v5p: 32B on v5p-128, 328 TFLOP/s/chip).
    {"TPU v5", 8, kMxu128, 128, 0, 0, 0, 181.823e12 / 197e12, 0,
     "Cloud TPU v5p: 2 TensorCores per chip, 4 MXUs of 128x128 each; matmul fraction borrowed from v5e's XLA "
     "measurement (no v5p measurement published); best published training MFU 71.47% (MaxText runtime "
     "performance results, 32B on v5p-128)",
     0, 1, {}},
    {"TPU v6 lite", 2, kMxu256, 256, 0, 0, 0, 1, 0,
     "Cloud TPU v6e (Trillium): one TensorCore per chip, 2 MXUs of 256x256", 0, 1, {}},
};

constexpr size_t kMaxTiles = 16;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The inverse of the standard normal CDF, p in (0, 1) (P. J. Acklam's rational approximation, relative error
// below 1.2e-9).
double NormalQuantile(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549671010115819e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  auto tail = [&](double q) {
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  };
  if (p < 0.02425) return tail(std::sqrt(-2 * std::log(p)));
  if (p > 1 - 0.02425) return -tail(std::sqrt(-2 * std::log(1 - p)));
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

// The pace of a synchronous step over n devices: the expected slowest of n draws of the sustained rate. The
// spread was measured as the range of 40 samples (8 GPUs x 5 rounds), the expected range of 40 normal draws
// being 4.322 standard deviations (the d2 constant of statistical process control); the expected smallest of n
// normal draws is Blom's Phi^-1((n - 0.375) / (n + 0.25)) standard deviations below the mean.
double SynchronousPace(const DeviceComputeSpec& spec, int64_t n) {
  if (n <= 1) return 1.0;
  const double sigma = spec.node_spread / 4.322;
  const double z = NormalQuantile((static_cast<double>(n) - 0.375) / (static_cast<double>(n) + 0.25));
  return (1 - spec.node_concurrent_loss) * (1 - sigma * z);
}

bool IsFp8(DType dtype) { return dtype == DType::kF8E4M3FN || dtype == DType::kF8E5M2; }

}  // namespace

const DeviceComputeSpec* FindDeviceComputeSpec(std::string_view device_kind) {
  for (const DeviceComputeSpec& spec : kSpecs)
    if (spec.device_kind == device_kind) return &spec;
  return nullptr;
}

ComputeModel::ComputeModel(const Topology& topology, RooflineOptions options, ComputeOptions compute)
    : roofline_(topology, options),
      spec_(FindDeviceComputeSpec(topology.device_kind())),
      peak_flops_(topology.peak_flops()),
      memory_bandwidth_Bps_(topology.memory_bandwidth_Bps()),
      options_(options),
      compute_(compute) {
  if (compute.synchronous_devices < 1)
    Throw(ErrorCode::kInvalidArgument, "compute model: synchronous_devices must be >= 1, got {}",
          compute.synchronous_devices);
  if (!(compute.rate_scale > 0) || !std::isfinite(compute.rate_scale))
    Throw(ErrorCode::kInvalidArgument, "compute model: rate_scale must be > 0, got {}", compute.rate_scale);
  if (spec_ == nullptr) return;
  if (compute.clock == ClockRegime::kSustained) pace_ = SynchronousPace(*spec_, compute.synchronous_devices);
  memory_bandwidth_Bps_ *= spec_->memory_fraction;
  SPMDSIM_CHECK(!spec_->tiles.empty() && spec_->tiles.size() <= kMaxTiles, "a spec has 1 to {} tiles", kMaxTiles);
  tile_rates_.resize(AllDTypes().size());
  wave_overheads_.assign(AllDTypes().size(), 0.0);
  for (DType dtype : AllDTypes()) {
    if (FindMatrixPeak(dtype) <= 0) continue;
    tile_rates_[static_cast<size_t>(dtype)] = TileRates(dtype);
    wave_overheads_[static_cast<size_t>(dtype)] = WaveOverhead(dtype);
  }
}

double ComputeModel::BurstFraction(DType dtype) const {
  const bool fp8_units = IsFp8(dtype) && spec_->fp8_flops > 0;
  return fp8_units && spec_->fp8_matmul_fraction > 0 ? spec_->fp8_matmul_fraction : spec_->matmul_fraction;
}

double ComputeModel::MatmulFraction(DType dtype) const {
  if (spec_ == nullptr) return 1.0;
  const bool fp8_units = IsFp8(dtype) && spec_->fp8_flops > 0;
  const double burst = BurstFraction(dtype);
  if (compute_.clock == ClockRegime::kBurst) return burst;
  if (fp8_units && spec_->sustained_fp8_matmul_fraction > 0) return spec_->sustained_fp8_matmul_fraction;
  if (spec_->sustained_matmul_fraction <= 0) return burst;
  // fp8 without its own sustained figure: the bf16 sustained / burst ratio (the same clock drop).
  return fp8_units ? burst * spec_->sustained_matmul_fraction / spec_->matmul_fraction
                   : spec_->sustained_matmul_fraction;
}

double ComputeModel::WaveOverhead(DType dtype) const {
  return spec_->wave_overhead_seconds * BurstFraction(dtype) / (MatmulFraction(dtype) * pace_);
}

std::vector<double> ComputeModel::TileRates(DType dtype) const {
  // A tile's L2 feed relative to its need does not depend on the clock (L2 moves bytes per clock as the tensor
  // cores do FLOPs per clock): feeds are computed at the burst rate, then every tile runs at the regime's rate.
  const double burst_rate = MatrixPeak(dtype) * BurstFraction(dtype);
  const double rate = MatrixPeak(dtype) * MatmulFraction(dtype) * pace_;  // the best tile, whole device
  const double size = static_cast<double>(DTypeSize(dtype));
  double best_feed = 0;
  for (const MatmulTile& tile : spec_->tiles) best_feed = std::max(best_feed, TileFeed(tile, burst_rate, size));
  std::vector<double> rates;
  for (const MatmulTile& tile : spec_->tiles)
    rates.push_back(rate / spec_->compute_units * TileFeed(tile, burst_rate, size) / best_feed);
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
  return MatmulFraction(dtype) * options_.compute_efficiency * compute_.rate_scale;
}

bool ComputeModel::HasMeasuredMatmulRate(DType dtype) const {
  return spec_ != nullptr && MatmulFraction(dtype) < 1.0 && FindBorrowedMatmulRate(spec_->device_kind) == nullptr;
}

const BorrowedMatmulRate* FindBorrowedMatmulRate(std::string_view device_kind) {
  static constexpr BorrowedMatmulRate kV5p = {"TPU v5 lite", 0.7147,
                                              "the best MFU MaxText publishes for TPU v5p (32B on v5p-128)"};
  return device_kind == "TPU v5" ? &kV5p : nullptr;
}

double ComputeModel::TileFeed(const MatmulTile& tile, double rate, double size) const {
  if (spec_->l2_bandwidth_Bps <= 0) return 1.0;
  const double intensity = 2.0 * tile.m * tile.n / ((tile.m + tile.n) * size);  // FLOPs per operand byte
  return std::min(1.0, intensity * spec_->l2_bandwidth_Bps / rate);
}

double ComputeModel::ContractionSeconds(int64_t batch, int64_t m, int64_t n, int64_t k, DType dtype,
                                        const MatmulTile** chosen, int units_taken) const {
  if (chosen != nullptr) *chosen = nullptr;
  if (spec_ == nullptr) return 2.0 * batch * m * n * k / MatrixPeak(dtype);
  const std::vector<double>& rates = tile_rates_[static_cast<size_t>(dtype)];
  if (rates.empty()) MatrixPeak(dtype);  // throws kNotFound listing the dtypes the topology has
  const double k_steps = static_cast<double>(CeilDiv(k, spec_->tile_k) * spec_->tile_k);
  // The units the kernel gets (communication kernels may hold some), the library's choice as it sees them.
  const double units = std::max(1, spec_->compute_units - std::max(0, units_taken));
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
    const double waves = std::ceil(counts[i] / units);
    const double tile_seconds = 2.0 * static_cast<double>(tile.m * tile.n) * k_steps / rates[i];
    const double seconds = waves * (tile_seconds + wave_overheads_[static_cast<size_t>(dtype)]);
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
  cost.compute_seconds = compute / options_.compute_efficiency / compute_.rate_scale;
  cost.memory_seconds = memory / options_.memory_efficiency;
  cost.compute_bound = cost.compute_seconds >= cost.memory_seconds;
  const double launch = spec_ != nullptr ? spec_->kernel_launch_seconds : 0.0;
  cost.seconds = (std::max(cost.compute_seconds, cost.memory_seconds) + launch) / speed_factor;
  return cost;
}

double ComputeModel::UnitShare(int units_taken) const {
  if (spec_ == nullptr || units_taken <= 0) return 1.0;
  return static_cast<double>(std::max(1, spec_->compute_units - units_taken)) / spec_->compute_units;
}

LocalOpCost ComputeModel::Cost(double flops, double bytes, ContractionDims dims, DType dtype, double speed_factor,
                               int units_taken) const {
  // Validates the numbers and the dtype (throws as documented); also the whole answer without a spec.
  LocalOpCost plain = roofline_.Cost(flops, bytes, IsFp8(dtype) ? DType::kBF16 : dtype, speed_factor);
  if (spec_ == nullptr || (flops == 0 && bytes == 0)) return plain;  // a reshape launches no kernel
  double compute = 0;
  if (dims.valid()) {
    compute = ContractionSeconds(dims.batch, dims.m, dims.n, dims.k, dtype, nullptr, units_taken);
  } else if (flops > 0) {
    compute = flops / (spec_->vector_flops > 0 ? spec_->vector_flops : MatrixPeak(dtype)) / pace_ /
              UnitShare(units_taken);
  }
  return Combine(compute, bytes / memory_bandwidth_Bps_, speed_factor);
}

LocalOpCost ComputeModel::FlashAttention(int64_t batch, int64_t heads, int64_t kv_heads, int64_t q_len,
                                         int64_t kv_len, int64_t head_dim, bool causal, bool backward,
                                         DType dtype, int units_taken, double rate_scale) const {
  SPMDSIM_CHECK(batch > 0 && heads > 0 && kv_heads > 0 && q_len > 0 && kv_len > 0 && head_dim > 0,
                "flash attention dims must be positive");
  const double size = static_cast<double>(DTypeSize(dtype));
  // Two matmuls (Q K^T, P V) per head; causal masking skips about half of the blocks.
  double compute = 0;
  if (const double fraction = AttentionFraction(kv_len); fraction > 0) {
    // Measured in bursts: at the settled clock under the sustained regime, paced as every compute-bound op.
    const double clock = compute_.clock == ClockRegime::kSustained ? spec_->sustained_clock_ratio : 1.0;
    compute = 4.0 * batch * heads * q_len * kv_len * head_dim /
              (MatrixPeak(dtype) * fraction * rate_scale * clock * pace_ * UnitShare(units_taken));
  } else {
    compute = 2 * ContractionSeconds(batch * heads, q_len, kv_len, head_dim, dtype, nullptr, units_taken);
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
