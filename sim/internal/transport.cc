#include "sim/internal/transport.h"

#include <algorithm>
#include <thread>

#include "common/error.h"

namespace spmdsim::internal {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> batch_abandoned{false};

// The spin adapts to where the other ranks run (status exchanges): a wait that ended within the spin (the
// peers have cores of their own: an exchange takes well under a microsecond) doubles it up to kMaxSpin, so a
// short wait never gives the core away to another process; one that did not (the peer needed this core, or
// was busy) halves it down to kMinSpin, so ranks sharing a core hand it over quickly.
constexpr Clock::duration kMaxSpin = std::chrono::microseconds(20);
constexpr Clock::duration kMinSpin = std::chrono::microseconds(1);

bool PollBatch(Transport& transport, std::vector<Transfer>& batch, Clock::duration deadline, Clock::duration* spin) {
  transport.Start(batch);
  const Clock::time_point start = Clock::now();
  const Clock::duration limit = spin != nullptr ? *spin : kMaxSpin;
  for (uint32_t polls = 1; !transport.Test(); ++polls) {
    if (polls % 8 != 0) continue;  // the clock every 8 polls (a poll is ~0.1 us; reading the clock costs a few)
    if (!PauseBeforePoll(Clock::now() - start, deadline, limit)) {
      transport.Abandon();
      return false;
    }
  }
  if (spin != nullptr) {
    *spin = Clock::now() - start <= limit ? std::min(2 * limit, kMaxSpin) : std::max(limit / 2, kMinSpin);
  }
  return true;
}

}  // namespace

void Transport::Abandon() {
  batch_abandoned.store(true, std::memory_order_relaxed);
  AbandonBatch();
}

bool AnyBatchAbandoned() { return batch_abandoned.load(std::memory_order_relaxed); }

bool PauseBeforePoll(Clock::duration waited, Clock::duration deadline, Clock::duration spin) {
  if (waited < spin) return true;
  if (waited > deadline) return false;
  if (waited < std::chrono::milliseconds(2)) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

bool CompleteBatch(Transport& transport, std::vector<Transfer>& batch, Clock::duration deadline,
                   Clock::duration* spin) {
  try {
    return PollBatch(transport, batch, deadline, spin);
  } catch (const Error&) {  // MPI reported an error (e.g. a peer's process is gone): the batch failed
    transport.Abandon();
    return false;
  }
}

}  // namespace spmdsim::internal
