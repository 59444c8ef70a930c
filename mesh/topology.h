// The physical machine a mesh is laid on: its devices, where they sit, and how they are wired.
//
// Three families, with the device numbering JAX's runtimes use:
//  - TPU: chips at integer coordinates (x, y, z) of a cuboid X x Y x Z, `cores_per_chip` devices per chip
//    (v2/v3: 2, later generations 1), hosts that each hold a block of chips, and `num_slices` identical slices
//    joined by DCN.
//      id            = (((slice * Z + z) * Y + y) * X + x) * C + core        (x fastest)
//      process_index = host number, hosts numbered x-fastest within a slice, slice-major
//    Example: tpu-v4:2x2x4 (host block 2x2x1) has 16 devices; device 5 sits at (1,0,1), on host 1.
//  - GPU: `num_hosts` hosts of `gpus_per_host` GPUs; id = host * G + local, process_index = slice_index = host.
//    coords are (local, host, 0) for printing only; JAX's GPU devices have none.
//  - CPU: N devices in a row on one host.
//
// Every figure (bandwidth, latency, HBM, peak FLOP/s) carries its source; bandwidths are stored ONE-WAY per
// link in bytes/s whatever the source states, and `source` says how the one-way figure was derived.
// Topology is an immutable value; build it with a preset (Topology::Parse("tpu-v4:2x2x4")) or Topology::Tpu/Gpu/Cpu.
#ifndef SPMDSIM_MESH_TOPOLOGY_H_
#define SPMDSIM_MESH_TOPOLOGY_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"

namespace spmdsim {

enum class Platform { kTpu, kGpu, kCpu };
std::string_view PlatformName(Platform platform);  // "tpu", "gpu", "cpu" (JAX's platform strings)

// The kinds of wire a collective can cross.
enum class LinkClass {
  kIci,         // TPU inter-chip interconnect (torus links)
  kNvlink,      // NVLink / NVSwitch inside a GPU host
  kPcie,        // PCIe between a device and its host
  kDcn,         // data-centre network between TPU slices / hosts
  kInfiniband,  // InfiniBand between GPU hosts
  kHostMemory,  // shared memory between CPU devices of one host
};
std::string_view LinkClassName(LinkClass link);  // "ici", "nvlink", "pcie", "dcn", "infiniband", "host_memory"
// Inverse of LinkClassName; throws Error(kNotFound) listing the valid names.
LinkClass ParseLinkClass(std::string_view name);

// Hockney alpha-beta figures for one link class.
struct LinkSpec {
  double latency_s = 0;      // alpha: per message (per hop on a torus), seconds
  double bandwidth_Bps = 0;  // beta^-1: ONE-WAY bytes/s per link (per port for ICI, per GPU for NVLink/IB)
  std::string source;        // where the figure comes from and how the one-way figure was derived
};

// GPU generation: selects NCCL's per-architecture constants (cost/nccl_model.h).
enum class GpuGeneration { kNone, kVolta, kAmpere, kHopper, kBlackwell };
std::string_view GpuGenerationName(GpuGeneration generation);  // "none", "volta", "ampere", "hopper", "blackwell"

// The inter-node network of a GPU cluster (one rail-optimised fat tree: NIC i of every node on leaf switch i).
// Example (DGX H100): 8 NICs per node, 400 Gb/s each -> nic_Bps = 50e9 one-way, switch_latency_s 1.3e-6.
struct NetworkSpec {
  int nics_per_node = 0;         // NICs per host (DGX: 8, one per GPU)
  double nic_Bps = 0;            // ONE-WAY line rate of one NIC, bytes/s
  double latency_s = 0;          // one message one way: NIC + switch hops, seconds
  double oversubscription = 1;   // >= 1: uplink oversubscription of the fabric (1 = non-blocking)
  bool rail_optimized = true;    // GPU i uses NIC i (PXN moves data to the rail's GPU over NVLink)
  std::string source;
};

// One device as JAX describes it (jax.Device: id, process_index, slice_index, coords, core_on_chip).
struct Device {
  int id = 0;
  int process_index = 0;
  int slice_index = 0;
  std::array<int, 3> coords = {0, 0, 0};
  int core_on_chip = 0;
};

// The most devices a topology may have: Parse refuses more before building anything (a typo such as
// "cpu:10000000" or "--slices 1000" must not take minutes and gigabytes).
inline constexpr int64_t kMaxTopologyDevices = int64_t{1} << 16;

class Topology {
 public:
  // TPU generations with presets ("tpu-v2" ... "tpu-v6e").
  enum class TpuGeneration { kV2, kV3, kV4, kV5e, kV5p, kV6e };

  // A TPU slice (or `num_slices` identical slices) of chips_per_dim = {X, Y, Z}. A 2-D generation (v2, v3,
  // v5e, v6e) takes Z == 1. Wraparound follows the generation's rule unless overridden later.
  // REQUIRES: every dimension >= 1, num_slices >= 1.
  static Topology Tpu(TpuGeneration generation, std::array<int, 3> chips_per_dim, int num_slices = 1);
  // `num_hosts` hosts of `gpus_per_host` GPUs; `preset` is one of GpuPresetNames() or "gpu" (generic H100).
  static Topology Gpu(std::string_view preset, int num_hosts, int gpus_per_host);
  static Topology Cpu(int num_devices);

  // Parses the CLI / scenario form: "tpu-v4:2x2x4", "tpu-v5e:4x4", "tpu-v3:4x4", "dgx-h100:4" (4 hosts of 8),
  // "dgx-a100:2", "gb200-nvl72:1" (one 72-GPU NVLink domain), "gpu:2x8" (2 hosts of 8), "cpu:8". `num_slices` applies
  // to TPU presets only. Throws Error(kInvalidArgument / kNotFound) that names the part at fault and lists the valid
  // presets (with a did-you-mean), and Error(kOutOfRange) when the topology would have more than kMaxTopologyDevices
  // devices. Also Cloud TPU accelerator types (the `--accelerator-type` of `gcloud compute tpus`): "v2-8", "v3-32",
  // "v4-128", "v5p-64", "v5litepod-256", "v6e-256". v2, v3, v4 and v5p count TensorCores (2 per chip: v5p-64 is 32
  // chips), v5e ("v5litepod") and v6e count chips. The slice shape is Google Cloud's for that size (a power of
  // two: 2-D X x Y with X <= Y as square as possible, 3-D the same with 4 chips as 2x2x1; v4-128 = 4x4x4,
  // v5p-64 = 2x4x4, v5litepod-256 = 16x16). accelerator_type() then returns the name as given.
  static Topology Parse(std::string_view text, int num_slices = 1);
  // The preset names Parse accepts, for help texts and error messages.
  static const std::vector<std::string>& PresetNames();

  Platform platform() const { return platform_; }
  const std::string& preset() const { return preset_; }            // "tpu-v4", "dgx-h100", "cpu"
  // JAX's device_kind: "TPU v4", "NVIDIA H100 80GB HBM3", "cpu".
  const std::string& device_kind() const { return device_kind_; }
  std::optional<TpuGeneration> tpu_generation() const { return tpu_generation_; }
  std::string ToString() const;  // the Parse form, with " x K slices" when several: "tpu-v4:2x2x4"
  // The Cloud TPU accelerator type it was parsed from ("v5p-64"), "" when given as a preset.
  const std::string& accelerator_type() const { return accelerator_type_; }
  // Chips of all slices (GPUs: GPUs; CPU: devices). A v2 / v3 device is one core: a chip holds two.
  int num_chips() const { return num_devices() / cores_per_chip_; }
  // "32 chips (Cloud TPU v5p-64 counts 64 TensorCores, 2 per chip)", "256 chips (Cloud TPU v5litepod-256 counts
  // chips)", "16 chips", "4 chips (2 TensorCores each, one device per TensorCore)" (v2, v3), "8 GPUs", "8 CPU devices".
  std::string ChipCountText() const;

  const std::vector<Device>& devices() const { return devices_; }
  int num_devices() const { return static_cast<int>(devices_.size()); }
  const Device& device(int id) const;  // throws Error(kOutOfRange) naming the valid id range

  // TPU: chips per dimension of ONE slice, cores per chip, chips per host block, slices.
  // GPU: chips_per_dim = {gpus_per_host, num_hosts, 1}; CPU: {N, 1, 1}.
  const std::array<int, 3>& chips_per_dim() const { return chips_per_dim_; }
  int cores_per_chip() const { return cores_per_chip_; }
  const std::array<int, 3>& host_block() const { return host_block_; }
  int num_slices() const { return num_slices_; }
  int num_processes() const { return num_processes_; }
  int devices_per_process() const { return num_devices() / num_processes_; }
  // Whether each torus dimension wraps around (TPU only; false elsewhere).
  const std::array<bool, 3>& wraparound() const { return wraparound_; }

  // Link figures by class; only the classes this machine has are present.
  const std::map<LinkClass, LinkSpec>& links() const { return links_; }
  const LinkSpec& link(LinkClass link_class) const;  // throws Error(kNotFound) listing the classes present

  // GPU only: the generation (NCCL's constants), whether the NVSwitch does NVLink SHARP (NVLS), whether the
  // host CPU is AMD (NCCL's multi-node LL bandwidth and network overhead depend on it), the network.
  GpuGeneration gpu_generation() const { return gpu_generation_; }
  bool nvlink_sharp() const { return nvlink_sharp_; }
  bool amd_host() const { return amd_host_; }
  const NetworkSpec& network() const { return network_; }
  int gpus_per_host() const { return platform_ == Platform::kGpu ? chips_per_dim_[0] : 0; }

  // Per device: memory capacity in bytes and its bandwidth (bytes/s), peak FLOP/s per dtype (bf16, f32, ...).
  // For v2/v3 a device is one core: half a chip.
  int64_t memory_bytes() const { return memory_bytes_; }
  double memory_bandwidth_Bps() const { return memory_bandwidth_Bps_; }
  const std::map<DType, double>& peak_flops() const { return peak_flops_; }
  const std::string& figures_source() const { return figures_source_; }

  // Overrides for scenario files (each keeps the topology valid; bandwidths one-way bytes/s).
  void SetLink(LinkClass link_class, LinkSpec spec);
  void SetWraparound(std::array<bool, 3> wraparound);
  void SetMemoryBytes(int64_t bytes);
  // GPU only: replaces the network and keeps the infiniband link (per-GPU share of the node's NICs) in step.
  // Throws Error(kInvalidArgument) for a non-GPU topology, nics < 1, bandwidth <= 0, latency < 0 or
  // oversubscription < 1.
  void SetNetwork(NetworkSpec network);
  void SetNvlinkSharp(bool enabled);
  void SetPeakFlops(DType dtype, double flops);

 private:
  Topology() = default;
  void BuildTpuDevices();

  Platform platform_ = Platform::kCpu;
  std::string preset_;
  std::string accelerator_type_;
  std::string device_kind_;
  std::optional<TpuGeneration> tpu_generation_;
  std::array<int, 3> chips_per_dim_ = {1, 1, 1};
  int cores_per_chip_ = 1;
  std::array<int, 3> host_block_ = {1, 1, 1};
  int num_slices_ = 1;
  int num_processes_ = 1;
  std::array<bool, 3> wraparound_ = {false, false, false};
  std::vector<Device> devices_;
  std::map<LinkClass, LinkSpec> links_;
  int64_t memory_bytes_ = 0;
  double memory_bandwidth_Bps_ = 0;
  std::map<DType, double> peak_flops_;
  std::string figures_source_;
  GpuGeneration gpu_generation_ = GpuGeneration::kNone;
  bool nvlink_sharp_ = false;
  bool amd_host_ = false;
  NetworkSpec network_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_MESH_TOPOLOGY_H_
