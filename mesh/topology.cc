#include "mesh/topology.h"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/shape.h"
#include "common/strings.h"
#include "common/user_text.h"

namespace spmdsim {
namespace {

constexpr double kGB = 1e9;
// Device memory as the driver reports it (nvidia-smi's total): an "80 GB" H100 or H800 has 81559 MiB (79.6 GiB),
// an A100-SXM4-80GB 81920 MiB (80 GiB), not 80e9 bytes (74.5 GiB). What the accounting compares its peak with.
constexpr double kMiB = 1024.0 * 1024;
constexpr double kH100Memory = 81559 * kMiB;
constexpr double kA100Memory80 = 81920 * kMiB;

struct TpuFigures {
  const char* preset;
  const char* device_kind;  // jax.Device.device_kind, which mesh_utils dispatches on
  int cores_per_chip;
  int dims;                   // 2-D or 3-D torus
  int chips_per_host;         // 4 (a 2x2x1 block) or 8
  int wrap_multiple;          // a dimension wraps around when it is a multiple of this (0: never)
  double hbm_bytes_per_chip;
  double hbm_Bps_per_chip;
  double bf16_flops_per_chip;
  double ici_one_way_Bps;     // per link
  const char* ici_source;
  double dcn_one_way_Bps_per_host;
  const char* dcn_source;
};

// Sources: Google Cloud's TPU system-architecture pages (cloud.google.com/tpu/docs/system-architecture-tpu-vm and
// the per-generation pages: peak FLOP/s, HBM, ICI per chip, chips per host, DCN); per-link ICI figures from the
// JAX scaling book (jax-ml/scaling-book, "How to Think About TPUs"). Where a source states a bidirectional per-chip
// figure, the one-way per-link figure is (bidirectional / 2) / ports.
const TpuFigures kTpuFigures[] = {
    {"tpu-v2", "TPU v2", 2, 2, 4, 16, 16 * kGiB, 700 * kGB, 45e12, 62.5e9,
     "estimate: no published per-link figure; v2 ICI taken as 500 Gb/s one-way per link", 0, ""},
    {"tpu-v3", "TPU v3", 2, 2, 4, 32, 32 * kGiB, 900 * kGB, 123e12, 82e9,
     "estimate: no published per-link figure; v3 ICI taken as 656 Gb/s one-way per link", 0, ""},
    {"tpu-v4", "TPU v4", 1, 3, 4, 4, 32 * kGiB, 1200 * kGB, 275e12, 4.5e10,
     "scaling book: 4.5e10 B/s one-way per link (9e10 bidirectional), 6 links per chip", 2.5e10,
     "scaling book: ~2.5e10 B/s per host"},
    {"tpu-v5e", "TPU v5 lite", 1, 2, 8, 16, 16 * kGB, 819 * kGB, 197e12, 5e10,
     "Cloud TPU v5e: 400 GB/s bidirectional per chip over 4 ports -> 50 GB/s one-way per port", 25e9,
     "Cloud TPU v5e: 2 x 100 Gb/s NIC per 8-chip host"},
    {"tpu-v5p", "TPU v5", 1, 3, 4, 4, 95 * kGB, 2765 * kGB, 459e12, 9e10,
     "scaling book: 9e10 B/s one-way per link (1200 GB/s bidirectional per chip)", 25e9,
     "Cloud TPU v5p: 50 Gb/s per chip x 4 chips per host"},
    {"tpu-v6e", "TPU v6 lite", 1, 2, 8, 16, 32 * kGB, 1638 * kGB, 918e12, 1e11,
     "Cloud TPU v6e: 800 GB/s bidirectional per chip over 4 ports -> 100 GB/s one-way per port", 100e9,
     "Cloud TPU v6e: 4 x 200 Gb/s per host"},
};

const TpuFigures& FiguresOf(Topology::TpuGeneration generation) {
  return kTpuFigures[static_cast<int>(generation)];
}

}  // namespace

std::string_view PlatformName(Platform platform) {
  switch (platform) {
    case Platform::kTpu: return "tpu";
    case Platform::kGpu: return "gpu";
    case Platform::kCpu: return "cpu";
  }
  return "?";
}

std::string_view LinkClassName(LinkClass link) {
  switch (link) {
    case LinkClass::kIci: return "ici";
    case LinkClass::kNvlink: return "nvlink";
    case LinkClass::kPcie: return "pcie";
    case LinkClass::kDcn: return "dcn";
    case LinkClass::kInfiniband: return "infiniband";
    case LinkClass::kHostMemory: return "host_memory";
  }
  return "?";
}

LinkClass ParseLinkClass(std::string_view name) {
  for (LinkClass c : {LinkClass::kIci, LinkClass::kNvlink, LinkClass::kPcie, LinkClass::kDcn,
                      LinkClass::kInfiniband, LinkClass::kHostMemory}) {
    if (LinkClassName(c) == name) return c;
  }
  Throw(ErrorCode::kNotFound,
        "unknown link class '{}'; valid: ici, nvlink, pcie, dcn, infiniband, host_memory", name);
}

const std::vector<std::string>& Topology::PresetNames() {
  static const std::vector<std::string> names = {"tpu-v2",   "tpu-v3",   "tpu-v4",   "tpu-v5e",     "tpu-v5p",
                                                 "tpu-v6e",  "dgx-h100", "dgx-h200", "h800",        "dgx-a100",
                                                 "a100-40g", "dgx-b200", "gb200-nvl72", "gpu",      "cpu"};
  return names;
}

Topology Topology::Tpu(TpuGeneration generation, std::array<int, 3> chips_per_dim, int num_slices) {
  const TpuFigures& f = FiguresOf(generation);
  for (int d = 0; d < 3; ++d) {
    if (chips_per_dim[d] < 1) {
      Throw(ErrorCode::kInvalidArgument, "{}: chip dimension {} must be >= 1, got {}", f.preset, d,
            chips_per_dim[d]);
    }
  }
  if (f.dims == 2 && chips_per_dim[2] != 1) {
    Throw(ErrorCode::kInvalidArgument, "{} is a 2-D torus: give XxY chips, got {}", f.preset,
          fmt::join(chips_per_dim, "x"));
  }
  if (num_slices < 1) Throw(ErrorCode::kInvalidArgument, "{}: num_slices must be >= 1, got {}", f.preset, num_slices);

  Topology t;
  t.platform_ = Platform::kTpu;
  t.preset_ = f.preset;
  t.device_kind_ = f.device_kind;
  t.tpu_generation_ = generation;
  t.chips_per_dim_ = chips_per_dim;
  t.cores_per_chip_ = f.cores_per_chip;
  t.num_slices_ = num_slices;
  // Host blocks: 4-chip hosts hold 2x2x1 chips, 8-chip hosts 4x2x1 (2x4x1 when X < 4). A slice smaller
  // than a host block is one host.
  if (f.chips_per_host == 4) {
    t.host_block_ = {std::min(2, chips_per_dim[0]), std::min(2, chips_per_dim[1]), 1};
  } else {
    int bx = std::min(4, chips_per_dim[0]);
    t.host_block_ = {bx, std::min(8 / bx, chips_per_dim[1]), 1};
  }
  for (int d = 0; d < 3; ++d) {
    if (chips_per_dim[d] % t.host_block_[d] != 0) {
      Throw(ErrorCode::kInvalidArgument,
            "{}: {} chips along dimension {} is not a whole number of host blocks of {}", f.preset,
            chips_per_dim[d], d, fmt::join(t.host_block_, "x"));
    }
    t.wraparound_[d] = f.wrap_multiple > 0 && chips_per_dim[d] % f.wrap_multiple == 0 &&
                       (d < f.dims);
  }
  double per_device = 1.0 / f.cores_per_chip;
  t.memory_bytes_ = static_cast<int64_t>(f.hbm_bytes_per_chip * per_device);
  t.memory_bandwidth_Bps_ = f.hbm_Bps_per_chip * per_device;
  t.peak_flops_ = {{DType::kBF16, f.bf16_flops_per_chip * per_device},
                   {DType::kF32, f.bf16_flops_per_chip * per_device / 4}};
  t.figures_source_ = fmt::format(
      "Cloud TPU system architecture ({}): HBM, bf16 peak per chip; f32 taken as bf16/4 (multi-pass bf16); "
      "per device = per chip / cores_per_chip", f.preset);
  t.links_[LinkClass::kIci] = {1e-6, f.ici_one_way_Bps,
                               std::string(f.ici_source) + "; latency: scaling book T_min ~1 us per hop"};
  if (f.dcn_one_way_Bps_per_host > 0) {
    t.links_[LinkClass::kDcn] = {10e-6, f.dcn_one_way_Bps_per_host,
                                 std::string(f.dcn_source) + "; latency 10 us assumed"};
  } else {
    t.links_[LinkClass::kDcn] = {10e-6, 12.5e9, "assumed 100 Gb/s per host, latency 10 us"};
  }
  t.links_[LinkClass::kPcie] = {2e-6, 16e9, "assumed PCIe Gen3 x16: 16 GB/s one-way, 2 us"};
  t.BuildTpuDevices();
  return t;
}

void Topology::BuildTpuDevices() {
  const auto [X, Y, Z] = chips_per_dim_;
  const int C = cores_per_chip_;
  const auto [bx, by, bz] = host_block_;
  const int hx = X / bx, hy = Y / by, hz = Z / bz;
  const int hosts_per_slice = hx * hy * hz;
  num_processes_ = hosts_per_slice * num_slices_;
  devices_.clear();
  devices_.reserve(static_cast<size_t>(num_slices_) * X * Y * Z * C);
  for (int s = 0; s < num_slices_; ++s)
    for (int z = 0; z < Z; ++z)
      for (int y = 0; y < Y; ++y)
        for (int x = 0; x < X; ++x)
          for (int c = 0; c < C; ++c) {
            Device d;
            d.id = static_cast<int>(devices_.size());
            d.coords = {x, y, z};
            d.core_on_chip = c;
            d.slice_index = s;
            int host_in_slice = ((z / bz) * hy + (y / by)) * hx + (x / bx);
            d.process_index = s * hosts_per_slice + host_in_slice;
            devices_.push_back(d);
          }
}

namespace {

struct GpuFigures {
  const char* preset;
  const char* device_kind;
  int gpus_per_host;  // GPUs per NVLink domain (a DGX host; a GB200 NVL72 rack)
  GpuGeneration generation;
  bool nvlink_sharp;  // NVSwitch with NVLink SHARP (NVLS)
  bool amd_host;
  double memory_bytes, memory_Bps, bf16_flops, f32_flops;
  const char* figures_source;
  double nvlink_one_way_Bps;
  const char* nvlink_source;
  int nics_per_node;
  double nic_Bps;  // one-way line rate per NIC
  const char* network_source;
  double pcie_one_way_Bps;
  const char* pcie_source;
};

constexpr double kNetworkLatency = 1e-6;
constexpr char kNetworkLatencySource[] =
    "latency 1 us one way: NIC to NIC through up to 3 InfiniBand switch hops (~130 ns port to port, NVIDIA "
    "Quantum switch datasheets) plus the two adapters";
constexpr char kH100Pcie[] = "PCIe Gen5 x16: 64 GB/s one-way; latency 2 us assumed";
constexpr char kA100Pcie[] = "PCIe Gen4 x16: 32 GB/s one-way; latency 2 us assumed";

// Sources: NVIDIA's datasheets (H100 SXM, A100 SXM, DGX H100 / DGX A100 user guides); every bandwidth ONE-WAY.
const GpuFigures kGpuFigures[] = {
    {"dgx-h100", "NVIDIA H100 80GB HBM3", 8, GpuGeneration::kHopper, true, false, kH100Memory, 3350 * kGB, 989e12,
     67e12, "H100 SXM datasheet: 80 GB HBM3 at 3.35 TB/s, 989 TFLOPS bf16 dense, 67 TFLOPS f32; nvidia-smi's total "
     "81559 MiB", 450e9,
     "H100 NVLink4: 900 GB/s bidirectional per GPU -> 450 GB/s one-way (nccl-tests issue 212: 450 GB/s line rate)",
     8, 50e9, "DGX H100: 8 x ConnectX-7 400 Gb/s NDR, one per GPU -> 50 GB/s one-way each", 64e9, kH100Pcie},
    {"dgx-h200", "NVIDIA H200", 8, GpuGeneration::kHopper, true, false, 141 * kGB, 4800 * kGB, 989e12, 67e12,
     "H200 SXM datasheet: 141 GB HBM3e at 4.8 TB/s, 989 TFLOPS bf16 dense, 67 TFLOPS f32", 450e9,
     "H200 NVLink4: 900 GB/s bidirectional per GPU -> 450 GB/s one-way", 8, 50e9,
     "DGX H200: 8 x ConnectX-7 400 Gb/s NDR, one per GPU -> 50 GB/s one-way each", 64e9, kH100Pcie},
    {"h800", "NVIDIA H800", 8, GpuGeneration::kHopper, true, false, kH100Memory, 3350 * kGB, 989e12, 67e12,
     "H800 SXM: the H100 SXM die (80 GB HBM3 at 3.35 TB/s, 989 TFLOPS bf16 dense; nvidia-smi 81559 MiB) with "
     "reduced NVLink", 200e9,
     "H800 NVLink: 400 GB/s bidirectional per GPU -> 200 GB/s one-way (NVIDIA H800 product brief; DeepSeek-V3 "
     "report section 3.2.2: ~160 GB/s achieved)",
     8, 50e9, "DeepSeek-V3 report section 3.2.2: one 400 Gb/s InfiniBand NIC per H800 -> 50 GB/s one-way", 64e9,
     kH100Pcie},
    {"dgx-a100", "NVIDIA A100-SXM4-80GB", 8, GpuGeneration::kAmpere, false, true, kA100Memory80, 2039 * kGB,
     312e12, 19.5e12, "A100 SXM datasheet: 80 GB HBM2e at 2039 GB/s, 312 TFLOPS bf16, 19.5 TFLOPS f32; nvidia-smi's "
     "total 81920 MiB", 300e9,
     "A100 NVLink3: 600 GB/s bidirectional per GPU -> 300 GB/s one-way", 8, 25e9,
     "DGX A100: 8 x ConnectX-6 200 Gb/s HDR, one per GPU -> 25 GB/s one-way each; AMD EPYC 7742 host", 32e9,
     kA100Pcie},
    {"a100-40g", "NVIDIA A100-SXM4-40GB", 8, GpuGeneration::kAmpere, false, true, 40 * kGB, 1555 * kGB, 312e12,
     19.5e12, "A100 SXM datasheet: 40 GB HBM2 at 1555 GB/s, 312 TFLOPS bf16, 19.5 TFLOPS f32", 300e9,
     "A100 NVLink3: 600 GB/s bidirectional per GPU -> 300 GB/s one-way", 8, 25e9,
     "DGX A100 (40 GB): 8 x ConnectX-6 200 Gb/s HDR, one per GPU -> 25 GB/s one-way each; AMD EPYC host", 32e9,
     kA100Pcie},
    {"dgx-b200", "NVIDIA B200", 8, GpuGeneration::kBlackwell, true, false, 180 * kGB, 8000 * kGB, 2.25e15, 75e12,
     "DGX B200 datasheet: 1440 GB HBM3e / 8 GPUs, 64 TB/s / 8 = 8 TB/s; 72 PFLOPS FP8 sparse -> 2.25 PFLOPS bf16 "
     "dense per GPU; f32 75 TFLOPS",
     900e9, "B200 NVLink5: 1.8 TB/s bidirectional per GPU -> 900 GB/s one-way", 8, 50e9,
     "DGX B200: 8 x ConnectX-7 400 Gb/s, one per GPU -> 50 GB/s one-way each", 64e9, kH100Pcie},
    {"gb200-nvl72", "NVIDIA GB200", 72, GpuGeneration::kBlackwell, true, false, 186 * kGB, 8000 * kGB, 2.5e15,
     80e12,
     "GB200 NVL72 datasheet: 13.4 TB HBM3e / 72 GPUs = 186 GB at 8 TB/s; 180 PFLOPS bf16 dense / 72 = 2.5 PFLOPS; "
     "f32 5760 TFLOPS / 72 = 80 TFLOPS",
     900e9, "NVLink5 switch: 1.8 TB/s bidirectional per GPU, all 72 GPUs in one NVLink domain -> 900 GB/s one-way",
     72, 50e9, "GB200 NVL72: one ConnectX-7 400 Gb/s per GPU (4 per compute tray of 4 GPUs) -> 50 GB/s one-way",
     64e9, kH100Pcie},
};

const GpuFigures* FindGpuFigures(std::string_view preset) {
  if (preset == "gpu") return &kGpuFigures[0];  // generic: the H100 figures
  for (const GpuFigures& f : kGpuFigures) {
    if (preset == f.preset) return &f;
  }
  return nullptr;
}

std::string GpuPresetList() {
  std::vector<std::string_view> names;
  for (const GpuFigures& f : kGpuFigures) names.push_back(f.preset);
  names.push_back("gpu");
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::string_view GpuGenerationName(GpuGeneration generation) {
  switch (generation) {
    case GpuGeneration::kNone: return "none";
    case GpuGeneration::kVolta: return "volta";
    case GpuGeneration::kAmpere: return "ampere";
    case GpuGeneration::kHopper: return "hopper";
    case GpuGeneration::kBlackwell: return "blackwell";
  }
  return "?";
}

Topology Topology::Gpu(std::string_view preset, int num_hosts, int gpus_per_host) {
  if (num_hosts < 1 || gpus_per_host < 1) {
    Throw(ErrorCode::kInvalidArgument, "{}: need at least one host of at least one GPU, got {} x {}", preset,
          num_hosts, gpus_per_host);
  }
  const GpuFigures* f = FindGpuFigures(preset);
  if (f == nullptr) Throw(ErrorCode::kNotFound, "unknown GPU preset '{}'; valid: {}", preset, GpuPresetList());
  Topology t;
  t.platform_ = Platform::kGpu;
  t.preset_ = std::string(preset);
  t.chips_per_dim_ = {gpus_per_host, num_hosts, 1};
  t.num_processes_ = num_hosts;
  t.num_slices_ = 1;
  t.device_kind_ = f->device_kind;
  t.gpu_generation_ = f->generation;
  t.nvlink_sharp_ = f->nvlink_sharp;
  t.amd_host_ = f->amd_host;
  t.memory_bytes_ = static_cast<int64_t>(f->memory_bytes);
  t.memory_bandwidth_Bps_ = f->memory_Bps;
  t.peak_flops_ = {{DType::kBF16, f->bf16_flops}, {DType::kF16, f->bf16_flops}, {DType::kF32, f->f32_flops}};
  t.figures_source_ = f->figures_source;
  t.links_[LinkClass::kNvlink] = {2e-6, f->nvlink_one_way_Bps,
                                  std::string(f->nvlink_source) + "; latency 2 us assumed (per-step latencies of "
                                                                  "NCCL collectives: cost/nccl_model.h)"};
  t.links_[LinkClass::kPcie] = {2e-6, f->pcie_one_way_Bps, f->pcie_source};
  NetworkSpec network;
  network.nics_per_node = preset == "gpu" ? gpus_per_host : f->nics_per_node;
  network.nic_Bps = f->nic_Bps;
  network.latency_s = kNetworkLatency;
  network.source = std::string(f->network_source) + "; rail-optimised, non-blocking; " + kNetworkLatencySource;
  t.SetNetwork(std::move(network));
  for (int h = 0; h < num_hosts; ++h)
    for (int g = 0; g < gpus_per_host; ++g) {
      Device d;
      d.id = h * gpus_per_host + g;
      d.process_index = h;
      d.slice_index = h;
      d.coords = {g, h, 0};
      t.devices_.push_back(d);
    }
  return t;
}

void Topology::SetNetwork(NetworkSpec network) {
  if (platform_ != Platform::kGpu) {
    Throw(ErrorCode::kInvalidArgument, "{}: a network section applies to GPU topologies only", ToString());
  }
  if (network.nics_per_node < 1 || !(network.nic_Bps > 0) || !(network.latency_s >= 0) ||
      !(network.oversubscription >= 1)) {
    Throw(ErrorCode::kInvalidArgument,
          "network: need nics_per_node >= 1, NIC bandwidth > 0, latency >= 0 and oversubscription >= 1; got {}, "
          "{} B/s, {} s, {}",
          network.nics_per_node, network.nic_Bps, network.latency_s, network.oversubscription);
  }
  // The per-GPU share of the node's NICs: one NIC per GPU on DGX-style nodes.
  const double per_gpu = network.nic_Bps * std::min(1.0, static_cast<double>(network.nics_per_node) /
                                                             chips_per_dim_[0]) /
                         network.oversubscription;
  // One message's latency for the stage model (send/recv, all_to_all): the fabric's plus NCCL's per-step
  // network latency of its LL protocol (2.7 us, NVIDIA/nccl src/graph/tuning.cc hwLatencies NET Ring LL).
  links_[LinkClass::kInfiniband] = {
      network.latency_s + 2.7e-6, per_gpu,
      fmt::format("{} NICs per node at {:.4g} B/s one-way, oversubscription {} ({}); latency = fabric + NCCL's "
                  "2.7 us per network step",
                  network.nics_per_node, network.nic_Bps, network.oversubscription, network.source)};
  network_ = std::move(network);
}

void Topology::SetNvlinkSharp(bool enabled) { nvlink_sharp_ = enabled && platform_ == Platform::kGpu; }

Topology Topology::Cpu(int num_devices) {
  if (num_devices < 1) Throw(ErrorCode::kInvalidArgument, "cpu: need at least one device, got {}", num_devices);
  Topology t;
  t.platform_ = Platform::kCpu;
  t.preset_ = "cpu";
  t.device_kind_ = "cpu";
  t.chips_per_dim_ = {num_devices, 1, 1};
  t.num_processes_ = 1;
  t.memory_bytes_ = static_cast<int64_t>(16 * kGiB);
  t.memory_bandwidth_Bps_ = 10.5e9;
  t.peak_flops_ = {{DType::kF32, 50e9}, {DType::kF64, 25e9}, {DType::kBF16, 50e9}};
  t.links_[LinkClass::kHostMemory] = {0.1e-6, 10.5e9,
                                      "docs/machine-limits.md: memcpy 10.5 GB/s on one thread, "
                                      "~100 ns cache-line round trip"};
  t.figures_source_ = "a small 2-core machine (docs/machine-limits.md); 16 GiB per device assumed";
  for (int i = 0; i < num_devices; ++i) {
    Device d;
    d.id = i;
    d.coords = {i, 0, 0};
    t.devices_.push_back(d);
  }
  return t;
}

namespace {

// Throws Error(kOutOfRange) when dims x slices x per_unit exceeds kMaxTopologyDevices.
void CheckDeviceCount(std::string_view what, const std::vector<int64_t>& dims, int num_slices, int64_t per_unit) {
  int64_t n = std::max(num_slices, 1) * per_unit;
  bool over = n > kMaxTopologyDevices;
  for (int64_t d : dims) over = over || __builtin_mul_overflow(n, d, &n) || n > kMaxTopologyDevices;
  if (over) {
    Throw(ErrorCode::kOutOfRange, "{}{}: more than {} devices; spmdsim simulates at most {} devices", what,
          num_slices > 1 ? fmt::format(" x {} slices", num_slices) : "", kMaxTopologyDevices, kMaxTopologyDevices);
  }
}

}  // namespace

namespace {

// Cloud TPU accelerator types, the `--accelerator-type` of `gcloud compute tpus tpu-vm create` (Google Cloud's
// per-generation pages, "Configurations"; cloud.google.com/tpu/docs/v5p lists "Topology | Cores | Chips": 2x2x1 8 4,
// 2x4x4 64 32, 4x4x4 128 64, ...): the name counts TensorCores on v2, v3, v4 and v5p (2 per chip: v5p-64 is 32
// chips) and chips on v5e ("v5litepod") and v6e. The slice shapes of power-of-two sizes follow one rule
// (SliceShape), from the smallest slice: v2-8 / v3-8 (2x2 chips), v4-8 / v5p-8 (2x2x1), v5litepod-1 / v6e-1 (1x1).
struct AcceleratorFamily {
  const char* prefix;
  const char* preset;
  int counted_per_chip;  // TensorCores per chip when the name counts cores, else 1
  int dims;
  int64_t min_chips;     // the smallest slice
};
constexpr AcceleratorFamily kAcceleratorFamilies[] = {
    {"v2", "tpu-v2", 2, 2, 4},  {"v3", "tpu-v3", 2, 2, 4},         {"v4", "tpu-v4", 2, 3, 4},
    {"v5p", "tpu-v5p", 2, 3, 4}, {"v5litepod", "tpu-v5e", 1, 2, 1}, {"v6e", "tpu-v6e", 1, 2, 1}};

// Names people write for a family that Google Cloud spells otherwise ("v5e-16" is v5litepod-16).
constexpr std::pair<const char*, const char*> kAcceleratorAliases[] = {{"v5e", "v5litepod"}, {"v5lite", "v5litepod"},
                                                                       {"v6", "v6e"}};

const AcceleratorFamily* FindAcceleratorFamily(std::string_view prefix) {
  for (const AcceleratorFamily& f : kAcceleratorFamilies)
    if (prefix == f.prefix) return &f;
  return nullptr;
}

// Google Cloud's slice shape for `chips` (a power of two): as square as possible, ascending; 3-D 4 chips 2x2x1.
std::string SliceShape(int64_t chips, int dims) {
  int k = 0;
  while ((int64_t{1} << k) < chips) ++k;
  if (dims == 2) return fmt::format("{}x{}", int64_t{1} << (k / 2), chips >> (k / 2));
  if (chips == 4) return "2x2x1";
  std::array<int64_t, 3> d = {int64_t{1} << (k / 3), int64_t{1} << (k / 3), int64_t{1} << (k / 3)};
  for (int i = 0; i < k % 3; ++i) d[2 - i] *= 2;
  return fmt::format("{}x{}x{}", d[0], d[1], d[2]);
}

// "v5p-64" -> "tpu-v5p:2x4x4"; nullopt when `text` is not of the form PREFIX-N with a known prefix.
std::optional<std::string> AcceleratorTypeAsPreset(std::string_view text) {
  const size_t dash = text.rfind('-');
  if (dash == std::string_view::npos || text.find(':') != std::string_view::npos) return std::nullopt;
  const std::string_view prefix = text.substr(0, dash);
  const std::string what = fmt::format("topology {}", QuoteForError(text));
  for (const auto& [alias, name] : kAcceleratorAliases) {
    if (prefix == alias) {
      Throw(ErrorCode::kNotFound, "{}: Google Cloud names this accelerator type {}-{} (did you mean '{}-{}'?)", what,
            name, text.substr(dash + 1), name, text.substr(dash + 1));
    }
  }
  const AcceleratorFamily* f = FindAcceleratorFamily(prefix);
  if (f == nullptr) return std::nullopt;
  const std::string unit = f->counted_per_chip == 2 ? "TensorCores, 2 per chip" : "chips";
  const int64_t count = ParseIntIn(text.substr(dash + 1), what + ": the size", 1, kMaxTopologyDevices * 2);
  const int64_t chips = count / f->counted_per_chip;
  const bool power_of_two = chips > 0 && (chips & (chips - 1)) == 0;
  if (count % f->counted_per_chip != 0 || !power_of_two || chips < f->min_chips) {
    const int64_t smallest = f->min_chips * f->counted_per_chip;
    Throw(ErrorCode::kInvalidArgument,
          "{}: Cloud TPU {}-N counts {}; spmdsim knows the slice shapes of N = {}, {}, {}, ... (powers of two); "
          "for another shape give the chips as {}:{}",
          what, f->prefix, unit, smallest, 2 * smallest, 4 * smallest, f->preset,
          f->dims == 3 ? "XxYxZ (e.g. 16x16x24)" : "XxY");
  }
  return fmt::format("{}:{}", f->preset, SliceShape(chips, f->dims));
}

// How to write the dimensions of `name` (a known preset or not).
std::string DimsExample(const std::string& name) {
  for (const TpuFigures& f : kTpuFigures)
    if (name == f.preset) return f.dims == 3 ? fmt::format("XxYxZ chips, e.g. {}:4x4x4", name)
                                             : fmt::format("XxY chips, e.g. {}:4x4", name);
  if (name == "gpu") return "HOSTSxGPUS, e.g. gpu:2x8";
  if (name == "cpu") return "the number of devices, e.g. cpu:8";
  return fmt::format("the number of hosts, e.g. {}:4", name);
}

// Every preset and accelerator-type prefix, for did-you-mean.
std::vector<std::string> TopologyNames() {
  std::vector<std::string> names = Topology::PresetNames();
  for (const AcceleratorFamily& f : kAcceleratorFamilies) names.push_back(fmt::format("{}-N", f.prefix));
  return names;
}

[[noreturn]] void ThrowUnknownPreset(const std::string& name) {
  Throw(ErrorCode::kNotFound,
        "unknown topology preset {}{}; valid presets: {}; or a Cloud TPU accelerator type: v4-128, v5p-64, "
        "v5litepod-256, v6e-256",
        QuoteForError(name), DidYouMeanSuffix(name, TopologyNames()), fmt::join(Topology::PresetNames(), ", "));
}

// The dimensions after the colon, with a hint written for topologies (not array shapes).
std::vector<int64_t> ParseTopologyDims(const std::string& name, std::string_view dims_text, const std::string& what) {
  const std::vector<std::string> parts = Split(dims_text, 'x');
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string_view part = Trim(parts[i]);
    const bool digits = !part.empty() &&
                        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      Throw(ErrorCode::kInvalidArgument, "{}: dimension {} of {} is {}; {} takes {}", what, i + 1,
            QuoteForError(dims_text), part.empty() ? "empty" : fmt::format("{}, not a number", QuoteForError(part)),
            name, DimsExample(name));
    }
  }
  return ParseDims(dims_text, what);
}

}  // namespace

Topology Topology::Parse(std::string_view text, int num_slices) {
  if (const std::optional<std::string> preset = AcceleratorTypeAsPreset(Trim(text))) {
    Topology t = Parse(*preset, num_slices);
    t.accelerator_type_ = std::string(Trim(text));
    return t;
  }
  auto colon = text.find(':');
  std::string name(Trim(text.substr(0, colon)));
  const bool known = std::find(PresetNames().begin(), PresetNames().end(), name) != PresetNames().end();
  if (colon == std::string_view::npos) {
    Throw(ErrorCode::kInvalidArgument,
          "topology {} has no dimensions{}; write PRESET:DIMS, e.g. tpu-v4:2x2x4, tpu-v5e:4x4, dgx-h100:4, "
          "gpu:2x8, cpu:8 (presets: {}), or a Cloud TPU accelerator type (v4-128, v5p-64, v5litepod-256, v6e-256)",
          QuoteForError(text), known ? fmt::format(": {} takes {}", name, DimsExample(name))
                                     : DidYouMeanSuffix(name, TopologyNames()),
          fmt::join(PresetNames(), ", "));
  }
  if (!known) ThrowUnknownPreset(name);
  std::string_view dims_text = text.substr(colon + 1);
  std::string what = fmt::format("topology {}", QuoteForError(text));
  std::vector<int64_t> dims = ParseTopologyDims(name, dims_text, what);

  for (int64_t d : dims) {
    if (d > kMaxTopologyDevices)
      Throw(ErrorCode::kOutOfRange, "{}: dimension {} is too large; spmdsim simulates at most {} devices", what, d,
            kMaxTopologyDevices);
  }
  if (num_slices != 1 && name.rfind("tpu-", 0) != 0) {
    Throw(ErrorCode::kInvalidArgument, "{}: slices apply to TPU presets only", what);
  }
  // Devices per unit of the dimensions' product, to bound the count before building anything.
  const GpuFigures* gpu = name == "gpu" ? nullptr : FindGpuFigures(name);
  int64_t per_unit = gpu != nullptr ? gpu->gpus_per_host : 1;
  for (const TpuFigures& f : kTpuFigures)
    if (name == f.preset) per_unit = f.cores_per_chip;
  CheckDeviceCount(what, dims, num_slices, per_unit);
  for (int g = 0; g < static_cast<int>(std::size(kTpuFigures)); ++g) {
    const TpuFigures& f = kTpuFigures[g];
    if (name != f.preset) continue;
    if (static_cast<int>(dims.size()) != f.dims) {
      Throw(ErrorCode::kInvalidArgument, "{}: {} is a {}-D torus, give {} chips, e.g. {}", what, name, f.dims,
            f.dims == 3 ? "XxYxZ" : "XxY", f.dims == 3 ? name + ":2x2x4" : name + ":4x4");
    }
    std::array<int, 3> chips = {static_cast<int>(dims[0]), static_cast<int>(dims[1]),
                                f.dims == 3 ? static_cast<int>(dims[2]) : 1};
    return Tpu(static_cast<TpuGeneration>(g), chips, num_slices);
  }
  if (gpu != nullptr) {
    if (dims.size() != 1) {
      Throw(ErrorCode::kInvalidArgument, "{}: give the number of {}-GPU hosts, e.g. {}:4", what, gpu->gpus_per_host,
            name);
    }
    return Gpu(name, static_cast<int>(dims[0]), gpu->gpus_per_host);
  }
  if (name == "gpu") {
    if (dims.size() != 2) Throw(ErrorCode::kInvalidArgument, "{}: give HOSTSxGPUS, e.g. gpu:2x8", what);
    return Gpu("gpu", static_cast<int>(dims[0]), static_cast<int>(dims[1]));
  }
  if (name == "cpu") {
    if (dims.size() != 1) Throw(ErrorCode::kInvalidArgument, "{}: give the number of devices, e.g. cpu:8", what);
    return Cpu(static_cast<int>(dims[0]));
  }
  ThrowUnknownPreset(name);
}

std::string Topology::ChipCountText() const {
  switch (platform_) {
    case Platform::kGpu:
      return fmt::format("{} GPU{}", num_devices(), num_devices() == 1 ? "" : "s");
    case Platform::kCpu:
      return fmt::format("{} CPU device{}", num_devices(), num_devices() == 1 ? "" : "s");
    case Platform::kTpu:
      break;
  }
  std::vector<std::string> notes;
  if (cores_per_chip_ > 1)
    notes.push_back(fmt::format("{} TensorCores each, one device per TensorCore", cores_per_chip_));
  if (!accelerator_type_.empty()) {
    const size_t dash = accelerator_type_.rfind('-');
    const AcceleratorFamily* f = FindAcceleratorFamily(accelerator_type_.substr(0, dash));
    if (f != nullptr && f->counted_per_chip == 2) {
      notes.push_back(fmt::format("Cloud TPU {} counts {} TensorCores, 2 per chip", accelerator_type_,
                                  accelerator_type_.substr(dash + 1)));
    } else {
      notes.push_back(fmt::format("Cloud TPU {} counts chips", accelerator_type_));
    }
  }
  std::string out = fmt::format("{} chip{}", num_chips(), num_chips() == 1 ? "" : "s");
  if (!notes.empty()) out += fmt::format(" ({})", fmt::join(notes, "; "));
  return out;
}

std::string Topology::ToString() const {
  std::string dims;
  switch (platform_) {
    case Platform::kTpu:
      dims = (FiguresOf(*tpu_generation_).dims == 3) ? fmt::format("{}", fmt::join(chips_per_dim_, "x"))
                                                      : fmt::format("{}x{}", chips_per_dim_[0], chips_per_dim_[1]);
      break;
    case Platform::kGpu:
      dims = (preset_ == "gpu") ? fmt::format("{}x{}", chips_per_dim_[1], chips_per_dim_[0])
                                : fmt::format("{}", chips_per_dim_[1]);
      break;
    case Platform::kCpu: dims = fmt::format("{}", chips_per_dim_[0]); break;
  }
  std::string s = fmt::format("{}:{}", preset_, dims);
  if (num_slices_ > 1) s += fmt::format(" x {} slices", num_slices_);
  return s;
}

const Device& Topology::device(int id) const {
  if (id < 0 || id >= num_devices()) {
    Throw(ErrorCode::kOutOfRange, "{} has no device {}; ids are 0..{}", ToString(), id, num_devices() - 1);
  }
  return devices_[id];
}

const LinkSpec& Topology::link(LinkClass link_class) const {
  auto it = links_.find(link_class);
  if (it == links_.end()) {
    std::vector<std::string_view> present;
    for (const auto& [c, _] : links_) present.push_back(LinkClassName(c));
    Throw(ErrorCode::kNotFound, "{} has no {} links; it has: {}", ToString(), LinkClassName(link_class),
          fmt::join(present, ", "));
  }
  return it->second;
}

void Topology::SetLink(LinkClass link_class, LinkSpec spec) {
  if (!(spec.bandwidth_Bps > 0) || !(spec.latency_s >= 0)) {
    Throw(ErrorCode::kInvalidArgument, "link {}: bandwidth must be > 0 and latency >= 0, got {} B/s and {} s",
          LinkClassName(link_class), spec.bandwidth_Bps, spec.latency_s);
  }
  links_[link_class] = std::move(spec);
}

void Topology::SetWraparound(std::array<bool, 3> wraparound) { wraparound_ = wraparound; }

void Topology::SetMemoryBytes(int64_t bytes) {
  if (bytes <= 0) Throw(ErrorCode::kInvalidArgument, "device memory must be > 0 bytes, got {}", bytes);
  memory_bytes_ = bytes;
}

void Topology::SetPeakFlops(DType dtype, double flops) {
  if (!(flops > 0)) {
    Throw(ErrorCode::kInvalidArgument, "peak FLOP/s for {} must be > 0, got {}", DTypeShortName(dtype), flops);
  }
  peak_flops_[dtype] = flops;
}

}  // namespace spmdsim
