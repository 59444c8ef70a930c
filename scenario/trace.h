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
// A model workload recorded with its schedule (ModelStepTimes::schedule) adds the simulated step: one process
// per simulated device (one per pipeline stage; pid kTraceFirstModelPid, +1, ...), named "<workload>: stage 1
// (device 8, mesh position 8), simulated step", each with four tracks:
//   tid 1  compute stream: every op ("L5 fwd qkv matmul", "bwd logits wgrad", "optimizer adamw"; cat "compute",
//          args.category its phase), the compute stream waiting for a collective ("exposed tensor all_reduce (L5
//          bwd)", cat "exposed") or for a pipeline receive ("bubble: receive activations (fwd)", cat "bubble"),
//          nested in task spans ("forward mb 3", "backward mb 3 chunk 1", "optimizer"; cat "task") and layer spans
//          ("L5 bwd"; cat "layer")
//   tid 2  collectives stream 0, tid 3 collectives stream 1, tid 4 pipeline sends: the communication
//          ("L5 bwd tensor all_reduce", "fwd send activations"; cat "communication", args.category its kind)
// Every op's args hold category, phase, op, layer and micro_batch (when it has them) and chunk (when > 0).
// Times are whole nanoseconds, so on each process the durations of one cat and args.category add up (within
// 1 ns per event) to the breakdown of ModelStepTimes (compute_by_phase, comm_by_kind, exposed_by_kind,
// bubble_seconds) for the device that finishes last. otherData.model_steps has one entry per such workload:
// first_pid (its processes are first_pid + 0, 1, ...), stages_of_processes, last_device (the index of the
// device that finishes last), micro_batches and micro_batches_shown (StepSchedule).
//
// Example: two devices, one step "fwd/matmul" from 0 to 1.5 us on both ->
//   {"name":"fwd/matmul","cat":"compute","ph":"X","pid":1,"tid":0,"ts":0,"dur":1.5,"args":{"workload":"mlp"}}
//   {"name":"fwd/matmul","cat":"compute","ph":"X","pid":1,"tid":1,"ts":0,"dur":1.5,...}
#ifndef SPMDSIM_SCENARIO_TRACE_H_
#define SPMDSIM_SCENARIO_TRACE_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario/scenario.h"
#include "workloads/workloads.h"

namespace spmdsim {

inline constexpr int kTraceSimulatedPid = 1;
inline constexpr int kTraceWallPid = 2;
inline constexpr int kTraceFirstModelPid = 3;

// The trace name of a simulated-step event: "L5 fwd qkv matmul", "L5 bwd tensor all_reduce",
// "exposed data reduce_scatter (optimizer)", "bubble: receive gradients (bwd)".
std::string StepEventName(const StepEvent& event);

// REQUIRES: each result's trace was recorded (WorkloadContext::record_trace); results without events add only
// their "workload" span.
nlohmann::json ChromeTrace(const Scenario& scenario, const std::vector<WorkloadResult>& results);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_TRACE_H_
