#include "sim/internal/core.h"

#include <utility>

#include <fmt/format.h>

#include "common/strings.h"
#include "sim/internal/fiber.h"
#include "sim/internal/fiber_stack.h"

namespace spmdsim::internal {

bool RunState::SetAbort(AbortReason reason, ErrorCode code, std::string message, ErrorKind kind) {
  // The message is written under `mu` by the one caller that wins the exchange; readers take `mu` too.
  MutexLock lock(mu);
  int expected = 0;
  if (!abort.compare_exchange_strong(expected, static_cast<int>(reason), std::memory_order_acq_rel)) return false;
  abort_code = code;
  abort_message = std::move(message);
  abort_kind = kind;
  abort_time = std::chrono::steady_clock::now();
  cv.notify_all();
  return true;
}

// "0-3, 5, 7-8"
std::string PositionRanges(const std::vector<int64_t>& positions) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < positions.size();) {
    size_t j = i;
    while (j + 1 < positions.size() && positions[j + 1] == positions[j] + 1) ++j;
    parts.push_back(j == i ? fmt::format("{}", positions[i]) : fmt::format("{}-{}", positions[i], positions[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// "positions 0-2 (devices 0, 1, 2)"; device ids are listed only when they are not the positions.
std::string DescribeDevices(const Mesh& mesh, const std::vector<int64_t>& positions) {
  if (positions.empty()) return "none";
  std::string text = fmt::format("{} {}", positions.size() == 1 ? "position" : "positions", PositionRanges(positions));
  bool same = true;
  for (int64_t p : positions) same = same && mesh.DeviceAt(p) == p;
  if (!same) {
    std::vector<int> ids;
    for (int64_t p : positions) ids.push_back(mesh.DeviceAt(p));
    text += fmt::format(" (device ids {})", fmt::join(ids, ", "));
  }
  return text;
}

RuntimeCore::RuntimeCore(Mesh mesh_in, RuntimeOptions options_in, int workers, std::vector<int> owner_in, int rank_in)
    : mesh(std::move(mesh_in)),
      options(std::move(options_in)),
      num_workers(workers),
      owner(std::move(owner_in)),
      rank(rank_in),
      slots(mesh.size()) {
  int64_t capacity = options.device_memory_bytes;
  if (capacity == 0) capacity = mesh.topology() != nullptr ? mesh.topology()->memory_bytes() : kDefaultDeviceMemoryBytes;
  if (capacity <= 0) capacity = kDefaultDeviceMemoryBytes;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    DeviceSlot& s = slots[p];
    s.position = p;
    s.memory = std::make_shared<DeviceMemory>(p, mesh.DeviceAt(p), capacity);
    s.memory_raw = s.memory.get();
    new (s.context_storage) DeviceContext(this, &s, p, mesh.DeviceAt(p), mesh.CoordsOfPosition(p));
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

const CollectiveCall kBarrierCall{};

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

void RuntimeCore::WaitAtBarrier(DeviceSlot& slot) { WaitAt(slot, kBarrierCall); }

Array RuntimeCore::Collective(DeviceSlot& slot, CollectiveCall& call) {
  WaitAt(slot, call);
  if (call.op == OpKind::kBarrier) return Array();
  return ArrayAccess::Make(call.out_dtype, call.out_shape, slot.run->plan.ResultBuffer(slot.position),
                           slot.memory.get());
}

}  // namespace spmdsim::internal
