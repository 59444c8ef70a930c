#include "cost/clocks.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace spmdsim {

SimClocks::SimClocks(int64_t num_devices) {
  if (num_devices < 1) {
    Throw(ErrorCode::kInvalidArgument, "simulated clocks need at least one device, got {}", num_devices);
  }
  clock_.assign(num_devices, 0.0);
  speed_.assign(num_devices, 1.0);
  wait_.assign(num_devices, 0.0);
}

void SimClocks::CheckPosition(int64_t position) const {
  if (position < 0 || position >= num_devices()) {
    Throw(ErrorCode::kOutOfRange, "no device at position {}; positions are 0..{}", position, num_devices() - 1);
  }
}

double SimClocks::now(int64_t position) const {
  CheckPosition(position);
  return clock_[position];
}

double SimClocks::Makespan() const { return *std::max_element(clock_.begin(), clock_.end()); }

void SimClocks::SetSpeedFactor(int64_t position, double factor) {
  CheckPosition(position);
  if (!(factor > 0) || !std::isfinite(factor)) {
    Throw(ErrorCode::kInvalidArgument,
          "speed factor of position {} must be > 0 (1 = nominal, 0.5 = half speed), got {}", position, factor);
  }
  speed_[position] = factor;
}

double SimClocks::speed_factor(int64_t position) const {
  CheckPosition(position);
  return speed_[position];
}

namespace {
void CheckSeconds(const std::string& name, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) {
    Throw(ErrorCode::kInvalidArgument, "step '{}': time must be a finite number of seconds >= 0, got {}", name,
          seconds);
  }
}
}  // namespace

void SimClocks::AdvanceLocal(const std::string& name, int64_t position, double nominal_seconds) {
  CheckPosition(position);
  CheckSeconds(name, nominal_seconds);
  StepRecord record{name, StepRecord::Kind::kLocal, {}, {}};
  double start = clock_[position];
  clock_[position] += nominal_seconds / speed_[position];
  record.devices.push_back({position, start, clock_[position]});
  if (keep_steps_) steps_.push_back(std::move(record));
}

void SimClocks::AdvanceLocalAll(const std::string& name, double nominal_seconds) {
  CheckSeconds(name, nominal_seconds);
  StepRecord record{name, StepRecord::Kind::kLocal, {}, {}};
  record.devices.reserve(clock_.size());
  for (int64_t p = 0; p < num_devices(); ++p) {
    double start = clock_[p];
    clock_[p] += nominal_seconds / speed_[p];
    record.devices.push_back({p, start, clock_[p]});
  }
  if (keep_steps_) steps_.push_back(std::move(record));
}

void SimClocks::AdvanceCollective(const std::string& name, const std::vector<std::vector<int64_t>>& groups,
                                  const std::vector<CollectiveCost>& costs) {
  if (groups.size() != costs.size()) {
    Throw(ErrorCode::kInvalidArgument, "collective '{}': {} groups but {} costs; give one cost per group", name,
          groups.size(), costs.size());
  }
  std::vector<bool> used(clock_.size(), false);
  for (const auto& group : groups) {
    if (group.empty()) Throw(ErrorCode::kInvalidArgument, "collective '{}': a group has no members", name);
    for (int64_t p : group) {
      CheckPosition(p);
      if (used[p]) {
        Throw(ErrorCode::kInvalidArgument, "collective '{}': position {} is in two groups (or twice in one)", name,
              p);
      }
      used[p] = true;
    }
  }
  for (size_t g = 0; g < costs.size(); ++g) CheckSeconds(name, costs[g].seconds);

  StepRecord record{name, StepRecord::Kind::kCollective, {}, {}};
  for (size_t g = 0; g < groups.size(); ++g) {
    GroupInterval interval;
    interval.positions = groups[g];
    interval.arrival = 0;
    for (int64_t p : groups[g]) interval.arrival = std::max(interval.arrival, clock_[p]);
    interval.end = interval.arrival + costs[g].seconds;
    interval.cost = costs[g];
    for (int64_t p : groups[g]) {
      record.devices.push_back({p, clock_[p], interval.end});
      wait_[p] += interval.arrival - clock_[p];
      clock_[p] = interval.end;
    }
    record.groups.push_back(std::move(interval));
  }
  std::sort(record.devices.begin(), record.devices.end(),
            [](const DeviceInterval& a, const DeviceInterval& b) { return a.position < b.position; });
  if (keep_steps_) steps_.push_back(std::move(record));
}

void SimClocks::AdvanceCollective(const std::string& name, const CollectiveModel& model, CollectiveOp op,
                                  std::span<const std::string> axes, double bytes) {
  if (model.mesh().size() != num_devices()) {
    Throw(ErrorCode::kInvalidArgument, "collective '{}': the model's mesh has {} devices but there are {} clocks",
          name, model.mesh().size(), num_devices());
  }
  std::vector<CollectiveCost> costs = model.CostPerGroup(op, axes, bytes);
  AdvanceCollective(name, model.mesh().PositionGroups(axes), costs);
}

}  // namespace spmdsim
