// CrossRank::ChainReduce (cross_rank.h): a reduction whose group spans ranks, as a chain of partial folds in
// the group's member order. docs/multiprocess.md ("A step across ranks") has the design.
#include <algorithm>
#include <cstring>
#include <utility>

#include "sim/internal/buffer.h"
#include "sim/internal/core.h"
#include "sim/internal/cross_rank.h"

namespace spmdsim::internal {
namespace {

// Pipeline chunk of the running fold: the rank after this one folds chunk c while this one folds chunk c + 1.
// 1 MiB: 16 chunks for a 16 MiB psum (the pipeline fills in 1/16 of the time), each far above MPI's
// per-message costs (a few microseconds).
constexpr int64_t kChainChunkBytes = int64_t{1} << 20;

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

bool CrossRank::ChainReduce(RunState& run, const CollectiveCall& ref, const GroupInfo& groups,
                            const std::vector<const CollectiveCall*>& calls, const Plan& plan) {
  if (ref.input->is_abstract()) return true;  // nothing to compute
  const std::vector<uint8_t>& spanning = SpanningGroups(groups);
  const int me = transport_.rank();
  const OpKind op = ref.op;
  const bool scatter = op == OpKind::kPsumScatter;
  const DType in_dtype = ref.input->dtype();
  const int64_t acc_size = DTypeSize(FoldDType(op, in_dtype));
  const int64_t out_size = DTypeSize(ref.out_dtype);
  const bool acc_is_out = !scatter && FoldDType(op, in_dtype) == ref.out_dtype;
  SPMDSIM_CHECK(!scatter || acc_size == out_size, "psum_scatter's fold and result types differ");
  const int64_t elements = ref.input->size();
  const int64_t n = ref.group_size;
  const int64_t chunk = std::max<int64_t>(1, kChainChunkBytes / acc_size);
  const int64_t num_chunks = (elements + chunk - 1) / chunk;
  const auto chunk_count = [&](int64_t c) { return std::min(chunk, elements - c * chunk); };
  // psum_scatter: the input as [outer, n, inner] around the scattered dimension; member m's result is block m.
  int64_t outer = 1;
  for (int64_t d = 0; d < (scatter ? ref.p0 : 0); ++d) outer *= ref.input->shape()[d];
  const int64_t inner = outer == 0 || n == 0 ? 0 : elements / outer / n;

  // This rank's stages (runs it folds) in (group, run) order, and every receive, posted up front. Messages
  // between two ranks go in that same order on both sides (MPI keeps the order of one sender's messages with
  // one tag): running folds chunk by chunk, then the group's results.
  struct Stage {
    int64_t group;
    MemberRun run;
    int from;  // the rank of the previous run, or -1 (the first run starts the fold)
    int to;    // the rank of the next run, or -1 (the last run: the result)
    std::vector<int> consumers;  // the last run: the other ranks holding members (not psum_scatter)
    char* acc;
    char* out;  // the last run (not psum_scatter): the group's result here
    size_t first_receive;
  };
  std::vector<Stage> stages;
  std::vector<Transfer> batch;
  for (int64_t g = 0; g < static_cast<int64_t>(groups.groups.size()); ++g) {
    if (spanning[g] == 0) continue;
    const std::vector<int64_t>& members = groups.groups[g];
    bool mine = false;
    for (int64_t p : members) mine = mine || local_[p] != 0;
    if (!mine) continue;
    const std::vector<MemberRun> runs = RunsOf(members, owner_);
    const int last = runs.back().rank;
    std::vector<int> holders;  // ranks with members, ascending
    for (const MemberRun& r : runs) holders.push_back(r.rank);
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    char* group_out = nullptr;  // the group's result buffer here (not psum_scatter)
    for (int64_t p : members) {
      if (local_[p] == 0) continue;
      if (!scatter) group_out = static_cast<char*>(plan.ResultBuffer(p)->data());
      sent_.push_back(plan.ResultBuffer(p));  // transfers read or write it: kept as the fold buffers are
    }
    for (size_t j = 0; j < runs.size(); ++j) {
      if (runs[j].rank != me) continue;
      Stage st{.group = g, .run = runs[j], .from = j > 0 ? runs[j - 1].rank : -1,
               .to = j + 1 < runs.size() ? runs[j + 1].rank : -1, .consumers = {}, .acc = nullptr, .out = nullptr,
               .first_receive = batch.size()};
      if (st.to < 0) {
        for (int r : holders) {
          if (r != me) st.consumers.push_back(r);
        }
        st.out = group_out;
      }
      if (st.to < 0 && acc_is_out) {
        st.acc = group_out;  // the fold ends in the result buffer (pmean of floats: divided in place)
      } else {
        auto buffer = Buffer::Allocate(elements * acc_size);
        st.acc = static_cast<char*>(buffer->data());
        sent_.push_back(std::move(buffer));  // kept until the transfers complete (or for good, on abort)
      }
      if (st.from >= 0) {
        for (int64_t c = 0; c < num_chunks; ++c) {
          batch.push_back({.send = false, .peer = st.from, .tag = data_tag_, .data = st.acc + c * chunk * acc_size,
                           .bytes = static_cast<size_t>(chunk_count(c) * acc_size)});
        }
      }
      stages.push_back(std::move(st));
    }
    if (last == me) continue;
    // The result from the last run's rank: the whole array in chunks, or (psum_scatter) each local member's block.
    if (!scatter) {
      for (int64_t c = 0; c < num_chunks; ++c) {
        batch.push_back({.send = false, .peer = last, .tag = data_tag_, .data = group_out + c * chunk * out_size,
                         .bytes = static_cast<size_t>(chunk_count(c) * out_size)});
      }
    } else {
      for (int64_t p : members) {
        if (local_[p] == 0) continue;
        batch.push_back({.send = false, .peer = last, .tag = data_tag_, .data = plan.ResultBuffer(p)->data(),
                         .bytes = static_cast<size_t>(outer * inner * out_size)});
      }
    }
  }
  if (stages.empty() && batch.empty()) return true;

  const auto fail = [&] {
    AbortDataDeadline(run, ref, batch);
    return false;
  };
  // An MPI call that fails, or a block that does not fit the host, after transfers are posted: abandon them
  // (their buffers stay in sent_) and fail.
  try {
    transport_.Start(batch);
    std::vector<const void*> inputs;
    for (Stage& st : stages) {
      const std::vector<int64_t>& members = groups.groups[st.group];
      inputs.clear();
      for (int64_t k = st.run.begin; k < st.run.end; ++k) inputs.push_back(calls[members[k]]->input->raw_data());
      for (int64_t c = 0; c < num_chunks; ++c) {
        if (st.from >= 0 && !AwaitTransfer(batch, st.first_receive + static_cast<size_t>(c))) return fail();
        const int64_t offset = c * chunk, count = chunk_count(c);
        char* acc = st.acc + offset * acc_size;
        FoldInto(op, in_dtype, inputs.data(), static_cast<int64_t>(inputs.size()), offset, count, acc, st.from >= 0);
        if (st.to >= 0) {
          batch.push_back({.send = true, .peer = st.to, .tag = data_tag_, .data = acc,
                           .bytes = static_cast<size_t>(count * acc_size)});
        } else if (!scatter) {
          char* out = st.out + offset * out_size;
          FinishFold(op, in_dtype, acc, count, out, n);
          for (int r : st.consumers) {
            batch.push_back({.send = true, .peer = r, .tag = data_tag_, .data = out,
                             .bytes = static_cast<size_t>(count * out_size)});
          }
        }
        transport_.Extend();
      }
      if (st.to >= 0 || !scatter) continue;
      // psum_scatter's last run: member m's result is block m of every outer row of the sums; blocks of other
      // ranks' members go to them, in member order.
      for (int64_t m = 0; m < n; ++m) {
        const int64_t p = members[m];
        std::shared_ptr<Buffer> block;
        char* out;
        if (local_[p] != 0) {
          out = static_cast<char*>(plan.ResultBuffer(p)->data());
        } else {
          block = Buffer::Allocate(outer * inner * out_size);
          out = static_cast<char*>(block->data());
        }
        const int64_t block_bytes = inner * out_size;
        for (int64_t r = 0; r < outer; ++r) {
          std::memcpy(out + r * block_bytes, st.acc + (r * n + m) * block_bytes, static_cast<size_t>(block_bytes));
        }
        if (block == nullptr) continue;
        batch.push_back({.send = true, .peer = owner_[p], .tag = data_tag_, .data = out,
                         .bytes = static_cast<size_t>(outer * block_bytes)});
        sent_.push_back(std::move(block));
      }
      transport_.Extend();
    }
    if (!AwaitTransfer(batch, kAll)) return fail();
  } catch (const Error&) {
    transport_.Abandon();
    return fail();
  }
  sent_.clear();
  return true;
}

}  // namespace spmdsim::internal
