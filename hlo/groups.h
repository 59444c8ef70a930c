// Which devices a collective combines: XLA's collective group modes (xla/service/collective_ops_utils.h,
// GetCollectiveOpGroupMode and GetParticipatingDevices) resolved to logical device ids.
//
// A module compiled for R replicas and P partitions runs on R x P devices; logical device id = r * P + p
// (XLA's "global device id" before the device assignment maps it to a physical device). With JAX's SPMD
// programs R = 1 and the logical id is the partition id.
//
//   mode                       when                                          replica_groups hold
//   kCrossReplica              no channel_id                                 replica ids; one set per partition
//   kCrossPartition            channel_id, op without use_global_device_ids  partition ids; one set per replica
//                              (all-to-all, collective-permute, -broadcast)
//   kCrossReplicaAndPartition  channel_id, use_global_device_ids=false       replica ids; every partition of them
//   kFlattenedId               channel_id, use_global_device_ids=true        logical device ids
// Empty replica_groups: all ids in one group.
//
// Example: P = 8, R = 1, all-reduce(channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}},
// use_global_device_ids=true) -> groups {0,1,2,3}, {4,5,6,7}; the same without channel_id -> eight groups of
// one (each device alone: an identity).
//
// Thread safety: pure.
#ifndef SPMDSIM_HLO_GROUPS_H_
#define SPMDSIM_HLO_GROUPS_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "hlo/ir.h"

namespace spmdsim::hlo {

enum class GroupMode : uint8_t { kCrossReplica, kCrossPartition, kCrossReplicaAndPartition, kFlattenedId };
std::string_view GroupModeName(GroupMode mode);

GroupMode CollectiveGroupMode(const Instruction& collective);

// Every group of devices the collective combines, as logical device ids, each in the order the collective
// combines its members (XLA's rank order). Every device of the module is in exactly one group (devices the
// groups do not name form groups of one). Throws Error(kInvalidArgument) naming the instruction when an id is
// out of range or repeated, or the groups differ in size.
// REQUIRES: an all-reduce, all-gather, reduce-scatter, all-to-all, collective-broadcast or their -start forms.
std::vector<std::vector<int64_t>> GroupsOf(const Instruction& collective, int64_t replica_count,
                                               int64_t num_partitions);

// collective-permute(-start): (source, target) pairs of logical device ids. Throws as DeviceGroups for ids out of
// range and for a source or target named twice within one replica (partition) set.
std::vector<std::pair<int64_t, int64_t>> PairsOf(const Instruction& permute, int64_t replica_count,
                                                      int64_t num_partitions);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_GROUPS_H_
