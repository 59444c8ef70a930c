#include "workloads/internal/recorder.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "common/error.h"
#include "sim/multiprocess.h"

namespace spmdsim::internal {

DType PeakFlopsKey(const Topology& topology, DType dtype) {
  DType key = dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF64 ? dtype : DType::kF32;
  if (topology.peak_flops().count(key) == 0) key = DType::kF32;
  if (topology.peak_flops().count(key) == 0 && !topology.peak_flops().empty()) {
    key = topology.peak_flops().begin()->first;
  }
  return key;
}

namespace {

const Mesh& CheckedMesh(const Mesh& mesh) {
  if (mesh.topology() == nullptr) {
    Throw(ErrorCode::kFailedPrecondition,
          "workload mesh {} has no topology: the cost model needs one (build the mesh on a topology preset)",
          mesh.ToString());
  }
  return mesh;
}

// The cost model's class of a runtime collective (REQUIRES: not a barrier).
CollectiveOp ModelOp(CollectiveKind op) {
  switch (op) {
    case CollectiveKind::kPsum:
    case CollectiveKind::kPmean:
    case CollectiveKind::kPmax:
    case CollectiveKind::kPmin: return CollectiveOp::kAllReduce;
    case CollectiveKind::kAllGather: return CollectiveOp::kAllGather;
    case CollectiveKind::kPsumScatter: return CollectiveOp::kReduceScatter;
    case CollectiveKind::kAllToAll: return CollectiveOp::kAllToAll;
    case CollectiveKind::kPpermute: return CollectiveOp::kPermute;
    case CollectiveKind::kBarrier: break;
  }
  SPMDSIM_CHECK(false, "no cost model for {}", CollectiveName(op));
  return CollectiveOp::kAllReduce;
}

}  // namespace

CostRecorder::CostRecorder(const WorkloadContext& context, const Mesh& mesh)
    : mesh_(CheckedMesh(mesh)),
      record_trace_(context.record_trace),
      compute_(*mesh.topology(), context.cost.roofline),
      model_(mesh, context.cost.collectives),
      clocks_(mesh.size()),
      devices_(static_cast<size_t>(mesh.size())),
      wall_origin_(std::chrono::steady_clock::now()),
      fresh_clocks_(mesh.size()) {
  clocks_.set_keep_steps(false);  // Finish reads the recorder's own events, never clocks_.steps()
  for (const auto& [device_id, factor] : context.cost.speed_factors) {
    if (!(factor > 0) || !std::isfinite(factor)) {
      Throw(ErrorCode::kInvalidArgument, "speed factor of device {} must be > 0 (1 = nominal, 0.5 = half speed), "
            "got {}", device_id, factor);
    }
    clocks_.SetSpeedFactor(mesh.PositionOfDevice(device_id), factor);
  }
  fresh_clocks_ = clocks_;
  const std::shared_ptr<ProcessGroup>& group = context.runtime.process_group;
  if (group != nullptr && group->size() > 1) {
    group_ = group;
    owner_ = PlaceDevices(mesh, group->size());  // as the Runtime places them
    charges_.resize(devices_.size());
    fold_ = false;
  }
}

double CostRecorder::WallNow() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_origin_).count();
}

int CostRecorder::AddStep(std::string name, std::string op, StepKind kind, std::vector<std::string> axes) {
  StepInfo info;
  info.name = std::move(name);
  info.op = std::move(op);
  info.kind = kind;
  info.axes = std::move(axes);
  steps_.push_back(std::move(info));
  return static_cast<int>(steps_.size()) - 1;
}

void CostRecorder::BeginStep(int64_t position, int step, DType dtype) {
  if (!charging_) return;
  DeviceState& d = devices_[position];
  Event e;
  e.step = step;
  e.wall_start = e.wall_end = WallNow();
  d.events.push_back(e);
  d.in_step = true;
  d.peak_key = PeakFlopsKey(*mesh_.topology(), dtype);
}

void CostRecorder::EndStep(int64_t position) {
  if (!charging_) return;
  DeviceState& d = devices_[position];
  d.in_step = false;
  if (!d.events.empty()) d.events.back().wall_end = WallNow();
}

void CostRecorder::Record(int64_t device_position, const OpCost& cost) {
  if (!charging_ || device_position < 0 || device_position >= static_cast<int64_t>(devices_.size())) return;
  DeviceState& d = devices_[device_position];
  if (!d.in_step) return;  // work outside any step (input data, shard_map's blocks) is not charged
  Event& e = d.events.back();
  const double bytes = static_cast<double>(cost.bytes_read + cost.bytes_written);
  const double flops = static_cast<double>(cost.flops);
  e.pending_flops += flops;
  e.pending_bytes += bytes;
  // The dtype key always exists (PeakFlopsKey), so the model does not throw for valid op costs.
  e.pending_nominal +=
      compute_.Cost(flops, bytes, ContractionDims{cost.batch, cost.m, cost.n, cost.k}, d.peak_key).seconds;
}

void CostRecorder::FlushLocal() {
  for (size_t p = 0; p < devices_.size(); ++p) {
    DeviceState& d = devices_[p];
    const int64_t position = static_cast<int64_t>(p);
    for (size_t i = d.flushed; i < d.events.size(); ++i) {
      Event& e = d.events[i];
      const double before = clocks_.now(position);
      if (e.sim_start < 0) e.sim_start = before;
      if (e.pending_nominal > 0) clocks_.AdvanceLocal(steps_[e.step].name, position, e.pending_nominal);
      const double after = clocks_.now(position);
      e.local_seconds += after - before;
      e.flops += e.pending_flops;
      e.bytes += e.pending_bytes;
      e.sim_end = after;
      e.pending_nominal = e.pending_flops = e.pending_bytes = 0;
    }
    if (!d.events.empty()) d.flushed = d.events.size() - 1;
    FoldFinished(d);
  }
}

void CostRecorder::StepSums::Add(const Event& e) {
  if (e.sim_start < 0) return;  // never charged
  duration += e.sim_end - e.sim_start;
  local += e.local_seconds;
  flops += e.flops;
  bytes += e.bytes;
  wall += e.wall_end - e.wall_start;
  count += 1;
}

void CostRecorder::FoldFinished(DeviceState& d) const {
  // Every event before `flushed` is final: only the last one still receives costs and its end.
  if (record_trace_ || !fold_ || d.flushed == 0) return;
  if (d.folded.size() < steps_.size()) d.folded.resize(steps_.size());
  for (size_t i = 0; i < d.flushed; ++i) d.folded[d.events[i].step].Add(d.events[i]);
  d.events.erase(d.events.begin(), d.events.begin() + static_cast<std::ptrdiff_t>(d.flushed));
  d.flushed = 0;
}

void CostRecorder::AdvanceCollective(const std::string& name, const std::vector<std::vector<int64_t>>& groups,
                                     const std::vector<CollectiveCost>& costs) {
  const std::vector<double> before = clocks_.clocks();
  clocks_.AdvanceCollective(name, groups, costs);
  for (size_t p = 0; p < devices_.size(); ++p) {
    if (devices_[p].events.empty()) continue;
    Event& e = devices_[p].events.back();
    if (e.sim_start < 0) e.sim_start = before[p];
    e.sim_end = clocks_.now(static_cast<int64_t>(p));
  }
}

void CostRecorder::OnCollective(const CollectiveEvent& event) {
  if (!charging_ || event.op == CollectiveKind::kBarrier) return;
  try {
    if (group_ == nullptr) {
      FlushLocal();
    } else {
      LogFlush();
    }
    const CollectiveOp op = ModelOp(event.op);
    const double bytes = static_cast<double>(op == CollectiveOp::kAllGather ? event.output_bytes_per_device
                                                                             : event.input_bytes_per_device);
    std::vector<std::string> axes(event.axes.begin(), event.axes.end());
    std::vector<std::pair<int, int>> pairs;
    for (const auto& [src, dst] : event.permutation) pairs.emplace_back(static_cast<int>(src), static_cast<int>(dst));
    std::string key = fmt::format("{}|{}|{}|", static_cast<int>(op), fmt::join(axes, ","), bytes);
    for (const auto& [s, t] : pairs) key += fmt::format("{}>{},", s, t);
    auto it = cost_cache_.find(key);
    if (it == cost_cache_.end()) it = cost_cache_.emplace(key, model_.CostPerGroup(op, axes, bytes, pairs)).first;
    const std::vector<CollectiveCost>& costs = it->second;
    std::vector<std::vector<int64_t>> groups(event.groups.begin(), event.groups.end());
    SPMDSIM_CHECK(groups.size() == costs.size(), "collective has {} groups, the model {}", groups.size(),
                  costs.size());
    // The step every device is in (they all wait at this collective): that of the first device with events
    // (across ranks, the first local one).
    int step = -1;
    for (const DeviceState& d : devices_) {
      if (d.events.empty()) continue;
      step = d.events.back().step;
      break;
    }
    const std::string name = step >= 0 ? steps_[step].name : std::string(CollectiveName(event.op));
    if (group_ == nullptr) {
      AdvanceCollective(name, groups, costs);
    } else {
      collectives_.push_back({flushes_ - 1, name, std::move(groups), &costs});
    }
    if (step >= 0) {
      const CollectiveCost* slowest = &costs[0];
      for (const CollectiveCost& c : costs) {
        if (c.seconds > slowest->seconds) slowest = &c;
      }
      StepInfo& info = steps_[step];
      info.kind = StepKind::kCollective;
      info.communication_seconds += slowest->seconds;
      for (const auto& [axis, s] : slowest->seconds_by_axis) info.by_axis[axis] += s;
      for (const auto& [link, b] : slowest->bytes_sent) info.by_link[std::string(LinkClassName(link))] += b;
      info.algorithm = slowest->algorithm;
      info.protocol = slowest->protocol;
      info.message_bytes = slowest->bytes;
      info.group_size = slowest->group_size;
      if (info.axes.empty()) info.axes = axes;
    }
  } catch (...) {
    if (!error_) error_ = std::current_exception();
  }
}

void CostRecorder::LogFlush() {
  for (size_t p = 0; p < devices_.size(); ++p) {
    DeviceState& d = devices_[p];
    for (size_t i = d.flushed; i < d.events.size(); ++i) {
      Event& e = d.events[i];
      charges_[p].push_back({flushes_, static_cast<int64_t>(i), e.pending_nominal, e.pending_flops, e.pending_bytes});
      e.pending_nominal = e.pending_flops = e.pending_bytes = 0;
    }
    if (!d.events.empty()) d.flushed = d.events.size() - 1;
  }
  ++flushes_;
}

namespace {

template <typename T>
void Put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
T Take(const std::string& in, size_t& at) {
  SPMDSIM_CHECK(at + sizeof(T) <= in.size(), "short cost log from a rank");
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

}  // namespace

void CostRecorder::ReplayAcrossRanks() {
  // 1. Every rank's devices' events (step, wall times) and charges, by position.
  std::string mine;
  for (size_t p = 0; p < devices_.size(); ++p) {
    if (owner_[p] != group_->rank()) continue;
    Put(mine, static_cast<int64_t>(p));
    Put(mine, static_cast<int64_t>(devices_[p].events.size()));
    for (const Event& e : devices_[p].events) {
      Put(mine, static_cast<int64_t>(e.step));
      Put(mine, e.wall_start);
      Put(mine, e.wall_end);
    }
    Put(mine, static_cast<int64_t>(charges_[p].size()));
    for (const Charge& c : charges_[p]) Put(mine, c);
  }
  const std::vector<std::string> all = group_->AllGatherBytes(mine);
  std::vector<std::vector<Event>> events(devices_.size());
  for (const std::string& theirs : all) {
    size_t at = 0;
    while (at < theirs.size()) {
      const auto p = static_cast<size_t>(Take<int64_t>(theirs, at));
      SPMDSIM_CHECK(p < devices_.size(), "cost log names position {}", p);
      const auto count = Take<int64_t>(theirs, at);
      for (int64_t i = 0; i < count; ++i) {
        Event e;
        e.step = static_cast<int>(Take<int64_t>(theirs, at));
        e.wall_start = Take<double>(theirs, at);
        e.wall_end = Take<double>(theirs, at);
        events[p].push_back(e);
      }
      charges_[p].resize(static_cast<size_t>(Take<int64_t>(theirs, at)));
      for (Charge& c : charges_[p]) c = Take<Charge>(theirs, at);
    }
  }
  // 2. The flushes and collectives in order, as one process would have run them.
  clocks_ = fresh_clocks_;
  for (DeviceState& d : devices_) d = DeviceState{};
  std::vector<size_t> next(devices_.size(), 0);  // per position: its next charge
  size_t collective = 0;
  for (int64_t f = 0; f < flushes_; ++f) {
    for (size_t p = 0; p < devices_.size(); ++p) {
      DeviceState& d = devices_[p];
      for (; next[p] < charges_[p].size() && charges_[p][next[p]].flush == f; ++next[p]) {
        const Charge& c = charges_[p][next[p]];
        while (static_cast<int64_t>(d.events.size()) <= c.event) d.events.push_back(events[p].at(d.events.size()));
        Event& e = d.events[static_cast<size_t>(c.event)];
        e.pending_nominal += c.nominal;
        e.pending_flops += c.flops;
        e.pending_bytes += c.bytes;
      }
    }
    FlushLocal();
    if (collective < collectives_.size() && collectives_[collective].flush == f) {
      const LoggedCollective& c = collectives_[collective++];
      AdvanceCollective(c.name, c.groups, *c.costs);
    }
  }
  // Events begun after the last flush were never charged (as in one process).
  for (size_t p = 0; p < devices_.size(); ++p) {
    while (devices_[p].events.size() < events[p].size())
      devices_[p].events.push_back(events[p][devices_[p].events.size()]);
  }
}

void CostRecorder::OnRunEnd(bool ok) {
  if (!charging_) return;
  if (group_ == nullptr) {
    FlushLocal();
  } else {
    LogFlush();
  }
}

void CostRecorder::RethrowIfFailed() {
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void CostRecorder::Finish(WorkloadResult* result) {
  if (group_ != nullptr) ReplayAcrossRanks();
  const size_t num_steps = steps_.size();
  using Acc = StepSums;
  std::vector<Acc> best(num_steps);
  std::vector<Acc> acc(num_steps);
  for (size_t p = 0; p < devices_.size(); ++p) {
    std::fill(acc.begin(), acc.end(), Acc{});
    std::copy(devices_[p].folded.begin(), devices_[p].folded.end(), acc.begin());
    for (const Event& e : devices_[p].events) acc[e.step].Add(e);
    for (size_t s = 0; s < num_steps; ++s) {
      Acc& b = best[s];
      const Acc& a = acc[s];
      b.duration = std::max(b.duration, a.duration);
      b.local = std::max(b.local, a.local);
      b.flops = std::max(b.flops, a.flops);
      b.bytes = std::max(b.bytes, a.bytes);
      b.wall = std::max(b.wall, a.wall);
      b.count = std::max(b.count, a.count);
    }
  }
  WorkloadTotals& totals = result->totals;
  for (size_t s = 0; s < num_steps; ++s) {
    const StepInfo& info = steps_[s];
    const Acc& b = best[s];
    if (b.count == 0) continue;
    const double n = static_cast<double>(b.count);
    StepResult r;
    r.name = info.name;
    r.kind = info.kind;
    r.op = info.op;
    r.axes = info.axes;
    r.count = b.count;
    r.predicted_seconds = b.duration / n;
    r.compute_seconds = b.local / n;
    r.communication_seconds = info.communication_seconds / n;
    for (const auto& [axis, v] : info.by_axis) r.communication_seconds_by_axis[axis] = v / n;
    for (const auto& [link, v] : info.by_link) r.bytes_by_link[link] = v / n;
    r.algorithm = info.algorithm;
    r.protocol = info.protocol;
    r.message_bytes = info.message_bytes;
    r.group_size = info.group_size;
    r.flops = b.flops / n;
    r.memory_bytes = b.bytes / n;
    r.wall_seconds = b.wall / n;
    totals.compute_seconds += r.compute_seconds * n;
    totals.communication_seconds += r.communication_seconds * n;
    for (const auto& [axis, v] : info.by_axis) totals.communication_seconds_by_axis[axis] += v;
    for (const auto& [link, v] : info.by_link) totals.bytes_by_link[link] += v;
    totals.flops += b.flops;
    result->steps.push_back(std::move(r));
  }
  totals.predicted_seconds = clocks_.Makespan();
  for (double w : clocks_.wait_seconds()) totals.wait_seconds = std::max(totals.wait_seconds, w);
  if (record_trace_) {
    for (size_t p = 0; p < devices_.size(); ++p) {
      for (const Event& e : devices_[p].events) {
        if (e.sim_start < 0) continue;
        TraceEvent t;
        t.position = static_cast<int64_t>(p);
        t.device_id = mesh_.DeviceAt(t.position);
        t.name = steps_[e.step].name;
        t.kind = steps_[e.step].kind;
        t.sim_start = e.sim_start;
        t.sim_end = e.sim_end;
        t.wall_start = e.wall_start;
        t.wall_end = e.wall_end;
        result->trace.push_back(std::move(t));
      }
    }
  }
}

namespace {

// Every position's peak bytes, each from the rank that runs it (every rank must call this).
std::vector<int64_t> PeaksOfEveryRank(const Runtime& runtime, std::vector<int64_t> peaks) {
  const std::shared_ptr<ProcessGroup>& group = runtime.options().process_group;
  if (group == nullptr || group->size() == 1) return peaks;
  const std::string mine(reinterpret_cast<const char*>(peaks.data()), peaks.size() * sizeof(int64_t));
  const std::vector<std::string> all = group->AllGatherBytes(mine);
  for (size_t p = 0; p < peaks.size(); ++p) {
    const std::string& theirs = all[static_cast<size_t>(runtime.owner(static_cast<int64_t>(p)))];
    SPMDSIM_CHECK(theirs.size() == mine.size(), "peak memory of {} bytes from a rank, {} expected", theirs.size(),
                  mine.size());
    std::memcpy(&peaks[p], theirs.data() + p * sizeof(int64_t), sizeof(int64_t));
  }
  return peaks;
}

}  // namespace

MemoryResult MemoryOfPeaks(const Mesh& mesh, const std::vector<int64_t>& peaks, int64_t capacity_bytes) {
  MemoryResult memory;
  memory.capacity_bytes = capacity_bytes;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    memory.peak_bytes_per_position.push_back(peaks[p]);
    if (p == 0 || peaks[p] > memory.peak_bytes_max) {
      memory.peak_bytes_max = peaks[p];
      memory.max_device = mesh.DeviceAt(p);
    }
    if (p == 0 || peaks[p] < memory.peak_bytes_min) {
      memory.peak_bytes_min = peaks[p];
      memory.min_device = mesh.DeviceAt(p);
    }
  }
  return memory;
}

MemoryResult MemoryOf(const Runtime& runtime, const Mesh& mesh) {
  std::vector<int64_t> peaks;
  int64_t capacity = 0;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    const MemoryStats stats = runtime.memory_stats(p);
    peaks.push_back(stats.peak_bytes);
    capacity = stats.capacity_bytes;
  }
  return MemoryOfPeaks(mesh, PeaksOfEveryRank(runtime, std::move(peaks)), capacity);
}

}  // namespace spmdsim::internal
