#include "scenario/trace.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace spmdsim {
namespace {

// --- the devices' step tracks (every workload) ---

void AppendDeviceTracks(const Mesh& mesh, const std::string& topology, nlohmann::json& events) {
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", kTraceSimulatedPid}, {"tid", 0},
                    {"args", {{"name", fmt::format("simulated clock (predicted on {})", topology)}}}});
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", kTraceWallPid}, {"tid", 0},
                    {"args", {{"name", "wall clock (simulator on this machine)"}}}});
  for (int pid : {kTraceSimulatedPid, kTraceWallPid}) {
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"sort_index", pid}}}});
    for (int64_t p = 0; p < mesh.size(); ++p) {
      int id = mesh.device_ids()[p];
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", id},
                        {"args", {{"name", fmt::format("device {} (mesh position {})", id, p)}}}});
      events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", id},
                        {"args", {{"sort_index", p}}}});
    }
  }
}

// The workload's per-device step events on both clocks; returns its (simulated, wall) span in microseconds.
std::pair<double, double> AppendStepEvents(const WorkloadResult& r, double sim_offset, double wall_offset,
                                           nlohmann::json& events) {
  double sim_end = 0, wall_end = 0;
  for (const TraceEvent& e : r.trace) {
    if (!e.stream.empty()) continue;  // the hlo workload's streams: a process of their own (AppendStreamProcess)
    const nlohmann::json args = {{"workload", r.name}, {"mesh_position", e.position}};
    const std::string cat(StepKindName(e.kind));
    events.push_back({{"name", e.name}, {"cat", cat}, {"ph", "X"}, {"pid", kTraceSimulatedPid},
                      {"tid", e.device_id}, {"ts", sim_offset + e.sim_start * 1e6},
                      {"dur", std::max(0.0, (e.sim_end - e.sim_start) * 1e6)}, {"args", args}});
    events.push_back({{"name", e.name}, {"cat", cat}, {"ph", "X"}, {"pid", kTraceWallPid}, {"tid", e.device_id},
                      {"ts", wall_offset + e.wall_start * 1e6},
                      {"dur", std::max(0.0, (e.wall_end - e.wall_start) * 1e6)}, {"args", args}});
    sim_end = std::max(sim_end, e.sim_end * 1e6);
    wall_end = std::max(wall_end, e.wall_end * 1e6);
  }
  return {std::max(sim_end, r.totals.predicted_seconds * 1e6), std::max(wall_end, r.wall_seconds * 1e6)};
}

// --- the hlo workload's simulated device: one track per stream ---

constexpr std::string_view kStreams[] = {"compute", "collectives", "network", "copies"};

int StreamTrack(const std::string& stream) {
  for (size_t i = 0; i < std::size(kStreams); ++i) {
    if (kStreams[i] == stream) return static_cast<int>(i) + 1;
  }
  return 1;
}

// The hlo workload's events as a process of their own: the simulated device's compute stream and its queues, each
// event with its class, op_name scope, bytes, mesh axes and the compute stream's wait for it. Returns whether the
// workload had any.
bool AppendStreamProcess(const WorkloadResult& r, int pid, double sim_offset, nlohmann::json& events) {
  bool any = false;
  for (const TraceEvent& e : r.trace) {
    if (e.stream.empty()) continue;
    if (!any) {
      events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                        {"args", {{"name", fmt::format("{}: device {} (simulated; every device runs the same "
                                                       "program)", r.name, e.device_id)}}}});
      for (size_t i = 0; i < std::size(kStreams); ++i) {
        events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", static_cast<int>(i) + 1},
                          {"args", {{"name", fmt::format("{} stream", kStreams[i])}}}});
      }
      any = true;
    }
    nlohmann::json args = {{"class", e.category}, {"op_name scope", e.scope}, {"bytes", e.bytes}};
    if (!e.axes.empty()) args["mesh axes"] = e.axes;
    if (e.stream != "compute") args["exposed_seconds"] = e.exposed_seconds;
    events.push_back({{"name", e.name}, {"cat", e.stream}, {"ph", "X"}, {"pid", pid}, {"tid", StreamTrack(e.stream)},
                      {"ts", sim_offset + e.sim_start * 1e6}, {"dur", std::max(0.0, (e.sim_end - e.sim_start) * 1e6)},
                      {"args", args}});
  }
  return any;
}

// --- a model workload's simulated step (ModelStepTimes::schedule) ---

// Times in whole nanoseconds, written in microseconds: Perfetto reads ts x 1000 rounded, so nested events
// (task > layer > op) share their boundaries exactly.
int64_t Nanoseconds(double seconds) { return std::llround(seconds * 1e9); }
double Microseconds(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

nlohmann::json Complete(const std::string& name, std::string_view cat, int pid, int tid, int64_t start_ns,
                        int64_t end_ns, nlohmann::json args) {
  return {{"name", name}, {"cat", std::string(cat)}, {"ph", "X"}, {"pid", pid}, {"tid", tid},
          {"ts", Microseconds(start_ns)}, {"dur", Microseconds(end_ns - start_ns)}, {"args", std::move(args)}};
}

std::string_view PhaseShort(std::string_view phase) {
  if (phase == "forward") return "fwd";
  if (phase == "backward") return "bwd";
  return phase;
}

// "L5 fwd" / "fwd" (no layer): where in the step an event was issued.
std::string Where(const StepEvent& e) {
  return e.layer >= 0 ? fmt::format("L{} {}", e.layer, PhaseShort(e.phase)) : std::string(PhaseShort(e.phase));
}

}  // namespace

std::string StepEventName(const StepEvent& e) {
  switch (e.kind) {
    case StepEvent::Kind::kCompute:
      return fmt::format("{} {}", Where(e), e.op);
    case StepEvent::Kind::kCommunication:
      if (e.stream == StepEvent::Stream::kSends) return fmt::format("{} {}", Where(e), e.op);
      return fmt::format("{} {} {}", Where(e), e.category, e.op);
    case StepEvent::Kind::kExposed:
      return fmt::format("exposed {} {} ({})", e.category, e.op, Where(e));
    case StepEvent::Kind::kBubble:
      return fmt::format("bubble: {} ({})", e.op, Where(e));
    case StepEvent::Kind::kHostWait:
      return fmt::format("host launch wait: {} ({})", e.op, Where(e));
  }
  return std::string(e.op);
}

namespace {

int TrackOf(StepEvent::Stream stream) { return 1 + static_cast<int>(stream); }

// What the name says, as fields (the stage, device and stream are the process's and the track's).
nlohmann::json EventArgs(const StepEvent& e) {
  nlohmann::json args = {{"category", std::string(e.category)}, {"phase", std::string(e.phase)},
                         {"op", std::string(e.op)}};
  if (e.layer >= 0) args["layer"] = e.layer;
  if (e.micro_batch >= 0) args["micro_batch"] = e.micro_batch;
  if (e.chunk > 0) args["chunk"] = e.chunk;
  return args;
}

// The task an event belongs to: "forward mb 3", "backward mb 3 chunk 1", "optimizer".
std::string TaskName(const StepEvent& e) {
  if (e.phase == "optimizer") return "optimizer";
  const std::string_view direction = e.phase == "forward" ? "forward" : "backward";
  if (e.chunk > 0) return fmt::format("{} mb {} chunk {}", direction, e.micro_batch, e.chunk);
  return fmt::format("{} mb {}", direction, e.micro_batch);
}

// Runs of consecutive compute-stream events with the same key: first index -> last index.
template <typename Key>
std::map<size_t, size_t> Runs(const std::vector<const StepEvent*>& events, Key key) {
  std::map<size_t, size_t> runs;
  for (size_t i = 0; i < events.size();) {
    size_t j = i;
    while (j + 1 < events.size() && key(*events[j + 1]) == key(*events[i])) ++j;
    runs.emplace(i, j);
    i = j + 1;
  }
  return runs;
}

// The compute track: its events nested in task spans ("forward mb 3") and layer spans ("L5 bwd"), each parent
// written before its first child.
void AppendComputeTrack(const std::vector<const StepEvent*>& compute, int pid, int64_t offset_ns,
                        nlohmann::json& events) {
  const auto tasks = Runs(compute, [](const StepEvent& e) { return TaskName(e); });
  const auto layers = Runs(compute, [](const StepEvent& e) { return std::make_pair(TaskName(e), e.layer); });
  const int tid = TrackOf(StepEvent::Stream::kCompute);
  auto span = [&](const std::string& name, std::string_view cat, size_t first, size_t last) {
    events.push_back(Complete(name, cat, pid, tid, offset_ns + Nanoseconds(compute[first]->start),
                              offset_ns + Nanoseconds(compute[last]->end), nlohmann::json::object()));
  };
  for (size_t i = 0; i < compute.size(); ++i) {
    const StepEvent& e = *compute[i];
    if (auto t = tasks.find(i); t != tasks.end()) span(TaskName(e), "task", i, t->second);
    if (auto l = layers.find(i); l != layers.end() && e.layer >= 0)
      span(fmt::format("L{} {}", e.layer, e.phase == "forward" ? "fwd" : "bwd"), "layer", i, l->second);
    events.push_back(Complete(StepEventName(e), StepEventKindName(e.kind), pid, tid,
                              offset_ns + Nanoseconds(e.start), offset_ns + Nanoseconds(e.end), EventArgs(e)));
  }
}

void AppendScheduleProcess(const WorkloadResult& r, const StepDeviceSchedule& d, int pid, int64_t offset_ns,
                           nlohmann::json& events) {
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                    {"args", {{"name", fmt::format("{}: stage {} (device {}, mesh position {}), simulated step",
                                                   r.name, d.stage, d.device_id, d.position)}}}});
  events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                    {"args", {{"sort_index", pid}}}});
  const std::pair<StepEvent::Stream, const char*> tracks[] = {
      {StepEvent::Stream::kCompute, "compute stream (ops, exposed communication, bubble, host launch waits)"},
      {StepEvent::Stream::kCollectives0, "collectives stream 0 (tensor, expert, synchronous data)"},
      {StepEvent::Stream::kCollectives1, "collectives stream 1 (gradient reduction, ring attention, ZeRO-3 gathers)"},
      {StepEvent::Stream::kSends, "pipeline sends"}};
  for (const auto& [stream, name] : tracks) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", TrackOf(stream)},
                      {"args", {{"name", name}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", TrackOf(stream)},
                      {"args", {{"sort_index", TrackOf(stream)}}}});
  }
  std::vector<const StepEvent*> compute;
  for (const StepEvent& e : d.events) {
    if (e.stream == StepEvent::Stream::kCompute) {
      compute.push_back(&e);
      continue;
    }
    events.push_back(Complete(StepEventName(e), StepEventKindName(e.kind), pid, TrackOf(e.stream),
                              offset_ns + Nanoseconds(e.start), offset_ns + Nanoseconds(e.end), EventArgs(e)));
  }
  AppendComputeTrack(compute, pid, offset_ns, events);
}

nlohmann::json ScheduleSummary(const WorkloadResult& r, const StepSchedule& s, int first_pid) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StepDeviceSchedule& d : s.devices) stages.push_back(d.stage);
  return {{"workload", r.name},
          {"micro_batches", s.micro_batches},
          {"micro_batches_shown", s.micro_batches_shown},
          {"first_pid", first_pid},
          {"stages_of_processes", stages},
          {"last_device", s.last_device}};
}

}  // namespace

nlohmann::json ChromeTrace(const Scenario& s, const std::vector<WorkloadResult>& results) {
  nlohmann::json events = nlohmann::json::array();
  const std::string topology = s.topology.topology->ToString();
  AppendDeviceTracks(s.mesh.mesh, topology, events);
  nlohmann::json model_steps = nlohmann::json::array();
  int next_pid = kTraceFirstModelPid;
  double sim_offset = 0, wall_offset = 0;  // microseconds
  for (const WorkloadResult& r : results) {
    const auto [sim_end, wall_end] = AppendStepEvents(r, sim_offset, wall_offset, events);
    if (AppendStreamProcess(r, next_pid, sim_offset, events)) ++next_pid;
    const std::shared_ptr<const StepSchedule> schedule = r.model_step ? r.model_step->schedule : nullptr;
    if (schedule != nullptr) {
      model_steps.push_back(ScheduleSummary(r, *schedule, next_pid));
      for (const StepDeviceSchedule& d : schedule->devices)
        AppendScheduleProcess(r, d, next_pid++, Nanoseconds(sim_offset * 1e-6), events);
    }
    const std::vector<int>& ids = s.mesh.mesh.device_ids();
    const int track = ids.empty() ? 0 : ids[0];
    const nlohmann::json args = {{"kind", std::string(WorkloadKindName(r.kind))},
                                 {"predicted_seconds", r.totals.predicted_seconds}};
    for (const auto& [pid, start, dur] : {std::tuple{kTraceSimulatedPid, sim_offset, sim_end},
                                          std::tuple{kTraceWallPid, wall_offset, wall_end}}) {
      events.push_back({{"name", fmt::format("workload {}", r.name)}, {"cat", "workload"}, {"ph", "X"},
                        {"pid", pid}, {"tid", track}, {"ts", start}, {"dur", dur}, {"args", args}});
    }
    sim_offset += sim_end;
    wall_offset += wall_end;
  }
  nlohmann::json other = {{"scenario", s.name}, {"topology", topology}};
  if (!model_steps.empty()) other["model_steps"] = model_steps;
  return {{"traceEvents", events}, {"displayTimeUnit", "ns"}, {"otherData", other}};
}

}  // namespace spmdsim
