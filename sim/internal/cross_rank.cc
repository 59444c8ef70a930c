#include "sim/internal/cross_rank.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "common/shape.h"
#include "common/strings.h"
#include "sim/internal/array_access.h"
#include "sim/internal/execute.h"

namespace spmdsim::internal {
namespace {

using Clock = std::chrono::steady_clock;

// How long a wait for data spins before it yields (PauseBeforePoll).
constexpr Clock::duration kPollSpin = std::chrono::microseconds(20);

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
    batch.push_back(
        {.send = false, .peer = r, .tag = status_tag_, .data = status_in_[r].data(), .bytes = kStatusBytes});
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

bool CrossRank::Fail(ErrorCode code, std::string message) {
  settled_ = true;
  failure_ = Failure{.code = code, .kind = ErrorKind::kNone, .message = std::move(message), .mine = false};
  return false;
}

CrossRank::Verdict CrossRank::Agree(const CollectiveCall* ref) {
  Status& mine = mine_;  // members: reused by every episode
  mine.kind = ref == nullptr ? 'F' : 'C';
  mine.code = ErrorCode::kAborted;
  mine.text.clear();
  if (ref != nullptr) mine.text = DescribeCall(mesh_, *ref);
  if (!Exchange(mine, &all_, &missing_)) {
    Fail(ErrorCode::kDeadlineExceeded, MissingMessage(missing_));
    return Verdict::kAbort;
  }
  return Decide(all_);
}

CrossRank::Verdict CrossRank::Decide(const std::vector<Status>& all) {
  const int k = transport_.size();
  // 1. A rank failed: the lowest one's message.
  for (int r = 0; r < k; ++r) {
    if (all[r].kind == 'A') {
      settled_ = true;
      failure_ = Decode(all[r], false);
      return Verdict::kAbort;
    }
  }
  const int returned = static_cast<int>(
      std::count_if(all.begin(), all.end(), [](const Status& s) { return s.kind == 'F'; }));
  if (returned == k) {
    settled_ = true;
    return Verdict::kDone;
  }
  // 2. Some ranks' devices returned while others wait (the one-process runtime's early return).
  if (returned > 0) {
    std::vector<std::string> done, waiting;
    for (int r = 0; r < k; ++r) {
      if (all[r].kind == 'F') {
        done.push_back(RankDevices(r));
      } else {
        waiting.push_back(fmt::format("{} wait at {}", RankDevices(r), all[r].text));
      }
    }
    Fail(ErrorCode::kFailedPrecondition,
         fmt::format("devices returned while others wait at a collective: {} returned; {}", fmt::join(done, ", "),
                     fmt::join(waiting, "; ")));
    return Verdict::kAbort;
  }
  // 3. Ranks at different collectives.
  bool same = true;
  for (int r = 1; r < k; ++r) same = same && all[r].text == all[0].text;
  if (same) return Verdict::kProceed;
  std::vector<std::string> parts;
  for (int r = 0; r < k; ++r) parts.push_back(fmt::format("{} called {}", RankDevices(r), all[r].text));
  Fail(ErrorCode::kInvalidArgument,
       fmt::format("devices called different collectives at the same step (every device must call the same "
                   "collective with the same axes, parameters, shape and dtype): {}",
                   fmt::join(parts, "; ")));
  return Verdict::kAbort;
}

bool CrossRank::AwaitTransfer(std::vector<Transfer>& batch, size_t index) {
  const Clock::time_point start = Clock::now();
  try {
    for (;;) {
      const bool all = transport_.Test();
      if (index == kAll ? all : batch[index].done) return true;
      if (!PauseBeforePoll(Clock::now() - start, deadline_, kPollSpin)) {
        transport_.Abandon();
        return false;
      }
    }
  } catch (const Error&) {  // MPI reported an error (e.g. a peer's process is gone)
    transport_.Abandon();
    return false;
  }
}

bool CrossRank::FailDataDeadline(const CollectiveCall& ref, const std::vector<Transfer>& batch) {
  std::vector<int> silent;
  for (const Transfer& t : batch) {
    if (!t.send && !t.done) silent.push_back(t.peer);
  }
  std::sort(silent.begin(), silent.end());
  silent.erase(std::unique(silent.begin(), silent.end()), silent.end());
  return Fail(ErrorCode::kDeadlineExceeded,
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

// --- FetchInputs ---------------------------------------------------------------------------------------------

// One FetchInputs' transfers. all_to_all moves only the blocks addressed to the receiving rank's positions
// (member order), packed: `geometry` is where they lie in an input, `packed_strides` their layout in a message.
struct CrossRank::InputExchange {
  const CollectiveCall& ref;
  const GroupInfo& groups;
  bool blocks = false;  // all_to_all
  AllToAllGeometry geometry{};
  std::vector<int64_t> packed_strides{};
  int64_t block_elements = 0;
  int64_t element_bytes = 0;
  size_t bytes = 0;  // one input's
  std::vector<Transfer> batch{};
  // all_to_all: a received message and the input it unpacks into, with the members its blocks are for.
  struct Received {
    const std::shared_ptr<Buffer>* packed;
    Buffer* input;
    std::vector<int64_t> ms;
  };
  std::vector<Received> unpacks{};
  std::deque<std::shared_ptr<Buffer>> packed_in{};

  // The members m of p's group held by rank r (all_to_all), in member order.
  std::vector<int64_t> MembersOn(int64_t p, int r, const std::vector<int>& owner) const {
    std::vector<int64_t> ms;
    const auto& members = groups.groups[groups.group_of[p]];
    for (int64_t m = 0; m < static_cast<int64_t>(members.size()); ++m) {
      if (owner[members[m]] == r) ms.push_back(m);
    }
    return ms;
  }
  // Copies block i of the packed message from / to member m's block of an input.
  void Pack(const void* input, int64_t m, void* packed, int64_t i) const {
    StridedCopy(input, m * geometry.src_step / element_bytes, geometry.src_strides, packed, i * block_elements,
                packed_strides, geometry.shape, element_bytes);
  }
  void Unpack(const void* packed, int64_t i, void* input, int64_t m) const {
    StridedCopy(packed, i * block_elements, packed_strides, input, m * geometry.src_step / element_bytes,
                geometry.src_strides, geometry.shape, element_bytes);
  }
};

// receivers[p]: the ranks other than p's owner whose results read p's input.
std::vector<std::vector<int>> CrossRank::Receivers(const CollectiveCall& ref, const GroupInfo& groups) const {
  const int k = transport_.size();
  std::vector<std::vector<int>> receivers(static_cast<size_t>(mesh_.size()));
  if (ref.op == OpKind::kPpermute) {
    for (const auto& members : groups.groups) {
      for (const auto& [src, dst] : ref.perm) {
        const int64_t from = members[src], to = members[dst];
        if (owner_[from] != owner_[to]) receivers[from].push_back(owner_[to]);
      }
    }
    return receivers;
  }
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
  return receivers;
}

void CrossRank::PostInputSends(InputExchange& x, const Array& input, const std::vector<int>& receivers, int64_t p) {
  const auto& buffer = ArrayAccess::buffer(input);
  for (int r : receivers) {
    if (!x.blocks) {
      sent_.push_back(buffer);
      x.batch.push_back({.send = true, .peer = r, .tag = data_tag_, .data = buffer->data(), .bytes = x.bytes});
      continue;
    }
    const std::vector<int64_t> ms = x.MembersOn(p, r, owner_);
    auto packed = Buffer::Allocate(static_cast<int64_t>(ms.size()) * x.block_elements * x.element_bytes);
    for (size_t i = 0; i < ms.size(); ++i) x.Pack(buffer->data(), ms[i], packed->data(), static_cast<int64_t>(i));
    x.batch.push_back({.send = true, .peer = r, .tag = data_tag_, .data = packed->data(),
                       .bytes = static_cast<size_t>(packed->bytes())});
    sent_.push_back(std::move(packed));
  }
}

void CrossRank::PostInputReceive(InputExchange& x, int64_t p, std::vector<const CollectiveCall*>& calls) {
  const Array& like = *x.ref.input;
  std::shared_ptr<Buffer> buffer = Buffer::Allocate(static_cast<int64_t>(x.bytes));
  if (!x.blocks) {
    x.batch.push_back({.send = false, .peer = owner_[p], .tag = data_tag_, .data = buffer->data(), .bytes = x.bytes});
  } else {
    std::vector<int64_t> ms = x.MembersOn(p, transport_.rank(), owner_);
    auto& packed = x.packed_in.emplace_back(
        Buffer::Allocate(static_cast<int64_t>(ms.size()) * x.block_elements * x.element_bytes));
    x.batch.push_back({.send = false, .peer = owner_[p], .tag = data_tag_, .data = packed->data(),
                       .bytes = static_cast<size_t>(packed->bytes())});
    x.unpacks.push_back({&packed, buffer.get(), std::move(ms)});
  }
  remote_arrays_.push_back(ArrayAccess::Make(like.dtype(), like.shape(), std::move(buffer), nullptr));
  CollectiveCall& call = remote_calls_.emplace_back();
  call.op = x.ref.op;
  call.input = &remote_arrays_.back();
  calls[p] = &call;
}

bool CrossRank::FetchInputs(const CollectiveCall& ref, const GroupInfo& groups,
                            std::vector<const CollectiveCall*>& calls) {
  remote_calls_.clear();
  remote_arrays_.clear();
  const int me = transport_.rank();
  const int64_t n = mesh_.size();
  const std::vector<std::vector<int>> receivers = Receivers(ref, groups);
  const auto receives = [&](int64_t p) {
    return owner_[p] != me && std::find(receivers[p].begin(), receivers[p].end(), me) != receivers[p].end();
  };
  const Array& like = *ref.input;
  if (like.is_abstract()) {  // nothing moves: the remote inputs are abstract arrays of the same shape
    for (int64_t p = 0; p < n; ++p) {
      if (!receives(p)) continue;
      remote_arrays_.push_back(ArrayAccess::Make(like.dtype(), like.shape(), nullptr, nullptr));
      CollectiveCall& call = remote_calls_.emplace_back();
      call.op = ref.op;
      call.input = &remote_arrays_.back();
      calls[p] = &call;
    }
    return true;
  }
  InputExchange x{.ref = ref, .groups = groups, .blocks = ref.op == OpKind::kAllToAll};
  x.element_bytes = DTypeSize(like.dtype());
  x.bytes = static_cast<size_t>(like.nbytes());
  if (x.blocks) {
    MakeAllToAllGeometry(ref, &x.geometry);
    RowMajorStrides(x.geometry.shape, &x.packed_strides);
    x.block_elements = NumElements(x.geometry.shape);
  }
  for (int64_t p = 0; p < n; ++p) {
    if (receivers[p].empty()) continue;
    if (owner_[p] == me) {
      PostInputSends(x, *calls[p]->input, receivers[p], p);
    } else if (receives(p)) {
      PostInputReceive(x, p, calls);
    }
  }
  if (!x.batch.empty()) {
    bool arrived = false;
    try {
      transport_.Start(x.batch);
      arrived = AwaitTransfer(x.batch, kAll);
    } catch (const Error&) {  // an MPI call failed: some transfers may be posted
      transport_.Abandon();
    }
    if (!arrived) {
      for (auto& packed : x.packed_in) sent_.push_back(std::move(packed));  // receives may still write them
      return FailDataDeadline(ref, x.batch);
    }
  }
  sent_.clear();
  // all_to_all: each received block where the Plan reads it (member k's input at m's block).
  for (const InputExchange::Received& u : x.unpacks) {
    for (size_t i = 0; i < u.ms.size(); ++i)
      x.Unpack((*u.packed)->data(), static_cast<int64_t>(i), u.input->data(), u.ms[i]);
  }
  return true;
}

// --- ChainReduce ---------------------------------------------------------------------------------------------

namespace {

// Pipeline chunk of the running fold: the rank after this one folds chunk c while this one folds chunk c + 1.
// 1 MiB: 16 chunks for a 16 MiB psum (the pipeline fills in 1/16 of the time), each far above MPI's
// per-message costs (a few microseconds).
constexpr int64_t kChainChunkBytes = kMiB;

// Members [begin, end) of a group (indices into its member list), all on `rank`.
struct MemberRun {
  int rank = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// The runs of consecutive members on one rank, in member order: members 0-1 | 2-3 for Iota({4}) on 2 ranks; the
// axes ('y', 'x') of a (4, 2) mesh on 2 ranks (positions 0-3 | 4-7): members 0-1 | 2-3 | 4-5 | 6-7 on ranks
// 0, 1, 0, 1.
std::vector<MemberRun> RunsOf(const std::vector<int64_t>& members, const std::vector<int>& owner) {
  std::vector<MemberRun> runs;
  for (int64_t k = 0; k < static_cast<int64_t>(members.size()); ++k) {
    const int r = owner[members[k]];
    if (runs.empty() || runs.back().rank != r) runs.push_back({.rank = r, .begin = k, .end = k});
    runs.back().end = k + 1;
  }
  return runs;
}

}  // namespace

// A run of a group's members this rank folds: it receives the running fold from `from` (unless it starts the
// fold), folds its members on, and passes it to `to` (or, the last run, finishes the result).
struct CrossRank::Stage {
  int64_t group;
  int64_t begin, end;  // the members this rank folds (indices into the group's member list)
  int from;  // the rank of the previous run, or -1 (the first run starts the fold)
  int to;    // the rank of the next run, or -1 (the last run: the result)
  std::vector<int> consumers;  // the last run: the other ranks holding members (not psum_scatter)
  char* acc;
  char* out;  // the last run (not psum_scatter): the group's result here
  size_t first_receive;
};

// One ChainReduce: the reduction's sizes, this rank's stages in (group, run) order, and every transfer. Messages
// between two ranks go in that same order on both sides (MPI keeps the order of one sender's messages with one
// tag): running folds chunk by chunk, then the group's results.
struct CrossRank::Chain {
  Chain(const CollectiveCall& call, const GroupInfo& group_info)
      : ref(call),
        groups(group_info),
        op(call.op),
        scatter(call.op == OpKind::kPsumScatter),
        in_dtype(call.input->dtype()),
        acc_size(DTypeSize(FoldDType(call.op, in_dtype))),
        out_size(DTypeSize(call.out_dtype)),
        acc_is_out(!scatter && FoldDType(call.op, in_dtype) == call.out_dtype),
        elements(call.input->size()),
        n(call.group_size),
        chunk(std::max<int64_t>(1, kChainChunkBytes / acc_size)),
        num_chunks((elements + chunk - 1) / chunk) {
    SPMDSIM_CHECK(!scatter || acc_size == out_size, "psum_scatter's fold and result types differ");
    // psum_scatter: the input as [outer, n, inner] around the scattered dimension; member m's result is block m.
    for (int64_t d = 0; d < (scatter ? call.p0 : 0); ++d) outer *= call.input->shape()[d];
    inner = outer == 0 || n == 0 ? 0 : elements / outer / n;
  }
  int64_t count(int64_t c) const { return std::min(chunk, elements - c * chunk); }

  const CollectiveCall& ref;
  const GroupInfo& groups;
  const OpKind op;
  const bool scatter;
  const DType in_dtype;
  const int64_t acc_size, out_size;
  const bool acc_is_out;
  const int64_t elements, n, chunk, num_chunks;
  int64_t outer = 1, inner = 0;
  std::vector<Stage> stages;
  std::vector<Transfer> batch;
};

// Group g's stages on this rank (with the receives of their running folds), and the receives of its result
// when another rank finishes it.
void CrossRank::PlanChainGroup(Chain& chain, int64_t g, const Plan& plan) {
  const int me = transport_.rank();
  const std::vector<int64_t>& members = chain.groups.groups[g];
  const std::vector<MemberRun> runs = RunsOf(members, owner_);
  std::vector<int> holders;  // ranks with members, ascending
  for (const MemberRun& r : runs) holders.push_back(r.rank);
  std::sort(holders.begin(), holders.end());
  holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
  char* group_out = nullptr;  // the group's result buffer here (not psum_scatter)
  for (int64_t p : members) {
    if (local_[p] == 0) continue;
    if (!chain.scatter) group_out = static_cast<char*>(plan.ResultBuffer(p)->data());
    sent_.push_back(plan.ResultBuffer(p));  // transfers read or write it: kept as the fold buffers are
  }
  for (size_t j = 0; j < runs.size(); ++j) {
    if (runs[j].rank != me) continue;
    Stage st{.group = g, .begin = runs[j].begin, .end = runs[j].end, .from = j > 0 ? runs[j - 1].rank : -1,
             .to = j + 1 < runs.size() ? runs[j + 1].rank : -1, .consumers = {}, .acc = nullptr, .out = nullptr,
             .first_receive = chain.batch.size()};
    if (st.to < 0) {
      for (int r : holders) {
        if (r != me) st.consumers.push_back(r);
      }
      st.out = group_out;
    }
    if (st.to < 0 && chain.acc_is_out) {
      st.acc = group_out;  // the fold ends in the result buffer (pmean of floats: divided in place)
    } else {
      auto buffer = Buffer::Allocate(chain.elements * chain.acc_size);
      st.acc = static_cast<char*>(buffer->data());
      sent_.push_back(std::move(buffer));  // kept until the transfers complete (or for good, on abort)
    }
    for (int64_t c = 0; st.from >= 0 && c < chain.num_chunks; ++c) {
      chain.batch.push_back({.send = false,
                             .peer = st.from,
                             .tag = data_tag_,
                             .data = st.acc + c * chain.chunk * chain.acc_size,
                             .bytes = static_cast<size_t>(chain.count(c) * chain.acc_size)});
    }
    chain.stages.push_back(std::move(st));
  }
  const int last = runs.back().rank;
  if (last == me) return;
  // The result from the last run's rank: the whole array in chunks, or (psum_scatter) each local member's block.
  for (int64_t c = 0; !chain.scatter && c < chain.num_chunks; ++c) {
    chain.batch.push_back({.send = false,
                           .peer = last,
                           .tag = data_tag_,
                           .data = group_out + c * chain.chunk * chain.out_size,
                           .bytes = static_cast<size_t>(chain.count(c) * chain.out_size)});
  }
  for (int64_t p : members) {
    if (!chain.scatter || local_[p] == 0) continue;
    chain.batch.push_back({.send = false, .peer = last, .tag = data_tag_, .data = plan.ResultBuffer(p)->data(),
                           .bytes = static_cast<size_t>(chain.outer * chain.inner * chain.out_size)});
  }
}

// Folds the stage's members on, chunk by chunk as the running fold arrives, and sends each chunk on (or, the
// last run, finishes it and sends the result to the consumers). False when a chunk did not arrive.
bool CrossRank::FoldStage(Chain& chain, Stage& st, const std::vector<const CollectiveCall*>& calls) {
  const std::vector<int64_t>& members = chain.groups.groups[st.group];
  std::vector<const void*> inputs;
  for (int64_t k = st.begin; k < st.end; ++k) inputs.push_back(calls[members[k]]->input->raw_data());
  for (int64_t c = 0; c < chain.num_chunks; ++c) {
    if (st.from >= 0 && !AwaitTransfer(chain.batch, st.first_receive + static_cast<size_t>(c))) return false;
    const int64_t offset = c * chain.chunk, count = chain.count(c);
    char* acc = st.acc + offset * chain.acc_size;
    FoldInto(chain.op, chain.in_dtype, inputs.data(), static_cast<int64_t>(inputs.size()), offset, count, acc,
             st.from >= 0);
    if (st.to >= 0) {
      chain.batch.push_back({.send = true, .peer = st.to, .tag = data_tag_, .data = acc,
                             .bytes = static_cast<size_t>(count * chain.acc_size)});
    } else if (!chain.scatter) {
      char* out = st.out + offset * chain.out_size;
      FinishFold(chain.op, chain.in_dtype, acc, count, out, chain.n);
      for (int r : st.consumers) {
        chain.batch.push_back({.send = true, .peer = r, .tag = data_tag_, .data = out,
                               .bytes = static_cast<size_t>(count * chain.out_size)});
      }
    }
    transport_.Extend();
  }
  return true;
}

// psum_scatter's last run: member m's result is block m of every outer row of the sums; blocks of other ranks'
// members go to them, in member order.
void CrossRank::ScatterBlocks(Chain& chain, const Stage& st, const Plan& plan) {
  const std::vector<int64_t>& members = chain.groups.groups[st.group];
  const int64_t block_bytes = chain.inner * chain.out_size;
  for (int64_t m = 0; m < chain.n; ++m) {
    const int64_t p = members[m];
    std::shared_ptr<Buffer> block;
    char* out;
    if (local_[p] != 0) {
      out = static_cast<char*>(plan.ResultBuffer(p)->data());
    } else {
      block = Buffer::Allocate(chain.outer * block_bytes);
      out = static_cast<char*>(block->data());
    }
    for (int64_t r = 0; r < chain.outer; ++r) {
      std::memcpy(out + r * block_bytes, st.acc + (r * chain.n + m) * block_bytes, static_cast<size_t>(block_bytes));
    }
    if (block == nullptr) continue;
    chain.batch.push_back({.send = true, .peer = owner_[p], .tag = data_tag_, .data = out,
                           .bytes = static_cast<size_t>(chain.outer * block_bytes)});
    sent_.push_back(std::move(block));
  }
  transport_.Extend();
}

bool CrossRank::ChainReduce(const CollectiveCall& ref, const GroupInfo& groups,
                            const std::vector<const CollectiveCall*>& calls, const Plan& plan) {
  if (ref.input->is_abstract()) return true;  // nothing to compute
  const std::vector<uint8_t>& spanning = SpanningGroups(groups);
  Chain chain(ref, groups);
  for (int64_t g = 0; g < static_cast<int64_t>(groups.groups.size()); ++g) {
    if (spanning[g] == 0) continue;
    bool mine = false;
    for (int64_t p : groups.groups[g]) mine = mine || local_[p] != 0;
    if (mine) PlanChainGroup(chain, g, plan);
  }
  if (chain.stages.empty() && chain.batch.empty()) return true;
  // An MPI call that fails, or a block that does not fit the host, after transfers are posted: abandon them
  // (their buffers stay in sent_) and fail.
  try {
    transport_.Start(chain.batch);
    for (Stage& st : chain.stages) {
      if (!FoldStage(chain, st, calls)) return FailDataDeadline(ref, chain.batch);
      if (st.to < 0 && chain.scatter) ScatterBlocks(chain, st, plan);
    }
    if (!AwaitTransfer(chain.batch, kAll)) return FailDataDeadline(ref, chain.batch);
  } catch (const Error&) {
    transport_.Abandon();
    return FailDataDeadline(ref, chain.batch);
  }
  sent_.clear();
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
