// NamedSharding: a PartitionSpec bound to a Mesh (JAX: jax.sharding.NamedSharding, jax/_src/named_sharding.py),
// and the layout it gives an array of a given global shape: the shard shape, which block every device holds
// (JAX: devices_indices_map), replica ids (JAX: sharding_impls.device_replica_id_map), the devices holding each
// distinct block, the blocks each host can address, and scatter / gather of a row-major array.
//
// Block of a device: for dimension d with entry (a_1, ..., a_k) (a_1 major), block index
//     b_d = sum_i coord[a_i] * prod_{m>i} size(a_m)   and index range [b_d * n_d, (b_d + 1) * n_d),
// n_d = shape[d] / prod_i size(a_i); None / UNCONSTRAINED / trailing dimensions are whole.
// Example: Mesh {x:4, y:2} (ids 0..7 row-major), spec P(('x', 'y')), shape (8,):
//   device 2*i + j holds [2i + j, 2i + j + 1);  with P(('y', 'x')): [4j + i, 4j + i + 1).
//   P('x') on shape (8, 3): shard shape (2, 3); devices 0 and 1 both hold rows [0, 2) -> replica ids 0 and 1.
// Distinct shards are numbered row-major over the grid of per-dimension block indices (shard_id).
// Replica ids count, per block, the devices holding it in the mesh's flat (row-major) order, as JAX does.
//
// NamedSharding is an immutable value. ShardingLayout is a plain value computed once per global shape.
#ifndef SPMDSIM_PARTITION_NAMED_SHARDING_H_
#define SPMDSIM_PARTITION_NAMED_SHARDING_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "common/shape.h"
#include "mesh/mesh.h"
#include "partition/partition_spec.h"

namespace spmdsim {

// "(slice(0, 2, None), slice(None, None, None))": JAX's repr of an index; whole dimensions print as slice(None...).
std::string IndexToString(std::span<const IndexRange> index, std::span<const int64_t> global_shape);

// What one device holds.
struct DeviceShard {
  int64_t position = 0;            // mesh position (row-major cell of the mesh's device array)
  int device = 0;                  // device id
  int process_index = 0;           // host, from the mesh's topology (0 without one)
  std::vector<IndexRange> index;   // per dimension of the global shape
  int64_t shard_id = 0;            // which distinct block (row-major over the block grid)
  int64_t replica_id = 0;          // JAX's device_replica_id_map
};

// The layout of one global shape under a NamedSharding.
struct ShardingLayout {
  std::vector<int64_t> global_shape;
  std::vector<int64_t> shard_shape;
  std::vector<int64_t> tiling;               // blocks per dimension (JAX's per-dimension tiling factors)
  int64_t num_shards = 1;                    // product(tiling): distinct blocks
  int64_t num_replicas = 1;                  // devices per block (mesh size / num_shards)
  std::vector<DeviceShard> shards;           // one per device, in mesh position order (JAX's device order)
  std::vector<std::vector<int64_t>> positions_of_shard;  // shard_id -> mesh positions holding it, flat order

  // The devices holding a distinct block, in mesh flat order. REQUIRES: 0 <= shard_id < num_shards.
  std::vector<int> DevicesOfShard(int64_t shard_id) const;
  // The shard of a device id; throws Error(kNotFound) when the device is not in the mesh.
  const DeviceShard& ShardOfDevice(int device) const;
  // Per host (process_index ascending): the shards its devices hold (JAX: addressable_shards on that host).
  std::vector<std::vector<const DeviceShard*>> ShardsByProcess() const;
  // Bytes one device holds for elements of `element_bytes`.
  int64_t ShardBytes(int64_t element_bytes) const;
};

class NamedSharding {
 public:
  // Checks the spec against the mesh as JAX's constructor does (duplicates, then unknown axes): throws SpecError.
  // An empty mesh takes only P() (JAX's NamedSharding(Mesh(), P()): replicated, on no devices; nothing can be
  // laid out on it); any other spec on it throws Error(kInvalidArgument).
  NamedSharding(Mesh mesh, PartitionSpec spec);

  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }
  int64_t num_devices() const { return mesh_.size(); }
  // JAX: a one-device mesh, or no named axis larger than 1.
  bool is_fully_replicated() const;
  // Mesh axes the spec does not name (JAX: replicated_axes), in mesh order.
  std::vector<std::string> ReplicatedAxes() const;
  // JAX's str: "NamedSharding(mesh=Mesh('x': 4, axis_types=(Auto,)), spec=P('x',), memory_kind=device)".
  std::string ToString() const;

  // Throws SpecError with JAX's rank ValueError or IndivisibleError when the shape does not fit.
  void CheckShape(std::span<const int64_t> global_shape) const;
  // JAX: sharding.shard_shape(global_shape).
  std::vector<int64_t> ShardShape(std::span<const int64_t> global_shape) const;
  // The full layout (devices_indices_map, replica ids, shards per host). Cost O(devices x (rank + mesh rank)).
  ShardingLayout Layout(std::span<const int64_t> global_shape) const;

 private:
  Mesh mesh_;
  PartitionSpec spec_;
};

// ---------------------------------------------------------------------------------------------------------------
// Scatter and gather (eformer / JAX: make_shard_and_gather_fns, jax.device_put / device_get), on row-major bytes.

// Copies the block `index` of a row-major array `global` of `global_shape` into the row-major buffer `block`
// (and back), by StridedCopy (common/shape.h: contiguous dimensions merged into one memcpy run).
// REQUIRES: index within the shape; buffers large enough.
void CopyBlockOut(const std::byte* global, std::span<const int64_t> global_shape, std::span<const IndexRange> index,
                  size_t element_bytes, std::byte* block);
void CopyBlockIn(const std::byte* block, std::span<const int64_t> global_shape, std::span<const IndexRange> index,
                 size_t element_bytes, std::byte* global);

// Per mesh position, the bytes of that device's block. REQUIRES: global holds product(shape) * element_bytes bytes.
std::vector<std::vector<std::byte>> ScatterBytes(const ShardingLayout& layout, std::span<const std::byte> global,
                                                 size_t element_bytes);

struct GatherOptions {
  // Compare every replica of a block with replica 0 and throw when any differs (JAX trusts them; spmdsim checks).
  bool check_replicas = true;
};
// Rebuilds the global row-major array from per-position shards (replica 0 of each block is used). Throws
// Error(kInvalidArgument) when a shard has the wrong size, and, with check_replicas, when replicas of a block differ,
// naming the block and every device that differs from replica 0.
std::vector<std::byte> GatherBytes(const ShardingLayout& layout, std::span<const std::vector<std::byte>> shards,
                                   size_t element_bytes, const GatherOptions& options = {});

// Typed wrappers. T must be trivially copyable; compared byte-wise.
template <typename T>
std::vector<std::vector<T>> Scatter(const ShardingLayout& layout, const std::vector<T>& global) {
  static_assert(std::is_trivially_copyable_v<T>);
  auto bytes = ScatterBytes(layout, std::as_bytes(std::span<const T>(global)), sizeof(T));
  std::vector<std::vector<T>> out(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[i].resize(bytes[i].size() / sizeof(T));
    if (!bytes[i].empty()) std::memcpy(out[i].data(), bytes[i].data(), bytes[i].size());
  }
  return out;
}

template <typename T>
std::vector<T> Gather(const ShardingLayout& layout, const std::vector<std::vector<T>>& shards,
                      const GatherOptions& options = {}) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<std::vector<std::byte>> bytes(shards.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    auto view = std::as_bytes(std::span<const T>(shards[i]));
    bytes[i].assign(view.begin(), view.end());
  }
  std::vector<std::byte> global = GatherBytes(layout, bytes, sizeof(T), options);
  std::vector<T> out(global.size() / sizeof(T));
  if (!global.empty()) std::memcpy(out.data(), global.data(), global.size());
  return out;
}

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_NAMED_SHARDING_H_
