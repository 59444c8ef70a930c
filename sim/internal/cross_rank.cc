#include "sim/internal/cross_rank.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "common/shape.h"
#include "sim/internal/buffer.h"
#include "sim/internal/core.h"

namespace spmdsim::internal {
namespace {

using Clock = std::chrono::steady_clock;

// A status record on the wire: kind, code, error kind, text; at most kStatusBytes (a longer text is cut).
constexpr size_t kStatusBytes = 4096;
constexpr size_t kHeaderBytes = 3;  // kind, code, error kind

// Into `out` (reused: an episode allocates nothing in the usual case).
void Encode(char kind, ErrorCode code, ErrorKind error_kind, const std::string& text, std::string* out) {
  out->clear();
  out->push_back(kind);
  out->push_back(static_cast<char>(code));
  out->push_back(static_cast<char>(error_kind));
  out->append(text, 0, std::min(text.size(), kStatusBytes - kHeaderBytes));
}

}  // namespace

CrossRank::CrossRank(Transport& transport, const Mesh& mesh, const std::vector<int>& owner, uint64_t run_index,
                     std::chrono::milliseconds timeout)
    : transport_(transport),
      mesh_(mesh),
      owner_(owner),
      timeout_(timeout),
      // A rank whose own device never arrives reports it after its watchdog's timeout and grace (min(timeout,
      // 1 s), watchdog.cc): wait longer than that before calling a silent rank dead.
      deadline_(2 * timeout + std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(1)) +
                std::chrono::milliseconds(500)) {
  const int me = transport.rank();
  local_.resize(owner.size());
  positions_of_rank_.resize(static_cast<size_t>(transport.size()));
  for (size_t p = 0; p < owner.size(); ++p) {
    local_[p] = owner[p] == me;
    positions_of_rank_[owner[p]].push_back(static_cast<int64_t>(p));
  }
  const uint64_t runs = static_cast<uint64_t>(std::max(1, transport.max_tag() / 2));
  status_tag_ = static_cast<int>(2 * (run_index % runs));
  data_tag_ = status_tag_ + 1;
}

namespace {

// How a rank waits for the others between two polls of MPI, by the time it has waited: spin up to `spin`,
// then yield the core (on an over-subscribed host another rank's leader, or this rank's worker, may be waiting
// for it), and after 2 ms sleep 50 us steps (a rank computing for long). False once `deadline` has passed.
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

bool CompleteBatch(Transport& transport, std::vector<Transfer>& batch, Clock::duration deadline,
                   Clock::duration* spin) {
  try {
    return PollBatch(transport, batch, deadline, spin);
  } catch (const Error&) {  // MPI reported an error (e.g. a peer's process is gone): the batch failed
    transport.Abandon();
    return false;
  }
}

bool CrossRank::WaitBatch(std::vector<Transfer>& batch) { return CompleteBatch(transport_, batch, deadline_, &spin_); }

bool CrossRank::Exchange(const Status& mine, std::vector<Status>* all, std::vector<int>* missing) {
  const int k = transport_.size(), me = transport_.rank();
  ++episode_;
  Encode(mine.kind, mine.code, mine.error_kind, mine.text, &status_out_);
  if (status_in_.empty()) status_in_.assign(static_cast<size_t>(k), std::string(kStatusBytes, '\0'));
  std::vector<Transfer>& batch = status_batch_;  // reused: an episode allocates nothing in the usual case
  batch.clear();
  for (int r = 0; r < k; ++r) {
    if (r == me) continue;
    batch.push_back({.send = false, .peer = r, .tag = status_tag_, .data = status_in_[r].data(), .bytes = kStatusBytes});
  }
  for (int r = 0; r < k; ++r) {
    if (r == me) continue;
    batch.push_back(
        {.send = true, .peer = r, .tag = status_tag_, .data = status_out_.data(), .bytes = status_out_.size()});
  }
  const bool complete = WaitBatch(batch);
  all->assign(static_cast<size_t>(k), Status{});
  (*all)[me] = mine;
  missing->clear();
  size_t i = 0;
  for (int r = 0; r < k; ++r) {
    if (r == me) continue;
    const Transfer& t = batch[i++];
    if ((!complete && !t.done) || t.received < kHeaderBytes) {
      missing->push_back(r);
      continue;
    }
    Status& s = (*all)[r];
    s.kind = status_in_[r][0];
    s.code = static_cast<ErrorCode>(static_cast<unsigned char>(status_in_[r][1]));
    s.error_kind = static_cast<ErrorKind>(static_cast<unsigned char>(status_in_[r][2]));
    s.text.assign(status_in_[r].data() + kHeaderBytes, t.received - kHeaderBytes);
  }
  return missing->empty();
}

std::string CrossRank::RankDevices(int rank) const {
  return fmt::format("rank {} ({})", rank, DescribeDevices(mesh_, positions_of_rank_[rank]));
}

std::string CrossRank::MissingMessage(const std::vector<int>& missing) const {
  std::vector<std::string> names;
  for (int r : missing) names.push_back(RankDevices(r));
  return fmt::format(
      "{} sent nothing within {} ms at collective step {} (the rank died, hangs outside the runtime, or did not call "
      "Run); rank {} gave up",
      fmt::join(names, ", "), std::chrono::duration_cast<std::chrono::milliseconds>(deadline_).count(), episode_,
      transport_.rank());
}

CrossRank::Verdict CrossRank::Agree(RunState& run, const CollectiveCall* ref) {
  Status& mine = mine_;  // members: reused by every episode
  mine.kind = ref == nullptr ? 'F' : 'C';
  mine.code = ErrorCode::kAborted;
  mine.text.clear();
  if (ref != nullptr) mine.text = DescribeCall(mesh_, *ref);
  std::vector<Status>& all = all_;
  std::vector<int>& missing = missing_;
  if (!Exchange(mine, &all, &missing)) {
    settled_ = true;
    run.SetAbort(AbortReason::kDeadline, ErrorCode::kDeadlineExceeded, MissingMessage(missing));
    return Verdict::kAbort;
  }
  const int k = transport_.size();
  // 1. A rank failed: the lowest one's message.
  for (int r = 0; r < k; ++r) {
    if (all[r].kind == 'A') {
      settled_ = true;
      const Failure f = Decode(all[r], false);
      run.SetAbort(AbortReason::kDeviceFailed, f.code, f.message, f.kind);
      return Verdict::kAbort;
    }
  }
  std::vector<int> returned;
  for (int r = 0; r < k; ++r) {
    if (all[r].kind == 'F') returned.push_back(r);
  }
  if (static_cast<int>(returned.size()) == k) {
    settled_ = true;
    return Verdict::kDone;
  }
  // 2. Some ranks' devices returned while others wait (the one-process runtime's early return).
  if (!returned.empty()) {
    std::vector<std::string> done, waiting;
    for (int r = 0; r < k; ++r) {
      if (all[r].kind == 'F') {
        done.push_back(RankDevices(r));
      } else {
        waiting.push_back(fmt::format("{} wait at {}", RankDevices(r), all[r].text));
      }
    }
    settled_ = true;
    run.SetAbort(AbortReason::kEarlyReturn, ErrorCode::kFailedPrecondition,
                 fmt::format("devices returned while others wait at a collective: {} returned; {}",
                             fmt::join(done, ", "), fmt::join(waiting, "; ")));
    return Verdict::kAbort;
  }
  // 3. Ranks at different collectives.
  bool same = true;
  for (int r = 1; r < k; ++r) same = same && all[r].text == all[0].text;
  if (!same) {
    std::vector<std::string> parts;
    for (int r = 0; r < k; ++r) parts.push_back(fmt::format("{} called {}", RankDevices(r), all[r].text));
    settled_ = true;
    run.SetAbort(AbortReason::kMismatch, ErrorCode::kInvalidArgument,
                 fmt::format("devices called different collectives at the same step (every device must call the "
                             "same collective with the same axes, parameters, shape and dtype): {}",
                             fmt::join(parts, "; ")));
    return Verdict::kAbort;
  }
  return Verdict::kProceed;
}

bool CrossRank::AwaitTransfer(std::vector<Transfer>& batch, size_t index) {
  const Clock::time_point start = Clock::now();
  try {
    for (;;) {
      const bool all = transport_.Test();
      if (index == kAll ? all : batch[index].done) return true;
      if (!PauseBeforePoll(Clock::now() - start, deadline_, kMaxSpin)) {
        transport_.Abandon();
        return false;
      }
    }
  } catch (const Error&) {  // MPI reported an error (e.g. a peer's process is gone)
    transport_.Abandon();
    return false;
  }
}

void CrossRank::AbortDataDeadline(RunState& run, const CollectiveCall& ref, const std::vector<Transfer>& batch) {
  std::vector<int> silent;
  for (const Transfer& t : batch) {
    if (!t.send && !t.done) silent.push_back(t.peer);
  }
  std::sort(silent.begin(), silent.end());
  silent.erase(std::unique(silent.begin(), silent.end()), silent.end());
  settled_ = true;
  run.SetAbort(AbortReason::kDeadline, ErrorCode::kDeadlineExceeded,
               fmt::format("the data of {} did not arrive from ranks {} within {} ms (a rank died or hangs)",
                           DescribeCall(mesh_, ref), fmt::join(silent, ", "),
                           std::chrono::duration_cast<std::chrono::milliseconds>(deadline_).count()));
}

const std::vector<uint8_t>& CrossRank::SpanningGroups(const GroupInfo& groups) {
  auto [it, added] = spanning_.try_emplace(&groups);
  if (!added) return it->second;
  std::vector<uint8_t>& spanning = it->second;
  spanning.reserve(groups.groups.size());
  for (const auto& members : groups.groups) {
    bool several = false;
    for (int64_t p : members) several = several || owner_[p] != owner_[members[0]];
    spanning.push_back(several ? 1 : 0);
  }
  return spanning;
}

bool CrossRank::FetchInputs(RunState& run, const CollectiveCall& ref, const GroupInfo& groups,
                            std::vector<const CollectiveCall*>& calls) {
  remote_calls_.clear();
  remote_arrays_.clear();
  const int me = transport_.rank();
  const int64_t n = mesh_.size();
  const int k = transport_.size();
  // receivers[p]: the ranks other than p's owner whose results read p's input.
  std::vector<std::vector<int>> receivers(static_cast<size_t>(n));
  if (ref.op == OpKind::kPpermute) {
    for (const auto& members : groups.groups) {
      for (const auto& [src, dst] : ref.perm) {
        const int64_t from = members[src], to = members[dst];
        if (owner_[from] != owner_[to]) receivers[from].push_back(owner_[to]);
      }
    }
  } else {
    std::vector<uint8_t> in_group(static_cast<size_t>(k));
    for (const auto& members : groups.groups) {
      std::fill(in_group.begin(), in_group.end(), 0);
      for (int64_t p : members) in_group[owner_[p]] = 1;
      for (int64_t p : members) {
        for (int r = 0; r < k; ++r) {
          if (in_group[r] != 0 && r != owner_[p]) receivers[p].push_back(r);
        }
      }
    }
  }
  const Array& like = *ref.input;
  if (like.is_abstract()) {  // nothing moves: the remote inputs are abstract arrays of the same shape
    for (int64_t p = 0; p < n; ++p) {
      if (owner_[p] == me || std::find(receivers[p].begin(), receivers[p].end(), me) == receivers[p].end()) continue;
      remote_arrays_.push_back(ArrayAccess::Make(like.dtype(), like.shape(), nullptr, nullptr));
      CollectiveCall& call = remote_calls_.emplace_back();
      call.op = ref.op;
      call.input = &remote_arrays_.back();
      calls[p] = &call;
    }
    return true;
  }
  // all_to_all moves only the blocks addressed to the receiving rank's positions (member order), packed.
  const bool blocks = ref.op == OpKind::kAllToAll;
  AllToAllGeometry geometry;
  std::vector<int64_t> packed_strides;
  int64_t block_elements = 0;
  const int64_t element_bytes = DTypeSize(like.dtype());
  if (blocks) {
    MakeAllToAllGeometry(ref, &geometry);
    RowMajorStrides(geometry.shape, &packed_strides);
    block_elements = NumElements(geometry.shape);
  }
  // The members m of p's group held by rank r (all_to_all).
  const auto members_on = [&](int64_t p, int r) {
    std::vector<int64_t> ms;
    const auto& members = groups.groups[groups.group_of[p]];
    for (int64_t m = 0; m < static_cast<int64_t>(members.size()); ++m) {
      if (owner_[members[m]] == r) ms.push_back(m);
    }
    return ms;
  };
  const size_t bytes = static_cast<size_t>(like.nbytes());
  std::vector<Transfer> batch;
  struct Unpack {
    const std::shared_ptr<Buffer>* packed;
    Buffer* input;
    std::vector<int64_t> ms;
  };
  std::vector<Unpack> unpacks;
  std::deque<std::shared_ptr<Buffer>> packed_in;
  for (int64_t p = 0; p < n; ++p) {
    if (receivers[p].empty()) continue;
    if (owner_[p] == me) {
      const auto& buffer = ArrayAccess::buffer(*calls[p]->input);
      for (int r : receivers[p]) {
        if (!blocks) {
          sent_.push_back(buffer);
          batch.push_back({.send = true, .peer = r, .tag = data_tag_, .data = buffer->data(), .bytes = bytes});
          continue;
        }
        const std::vector<int64_t> ms = members_on(p, r);
        auto packed = Buffer::Allocate(static_cast<int64_t>(ms.size()) * block_elements * element_bytes);
        for (size_t i = 0; i < ms.size(); ++i) {
          StridedCopy(buffer->data(), ms[i] * geometry.src_step / element_bytes, geometry.src_strides, packed->data(),
                      static_cast<int64_t>(i) * block_elements, packed_strides, geometry.shape, element_bytes);
        }
        batch.push_back({.send = true, .peer = r, .tag = data_tag_, .data = packed->data(),
                         .bytes = static_cast<size_t>(packed->bytes())});
        sent_.push_back(std::move(packed));
      }
    } else if (std::find(receivers[p].begin(), receivers[p].end(), me) != receivers[p].end()) {
      std::shared_ptr<Buffer> buffer = Buffer::Allocate(static_cast<int64_t>(bytes));
      if (!blocks) {
        batch.push_back({.send = false, .peer = owner_[p], .tag = data_tag_, .data = buffer->data(), .bytes = bytes});
      } else {
        std::vector<int64_t> ms = members_on(p, me);
        auto& packed = packed_in.emplace_back(
            Buffer::Allocate(static_cast<int64_t>(ms.size()) * block_elements * element_bytes));
        batch.push_back({.send = false, .peer = owner_[p], .tag = data_tag_, .data = packed->data(),
                         .bytes = static_cast<size_t>(packed->bytes())});
        unpacks.push_back({&packed, buffer.get(), std::move(ms)});
      }
      remote_arrays_.push_back(ArrayAccess::Make(like.dtype(), like.shape(), std::move(buffer), nullptr));
      CollectiveCall& call = remote_calls_.emplace_back();
      call.op = ref.op;
      call.input = &remote_arrays_.back();
      calls[p] = &call;
    }
  }
  if (!batch.empty()) {
    bool arrived = false;
    try {
      transport_.Start(batch);
      arrived = AwaitTransfer(batch, kAll);
    } catch (const Error&) {  // an MPI call failed: some transfers may be posted
      transport_.Abandon();
    }
    if (!arrived) {
      for (auto& packed : packed_in) sent_.push_back(std::move(packed));  // receives may still write them
      AbortDataDeadline(run, ref, batch);
      return false;
    }
  }
  sent_.clear();
  // all_to_all: each received block where the Plan reads it (member k's input at m's block).
  for (const Unpack& u : unpacks) {
    for (size_t i = 0; i < u.ms.size(); ++i) {
      StridedCopy((*u.packed)->data(), static_cast<int64_t>(i) * block_elements, packed_strides, u.input->data(),
                  u.ms[i] * geometry.src_step / element_bytes, geometry.src_strides, geometry.shape, element_bytes);
    }
  }
  return true;
}

CrossRank::Failure CrossRank::SettleLocalFailure(ErrorCode code, ErrorKind kind, const std::string& message) {
  const int me = transport_.rank();
  Status mine{.kind = 'A', .code = code, .error_kind = kind, .text = fmt::format("rank {}: {}", me, message)};
  std::vector<Status> all;
  std::vector<int> missing;
  settled_ = true;
  if (!Exchange(mine, &all, &missing)) {
    Failure f = Decode(mine, true);
    f.message += fmt::format(" [{}]", MissingMessage(missing));
    return f;
  }
  for (int r = 0; r < transport_.size(); ++r) {
    if (all[r].kind == 'A') return Decode(all[r], r == me);
  }
  return Decode(mine, true);
}

CrossRank::Failure CrossRank::Decode(const Status& status, bool mine) {
  return {status.code, status.error_kind, status.text, mine};
}

}  // namespace spmdsim::internal
