// Local compute time of one op on one device: the roofline per op, with a matmul's efficiency from its
// dimensions (docs/cost-model.md, "Compute model").
//
//   contraction [batch, m, k] x [k, n], for each output tile t = tile_m x tile_n the device's library offers:
//     tiles_t   = batch * ceil(m / tile_m) * ceil(n / tile_n)      (tile quantisation: partial tiles cost whole)
//     waves_t   = ceil(tiles_t / compute_units)                    (wave quantisation: SMs / MXUs idle in the
//                                                                   last wave)
//     feed_t    = min(1, I_t * l2_bandwidth / rate),  I_t = 2 tile_m tile_n / ((tile_m + tile_n) * dtype size)
//                 (a tile's FLOPs per operand byte loaded; smaller tiles reuse less and can starve on L2)
//     time_t    = waves_t * compute_units * 2 * tile_m * tile_n * ceil(k / tile_k) * tile_k
//                 / (rate * feed_t / max_t' feed_t')                (the best-fed tile runs at the best measured rate)
//     rate      = peak[dtype] * matmul_fraction      (fp8: fp8_matmul_fraction where measured)
//   The tile: as cuBLAS's heuristic is described (larger tiles are more efficient, but too few of them leave SMs
//   idle), tiles come in classes of decreasing efficiency; c* is the first class with a tile that fills at
//   least one wave (tiles_t >= compute_units), else the last; compute = min of time_t over the classes <= c*.
//   any other op: compute = flops / vector_peak (GPU CUDA cores; the dtype's peak where none is given)
//   every op:     memory  = bytes / (hbm_bandwidth * memory_fraction)   (measured streaming bandwidth)
//                 seconds = (max(compute / compute_efficiency, memory / memory_efficiency) + launch) / speed
// (NVIDIA, "Matrix Multiplication Background User's Guide": cuBLAS's tiles in order of efficiency, tile and
// wave quantisation, larger tiles reuse more data; Williams et al., "Roofline", CACM 2009.) Peak FLOP/s
// (bf16/f16/f32) and HBM bandwidth come from the topology preset (mesh/topology.h); the figures a preset lacks
// (SM / MXU count and tiles, L2 bandwidth, fp8 and vector peaks, launch overhead) come from DeviceComputeSpec,
// looked up by the device kind. A device kind without a spec (cpu) is a plain roofline: no quantisation, no
// launch overhead.
//
// Example: H100 (132 SMs, 792.1e12 of 989e12 bf16 measured at best, L2 8.986e12 B/s), bf16
// [4096, 4096] x [4096, 4096]: the 256x128 tiles (I = 85.3 FLOP/B, feed 0.97, the best fed) make 16 * 32 = 512
// tiles in ceil(512 / 132) = 4 waves -> 4 * 132 * 2 * 256 * 128 * 4096 / 792.1e12 = 179 us. Ideal
// 2 * 4096^3 / 989e12 = 139 us; efficiency 0.78 = 0.97 (the 4th wave uses 116 of 132 SMs) x 0.80. A [256, 4096]
// x [4096, 4096] matmul makes only 32 tiles of 256x128 (a quarter of the SMs); the first class to fill a wave is
// 64x64 (256 tiles), and the fastest of the classes up to it is 128x64: 128 tiles in one wave, fed 0.5 as well
// as 256x128 (I = 42.7) -> 2 * 128 * 64 * 4096 / (792.1e12 / 132 * 0.5) = 22.4 us, efficiency 0.39.
//
// Thread safety: const member functions are safe to call concurrently.
#ifndef SPMDSIM_COST_COMPUTE_MODEL_H_
#define SPMDSIM_COST_COMPUTE_MODEL_H_

#include <cstdint>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "cost/roofline.h"
#include "mesh/topology.h"

namespace spmdsim {

// An output tile one compute unit produces at a time: tile_m x tile_n (GPU: one CTA; TPU: rows x MXU width).
struct MatmulTile {
  int64_t m = 1, n = 1;
  int efficiency_class = 0;  // 0 the most efficient; the library prefers lower classes
};

// A measured flash-attention rate: forward + backward of causal attention with head_dim 128 over `seq` keys
// reached `fraction` of the device's bf16/fp16 peak (FLOPs counted as FlashAttention's benchmarks count them:
// 4 b h s^2 d / 2 forward, 2.5x that backward).
struct AttentionRate {
  int64_t seq = 0;
  double fraction = 0;
};

// Per-device figures of one device kind that the topology presets do not carry. Each has its source in
// docs/cost-model.md ("Compute model") and in `source`.
struct DeviceComputeSpec {
  std::string_view device_kind;   // JAX's device_kind ("NVIDIA H100 80GB HBM3", "TPU v5 lite")
  int compute_units = 1;          // SMs (GPU) or MXUs (TPU) of one JAX device
  std::span<const MatmulTile> tiles;  // the tiles the matmul library picks from (non-empty)
  int64_t tile_k = 1;             // the k step of every tile
  double fp8_flops = 0;           // FLOP/s, dense fp8 tensor peak (0: no fp8 units; fp8 runs at the bf16 peak)
  double vector_flops = 0;        // FLOP/s of the non-matrix units (0: use the dtype's peak)
  double kernel_launch_seconds = 0;  // added per op (GPUs: one kernel per op; 0 on TPUs: one XLA program)
  // The best fraction of the matrix peak a measured matmul reaches on the device (its "maximum achievable
  // matmul FLOPS" over the peak: clocks under load, scheduling); 1 where no measurement is documented.
  double matmul_fraction = 1.0;
  // B/s from L2 to the SMs that feeds the tiles' operands (0: unlimited, every tile at matmul_fraction).
  double l2_bandwidth_Bps = 0;
  std::string_view source;
  // The best measured fp8 matmul rate over the fp8 peak (0: matmul_fraction applies to fp8 too).
  double fp8_matmul_fraction = 0;
  // Measured streaming bandwidth (STREAM triad: two reads, one write) over the datasheet HBM bandwidth: the
  // rate memory-bound kernels reach; 1 where no measurement is documented.
  double memory_fraction = 1.0;
  // The flash-attention kernel the device's training stack runs, measured at these key lengths (ascending);
  // empty: flash attention's matmuls are priced as contractions at the matmul rate.
  std::span<const AttentionRate> attention_rates;

  // --- Sustained compute (docs/cost-model.md, "Sustained compute") ---
  // The best matmul rate held once the device is saturated at its power cap and its clock has settled
  // ("maximum sustainable matmul FLOPS"), over the peak; 0: no measurement (matmul_fraction holds). A training
  // step keeps the device at its power cap, so this is the rate the step is priced at by default.
  double sustained_matmul_fraction = 0;
  double sustained_fp8_matmul_fraction = 0;  // the same for fp8 (0: sustained_matmul_fraction x fp8 / bf16 burst)
  // The settled clock's effect on other tensor-core kernels whose rates were measured in short bursts (flash
  // attention): the measured sustained / burst matmul ratio on one chip and software (1: none documented).
  double sustained_clock_ratio = 1.0;
  // Spread of the sustained rate across the devices of a node when all of them run at once (max - min over the
  // mean, measured over 40 samples) and the mean's loss against one device running alone. A synchronous step of
  // n devices waits for its slowest: it runs at (1 - node_concurrent_loss) x (1 - sigma z(n)) of the alone rate,
  // sigma = node_spread / 4.322 (the expected range of 40 normal draws), z(n) the expected smallest of n normal
  // draws (Blom: Phi^-1((n - 0.375) / (n + 0.25))): 1.43 sigma for 8 devices, 2.59 for 128, 3.43 for 2048.
  double node_spread = 0;
  double node_concurrent_loss = 0;
  // Compute units a communication kernel occupies while it runs (GPU: one SM per NCCL channel): a compute
  // kernel overlapped with it gets the rest (the wave effect). 0: communication runs beside the compute units
  // (TPU ICI / DMA engines).
  int collective_units = 0;  // NCCL all-reduce / all_gather / reduce_scatter / all_to_all
  int p2p_units = 0;         // NCCL send / recv (pipeline transfers)
  // Time each wave of tiles spends beyond its tiles' multiply-accumulates: filling the operand pipeline before
  // the first k step and writing the output tile after the last. It makes a matmul of few waves (small or skinny
  // shapes) slower than its FLOPs at the best rate say; 0: none documented.
  double wave_overhead_seconds = 0;
};

// A device whose matmul fraction is another device's measurement (none of its own is published): the rate
// prices its steps but bounds nothing, so the step model warns above the best MFU a published training run
// reached on it. TPU v5p ("TPU v5"): v5e's ("TPU v5 lite") 92.3%, warned above 71.47% (MaxText).
struct BorrowedMatmulRate {
  std::string_view from;     // the device kind whose measurement is borrowed
  double published_mfu = 0;  // the best MFU published for a training run on this device
  std::string_view published_mfu_source;
};
// The borrowed rate of `device_kind`, or nullptr where its rate is its own (or the datasheet peak).
const BorrowedMatmulRate* FindBorrowedMatmulRate(std::string_view device_kind);

// The clock regime ops are priced at.
enum class ClockRegime {
  kSustained,  // a device busy for seconds at its power cap (a training step): the sustained figures
  kBurst,      // a short burst at the boost clock (the "maximum achievable" figures)
};

struct ComputeOptions {
  ClockRegime clock = ClockRegime::kSustained;
  // Devices that wait for each other at every synchronisation (a step over a mesh: its size). More than one
  // (sustained regime): compute is paced by the expected slowest of them (DeviceComputeSpec::node_spread).
  int64_t synchronous_devices = 1;
  // A calibrated multiplier on every compute-bound rate (> 0; 1: the documented figures).
  double rate_scale = 1.0;
};

// A contraction's dimensions: [batch, m, k] x [k, n] (sim/op_cost.h's OpCost carries them for dot_general).
struct ContractionDims {
  int64_t batch = 0, m = 0, n = 0, k = 0;
  bool valid() const { return batch > 0 && m > 0 && n > 0 && k > 0; }
};

// The spec of `device_kind`, or nullptr when spmdsim has none (cpu).
const DeviceComputeSpec* FindDeviceComputeSpec(std::string_view device_kind);

class ComputeModel {
 public:
  // Copies the figures it needs. Throws Error(kInvalidArgument) for an efficiency outside (0, 1] or
  // synchronous_devices < 1.
  explicit ComputeModel(const Topology& topology, RooflineOptions options = {}, ComputeOptions compute = {});

  // The time of one op: its flops, bytes read + written, and (for a contraction) its dims; other ops pass
  // ContractionDims{}. `dtype` selects the peak: fp8 dtypes use the spec's fp8 peak when it has one, else the
  // bf16 peak. `units_taken`: compute units (SMs) occupied by communication kernels while the op runs; the op
  // gets the rest (a contraction's waves are recounted on them; other compute-bound work scales with the units
  // left; memory-bound work is unchanged). Throws as Roofline::Cost.
  LocalOpCost Cost(double flops, double bytes, ContractionDims dims, DType dtype, double speed_factor = 1.0,
                   int units_taken = 0) const;

  // Fraction of the peak a [batch, m, k] x [k, n] contraction reaches: the best tile's quantisation and feed x
  // matmul_fraction (1 without a spec). REQUIRES: all > 0.
  double MatmulEfficiency(int64_t batch, int64_t m, int64_t n, int64_t k, DType dtype = DType::kBF16) const;
  // The tile the model picks for that contraction (nullptr without a spec). REQUIRES: all > 0.
  const MatmulTile* ChosenTile(int64_t batch, int64_t m, int64_t n, int64_t k, DType dtype = DType::kBF16) const;

  // Flash attention (Dao et al. 2022) of `batch * heads` independent heads: Q [q_len, head_dim] against K/V
  // [kv_len, head_dim] (kv_heads of them), never writing the q_len x kv_len scores to HBM.
  //   forward  flops = 4 * batch * heads * q_len * kv_len * head_dim (halved when causal)
  //            bytes = (Q + O) + (K + V) read/written once
  //                  = 2 * batch * head_dim * (heads*q_len + kv_heads*kv_len) * size
  //   backward flops = 2.5 x forward (5 matmuls instead of 2), bytes = 2 x forward (reads Q K V O dO, writes dQ dK dV)
  // With the spec's measured attention_rates, compute = flops / (peak x AttentionFraction(kv_len)); without,
  // the matmuls are priced with the tile model as batch*heads contractions [q_len, head_dim] x [head_dim, kv_len].
  // `rate_scale` scales the measured rate (another kernel measured against the device's: e.g. FlashAttention-2
  // against cuDNN); it does not apply to the contraction pricing.
  LocalOpCost FlashAttention(int64_t batch, int64_t heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                             int64_t head_dim, bool causal, bool backward, DType dtype, int units_taken = 0,
                             double rate_scale = 1.0) const;

  // Fraction of the bf16/fp16 peak flash attention reaches over `kv_len` keys: the measured rates interpolated
  // linearly in log2(kv_len), the end points' outside them; 0 when the device has no measurement.
  double AttentionFraction(int64_t kv_len) const;

  const DeviceComputeSpec* spec() const { return spec_; }
  const ComputeOptions& compute_options() const { return compute_; }
  // The highest rate a contraction in `dtype` reaches under the clock regime, over MatrixPeak(dtype), before
  // pace(): MatmulFraction(dtype) x compute_efficiency x rate_scale (1 without a spec and knobs). The model's MFU
  // cannot exceed it; model/step.h warns when a prediction does.
  double SustainedMatmulFraction(DType dtype) const;
  // Whether MatmulFraction(dtype) comes from a documented measurement of this device (a spec whose fraction is
  // below 1 and not borrowed from another device).
  bool HasMeasuredMatmulRate(DType dtype) const;
  // The peak FLOP/s the model uses for a contraction in `dtype` (fp8 as above).
  double MatrixPeak(DType dtype) const;
  // The fraction of the peak the best-fed tile reaches in `dtype` under the clock regime (sustained or burst
  // matmul fraction; 1 without a spec), before pace().
  double MatmulFraction(DType dtype) const;
  // The synchronous step's pace: compute-bound work runs at this fraction of one device's rate (1 unless the
  // regime is sustained and synchronous_devices > 1).
  double pace() const { return pace_; }

 private:
  // The fastest tile's time (and which tile) for a contraction in `dtype`.
  double ContractionSeconds(int64_t batch, int64_t m, int64_t n, int64_t k, DType dtype,
                            const MatmulTile** chosen = nullptr, int units_taken = 0) const;
  double TileFeed(const MatmulTile& tile, double rate, double size) const;
  double FindMatrixPeak(DType dtype) const;  // 0 when the topology has no peak for it
  // Per-unit FLOP/s of each of spec_->tiles in `dtype` (rate / units x relative feed).
  std::vector<double> TileRates(DType dtype) const;
  double WaveOverhead(DType dtype) const;  // seconds per wave in `dtype` under the regime
  // The best measured matmul fraction of `dtype` at the burst clock (fp8's own where measured). REQUIRES: spec_.
  double BurstFraction(DType dtype) const;
  LocalOpCost Combine(double compute, double memory, double speed_factor) const;
  // The fraction of the compute units left when communication kernels hold `units_taken` of them.
  double UnitShare(int units_taken) const;

  Roofline roofline_;  // validates numbers and dtypes; the plain model for ops without a spec
  const DeviceComputeSpec* spec_;
  std::map<DType, double> peak_flops_;
  double memory_bandwidth_Bps_;
  RooflineOptions options_;
  ComputeOptions compute_;
  double pace_ = 1.0;
  // TileRates of every dtype whose peak the device has, indexed by the DType's value (empty: none).
  std::vector<std::vector<double>> tile_rates_;
  // Per dtype: spec_->wave_overhead_seconds stretched as the tiles are by the regime's clock and pace (the
  // overhead is measured at the burst rate).
  std::vector<double> wave_overheads_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_COST_COMPUTE_MODEL_H_
