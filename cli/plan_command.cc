// spmdsim plan MODEL.yaml [--topology T] [--global-batch B] [--top N] [--json] [--write FILE] [--html OUT.html]
//                        [--threads N] [--max-context C] [--no-placement] [--memory-headroom H] [--stack S]
//                        [--calibration PROFILE]
//
// Searches the parallel configurations of the first `kind: model` workload of a scenario file on a topology
// (the scenario's own unless --topology), ranks them by predicted step time (model/plan.h, docs/plan.md),
// prints the fastest N and writes the fastest as a ready-to-run scenario (--write; default
// <model>-<topology>-gb<global batch>.plan.yaml in the working directory, named after what it describes; "" to
// skip), whose first lines hold the command that reproduces it, and, with --html, a page with the step time vs
// memory of every evaluated configuration and the fastest one's step (cli/html_report.h).
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/html_report.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "mesh/topology.h"
#include "scenario/report.h"
#include "scenario/scenario.h"
#include "model/plan.h"
#include "scenario/calibration_file.h"

namespace spmdsim::cli {
namespace {

struct PlanFlags {
  std::string file;
  std::string topology;
  int64_t global_batch = 0;
  int64_t top = 10;
  bool json = false;
  std::string write = "\x01";  // unset: <name>.plan.yaml
  std::string html;
  int threads = 0;
  int64_t max_context = 8;
  bool no_placement = false;
  std::string stack;        // empty: the scenario's
  std::string calibration;  // empty: the scenario's topology.calibration, if any
  std::string memory_headroom = "10%";
};

// "10%" -> 0.1, "0.1" -> 0.1: a percentage or a fraction, in [0, 1).
double ParseHeadroom(const std::string& text) {
  const std::string_view t = Trim(text);
  const bool percent = !t.empty() && t.back() == '%';
  double value = -1;
  try {
    size_t used = 0;
    const std::string number(percent ? t.substr(0, t.size() - 1) : t);
    value = std::stod(number, &used);
    if (used != number.size()) value = -1;
  } catch (const std::exception&) {
    value = -1;
  }
  if (percent) value /= 100;
  if (!(value >= 0 && value < 1))
    Throw(ErrorCode::kInvalidArgument,
          "--memory-headroom: {} is not a fraction of the device memory in [0, 1) or a percentage below 100%, e.g. "
          "0.1 or 10%", QuoteForError(text));
  return value;
}

// The file a plan is written to, named after what it describes: the model, the machine and the global batch
// ("llama3_8b-dgx-h100-2-gb64.plan.yaml", "llama3_8b-v5p-128-gb64.plan.yaml").
std::string PlanFileName(const ModelConfig& model, const Topology& topology) {
  const std::string machine = topology.accelerator_type().empty() ? topology.ToString() : topology.accelerator_type();
  std::string name = fmt::format("{}-{}-gb{}", model.name, machine, model.global_batch);
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') out += c;
    else if (c == ':' || c == ' ') out += (out.empty() || out.back() == '-') ? "" : "-";
  }
  return out + ".plan.yaml";
}

// The command that reproduces the plan, every option that decides the result spelled out (the topology is the
// scenario's unless --topology was given), without its output options.
std::string PlanCommandOptions(const PlanFlags& flags, int64_t global_batch, double headroom) {
  std::string out = fmt::format("spmdsim plan {}", flags.file);
  if (!flags.topology.empty()) out += fmt::format(" --topology {}", flags.topology);
  out += fmt::format(" --global-batch {} --memory-headroom {:g}%", global_batch, 100 * headroom);
  out += fmt::format(" --max-context {}", flags.max_context);
  if (flags.no_placement) out += " --no-placement";
  if (!flags.stack.empty()) out += fmt::format(" --stack {}", flags.stack);
  if (!flags.calibration.empty()) out += fmt::format(" --calibration {}", flags.calibration);
  return out;
}

void WriteScenario(const std::string& path, const std::string& command, const Topology& topology,
                   const PlanResult& result) {
  const PlanEntry& best = result.best.front();
  std::string comment = fmt::format(
      "Written by `{}`.\nThe fastest configuration of {} on {}, {}: predicted {} per step, MFU {:.1f}%, peak memory "
      "{} of {} per device ({:g}% kept free).",
      command, best.config.name, topology.ToString(), topology.ChipCountText(), FormatSeconds(best.step.step_seconds),
      100 * best.step.mfu, HumanBytes(static_cast<int64_t>(best.peak_bytes)), HumanBytes(topology.memory_bytes()),
      100 * result.memory_headroom);
  for (const std::string& w : best.step.warnings) comment += "\nWARNING: " + w;
  const std::string name = PlanFileName(best.config, topology);  // what the file describes
  const std::string text = ModelScenarioYaml(
      name.substr(0, name.size() - std::string(".plan.yaml").size()) + "-plan", fmt::format("fastest configuration found by spmdsim plan: {}", best.Describe()),
      topology.ToString(), best.mesh_axes, best.config, comment, best.split_physical_axes);
  std::ofstream out(path, std::ios::trunc);
  if (!out) Throw(ErrorCode::kInvalidArgument, "--write: cannot write '{}'", path);
  out << text;
  if (!out) Throw(ErrorCode::kInvalidArgument, "--write: failed writing '{}'", path);
}

// The calibration every configuration is predicted with: --calibration's profile (fitted on the topology's
// devices and the model's stack), else the scenario's topology.calibration when its topology is planned on.
StepCalibration PlanCalibration(const PlanFlags& flags, const Scenario& s, const ModelConfig& model,
                                const Topology& topology) {
  if (flags.calibration.empty())
    return s.topology.calibration && flags.topology.empty() ? s.topology.calibration->figures : StepCalibration{};
  const CalibrationProfile profile = LoadCalibrationProfile(flags.calibration);
  if (profile.device_kind != topology.device_kind())
    Throw(ErrorCode::kInvalidArgument, "--calibration: {} was fitted on {}, the topology's devices are {}",
          flags.calibration, profile.device_kind, topology.device_kind());
  if (profile.stack != ResolveStack(model.stack, topology))
    Throw(ErrorCode::kInvalidArgument, "--calibration: {} was fitted on stack {}, the model runs on {}",
          flags.calibration, StackName(profile.stack), StackName(ResolveStack(model.stack, topology)));
  return profile.figures;
}

// The fastest configuration simulated again with its schedule (and the plan's calibration), and the page.
void WriteHtml(const PlanFlags& flags, const PlanResult& result, const ModelConfig& model, const Topology& topology,
               const PlanOptions& options) {
  std::optional<PlanWinner> winner;
  if (!result.best.empty()) {
    const ValidatedModel valid = ValidateModel(result.best.front().config, result.best.front().mesh);
    winner = PlanWinner{AccountModel(valid),
                        PredictModelStep(valid, {.calibration = options.calibration, .record_schedule = true})};
  }
  const std::string command =
      PlanCommandOptions(flags, model.global_batch, options.memory_headroom) + " --html " + flags.html;
  const std::string page =
      PlanHtmlReport(result, model.name, topology.ToString(), command, winner ? &*winner : nullptr);
  std::ofstream out(flags.html, std::ios::trunc);
  if (!out) Throw(ErrorCode::kInvalidArgument, "--html: cannot write '{}'", flags.html);
  out << page;
  if (!out) Throw(ErrorCode::kInvalidArgument, "--html: failed writing '{}'", flags.html);
}

ExitCode Plan(const PlanFlags& flags) {
  const Scenario s = LoadScenario(flags.file);
  ModelConfig model = FirstModelWorkload(s);
  if (!flags.stack.empty()) model.stack = ParseStack(flags.stack);
  // The scenario's own topology object (its link, network and slice settings kept), or --topology's preset.
  const std::shared_ptr<const Topology> topology =
      flags.topology.empty() ? s.topology.topology : std::make_shared<const Topology>(Topology::Parse(flags.topology));
  PlanOptions options;
  options.calibration = PlanCalibration(flags, s, model, *topology);
  options.global_batch = flags.global_batch;
  options.top = flags.top;
  options.threads = flags.threads;
  options.max_context = flags.max_context;
  options.search_placement = !flags.no_placement;
  options.memory_headroom = ParseHeadroom(flags.memory_headroom);
  const bool bar = !flags.json && isatty(STDERR_FILENO);
  if (bar) {
    options.progress = [](int64_t done, int64_t total) {
      if (done % 16 != 0 && done != total) return;
      fmt::print(stderr, "\r\033[Kplan: {}/{} configurations", done, total);
      std::fflush(stderr);
    };
  }
  const PlanResult result = PlanModel(model, topology, options);
  if (bar) fmt::print(stderr, "\r\033[K");
  if (options.global_batch > 0) model.global_batch = options.global_batch;
  if (flags.json) {
    fmt::print("{}\n", PlanJson(result).dump(2));
  } else {
    fmt::print("{}", PlanReport(result, model));
  }
  if (!flags.html.empty()) {
    WriteHtml(flags, result, model, *topology, options);
    if (!flags.json) fmt::print("wrote the report to {}\n", flags.html);
  }
  const std::string path = flags.write == "\x01" ? PlanFileName(model, *topology) : flags.write;
  if (!path.empty() && !result.best.empty()) {
    WriteScenario(path, PlanCommandOptions(flags, model.global_batch, options.memory_headroom) + " --write " + path,
                  *topology, result);
    if (!flags.json) fmt::print("wrote the fastest configuration to {} (spmdsim run --abstract {})\n", path, path);
  }
  return ExitCode::kOk;
}

}  // namespace

void AddPlanCommand(CLI::App& app, ExitCode& exit_code) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Search the parallel configurations of a scenario's model workload on a topology and rank them by "
              "predicted step time (docs/plan.md)");
  cmd->add_option("file", flags->file, "scenario YAML file with a `kind: model` workload")->required();
  cmd->add_option("--topology", flags->topology, "topology preset (default: the scenario's), e.g. dgx-h100:16");
  cmd->add_option("--global-batch", flags->global_batch, "sequences per step (default: the model's global_batch)")
      ->check(IntIn(1, std::numeric_limits<int>::max()));
  cmd->add_option("--top", flags->top, "how many configurations to print (default 10)")->check(IntIn(1, 100000));
  cmd->add_flag("--json", flags->json, "print JSON instead of the table");
  cmd->add_option("--write", flags->write,
                  "write the fastest configuration as a scenario here (default <model>-<topology>-gb<batch>.plan.yaml; "
                  "'' to skip)");
  cmd->add_option("--memory-headroom", flags->memory_headroom,
                  "fraction of each device's memory a configuration must leave free, 0.1 or 10% (default 10%: what "
                  "the accounting leaves out, docs/plan.md)");
  cmd->add_option("--html", flags->html,
                  "write a self-contained HTML report: step time vs memory of every configuration, the fastest's step");
  cmd->add_option("--threads", flags->threads, "worker threads (0: one per core)")
      ->check(IntIn(0, std::numeric_limits<int>::max()));
  cmd->add_option("--max-context", flags->max_context, "largest context-parallel degree searched (default 8)")
      ->check(IntIn(1, 1 << 20));
  cmd->add_option("--stack", flags->stack,
                  "software stack the step is priced for: auto, megatron, pytorch-fsdp, maxtext (default: the "
                  "scenario's `stack:`, else auto: megatron on GPUs, maxtext on TPUs)");
  cmd->add_option("--calibration", flags->calibration,
                  "calibration profile of `spmdsim calibrate` (default: the scenario's topology.calibration)");
  cmd->add_flag("--no-placement", flags->no_placement,
                "keep Megatron's axis order (data, pipeline, context, tensor innermost) instead of searching it");
  cmd->callback([flags, &exit_code] { exit_code = Plan(*flags); });
}

}  // namespace spmdsim::cli
