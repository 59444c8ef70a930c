// T5X's mesh builders and its LocalChunker (t5x/partitioning.py: get_mesh, default_mesh, get_gpu_mesh,
// get_cpu_mesh, LocalChunker), reproduced device for device on a simulated Topology.
//
// T5X describes a mesh by the "model-parallel submesh": the block of the physical machine one model replica
// occupies, written in hardware coordinates. On TPU that is (x, y, z, cores) with cores the TPU cores used per
// chip; elsewhere it is (hosts, devices per host). GetMesh tiles the physical machine with that block and
// returns a 2-D Mesh ('data', 'model'): 'model' walks the block, 'data' walks the copies of the block.
//
// Example (the case in t5x's partitioning_test.py): tpu-v3:4x4 (4x4 chips, 2 cores each, 4 hosts of 2x2
// chips), DefaultMesh(4) picks the submesh (2, 1, 1, 2) and GetMesh gives a Mesh('data': 8, 'model': 4):
//     [[ 0  1  2  3]      each row: chips (0,y) and (1,y), both cores     host 0
//      [ 8  9 10 11]                                                     host 0
//      [16 17 18 19]  [24 25 26 27]  [ 4  5  6  7]  [12 13 14 15]  ...   hosts 2, 2, 1, 1, 3, 3
//      ...]
// and LocalChunker(mesh, host 1) sees host 1's rows 4..5 as chunk 2 of 4 along 'data':
//     GetLocalChunkInfo({128, 16}, {"data", "model"}) == (slice(64, 96), slice(0, 16)), replica_id 0.
//
// Where t5x reads process-wide JAX state we take it from the Topology: jax.devices() is
// topology.devices() (sorted by id), jax.local_devices(p) the devices with process_index p,
// jax.process_count() topology.num_processes(), jax.local_device_count() topology.devices_per_process().
// t5x fails through `assert` (AssertionError), ValueError, KeyError and NotImplementedError; we throw
// spmdsim::Error with that `kind`, t5x's own wording first, then what would be valid.
#ifndef SPMDSIM_MESH_T5X_MESH_H_
#define SPMDSIM_MESH_T5X_MESH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mesh/mesh.h"
#include "mesh/topology.h"

namespace spmdsim::t5x {

// T5X: HardwareMesh. (x, y, z, cores) on TPU (TpuMesh), (hosts, devices per host) elsewhere (OtherMesh).
using HardwareMesh = std::vector<int>;

// T5X: get_coords. A device's place in the hardware mesh: (x, y, z, core_on_chip) on TPU,
// (process_index, id % local_device_count) elsewhere.
// Example: device 5 of tpu-v4:2x2x4 -> (1, 0, 1, 0); device 9 of gpu:2x8 -> (1, 1).
HardwareMesh GetCoords(const Topology& topology, const Device& device);

// T5X: bounds_from_last_device. The hardware mesh's extent, read off its highest-coordinate device:
// (x+1, y+1, z+1, core+1) on TPU; (process_count, local_device_count) elsewhere, whatever the device.
// Example: tpu-v3:4x4, device 31 at (3, 3, 0) core 1 -> (4, 4, 1, 2); gpu:2x8 -> (2, 8).
HardwareMesh BoundsFromLastDevice(const Topology& topology, const Device& last_device);

// What GetMesh did on the way, for explanations (the CLI prints it).
struct GetMeshSteps {
  HardwareMesh global_hardware_mesh;  // bounds of all devices, before any reordering
  HardwareMesh local_hardware_mesh;   // bounds of the local devices of `host`
  // "" when untouched, "yz" or "xz" when t5x swapped that plane to make Z major (and did not tile by host).
  std::string z_major_swap;
  HardwareMesh submesh_after_swap;  // the submesh in the (possibly swapped) hardware order
  bool tiled_by_host = false;       // whether the host-tiling reshape was used
};

// T5X: get_mesh(model_parallel_submesh, tile_by_host_if_needed). A Mesh ('data', 'model') of shape
// (num_devices / prod(submesh), prod(submesh)) over all devices of `topology`:
//  1. place every device at GetCoords in an array of the global bounds;
//  2. on TPU, when the submesh spans all of X (and nothing of Y, Z), or is (1, Y, Z), swap the Y and Z axes;
//     when it spans all of Y (nothing of X, Z) or is (X, 1, Z), swap X and Z (the "Z-major" order, which keeps
//     each host's chips contiguous without host tiling); this needs every core of a chip in the submesh;
//  3. with tile_by_host_if_needed and no swap, split each dimension into (data hosts, data devices, model
//     hosts, model devices) by the local bounds and order the blocks data-hosts, data-devices, model-hosts,
//     model-devices (t5x always does this then, whether or not it is needed); otherwise split each dimension
//     into (data, model) and order data blocks before model blocks;
//  4. flatten to (data, model).
// `host` plays the process whose jax.local_devices() give the local bounds. t5x itself passes
// jax.local_devices(0), i.e. process 0 whatever the calling process, so 0 reproduces t5x; another value
// reproduces get_mesh(..., input_local_devices=jax.local_devices(host)).
// Throws (kind AssertionError) when a submesh entry does not divide the global bound (listing the divisors),
// when the local bounds do not divide the global ones, when a Z-major swap is asked without all cores, and when
// host tiling needs a submesh entry that is neither a factor nor a multiple of the local bound;
// Error(kInvalidArgument) for a submesh of the wrong rank or with entries < 1, and for a multi-slice TPU
// topology (t5x would silently keep one device per coordinate; use the hybrid mesh for slices);
// Error(kOutOfRange) for a host with no devices.
Mesh GetMesh(const HardwareMesh& model_parallel_submesh, std::shared_ptr<const Topology> topology, int host = 0,
             bool tile_by_host_if_needed = true, GetMeshSteps* steps = nullptr);

// T5X: get_cpu_mesh. Mesh ('data', 'model') of shape (process_count, local_device_count) with device d at
// (d.process_index, d.id % local_device_count).
// Example: cpu:8 -> [[0 1 2 3 4 5 6 7]]; gpu:2x8 -> [[0..7], [8..15]].
// Throws Error(kInvalidArgument) when two devices land on the same cell (t5x would overwrite one and leave
// another cell None, e.g. on tpu-v3:4x4 where host 0 holds ids 0-3 and 8-11).
Mesh GetCpuMesh(std::shared_ptr<const Topology> topology);

// T5X: get_gpu_mesh(num_partitions). 'model' inside a host (NVLink) as far as it goes, then across hosts:
//   nvlink_mp = min(num_partitions, G), nvlink_dp = G / nvlink_mp, dcn_mp = num_partitions / nvlink_mp,
//   dcn_dp = hosts / dcn_mp (floor), then JAX create_hybrid_device_mesh([nvlink_dp, nvlink_mp],
//   [dcn_dp, dcn_mp], process_is_granule=True).
// Example: gpu:2x8, num_partitions 4 -> Mesh('data': 4, 'model': 4), rows [0 1 2 3] [4 5 6 7] [8 ..] [12 ..].
// Throws (kind AssertionError) unless num_partitions is a factor or multiple of G; (kind ValueError, from
// create_hybrid_device_mesh) when the hosts are not dcn_dp * dcn_mp; Error(kInvalidArgument) for
// num_partitions < 1.
Mesh GetGpuMesh(int num_partitions, std::shared_ptr<const Topology> topology);

// T5X: the submesh table of default_mesh, for TPU device kinds:
//   'TPU v2', 'TPU v3':   1 -> (1,1,1,1), 2 -> (1,1,1,2), 4 -> (2,1,1,2), 8 -> (2,2,1,2), 16 -> (4,2,1,2)
//   'TPU v4', 'TPU v4 lite' with one core per chip ("megacore"):
//     1 -> (1,1,1,1), 2 -> (1,2,1,1), 4 -> (4,1,1,1) if X >= 4 else (2,2,1,1),
//     8 -> (1,1,8,1) if Z >= 8 else (4,2,1,1),
//     16 -> (1,1,16,1) if Z >= 16, else (8,2,1,1) if X >= 8, else (4,4,1,1) if X >= 4, else (2,2,4,1)
// Throws Error(kInvalidArgument, kind ValueError) "No default mesh for this configuration ..." for any other
// device kind or count, listing the counts that have a default.
HardwareMesh DefaultSubmesh(int num_partitions, const Topology& topology);

// T5X: default_mesh(num_partitions, model_parallel_submesh, ici_mesh_shape=, dcn_mesh_shape=).
//  - ici_mesh_shape and dcn_mesh_shape both given: Mesh ('replica', 'data', 'model') over JAX
//    create_hybrid_device_mesh(ici, dcn) (slices are the DCN granules); both must have 3 entries;
//  - else a non-empty submesh: GetMesh(submesh) (num_partitions ignored);
//  - else CPU -> GetCpuMesh, GPU -> GetGpuMesh(num_partitions), TPU -> GetMesh(DefaultSubmesh(num_partitions)).
// Like t5x, GetMesh reads the local bounds from process 0 (the mesh is the same whichever host asks).
// Example: tpu-v4:2x2x2 x 2 slices, ici (1, 1, 8), dcn (2, 1, 1) -> Mesh('replica': 2, 'data': 1, 'model': 8),
//          replica 0 = slice 0 [0 4 2 6 1 5 3 7], replica 1 = the same + 8.
Mesh DefaultMesh(int num_partitions, const std::optional<HardwareMesh>& model_parallel_submesh,
                 std::shared_ptr<const Topology> topology,
                 const std::optional<std::vector<int64_t>>& ici_mesh_shape = std::nullopt,
                 const std::optional<std::vector<int64_t>>& dcn_mesh_shape = std::nullopt);

// JAX: Mesh.local_mesh as seen from process `process_index` (jax.sharding.Mesh._local_mesh): the smallest
// box of the mesh holding all of that process's devices.
// Example: the tpu-v3:4x4 mesh above, process 1 -> Mesh('data': 2, 'model': 4) [[4 5 6 7] [12 13 14 15]].
// Throws Error(kInvalidArgument, kind ValueError) when the box holds another process's devices (JAX's
// "... must form a contiguous subcube ..."), naming those devices; Error(kOutOfRange) when the process has
// no device in the mesh; Error(kInvalidArgument) when the mesh has no topology.
Mesh LocalMesh(const Mesh& global_mesh, int process_index);

// A Python slice as t5x's LocalChunkInfo holds it: [start, stop), or slice(None) = the whole dimension.
struct ChunkSlice {
  std::optional<int64_t> start;
  std::optional<int64_t> stop;
  bool whole() const { return !start.has_value(); }
  // Python's repr: "slice(0, 32, None)", "slice(None, None, None)".
  std::string ToString() const;
  bool operator==(const ChunkSlice&) const = default;
};

// T5X: LocalChunkInfo. The part of an array that lies on one host's devices, and that host's number among
// the hosts holding the same part (checkpointing lets replica 0 write it).
struct LocalChunkInfo {
  std::vector<ChunkSlice> slice;
  int64_t replica_id = 0;
  // Python's dataclass repr: "LocalChunkInfo(slice=(slice(0, 32, None), slice(0, 16, None)), replica_id=0)".
  std::string ToString() const;
  bool operator==(const LocalChunkInfo&) const = default;
};

// One entry of the mesh_axes t5x's get_local_chunk_info takes: None (std::monostate), a mesh axis name, or a
// tuple of names (which t5x does not support: NotImplementedError). An empty name or tuple counts as None,
// as Python's falsiness makes it.
using ChunkMeshAxis = std::variant<std::monostate, std::string, std::vector<std::string>>;

// T5X: LocalChunker. What one host of a multi-host mesh holds: along each mesh axis the mesh splits into
// num_chunks = axis size / the host's local extent, and the host holds chunk chunk_id.
// Example: tpu-v3:4x4 DefaultMesh(4) (see the top of this file); for host 1: num_chunks = {data: 4, model: 1},
// chunk_ids = {data: 2, model: 0}; GetLocalChunkInfo({128, 16}, {None, "model"}) is
// (slice(None), slice(0, 16)) with replica_id 2; GetShardId({"data"}) == 2; GetReplicaId({"data"}) == 0.
// Any host of the topology may be asked: this is t5x's LocalChunker as it runs on process `host`.
class LocalChunker {
 public:
  // REQUIRES: global_mesh has a topology. Throws what LocalMesh(global_mesh, host) throws.
  LocalChunker(Mesh global_mesh, int host);

  const Mesh& global_mesh() const { return global_mesh_; }
  const Mesh& local_mesh() const { return local_mesh_; }
  int host() const { return host_; }
  // The mesh axes, in mesh order.
  const std::vector<std::string>& mesh_axes() const { return global_mesh_.axis_names(); }
  // Per mesh axis, in mesh order.
  const std::vector<int64_t>& num_chunks() const { return num_chunks_; }
  const std::vector<int64_t>& chunk_ids() const { return chunk_ids_; }
  // By name; Error(kNotFound, kind KeyError) for an axis the mesh lacks.
  int64_t num_chunks(std::string_view axis) const;
  int64_t chunk_id(std::string_view axis) const;

  // T5X: get_local_chunk_info. For each dimension i sharded over mesh axis a (mesh_axes[i] a name):
  // slice(chunk_id[a] * c, (chunk_id[a] + 1) * c) with c = global_shape[i] / num_chunks[a] (floor); other
  // dimensions slice(None). Like Python's zip, dimensions beyond the shorter of the two lists are
  // unsharded. replica_id = GetReplicaId(the axes used).
  // Throws Error(kNotFound, kind KeyError) for an axis the mesh lacks, Error(kUnimplemented, kind
  // NotImplementedError) for a tuple of axes, Error(kInvalidArgument) for a negative dimension.
  LocalChunkInfo GetLocalChunkInfo(const std::vector<int64_t>& global_shape,
                                   const std::vector<ChunkMeshAxis>& mesh_axes) const;

  // T5X: get_shard_id. The host's number along `sharded_mesh_axes`, first axis major:
  //   shard = sum over the axes of chunk_id[a] * prod(num_chunks of the later axes).
  // Throws Error(kNotFound, kind KeyError) for an axis the mesh lacks.
  int64_t GetShardId(const std::vector<std::string>& sharded_mesh_axes) const;
  // T5X: get_replica_id. The same numbering over the mesh axes NOT in `sharded_mesh_axes`, in mesh order.
  // As in t5x, names the mesh lacks are ignored.
  int64_t GetReplicaId(const std::vector<std::string>& sharded_mesh_axes) const;

 private:
  Mesh global_mesh_;
  Mesh local_mesh_;
  int host_;
  std::vector<int64_t> num_chunks_;
  std::vector<int64_t> chunk_ids_;
};

}  // namespace spmdsim::t5x

#endif  // SPMDSIM_MESH_T5X_MESH_H_
