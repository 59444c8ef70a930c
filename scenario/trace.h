// Chrome / Perfetto trace-event JSON for `spmdsim run --trace OUT.json` (open it in ui.perfetto.dev or
// chrome://tracing). Format: the Trace Event Format's JSON object form ({"traceEvents": [...]}), complete
// events (ph "X") with ts/dur in microseconds, and metadata events (ph "M") naming processes and threads.
//
// Layout: process 1 "simulated clock (predicted on <topology>)" holds one track (thread) per device, tid =
// device id, named "device 5 (mesh position 3)"; its events are the steps on the device's simulated clock.
// Process 2 "wall clock (simulator on this machine)" has the same tracks with the wall-clock intervals.
// Workloads follow one another: workload k starts where workload k-1's latest clock ended, and a "workload"
// event on track 0 of each process spans it.
//
// Example: two devices, one step "fwd/matmul" from 0 to 1.5 us on both ->
//   {"name":"fwd/matmul","cat":"compute","ph":"X","pid":1,"tid":0,"ts":0,"dur":1.5,"args":{"workload":"mlp"}}
//   {"name":"fwd/matmul","cat":"compute","ph":"X","pid":1,"tid":1,"ts":0,"dur":1.5,...}
#ifndef SPMDSIM_SCENARIO_TRACE_H_
#define SPMDSIM_SCENARIO_TRACE_H_

#include <vector>

#include <nlohmann/json.hpp>

#include "scenario/scenario.h"
#include "workloads/workloads.h"

namespace spmdsim {

inline constexpr int kTraceSimulatedPid = 1;
inline constexpr int kTraceWallPid = 2;

// REQUIRES: each result's trace was recorded (WorkloadContext::record_trace); results without events add only
// their "workload" span.
nlohmann::json ChromeTrace(const Scenario& scenario, const std::vector<WorkloadResult>& results);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_TRACE_H_
