// The Chrome / Perfetto trace of a scenario (scenario/trace.h): the model workload's simulated step as one
// process per pipeline stage with a compute track and communication tracks, whose events add up to the report.
#include "scenario/trace.h"

#include <cmath>
#include <map>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "scenario/run.h"
#include "scenario/scenario.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

// An MLP, then a small Llama-style model on 2 pipeline stages x TP 4 + SP x DP 2 (ZeRO-1) on two DGX H100.
const std::string kScenario = R"y(name: traced
topology: {preset: "dgx-h100:2"}
mesh: {axes: {data: 2, pipe: 2, tensor: 4}}
workloads:
  - kind: mlp
    name: warmup
    batch: 4
    seq: 8
    d_model: 16
    d_ff: 32
    sharding: {batch_axes: [data], tensor_axes: [tensor]}
  - kind: model
    name: small
    vocab: 32000
    d_model: 1024
    layers: 4
    heads: 8
    kv_heads: 4
    d_ff: 2816
    activation: swiglu
    norm: rmsnorm
    position: rope
    seq: 1024
    global_batch: 16
    micro_batch: 1
    dtype: bfloat16
    parallel: {data_axes: [data], zero_stage: 1, tensor_axes: [tensor], sequence_parallel: true,
               pipeline_axes: [pipe]}
)y";

struct Traced {
  Scenario scenario;
  std::vector<WorkloadResult> results;
  nlohmann::json trace;  // parsed back from its text
};

Traced RunTraced() {
  Traced t{ParseScenario(kScenario, "traced.yaml"), {}, {}};
  t.results = RunScenario(t.scenario, {.abstract = true, .record_trace = true});
  t.trace = nlohmann::json::parse(ChromeTrace(t.scenario, t.results).dump());
  return t;
}

int64_t Ns(double microseconds) { return std::llround(microseconds * 1000); }

TEST(ChromeTrace, AModelWorkloadHasOneProcessPerStageWithItsStreams) {
  const Traced t = RunTraced();
  std::map<int, std::string> processes;
  std::map<int, std::set<int>> threads;
  for (const auto& e : t.trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[e["pid"]].insert(e["tid"].get<int>());
  }
  ASSERT_EQ(processes.size(), 4u);  // simulated clock, wall clock, stage 0, stage 1
  EXPECT_THAT(processes[kTraceFirstModelPid], HasSubstr("small: stage 0 (device 0, mesh position 0)"));
  EXPECT_THAT(processes[kTraceFirstModelPid + 1], HasSubstr("small: stage 1"));
  for (int pid : {kTraceFirstModelPid, kTraceFirstModelPid + 1})
    EXPECT_EQ(threads[pid], (std::set<int>{1, 2, 3, 4})) << pid;
  const auto& steps = t.trace["otherData"]["model_steps"];
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0]["micro_batches"], 8);
  EXPECT_EQ(steps[0]["micro_batches_shown"], 8);
}

TEST(ChromeTrace, TheLastStagesEventsAddUpToTheReportsBreakdown) {
  const Traced t = RunTraced();
  const ModelStepTimes& step = *t.results[1].model_step;
  const auto& summary = t.trace["otherData"]["model_steps"][0];
  EXPECT_EQ(summary["first_pid"], kTraceFirstModelPid);
  const int pid = summary["first_pid"].get<int>() + summary["last_device"].get<int>();
  std::map<std::pair<std::string, std::string>, double> sums;  // (cat, category) -> microseconds
  std::map<int, int64_t> counts;                                // tid -> events
  for (const auto& e : t.trace["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"] != pid || e["cat"] == "task" || e["cat"] == "layer") continue;
    sums[{e["cat"], e["args"]["category"]}] += e["dur"].get<double>();
    ++counts[e["tid"].get<int>()];
    // On the compute track: ops and waits; on the others: communication.
    EXPECT_EQ(e["tid"] == 1, e["cat"] != "communication") << e.dump();
  }
  const double tolerance = 1e-3 * static_cast<double>(counts[1] + counts[2] + counts[3] + counts[4]);  // 1 ns each
  auto near = [&](const std::string& cat, const std::string& category, double seconds) {
    EXPECT_NEAR(sums[std::make_pair(cat, category)], seconds * 1e6, tolerance) << cat << " " << category;
  };
  for (const auto& [phase, seconds] : step.compute_by_phase) near("compute", phase, seconds);
  for (const auto& [kind, seconds] : step.comm_by_kind) near("communication", kind, seconds);
  for (const auto& [kind, seconds] : step.exposed_by_kind) near("exposed", kind, seconds);
  near("bubble", "pipeline", step.bubble_seconds);
  EXPECT_GT(step.bubble_seconds, 0);  // two stages: the pipeline fills and drains
  EXPECT_GT(counts[2], 0);            // tensor collectives
  EXPECT_GT(counts[3], 0);            // gradient reduce-scatter
  EXPECT_GT(counts[4], 0);            // pipeline sends
}

// An eager stack (PyTorch FSDP) on tiny layers: the compute stream waits for the host to launch kernels, and the
// trace shows each wait before the op it launched, adding up to the report's host wait.
TEST(ChromeTrace, AnEagerStacksHostLaunchWaitsAreOnTheComputeTrack) {
  const Scenario s = ParseScenario(R"y(topology: {preset: "gpu:1x1"}
mesh: {axes: {data: 1}}
workloads:
  - {kind: model, name: tiny, vocab: 32000, d_model: 256, layers: 4, heads: 4, kv_heads: 4, d_ff: 512,
     activation: swiglu, norm: rmsnorm, position: rope, seq: 128, global_batch: 1, micro_batch: 1,
     stack: pytorch-fsdp, parallel: {data_axes: [data]}}
)y", "eager.yaml");
  const std::vector<WorkloadResult> results = RunScenario(s, {.abstract = true, .record_trace = true});
  const nlohmann::json trace = nlohmann::json::parse(ChromeTrace(s, results).dump());
  const ModelStepTimes& step = *results[0].model_step;
  ASSERT_GT(step.host_wait_seconds, 0);
  double waits = 0, compute = 0;
  int64_t events = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"] != kTraceFirstModelPid) continue;
    ++events;
    if (e["cat"] == "host wait") {
      EXPECT_EQ(e["tid"], 1) << e.dump();
      EXPECT_EQ(e["args"]["category"], "host") << e.dump();
      EXPECT_THAT(e["name"].get<std::string>(), HasSubstr("host launch wait: ")) << e.dump();
      waits += e["dur"].get<double>();
    }
    if (e["cat"] == "compute") compute += e["dur"].get<double>();
  }
  EXPECT_NEAR(waits, step.host_wait_seconds * 1e6, 1e-3 * static_cast<double>(events));
  EXPECT_NEAR(compute, step.compute_seconds * 1e6, 1e-3 * static_cast<double>(events));
}

TEST(ChromeTrace, ComputeEventsNestInTaskAndLayerSpansAfterThePreviousWorkload) {
  const Traced t = RunTraced();
  double model_start = 0;
  for (const auto& e : t.trace["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "workload small" && e["pid"] == kTraceSimulatedPid) model_start = e["ts"];
  EXPECT_GT(model_start, 0);  // after the MLP
  for (int pid : {kTraceFirstModelPid, kTraceFirstModelPid + 1}) {
    std::vector<std::pair<int64_t, int64_t>> open;  // the enclosing spans, innermost last
    std::set<std::string> layers;
    int64_t previous_end = 0;
    for (const auto& e : t.trace["traceEvents"]) {
      if (e["ph"] != "X" || e["pid"] != pid || e["tid"] != 1) continue;
      const int64_t start = Ns(e["ts"]), end = start + Ns(e["dur"]);
      EXPECT_GE(start, Ns(model_start));
      while (!open.empty() && start >= open.back().second) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(end, open.back().second) << e.dump();
      }
      if (e["cat"] == "task" || e["cat"] == "layer") {
        EXPECT_EQ(e["cat"] == "layer", open.size() == 1) << e.dump();  // a layer inside a task
        if (e["cat"] == "layer") layers.insert(e["name"]);
        open.emplace_back(start, end);
      } else {
        EXPECT_FALSE(open.empty()) << e.dump();  // in its task ("optimizer" too)
        EXPECT_GE(start, previous_end) << e.dump();  // one op after another
        previous_end = end;
      }
    }
    // Stage 0 holds layers 0 and 1, stage 1 layers 2 and 3.
    const int first = 2 * (pid - kTraceFirstModelPid);
    EXPECT_EQ(layers, (std::set<std::string>{fmt::format("L{} fwd", first), fmt::format("L{} bwd", first),
                                             fmt::format("L{} fwd", first + 1), fmt::format("L{} bwd", first + 1)}));
  }
}

// An hlo workload (a module the TPU compiler made): its events on the simulated device's streams, a process of their
// own, each with its class, op_name scope and bytes; collectives with their mesh axes and exposed time.
TEST(ChromeTrace, AnHloWorkloadHasItsDevicesStreamsAsTracksWithScopesAndBytes) {
  const std::string yaml =
      std::string("name: hlo trace\ntopology: {preset: 'tpu-v5e:4x4'}\nmesh: {axes: {data: 16}}\n") +
                           "workloads:\n  - kind: hlo\n    file: " + SPMDSIM_SOURCE_DIR +
                           "/tests/hlo/testdata/targets/tpu_v5e__mlp_dp.txt\n";
  const Scenario s = ParseScenario(yaml, "hlo.yaml");
  const nlohmann::json trace = ChromeTrace(s, RunScenario(s, {.abstract = true, .record_trace = true}));
  std::set<std::string> tracks;
  int collectives = 0, compute = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"].get<int>() >= kTraceFirstModelPid)
      tracks.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X" || !e.contains("cat")) continue;
    if (e["cat"] == "compute") {
      ++compute;
      EXPECT_TRUE(e["args"].contains("op_name scope"));
      EXPECT_TRUE(e["args"].contains("bytes"));
    } else if (e["cat"] == "collectives") {
      ++collectives;
      EXPECT_EQ(e["args"]["mesh axes"], "data");
      EXPECT_TRUE(e["args"].contains("exposed_seconds"));
    }
  }
  EXPECT_GT(compute, 0);
  EXPECT_GT(collectives, 0);
  EXPECT_EQ(tracks, (std::set<std::string>{"compute stream", "collectives stream", "network stream", "copies stream"}));
}

TEST(StepEventName, SaysWhereInTheStepAndWhat) {
  StepEvent e{.kind = StepEvent::Kind::kCompute, .category = "forward", .phase = "forward", .op = "qkv matmul",
              .layer = 5};
  EXPECT_EQ(StepEventName(e), "L5 fwd qkv matmul");
  e = {.stream = StepEvent::Stream::kCollectives0, .kind = StepEvent::Kind::kCommunication, .category = "tensor",
       .phase = "backward", .op = "all_reduce", .layer = 5};
  EXPECT_EQ(StepEventName(e), "L5 bwd tensor all_reduce");
  e = {.kind = StepEvent::Kind::kExposed, .category = "data", .phase = "optimizer", .op = "reduce_scatter"};
  EXPECT_EQ(StepEventName(e), "exposed data reduce_scatter (optimizer)");
  e = {.kind = StepEvent::Kind::kBubble, .category = "pipeline", .phase = "backward", .op = "receive gradients"};
  EXPECT_EQ(StepEventName(e), "bubble: receive gradients (bwd)");
}

}  // namespace
}  // namespace spmdsim
