#include "cost/timeline.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "common/error.h"

namespace spmdsim {
namespace {

constexpr int kStreams = 3;      // collective streams 0 and 1, and the p2p stream
constexpr int kP2pStream = 2;

struct MessageKey {
  int64_t src, dst, tag;
  bool operator==(const MessageKey&) const = default;
};
struct MessageKeyHash {
  size_t operator()(const MessageKey& k) const {
    size_t h = std::hash<int64_t>()(k.src);
    h = h * 1000003u ^ std::hash<int64_t>()(k.dst);
    return h * 1000003u ^ std::hash<int64_t>()(k.tag);
  }
};

struct Instance {
  int issued = 0;
  double ready = 0;    // latest of the members' (issue time, stream free)
  double seconds = -1;
  bool resolved = false;
  double start = 0, end = 0;
};

enum class State : uint8_t { kRunnable, kAtStart, kAtRecv, kDone };

struct Device {
  size_t pc = 0;
  double t = 0;
  double stream_free[kStreams] = {0, 0, 0};
  State state = State::kRunnable;
  std::vector<std::pair<int32_t, int64_t>> next_seq;                     // per group: the next Start's index
  std::unordered_map<int64_t, std::pair<int32_t, int64_t>> handles;      // handle -> (group, seq)
  struct InFlight {
    double start, end;
    bool collective;  // false: a send
  };
  std::vector<InFlight> in_flight;                                       // communication intervals
  double host = 0;                                                       // when the host is free to launch
  std::pair<int32_t, int64_t> blocked_on{-1, 0};
  MessageKey blocked_key{-1, -1, 0};
  DeviceTimes times;
};

int64_t NextSeq(Device& d, int32_t group) {
  for (auto& [g, seq] : d.next_seq)
    if (g == group) return seq++;
  d.next_seq.emplace_back(group, 1);
  return 0;
}

class Engine {
 public:
  Engine(const std::vector<std::vector<int64_t>>& groups, const std::vector<std::vector<TimelineOp>>& programs,
         double slowdown, std::vector<std::vector<OpInterval>>* intervals)
      : groups_(groups), programs_(programs), slowdown_(slowdown), devices_(programs.size()),
        instances_(groups.size()), intervals_(intervals) {
    if (intervals_ != nullptr) {
      intervals_->resize(programs.size());
      for (size_t p = 0; p < programs.size(); ++p) (*intervals_)[p].assign(programs[p].size(), OpInterval{});
    }
    for (Device& d : devices_) {
      d.times.compute_by_category.assign(StepTimeline::kMaxCategories, 0);
      d.times.exposed_by_category.assign(StepTimeline::kMaxCategories, 0);
      d.times.comm_by_category.assign(StepTimeline::kMaxCategories, 0);
    }
  }

  std::vector<DeviceTimes> Run() {
    std::deque<int64_t> runnable;
    for (size_t p = 0; p < devices_.size(); ++p) runnable.push_back(static_cast<int64_t>(p));
    while (!runnable.empty()) {
      const int64_t p = runnable.front();
      runnable.pop_front();
      Advance(p, &runnable);
    }
    std::vector<DeviceTimes> out;
    out.reserve(devices_.size());
    for (size_t p = 0; p < devices_.size(); ++p) {
      Device& d = devices_[p];
      if (d.state != State::kDone) ThrowBlocked();
      d.times.end = d.t;
      for (double f : d.stream_free) d.times.end = std::max(d.times.end, f);
      out.push_back(std::move(d.times));
    }
    return out;
  }

 private:
  void Record(int64_t p, size_t pc, double start, double end) {
    if (intervals_ == nullptr) return;
    OpInterval& iv = (*intervals_)[static_cast<size_t>(p)][pc];
    iv.start = start;
    iv.end = end;
  }
  void RecordHostWait(int64_t p, size_t pc, double start, double end) {
    if (intervals_ == nullptr) return;
    OpInterval& iv = (*intervals_)[static_cast<size_t>(p)][pc];
    iv.host_wait_start = start;
    iv.host_wait_end = end;
  }

  // Runs device p until it blocks or ends.
  void Advance(int64_t p, std::deque<int64_t>* runnable) {
    Device& d = devices_[static_cast<size_t>(p)];
    const std::vector<TimelineOp>& ops = programs_[static_cast<size_t>(p)];
    d.state = State::kRunnable;
    while (d.pc < ops.size()) {
      const TimelineOp& op = ops[d.pc];
      switch (op.kind) {
        case TimelineOp::Kind::kCompute:
          RunCompute(p, d, op);
          break;
        case TimelineOp::Kind::kStart:
          if (!IssueStart(p, d, op, runnable)) return;
          break;
        case TimelineOp::Kind::kWait:
          RunWait(p, d, op);
          break;
        case TimelineOp::Kind::kSend:
          RunSend(p, d, op, runnable);
          break;
        case TimelineOp::Kind::kRecv:
          if (!RunRecv(p, d, op)) return;
          break;
      }
      ++d.pc;
    }
    d.state = State::kDone;
  }

  // The host launches the op: it starts no earlier than that; the compute stream's wait is host_wait.
  void WaitForHost(int64_t p, Device& d, const TimelineOp& op) {
    if (op.host_seconds <= 0) return;
    d.host += op.host_seconds;
    if (d.host > d.t) {
      RecordHostWait(p, d.pc, d.t, d.host);
      d.times.host_wait += d.host - d.t;
      d.t = d.host;
    }
  }

  // The op's progress rate with the given communication in flight.
  double Rate(const TimelineOp& op, bool collective, bool p2p) const {
    if (!collective && !p2p) return 1.0;
    const double with = collective ? op.seconds_with_collective : op.seconds_with_p2p;
    if (with >= 0) return with > 0 ? op.seconds / with : 1.0;
    return 1.0 - slowdown_;
  }

  void RunCompute(int64_t p, Device& d, const TimelineOp& op) {
    SPMDSIM_CHECK(op.seconds >= 0 && std::isfinite(op.seconds), "compute seconds must be finite and >= 0");
    SPMDSIM_CHECK(op.seconds_with_collective < 0 || op.seconds_with_collective >= op.seconds,
                  "a compute op is never faster with communication in flight");
    SPMDSIM_CHECK(op.seconds_with_p2p < 0 || op.seconds_with_p2p >= op.seconds,
                  "a compute op is never faster with communication in flight");
    WaitForHost(p, d, op);
    const double begin = d.t;
    double t = d.t, work = op.seconds;
    const bool contended = slowdown_ > 0 || op.seconds_with_collective > op.seconds || op.seconds_with_p2p > op.seconds;
    if (contended) {
      std::erase_if(d.in_flight, [&](const Device::InFlight& iv) { return iv.end <= t; });
    }
    while (work > 0) {
      if (!contended || d.in_flight.empty()) {
        t += work;
        break;
      }
      bool collective = false, p2p = false;
      double boundary = INFINITY;
      for (const Device::InFlight& iv : d.in_flight) {
        if (iv.start <= t && t < iv.end) {
          (iv.collective ? collective : p2p) = true;
          boundary = std::min(boundary, iv.end);
        } else if (iv.start > t) {
          boundary = std::min(boundary, iv.start);
        }
      }
      const double rate = Rate(op, collective, p2p);
      if (boundary == INFINITY || work <= (boundary - t) * rate) {
        t += work / rate;
        break;
      }
      work -= (boundary - t) * rate;
      t = boundary;
    }
    d.t = t;
    Record(p, d.pc, begin, t);
    d.times.compute += t - begin;
    d.times.compute_by_category[op.category] += t - begin;
  }

  // Returns false when the device must wait for the other members.
  bool IssueStart(int64_t p, Device& d, const TimelineOp& op, std::deque<int64_t>* runnable) {
    if (d.state == State::kAtStart) return false;  // issued already, not resolved yet
    WaitForHost(p, d, op);
    const auto g = static_cast<size_t>(op.group);
    const int64_t seq = NextSeq(d, op.group);
    std::vector<Instance>& list = instances_[g];
    if (static_cast<size_t>(seq) >= list.size()) list.resize(static_cast<size_t>(seq) + 1);
    Instance& inst = list[static_cast<size_t>(seq)];
    if (inst.seconds >= 0 && inst.seconds != op.seconds) {
      Throw(ErrorCode::kInvalidArgument,
            "timeline: device {} starts collective #{} on group {} with {} s, another member with {} s", p, seq,
            op.group, op.seconds, inst.seconds);
    }
    inst.seconds = op.seconds;
    inst.ready = std::max({inst.ready, d.t, d.stream_free[op.stream]});
    ++inst.issued;
    d.handles[op.tag] = {op.group, seq};
    if (inst.issued < static_cast<int>(groups_[g].size())) {
      d.state = State::kAtStart;
      d.blocked_on = {op.group, seq};
      return false;
    }
    inst.resolved = true;
    inst.start = inst.ready;
    inst.end = inst.start + inst.seconds;
    for (int64_t member : groups_[g]) {
      Device& m = devices_[static_cast<size_t>(member)];
      Record(member, m.pc, inst.start, inst.end);  // every member is at this Start
      m.stream_free[op.stream] = inst.end;
      if (inst.seconds > 0) m.in_flight.push_back({inst.start, inst.end, true});
      m.times.comm += inst.seconds;
      m.times.comm_by_category[op.category] += inst.seconds;
      if (member != p) {
        SPMDSIM_CHECK(m.state == State::kAtStart, "member {} of a resolved collective is not waiting", member);
        m.state = State::kRunnable;
        ++m.pc;
        runnable->push_back(member);
      }
    }
    return true;
  }

  void RunWait(int64_t p, Device& d, const TimelineOp& op) {
    auto it = d.handles.find(op.tag);
    if (it == d.handles.end()) {
      Throw(ErrorCode::kInvalidArgument, "timeline: device {} waits on handle {}, which it never started", p, op.tag);
    }
    const Instance& inst = instances_[static_cast<size_t>(it->second.first)][static_cast<size_t>(it->second.second)];
    d.handles.erase(it);
    Record(p, d.pc, d.t, std::max(d.t, inst.end));
    if (inst.end > d.t) {
      d.times.exposed_comm += inst.end - d.t;
      d.times.exposed_by_category[op.category] += inst.end - d.t;
      d.t = inst.end;
    }
  }

  void RunSend(int64_t p, Device& d, const TimelineOp& op, std::deque<int64_t>* runnable) {
    if (op.peer < 0 || op.peer >= static_cast<int64_t>(devices_.size())) {
      Throw(ErrorCode::kInvalidArgument, "timeline: device {} sends to position {}, outside 0..{}", p, op.peer,
            devices_.size() - 1);
    }
    const double start = std::max(d.t, d.stream_free[kP2pStream]);
    const double end = start + op.seconds;
    d.stream_free[kP2pStream] = end;
    Record(p, d.pc, start, end);
    if (op.seconds > 0) d.in_flight.push_back({start, end, false});
    d.times.comm += op.seconds;
    d.times.comm_by_category[op.category] += op.seconds;
    const MessageKey key{p, op.peer, op.tag};
    if (!mailbox_.emplace(key, end).second) {
      Throw(ErrorCode::kInvalidArgument, "timeline: device {} sends tag {} to {} twice before it is received", p,
            op.tag, op.peer);
    }
    Device& r = devices_[static_cast<size_t>(op.peer)];
    if (r.state == State::kAtRecv && r.blocked_key == key) {
      r.state = State::kRunnable;
      runnable->push_back(op.peer);
    }
  }

  bool RunRecv(int64_t p, Device& d, const TimelineOp& op) {
    const MessageKey key{op.peer, p, op.tag};
    auto it = mailbox_.find(key);
    if (it == mailbox_.end()) {
      d.state = State::kAtRecv;
      d.blocked_key = key;
      return false;
    }
    Record(p, d.pc, d.t, std::max(d.t, it->second));
    if (it->second > d.t) {
      d.times.pipeline_wait += it->second - d.t;
      d.t = it->second;
    }
    mailbox_.erase(it);
    return true;
  }

  [[noreturn]] void ThrowBlocked() const {
    std::string what;
    int shown = 0;
    for (size_t p = 0; p < devices_.size() && shown < 3; ++p) {
      const Device& d = devices_[p];
      if (d.state == State::kDone) continue;
      if (!what.empty()) what += "; ";
      if (d.state == State::kAtStart) {
        const auto& inst =
            instances_[static_cast<size_t>(d.blocked_on.first)][static_cast<size_t>(d.blocked_on.second)];
        what += fmt::format("device {} at op {} waits for collective #{} on group {} ({} of {} members issued it)", p,
                            d.pc, d.blocked_on.second, d.blocked_on.first, inst.issued,
                            groups_[static_cast<size_t>(d.blocked_on.first)].size());
      } else {
        what += fmt::format("device {} at op {} waits to receive tag {} from device {}", p, d.pc, d.blocked_key.tag,
                            d.blocked_key.src);
      }
      ++shown;
    }
    Throw(ErrorCode::kInvalidArgument, "timeline: the programs cannot finish: {}", what);
  }

  const std::vector<std::vector<int64_t>>& groups_;
  const std::vector<std::vector<TimelineOp>>& programs_;
  double slowdown_;
  std::vector<Device> devices_;
  std::vector<std::vector<Instance>> instances_;
  std::unordered_map<MessageKey, double, MessageKeyHash> mailbox_;
  std::vector<std::vector<OpInterval>>* intervals_;  // null: not recorded
};

}  // namespace

StepTimeline::StepTimeline(int64_t num_devices, double comm_slowdown) : comm_slowdown_(comm_slowdown) {
  if (num_devices < 1) Throw(ErrorCode::kInvalidArgument, "timeline: num_devices must be >= 1, got {}", num_devices);
  if (!(comm_slowdown >= 0 && comm_slowdown < 1)) {
    Throw(ErrorCode::kInvalidArgument, "timeline: comm_slowdown must be in [0, 1), got {}", comm_slowdown);
  }
  programs_.resize(static_cast<size_t>(num_devices));
}

int32_t StepTimeline::AddGroup(std::vector<int64_t> positions) {
  if (positions.empty()) Throw(ErrorCode::kInvalidArgument, "timeline: a group needs at least one position");
  std::vector<int64_t> sorted = positions;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= static_cast<int64_t>(programs_.size()))
      Throw(ErrorCode::kInvalidArgument, "timeline: group position {} outside 0..{}", sorted[i], programs_.size() - 1);
    if (i > 0 && sorted[i] == sorted[i - 1])
      Throw(ErrorCode::kInvalidArgument, "timeline: position {} appears twice in a group", sorted[i]);
  }
  groups_.push_back(std::move(positions));
  return static_cast<int32_t>(groups_.size() - 1);
}

void StepTimeline::SetProgram(int64_t position, std::vector<TimelineOp> ops) {
  program(position) = std::move(ops);
}

std::vector<TimelineOp>& StepTimeline::program(int64_t position) {
  SPMDSIM_CHECK(position >= 0 && position < static_cast<int64_t>(programs_.size()), "position {} out of range",
                position);
  return programs_[static_cast<size_t>(position)];
}

std::vector<DeviceTimes> StepTimeline::Run(std::vector<std::vector<OpInterval>>* intervals) {
  for (size_t p = 0; p < programs_.size(); ++p) {
    for (const TimelineOp& op : programs_[p]) {
      if (op.category >= kMaxCategories)
        Throw(ErrorCode::kInvalidArgument, "timeline: category {} >= {}", op.category, kMaxCategories);
      if (op.kind == TimelineOp::Kind::kStart) {
        if (op.group < 0 || static_cast<size_t>(op.group) >= groups_.size())
          Throw(ErrorCode::kInvalidArgument, "timeline: device {} starts a collective on unknown group {}", p,
                op.group);
        if (op.stream > 1) Throw(ErrorCode::kInvalidArgument, "timeline: collective stream must be 0 or 1");
        const auto& members = groups_[static_cast<size_t>(op.group)];
        if (std::find(members.begin(), members.end(), static_cast<int64_t>(p)) == members.end())
          Throw(ErrorCode::kInvalidArgument, "timeline: device {} starts a collective on group {}, not a member", p,
                op.group);
      }
    }
  }
  Engine engine(groups_, programs_, comm_slowdown_, intervals);
  return engine.Run();
}

}  // namespace spmdsim
