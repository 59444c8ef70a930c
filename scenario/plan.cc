// PlanScenario and what `spmdsim plan` prints (scenario/plan.h).
#include "scenario/plan.h"

#include <cctype>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "common/error.h"
#include "common/strings.h"
#include "model/calibration.h"
#include "model/stack.h"
#include "scenario/calibration_file.h"
#include "scenario/report.h"

namespace spmdsim {
namespace {

// The calibration every configuration is predicted with: the options' profile, else the scenario's
// topology.calibration when its topology is planned on; either must fit the topology's devices and the model's
// stack.
StepCalibration PlanCalibration(const Scenario& s, const PlanScenarioOptions& o, const ModelConfig& model,
                                const Topology& topology) {
  std::optional<CalibrationProfile> profile;
  std::string name;
  if (!o.calibration.empty()) {
    profile = LoadCalibrationProfile(o.calibration);
    name = fmt::format("calibration profile {}", o.calibration);
  } else if (s.topology.calibration && o.topology.empty()) {
    profile = *s.topology.calibration;
    name = "the scenario's topology.calibration";
  }
  if (!profile) return {};
  CheckCalibrationFits(*profile, name, topology.device_kind(), ResolveStack(model.stack, topology));
  return profile->figures;
}

PlanOptions SearchOptions(const PlanScenarioOptions& o, const StepCalibration& calibration) {
  PlanOptions options;
  options.calibration = calibration;
  options.global_batch = o.global_batch;
  options.top = o.top;
  options.threads = o.threads;
  options.max_context = o.max_context;
  options.search_placement = o.search_placement;
  options.memory_headroom = o.memory_headroom;
  options.progress = o.progress;
  return options;
}

}  // namespace

ScenarioPlan PlanScenario(const Scenario& scenario, const PlanScenarioOptions& options) {
  ScenarioPlan plan;
  plan.model = FirstModelWorkload(scenario);
  for (const ScenarioWorkload& w : scenario.workloads) {
    if (w.kind != WorkloadKind::kModel) continue;
    plan.model_keys = w.model_keys;
    plan.model_defaults = w.model_defaults;
    break;
  }
  if (!options.stack.empty()) plan.model.stack = ParseStack(options.stack);
  plan.topology = options.topology.empty() ? scenario.topology.topology
                                           : std::make_shared<const Topology>(Topology::Parse(options.topology));
  plan.calibration = PlanCalibration(scenario, options, plan.model, *plan.topology);
  plan.result = PlanModel(plan.model, plan.topology, SearchOptions(options, plan.calibration));
  if (options.global_batch > 0) plan.model.global_batch = options.global_batch;
  if (options.record_best_schedule && !plan.result.best.empty()) {
    plan.best_schedule = std::make_shared<const ModelStepTimes>(PredictModelStep(
        plan.result.best.front().model, {.calibration = plan.calibration, .record_schedule = true}));
  }
  return plan;
}

std::string PlanReport(const PlanResult& r, const ModelConfig& model, const std::vector<std::string>& defaults) {
  std::string out = fmt::format(
      "plan {} on {} devices of {}; global batch {}: {} configurations, {} invalid or unplaceable, {} over memory, {} "
      "evaluated in {:.1f} s\n",
      model.name, r.devices, r.topology, model.global_batch, r.enumerated, r.invalid, r.over_memory, r.evaluated,
      r.wall_seconds);
  out += DefaultsNote(defaults);
  out += fmt::format("memory: at most {} of the {} per device ({:g}% kept free: --memory-headroom)\n",
                     HumanBytes(static_cast<int64_t>(r.capacity_bytes * (1 - r.memory_headroom))),
                     HumanBytes(static_cast<int64_t>(r.capacity_bytes)), 100 * r.memory_headroom);
  if (r.split_placements > 0)
    out += fmt::format("{} evaluated configurations placed with allow_split_physical_axes (a torus axis shared by mesh "
                       "axes)\n", r.split_placements);
  for (const auto& [reason, count] : r.rejected_because) out += fmt::format("  rejected {}: {}\n", count, reason);
  out += fmt::format("{:>4}  {:>10}  {:>12}  {:>6}  {:>10}  {:>10}  {:>10}  {}\n", "rank", "step", "tokens/s", "MFU",
                     "peak mem", "exposed", "bubble", "configuration (mesh axes in order, last fastest)");
  int rank = 0;
  for (const PlanEntry& e : r.best) {
    out += fmt::format("{:>4}  {:>10}  {:>12.4g}  {:>5.1f}%  {:>10}  {:>10}  {:>10}  {}\n", ++rank,
                       FormatSeconds(e.step.step_seconds), e.step.tokens_per_second, 100 * e.step.mfu,
                       HumanBytes(static_cast<int64_t>(e.peak_bytes())), FormatSeconds(e.step.exposed_comm_seconds),
                       FormatSeconds(e.step.bubble_seconds), e.Describe());
  }
  if (r.best.empty()) out += "no configuration fits: see the rejections above\n";
  rank = 0;
  for (const PlanEntry& e : r.best)
    out += fmt::format("error band (rank {}): {}\n", ++rank, ValidationBandText(e.step.validation));
  rank = 0;
  for (const PlanEntry& e : r.best) {
    ++rank;
    for (const std::string& w : e.step.warnings) out += fmt::format("WARNING (rank {}): {}\n", rank, w);
  }
  return out;
}

nlohmann::json PlanJson(const PlanResult& r) {
  nlohmann::json best = nlohmann::json::array();
  for (const PlanEntry& e : r.best) {
    nlohmann::json axes = nlohmann::json::array();
    for (const auto& [axis, size] : e.mesh_axes) axes.push_back({axis, size});
    const ModelParallelism& p = e.config().parallel;
    best.push_back({{"configuration", e.Describe()}, {"mesh_axes", axes},
                    {"micro_batch", e.config().micro_batch}, {"recompute", RecomputeName(e.config().recompute)},
                    {"zero_stage", p.zero_stage}, {"schedule", PipelineScheduleName(p.schedule)},
                    {"virtual_stages", p.virtual_stages}, {"sequence_parallel", p.sequence_parallel},
                    {"step_seconds", e.step.step_seconds}, {"tokens_per_second", e.step.tokens_per_second},
                    {"mfu", e.step.mfu}, {"peak_bytes", e.peak_bytes()},
                    {"exposed_comm_seconds", e.step.exposed_comm_seconds}, {"bubble_seconds", e.step.bubble_seconds},
                    {"sustained_fraction", e.step.sustained_fraction}, {"warnings", e.step.warnings},
                    {"split_physical_axes", e.split_physical_axes},
                    {"validation", ValidationBandJson(e.step.validation)}});
  }
  return {{"devices", r.devices}, {"topology", r.topology}, {"enumerated", r.enumerated}, {"invalid", r.invalid},
          {"over_memory", r.over_memory}, {"evaluated", r.evaluated}, {"rejected_because", r.rejected_because},
          {"memory_headroom", r.memory_headroom}, {"capacity_bytes", r.capacity_bytes},
          {"split_placements", r.split_placements},
          {"wall_seconds", r.wall_seconds}, {"best", best}};
}

std::string PlanFileName(const ScenarioPlan& plan) {
  const Topology& topology = *plan.topology;
  const std::string machine = topology.accelerator_type().empty() ? topology.ToString() : topology.accelerator_type();
  const std::string name = fmt::format("{}-{}-gb{}", plan.model.name, machine, plan.model.global_batch);
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') out += c;
    else if (c == ':' || c == ' ') out += (out.empty() || out.back() == '-') ? "" : "-";
  }
  return out + ".plan.yaml";
}

std::string PlanScenarioYaml(const ScenarioPlan& plan, const std::string& command) {
  SPMDSIM_CHECK(!plan.result.best.empty(), "PlanScenarioYaml: no configuration fits");
  const PlanEntry& best = plan.result.best.front();
  const Topology& topology = *plan.topology;
  std::string comment = fmt::format(
      "Written by `{}`.\nThe fastest configuration of {} on {}, {}: predicted {} per step, MFU {:.1f}%, peak memory "
      "{} of {} per device ({:g}% kept free).",
      command, best.config().name, topology.ToString(), topology.ChipCountText(),
      FormatSeconds(best.step.step_seconds), 100 * best.step.mfu, HumanBytes(static_cast<int64_t>(best.peak_bytes())),
      HumanBytes(topology.memory_bytes()), 100 * plan.result.memory_headroom);
  for (const std::string& w : best.step.warnings) comment += "\nWARNING: " + w;
  const std::string file = PlanFileName(plan);  // what the file describes
  const std::string name = file.substr(0, file.size() - std::string(".plan.yaml").size()) + "-plan";
  return ModelScenarioYaml(name, fmt::format("fastest configuration found by spmdsim plan: {}", best.Describe()),
                           topology.ToString(), best.mesh_axes, best.config(), comment, best.split_physical_axes,
                           plan.model_keys);
}

}  // namespace spmdsim
