#include "scenario/trace.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace spmdsim {

nlohmann::json ChromeTrace(const Scenario& s, const std::vector<WorkloadResult>& results) {
  nlohmann::json events = nlohmann::json::array();
  const Mesh& mesh = s.mesh.mesh;
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", kTraceSimulatedPid}, {"tid", 0},
                    {"args", {{"name", fmt::format("simulated clock (predicted on {})",
                                                   s.topology.topology->ToString())}}}});
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", kTraceWallPid}, {"tid", 0},
                    {"args", {{"name", "wall clock (simulator on this machine)"}}}});
  for (int pid : {kTraceSimulatedPid, kTraceWallPid}) {
    for (int64_t p = 0; p < mesh.size(); ++p) {
      int id = mesh.device_ids()[p];
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", id},
                        {"args", {{"name", fmt::format("device {} (mesh position {})", id, p)}}}});
      events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", id},
                        {"args", {{"sort_index", p}}}});
    }
  }
  double sim_offset = 0, wall_offset = 0;  // microseconds
  for (const WorkloadResult& r : results) {
    double sim_end = 0, wall_end = 0;
    for (const TraceEvent& e : r.trace) {
      double ts = sim_offset + e.sim_start * 1e6;
      double dur = std::max(0.0, (e.sim_end - e.sim_start) * 1e6);
      nlohmann::json args = {{"workload", r.name}, {"mesh_position", e.position}};
      events.push_back({{"name", e.name}, {"cat", std::string(StepKindName(e.kind))}, {"ph", "X"},
                        {"pid", kTraceSimulatedPid}, {"tid", e.device_id}, {"ts", ts}, {"dur", dur}, {"args", args}});
      double wts = wall_offset + e.wall_start * 1e6;
      double wdur = std::max(0.0, (e.wall_end - e.wall_start) * 1e6);
      events.push_back({{"name", e.name}, {"cat", std::string(StepKindName(e.kind))}, {"ph", "X"},
                        {"pid", kTraceWallPid}, {"tid", e.device_id}, {"ts", wts}, {"dur", wdur}, {"args", args}});
      sim_end = std::max(sim_end, e.sim_end * 1e6);
      wall_end = std::max(wall_end, e.wall_end * 1e6);
    }
    sim_end = std::max(sim_end, r.totals.predicted_seconds * 1e6);
    wall_end = std::max(wall_end, r.wall_seconds * 1e6);
    int track = mesh.device_ids().empty() ? 0 : mesh.device_ids()[0];
    nlohmann::json args = {{"kind", r.kind}, {"predicted_seconds", r.totals.predicted_seconds}};
    events.push_back({{"name", fmt::format("workload {}", r.name)}, {"cat", "workload"}, {"ph", "X"},
                      {"pid", kTraceSimulatedPid}, {"tid", track}, {"ts", sim_offset}, {"dur", sim_end},
                      {"args", args}});
    events.push_back({{"name", fmt::format("workload {}", r.name)}, {"cat", "workload"}, {"ph", "X"},
                      {"pid", kTraceWallPid}, {"tid", track}, {"ts", wall_offset}, {"dur", wall_end},
                      {"args", args}});
    sim_offset += sim_end;
    wall_offset += wall_end;
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ns"},
          {"otherData", {{"scenario", s.name}, {"topology", s.topology.topology->ToString()}}}};
}

}  // namespace spmdsim
