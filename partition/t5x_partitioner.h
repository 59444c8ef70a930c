// T5xPartitioner: T5X's partitioner surface without jit (t5x/partitioning.py: BasePartitioner, PjitPartitioner,
// DataLayout): a mesh plus logical axis rules, the data axis the rules give 'batch', how a global batch is split
// over hosts, and the mesh axes of named parameters.
//
// The data axis is what the rules assign to the single name 'batch' (PjitPartitioner: logical_to_mesh_axes(
// ['batch'], rules)[0]); with a multi-slice mesh (ici and dcn shapes both given) every 'batch' rule first becomes
// ('replica', 'data'). Host-dependent figures use t5x's LocalChunker as it runs on that host.
//
// Example (t5x's own test topology): tpu-v3:4x4, DefaultMesh(4) = Mesh('data': 8, 'model': 4), 4 hosts, each
// holding 2 rows of 'data' -> data_mesh_size 8, data_shards 4; GetDataLayout(64, host 1) ==
// DataLayout(batch_size=64, shard_id=2, num_shards=4, is_first_host_in_replica_set=True) (host 1 holds the
// third block of rows).
//
// Deviation: t5x's get_data_layout raises NotImplementedError for an explicit host_index; here any host of the
// topology may be asked (the answer is what t5x computes on that host).
#ifndef SPMDSIM_PARTITION_T5X_PARTITIONER_H_
#define SPMDSIM_PARTITION_T5X_PARTITIONER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mesh/mesh.h"
#include "mesh/t5x_mesh.h"
#include "partition/logical_axis_rules.h"
#include "partition/partition_spec.h"

namespace spmdsim {

// T5X: DataLayout. batch_size is absent only when the rules give 'batch' no mesh axis and none was asked for.
struct DataLayout {
  std::optional<int64_t> batch_size;
  int64_t shard_id = 0;
  int64_t num_shards = 1;
  bool is_first_host_in_replica_set = true;
  // "DataLayout(batch_size=64, shard_id=2, num_shards=4, is_first_host_in_replica_set=True)".
  std::string ToString() const;
  bool operator==(const DataLayout& other) const = default;
};

class T5xPartitioner {
 public:
  struct Options {
    // nullopt: StandardLogicalAxisRules() (T5X's default).
    std::optional<LogicalAxisRules> logical_axis_rules;
    // T5X: ici_mesh_shape and dcn_mesh_shape both given. Rewrites 'batch' rules to ('replica', 'data').
    bool multislice = false;
  };

  // REQUIRES for host-dependent calls: the mesh has a topology (Mesh::Iota gives a one-process CPU one).
  explicit T5xPartitioner(Mesh mesh, Options options);
  explicit T5xPartitioner(Mesh mesh) : T5xPartitioner(std::move(mesh), Options()) {}
  // T5X's constructor arguments: the mesh is t5x::DefaultMesh(num_partitions, model_parallel_submesh, topology,
  // ici_mesh_shape, dcn_mesh_shape). Neither num_partitions (> 0) nor a submesh is T5X's ValueError "At least
  // one of `num_partitions` or `model_parallel_submesh` must be set."
  static T5xPartitioner FromTopology(std::shared_ptr<const Topology> topology, int num_partitions,
                                     const std::optional<t5x::HardwareMesh>& model_parallel_submesh = std::nullopt,
                                     const std::optional<std::vector<int64_t>>& ici_mesh_shape = std::nullopt,
                                     const std::optional<std::vector<int64_t>>& dcn_mesh_shape = std::nullopt,
                                     std::optional<LogicalAxisRules> logical_axis_rules = std::nullopt);

  const Mesh& mesh() const { return mesh_; }
  const LogicalAxisRules& logical_axis_rules() const { return rules_; }
  // The mesh axes of 'batch' (None when the rules give it none).
  const PartitionSpec::Entry& data_axis() const { return data_axis_; }

  // T5X: data_partition_spec = PartitionSpec(data_axis).
  PartitionSpec data_partition_spec() const;
  // T5X: data_mesh_size, the product of the data axes' sizes. Throws KeyError for a data axis the mesh lacks
  // and TypeError when there is no data axis (t5x iterates over None).
  int64_t data_mesh_size() const;
  // T5X: data_shards, the number of hosts the batch is split over (product of the data axes' chunk counts).
  int64_t data_shards(int host = 0) const;
  // T5X: data_shard_id, the host's shard along the data axes.
  int64_t data_shard_id(int host = 0) const;
  // T5X: get_data_layout(batch_size). batch_size nullopt or 0 means data_mesh_size. Throws T5X's ValueErrors
  // "Batch size (12) must be divisible by corresponding data mesh size (8)." and "Batch size (20) must be
  // divisible by number of data shards (8)." With no data axis: DataLayout(batch_size as given, 0, 1, host == 0).
  DataLayout GetDataLayout(std::optional<int64_t> batch_size = std::nullopt, int host = 0) const;
  // T5X: get_local_chunk_info, for `host`.
  t5x::LocalChunkInfo GetLocalChunkInfo(const std::vector<int64_t>& global_shape,
                                        const std::vector<t5x::ChunkMeshAxis>& mesh_axes, int host = 0) const;
  // Same with the mesh axes of a spec (a tuple entry is t5x's NotImplementedError).
  t5x::LocalChunkInfo GetLocalChunkInfo(const std::vector<int64_t>& global_shape, const PartitionSpec& spec,
                                        int host = 0) const;

  // T5X: get_mesh_axes over flattened parameter paths ('params/dense/kernel'): each parameter's logical axes
  // through the rules; a parameter without logical axes stays without a spec. A failing parameter is
  // ValueError "Failed to map logical axes for params/dense/kernel: <the cause>".
  std::vector<std::pair<std::string, std::optional<PartitionSpec>>> GetMeshAxes(
      std::span<const std::pair<std::string, std::optional<LogicalAxes>>> logical_axes) const;

 private:
  std::vector<std::string> DataAxes() const;  // throws TypeError without a data axis
  t5x::LocalChunker Chunker(int host) const;

  Mesh mesh_;
  LogicalAxisRules rules_;
  PartitionSpec::Entry data_axis_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_T5X_PARTITIONER_H_
