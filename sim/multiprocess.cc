#include "sim/multiprocess.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include <chrono>

#include "common/error.h"
#include "sim/internal/array_access.h"
#include "sim/internal/buffer.h"
#include "sim/internal/transport.h"
#include "sim/runtime.h"

namespace spmdsim {

namespace {

void CompleteOrThrow(internal::Transport& transport, std::vector<internal::Transfer>& batch,
                     std::chrono::milliseconds timeout, const char* what) {
  if (internal::CompleteBatch(transport, batch, 2 * timeout)) return;
  std::vector<int> silent;
  for (const auto& t : batch) {
    if (!t.send && !t.done) silent.push_back(t.peer);
  }
  Throw(ErrorCode::kDeadlineExceeded, "sharing results across ranks: {} from ranks {} did not arrive within {} ms",
        what, fmt::join(silent, ", "), 2 * timeout.count());
}

// ShareArrays' records of what a rank holds: per local position [position, count, per array: dtype, abstract,
// varying axes, rank, dims...].
std::vector<int64_t> DescribeHeld(const Runtime& runtime, const std::vector<std::vector<Array>>& by_position) {
  std::vector<int64_t> mine;
  for (int64_t p = 0; p < runtime.num_devices(); ++p) {
    if (!runtime.is_local(p)) continue;
    mine.push_back(p);
    mine.push_back(static_cast<int64_t>(by_position[p].size()));
    for (const Array& a : by_position[p]) {
      mine.push_back(static_cast<int64_t>(a.dtype()));
      mine.push_back(a.is_abstract() ? 1 : 0);
      mine.push_back(static_cast<int64_t>(a.varying_axes()));
      mine.push_back(a.rank());
      for (int64_t d : a.shape()) mine.push_back(d);
    }
  }
  return mine;
}

// Every rank's record (DescribeHeld), by rank: their lengths first, then the records.
std::vector<std::vector<int64_t>> ExchangeRecords(internal::Transport& transport, std::vector<int64_t>& mine, int tag,
                                                  std::chrono::milliseconds timeout) {
  const int me = transport.rank(), k = transport.size();
  int64_t my_size = static_cast<int64_t>(mine.size());
  std::vector<int64_t> sizes(static_cast<size_t>(k));
  std::vector<internal::Transfer> batch;
  for (int r = 0; r < k; ++r) {
    if (r == me) continue;
    batch.push_back({.send = false, .peer = r, .tag = tag, .data = &sizes[r], .bytes = sizeof(int64_t)});
    batch.push_back({.send = true, .peer = r, .tag = tag, .data = &my_size, .bytes = sizeof(int64_t)});
  }
  CompleteOrThrow(transport, batch, timeout, "the result sizes");
  std::vector<std::vector<int64_t>> records(static_cast<size_t>(k));
  batch.clear();
  for (int r = 0; r < k; ++r) {
    if (r == me) continue;
    records[r].resize(static_cast<size_t>(sizes[r]));
    batch.push_back({.send = false, .peer = r, .tag = tag, .data = records[r].data(),
                     .bytes = records[r].size() * sizeof(int64_t)});
    batch.push_back({.send = true, .peer = r, .tag = tag, .data = mine.data(), .bytes = mine.size() * sizeof(int64_t)});
  }
  CompleteOrThrow(transport, batch, timeout, "the result shapes");
  return records;
}

// Makes rank r's arrays from its record `m` (abstract stand-ins when no elements come) and posts the receives of
// their elements, position by position in ascending order (as the sender sends them).
void ReceiveArrays(const Runtime& runtime, int r, const std::vector<int64_t>& m, bool i_receive, int tag,
                   std::vector<std::vector<Array>>& by_position, std::vector<internal::Transfer>& batch) {
  for (size_t i = 0; i < m.size();) {
    const int64_t p = m[i++];
    const int64_t count = m[i++];
    SPMDSIM_CHECK(p >= 0 && p < runtime.num_devices() && runtime.owner(p) == r, "rank {} sent position {}", r, p);
    std::vector<Array>& arrays = by_position[p];
    arrays.clear();
    for (int64_t j = 0; j < count; ++j) {
      const auto dtype = static_cast<DType>(m[i++]);
      const bool abstract = m[i++] != 0;
      const auto varying = static_cast<uint64_t>(m[i++]);
      const int64_t dims = m[i++];
      std::vector<int64_t> shape(m.begin() + static_cast<std::ptrdiff_t>(i),
                                 m.begin() + static_cast<std::ptrdiff_t>(i + dims));
      i += static_cast<size_t>(dims);
      const int64_t bytes = NumElements(shape) * DTypeSize(dtype);
      if (!abstract && !i_receive) {
        arrays.push_back(Array::Abstract(std::move(shape), dtype).WithVaryingAxes(varying));
        continue;
      }
      std::shared_ptr<internal::Buffer> buffer;
      if (!abstract) buffer = internal::Buffer::Allocate(bytes);
      if (!abstract && bytes > 0) {
        batch.push_back(
            {.send = false, .peer = r, .tag = tag, .data = buffer->data(), .bytes = static_cast<size_t>(bytes)});
      }
      arrays.push_back(
          internal::ArrayAccess::Make(dtype, std::move(shape), std::move(buffer), nullptr).WithVaryingAxes(varying));
    }
  }
}

}  // namespace

void ShareArrays(const Runtime& runtime, std::vector<std::vector<Array>>& by_position, ShareData data) {
  const std::shared_ptr<ProcessGroup>& group = runtime.options().process_group;
  if (group == nullptr) return;
  internal::Transport& transport = group->transport();
  const int me = transport.rank(), k = transport.size();
  const int64_t n = runtime.num_devices();
  if (static_cast<int64_t>(by_position.size()) != n)
    Throw(ErrorCode::kInvalidArgument, "ShareArrays: {} entries for {} devices", by_position.size(), n);
  const uint64_t runs = static_cast<uint64_t>(std::max(1, transport.max_tag() / 2));
  const int tag = static_cast<int>(2 * (transport.NextRunIndex() % runs));
  const std::chrono::milliseconds timeout = runtime.options().collective_timeout;
  // 1. What each rank holds.
  std::vector<int64_t> mine = DescribeHeld(runtime, by_position);
  const std::vector<std::vector<int64_t>> records = ExchangeRecords(transport, mine, tag, timeout);
  // 2. The elements, position by position in ascending order on both sides.
  const bool i_receive = data == ShareData::kEveryRank || (data == ShareData::kRankZero && me == 0);
  std::vector<internal::Transfer> batch;
  for (int r = 0; r < k; ++r) {
    if (r != me) ReceiveArrays(runtime, r, records[r], i_receive, tag + 1, by_position, batch);
  }
  for (int r = 0; r < k; ++r) {  // sends
    if (r == me) continue;
    if (data == ShareData::kShapesOnly || (data == ShareData::kRankZero && r != 0)) continue;
    for (int64_t p = 0; p < n; ++p) {
      if (!runtime.is_local(p)) continue;
      for (const Array& a : by_position[p]) {
        if (a.is_abstract() || a.nbytes() == 0) continue;
        batch.push_back({.send = true, .peer = r, .tag = tag + 1, .data = const_cast<void*>(a.raw_data()),
                         .bytes = static_cast<size_t>(a.nbytes())});
      }
    }
  }
  CompleteOrThrow(transport, batch, timeout, "the results");
}

}  // namespace spmdsim
