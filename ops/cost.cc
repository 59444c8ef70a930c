#include "ops/cost.h"

namespace spmdsim {

void OpCostTally::Record(int64_t device_position, const OpCost& cost) {
  MutexLock lock(mu_);
  OpCost& d = by_device_[device_position];
  d.op = "total";
  d += cost;
  auto it = by_op_.find(cost.op);
  if (it == by_op_.end()) it = by_op_.emplace(std::string(cost.op), OpCost{cost.op}).first;
  it->second += cost;
  ++num_records_;
}

OpCost OpCostTally::Total() const {
  MutexLock lock(mu_);
  OpCost total{"total"};
  for (const auto& [position, cost] : by_device_) total += cost;
  return total;
}

OpCost OpCostTally::TotalFor(int64_t device_position) const {
  MutexLock lock(mu_);
  auto it = by_device_.find(device_position);
  return it == by_device_.end() ? OpCost{"total"} : it->second;
}

std::map<std::string, OpCost> OpCostTally::ByOp() const {
  MutexLock lock(mu_);
  return {by_op_.begin(), by_op_.end()};
}

int64_t OpCostTally::num_records() const {
  MutexLock lock(mu_);
  return num_records_;
}

void OpCostTally::Clear() {
  MutexLock lock(mu_);
  by_device_.clear();
  by_op_.clear();
  num_records_ = 0;
}

}  // namespace spmdsim
