#include "sim/process_group.h"

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "sim/internal/transport.h"

namespace spmdsim {

ProcessGroup::ProcessGroup(std::shared_ptr<internal::Transport> transport) : transport_(std::move(transport)) {}
ProcessGroup::~ProcessGroup() = default;
int ProcessGroup::rank() const { return transport_->rank(); }
int ProcessGroup::size() const { return transport_->size(); }

std::vector<int64_t> ProcessGroup::AllGather(int64_t value, std::chrono::milliseconds timeout) const {
  internal::Transport& transport = *transport_;
  const int me = transport.rank(), k = transport.size();
  const uint64_t runs = static_cast<uint64_t>(std::max(1, transport.max_tag() / 2));
  const int tag = static_cast<int>(2 * (transport.NextRunIndex() % runs));
  std::vector<int64_t> values(static_cast<size_t>(k));
  values[me] = value;
  std::vector<internal::Transfer> batch;
  for (int r = 0; r < k; ++r) {
    if (r == me) continue;
    batch.push_back({.send = false, .peer = r, .tag = tag, .data = &values[r], .bytes = sizeof(int64_t)});
    batch.push_back({.send = true, .peer = r, .tag = tag, .data = &value, .bytes = sizeof(int64_t)});
  }
  if (!internal::CompleteBatch(transport, batch, timeout))
    Throw(ErrorCode::kDeadlineExceeded, "ProcessGroup::AllGather: a rank sent nothing within {} ms", timeout.count());
  return values;
}

std::vector<std::string> ProcessGroup::AllGatherBytes(const std::string& bytes,
                                                      std::chrono::milliseconds timeout) const {
  internal::Transport& transport = *transport_;
  const int me = transport.rank(), k = transport.size();
  const std::vector<int64_t> sizes = AllGather(static_cast<int64_t>(bytes.size()), timeout);
  const uint64_t runs = static_cast<uint64_t>(std::max(1, transport.max_tag() / 2));
  const int tag = static_cast<int>(2 * (transport.NextRunIndex() % runs));
  std::vector<std::string> values(static_cast<size_t>(k));
  values[me] = bytes;
  std::vector<internal::Transfer> batch;
  for (int r = 0; r < k; ++r) {
    if (r == me) continue;
    values[r].resize(static_cast<size_t>(sizes[r]));
    if (sizes[r] > 0)
      batch.push_back({.send = false, .peer = r, .tag = tag, .data = values[r].data(), .bytes = values[r].size()});
    if (!bytes.empty())
      batch.push_back({.send = true, .peer = r, .tag = tag, .data = const_cast<char*>(bytes.data()),
                       .bytes = bytes.size()});
  }
  if (!internal::CompleteBatch(transport, batch, timeout))
    Throw(ErrorCode::kDeadlineExceeded, "ProcessGroup::AllGatherBytes: a rank sent nothing within {} ms",
          timeout.count());
  return values;
}

std::vector<int> PlaceDevices(const Mesh& mesh, int num_ranks) {
  const int64_t n = mesh.size();
  if (num_ranks < 1 || num_ranks > n)
    Throw(ErrorCode::kInvalidArgument, "cannot place {} virtual devices on {} ranks: use 1 to {} ranks", n, num_ranks,
          n);
  std::vector<int> owner(static_cast<size_t>(n));
  const Topology* topology = mesh.topology();
  if (topology != nullptr && topology->num_processes() % num_ranks == 0) {
    // By host: rank r takes hosts [r*H/K, (r+1)*H/K), i.e. host h goes to rank h / (H/K).
    const int hosts_per_rank = topology->num_processes() / num_ranks;
    std::vector<int64_t> count(static_cast<size_t>(num_ranks));
    for (int64_t p = 0; p < n; ++p) {
      owner[p] = topology->device(mesh.DeviceAt(p)).process_index / hosts_per_rank;
      ++count[owner[p]];
    }
    // A mesh over part of the topology may leave a rank without devices: then blocks of positions.
    if (std::find(count.begin(), count.end(), 0) == count.end()) return owner;
  }
  for (int r = 0; r < num_ranks; ++r) {
    for (int64_t p = n * r / num_ranks; p < n * (r + 1) / num_ranks; ++p) owner[p] = r;
  }
  return owner;
}

bool RankLost() { return internal::AnyBatchAbandoned(); }

}  // namespace spmdsim
