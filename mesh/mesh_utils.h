// Device meshes laid on a Topology the way JAX lays them (JAX: jax.experimental.mesh_utils and jax.make_mesh,
// read from jax-ml/jax jax/_src/mesh_utils.py and jax/_src/sharding_impls.py at cec06d1, August 2026).
//
// Logical axes are listed from the least to the most communication-heavy: the LAST axis gets the best links.
// How the devices are ordered depends on the machine, in this order of precedence:
//  1. per-generation orders (device_kind): "TPU v2"/"TPU v3": 8 devices form the tray ring 0,1,2,3,6,7,4,5
//     (also applied along a last axis of size 8); "TPU v5 lite"/"TPU v6 lite": 2x2 ring 0,1,3,2, 8-device ring
//     0,1,2,3,7,6,5,4, 4x4 ring when one axis spans all 16 chips; "TPU v5p": 2x2x2 order 0,1,3,2,6,7,5,4 (JAX
//     0.10.2 knows no "TPU v5", the kind of the tpu-v5p preset, which therefore takes the torus assignment).
//  2. other TPUs: the devices' chip coordinates form a physical mesh (x, y, z); each logical axis, from the
//     last to the first, takes the first combination of the still-free physical axes (most axes first) whose
//     sizes multiply to its size. With allow_split_physical_axes a physical axis may be shared instead.
//  3. GPU: sorted by id, reshaped. CPU: reshaped in the order given.
// Example: tpu-v4:2x2x2, mesh (8,) -> ids [0,4,2,6,1,5,3,7] (x, y, z all go to the one axis: transpose (0,1,2)
//          of the physical (x,y,z) array, whose row-major order has z fastest).
//          tpu-v4:4x4x4, mesh (16, 4) -> axis 1 takes physical (0,) = x, axis 0 takes (1, 2) = y, z.
//
// Errors carry JAX's exception name in Error::kind(): "ValueError" (sizes do not match, contiguous submeshes
// not available), "NotImplementedError" (no assignment without splitting physical axes; ErrorCode
// kUnimplemented), "AssertionError" (devices whose coordinates are not a cuboid, e.g. several slices given to
// create_device_mesh on TPU v4).
#ifndef SPMDSIM_MESH_MESH_UTILS_H_
#define SPMDSIM_MESH_MESH_UTILS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mesh/device_array.h"
#include "mesh/mesh.h"
#include "mesh/topology.h"

namespace spmdsim {

// The order in which JAX's jax.devices() lists a topology's devices: by process, then by id (on a TPU pod
// "process-tiled": each host's chips together, as JAX's own mocks in tests/mesh_utils_test.py list them).
// Example: tpu-v3:4x4 (4 hosts of 2x2 chips, 2 cores each): [0,1,2,3,8,9,10,11, 4,5,6,7,12,13,14,15, ...].
// It equals id order everywhere except multi-host TPU slices whose X is larger than a host's block.
std::vector<int> JaxDevicesOrder(const Topology& topology);

struct CreateDeviceMeshOptions {
  // Reorder so that each process's devices form a contiguous block of the mesh, using JAX's fixed table of
  // (physical shape, mesh shape) pairs; anything else is a ValueError listing the shapes that work.
  bool contiguous_submeshes = false;
  // Let one physical axis serve several logical axes when no exact assignment exists (else
  // NotImplementedError).
  bool allow_split_physical_axes = false;
};

// JAX: mesh_utils.create_device_mesh(mesh_shape, devices, contiguous_submeshes=, allow_split_physical_axes=).
// `devices`: ids of `topology`; default JaxDevicesOrder(topology). Returns an array of shape `mesh_shape`.
// REQUIRES: every size >= 1, product(mesh_shape) == number of devices, ids valid for `topology`.
// Example: tpu-v3:2x2 (8 devices), mesh (2, 4) -> [[0,1,2,3],[6,7,4,5]].
DeviceArray CreateDeviceMesh(const std::vector<int64_t>& mesh_shape, const Topology& topology,
                             std::optional<std::vector<int>> devices = std::nullopt,
                             CreateDeviceMeshOptions options = {});

struct CreateHybridDeviceMeshOptions {
  // Group devices by process_index instead of slice_index (the "granules" joined by DCN).
  bool process_is_granule = false;
  // Order the granules by their key; otherwise in the order they first appear in `devices`.
  bool should_sort_granules_by_key = true;
  // Passed to CreateDeviceMesh for each granule.
  bool allow_split_physical_axes = false;
};

// JAX: mesh_utils.create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices, ...).
// Each granule gets CreateDeviceMesh(ici_shape); granule g's block sits at position g of
// arange(G).reshape(dcn_shape) (numpy.block: when the ranks differ, the shorter shape is padded with leading
// 1s). With equal ranks the result has shape ici[i] * dcn[i], the DCN index major along each axis.
// REQUIRES: product(dcn_shape) == number of granules; each granule has product(ici_shape) devices.
// Example: tpu-v4:2x2x2 x 2 slices, ici (1, 8), dcn (2, 1) -> shape (2, 8); row 0 is slice 0
//          ([0,4,2,6,1,5,3,7]), row 1 slice 1 (the same + 8).
DeviceArray CreateHybridDeviceMesh(const std::vector<int64_t>& ici_shape, const std::vector<int64_t>& dcn_shape,
                                   const Topology& topology, std::optional<std::vector<int>> devices = std::nullopt,
                                   CreateHybridDeviceMeshOptions options = {});

// JAX: jax.make_mesh(axis_shapes, axis_names, devices=). Takes the first product(axis_shapes) devices (default
// JaxDevicesOrder), sets allow_split_physical_axes only on "TPU v5 lite", and refuses a mesh spanning several
// slices (ValueError: use create_hybrid_device_mesh).
// Example: MakeMesh({2, 8}, {"x", "y"}, tpu-v3:2x4) -> ids [0,1,2,3,6,7,4,5, 8,9,10,11,14,15,12,13].
Mesh MakeMesh(const std::vector<int64_t>& axis_shapes, const std::vector<std::string>& axis_names,
              std::shared_ptr<const Topology> topology, std::optional<std::vector<int>> devices = std::nullopt);

// What MakeDeviceMesh passes on; every flag defaults to JAX's default.
struct MeshOptions {
  // CreateDeviceMesh only (create_hybrid_device_mesh has no such parameter; set with DCN axes: error).
  bool contiguous_submeshes = false;
  // Both functions: share physical axes among logical axes when needed.
  bool allow_split_physical_axes = false;
  // CreateHybridDeviceMesh only: DCN granules are processes rather than slices.
  bool process_is_granule = false;
  // CreateHybridDeviceMesh only: granules ordered by slice/process index.
  bool should_sort_granules_by_key = true;
  // The devices to use (ids of the topology); default all of them in JaxDevicesOrder.
  std::optional<std::vector<int>> devices = std::nullopt;
};

// A named Mesh on `topology`: CreateDeviceMesh over `ici_axes` when `dcn_axes` is empty, else
// CreateHybridDeviceMesh with both, which must name the same axes in the same order.
// Example: MakeDeviceMesh(tpu-v4:4x4x4 x 2, {{"data",1},{"model",64}}, {{"data",2},{"model",1}}) is a mesh
//          data:2 x model:64 whose rows are the two slices.
Mesh MakeDeviceMesh(std::shared_ptr<const Topology> topology,
                    const std::vector<std::pair<std::string, int64_t>>& ici_axes,
                    const std::vector<std::pair<std::string, int64_t>>& dcn_axes = {}, MeshOptions options = {});

}  // namespace spmdsim

#endif  // SPMDSIM_MESH_MESH_UTILS_H_
