// The simulated device's streams (hlo/predict.cc): a compute stream that runs local ops one after another, and
// asynchronous queues that run what the schedule starts and a -done waits for: collectives (ICI, NVLink, the
// NICs), network transfers (host and DCN sends and receives) and copies (DMA: prefetches into on-chip memory,
// asynchronous slices, work offloaded to SparseCores). Each queue runs one item at a time; an item starts when it
// is issued (the compute clock) and its queue is free. Compute runs at (1 - slowdown) of its speed while a
// collective is in flight (NCCL's kernels take SMs on GPUs; 0 elsewhere).
//
// Example: Compute(3 us) -> [0, 3]; Start(kCollectives, 5 us) -> [3, 8]; Compute(2 us) with slowdown 0.5 -> [3, 7];
// Wait(8) -> 1 us exposed.
//
// Thread safety: a Streams belongs to one prediction.
#ifndef SPMDSIM_HLO_INTERNAL_STREAMS_H_
#define SPMDSIM_HLO_INTERNAL_STREAMS_H_

#include <array>
#include <cstddef>
#include <deque>
#include <utility>
#include <vector>

namespace spmdsim::hlo::internal {

enum class Queue : int { kCollectives = 0, kNetwork = 1, kCopies = 2 };
inline constexpr size_t kQueues = 3;

class Streams {
 public:
  explicit Streams(double slowdown) : slowdown_(slowdown) {}

  double compute_clock() const { return compute_; }
  double queue_free(Queue q) const { return free_[static_cast<size_t>(q)]; }
  // When every stream is done.
  double end() const;

  // Runs `seconds` of compute from the compute clock, slower while collectives are in flight; [start, end].
  std::pair<double, double> Compute(double seconds);
  // An item of `seconds` issued now on queue `q`: it starts when the queue is free; [start, end].
  std::pair<double, double> Start(Queue q, double seconds);
  // The compute stream waits until `end`; returns how long it waited.
  double Wait(double end);

  // Where each stream stands relative to the compute clock (queues' free times, collectives in flight): two
  // states with the same relative state evolve alike under the same instructions (the loop cache's key).
  std::vector<double> Relative() const;
  // Moves every stream forward (an extrapolated or cached stretch of the schedule): the compute clock by
  // `compute`, queue q's free time by `queues[q]`; `in_flight` (relative to the new compute clock) are collectives
  // that stretch left running.
  void Advance(double compute, const std::array<double, kQueues>& queues,
               const std::vector<std::pair<double, double>>& in_flight = {});
  // The collectives still in flight, relative to the compute clock.
  std::vector<std::pair<double, double>> InFlight() const;

 private:
  void Prune();

  double slowdown_;
  double compute_ = 0;
  std::array<double, kQueues> free_{};
  std::deque<std::pair<double, double>> collectives_;  // in flight, in start order (ends never decrease)
};

}  // namespace spmdsim::hlo::internal

#endif  // SPMDSIM_HLO_INTERNAL_STREAMS_H_
