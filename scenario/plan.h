// Planning a scenario: the configuration search of model/plan.h (PlanModel) on the first `kind: model` workload
// of a scenario, with every option `spmdsim plan` takes, and what it prints. The CLI (cli/plan_command.cc) and
// Python's spmdsim.plan() both call PlanScenario, so `spmdsim plan --json` and spmdsim.plan() give the same JSON
// (docs/plan.md, docs/python.md).
//
// Example:
//   const Scenario s = LoadScenario("scenarios/llama3-8b-dgx-h100-16.yaml");
//   const ScenarioPlan plan = PlanScenario(s, {.global_batch = 64, .top = 3, .memory_headroom = 0.2});
//   PlanReport(plan);                 // the table `spmdsim plan` prints
//   PlanJson(plan.result).dump(2);    // what `spmdsim plan --json` prints (spmdsim.plan() returns it as a dict)
//   PlanScenarioYaml(plan, "spmdsim plan ...");  // the fastest as a ready-to-run scenario (`--write`)
//
// Calibration: every configuration is predicted with the figures of `calibration`'s profile, else of the
// scenario's `topology.calibration` when the topology planned on is the scenario's own (no `topology` option).
// Either must have been fitted on the topology's device kind and the planned model's stack (after `stack`):
// CheckCalibrationFits (model/calibration.h).
// Errors: Error(kInvalidArgument) for a scenario without a `kind: model` workload (FirstModelWorkload), an
// unknown topology preset or stack name, and PlanModel's option checks (a global batch < 0, top < 1, threads < 0,
// a headroom outside [0, 1)); LoadCalibrationProfile's errors for the profile file; Error(kFailedPrecondition)
// for a profile of another device kind or stack.
// Thread safety: PlanScenario may be called concurrently; `progress` as in PlanOptions.
#ifndef SPMDSIM_SCENARIO_PLAN_H_
#define SPMDSIM_SCENARIO_PLAN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mesh/topology.h"
#include "model/config.h"
#include "model/plan.h"
#include "model/step.h"
#include "scenario/scenario.h"

namespace spmdsim {

struct PlanScenarioOptions {
  // A topology preset or Cloud TPU accelerator type ("dgx-h100:16", "v5p-128"); empty: the scenario's own
  // topology object, its link, network and slice settings kept.
  std::string topology = "";
  int64_t global_batch = 0;       // sequences per step (0: the model's global_batch)
  int64_t top = 10;               // how many of the fastest to keep
  int threads = 0;                // worker threads (0: one per core)
  int64_t max_context = 8;        // the largest context-parallel degree searched
  bool search_placement = true;   // every order of the mesh axes; false: Megatron's order
  double memory_headroom = 0.10;  // the fraction of each device's memory left free, in [0, 1) (docs/plan.md)
  // The software stack the step is priced for: "auto", "megatron", "pytorch-fsdp", "maxtext"; empty: the
  // model's own `stack:`.
  std::string stack = "";
  // A calibration profile file of `spmdsim calibrate`; empty: the scenario's topology.calibration, if any, when
  // the topology is the scenario's.
  std::string calibration = "";
  // Simulate the fastest configuration once more with its schedule recorded (ScenarioPlan::best_schedule), for
  // the HTML page's timeline; the search itself records no schedules.
  bool record_best_schedule = false;
  // Called after each configuration with (done, total), from the workers, serialised.
  std::function<void(int64_t, int64_t)> progress = nullptr;
};

struct ScenarioPlan {
  // The model planned: the scenario's first `kind: model` workload with the options' stack and global batch.
  ModelConfig model;
  // That workload's key family (PlanScenarioYaml writes the model in it) and the fields it left to their
  // defaults (ScenarioWorkload::model_defaults; PlanReport lists them).
  ModelKeyFamily model_keys = ModelKeyFamily::kSpmdsim;
  std::vector<std::string> model_defaults;
  std::shared_ptr<const Topology> topology;  // the topology planned on
  StepCalibration calibration{};             // the figures every configuration was predicted with
  PlanResult result;
  // The fastest configuration's step with its schedule (PlanScenarioOptions::record_best_schedule; the same
  // step time as result.best.front().step); null otherwise or when nothing fits.
  std::shared_ptr<const ModelStepTimes> best_schedule;
};

// Plans `scenario`'s first `kind: model` workload (its parallel layout, micro-batch and recompute are what is
// searched) on the options' topology.
ScenarioPlan PlanScenario(const Scenario& scenario, const PlanScenarioOptions& options);

// The table `spmdsim plan` prints: the counts, the memory limit with its headroom, the rejections by reason, the
// fastest configurations, their warnings.
// `defaults`: the model's fields its file left to their defaults, listed in a note.
std::string PlanReport(const PlanResult& result, const ModelConfig& model,
                       const std::vector<std::string>& defaults = {});
inline std::string PlanReport(const ScenarioPlan& plan) {
  return PlanReport(plan.result, plan.model, plan.model_defaults);
}

// What `spmdsim plan --json` prints: {"devices", "topology", "enumerated", "invalid", "over_memory", "evaluated",
// "rejected_because", "memory_headroom", "capacity_bytes", "split_placements", "wall_seconds",
// "best": [{"configuration", "mesh_axes", "micro_batch", "recompute", "zero_stage", "schedule", "virtual_stages",
// "sequence_parallel", "step_seconds", "tokens_per_second", "mfu", "peak_bytes", "exposed_comm_seconds",
// "bubble_seconds", "sustained_fraction", "warnings", "split_physical_axes"}]}.
nlohmann::json PlanJson(const PlanResult& result);

// The file the fastest configuration is written to, named after what it describes: <model>-<machine>-gb<global
// batch>.plan.yaml ("llama3_8b-dgx-h100-2-gb64.plan.yaml", "llama3_8b-v5p-128-gb64.plan.yaml").
std::string PlanFileName(const ScenarioPlan& plan);

// The fastest configuration as a ready-to-run scenario whose first lines say `command` wrote it and what it is
// predicted to take. REQUIRES: !plan.result.best.empty().
std::string PlanScenarioYaml(const ScenarioPlan& plan, const std::string& command);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_PLAN_H_
