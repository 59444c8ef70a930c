#include "hlo/groups.h"

#include <numeric>

#include <fmt/format.h>

#include "common/error.h"

namespace spmdsim::hlo {
namespace {

bool HasGlobalDeviceIdsFlag(Opcode op) {
  return op == Opcode::kAllReduce || op == Opcode::kAllReduceStart || op == Opcode::kAllGather ||
         op == Opcode::kAllGatherStart || op == Opcode::kReduceScatter;
}

[[noreturn]] void Fail(const Instruction& c, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}: %{} ({}): {}", c.Where(), c.name(), OpcodeName(c.opcode()), message));
}

// The groups as written (or all ids), each id in [0, n) exactly once, all of one size.
std::vector<std::vector<int64_t>> CheckedGroups(const Instruction& c, int64_t n, std::string_view what) {
  std::vector<std::vector<int64_t>> groups = c.attrs().replica_groups;
  if (groups.empty()) {
    groups.emplace_back(static_cast<size_t>(n));
    std::iota(groups[0].begin(), groups[0].end(), 0);
    return groups;
  }
  std::vector<bool> seen(static_cast<size_t>(n), false);
  int64_t count = 0;
  for (const auto& g : groups) {
    if (g.empty() || g.size() != groups[0].size()) {
      Fail(c, fmt::format("replica groups must all have the same size ({}), one has {}", groups[0].size(), g.size()));
    }
    for (int64_t id : g) {
      if (id < 0 || id >= n) Fail(c, fmt::format("replica group id {} is outside the {} {} 0..{}", id, n, what, n - 1));
      if (seen[id]) Fail(c, fmt::format("{} {} appears in two replica groups", what, id));
      seen[id] = true;
      ++count;
    }
  }
  if (count != n) {
    Fail(c, fmt::format("replica groups name {} of the {} {}; every one must be in a group", count, n, what));
  }
  return groups;
}

}  // namespace

std::string_view GroupModeName(GroupMode mode) {
  switch (mode) {
    case GroupMode::kCrossReplica: return "cross-replica";
    case GroupMode::kCrossPartition: return "cross-partition";
    case GroupMode::kCrossReplicaAndPartition: return "cross-replica-and-partition";
    case GroupMode::kFlattenedId: return "flattened-id";
  }
  return "?";
}

GroupMode CollectiveGroupMode(const Instruction& c) {
  if (!c.attrs().channel_id.has_value()) return GroupMode::kCrossReplica;
  if (!HasGlobalDeviceIdsFlag(c.opcode())) return GroupMode::kCrossPartition;
  return c.attrs().use_global_device_ids ? GroupMode::kFlattenedId : GroupMode::kCrossReplicaAndPartition;
}

std::vector<std::vector<int64_t>> GroupsOf(const Instruction& c, int64_t replicas, int64_t partitions) {
  if (c.attrs().use_global_device_ids && !c.attrs().channel_id.has_value()) {
    Fail(c, "use_global_device_ids=true needs a channel_id");
  }
  const GroupMode mode = CollectiveGroupMode(c);
  std::vector<std::vector<int64_t>> out;
  switch (mode) {
    case GroupMode::kCrossReplica:
      for (int64_t p = 0; p < partitions; ++p) {
        for (const auto& g : CheckedGroups(c, replicas, "replicas")) {
          auto& group = out.emplace_back();
          for (int64_t r : g) group.push_back(r * partitions + p);
        }
      }
      break;
    case GroupMode::kCrossPartition:
      for (int64_t r = 0; r < replicas; ++r) {
        for (const auto& g : CheckedGroups(c, partitions, "partitions")) {
          auto& group = out.emplace_back();
          for (int64_t p : g) group.push_back(r * partitions + p);
        }
      }
      break;
    case GroupMode::kCrossReplicaAndPartition:
      for (const auto& g : CheckedGroups(c, replicas, "replicas")) {
        auto& group = out.emplace_back();
        for (int64_t r : g) {
          for (int64_t p = 0; p < partitions; ++p) group.push_back(r * partitions + p);
        }
      }
      break;
    case GroupMode::kFlattenedId:
      out = CheckedGroups(c, replicas * partitions, "devices");
      break;
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> PairsOf(const Instruction& c, int64_t replicas, int64_t partitions) {
  const bool cross_partition = c.attrs().channel_id.has_value();
  const int64_t n = cross_partition ? partitions : replicas;
  const int64_t sets = cross_partition ? replicas : partitions;
  std::vector<bool> source(static_cast<size_t>(n), false), target(static_cast<size_t>(n), false);
  for (const auto& [s, t] : c.attrs().source_target_pairs) {
    const std::string_view what = cross_partition ? "partition" : "replica";
    if (s < 0 || s >= n || t < 0 || t >= n) {
      Fail(c, fmt::format("source_target_pairs {{{},{}}} outside the {} {}s 0..{}", s, t, n, what, n - 1));
    }
    if (source[s]) Fail(c, fmt::format("source {} appears twice in source_target_pairs", s));
    if (target[t]) Fail(c, fmt::format("target {} appears twice in source_target_pairs", t));
    source[s] = target[t] = true;
  }
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t k = 0; k < sets; ++k) {
    for (const auto& [s, t] : c.attrs().source_target_pairs) {
      if (cross_partition) {
        out.emplace_back(k * partitions + s, k * partitions + t);
      } else {
        out.emplace_back(s * partitions + k, t * partitions + k);
      }
    }
  }
  return out;
}

}  // namespace spmdsim::hlo
