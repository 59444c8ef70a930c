// spmdsim run FILE [--json OUT] [--trace OUT.json] [--html OUT.html] [--dump DIR] [--abstract] [--threads N]
//             [--quiet]
//
// Loads a scenario (scenario/scenario.h), runs it (scenario/run.h) and reports (scenario/report.h; --trace:
// scenario/trace.h; --html: scenario/html_report.h).
// Exit codes: 0 ok, 1 bad input, 2 usage, 3 internal error, 4 a numeric check failed (docs/scenarios.md).
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/strings.h"
#include "common/thread_annotations.h"
#include "scenario/dump.h"
#include "scenario/html_report.h"
#include "scenario/report.h"
#include "scenario/run.h"
#include "scenario/scenario.h"
#include "scenario/trace.h"
#include "sim/multiprocess.h"

namespace spmdsim::cli {
namespace {

struct RunFlags {
  std::string file;
  std::string json_path;
  std::string trace_path;
  std::string html_path;
  std::string dump_dir;
  bool abstract = false;
  int threads = 0;
  bool quiet = false;
  std::shared_ptr<ProcessGroup> processes;  // mpirun: every rank runs its devices; rank 0 reports
};

// A progress line on stderr, drawn only when stderr is a terminal and the run has lasted a second.
class Progress {
 public:
  Progress(bool enabled, size_t total) : enabled_(enabled && isatty(STDERR_FILENO)), total_(total) {
    if (enabled_) thread_ = std::thread([this] { Loop(); });
  }
  ~Progress() { Finish(); }
  void Set(size_t done, std::string current) {
    MutexLock lock(mu_);
    done_ = done;
    current_ = std::move(current);
  }
  // Erases the bar (if drawn), runs `print` (which writes the report), and lets the bar be drawn again.
  template <typename F>
  void Print(F print) {
    MutexLock lock(mu_);
    if (drawn_) fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
    print();
  }
  void Finish() {
    if (!enabled_) return;
    {
      MutexLock lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    MutexLock lock(mu_);
    if (drawn_) fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  void Loop() {
    auto start = std::chrono::steady_clock::now();
    MutexLock lock(mu_);
    while (!stop_) {
      lock.WaitFor(cv_, std::chrono::milliseconds(200));
      if (stop_) break;
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (elapsed < 1.0) continue;
      constexpr int kWidth = 30;
      int filled = total_ == 0 ? kWidth : static_cast<int>(kWidth * done_ / total_);
      std::string bar(filled, '=');
      bar.resize(kWidth, ' ');
      fmt::print(stderr, "\r\033[K[{}] {}/{} workloads  {}  {:.1f} s", bar, done_, total_, current_, elapsed);
      std::fflush(stderr);
      drawn_ = true;
    }
  }

  bool enabled_;
  size_t total_;
  size_t done_ SPMDSIM_GUARDED_BY(mu_) = 0;
  std::string current_ SPMDSIM_GUARDED_BY(mu_);
  bool stop_ SPMDSIM_GUARDED_BY(mu_) = false;
  bool drawn_ SPMDSIM_GUARDED_BY(mu_) = false;
  Mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

void WriteText(const std::string& path, const std::string& text) {
  if (path == "-") {
    fmt::print("{}", text);
    return;
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) Throw(ErrorCode::kInvalidArgument, "cannot write '{}'", path);
  out << text;
  if (!out) Throw(ErrorCode::kInvalidArgument, "failed writing '{}'", path);
}

// The command as typed (for the HTML report's header).
std::string CommandLine(const RunFlags& flags) {
  std::string out = "spmdsim run " + flags.file;
  if (flags.abstract) out += " --abstract";
  if (!flags.trace_path.empty()) out += " --trace " + flags.trace_path;
  return out + " --html " + flags.html_path;
}

ExitCode Run(const RunFlags& flags) {
  auto wall_start = std::chrono::steady_clock::now();
  Scenario s = LoadScenario(flags.file);
  if (flags.abstract && !flags.dump_dir.empty())
    Throw(ErrorCode::kInvalidArgument, "--dump writes array data, which --abstract does not compute; drop one of them");
  if (flags.threads < 0)
    Throw(ErrorCode::kInvalidArgument, "--threads must be >= 0 (0: one per core), got {}", flags.threads);

  ScenarioRunOptions options{.abstract = flags.abstract,
                             .num_threads = flags.threads,
                             .record_trace = !flags.trace_path.empty() || !flags.html_path.empty(),
                             .keep_arrays = !flags.dump_dir.empty(),
                             .process_group = flags.processes};
  // Several ranks: rank 0 prints and writes the reports and traces (assembled across ranks by the engines,
  // docs/multiprocess.md); every rank writes its part of --dump.
  const bool reporter = flags.processes == nullptr || flags.processes->rank() == 0;

  bool json_on_stdout = flags.json_path == "-";
  bool human = reporter && !flags.quiet && !json_on_stdout;
  if (human) fmt::print("{}", HumanHeader(s, flags.abstract));
  std::fflush(stdout);

  std::vector<WorkloadResult> results;
  {
    Progress progress(reporter && !flags.quiet, s.workloads.size());
    auto on_start = [&](size_t i, const ScenarioWorkload& w) { progress.Set(i, w.name); };
    auto on_done = [&](size_t, const WorkloadResult& result) {
      // Every rank writes what it owns: rank 0 the small arrays (gathered to it), each rank its blocks of the
      // large ones (scenario/dump.h).
      if (!flags.dump_dir.empty())
        DumpWorkload(flags.dump_dir, result, s.mesh.mesh, flags.processes == nullptr ? 0 : flags.processes->rank());
      if (human) {
        std::string report = HumanReport(s, result);
        progress.Print([&] {
          fmt::print("{}", report);
          std::fflush(stdout);
        });
      }
    };
    results = RunScenario(s, options, on_start, on_done);
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::vector<int64_t> rss;  // under mpirun: each rank's peak resident bytes
  if (flags.processes != nullptr) {
    // Each rank holds only its devices' buffers: its peak resident memory is the figure that must fit a host.
    struct rusage usage {};
    getrusage(RUSAGE_SELF, &usage);
    rss = flags.processes->AllGather(int64_t{usage.ru_maxrss} * 1024);
    if (human) {
      std::vector<std::string> parts;
      for (size_t r = 0; r < rss.size(); ++r) parts.push_back(fmt::format("rank {} {}", r, HumanBytes(rss[r])));
      fmt::print("peak RSS per rank ({} ranks): {}\n", rss.size(), fmt::join(parts, ", "));
    }
  }
  const ExitCode code = AllChecksPassed(results) ? ExitCode::kOk : ExitCode::kCheckFailed;
  if (human) fmt::print("{}", HumanSummary(results, wall));
  if (reporter && !flags.json_path.empty()) {
    nlohmann::json report = JsonReport(s, results, flags.abstract, wall, code);
    if (!rss.empty()) report["peak_rss_bytes_per_rank"] = rss;
    WriteText(flags.json_path, report.dump(2) + "\n");
  }
  if (reporter && !flags.trace_path.empty()) WriteText(flags.trace_path, ChromeTrace(s, results).dump() + "\n");
  if (reporter && !flags.html_path.empty()) WriteText(flags.html_path, RunHtmlReport(s, results, CommandLine(flags)));
  std::fflush(stdout);
  if (code != ExitCode::kOk) fmt::print(stderr, "spmdsim run: a numeric check failed (exit {})\n", ToInt(code));
  return code;
}

}  // namespace

void AddRunCommand(CLI::App& app, ExitCode& exit_code, std::shared_ptr<ProcessGroup> processes) {
  auto flags = std::make_shared<RunFlags>();
  flags->processes = std::move(processes);
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a scenario file: check each workload's numbers and predict its time on the topology "
             "(docs/scenarios.md). Exit 0 ok, 1 bad input, 2 usage, 3 internal error, 4 a check failed.");
  cmd->add_option("file", flags->file, "scenario YAML file")->required();
  cmd->add_option("--json", flags->json_path, "write the report as JSON to this file ('-': stdout, no human report)");
  cmd->add_option("--trace", flags->trace_path,
                  "write a Chrome/Perfetto trace (one track per device; simulated and wall clocks)");
  cmd->add_option("--html", flags->html_path,
                  "write a self-contained HTML report: step timeline per stage, memory, communication (no network)");
  cmd->add_option(
      "--dump", flags->dump_dir,
      "write every workload's global inputs and outputs as .npy files here (large ones as blocks, scenario/dump.h)");
  cmd->add_flag("--abstract", flags->abstract,
                "shapes and dtypes only: cost model and memory without arithmetic (no checks)");
  cmd->add_option("--threads", flags->threads, "worker threads of the simulator (0: one per core)")
      ->check(IntIn(0, std::numeric_limits<int>::max()));
  cmd->add_flag("--quiet", flags->quiet, "no human report and no progress bar; the exit code tells");
  cmd->callback([flags, &exit_code] { exit_code = Run(*flags); });
}

}  // namespace spmdsim::cli
