#include "mesh/t5x_mesh.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/strings.h"
#include "mesh/mesh_utils.h"

namespace spmdsim::t5x {
namespace {


std::vector<int64_t> Widen(const HardwareMesh& values) { return {values.begin(), values.end()}; }

std::string Tuple(const HardwareMesh& values) { return PyTuple(values); }

std::vector<int> Divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// The names of the hardware mesh dimensions, for messages.
std::vector<std::string_view> DimNames(size_t rank) {
  if (rank == 4) return {"x", "y", "z", "cores"};
  return {"hosts", "devices per host"};
}

std::vector<const Device*> DevicesOfProcess(const Topology& topology, int process_index) {
  std::vector<const Device*> out;
  for (const Device& d : topology.devices()) {
    if (d.process_index == process_index) out.push_back(&d);
  }
  return out;
}

// The device that sorts last by GetCoords (t5x: sorted(devices, key=get_coords)[-1]).
const Device& LastByCoords(const Topology& topology, const std::vector<const Device*>& devices) {
  const Device* last = devices.front();
  HardwareMesh last_coords = GetCoords(topology, *last);
  for (const Device* d : devices) {
    HardwareMesh c = GetCoords(topology, *d);
    if (last_coords < c) {
      last = d;
      last_coords = std::move(c);
    }
  }
  return *last;
}

const Topology& Require(const std::shared_ptr<const Topology>& topology, std::string_view what) {
  if (!topology) Throw(ErrorCode::kInvalidArgument, "{} needs a topology, got none", what);
  return *topology;
}

// t5x's `dh_dd_mh_md`: a global dimension g split by a model dimension m and a local (per-host) dimension l
// into (data hosts, data devices, model hosts, model devices).
std::array<int, 4> SplitForHostTiling(int g, int m, int l, size_t dim, const HardwareMesh& submesh,
                                      const HardwareMesh& local) {
  int d = g / m;
  bool ok = (m >= l) ? (m % l == 0) : (l % m == 0);
  if (!ok) {
    std::vector<std::string> valid;
    for (int v : Divisors(g)) {
      if ((v >= l && v % l == 0) || (v < l && l % v == 0)) valid.push_back(std::to_string(v));
    }
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kAssertionError,
              "to tile the mesh by hosts, each dimension of the model parallel submesh must be either a factor "
              "or a multiple of the corresponding dimension of the per-host submesh: submesh {} has {} = {} "
              "against {} per host in {}; valid {} here: {} (or pass tile_by_host_if_needed=false)",
              Tuple(submesh), DimNames(submesh.size())[dim], m, l, Tuple(local), DimNames(submesh.size())[dim],
              fmt::join(valid, ", "));
  }
  if (m >= l) return {d, 1, m / l, l};
  return {d / (l / m), l / m, 1, m};
}

// get_mesh's preconditions on the model parallel submesh against the global and the host's device bounds.
void CheckSubmesh(const HardwareMesh& submesh, const HardwareMesh& global, const HardwareMesh& local_bounds, int host,
                  const Topology& topology) {
  const size_t ndim = global.size();
  if (submesh.size() != ndim) {
    Throw(ErrorCode::kInvalidArgument,
          "the model parallel submesh {} must have {} entries ({}) on {}, like the global device mesh {}",
          Tuple(submesh), ndim, fmt::join(DimNames(ndim), ", "), topology.ToString(), Tuple(global));
  }
  for (size_t i = 0; i < ndim; ++i) {
    if (submesh[i] < 1) {
      Throw(ErrorCode::kInvalidArgument, "model parallel submesh {}: {} must be >= 1, got {}", Tuple(submesh),
            DimNames(ndim)[i], submesh[i]);
    }
  }
  for (size_t i = 0; i < ndim; ++i) {
    if (global[i] % submesh[i] != 0) {
      std::vector<std::string> valid;
      for (size_t j = 0; j < ndim; ++j) {
        valid.push_back(fmt::format("{} in {{{}}}", DimNames(ndim)[j], fmt::join(Divisors(global[j]), ", ")));
      }
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kAssertionError,
                "each dimension of the model parallel submesh {} must be a factor of the corresponding "
                "dimension of the global device mesh {}; valid: {}",
                Tuple(submesh), Tuple(global), fmt::join(valid, ", "));
    }
  }
  for (size_t i = 0; i < ndim; ++i) {
    if (global[i] % local_bounds[i] != 0) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kAssertionError,
                "the bounds {} of host {}'s devices (its highest-coordinate device + 1) must divide the global "
                "device mesh {}, but {} = {} does not divide {}; t5x reads the local devices of process 0, "
                "whose bounds are its host block",
                Tuple(local_bounds), host, Tuple(global), DimNames(ndim)[i], local_bounds[i], global[i]);
    }
  }
}

// Every device at its hardware coordinates (GetCoords) in an array of the global mesh's shape.
DeviceArray PlaceByCoords(const Topology& topology, const std::vector<const Device*>& all,
                          const HardwareMesh& global) {
  std::vector<int64_t> shape = Widen(global);
  std::vector<int64_t> strides = RowMajorStrides(shape);
  std::vector<int> cells(static_cast<size_t>(NumElements(shape)), -1);
  for (const Device* d : all) {
    HardwareMesh c = GetCoords(topology, *d);
    int64_t at = 0;
    for (size_t i = 0; i < global.size(); ++i) at += c[i] * strides[i];
    cells[at] = d->id;
  }
  for (int id : cells) SPMDSIM_CHECK(id >= 0, "{}: a hardware mesh cell has no device", topology.ToString());
  return DeviceArray(shape, std::move(cells));
}

// The global mesh `g`, the submesh `m` and the devices after t5x's Z-major reordering: a submesh that spans the
// YZ or the XZ plane swaps Y or X with Z (and turns host tiling off). `swap` says which ("yz", "xz", or "").
struct ZMajorOrder {
  HardwareMesh g, m;
  DeviceArray devices;
  bool tile_by_host;
  std::string swap;
};

ZMajorOrder ReorderZMajor(const HardwareMesh& global, const HardwareMesh& submesh, DeviceArray devices,
                          bool tile_by_host) {
  ZMajorOrder out{global, submesh, std::move(devices), tile_by_host, ""};
  if (global.size() != 4) return out;
  const int gx = global[0], gy = global[1], gz = global[2], gc = global[3];
  const int mx = submesh[0], my = submesh[1], mz = submesh[2], mc = submesh[3];
  auto require_all_cores = [&](std::string_view plane) {
    if (mc != gc) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kAssertionError,
                "({}, {}): submesh {} spans the {} plane, which t5x reorders Z-major, and that needs every "
                "core of a chip: cores must be {}, got {}",
                mc, gc, Tuple(submesh), plane, gc, mc);
    }
  };
  if ((mx == gx && gx > 1 && my == 1 && mz == 1) || (mx == 1 && my == gy && gy > 1 && mz == gz && gz > 1)) {
    require_all_cores("YZ");
    out.g = {gx, gz, gy, gc};
    out.m = {mx, mz, my, mc};
    out.devices = out.devices.Transpose({0, 2, 1, 3});
    out.tile_by_host = false;
    out.swap = "yz";
  }
  if ((my == gy && gy > 1 && mx == 1 && mz == 1) || (my == 1 && mx == gx && gx > 1 && mz == gz && gz > 1)) {
    require_all_cores("XZ");
    out.g = {gz, gy, gx, gc};
    out.m = {mz, my, mx, mc};
    out.devices = out.devices.Transpose({2, 1, 0, 3});
    out.tile_by_host = false;
    out.swap = "xz";
  }
  return out;
}

// The devices as [data, model]: each dimension split into (data, model) parts, or with host tiling into (data
// hosts, data devices, model hosts, model devices), the parts of one kind gathered, model fastest.
DeviceArray SplitDataModel(const ZMajorOrder& order, const HardwareMesh& submesh, const HardwareMesh& local_bounds) {
  const HardwareMesh& g = order.g;
  const HardwareMesh& m = order.m;
  const int n = static_cast<int>(g.size());
  std::vector<int64_t> split;
  std::vector<int> perm;
  if (order.tile_by_host) {
    for (int i = 0; i < n; ++i) {
      std::array<int, 4> parts = SplitForHostTiling(g[i], m[i], local_bounds[i], i, submesh, local_bounds);
      split.insert(split.end(), parts.begin(), parts.end());
    }
    for (int block = 0; block < 4; ++block) {
      for (int i = 0; i < n; ++i) perm.push_back(4 * i + block);
    }
  } else {
    for (int i = 0; i < n; ++i) {
      split.push_back(g[i] / m[i]);
      split.push_back(m[i]);
    }
    for (int block = 0; block < 2; ++block) {
      for (int i = 0; i < n; ++i) perm.push_back(2 * i + block);
    }
  }
  DeviceArray devices = order.devices.Reshape(split).Transpose(perm);
  int64_t model = NumElements(Widen(submesh));
  return devices.Reshape({devices.size() / model, model});
}

}  // namespace

HardwareMesh GetCoords(const Topology& topology, const Device& device) {
  if (topology.platform() == Platform::kTpu) {
    return {device.coords[0], device.coords[1], device.coords[2], device.core_on_chip};
  }
  return {device.process_index, device.id % topology.devices_per_process()};
}

HardwareMesh BoundsFromLastDevice(const Topology& topology, const Device& last_device) {
  if (topology.platform() == Platform::kTpu) {
    return {last_device.coords[0] + 1, last_device.coords[1] + 1, last_device.coords[2] + 1,
            last_device.core_on_chip + 1};
  }
  return {topology.num_processes(), topology.devices_per_process()};
}

Mesh GetMesh(const HardwareMesh& model_parallel_submesh, std::shared_ptr<const Topology> topology_ptr, int host,
             bool tile_by_host_if_needed, GetMeshSteps* steps) {
  const Topology& topology = Require(topology_ptr, "get_mesh");
  if (topology.num_slices() > 1) {
    Throw(ErrorCode::kInvalidArgument,
          "get_mesh places devices by their coordinates, which repeat in each of the {} slices of {}; t5x "
          "would keep one device per coordinate and drop the rest. Use a single slice, or a hybrid ICI/DCN "
          "mesh (default_mesh with ici_mesh_shape and dcn_mesh_shape) for several",
          topology.num_slices(), topology.ToString());
  }
  std::vector<const Device*> all;
  for (const Device& d : topology.devices()) all.push_back(&d);
  std::vector<const Device*> local = DevicesOfProcess(topology, host);
  if (local.empty()) {
    Throw(ErrorCode::kOutOfRange, "get_mesh: host {} has no devices; {} has processes 0..{}", host,
          topology.ToString(), topology.num_processes() - 1);
  }
  HardwareMesh global = BoundsFromLastDevice(topology, LastByCoords(topology, all));
  HardwareMesh local_bounds = BoundsFromLastDevice(topology, LastByCoords(topology, local));
  const HardwareMesh& submesh = model_parallel_submesh;
  CheckSubmesh(submesh, global, local_bounds, host, topology);
  const ZMajorOrder order =
      ReorderZMajor(global, submesh, PlaceByCoords(topology, all, global), tile_by_host_if_needed);
  DeviceArray devices = SplitDataModel(order, submesh, local_bounds);
  if (steps) {
    steps->global_hardware_mesh = global;
    steps->local_hardware_mesh = local_bounds;
    steps->z_major_swap = order.swap;
    steps->submesh_after_swap = order.m;
    steps->tiled_by_host = order.tile_by_host;
  }
  return Mesh(std::move(devices), {"data", "model"}, std::move(topology_ptr));
}

Mesh GetGpuMesh(int num_partitions, std::shared_ptr<const Topology> topology_ptr) {
  const Topology& topology = Require(topology_ptr, "get_gpu_mesh");
  if (num_partitions < 1) {
    Throw(ErrorCode::kInvalidArgument, "get_gpu_mesh: num_partitions must be >= 1, got {}", num_partitions);
  }
  const int nvlink_size = topology.devices_per_process();
  const int dcn_size = topology.num_processes();
  const int nvlink_mp = std::min(num_partitions, nvlink_size);
  const int nvlink_dp = nvlink_size / nvlink_mp;
  const int dcn_mp = num_partitions / nvlink_mp;
  if (nvlink_size % nvlink_mp != 0 || num_partitions % nvlink_mp != 0) {
    std::vector<int> valid = Divisors(nvlink_size);
    for (int k = 2; k <= dcn_size; ++k) {
      if (dcn_size % k == 0) valid.push_back(k * nvlink_size);
    }
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kAssertionError,
              "number of partitions on GPU must be a factor or multiple of the number of local devices: {} "
              "partitions against {} devices per host on {}; valid here: {}",
              num_partitions, nvlink_size, topology.ToString(), fmt::join(valid, ", "));
  }
  const int dcn_dp = dcn_size / dcn_mp;
  if (dcn_dp * dcn_mp != dcn_size) {
    // create_hybrid_device_mesh's check, worded as it reads with the lists t5x passes.
    std::vector<int> valid;
    for (int k = 1; k <= dcn_size; ++k) {
      if (dcn_size % k == 0) valid.push_back(k * nvlink_size);
    }
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Number of slices {} must equal the product of dcn_mesh_shape [{}, {}]: get_gpu_mesh spreads {} "
              "partitions over {} hosts of {} devices; partitions beyond one host must split the hosts evenly: "
              "valid multiples here: {}",
              dcn_size, dcn_dp, dcn_mp, num_partitions, dcn_size, nvlink_size, fmt::join(valid, ", "));
  }
  CreateHybridDeviceMeshOptions options;
  options.process_is_granule = true;
  DeviceArray devices = CreateHybridDeviceMesh({nvlink_dp, nvlink_mp}, {dcn_dp, dcn_mp}, topology,
                                               JaxDevicesOrder(topology), options);
  return Mesh(std::move(devices), {"data", "model"}, std::move(topology_ptr));
}

Mesh GetCpuMesh(std::shared_ptr<const Topology> topology_ptr) {
  const Topology& topology = Require(topology_ptr, "get_cpu_mesh");
  const int processes = topology.num_processes();
  const int per_process = topology.devices_per_process();
  std::vector<int> cells(static_cast<size_t>(processes) * per_process, -1);
  for (const Device& d : topology.devices()) {
    int64_t at = static_cast<int64_t>(d.process_index) * per_process + d.id % per_process;
    if (cells[at] != -1) {
      Throw(ErrorCode::kInvalidArgument,
            "get_cpu_mesh puts device d at (process_index, id % local_device_count); on {} devices {} and {} "
            "both land on ({}, {}), so t5x would overwrite one and leave a cell empty. It suits topologies "
            "whose process p holds ids p*L .. p*L+L-1 (cpu, gpu, one-core TPUs with one host row)",
            topology.ToString(), cells[at], d.id, d.process_index, d.id % per_process);
    }
    cells[at] = d.id;
  }
  return Mesh(DeviceArray({processes, per_process}, std::move(cells)), {"data", "model"},
              std::move(topology_ptr));
}

HardwareMesh DefaultSubmesh(int num_partitions, const Topology& topology) {
  const Device& last = topology.devices().back();
  HardwareMesh bounds = BoundsFromLastDevice(topology, last);
  const std::string& kind = topology.device_kind();
  std::optional<HardwareMesh> mps;
  if (kind == "TPU v2" || kind == "TPU v3") {
    switch (num_partitions) {
      case 1: mps = HardwareMesh{1, 1, 1, 1}; break;
      case 2: mps = HardwareMesh{1, 1, 1, 2}; break;
      case 4: mps = HardwareMesh{2, 1, 1, 2}; break;
      case 8: mps = HardwareMesh{2, 2, 1, 2}; break;
      case 16: mps = HardwareMesh{4, 2, 1, 2}; break;
      default: break;
    }
  } else if ((kind == "TPU v4" || kind == "TPU v4 lite") && bounds.size() == 4 && bounds[3] == 1) {
    switch (num_partitions) {
      case 1: mps = HardwareMesh{1, 1, 1, 1}; break;
      case 2: mps = HardwareMesh{1, 2, 1, 1}; break;
      case 4: mps = bounds[0] >= 4 ? HardwareMesh{4, 1, 1, 1} : HardwareMesh{2, 2, 1, 1}; break;
      case 8: mps = bounds[2] >= 8 ? HardwareMesh{1, 1, 8, 1} : HardwareMesh{4, 2, 1, 1}; break;
      case 16:
        if (bounds[2] >= 16) {
          mps = HardwareMesh{1, 1, 16, 1};
        } else if (bounds[0] >= 8) {
          mps = HardwareMesh{8, 2, 1, 1};
        } else if (bounds[0] >= 4) {
          mps = HardwareMesh{4, 4, 1, 1};
        } else {
          mps = HardwareMesh{2, 2, 4, 1};
        }
        break;
      default: break;
    }
  }
  if (!mps) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "No default mesh for this configuration: specify config.model_parallel_submesh explicitly. \n"
              "Platform: {}\nDevice kind: {}\nNum partitions: {}\nBounds: {}\n"
              "t5x has defaults only for device kinds 'TPU v2' and 'TPU v3', and 'TPU v4' / 'TPU v4 lite' with "
              "one core per chip, each with num_partitions 1, 2, 4, 8 or 16",
              PlatformName(topology.platform()), kind, num_partitions, Tuple(bounds));
  }
  return *mps;
}

Mesh DefaultMesh(int num_partitions, const std::optional<HardwareMesh>& model_parallel_submesh,
                 std::shared_ptr<const Topology> topology_ptr,
                 const std::optional<std::vector<int64_t>>& ici_mesh_shape,
                 const std::optional<std::vector<int64_t>>& dcn_mesh_shape) {
  const Topology& topology = Require(topology_ptr, "default_mesh");
  if (ici_mesh_shape && dcn_mesh_shape) {
    if (ici_mesh_shape->size() != 3 || dcn_mesh_shape->size() != 3) {
      Throw(ErrorCode::kInvalidArgument,
            "default_mesh names the hybrid mesh's axes ('replica', 'data', 'model'): ici_mesh_shape {} and "
            "dcn_mesh_shape {} must have 3 entries each",
            PyTuple(*ici_mesh_shape), PyTuple(*dcn_mesh_shape));
    }
    DeviceArray devices = CreateHybridDeviceMesh(*ici_mesh_shape, *dcn_mesh_shape, topology);
    return Mesh(std::move(devices), {"replica", "data", "model"}, std::move(topology_ptr));
  }
  if (model_parallel_submesh && !model_parallel_submesh->empty()) {
    return GetMesh(*model_parallel_submesh, std::move(topology_ptr));
  }
  switch (topology.platform()) {
    case Platform::kCpu: return GetCpuMesh(std::move(topology_ptr));
    case Platform::kGpu: return GetGpuMesh(num_partitions, std::move(topology_ptr));
    case Platform::kTpu: break;
  }
  return GetMesh(DefaultSubmesh(num_partitions, topology), std::move(topology_ptr));
}

Mesh LocalMesh(const Mesh& global_mesh, int process_index) {
  const Topology* topology = global_mesh.topology();
  if (!topology) Throw(ErrorCode::kInvalidArgument, "a local mesh needs the mesh's topology; this mesh has none");
  if (global_mesh.empty()) return global_mesh;
  const int rank = global_mesh.rank();
  std::vector<int64_t> lo(rank, -1), hi(rank, -1);
  for (int64_t p = 0; p < global_mesh.size(); ++p) {
    if (topology->device(global_mesh.DeviceAt(p)).process_index != process_index) continue;
    std::vector<int64_t> c = global_mesh.CoordsOfPosition(p);
    for (int a = 0; a < rank; ++a) {
      lo[a] = lo[a] < 0 ? c[a] : std::min(lo[a], c[a]);
      hi[a] = std::max(hi[a], c[a]);
    }
  }
  if (lo[0] < 0) {
    Throw(ErrorCode::kOutOfRange, "process {} has no device in the mesh; {} has processes 0..{}", process_index,
          topology->ToString(), topology->num_processes() - 1);
  }
  std::vector<int64_t> shape(rank);
  for (int a = 0; a < rank; ++a) shape[a] = hi[a] - lo[a] + 1;
  std::vector<int> ids;
  std::vector<std::string> strangers;
  std::vector<int64_t> index(rank, 0);
  for (int64_t k = 0; k < NumElements(shape); ++k) {
    int64_t rest = k;
    for (int a = rank - 1; a >= 0; --a) {
      index[a] = lo[a] + rest % shape[a];
      rest /= shape[a];
    }
    int id = global_mesh.DeviceAt(global_mesh.PositionOf(index));
    int owner = topology->device(id).process_index;
    if (owner != process_index && strangers.size() < 4) {
      strangers.push_back(fmt::format("device {} of process {}", id, owner));
    }
    ids.push_back(id);
  }
  if (!strangers.empty()) {
    std::vector<std::string> box;
    for (int a = 0; a < rank; ++a) box.push_back(fmt::format("{}: {}..{}", global_mesh.axis_names()[a], lo[a], hi[a]));
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "When passing host local inputs to pjit, devices connected to a single host must form a "
              "contiguous subcube of the global device mesh: the box holding process {}'s devices ({}) of {} "
              "also holds {}",
              process_index, fmt::join(box, ", "), global_mesh.ToString(), fmt::join(strangers, ", "));
  }
  return Mesh(DeviceArray(std::move(shape), std::move(ids)), global_mesh.axis_names(),
              global_mesh.shared_topology());
}

std::string ChunkSlice::ToString() const {
  auto part = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string("None"); };
  return fmt::format("slice({}, {}, None)", part(start), part(stop));
}

std::string LocalChunkInfo::ToString() const {
  std::vector<std::string> parts;
  for (const ChunkSlice& s : slice) parts.push_back(s.ToString());
  std::string tuple = parts.size() == 1 ? fmt::format("({},)", parts[0]) : fmt::format("({})", fmt::join(parts, ", "));
  return fmt::format("LocalChunkInfo(slice={}, replica_id={})", tuple, replica_id);
}

LocalChunker::LocalChunker(Mesh global_mesh, int host)
    : global_mesh_(std::move(global_mesh)), local_mesh_(LocalMesh(global_mesh_, host)), host_(host) {
  std::vector<int64_t> host_location =
      global_mesh_.CoordsOfPosition(global_mesh_.PositionOfDevice(local_mesh_.device_ids().front()));
  for (int a = 0; a < global_mesh_.rank(); ++a) {
    int64_t per_chunk = local_mesh_.shape()[a];
    num_chunks_.push_back(global_mesh_.shape()[a] / per_chunk);
    chunk_ids_.push_back(host_location[a] / per_chunk);
  }
}

namespace {
[[noreturn]] void ThrowKeyError(const Mesh& mesh, std::string_view axis) {
  ThrowKind(ErrorCode::kNotFound, ErrorKind::kKeyError, "'{}': the mesh has no axis '{}'; its axes are {}", axis, axis,
            PyTuple(mesh.axis_names()));
}
}  // namespace

int64_t LocalChunker::num_chunks(std::string_view axis) const {
  if (!global_mesh_.HasAxis(axis)) ThrowKeyError(global_mesh_, axis);
  return num_chunks_[global_mesh_.AxisIndex(axis)];
}

int64_t LocalChunker::chunk_id(std::string_view axis) const {
  if (!global_mesh_.HasAxis(axis)) ThrowKeyError(global_mesh_, axis);
  return chunk_ids_[global_mesh_.AxisIndex(axis)];
}

LocalChunkInfo LocalChunker::GetLocalChunkInfo(const std::vector<int64_t>& global_shape,
                                               const std::vector<ChunkMeshAxis>& mesh_axes) const {
  LocalChunkInfo info;
  info.slice.resize(global_shape.size());
  std::vector<std::string> sharded;
  const size_t n = std::min(global_shape.size(), mesh_axes.size());
  for (size_t i = 0; i < n; ++i) {
    const ChunkMeshAxis& entry = mesh_axes[i];
    if (const auto* names = std::get_if<std::vector<std::string>>(&entry)) {
      if (names->empty()) continue;
      ThrowKind(ErrorCode::kUnimplemented, ErrorKind::kNotImplementedError,
                "TODO(jekbradbury): t5x's LocalChunker cannot chunk dimension {} over several mesh axes {}; "
                "give it one mesh axis or None",
                i, PyTuple(*names));
    }
    const auto* axis = std::get_if<std::string>(&entry);
    if (axis == nullptr || axis->empty()) continue;
    if (global_shape[i] < 0) {
      Throw(ErrorCode::kInvalidArgument, "global_shape {}: dimension {} is negative", PyTuple(global_shape), i);
    }
    if (std::find(sharded.begin(), sharded.end(), *axis) == sharded.end()) sharded.push_back(*axis);
    int64_t id = chunk_id(*axis);
    int64_t size = global_shape[i] / num_chunks(*axis);
    info.slice[i] = ChunkSlice{id * size, (id + 1) * size};
  }
  info.replica_id = GetReplicaId(sharded);
  return info;
}

int64_t LocalChunker::GetShardId(const std::vector<std::string>& sharded_mesh_axes) const {
  int64_t shard = 0;
  for (const std::string& axis : sharded_mesh_axes) shard = shard * num_chunks(axis) + chunk_id(axis);
  return shard;
}

int64_t LocalChunker::GetReplicaId(const std::vector<std::string>& sharded_mesh_axes) const {
  int64_t replica = 0;
  for (int a = 0; a < global_mesh_.rank(); ++a) {
    const std::string& axis = global_mesh_.axis_names()[a];
    if (std::find(sharded_mesh_axes.begin(), sharded_mesh_axes.end(), axis) != sharded_mesh_axes.end()) continue;
    replica = replica * num_chunks_[a] + chunk_ids_[a];
  }
  return replica;
}

}  // namespace spmdsim::t5x
