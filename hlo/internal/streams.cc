#include "hlo/internal/streams.h"

#include <algorithm>
#include <cmath>

namespace spmdsim::hlo::internal {

double Streams::end() const { return std::max(compute_, *std::max_element(free_.begin(), free_.end())); }

void Streams::Prune() {
  while (!collectives_.empty() && collectives_.front().second <= compute_) collectives_.pop_front();
}

std::pair<double, double> Streams::Compute(double seconds) {
  const double start = compute_;
  double t = compute_, left = seconds;
  if (slowdown_ > 0) {
    for (const auto& [b, e] : collectives_) {
      if (left <= 0) break;
      if (e <= t) continue;
      if (b > t) {
        const double free = std::min(left, b - t);
        t += free;
        left -= free;
        if (left <= 0) break;
      }
      const double rate = 1.0 - slowdown_;
      const double done = std::min(left, (e - t) * rate);
      t += done / rate;
      left -= done;
    }
  }
  compute_ = t + std::max(0.0, left);
  Prune();
  return {start, compute_};
}

std::pair<double, double> Streams::Start(Queue q, double seconds) {
  double& free = free_[static_cast<size_t>(q)];
  const double start = std::max(compute_, free);
  free = start + seconds;
  if (q == Queue::kCollectives && seconds > 0) collectives_.emplace_back(start, free);
  return {start, free};
}

double Streams::Wait(double end) {
  const double waited = std::max(0.0, end - compute_);
  compute_ = std::max(compute_, end);
  Prune();
  return waited;
}

std::vector<double> Streams::Relative() const {
  std::vector<double> out;
  for (double f : free_) out.push_back(std::max(0.0, f - compute_));
  for (const auto& [b, e] : collectives_) {
    out.push_back(b - compute_);
    out.push_back(e - compute_);
  }
  return out;
}

std::vector<std::pair<double, double>> Streams::InFlight() const {
  std::vector<std::pair<double, double>> out;
  for (const auto& [b, e] : collectives_) out.emplace_back(b - compute_, e - compute_);
  return out;
}

void Streams::Advance(double compute, const std::array<double, kQueues>& queues,
                      const std::vector<std::pair<double, double>>& in_flight) {
  compute_ += compute;
  for (size_t q = 0; q < kQueues; ++q) free_[q] += queues[q];
  for (const auto& [b, e] : in_flight) collectives_.emplace_back(compute_ + b, compute_ + e);
  std::sort(collectives_.begin(), collectives_.end());
  Prune();
}

}  // namespace spmdsim::hlo::internal
