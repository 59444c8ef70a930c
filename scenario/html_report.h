// `spmdsim run --html OUT.html` and `spmdsim plan --html OUT.html`: one self-contained HTML page (inline SVG,
// CSS and script; nothing fetched from the network) to look at a run or a plan (docs/scenarios.md, docs/plan.md).
//
// A run's page has one section per workload. A model workload recorded with its schedule
// (ModelStepTimes::schedule) shows
//   - the step timeline per pipeline stage: the compute stream (forward, backward, recompute, head, optimizer),
//     its waits (exposed communication in red, pipeline bubble in grey) and each communication stream (by
//     kind), drawn pixel by pixel (each column shows what took most of its time; waits and communication as
//     the fraction of it; a tooltip names the ops), zoomable with Ctrl + mouse wheel;
//   - memory per device by category (parameters, gradients, optimizer, activations, communication) per stage,
//     against the device's capacity;
//   - communication by kind (tensor, data, pipeline, context, expert): hidden under compute and exposed.
// Other workloads show their steps per device on the simulated clock (WorkloadResult::trace), per-device peak
// memory against capacity and communication by mesh axis.
// A plan's page shows the step time vs peak memory of every evaluated configuration (PlanResult::points) with the
// `top` fastest marked and ranked, their table, and the fastest one's timeline, memory and communication.
//
// The script adds <div id="report-ready" data-figures="N"> once it has run (N: the <svg class="figure">
// elements), and <div id="report-error"> with the message if a script error occurs: a headless browser's
// --dump-dom tells whether the page loaded cleanly (tests/scenario/html_report_browser_test.sh).
// Thread safety: free functions over values.
#ifndef SPMDSIM_SCENARIO_HTML_REPORT_H_
#define SPMDSIM_SCENARIO_HTML_REPORT_H_

#include <string>
#include <vector>

#include "scenario/plan.h"
#include "scenario/scenario.h"
#include "workloads/workloads.h"

namespace spmdsim {

// The page of `spmdsim run`; `command` is shown as given (the command line that made it).
std::string RunHtmlReport(const Scenario& scenario, const std::vector<WorkloadResult>& results,
                          const std::string& command);

// The page of `spmdsim plan`; `command` is shown as given. The fastest configuration's section needs its step
// with the schedule (ScenarioPlan::best_schedule, PlanScenarioOptions::record_best_schedule): without it, or when
// nothing fits, the page has the scatter and the table only.
std::string PlanHtmlReport(const ScenarioPlan& plan, const std::string& command);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_HTML_REPORT_H_
