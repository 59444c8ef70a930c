// What `spmdsim run` prints: the human report (tables with units in every header) and the same as JSON
// (docs/scenarios.md, "Output", documents every field).
//
// Example (human, the mlp workload of scenarios/cpu8-quick.yaml, mesh data=2 x model=4; columns shortened):
//   == workload tp_mlp (mlp) ==
//   step                   kind         op   axes  predicted [us]  compute [us]  comm [us]  ...  flops [GFLOP]  count
//   fwd/h               compute     einsum      -           0.488         0.488          0  ...      1.638e-05      1
//   fwd/out          collective       psum  model           0.493             0      0.493  ...              0      1
//   ...
//   peak memory per device: max 23.00KiB on device 0, min 23.00KiB on device 0, capacity 16.00GiB: fits
//   check: PASSED (max abs error 2.86e-06, max rel error 0.000234; rtol 0.001, atol 0.001); ...
#ifndef SPMDSIM_SCENARIO_REPORT_H_
#define SPMDSIM_SCENARIO_REPORT_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/exit_code.h"
#include "model/validation_band.h"
#include "scenario/scenario.h"
#include "workloads/workloads.h"

namespace spmdsim {

// "note: defaults applied (not in the file): activation: gelu, norm: layernorm\n" for a model's defaulted fields
// (ScenarioWorkload::model_defaults); "" when there are none.
std::string DefaultsNote(const std::vector<std::string>& defaults);

// The human report of one workload (several tables for sweeps and partitions); a model's lists its defaulted
// fields (DefaultsNote).
std::string HumanReport(const Scenario& scenario, const WorkloadResult& result);
// The header of the whole run: scenario, topology, mesh, mode.
std::string HumanHeader(const Scenario& scenario, bool abstract);
// The last line: "2 workloads, 2 checks passed, 0 failed, 1 not performed; predicted 1.2 ms; wall 0.3 s".
std::string HumanSummary(const std::vector<WorkloadResult>& results, double wall_seconds);

// The JSON report (schema in docs/scenarios.md).
nlohmann::json JsonReport(const Scenario& scenario, const std::vector<WorkloadResult>& results, bool abstract,
                          double wall_seconds, ExitCode exit_code);
nlohmann::json WorkloadJson(const WorkloadResult& result);
// A step's error band (model/validation_band.h) as model_step.validation and the plan's best[].validation hold
// it: class, rows, enforced_rows, min_gap / max_gap / mean_gap (null when rows is 0), source, text.
nlohmann::json ValidationBandJson(const ValidationBand& band);

// A step's name as the tables show it, at most `columns` wide: a long op_name scope keeps its first component and
// as many of its last ones as fit ("jit(step)/.../closed_call/checkpoint/bsd,dnh->bsnh").
std::string ShortStepName(const std::string& name, size_t columns = 64);

// True unless some performed check failed.
bool AllChecksPassed(const std::vector<WorkloadResult>& results);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_REPORT_H_
