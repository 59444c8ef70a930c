// Collectives over explicit groups of devices (XLA's replica groups and source-target pairs), for programs whose
// groups are not products of mesh axes: an HLO module imported from XLA names its groups by device id
// (hlo/groups.h). DeviceContext (sim/device_context.h) groups devices by mesh axes only.
//
// GroupExchange moves ARRAY HANDLES, not bytes: at an exchange every device of the mesh hands over one Array and
// receives the Arrays of the members of its own group, in group order (zero-copy: devices share the host's
// memory). Any collective is that exchange followed by local work of the receiver (a reduction folds the
// members in group order, an all-gather concatenates them, a reduce-scatter folds its own block of each); the
// caller does that work, so that its order and arithmetic are its own (hlo/eval_collectives.cc folds as XLA
// CPU's in-process collectives do). Permute delivers, to each device, the Array of the device that sends to it.
//
// Example (mesh of 4 devices, groups {0,2} and {1,3}; every device passes Array::Scalar<float>(position)):
//   GroupExchange exchange(runtime);
//   DeviceGroups groups(4, {{0, 2}, {1, 3}});
//   runtime.Run([&](DeviceContext& d) {
//     std::vector<Array> members = exchange.Exchange(d, Array::Scalar<float>(d.position()), groups);
//     // position 2: members == {[0], [2]} (group {0, 2}), groups.RankOf(2) == 1
//   });
//
// SPMD contract: every device of the mesh calls the same exchanges in the same order with the same DeviceGroups
// (or PermutePairs) object, even a device whose group is itself alone (each exchange is one mesh-wide Barrier).
// A device that calls something else, or returns early, makes Runtime::Run throw as for any collective.
// Memory: received handles are the senders' arrays, charged to their senders; a receiver that keeps one calls
// DeviceContext::Hold to be charged too. The exchange keeps each device's last contribution until its next one.
// Several processes: not supported (the handles of another rank's devices are not in this process); the
// constructor refuses a Runtime with a process group of more than one rank.
//
// Thread safety: one GroupExchange per Runtime::Run, shared by its devices as the contract says; DeviceGroups and
// PermutePairs are immutable after construction and may be shared by any threads.
// Memory ordering: everything a device wrote before it calls Exchange or Permute happens before every device
// of its group returns from that call.
#ifndef SPMDSIM_SIM_GROUP_EXCHANGE_H_
#define SPMDSIM_SIM_GROUP_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sim/array.h"
#include "sim/device_context.h"

namespace spmdsim {

class Runtime;

// A partition of mesh positions 0..N-1 into ordered groups.
class DeviceGroups {
 public:
  // Throws Error(kInvalidArgument) naming the fault when a position is outside 0..N-1 or in two groups, or a
  // position is in none (every device takes part in every exchange). Groups may differ in size.
  DeviceGroups(int64_t num_devices, std::vector<std::vector<int64_t>> groups);
  int64_t num_devices() const { return static_cast<int64_t>(group_of_.size()); }
  const std::vector<std::vector<int64_t>>& groups() const { return groups_; }
  // The group (in order) that `position` belongs to, and its index in it.
  const std::vector<int64_t>& GroupOf(int64_t position) const { return groups_[group_of_[position]]; }
  int64_t RankOf(int64_t position) const { return rank_[position]; }

 private:
  std::vector<std::vector<int64_t>> groups_;
  std::vector<int64_t> group_of_, rank_;
};

// (source, target) pairs of mesh positions: each target receives from at most one source.
class PermutePairs {
 public:
  // Throws Error(kInvalidArgument) for a position outside 0..N-1, a source or a target named twice.
  PermutePairs(int64_t num_devices, const std::vector<std::pair<int64_t, int64_t>>& pairs);
  // The position that sends to `position`, or -1.
  int64_t SourceOf(int64_t position) const { return source_of_[position]; }

 private:
  std::vector<int64_t> source_of_;
};

class GroupExchange {
 public:
  // Throws Error(kUnimplemented) when the runtime spans several processes.
  explicit GroupExchange(const Runtime& runtime);
  ~GroupExchange();
  GroupExchange(const GroupExchange&) = delete;
  GroupExchange& operator=(const GroupExchange&) = delete;

  // Every member's `mine` of d's group, in group order (d's own included, at groups.RankOf(d.position())).
  // REQUIRES: groups.num_devices() == the mesh's size; called from d's device function.
  std::vector<Array> Exchange(DeviceContext& d, const Array& mine, const DeviceGroups& groups);
  // What the source of d sent (its `mine`), or an invalid Array when nothing is sent to d.
  Array Permute(DeviceContext& d, const Array& mine, const PermutePairs& pairs);

 private:
  struct Slots;
  // Publishes `mine`, waits for every device, and returns the round's slots.
  const std::vector<Array>& Publish(DeviceContext& d, const Array& mine);
  std::unique_ptr<Slots> slots_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_GROUP_EXCHANGE_H_
