#include "partition/partition_manager.h"

#include <atomic>

#include <fmt/format.h>

#include "common/error.h"
#include "common/thread_annotations.h"

namespace spmdsim {
namespace {

Mutex last_manager_mutex;
std::shared_ptr<const PartitionManager>& LastManagerSlot() SPMDSIM_REQUIRES(last_manager_mutex) {
  static auto* slot = new std::shared_ptr<const PartitionManager>();
  return *slot;
}

thread_local const PartitionManager* current_manager = nullptr;

SemanticAxis S(std::string_view token) { return SemanticAxis(token); }
SemanticAxis C(std::initializer_list<std::string_view> tokens) {
  std::vector<std::string> names;
  for (std::string_view t : tokens) names.emplace_back(t);
  return SemanticAxis::Composite(std::move(names));
}

}  // namespace

RuntimeMode InferRuntimeMode(const ModeOrDim& mode, std::optional<std::span<const int64_t>> shape) {
  if (const RuntimeMode* given = std::get_if<RuntimeMode>(&mode)) return *given;
  int dim = std::get<int>(mode);
  if (!shape.has_value()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "when using dynamic mode detection shape should be provided");
  }
  const int rank = static_cast<int>(shape->size());
  int index = dim < 0 ? dim + rank : dim;  // Python indexing
  if (index < 0 || index >= rank) {
    ThrowKind(ErrorCode::kOutOfRange, ErrorKind::kIndexError,
              "tuple index out of range (mode is dimension {} of a shape of rank {})", dim, rank);
  }
  return (*shape)[index] == 1 ? RuntimeMode::kDecode : RuntimeMode::kTrain;
}

const std::vector<std::pair<std::string_view, DynamicShardingAxes>>& DynamicShardingPresets() {
  using namespace semantic;  // NOLINT: the table reads like eformer's
  constexpr RuntimeMode kTrainMode = RuntimeMode::kTrain;
  static const std::vector<std::pair<std::string_view, DynamicShardingAxes>> presets = {
      {"HiddenStateSharding", {{S(kBatch), S(kQueryLength), S(kEmbed)}, 1}},
      {"AttnQSharding", {{S(kBatch), S(kQueryLength), S(kHead), S(kHeadDim)}, 1}},
      {"AttnKVSharding", {{S(kBatch), S(kKvLength), S(kKvHead), S(kKvHeadDim)}, 1}},
      {"RowWise", {{S(kTensorParallel), C({kFullyShardedDataParallel, kSequenceParallel})}, kTrainMode}},
      {"SRowWise", {{S(kTensorParallel)}, kTrainMode}},
      {"ColumnWise", {{C({kFullyShardedDataParallel, kSequenceParallel}), S(kTensorParallel)}, kTrainMode}},
      {"SColumnWise", {{C({kFullyShardedDataParallel, kSequenceParallel})}, kTrainMode}},
      {"Replicated", {{S(kEmpty)}, kTrainMode}},
      {"ExpertColumnWise", {{S(kExpertParallel), S(kFullyShardedDataParallel), S(kTensorParallel)}, kTrainMode}},
      {"ExpertRowWise", {{S(kExpertParallel), S(kTensorParallel), S(kFullyShardedDataParallel)}, kTrainMode}},
      {"ExpertColumnWiseAlt",
       {{S(kExpertParallel), C({kFullyShardedDataParallel, kSequenceParallel}), S(kTensorParallel)}, kTrainMode}},
      {"ExpertRowWiseAlt",
       {{S(kExpertParallel), S(kTensorParallel), C({kFullyShardedDataParallel, kSequenceParallel})}, kTrainMode}},
      {"UnifiedExpertColumnWise",
       {{C({kFullyShardedDataParallel, kSequenceParallel, kExpertParallel}), S(kEmpty), S(kTensorParallel)},
        kTrainMode}},
      {"UnifiedExpertRowWise",
       {{C({kFullyShardedDataParallel, kSequenceParallel, kExpertParallel}), S(kTensorParallel), S(kEmpty)},
        kTrainMode}},
      {"ExpertActivations",
       {{S(kDataParallel), S(kSequenceParallel), S(kExpertParallel), S(kTensorParallel)}, kTrainMode}},
      {"ExpertActivationsAlt",
       {{S(kDataParallel), S(kSequenceParallel), C({kTensorParallel, kFullyShardedDataParallel})}, kTrainMode}},
      {"ExpertTensorParallel", {{S(kTensorParallel), S(kEmpty), S(kEmpty)}, kTrainMode}},
  };
  return presets;
}

const DynamicShardingAxes& FindDynamicShardingPreset(std::string_view name) {
  std::vector<std::string_view> names;
  for (const auto& [preset, axes] : DynamicShardingPresets()) {
    if (preset == name) return axes;
    names.push_back(preset);
  }
  Throw(ErrorCode::kNotFound, "no DynamicShardingAxes preset '{}'; presets are {}", name, fmt::join(names, ", "));
}

PartitionManager::PartitionManager(PartitionAxis paxis) : paxis_(std::move(paxis)) {
  auto copy = std::make_shared<const PartitionManager>(*this);
  MutexLock lock(last_manager_mutex);
  LastManagerSlot() = std::move(copy);
}

PartitionSpec PartitionManager::Resolve(std::span<const SemanticAxis> axes, const ModeOrDim& mode,
                                        std::optional<std::span<const int64_t>> shape) const {
  return paxis_.ResolveSpec(axes, InferRuntimeMode(mode, shape));
}

PartitionSpec PartitionManager::Resolve(const DynamicShardingAxes& dynamic_axes,
                                        std::optional<std::span<const int64_t>> shape) const {
  return Resolve(dynamic_axes.axes, dynamic_axes.mode, shape);
}

ShardResult PartitionManager::Shard(const Mesh& mesh, std::span<const int64_t> shape,
                                    std::span<const SemanticAxis> axes, const ModeOrDim& mode,
                                    const CorrectionOptions& correction) const {
  ShardResult result;
  result.resolved = Resolve(axes, mode, shape);
  result.report = CorrectSpec(result.resolved, mesh, shape, correction);
  if (!mesh.empty()) {
    result.sharding.emplace(mesh, result.report.corrected);
    result.constraint_applied = !result.report.corrected.empty();
  }
  return result;
}

ShardResult PartitionManager::Shard(const Mesh& mesh, std::span<const int64_t> shape,
                                    const DynamicShardingAxes& dynamic_axes,
                                    const CorrectionOptions& correction) const {
  return Shard(mesh, shape, dynamic_axes.axes, dynamic_axes.mode, correction);
}

ScopedPartitionManager::ScopedPartitionManager(const PartitionManager& manager)
    : previous_(std::exchange(current_manager, &manager)) {}

ScopedPartitionManager::~ScopedPartitionManager() { current_manager = previous_; }

const PartitionManager* CurrentPartitionManager() { return current_manager; }

std::shared_ptr<const PartitionManager> LastPartitionManager() {
  MutexLock lock(last_manager_mutex);
  return LastManagerSlot();
}

namespace internal {
void ClearLastPartitionManager() {
  MutexLock lock(last_manager_mutex);
  LastManagerSlot().reset();
}
}  // namespace internal

ShardResult ApplyLogicalSharding(const Mesh& mesh, std::span<const int64_t> shape, const PartitionManager* manager,
                                 std::span<const SemanticAxis> axes, const ModeOrDim& mode,
                                 const CorrectionOptions& correction) {
  if (manager == nullptr) manager = CurrentPartitionManager();
  std::shared_ptr<const PartitionManager> last;
  if (manager == nullptr) {
    last = LastPartitionManager();
    manager = last.get();
  }
  if (manager == nullptr) {
    ThrowKind(ErrorCode::kFailedPrecondition, ErrorKind::kValueError,
              "No PartitionManager is available. Provide `partition_manager` or use `with PartitionManager(...)`.");
  }
  return manager->Shard(mesh, shape, axes, mode, correction);
}

}  // namespace spmdsim
