#include "sim/internal/watchdog.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace spmdsim::internal {
namespace {

using Clock = std::chrono::steady_clock;

// Watches one Run; see WatchRun.
class Watchdog {
 public:
  Watchdog(const RuntimeCore& core, RunState& run)
      : core_(core),
        run_(run),
        timeout_(core.options.collective_timeout),
        period_(std::clamp<Clock::duration>(timeout_ / 20, std::chrono::milliseconds(1),
                                            std::chrono::milliseconds(100))),
        grace_(std::min<Clock::duration>(timeout_, std::chrono::seconds(1))) {}

  bool Watch() {
    MutexLock lock(run_.mu);
    for (;;) {
      if (lock.WaitFor(run_.cv, period_,
                       [&]() SPMDSIM_REQUIRES(run_.mu) { return run_.closed_blocks == run_.num_blocks; }))
        return true;
      const auto now = Clock::now();
      if (run_.aborted()) {
        if (now - run_.abort_time >= grace_) return false;
        continue;
      }
      const uint64_t episodes = run_.episodes.load(std::memory_order_relaxed);
      if (!StalledFor(now, episodes, timeout_)) continue;
      std::string message = DeadlineMessage(episodes);
      lock.Unlock();
      run_.SetAbort(AbortReason::kDeadline, ErrorCode::kDeadlineExceeded, std::move(message));
      lock.Lock();
    }
  }

 private:
  // Whether devices have waited with no progress for `limit`. Progress: a barrier completed, a device reached
  // its next collective or finished, or collective work is under way.
  bool StalledFor(Clock::time_point now, uint64_t episodes, Clock::duration limit) {
    uint64_t progress = episodes;
    for (const auto& b : core_.blocks) progress += b.progress.load(std::memory_order_relaxed);
    const bool executing = run_.executing.load(std::memory_order_relaxed);
    if (progress != last_progress_ || executing || !AnyWaiting()) {
      last_progress_ = progress;
      stalled_ = false;
      return false;
    }
    if (!stalled_) {
      stalled_ = true;
      stalled_since_ = now;
    }
    return now - stalled_since_ >= limit;
  }

  bool AnyWaiting() const {
    for (int64_t p : core_.local_positions) {
      if (core_.slots[p].state.load(std::memory_order_relaxed) == DeviceState::kWaiting) return true;
    }
    return false;
  }

  // Names who waits where and who never arrived (atomics only: the devices are not ours to read).
  std::string DeadlineMessage(uint64_t episodes) const {
    const Mesh& mesh = core_.mesh;
    std::map<std::string_view, std::vector<int64_t>> waiting;
    std::vector<int64_t> missing, finished, released;
    for (int64_t p : core_.local_positions) {
      const auto& s = core_.slots[p];
      switch (s.state.load(std::memory_order_relaxed)) {
        case DeviceState::kWaiting:
          if (s.wait_episode.load(std::memory_order_relaxed) != static_cast<uint32_t>(episodes)) {
            released.push_back(p);  // its barrier completed; its worker is busy with a device that never arrived
          } else {
            waiting[OpName(s.waiting_op.load(std::memory_order_relaxed))].push_back(p);
          }
          break;
        case DeviceState::kFinished:
          finished.push_back(p);
          break;
        default:
          missing.push_back(p);
      }
    }
    std::vector<std::string> parts;
    parts.push_back(fmt::format("{} never arrived (still running)", DescribeDevices(mesh, missing)));
    for (const auto& [op, positions] : waiting)
      parts.push_back(fmt::format("{} wait at {}", DescribeDevices(mesh, positions), op));
    if (!released.empty()) {
      parts.push_back(fmt::format("{} passed the last collective and wait for their worker thread",
                                  DescribeDevices(mesh, released)));
    }
    if (!finished.empty()) parts.push_back(fmt::format("{} returned", DescribeDevices(mesh, finished)));
    return fmt::format("devices did not arrive at a collective within the timeout of {} ms: {}", timeout_.count(),
                       fmt::join(parts, "; "));
  }

  const RuntimeCore& core_;
  RunState& run_;
  const std::chrono::milliseconds timeout_;
  const Clock::duration period_;
  const Clock::duration grace_;
  uint64_t last_progress_ = ~uint64_t{0};
  bool stalled_ = false;
  Clock::time_point stalled_since_{};
};

}  // namespace

bool WatchRun(const RuntimeCore& core, RunState& run) { return Watchdog(core, run).Watch(); }

bool WaitClosed(RunState& run, std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(run.mu);
  return lock.WaitUntil(run.cv, deadline,
                        [&]() SPMDSIM_REQUIRES(run.mu) { return run.closed_blocks == run.num_blocks; });
}

std::string StillRunning(const RuntimeCore& core) {
  std::vector<int64_t> running;
  for (int64_t p : core.local_positions) {
    if (core.slots[p].state.load(std::memory_order_relaxed) != DeviceState::kFinished) running.push_back(p);
  }
  return PositionRanges(running);
}

}  // namespace spmdsim::internal
