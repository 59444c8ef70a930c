// PartitionManager: resolves semantic axes with a PartitionAxis and applies the corrected sharding
// (eformer: eformer/escale/partition/manager.py, PartitionManager, apply_logical_sharding; the presets are
// eformer/common_types.py's DynamicShardingAxes subclasses).
//
// The mode may be given as a dimension index instead (eformer's `mode=1`): the array is in decode mode when that
// dimension has size 1, else in train mode. Python indexing: -1 is the last dimension.
// Example: HiddenStateSharding = ((BATCH, QUERY_LENGTH, EMBED), mode = dimension 1), with
//   PartitionAxis(decode_query_sequence_axis='dp'):
//   shape (2, 1, 32) -> decode -> P(('fsdp', 'dp'), 'dp', 'tp');
//   shape (2, 8, 32) -> train -> P(('fsdp', 'dp'), 'sp', 'tp')
//
// Shard = Resolve, then partition-core's correction (CorrectSpec, eformer's rules by default) against the mesh
// eformer would take from the context. eformer's `auto_correct=False` changes nothing observable, because its
// with_sharding_constraint runs the same correction again; the strict JAX behaviour is CorrectionMode::kNone.
// Data movement is not done here: the result is the sharding and the report of what was corrected.
//
// Thread safety: a PartitionManager is immutable and may be shared. The current manager (ScopedPartitionManager)
// is per thread, like eformer's context variable; the last created manager is process-wide, as in eformer.
#ifndef SPMDSIM_PARTITION_PARTITION_MANAGER_H_
#define SPMDSIM_PARTITION_PARTITION_MANAGER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "mesh/mesh.h"
#include "partition/correction.h"
#include "partition/named_sharding.h"
#include "partition/partition_axis.h"
#include "partition/partition_spec.h"

namespace spmdsim {

// A runtime mode, or the index of the dimension whose size decides it (1 -> decode, else train).
using ModeOrDim = std::variant<RuntimeMode, int>;

// eformer `mode=int` inference. Throws ValueError "when using dynamic mode detection shape should be provided"
// without a shape and IndexError "tuple index out of range" for a dimension outside it.
RuntimeMode InferRuntimeMode(const ModeOrDim& mode, std::optional<std::span<const int64_t>> shape);

// eformer's DynamicShardingAxes: axes and mode together.
struct DynamicShardingAxes {
  SemanticAxes axes;
  ModeOrDim mode = RuntimeMode::kTrain;
};
// eformer's presets by class name: HiddenStateSharding, AttnQSharding, AttnKVSharding, RowWise, SRowWise,
// ColumnWise, SColumnWise, Replicated, ExpertColumnWise, ExpertRowWise, ExpertColumnWiseAlt, ExpertRowWiseAlt,
// UnifiedExpertColumnWise, UnifiedExpertRowWise, ExpertActivations, ExpertActivationsAlt, ExpertTensorParallel.
const std::vector<std::pair<std::string_view, DynamicShardingAxes>>& DynamicShardingPresets();
// Throws Error(kNotFound) listing the presets.
const DynamicShardingAxes& FindDynamicShardingPreset(std::string_view name);

// What Shard decided.
struct ShardResult {
  PartitionSpec resolved;                // before correction
  CorrectionReport report;               // report.corrected is the spec applied
  std::optional<NamedSharding> sharding;  // nullopt on an empty mesh
  // eformer applies no constraint at all when the corrected spec is P() or the mesh is empty.
  bool constraint_applied = false;
};

class PartitionManager {
 public:
  // Records a copy of itself as the last created manager (eformer: _LAST_PARTITION_MANAGER).
  explicit PartitionManager(PartitionAxis paxis = PartitionAxis());

  const PartitionAxis& paxis() const { return paxis_; }

  // eformer `resolve(axes, mode, shape=...)`.
  PartitionSpec Resolve(std::span<const SemanticAxis> axes, const ModeOrDim& mode,
                        std::optional<std::span<const int64_t>> shape = std::nullopt) const;
  // eformer `resolve(dynamic_axes=...)` / `resolve(HiddenStateSharding, shape=...)`.
  PartitionSpec Resolve(const DynamicShardingAxes& dynamic_axes,
                        std::optional<std::span<const int64_t>> shape = std::nullopt) const;

  // eformer `shard(x, axes, mode)` for an array of `shape` on `mesh`, minus the data movement.
  ShardResult Shard(const Mesh& mesh, std::span<const int64_t> shape, std::span<const SemanticAxis> axes,
                    const ModeOrDim& mode, const CorrectionOptions& correction = {}) const;
  ShardResult Shard(const Mesh& mesh, std::span<const int64_t> shape, const DynamicShardingAxes& dynamic_axes,
                    const CorrectionOptions& correction = {}) const;

  bool operator==(const PartitionManager& other) const { return paxis_ == other.paxis_; }

 private:
  PartitionAxis paxis_;
};

// `with manager:` in eformer: makes `manager` this thread's current manager until destruction; guards nest.
// REQUIRES: `manager` outlives the guard; destroyed on the creating thread in reverse order of creation.
class ScopedPartitionManager {
 public:
  explicit ScopedPartitionManager(const PartitionManager& manager);
  ~ScopedPartitionManager();
  ScopedPartitionManager(const ScopedPartitionManager&) = delete;
  ScopedPartitionManager& operator=(const ScopedPartitionManager&) = delete;

 private:
  const PartitionManager* previous_;
};

// eformer get_current_partition_manager(): this thread's innermost scoped manager, or nullptr.
const PartitionManager* CurrentPartitionManager();
// eformer get_partition_manager(): the last manager created by any thread, or nullptr before the first.
std::shared_ptr<const PartitionManager> LastPartitionManager();

// eformer apply_logical_sharding: `manager` if given, else the current one, else the last created; none at all is
// ValueError "No PartitionManager is available. Provide `partition_manager` or use `with PartitionManager(...)`."
ShardResult ApplyLogicalSharding(const Mesh& mesh, std::span<const int64_t> shape, const PartitionManager* manager,
                                 std::span<const SemanticAxis> axes, const ModeOrDim& mode,
                                 const CorrectionOptions& correction = {});

namespace internal {
// Forgets the last created manager (tests of the "no manager" error only).
void ClearLastPartitionManager();
}  // namespace internal

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_PARTITION_MANAGER_H_
