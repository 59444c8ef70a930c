#include "sim/internal/run_state.h"

#include <utility>

namespace spmdsim::internal {

bool RunState::SetAbort(AbortReason reason, ErrorCode code, std::string message, ErrorKind kind) {
  // The message is written under `mu` by the one caller that wins the exchange; readers take `mu` too.
  MutexLock lock(mu);
  int expected = 0;
  if (!abort.compare_exchange_strong(expected, static_cast<int>(reason), std::memory_order_acq_rel)) return false;
  abort_code = code;
  abort_message = std::move(message);
  abort_kind = kind;
  abort_time = std::chrono::steady_clock::now();
  cv.notify_all();
  return true;
}

bool RunState::SetAbort(const CrossRank::Failure& failure) {
  return SetAbort(AbortReason::kAcrossRanks, failure.code, failure.message, failure.kind);
}

}  // namespace spmdsim::internal
