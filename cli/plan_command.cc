// spmdsim plan MODEL.yaml [--topology T] [--global-batch B] [--top N] [--json] [--write FILE] [--html OUT.html]
//                        [--threads N] [--max-context C] [--no-placement] [--memory-headroom H] [--stack S]
//                        [--calibration PROFILE]
//
// Searches the parallel configurations of the first `kind: model` workload of a scenario file on a topology
// (the scenario's own unless --topology), ranks them by predicted step time (model/plan.h, docs/plan.md),
// prints the fastest N and writes the fastest as a ready-to-run scenario (--write; default
// <model>-<topology>-gb<global batch>.plan.yaml in the working directory, named after what it describes; "" to
// skip), whose first lines hold the command that reproduces it, and, with --html, a page with the step time vs
// memory of every evaluated configuration and the fastest one's step (scenario/html_report.h). The search, its
// calibration and what is printed are PlanScenario's (scenario/plan.h), which Python's spmdsim.plan() calls too.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "scenario/html_report.h"
#include "scenario/plan.h"
#include "scenario/scenario.h"

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

// Writes `text` to `path`; `flag` names the option in messages.
void WriteFile(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) Throw(ErrorCode::kInvalidArgument, "{}: cannot write '{}'", flag, path);
  out << text;
  if (!out) Throw(ErrorCode::kInvalidArgument, "{}: failed writing '{}'", flag, path);
}

PlanScenarioOptions OptionsOf(const PlanFlags& flags) {
  PlanScenarioOptions options;
  options.topology = flags.topology;
  options.global_batch = flags.global_batch;
  options.top = flags.top;
  options.threads = flags.threads;
  options.max_context = flags.max_context;
  options.search_placement = !flags.no_placement;
  options.memory_headroom = ParseHeadroom(flags.memory_headroom);
  options.stack = flags.stack;
  options.calibration = flags.calibration;
  options.record_best_schedule = !flags.html.empty();
  if (!flags.json && isatty(STDERR_FILENO)) {
    options.progress = [](int64_t done, int64_t total) {
      if (done % 16 != 0 && done != total) return;
      fmt::print(stderr, "\r\033[Kplan: {}/{} configurations", done, total);
      std::fflush(stderr);
    };
  }
  return options;
}

ExitCode Plan(const PlanFlags& flags) {
  const PlanScenarioOptions options = OptionsOf(flags);
  const ScenarioPlan plan = PlanScenario(LoadScenario(flags.file), options);
  if (options.progress) fmt::print(stderr, "\r\033[K");
  const std::string command = PlanCommandOptions(flags, plan.model.global_batch, options.memory_headroom);
  if (flags.json) {
    fmt::print("{}\n", PlanJson(plan.result).dump(2));
  } else {
    fmt::print("{}", PlanReport(plan));
  }
  if (!flags.html.empty()) {
    WriteFile(flags.html, PlanHtmlReport(plan, command + " --html " + flags.html), "--html");
    if (!flags.json) fmt::print("wrote the report to {}\n", flags.html);
  }
  const std::string path = flags.write == "\x01" ? PlanFileName(plan) : flags.write;
  if (!path.empty() && !plan.result.best.empty()) {
    WriteFile(path, PlanScenarioYaml(plan, command + " --write " + path), "--write");
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
