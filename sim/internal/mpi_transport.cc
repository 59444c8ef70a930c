// The MPI (Open MPI) transport and the MPI entry points of sim/multiprocess.h. The only file that includes
// mpi.h (built when SPMDSIM_WITH_MPI is on; sim/internal/no_mpi.cc otherwise).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "common/thread_annotations.h"
#include "sim/internal/transport.h"
#include "sim/multiprocess.h"

namespace spmdsim {
namespace internal {
namespace {

// MPI counts are ints: a message above this many bytes goes as several (in order, same tag).
constexpr size_t kMaxPieceBytes = kGiB;

void Check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  Throw(ErrorCode::kAborted, "MPI: {} failed: {}", what, std::string(text, static_cast<size_t>(length)));
}

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(MPI_Comm comm) {
    Check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    void* value = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &value, &flag);
    max_tag_ = flag != 0 ? *static_cast<int*>(value) : 32767;
  }
  ~MpiTransport() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // After a lost rank the communicator is left as it is: freeing it could wait for that rank (the job is
    // about to end with MPI_Abort, see MpiSession).
    if (finalized == 0 && !AnyBatchAbandoned()) {
      MutexLock lock(mu_);
      AbandonLocked();
      MPI_Comm_free(&comm_);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int max_tag() const override { return max_tag_; }

  void Start(std::vector<Transfer>& batch) override {
    MutexLock lock(mu_);
    AbandonLocked();
    batch_ = &batch;
    pending_.clear();
    PostNewLocked();
  }

  void Extend() override {
    MutexLock lock(mu_);
    SPMDSIM_CHECK(batch_ != nullptr, "Transport::Extend without a batch");
    PostNewLocked();
  }

  bool Test() override {
    MutexLock lock(mu_);
    if (live_ == 0) return true;
    // One MPI_Testsome per poll: MPI makes progress once, not once per request.
    indices_.resize(requests_.size());
    statuses_.resize(requests_.size());
    int completed = 0;
    Check(MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &completed, indices_.data(),
                       statuses_.data()),
          "MPI_Testsome");
    if (completed == MPI_UNDEFINED) completed = 0;
    for (int i = 0; i < completed; ++i) {
      const size_t k = static_cast<size_t>(indices_[i]);
      Transfer& t = (*batch_)[owner_[k]];
      if (!t.send) {
        int count = 0;
        MPI_Get_count(&statuses_[i], MPI_BYTE, &count);
        t.received += static_cast<size_t>(count);
      }
      if (--pending_[owner_[k]] == 0) t.done = true;
      --live_;
    }
    if (live_ > 0) return false;
    requests_.clear();  // every request is complete: the next Test starts from the transfers posted after
    owner_.clear();
    sends_.clear();
    return true;
  }

 private:
  void AbandonBatch() override {
    MutexLock lock(mu_);
    AbandonLocked();
  }

  // Posts the batch's transfers from pending_.size() on.
  void PostNewLocked() SPMDSIM_REQUIRES(mu_) {
    std::vector<Transfer>& batch = *batch_;
    for (size_t i = pending_.size(); i < batch.size(); ++i) {
      Transfer& t = batch[i];
      t.received = 0;
      t.done = false;
      pending_.push_back(0);
      if (t.send) CountSent(t.bytes);
      // Pieces of at most kMaxPieceBytes; a receive posts as many pieces as its capacity needs, and the sender
      // the same number for the same size (both sides know every message's size in advance, except the
      // status records, which are small).
      size_t offset = 0;
      do {
        const size_t piece = std::min(kMaxPieceBytes, t.bytes - offset);
        MPI_Request request = MPI_REQUEST_NULL;
        char* at = static_cast<char*>(t.data) + offset;
        if (t.send) {
          Check(MPI_Isend(at, static_cast<int>(piece), MPI_BYTE, t.peer, t.tag, comm_, &request), "MPI_Isend");
        } else {
          Check(MPI_Irecv(at, static_cast<int>(piece), MPI_BYTE, t.peer, t.tag, comm_, &request), "MPI_Irecv");
        }
        requests_.push_back(request);
        ++live_;
        owner_.push_back(i);
        sends_.push_back(t.send);
        ++pending_[i];
        offset += piece;
      } while (offset < t.bytes);
    }
  }

  void AbandonLocked() SPMDSIM_REQUIRES(mu_) {
    for (size_t k = 0; k < requests_.size(); ++k) {
      if (requests_[k] == MPI_REQUEST_NULL) continue;
      if (!sends_[k]) MPI_Cancel(&requests_[k]);
      MPI_Request_free(&requests_[k]);
    }
    requests_.clear();
    owner_.clear();
    sends_.clear();
    pending_.clear();
    live_ = 0;
    batch_ = nullptr;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int max_tag_ = 32767;
  Mutex mu_;
  std::vector<Transfer>* batch_ SPMDSIM_GUARDED_BY(mu_) = nullptr;
  std::vector<MPI_Request> requests_ SPMDSIM_GUARDED_BY(mu_);
  std::vector<size_t> owner_ SPMDSIM_GUARDED_BY(mu_);  // the transfer of each request
  std::vector<bool> sends_ SPMDSIM_GUARDED_BY(mu_);    // whether each request is a send
  std::vector<int> pending_ SPMDSIM_GUARDED_BY(mu_);   // requests not yet complete, by transfer
  size_t live_ SPMDSIM_GUARDED_BY(mu_) = 0;            // requests not yet complete
  std::vector<int> indices_ SPMDSIM_GUARDED_BY(mu_);   // Test's scratch
  std::vector<MPI_Status> statuses_ SPMDSIM_GUARDED_BY(mu_);
};

bool LaunchedByMpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

}  // namespace
}  // namespace internal

bool MpiBuiltIn() { return true; }

std::shared_ptr<ProcessGroup> ProcessGroupFromMpi(const void* mpi_comm) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) Throw(ErrorCode::kFailedPrecondition, "ProcessGroupFromMpi: MPI is not initialised");
  return std::make_shared<ProcessGroup>(
      std::make_shared<internal::MpiTransport>(*static_cast<const MPI_Comm*>(mpi_comm)));
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    if (!internal::LaunchedByMpi()) return;
    int provided = 0;
    internal::Check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    initialised_ = true;
    if (provided < MPI_THREAD_SERIALIZED) {
      std::fprintf(stderr, "spmdsim: this MPI library supports no multithreaded use (level %d)\n", provided);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm world = MPI_COMM_WORLD;
  world_ = ProcessGroupFromMpi(&world);
}

namespace internal {
namespace {

// How long a rank that lost another waits for every rank at exit before it ends the job (MpiSession).
constexpr std::chrono::seconds kLostRankExitGrace{5};

// Waits at a barrier of every rank: for ever (as MPI_Finalize would) unless `bounded`, then up to
// kLostRankExitGrace. Whether every rank arrived.
bool EveryRankAtExit(bool bounded) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &request) != MPI_SUCCESS) return false;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done != 0) return true;
    if (bounded && std::chrono::steady_clock::now() - start > kLostRankExitGrace) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace
}  // namespace internal

MpiSession::~MpiSession() {
  // Every rank meets at a barrier before MPI_Finalize. A rank that lost another in a step across ranks
  // (RankLost) waits there a few seconds only: a rank still missing then will never arrive (it is stopped, or
  // hangs), and MPI_Finalize would wait for it for ever. Ending the job instead kills every rank, the lost one
  // included, and this process exits with 1 (the error it reported is already on stderr).
  if (initialised_ && size_ > 1 && !internal::EveryRankAtExit(RankLost())) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  world_.reset();
  if (initialised_) MPI_Finalize();
}

void MpiSession::Abort(int code) const {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  std::fflush(stdout);
  std::fflush(stderr);
  if (initialized != 0 && finalized == 0 && size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace spmdsim
