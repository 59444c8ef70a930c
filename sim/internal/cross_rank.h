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
#include <map>
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

// Posts `batch` and polls it (spinning up to 20 us, or `*spin` which it then adapts, then yielding, then sleeping
// in short steps) until it completes (true) or `deadline` passes (false: the batch is abandoned;
// Transfer::done tells which completed).
bool CompleteBatch(Transport& transport, std::vector<Transfer>& batch, std::chrono::steady_clock::duration deadline,
                   std::chrono::steady_clock::duration* spin = nullptr);

class CrossRank {
 public:
  enum class Verdict { kProceed, kDone, kAbort };
  struct Failure {
    ErrorCode code;
    ErrorKind kind;
    std::string message;
    bool mine;  // this rank's own failure won (the lowest failing rank)
  };

  // `owner`: the rank of each position (PlaceDevices). `run_index` numbers the Runtime's Runs (tags).
  CrossRank(Transport& transport, const Mesh& mesh, const std::vector<int>& owner, uint64_t run_index,
            std::chrono::milliseconds timeout);

  // The leader, when every local device waits at `ref` (nullptr: every local device returned). kAbort: the
  // Run's abort is set (with the message every rank reports).
  Verdict Agree(RunState& run, const CollectiveCall* ref);
  // The leader, after kProceed on all_gather, all_to_all or ppermute: receives what this rank's results need
  // of the other ranks' inputs (all_gather: the inputs of its groups' members; all_to_all: only the blocks
  // addressed to its positions, placed where the Plan reads them; ppermute: the sources of its receivers), sends
  // what the others need, and points calls[p] at the received inputs. The Plan is then built for the local
  // positions (`local`). False: the Run's abort is set.
  bool FetchInputs(RunState& run, const CollectiveCall& ref, const GroupInfo& groups,
                   std::vector<const CollectiveCall*>& calls);
  // By group: whether its members live on more than one rank (cached per GroupInfo for the Run).
  const std::vector<uint8_t>& SpanningGroups(const GroupInfo& groups);
  // The leader, after kProceed on a reduction (psum, pmean, pmax, pmin, psum_scatter) with data, once `plan` is
  // built with the spanning groups `elsewhere`: computes those groups' local results into the plan's result
  // buffers by a chain over the ranks in member order (docs/multiprocess.md): the rank of each run of
  // consecutive members receives the running fold of the members before it, folds its own on, and passes it
  // to the next run's rank, in pipelined chunks; the last rank finishes the fold and sends the result (or,
  // psum_scatter, each block) to the ranks that hold the group's members. Bitwise the one-process result.
  // False: the Run's abort is set.
  bool ChainReduce(RunState& run, const CollectiveCall& ref, const GroupInfo& groups,
                   const std::vector<const CollectiveCall*>& calls, const Plan& plan);
  // The Run's thread, after a failure on this rank that no episode has reported: tells the other ranks and
  // returns the failure every rank reports (the lowest failing rank's, "rank R: ...").
  Failure SettleLocalFailure(ErrorCode code, ErrorKind kind, const std::string& message);
  // Whether an episode ended the Run (every rank already knows how).
  bool settled() const { return settled_; }
  const std::vector<uint8_t>& local() const { return local_; }

 private:
  struct Status {
    char kind = 0;  // 'C' waits at a collective, 'F' returned, 'A' failed
    ErrorCode code = ErrorCode::kAborted;
    ErrorKind error_kind = ErrorKind::kNone;  // A: the failure's Error::kind()
    std::string text;  // the call (C) or the failure's message (A)
  };
  // One episode's exchange: false when some rank sent nothing before the deadline (`missing` lists them).
  bool Exchange(const Status& mine, std::vector<Status>* all, std::vector<int>* missing);
  bool WaitBatch(std::vector<Transfer>& batch);
  // Polls the batch under way until transfer `index` (or, kAll, every transfer posted) completed; false when
  // deadline_ passed or MPI failed (the batch is then abandoned).
  static constexpr size_t kAll = static_cast<size_t>(-1);
  bool AwaitTransfer(std::vector<Transfer>& batch, size_t index);
  void AbortDataDeadline(RunState& run, const CollectiveCall& ref, const std::vector<Transfer>& batch);
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
  std::chrono::steady_clock::duration spin_ = std::chrono::microseconds(20);  // status exchanges' (CompleteBatch)
  uint64_t episode_ = 0;
  bool settled_ = false;
  Status mine_;                          // Agree's, reused by every episode
  std::vector<Status> all_;
  std::vector<int> missing_;
  std::vector<std::string> status_in_;   // receive buffers of the current exchange
  std::string status_out_;
  std::vector<Transfer> status_batch_;
  std::deque<CollectiveCall> remote_calls_;  // the other ranks' inputs of the current collective
  std::deque<Array> remote_arrays_;
  std::vector<std::shared_ptr<Buffer>> sent_;  // kept alive while a transfer may still use them
  std::map<const GroupInfo*, std::vector<uint8_t>> spanning_;  // SpanningGroups' cache
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_CROSS_RANK_H_
