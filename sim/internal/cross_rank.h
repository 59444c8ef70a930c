// Internals: one Run's protocol between ranks (several processes, sim/multiprocess.h). Not for users;
// docs/multiprocess.md has the design.
//
// Every collective step (and the end of the Run) is an *episode*: each rank sends every other rank one
// status record — "my devices all wait at <call>", "my devices all returned", or "my Run failed: <message>" —
// and decides from the K records, the same way on every rank, whether to go on, finish or fail, and with which
// message. A collective with data then moves the inputs that other ranks' devices need (FetchInputs), and every
// rank computes its own devices' results with the one-process code, so results are bitwise the same.
//
// Thread safety: driven by one thread at a time — the Run's leader worker (Agree, FetchInputs, while every
// local device waits) or, after a local failure, the Run's own thread (SettleLocalFailure); the worker
// barrier and the Run's abort order those calls.
#ifndef SPMDSIM_SIM_INTERNAL_CROSS_RANK_H_
#define SPMDSIM_SIM_INTERNAL_CROSS_RANK_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "mesh/mesh.h"
#include "sim/array.h"
#include "sim/internal/collectives.h"
#include "sim/internal/transport.h"

namespace spmdsim::internal {

struct RunState;

// Posts `batch` and polls it (spinning ~50 us, then yielding, then sleeping in short steps) until it completes
// (true) or `deadline` passes (false: the batch is abandoned; Transfer::done tells which completed).
bool CompleteBatch(Transport& transport, std::vector<Transfer>& batch, std::chrono::steady_clock::duration deadline);

class CrossRank {
 public:
  enum class Verdict { kProceed, kDone, kAbort };
  struct Failure {
    ErrorCode code;
    std::string kind;  // Error::kind()
    std::string message;
    bool mine;  // this rank's own failure won (the lowest failing rank)
  };

  // `owner`: the rank of each position (PlaceDevices). `run_index` numbers the Runtime's Runs (tags).
  CrossRank(Transport& transport, const Mesh& mesh, const std::vector<int>& owner, uint64_t run_index,
            std::chrono::milliseconds timeout);

  // The leader, when every local device waits at `ref` (nullptr: every local device returned). kAbort: the
  // Run's abort is set (with the message every rank reports).
  Verdict Agree(RunState& run, const CollectiveCall* ref);
  // The leader, after kProceed on a collective with data: receives the inputs of the other ranks' positions
  // that this rank's results need (and sends the ones others need), and points calls[p] at them. The Plan is
  // then built for the local positions (`local`). False: the Run's abort is set.
  bool FetchInputs(RunState& run, const CollectiveCall& ref, const GroupInfo& groups,
                   std::vector<const CollectiveCall*>& calls);
  // The Run's thread, after a failure on this rank that no episode has reported: tells the other ranks and
  // returns the failure every rank reports (the lowest failing rank's, "rank R: ...").
  Failure SettleLocalFailure(ErrorCode code, const std::string& kind, const std::string& message);
  // Whether an episode ended the Run (every rank already knows how).
  bool settled() const { return settled_; }
  const std::vector<uint8_t>& local() const { return local_; }

 private:
  struct Status {
    char kind = 0;  // 'C' waits at a collective, 'F' returned, 'A' failed
    ErrorCode code = ErrorCode::kAborted;
    std::string text;  // the call (C) or "kind\x1fmessage" (A)
  };
  // One episode's exchange: false when some rank sent nothing before the deadline (`missing` lists them).
  bool Exchange(const Status& mine, std::vector<Status>* all, std::vector<int>* missing);
  bool WaitBatch(std::vector<Transfer>& batch);
  static Failure Decode(const Status& status, bool mine);
  std::string RankDevices(int rank) const;  // "rank 1 (positions 4-7)"
  std::string MissingMessage(const std::vector<int>& missing) const;

  Transport& transport_;
  const Mesh& mesh_;
  const std::vector<int>& owner_;
  std::vector<uint8_t> local_;
  std::vector<std::vector<int64_t>> positions_of_rank_;
  int status_tag_ = 0;
  int data_tag_ = 0;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::duration deadline_;  // how long an exchange waits for a silent rank
  uint64_t episode_ = 0;
  bool settled_ = false;
  std::vector<std::string> status_in_;   // receive buffers of the current exchange
  std::string status_out_;
  std::vector<Transfer> status_batch_;
  std::deque<CollectiveCall> remote_calls_;  // the other ranks' inputs of the current collective
  std::deque<Array> remote_arrays_;
  std::vector<std::shared_ptr<Buffer>> sent_;  // kept alive while a send may still read them
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_CROSS_RANK_H_
