// PartitionManager::Shard with the data movement (eformer: PartitionManager.shard(x, axes, mode), which resolves
// the semantic axes, corrects the spec and applies with_sharding_constraint): partition/partition_manager.h
// decides the sharding, and this moves the array there with Reshard (or DevicePut for a host array).
//
// Example: mesh {dp:2, fsdp:2, tp:2}, x float32[8, 16] replicated, axes (BATCH, EMBED), train mode, default
// PartitionAxis: resolves to P(('fsdp', 'dp'), 'tp') (partition/partition_axis.h), every device keeps
// 8*16*4 / 8 = 64 bytes of the 512 it held and receives nothing (the pieces are local).
//
// When eformer applies no constraint (the corrected spec is P()), the array is returned unchanged (a host array
// becomes replicated over the mesh, P()).
#ifndef SPMDSIM_SHARDMAP_MANAGER_SHARD_H_
#define SPMDSIM_SHARDMAP_MANAGER_SHARD_H_

#include <span>

#include "partition/partition_manager.h"
#include "shardmap/sharded_array.h"

namespace spmdsim {

struct ManagerShardResult {
  ShardResult decision;   // resolved spec, correction report, the sharding applied
  ShardedArray array;     // x on that sharding
  ReshardReport moved;    // bytes each device sent / received (all zero for a host array or no constraint)
};

// REQUIRES: x valid. A runtime (over x's mesh), when given, runs the moves on the devices (sim/runtime.h).
ManagerShardResult ShardWithManager(const PartitionManager& manager, const ShardedArray& x,
                                    std::span<const SemanticAxis> axes, const ModeOrDim& mode,
                                    const CorrectionOptions& correction = {}, Runtime* runtime = nullptr);
// A host array onto `mesh` (REQUIRES: mesh not empty; throws Error(kInvalidArgument) otherwise).
ManagerShardResult ShardWithManager(const PartitionManager& manager, const Mesh& mesh, const Array& x,
                                    std::span<const SemanticAxis> axes, const ModeOrDim& mode,
                                    const CorrectionOptions& correction = {}, Runtime* runtime = nullptr);

}  // namespace spmdsim

#endif  // SPMDSIM_SHARDMAP_MANAGER_SHARD_H_
