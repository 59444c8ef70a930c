// From global arrays to the blocks each device of an SPMD-partitioned module holds, and back, by the shardings
// XLA printed on the entry's parameters and root (hlo/ir.h Sharding).
//
// A tiled sharding {devices=[t_0,...,t_{r-1}(, subgroups...)]d_0,d_1,...} splits dimension i of the array into
// t_i equal blocks (the last possibly smaller; XLA pads the others' shapes to ceil(n / t_i)); device
// d_k, at position k of the tile assignment (row-major over all its dimensions), holds the block at the first r
// coordinates of k; trailing subgroup dimensions (last_tile_dim_replicate, last_tile_dims) replicate it.
// Replicated and manual shardings give every device the whole array; maximal gives it to one device (others hold
// it too in this simulation, as a replica).
//
// Example: f32[4,8] with {devices=[2,4]<=[8]}: device 5 (tile coordinates (1, 1)) holds rows 2..3, columns 2..3.
//
// Thread safety: pure.
#ifndef SPMDSIM_HLO_SHARDING_H_
#define SPMDSIM_HLO_SHARDING_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "hlo/ir.h"
#include "hlo/value.h"

namespace spmdsim::hlo {

// The index range [begin, end) per dimension of the block `device` holds of an array of `global_dims`.
struct Block {
  std::vector<int64_t> begin, end;
};

// REQUIRES: `sharding` is not a tuple. Throws Error(kInvalidArgument) when a tiled sharding has more data
// dimensions than the array, a device is not in the tile assignment, or a block would be empty.
Block BlockOf(const Sharding& sharding, const std::vector<int64_t>& global_dims, int64_t device);

// The global shape of a per-device shape under `sharding` (dimension i times its tiles), as JAX sees it.
std::vector<int64_t> GlobalDims(const Sharding& sharding, const std::vector<int64_t>& local_dims);

// The sharding of element `i` of an entry parameter or result: itself, or the i-th of a tuple sharding;
// replicated when there is none.
Sharding ElementSharding(const std::optional<Sharding>& sharding, int64_t i, int64_t count);

// The block `device` holds of `global`, in a value of `local` dims (XLA pads uneven blocks: the rest is zeros).
// Made on the calling thread (charged to the current device, if any).
Value ShardOf(const Value& global, const Sharding& sharding, int64_t device, const std::vector<int64_t>& local);

// The global array of `global_dims` put together from each device's value (per_device[d] is logical device d's),
// each contributing its block; a block held by several devices is taken from the first. Host memory.
Value Assemble(const std::vector<const Value*>& per_device, const Sharding& sharding,
               const std::vector<int64_t>& global_dims);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_SHARDING_H_
