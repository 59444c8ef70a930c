#include "sim/internal/core.h"

#include <unistd.h>

#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "common/error.h"
#include "common/host_memory.h"
#include "common/strings.h"
#include "sim/internal/array_access.h"
#include "sim/internal/device_entry.h"
#include "sim/internal/fiber.h"

namespace spmdsim::internal {

RuntimeCore::RuntimeCore(Mesh mesh_in, RuntimeOptions options_in, int workers, std::vector<int> owner_in, int rank_in)
    : mesh(std::move(mesh_in)),
      options(std::move(options_in)),
      num_workers(workers),
      owner(std::move(owner_in)),
      rank(rank_in),
      slots(mesh.size()) {
  const int64_t capacity = DeviceMemoryCapacity(mesh, options);
  for (int64_t p = 0; p < mesh.size(); ++p) {
    DeviceSlot& s = slots[p];
    s.position = p;
    s.memory = std::make_shared<DeviceMemory>(p, mesh.DeviceAt(p), capacity);
    s.memory_raw = s.memory.get();
    new (s.context_storage)
        DeviceContext(&mesh, &options, &s, s.memory_raw, p, mesh.DeviceAt(p), mesh.CoordsOfPosition(p));
  }
  for (int64_t p = 0; p < mesh.size(); ++p) {
    if (owner[p] == rank) local_positions.push_back(p);
  }
  // Worker w's share: local positions [L*w/W, L*(w+1)/W), cut into contiguous runs of positions.
  const int64_t local = static_cast<int64_t>(local_positions.size());
  std::vector<std::pair<int64_t, int64_t>> ranges;
  shares.resize(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) {
    const int64_t first = local * w / workers, last = local * (w + 1) / workers;
    for (int64_t i = first; i < last;) {
      int64_t j = i + 1;
      while (j < last && local_positions[j] == local_positions[j - 1] + 1) ++j;
      shares[w].push_back(static_cast<int>(ranges.size()));
      ranges.emplace_back(local_positions[i], local_positions[j - 1] + 1);
      i = j;
    }
  }
  blocks = std::vector<Block>(ranges.size());  // Block holds an atomic: not movable, made in place
  for (size_t b = 0; b < ranges.size(); ++b) {
    blocks[b].begin = ranges[b].first;
    blocks[b].end = ranges[b].second;
  }
}

RuntimeCore::~RuntimeCore() {
  for (DeviceSlot& s : slots) s.context().~DeviceContext();
}  // then `stacks` unmaps every stack

void CheckFiberStacksFit(int64_t devices, size_t fiber_stack_bytes) {
  const size_t size = fiber_stack_bytes * kSanitizerStackFactor;
  if (StackPool::SpareHolds(devices, size)) return;
  const int64_t per_device = StackPool::StrideBytes(size);
  const int64_t needed = per_device > 0 && devices > std::numeric_limits<int64_t>::max() / per_device
                             ? std::numeric_limits<int64_t>::max()
                             : per_device * devices;
  const std::string stacks = fmt::format("the fiber stacks of {} virtual devices: they need {} ({} bytes: {} per "
                                         "device with its guard page) of address space",
                                         devices, HumanBytes(needed), needed, HumanBytes(per_device));
  if (needed > AddressSpaceLeftBytes()) {
    Throw(ErrorCode::kResourceExhausted,
          "cannot map {}; the process's address-space limit (ulimit -v) of {} leaves {}. Use fewer devices or a "
          "smaller RuntimeOptions::fiber_stack_bytes, or raise the limit",
          stacks, HumanBytes(AddressSpaceLimitBytes().value_or(0)), HumanBytes(AddressSpaceLeftBytes()));
  }
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t touched = devices * page;  // the top page of every stack, at the least
  if (touched > HostMemoryAvailableBytes()) {
    Throw(ErrorCode::kResourceExhausted,
          "cannot run {}; each device touches at least one page of its stack, {} in all, and this host has {} "
          "available. Use fewer devices",
          stacks, HumanBytes(touched), HumanBytes(HostMemoryAvailableBytes()));
  }
}

void RuntimeCore::MapStacks() {
  stacks.Unpoison();  // ASan: the previous Run's fibers left frames poisoned
  if (stacks.mapped()) return;
  const size_t size = options.fiber_stack_bytes * kSanitizerStackFactor;
  const int64_t n = mesh.size();
  try {
    stacks.Map(n, size);
  } catch (const Error& e) {
    const int64_t per_device = StackPool::StrideBytes(size);
    Throw(ErrorCode::kResourceExhausted,
          "cannot map the fiber stacks of {} virtual devices: they need {} ({} bytes: {} per device with its "
          "guard page) of address space; {}. Use fewer devices or a smaller RuntimeOptions::fiber_stack_bytes, "
          "or raise the address-space limit (ulimit -v)",
          n, HumanBytes(per_device * n), per_device * n, HumanBytes(per_device), e.message());
  }
  for (int64_t p = 0; p < n; ++p) slots[p].stack = stacks.StackAt(p);
}

const GroupInfo& RuntimeCore::Groups(const AxesKey& key) {
  MutexLock lock(groups_mu);
  auto it = groups.find(key);
  if (it == groups.end()) it = groups.emplace(key, std::make_unique<GroupInfo>(MakeGroupInfo(mesh, key))).first;
  return *it->second;
}

namespace {

// A device waits at `call`: records it for the worker's pass and the watchdog, switches to the worker, and
// unwinds when the Run was aborted. Inline: it is the whole of a barrier's hot path.
inline void WaitAt(DeviceSlot& slot, const CollectiveCall& call) {
  RunState& run = *slot.run;
  if (run.aborted()) throw DeviceAborted{};
  slot.call = &call;
  slot.waiting_op.store(call.op, std::memory_order_relaxed);
  slot.wait_episode.store(static_cast<uint32_t>(run.episodes.load(std::memory_order_relaxed)),
                          std::memory_order_relaxed);
  slot.state.store(DeviceState::kWaiting, std::memory_order_relaxed);
  SwitchToWorker(slot);
  slot.call = nullptr;
  if (slot.resume_aborted) {
    slot.resume_aborted = false;
    throw DeviceAborted{};
  }
}

}  // namespace

void WaitAtBarrier(DeviceSlot& slot) { WaitAt(slot, kBarrierCall); }

Array WaitAtCollective(DeviceSlot& slot, CollectiveCall& call) {
  WaitAt(slot, call);
  if (call.op == OpKind::kBarrier) return Array();
  return ArrayAccess::Make(call.out_dtype, call.out_shape, slot.run->plan.ResultBuffer(slot.position),
                           slot.memory.get());
}

}  // namespace spmdsim::internal
