// spmdsim plan MODEL.yaml [--topology T] [--global-batch B] [--top N] [--json] [--write FILE] [--html OUT.html]
//                         [--threads N]
//
// Searches the parallel configurations of the first `kind: model` workload of a scenario file on a topology
// (the scenario's own unless --topology), ranks them by predicted step time (model/plan.h, docs/plan.md),
// prints the fastest N and writes the fastest as a ready-to-run scenario (--write; default
// <scenario name>.plan.yaml in the working directory, "" to skip) and, with --html, a page with the step time vs
// memory of every evaluated configuration and the fastest one's step (cli/html_report.h).
#include <unistd.h>

#include <cstdio>
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
#include "mesh/topology.h"
#include "scenario/report.h"
#include "scenario/scenario.h"
#include "model/plan.h"

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
};

void WriteScenario(const std::string& path, const Scenario& s, const std::string& topology, const PlanEntry& best) {
  const std::string text = ModelScenarioYaml(
      s.name + "-plan", fmt::format("fastest configuration found by spmdsim plan: {}", best.Describe()), topology,
      best.mesh_axes, best.config,
      fmt::format("Written by `spmdsim plan {}`: predicted {} per step, MFU {:.1f}%.", s.path,
                  FormatSeconds(best.step.step_seconds), 100 * best.step.mfu));
  std::ofstream out(path, std::ios::trunc);
  if (!out) Throw(ErrorCode::kInvalidArgument, "--write: cannot write '{}'", path);
  out << text;
  if (!out) Throw(ErrorCode::kInvalidArgument, "--write: failed writing '{}'", path);
}

// The fastest configuration simulated again with its schedule, and the page.
void WriteHtml(const PlanFlags& flags, const PlanResult& result, const ModelConfig& model, const Topology& topology) {
  std::optional<PlanWinner> winner;
  if (!result.best.empty()) {
    const ValidatedModel valid = ValidateModel(result.best.front().config, result.best.front().mesh);
    winner = PlanWinner{AccountModel(valid), PredictModelStep(valid, {.record_schedule = true})};
  }
  std::string command = "spmdsim plan " + flags.file;
  if (!flags.topology.empty()) command += " --topology " + flags.topology;
  if (flags.global_batch > 0) command += fmt::format(" --global-batch {}", flags.global_batch);
  command += " --html " + flags.html;
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
  std::string topology_text = flags.topology.empty() ? s.topology.topology->ToString() : flags.topology;
  auto topology = std::make_shared<const Topology>(Topology::Parse(topology_text));
  PlanOptions options;
  options.global_batch = flags.global_batch;
  options.top = flags.top;
  options.threads = flags.threads;
  options.max_context = flags.max_context;
  options.search_placement = !flags.no_placement;
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
    WriteHtml(flags, result, model, *topology);
    if (!flags.json) fmt::print("wrote the report to {}\n", flags.html);
  }
  const std::string path = flags.write == "\x01" ? s.name + ".plan.yaml" : flags.write;
  if (!path.empty() && !result.best.empty()) {
    WriteScenario(path, s, topology->ToString(), result.best.front());
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
                  "write the fastest configuration as a scenario here (default <name>.plan.yaml; '' to skip)");
  cmd->add_option("--html", flags->html,
                  "write a self-contained HTML report: step time vs memory of every configuration, the fastest's step");
  cmd->add_option("--threads", flags->threads, "worker threads (0: one per core)")
      ->check(IntIn(0, std::numeric_limits<int>::max()));
  cmd->add_option("--max-context", flags->max_context, "largest context-parallel degree searched (default 8)")
      ->check(IntIn(1, 1 << 20));
  cmd->add_flag("--no-placement", flags->no_placement,
                "keep Megatron's axis order (data, pipeline, context, tensor innermost) instead of searching it");
  cmd->callback([flags, &exit_code] { exit_code = Plan(*flags); });
}

}  // namespace spmdsim::cli
