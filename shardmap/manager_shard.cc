#include "shardmap/manager_shard.h"

#include "common/error.h"

namespace spmdsim {

ManagerShardResult ShardWithManager(const PartitionManager& manager, const ShardedArray& x,
                                    std::span<const SemanticAxis> axes, const ModeOrDim& mode,
                                    const CorrectionOptions& correction, Runtime* runtime) {
  if (!x.valid()) Throw(ErrorCode::kInvalidArgument, "ShardWithManager of an empty ShardedArray");
  ManagerShardResult out;
  CorrectionOptions options = correction;
  options.element_bytes = DTypeSize(x.dtype());
  out.decision = manager.Shard(x.sharding().mesh(), x.shape(), axes, mode, options);
  if (!out.decision.constraint_applied || !out.decision.sharding.has_value()) {
    out.array = x;
    out.moved = ReshardReport{};
    return out;
  }
  out.array = Reshard(x, *out.decision.sharding, &out.moved, runtime);
  return out;
}

ManagerShardResult ShardWithManager(const PartitionManager& manager, const Mesh& mesh, const Array& x,
                                    std::span<const SemanticAxis> axes, const ModeOrDim& mode,
                                    const CorrectionOptions& correction, Runtime* runtime) {
  if (mesh.empty()) Throw(ErrorCode::kInvalidArgument, "ShardWithManager needs a non-empty mesh to place a host array");
  if (!x.valid()) Throw(ErrorCode::kInvalidArgument, "ShardWithManager of an empty Array handle");
  ManagerShardResult out;
  CorrectionOptions options = correction;
  options.element_bytes = DTypeSize(x.dtype());
  out.decision = manager.Shard(mesh, x.shape(), axes, mode, options);
  NamedSharding target = out.decision.constraint_applied && out.decision.sharding.has_value()
                             ? *out.decision.sharding
                             : NamedSharding(mesh, PartitionSpec());
  out.array = ShardedArray::DevicePut(x, target, runtime);
  return out;
}

}  // namespace spmdsim
