// Internals: the seam between the runtime and the message layer between ranks (MPI in mpi_transport.cc; the
// only file of spmdsim that includes mpi.h). Not for users; docs/multiprocess.md has the design.
//
// Thread safety: every method may be called from any thread; calls are serialised by the transport's mutex.
// The polling helpers (CompleteBatch) drive one batch from one thread at a time.
// One batch of transfers (which may grow, Extend) is under way at a time per Run (the cross-rank protocol,
// cross_rank.h, guarantees it: either a Run's leader worker or, after a local failure, the Run's own thread
// drives it).
#ifndef SPMDSIM_SIM_INTERNAL_TRANSPORT_H_
#define SPMDSIM_SIM_INTERNAL_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace spmdsim::internal {

// One non-blocking point-to-point message of a batch. `data` must stay valid until the batch completes or
// is abandoned (an abandoned send's buffer must outlive the process's use of MPI: callers keep it alive).
struct Transfer {
  bool send = false;
  int peer = 0;
  int tag = 0;
  void* data = nullptr;
  size_t bytes = 0;     // a receive's capacity
  size_t received = 0;  // a completed receive's size
  bool done = false;    // completed
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The largest tag the transport accepts (MPI_TAG_UB is at least 32767).
  virtual int max_tag() const = 0;
  // Posts every transfer (in order: messages between two ranks with the same tag arrive in posting order).
  virtual void Start(std::vector<Transfer>& batch) = 0;
  // Posts the transfers appended to the batch under way since Start or the last Extend (same rules), so a
  // pipeline can send what it has computed while its receives are still pending.
  virtual void Extend() = 0;
  // Makes progress; true once every transfer posted so far completed. Each completed transfer has `done`
  // set (receives: `received` filled), so a caller may use some while others are under way.
  virtual bool Test() = 0;
  // Gives up on the batch: cancels its receives and lets its sends finish on their own. Called only when a
  // step across ranks fails (a deadline passed, or MPI reported an error), so it also records, for the whole
  // process, that a rank was lost (AnyBatchAbandoned).
  void Abandon();
  // Numbers the Runs over this transport (every rank runs the same Runs in the same order), so that a
  // message an aborted Run left behind never matches a later Run's (the Run's number is in the tags).
  uint64_t NextRunIndex() { return runs_.fetch_add(1, std::memory_order_relaxed); }
  // Bytes of the sends posted so far (what this rank put on the wire; for tests and benchmarks).
  int64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }

 protected:
  void CountSent(size_t bytes) { bytes_sent_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed); }
  // Abandon's work: cancel the receives under way, let the sends finish on their own.
  virtual void AbandonBatch() = 0;

 private:
  std::atomic<uint64_t> runs_{0};
  std::atomic<int64_t> bytes_sent_{0};
};

// Whether any transport of this process abandoned a batch: a rank stopped answering (or MPI failed) in some
// step across ranks. Public as spmdsim::RankLost() (sim/process_group.h). Thread-safe.
bool AnyBatchAbandoned();

// How a rank waits for the others between two polls of the transport, by the time it has waited: spin up to
// `spin`, then yield the core (on an over-subscribed host another rank's leader, or this rank's worker, may be
// waiting for it), and after 2 ms sleep 50 us steps (a rank computing for long). False once `deadline` has
// passed.
bool PauseBeforePoll(std::chrono::steady_clock::duration waited, std::chrono::steady_clock::duration deadline,
                     std::chrono::steady_clock::duration spin);

// Posts `batch` and polls it (spinning up to 20 us, or `*spin` which it then adapts, then yielding, then sleeping
// in short steps) until it completes (true) or `deadline` passes (false: the batch is abandoned;
// Transfer::done tells which completed). An MPI error abandons the batch too (false).
bool CompleteBatch(Transport& transport, std::vector<Transfer>& batch, std::chrono::steady_clock::duration deadline,
                   std::chrono::steady_clock::duration* spin = nullptr);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_TRANSPORT_H_
