#include "cost/compute_model.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace spmdsim {
namespace {

// Sources in docs/cost-model.md, "Compute model". GPU tiles: the 128x256 (m x n) CTA tile with a k step of 64
// that NVIDIA's matmul guide and CUTLASS use for large bf16 GEMMs on Ampere and Hopper. TPU tiles: one MXU
// holds a tile_k x tile_n weight block and streams rows of the left operand through it, 8 rows (a sublane
// group) at a time.
constexpr DeviceComputeSpec kSpecs[] = {
    {"NVIDIA H100 80GB HBM3", 132, 128, 256, 64, 1979e12, 67e12, 1e-6, 792.1 / 989,
     "H100 SXM datasheet / Hopper whitepaper: 132 SMs, 1979 TFLOPS fp8 dense, 67 TFLOPS fp32 (CUDA cores); "
     "tile 128x256x64 (NVIDIA matmul guide, CUTLASS); launch ~1 us per back-to-back kernel (NVIDIA blog "
     "'Getting Started with CUDA Graphs'); best measured bf16 matmul 792.1 TFLOPS (stas00/ml-engineering, "
     "MAMF table)"},
    {"NVIDIA A100-SXM4-80GB", 108, 128, 256, 64, 0, 19.5e12, 1e-6, 267.9 / 312,
     "A100 whitepaper: 108 SMs, no fp8, 19.5 TFLOPS fp32 (CUDA cores); tile 128x256x64 (NVIDIA matmul guide); "
     "launch ~1 us per back-to-back kernel (NVIDIA blog 'Getting Started with CUDA Graphs'); best measured bf16 "
     "matmul 267.9 TFLOPS (stas00/ml-engineering, MAMF table)"},
    {"TPU v2", 1, 8, 128, 128, 0, 0, 0, 1, "Cloud TPU system architecture: one 128x128 MXU per v2 TensorCore"},
    {"TPU v3", 2, 8, 128, 128, 0, 0, 0, 1, "Cloud TPU system architecture: two 128x128 MXUs per v3 TensorCore"},
    {"TPU v4", 8, 8, 128, 128, 0, 0, 0, 1,
     "Cloud TPU v4 / TPU v4 paper (Jouppi et al. 2023): 2 TensorCores per chip, 4 MXUs of 128x128 each"},
    {"TPU v5 lite", 4, 8, 128, 128, 0, 0, 0, 1, "Cloud TPU v5e: one TensorCore per chip, 4 MXUs of 128x128"},
    {"TPU v5", 8, 8, 128, 128, 0, 0, 0, 1, "Cloud TPU v5p: 2 TensorCores per chip, 4 MXUs of 128x128 each"},
    {"TPU v6 lite", 2, 8, 256, 256, 0, 0, 0, 1, "Cloud TPU v6e (Trillium): one TensorCore per chip, 2 MXUs of 256x256"},
};

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
      options_(options) {}

double ComputeModel::MatrixPeak(DType dtype) const {
  if (IsFp8(dtype) && spec_ != nullptr && spec_->fp8_flops > 0) return spec_->fp8_flops;
  DType key = IsFp8(dtype) ? DType::kBF16 : dtype;
  auto it = peak_flops_.find(key);
  if (it == peak_flops_.end()) it = peak_flops_.find(DType::kF32);
  if (it == peak_flops_.end()) {
    roofline_.Cost(1, 0, key);  // throws kNotFound listing the dtypes the topology has
  }
  return it->second;
}

double ComputeModel::ContractionSeconds(int64_t batch, int64_t m, int64_t n, int64_t k, double peak) const {
  if (spec_ == nullptr) return 2.0 * batch * m * n * k / peak;
  const double tiles = static_cast<double>(batch) * CeilDiv(m, spec_->tile_m) * CeilDiv(n, spec_->tile_n);
  const double waves = std::ceil(tiles / spec_->compute_units);
  const double tile_flops = 2.0 * spec_->tile_m * spec_->tile_n * CeilDiv(k, spec_->tile_k) * spec_->tile_k;
  return waves * spec_->compute_units * tile_flops / (peak * spec_->matmul_fraction);
}

double ComputeModel::MatmulEfficiency(int64_t batch, int64_t m, int64_t n, int64_t k) const {
  SPMDSIM_CHECK(batch > 0 && m > 0 && n > 0 && k > 0, "matmul dims must be positive: {} {} {} {}", batch, m, n, k);
  return 2.0 * batch * m * n * k / ContractionSeconds(batch, m, n, k, 1.0);
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
    compute = ContractionSeconds(dims.batch, dims.m, dims.n, dims.k, MatrixPeak(dtype));
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
  double compute = 2 * ContractionSeconds(batch * heads, q_len, kv_len, head_dim, MatrixPeak(dtype));
  double bytes = 2.0 * batch * head_dim * (heads * q_len + kv_heads * kv_len) * size;
  if (causal) compute /= 2;
  if (backward) {
    compute *= 2.5;
    bytes *= 2;
  }
  return Combine(compute, bytes / memory_bandwidth_Bps_, 1.0);
}

}  // namespace spmdsim
