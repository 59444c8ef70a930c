#include "sim/group_exchange.h"

#include <fmt/format.h>

#include "common/error.h"
#include "sim/multiprocess.h"
#include "sim/runtime.h"

namespace spmdsim {

DeviceGroups::DeviceGroups(int64_t num_devices, std::vector<std::vector<int64_t>> groups)
    : groups_(std::move(groups)),
      group_of_(static_cast<size_t>(num_devices), -1),
      rank_(static_cast<size_t>(num_devices), -1) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t r = 0; r < groups_[g].size(); ++r) {
      const int64_t p = groups_[g][r];
      if (p < 0 || p >= num_devices) {
        Throw(ErrorCode::kInvalidArgument, "device group {} names position {}; positions are 0..{}", g, p,
              num_devices - 1);
      }
      if (group_of_[p] >= 0)
        Throw(ErrorCode::kInvalidArgument, "position {} is in device groups {} and {}", p, group_of_[p], g);
      group_of_[p] = static_cast<int64_t>(g);
      rank_[p] = static_cast<int64_t>(r);
    }
  }
  for (int64_t p = 0; p < num_devices; ++p) {
    if (group_of_[p] < 0) {
      Throw(ErrorCode::kInvalidArgument, "position {} is in no device group; every device takes part in every exchange",
            p);
    }
  }
}

PermutePairs::PermutePairs(int64_t num_devices, const std::vector<std::pair<int64_t, int64_t>>& pairs)
    : source_of_(static_cast<size_t>(num_devices), -1) {
  std::vector<bool> sends(static_cast<size_t>(num_devices), false);
  for (const auto& [s, t] : pairs) {
    if (s < 0 || s >= num_devices || t < 0 || t >= num_devices) {
      Throw(ErrorCode::kInvalidArgument, "permute pair ({}, {}) is outside positions 0..{}", s, t, num_devices - 1);
    }
    if (sends[s]) Throw(ErrorCode::kInvalidArgument, "position {} is a permute source twice", s);
    if (source_of_[t] >= 0) Throw(ErrorCode::kInvalidArgument, "position {} is a permute target twice", t);
    sends[s] = true;
    source_of_[t] = s;
  }
}

// Two tables of one slot per device, used in alternate rounds: a device writes round r's table only after every
// device passed round r-1's barrier, so nobody still reads what it overwrites (round r-2's).
struct GroupExchange::Slots {
  explicit Slots(int64_t n)
      : table{std::vector<Array>(static_cast<size_t>(n)), std::vector<Array>(static_cast<size_t>(n))},
        round(static_cast<size_t>(n), 0) {}
  std::vector<Array> table[2];
  std::vector<uint64_t> round;  // per device, written by that device only
};

GroupExchange::GroupExchange(const Runtime& runtime)
    : slots_(std::make_unique<Slots>(runtime.num_devices())) {
  const auto& group = runtime.options().process_group;
  if (group != nullptr && group->size() > 1) {
    Throw(ErrorCode::kUnimplemented,
          "exchanges over explicit device groups run in one process; this runtime spans {} processes", group->size());
  }
}

GroupExchange::~GroupExchange() = default;

const std::vector<Array>& GroupExchange::Publish(DeviceContext& d, const Array& mine) {
  const int64_t p = d.position();
  const uint64_t r = slots_->round[p]++;
  std::vector<Array>& table = slots_->table[r % 2];
  table[p] = mine;
  d.Barrier();
  slots_->table[(r + 1) % 2][p] = Array();  // last round's contribution: every device has read it by now
  return table;
}

std::vector<Array> GroupExchange::Exchange(DeviceContext& d, const Array& mine, const DeviceGroups& groups) {
  SPMDSIM_CHECK(groups.num_devices() == static_cast<int64_t>(slots_->round.size()),
                "groups of {} devices on a mesh of {}", groups.num_devices(), slots_->round.size());
  const std::vector<Array>& table = Publish(d, mine);
  std::vector<Array> members;
  for (int64_t m : groups.GroupOf(d.position())) members.push_back(table[m]);
  return members;
}

Array GroupExchange::Permute(DeviceContext& d, const Array& mine, const PermutePairs& pairs) {
  const std::vector<Array>& table = Publish(d, mine);
  const int64_t source = pairs.SourceOf(d.position());
  return source < 0 ? Array() : table[source];
}

}  // namespace spmdsim
