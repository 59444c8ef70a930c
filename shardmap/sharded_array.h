// ShardedArray: a global array laid out over a mesh by a NamedSharding, one Array per device (JAX: jax.Array
// with a NamedSharding; `jax.device_put(x, sharding)`, `addressable_shards`, `jax.device_get`), and Reshard,
// which moves it to another sharding device to device and counts the bytes (JAX: `jax.device_put(x,
// new_sharding)` / `jax.lax.with_sharding_constraint`).
//
// Devices holding the same block (replicas) share one host buffer; each device's Array is its own handle
// (charged to that device when the array was made inside Runtime::Run, sim/array.h).
//
// Example: Mesh {x:4, y:2}, x = arange(16.).reshape(8, 2) as float32:
//   ShardedArray a = ShardedArray::DevicePut(x, NamedSharding(mesh, P("x")));
//   a.shard(0).ToString() == "[[0, 1], [2, 3]]";   a.shard(1).SharesBufferWith(a.shard(0))  (y replicates)
//   ReshardReport r;  ShardedArray b = Reshard(a, NamedSharding(mesh, P("y")), &r);
//   device 0 (y=0) needs rows 0..3: it holds rows 0..1 (r.bytes_local[0] == 16) and receives rows 2..3
//   (r.bytes_received[0] == 16); device 1 (y=1) needs rows 4..7 and holds none: r.bytes_received[1] == 32.
//
// Thread safety: a ShardedArray is immutable after construction; const members may be called concurrently.
#ifndef SPMDSIM_SHARDMAP_SHARDED_ARRAY_H_
#define SPMDSIM_SHARDMAP_SHARDED_ARRAY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "partition/named_sharding.h"
#include "sim/array.h"
#include "sim/runtime.h"

namespace spmdsim {

// One device's shard as a host sees it (JAX: jax.Shard).
struct AddressableShard {
  int device = 0;                 // device id
  int64_t position = 0;           // mesh position
  std::vector<IndexRange> index;  // the block of the global array
  int64_t replica_id = 0;
  Array data;
};

class ShardedArray {
 public:
  ShardedArray() = default;  // no mesh, no shards; valid() is false

  // JAX: jax.device_put(global, sharding). Each distinct block is cut once and shared by its replicas. With a
  // runtime (REQUIRES: its mesh has the sharding's devices), every device copies its block in while it runs,
  // so each block is charged to its device; without one the shards are host arrays.
  // Throws SpecError (JAX's rank / IndivisibleError wording) when the shape does not fit the sharding.
  static ShardedArray DevicePut(const Array& global, const NamedSharding& sharding, Runtime* runtime = nullptr);
  // The same over a sharding and its layout for global.shape() made once (ShardMap keeps them per spec and
  // shape): both are shared, not copied, and the shape is not checked again.
  // REQUIRES: sharding, layout not null; *layout == sharding->Layout(global.shape()).
  static ShardedArray DevicePut(const Array& global, std::shared_ptr<const NamedSharding> sharding,
                                std::shared_ptr<const ShardingLayout> layout, Runtime* runtime = nullptr);
  // From per-position shards (REQUIRES: one per mesh position, each of the sharding's shard shape and dtype;
  // throws Error(kInvalidArgument) naming the position otherwise).
  static ShardedArray FromShards(std::vector<int64_t> global_shape, DType dtype, const NamedSharding& sharding,
                                 std::vector<Array> shards);
  // The same over a sharding and the layout of the global shape, made once and shared (see DevicePut).
  static ShardedArray FromShards(DType dtype, std::shared_ptr<const NamedSharding> sharding,
                                 std::shared_ptr<const ShardingLayout> layout, std::vector<Array> shards);

  bool valid() const { return layout_ != nullptr; }
  const std::vector<int64_t>& shape() const { return layout_->global_shape; }
  DType dtype() const { return dtype_; }
  int rank() const { return static_cast<int>(shape().size()); }
  const NamedSharding& sharding() const { return *sharding_; }
  const ShardingLayout& layout() const { return *layout_; }
  // JAX: x.addressable_data(i) (i = mesh position).
  const Array& shard(int64_t position) const { return shards_[position]; }
  const std::vector<Array>& shards() const { return shards_; }
  bool is_abstract() const { return !shards_.empty() && shards_[0].is_abstract(); }
  // The shards of the devices of one host (process_index), in mesh order (JAX: addressable_shards there).
  std::vector<AddressableShard> AddressableShards(int process_index) const;
  std::vector<AddressableShard> AllShards() const;

  // JAX: jax.device_get / np.asarray(x): the global array (a host array). With check_replicas, replicas of a
  // block must be bitwise equal (Error(kInvalidArgument) naming the devices otherwise). Abstract arrays give
  // an abstract global array.
  Array Gather(const GatherOptions& options = {}) const;
  // "ShardedArray(float32[8,2], NamedSharding(mesh=Mesh('x': 4, 'y': 2, ...), spec=P('x',)))"
  std::string ToString() const;

 private:
  DType dtype_ = DType::kF32;
  std::shared_ptr<const NamedSharding> sharding_;
  std::shared_ptr<const ShardingLayout> layout_;
  std::vector<Array> shards_;
};

// The bytes a reshard moves, per mesh position of the TARGET sharding's mesh.
struct ReshardReport {
  std::vector<int64_t> bytes_sent;      // bytes this device sent to others
  std::vector<int64_t> bytes_received;  // bytes this device received from others
  std::vector<int64_t> bytes_local;     // bytes it already held and copied locally (no transfer)
  int64_t total_bytes_moved = 0;        // sum of bytes_received
  std::string ToString() const;         // one line per device with traffic
};

// Moves x to `target` (JAX: jax.device_put(x, target) on device-resident data). Each device assembles its new
// block from the pieces of the old blocks: a piece it already holds is copied locally, any other piece comes
// from one holder of that old block, chosen round-robin over the holders by destination position (holders
// sorted by mesh position) so that replicas share the sending. The sharding's meshes must hold the same
// device ids (positions are matched through device ids). With a runtime (REQUIRES: over the target's mesh)
// each device copies its pieces in while it runs, so the new blocks are charged to their devices; without one
// they are host arrays (distinct blocks built once and shared by their replicas). When the sharding already
// equals x's, returns x and reports nothing moved.
ShardedArray Reshard(const ShardedArray& x, const NamedSharding& target, ReshardReport* report = nullptr,
                     Runtime* runtime = nullptr);
// The same with the target shared rather than copied, and its layout for x.shape() when already made (null: made
// here, when something moves). REQUIRES: target not null; a layout, when given, is target->Layout(x.shape()).
ShardedArray Reshard(const ShardedArray& x, std::shared_ptr<const NamedSharding> target,
                     std::shared_ptr<const ShardingLayout> target_layout, ReshardReport* report = nullptr,
                     Runtime* runtime = nullptr);

}  // namespace spmdsim

#endif  // SPMDSIM_SHARDMAP_SHARDED_ARRAY_H_
