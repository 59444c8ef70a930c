#include "partition/named_sharding.h"

#include <algorithm>
#include <map>

#include "common/shape.h"
#include "common/strings.h"

namespace spmdsim {

std::string IndexToString(std::span<const IndexRange> index, std::span<const int64_t> global_shape) {
  std::vector<std::string> parts;
  for (size_t d = 0; d < index.size(); ++d) {
    if (index[d].start == 0 && index[d].stop == global_shape[d]) {
      parts.push_back("slice(None, None, None)");
    } else {
      parts.push_back(fmt::format("slice({}, {}, None)", index[d].start, index[d].stop));
    }
  }
  if (parts.size() == 1) return fmt::format("({},)", parts[0]);
  return fmt::format("({})", fmt::join(parts, ", "));
}

// ---------------------------------------------------------------------------------------------------------------
// ShardingLayout

std::vector<int> ShardingLayout::DevicesOfShard(int64_t shard_id) const {
  SPMDSIM_CHECK(shard_id >= 0 && shard_id < num_shards, "shard id {} of {}", shard_id, num_shards);
  std::vector<int> out;
  for (int64_t p : positions_of_shard[shard_id]) out.push_back(shards[p].device);
  return out;
}

const DeviceShard& ShardingLayout::ShardOfDevice(int device) const {
  for (const DeviceShard& s : shards) {
    if (s.device == device) return s;
  }
  Throw(ErrorCode::kNotFound, "device {} is not in the mesh; it has {} devices", device, shards.size());
}

std::vector<std::vector<const DeviceShard*>> ShardingLayout::ShardsByProcess() const {
  std::map<int, std::vector<const DeviceShard*>> by_process;
  for (const DeviceShard& s : shards) by_process[s.process_index].push_back(&s);
  std::vector<std::vector<const DeviceShard*>> out;
  for (auto& [process, list] : by_process) out.push_back(std::move(list));
  return out;
}

int64_t ShardingLayout::ShardBytes(int64_t element_bytes) const { return NumElements(shard_shape) * element_bytes; }

// ---------------------------------------------------------------------------------------------------------------
// NamedSharding

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec) : mesh_(std::move(mesh)), spec_(std::move(spec)) {
  if (mesh_.empty()) {
    // JAX: NamedSharding(Mesh(), P()) is the replicated sharding eformer's get_corrected_named_sharding returns
    // without a mesh; a spec naming axes cannot be placed on no devices.
    if (spec_.empty()) return;
    Throw(ErrorCode::kInvalidArgument,
          "NamedSharding needs a mesh with at least one device; got an empty mesh (only P() is allowed on it)");
  }
  ValidateSpec(spec_, mesh_);
  // JAX (NamedSharding.__init__ -> check_pspec_mix_axis_type): UNCONSTRAINED needs an Auto axis to leave open.
  const auto& entries = spec_.entries();
  const bool unconstrained = std::any_of(entries.begin(), entries.end(), [](const PartitionSpec::Entry& e) {
    return e.kind() == PartitionSpec::Entry::Kind::kUnconstrained;
  });
  if (unconstrained && !mesh_.HasAutoAxis()) {
    std::vector<std::string> types;
    for (AxisType t : mesh_.axis_types()) types.emplace_back(AxisTypeName(t));
    Throw(ErrorCode::kInvalidArgument,
          "{} cannot contain `P.UNCONSTRAINED` when no mesh axis_types are `Auto`. Got mesh axis_types: {}",
          spec_.ToString(),
          types.size() == 1 ? fmt::format("({},)", types[0]) : fmt::format("({})", fmt::join(types, ", ")));
  }
}

bool NamedSharding::is_fully_replicated() const {
  if (mesh_.size() == 1) return true;
  int64_t partitions = 1;
  for (const auto& a : spec_.FlatAxes()) partitions *= mesh_.AxisSize(a);
  return partitions == 1;
}

std::vector<std::string> NamedSharding::ReplicatedAxes() const {
  const std::vector<std::string> used = spec_.FlatAxes();
  std::vector<std::string> out;
  for (const auto& a : mesh_.axis_names()) {
    if (std::find(used.begin(), used.end(), a) == used.end()) out.push_back(a);
  }
  return out;
}

std::string NamedSharding::ToString() const { return JaxNamedShardingString(mesh_, spec_); }

void NamedSharding::CheckShape(std::span<const int64_t> global_shape) const {
  const int rank = static_cast<int>(global_shape.size());
  if (spec_.size() <= rank) {
    ValidateSpec(spec_, mesh_, global_shape);
    return;
  }
  // JAX 0.10.2's shard_shape and devices_indices_map read the entries past the array's rank only where they split:
  // one that splits nothing (None, or axes of size 1) is ignored, one that splits fails (JAX: IndexError from
  // indexing the shape). JAX's "only valid for values of rank at least" check (ValidateSpec) is jit's, not these.
  for (int d = rank; d < spec_.size(); ++d) {
    const int64_t parts = EntryPartitions(spec_[d], mesh_);
    if (parts > 1) {
      ThrowKind(ErrorCode::kOutOfRange, ErrorKind::kIndexError,
                "{} splits dimension {} {} ways, but the array has rank {} (shape {}); JAX says: list index out of "
                "range",
                spec_.ToString(), d, parts, rank,
                PyTuple(std::vector<int64_t>(global_shape.begin(), global_shape.end())));
    }
  }
  std::vector<PartitionSpec::Entry> head(spec_.entries().begin(), spec_.entries().begin() + rank);
  ValidateSpec(PartitionSpec(std::move(head)), mesh_, global_shape);
}

std::vector<int64_t> NamedSharding::ShardShape(std::span<const int64_t> global_shape) const {
  CheckShape(global_shape);
  std::vector<int64_t> out(global_shape.begin(), global_shape.end());
  const int dims = std::min(spec_.size(), static_cast<int>(out.size()));
  for (int d = 0; d < dims; ++d) out[d] /= EntryPartitions(spec_[d], mesh_);
  return out;
}

ShardingLayout NamedSharding::Layout(std::span<const int64_t> global_shape) const {
  CheckShape(global_shape);
  const int rank = static_cast<int>(global_shape.size());
  ShardingLayout layout;
  layout.global_shape.assign(global_shape.begin(), global_shape.end());
  layout.shard_shape = layout.global_shape;
  layout.tiling.assign(rank, 1);

  // Per dimension: the mesh dimensions of its axes (major first) and their sizes.
  std::vector<std::vector<int>> dim_axes(rank);
  for (int d = 0; d < std::min(spec_.size(), rank); ++d) {
    for (const auto& a : spec_[d].axes()) {
      const int ax = mesh_.AxisIndex(a);
      dim_axes[d].push_back(ax);
      layout.tiling[d] *= mesh_.shape()[ax];
    }
    layout.shard_shape[d] /= layout.tiling[d];
  }
  layout.num_shards = NumElements(layout.tiling);
  layout.num_replicas = mesh_.size() / layout.num_shards;
  const std::vector<int64_t> tiling_strides = RowMajorStrides(layout.tiling);

  const int mesh_rank = mesh_.rank();
  const std::vector<int64_t>& mesh_shape = mesh_.shape();
  const Topology* topology = mesh_.topology();
  std::vector<int64_t> coords(mesh_rank, 0);
  std::vector<int64_t> replicas_seen(layout.num_shards, 0);
  layout.positions_of_shard.assign(layout.num_shards, {});
  for (auto& list : layout.positions_of_shard) list.reserve(layout.num_replicas);
  layout.shards.resize(mesh_.size());
  for (int64_t p = 0; p < mesh_.size(); ++p) {
    DeviceShard& s = layout.shards[p];
    s.position = p;
    s.device = mesh_.DeviceAt(p);
    s.process_index = topology != nullptr ? topology->device(s.device).process_index : 0;
    s.index.resize(rank);
    int64_t shard_id = 0;
    for (int d = 0; d < rank; ++d) {
      int64_t block = 0;
      for (int ax : dim_axes[d]) block = block * mesh_shape[ax] + coords[ax];
      s.index[d] = {block * layout.shard_shape[d], (block + 1) * layout.shard_shape[d]};
      shard_id += block * tiling_strides[d];
    }
    s.shard_id = shard_id;
    s.replica_id = replicas_seen[shard_id]++;
    layout.positions_of_shard[shard_id].push_back(p);
    // Advance the row-major mesh coordinates.
    for (int ax = mesh_rank - 1; ax >= 0; --ax) {
      if (++coords[ax] < mesh_shape[ax]) break;
      coords[ax] = 0;
    }
  }
  return layout;
}

// ---------------------------------------------------------------------------------------------------------------
// Block copies

namespace {

// The block `index` of a row-major array of `shape` as a strided view of it: the block's shape, the array's
// strides, the block's own row-major strides and the offset of its first element in the array (elements).
// Per shard and per device: no heap allocation below rank 9 (DimVector).
struct BlockView {
  DimVector shape, array_strides, block_strides;
  int64_t offset = 0;
};

BlockView ViewOf(std::span<const int64_t> shape, std::span<const IndexRange> index) {
  const size_t rank = shape.size();
  BlockView v;
  v.shape.resize(rank, boost::container::default_init);  // every element is written below
  v.array_strides.resize(rank, boost::container::default_init);
  v.block_strides.resize(rank, boost::container::default_init);
  int64_t array_stride = 1, block_stride = 1;
  for (size_t d = rank; d-- > 0;) {
    SPMDSIM_CHECK(index[d].start >= 0 && index[d].start <= index[d].stop && index[d].stop <= shape[d],
                  "index [{}, {}) outside dimension {} of size {}", index[d].start, index[d].stop, d, shape[d]);
    v.shape[d] = index[d].size();
    v.array_strides[d] = array_stride;
    v.block_strides[d] = block_stride;
    v.offset += index[d].start * array_stride;
    array_stride *= shape[d];
    block_stride *= v.shape[d];
  }
  return v;
}

std::span<const int64_t> Span(const DimVector& v) { return {v.data(), v.size()}; }

}  // namespace

void CopyBlockOut(const std::byte* global, std::span<const int64_t> global_shape, std::span<const IndexRange> index,
                  size_t element_bytes, std::byte* block) {
  const BlockView v = ViewOf(global_shape, index);
  StridedCopy(global, v.offset, Span(v.array_strides), block, 0, Span(v.block_strides), Span(v.shape),
              static_cast<int64_t>(element_bytes));
}

void CopyBlockIn(const std::byte* block, std::span<const int64_t> global_shape, std::span<const IndexRange> index,
                 size_t element_bytes, std::byte* global) {
  const BlockView v = ViewOf(global_shape, index);
  StridedCopy(block, 0, Span(v.block_strides), global, v.offset, Span(v.array_strides), Span(v.shape),
              static_cast<int64_t>(element_bytes));
}

std::vector<std::vector<std::byte>> ScatterBytes(const ShardingLayout& layout, std::span<const std::byte> global,
                                                 size_t element_bytes) {
  const size_t expected = static_cast<size_t>(NumElements(layout.global_shape)) * element_bytes;
  if (global.size() != expected) {
    Throw(ErrorCode::kInvalidArgument, "scatter: the global array has {} bytes but shape {} of {}-byte elements "
          "needs {}", global.size(), PyTuple(layout.global_shape), element_bytes, expected);
  }
  const size_t shard_bytes = static_cast<size_t>(layout.ShardBytes(static_cast<int64_t>(element_bytes)));
  std::vector<std::vector<std::byte>> out(layout.shards.size());
  for (int64_t id = 0; id < layout.num_shards; ++id) {
    const auto& positions = layout.positions_of_shard[id];
    std::vector<std::byte>& first = out[positions[0]];
    first.resize(shard_bytes);
    CopyBlockOut(global.data(), layout.global_shape, layout.shards[positions[0]].index, element_bytes,
                 first.data());
    for (size_t r = 1; r < positions.size(); ++r) out[positions[r]] = first;
  }
  return out;
}

std::vector<std::byte> GatherBytes(const ShardingLayout& layout, std::span<const std::vector<std::byte>> shards,
                                   size_t element_bytes, const GatherOptions& options) {
  if (shards.size() != layout.shards.size()) {
    Throw(ErrorCode::kInvalidArgument, "gather: got {} shards but the mesh has {} devices", shards.size(),
          layout.shards.size());
  }
  const size_t shard_bytes = static_cast<size_t>(layout.ShardBytes(static_cast<int64_t>(element_bytes)));
  for (size_t p = 0; p < shards.size(); ++p) {
    if (shards[p].size() != shard_bytes) {
      Throw(ErrorCode::kInvalidArgument, "gather: the shard of device {} has {} bytes; shard shape {} of {}-byte "
            "elements needs {}", layout.shards[p].device, shards[p].size(), PyTuple(layout.shard_shape),
            element_bytes, shard_bytes);
    }
  }
  std::vector<std::byte> global(static_cast<size_t>(NumElements(layout.global_shape)) * element_bytes);
  std::vector<std::string> mismatches;
  for (int64_t id = 0; id < layout.num_shards; ++id) {
    const auto& positions = layout.positions_of_shard[id];
    const DeviceShard& first = layout.shards[positions[0]];
    CopyBlockIn(shards[positions[0]].data(), layout.global_shape, first.index, element_bytes, global.data());
    if (!options.check_replicas) continue;
    std::vector<int> differing;
    for (size_t r = 1; r < positions.size(); ++r) {
      if (shard_bytes != 0 && std::memcmp(shards[positions[r]].data(), shards[positions[0]].data(), shard_bytes) != 0) {
        differing.push_back(layout.shards[positions[r]].device);
      }
    }
    if (!differing.empty()) {
      mismatches.push_back(fmt::format("block {} {}: device(s) {} differ from device {} (replica 0)", id,
                                       IndexToString(first.index, layout.global_shape), fmt::join(differing, ", "),
                                       first.device));
    }
  }
  if (!mismatches.empty()) {
    Throw(ErrorCode::kInvalidArgument, "gather: replicas disagree: {}", fmt::join(mismatches, "; "));
  }
  return global;
}

}  // namespace spmdsim
