// Running a parsed scenario: each workload handed to its engine (workloads/workloads.h) with one shared
// WorkloadContext built from the scenario (mesh, efficiency, stragglers) and the caller's options.
//
// Example:
//   Scenario s = LoadScenario("scenarios/cpu8-quick.yaml");
//   std::vector<WorkloadResult> results = RunScenario(s, {.abstract = true});
//   HumanReport(s, results[0]);   // scenario/report.h
//
// Errors: an engine's spmdsim::Error is rethrown with the same code and kind, its message prefixed with the
// workload's location and name ("cpu8.yaml:12:5: workload 'mlp' (mlp): ..."). A failed numeric check is not an
// error (WorkloadResult::check). Thread safety: as the engines (workloads/workloads.h).
#ifndef SPMDSIM_SCENARIO_RUN_H_
#define SPMDSIM_SCENARIO_RUN_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "scenario/scenario.h"
#include "workloads/workloads.h"

namespace spmdsim {

struct ScenarioRunOptions {
  bool abstract = false;      // shapes and dtypes only: cost model and memory, no arithmetic, no checks
  int num_threads = 0;        // simulator worker threads (0: one per core). REQUIRES: >= 0
  bool record_trace = false;  // keep per-device step events (WorkloadResult::trace); a model's schedule too
  bool keep_arrays = false;   // keep global inputs and outputs (WorkloadResult::inputs/outputs); real runs only
  // Several processes (sim/multiprocess.h): the ranks that share every workload's mesh. Default none.
  std::shared_ptr<ProcessGroup> process_group = nullptr;
};

// The context every workload of `scenario` runs with.
WorkloadContext ScenarioWorkloadContext(const Scenario& scenario, const ScenarioRunOptions& options);

// Runs one workload of `scenario` on its engine; a shard_map workload's inputs are made from the scenario's
// arrays first (abstract when context.abstract).
WorkloadResult RunScenarioWorkload(const Scenario& scenario, const ScenarioWorkload& workload,
                                   const WorkloadContext& context);

// Called after each workload with its index in Scenario::workloads and its result (e.g. to print it).
using WorkloadDone = std::function<void(size_t index, const WorkloadResult& result)>;
// Called before each workload.
using WorkloadStart = std::function<void(size_t index, const ScenarioWorkload& workload)>;

// Runs every workload in file order and returns their results in that order.
std::vector<WorkloadResult> RunScenario(const Scenario& scenario, const ScenarioRunOptions& options,
                                        const WorkloadStart& on_start = {}, const WorkloadDone& on_done = {});

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_RUN_H_
