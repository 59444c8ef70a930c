#include "partition/t5x_partitioner.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/error_context.h"

namespace spmdsim {

std::string DataLayout::ToString() const {
  return fmt::format("DataLayout(batch_size={}, shard_id={}, num_shards={}, is_first_host_in_replica_set={})",
                     batch_size.has_value() ? std::to_string(*batch_size) : "None", shard_id, num_shards,
                     is_first_host_in_replica_set ? "True" : "False");
}

T5xPartitioner::T5xPartitioner(Mesh mesh, Options options) : mesh_(std::move(mesh)) {
  rules_ = options.logical_axis_rules.has_value() ? std::move(*options.logical_axis_rules)
                                                  : StandardLogicalAxisRules();
  if (options.multislice) rules_ = MultisliceLogicalAxisRules(rules_);
  const LogicalAxes batch = {LogicalAxis("batch")};
  data_axis_ = LogicalToMeshAxes(batch, rules_)[0];
}

T5xPartitioner T5xPartitioner::FromTopology(std::shared_ptr<const Topology> topology, int num_partitions,
                                            const std::optional<t5x::HardwareMesh>& model_parallel_submesh,
                                            const std::optional<std::vector<int64_t>>& ici_mesh_shape,
                                            const std::optional<std::vector<int64_t>>& dcn_mesh_shape,
                                            std::optional<LogicalAxisRules> logical_axis_rules) {
  bool has_submesh = model_parallel_submesh.has_value() && !model_parallel_submesh->empty();
  if (num_partitions <= 0 && !has_submesh) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "At least one of `num_partitions` or `model_parallel_submesh` must be set.");
  }
  Options options;
  options.logical_axis_rules = std::move(logical_axis_rules);
  options.multislice = ici_mesh_shape.has_value() && dcn_mesh_shape.has_value();
  Mesh mesh = t5x::DefaultMesh(num_partitions, model_parallel_submesh, std::move(topology), ici_mesh_shape,
                               dcn_mesh_shape);
  return T5xPartitioner(std::move(mesh), std::move(options));
}

PartitionSpec T5xPartitioner::data_partition_spec() const { return PartitionSpec({data_axis_}); }

std::vector<std::string> T5xPartitioner::DataAxes() const {
  if (!data_axis_.has_axes()) {
    ThrowKind(ErrorCode::kFailedPrecondition, ErrorKind::kTypeError,
              "'NoneType' object is not iterable: the logical axis rules give 'batch' no mesh axis ({}), so there "
              "is no data axis",
              data_axis_.ToString());
  }
  return data_axis_.axes();
}

int64_t T5xPartitioner::data_mesh_size() const {
  int64_t size = 1;
  for (const std::string& axis : DataAxes()) {
    if (!mesh_.HasAxis(axis)) {
      ThrowKind(ErrorCode::kNotFound, ErrorKind::kKeyError, "'{}': the data axis is not a mesh axis; mesh axes are {}",
                axis, mesh_.ToString());
    }
    size *= mesh_.AxisSize(axis);
  }
  return size;
}

t5x::LocalChunker T5xPartitioner::Chunker(int host) const { return t5x::LocalChunker(mesh_, host); }

int64_t T5xPartitioner::data_shards(int host) const {
  std::vector<std::string> axes = DataAxes();
  t5x::LocalChunker chunker = Chunker(host);
  int64_t shards = 1;
  for (const std::string& axis : axes) shards *= chunker.num_chunks(axis);
  return shards;
}

int64_t T5xPartitioner::data_shard_id(int host) const { return Chunker(host).GetShardId(DataAxes()); }

DataLayout T5xPartitioner::GetDataLayout(std::optional<int64_t> batch_size, int host) const {
  if (data_axis_.is_none()) {
    return DataLayout{batch_size, 0, 1, host == 0};
  }
  const int64_t mesh_size = data_mesh_size();
  const int64_t batch = batch_size.value_or(0) != 0 ? *batch_size : mesh_size;  // Python: batch_size or ...
  if (batch % mesh_size != 0) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Batch size ({}) must be divisible by corresponding data mesh size ({}).", batch, mesh_size);
  }
  std::vector<std::string> axes = DataAxes();
  t5x::LocalChunker chunker = Chunker(host);
  int64_t shards = 1;
  for (const std::string& axis : axes) shards *= chunker.num_chunks(axis);
  if (batch % shards != 0) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Batch size ({}) must be divisible by number of data shards ({}).", batch, shards);
  }
  return DataLayout{batch, chunker.GetShardId(axes), shards, chunker.GetReplicaId(axes) == 0};
}

t5x::LocalChunkInfo T5xPartitioner::GetLocalChunkInfo(const std::vector<int64_t>& global_shape,
                                                      const std::vector<t5x::ChunkMeshAxis>& mesh_axes,
                                                      int host) const {
  return Chunker(host).GetLocalChunkInfo(global_shape, mesh_axes);
}

t5x::LocalChunkInfo T5xPartitioner::GetLocalChunkInfo(const std::vector<int64_t>& global_shape,
                                                      const PartitionSpec& spec, int host) const {
  std::vector<t5x::ChunkMeshAxis> mesh_axes;
  for (const PartitionSpec::Entry& entry : spec.entries()) {
    if (!entry.has_axes()) {
      mesh_axes.emplace_back(std::monostate());
    } else if (entry.is_tuple()) {
      mesh_axes.emplace_back(entry.axes());
    } else {
      mesh_axes.emplace_back(entry.axes()[0]);
    }
  }
  return GetLocalChunkInfo(global_shape, mesh_axes, host);
}

std::vector<std::pair<std::string, std::optional<PartitionSpec>>> T5xPartitioner::GetMeshAxes(
    std::span<const std::pair<std::string, std::optional<LogicalAxes>>> logical_axes) const {
  std::vector<std::pair<std::string, std::optional<PartitionSpec>>> out;
  out.reserve(logical_axes.size());
  for (const auto& [name, axes] : logical_axes) {
    if (!axes.has_value()) {
      out.emplace_back(name, std::nullopt);
      continue;
    }
    try {
      out.emplace_back(name, LogicalToMeshAxes(*axes, rules_));
    } catch (const Error& e) {
      RethrowWithContext(e, fmt::format("Failed to map logical axes for {}: {}", name, e.message()),
                         ErrorKind::kValueError);
    }
  }
  return out;
}

}  // namespace spmdsim
