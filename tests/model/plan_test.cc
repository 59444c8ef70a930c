#include "model/plan.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/strings.h"
#include "mesh/mesh_utils.h"
#include "scenario/run.h"
#include "scenario/scenario.h"
#include "tests/model/small_model.h"

namespace spmdsim {
namespace {

ModelConfig Small() { return testing_model::SmallModel(); }

std::shared_ptr<const Topology> Topo(const std::string& text) {
  return std::make_shared<const Topology>(Topology::Parse(text));
}

TEST(Plan, OneAndTwoThreadsGiveTheSameRanking) {
  PlanOptions one{.top = 20, .threads = 1};
  PlanOptions two{.top = 20, .threads = 2};
  const PlanResult a = PlanModel(Small(), Topo("dgx-h100:2"), one);
  const PlanResult b = PlanModel(Small(), Topo("dgx-h100:2"), two);
  ASSERT_EQ(a.best.size(), b.best.size());
  ASSERT_GT(a.best.size(), 5u);
  EXPECT_EQ(a.enumerated, b.enumerated);
  EXPECT_EQ(a.evaluated, b.evaluated);
  for (size_t i = 0; i < a.best.size(); ++i) {
    EXPECT_EQ(a.best[i].Describe(), b.best[i].Describe()) << i;
    EXPECT_EQ(a.best[i].step.step_seconds, b.best[i].step.step_seconds) << i;
  }
  for (size_t i = 1; i < a.best.size(); ++i) EXPECT_LE(a.best[i - 1].step.step_seconds, a.best[i].step.step_seconds);
}

// Every proposal, written out as a scenario, loads, fits and runs with exactly the predicted step.
TEST(Plan, EveryProposalRunsAsAScenarioAndFits) {
  ModelConfig model = Small();
  model.moe = {.experts = 8, .top_k = 2, .every = 2};
  const PlanResult r = PlanModel(model, Topo("dgx-h100:2"), {.global_batch = 64, .top = 8, .threads = 2});
  ASSERT_FALSE(r.best.empty());
  for (const PlanEntry& e : r.best) {
    const std::string text = ModelScenarioYaml("p", e.Describe(), "dgx-h100:2", e.mesh_axes, e.config());
    const Scenario s = ParseScenario(text, "plan.yaml");
    const std::vector<WorkloadResult> results = RunScenario(s, {.abstract = true});
    ASSERT_EQ(results.size(), 1u);
    ASSERT_TRUE(results[0].model_step.has_value()) << e.Describe();
    EXPECT_TRUE(results[0].memory.fits()) << e.Describe();
    EXPECT_DOUBLE_EQ(results[0].model_step->step_seconds, e.step.step_seconds) << e.Describe() << "\n" << text;
    EXPECT_LE(e.peak_bytes(), static_cast<double>(Topology::Parse("dgx-h100:2").memory_bytes()));
  }
}

// Layers that do not divide the stages: Megatron-Core's uneven stages (the embedding and loss counted as layers,
// or lighter first and last stages) are proposed, and experts are also spread over the tensor ranks; each such
// proposal runs as a scenario with the predicted step.
TEST(Plan, SearchesUnevenStagesAndExpertsOverTheTensorRanks) {
  int accounted = 0, first_last = 0, folded = 0;
  // 14 layers: 14 + 2 over 4, 8 or 16 stages; 11 layers: 6 / 5 over 2 stages, 3 / 3 x 3 / 2 over 4.
  for (int64_t layers : {14, 11}) {
    ModelConfig model = Small();
    model.layers = layers;
    model.moe = {.experts = 16, .top_k = 2, .every = 2};
    PlanOptions options{.global_batch = 64, .top = 100000, .threads = 2, .micro_batches = {1},
                        .virtual_stages = {2}, .recomputes = {Recompute::kNone}, .zero_stages = {1},
                        .max_context = 1, .search_placement = false};
    const PlanResult r = PlanModel(model, Topo("dgx-h100:2"), options);
    for (const PlanEntry& e : r.best) {
      const ModelParallelism& p = e.config().parallel;
      accounted += p.embedding_in_split ? 1 : 0;
      first_last += p.first_stage_layers >= 0 ? 1 : 0;
      folded += e.config().experts_over_tensor() ? 1 : 0;
      if (!p.embedding_in_split && p.first_stage_layers < 0 && !e.config().experts_over_tensor()) continue;
      const std::string text = ModelScenarioYaml("p", e.Describe(), "dgx-h100:2", e.mesh_axes, e.config());
      const std::vector<WorkloadResult> results = RunScenario(ParseScenario(text, "plan.yaml"), {.abstract = true});
      ASSERT_TRUE(results[0].model_step.has_value()) << e.Describe();
      EXPECT_DOUBLE_EQ(results[0].model_step->step_seconds, e.step.step_seconds) << e.Describe() << "\n" << text;
    }
  }
  EXPECT_GT(accounted, 0);
  EXPECT_GT(first_last, 0);
  EXPECT_GT(folded, 0);
}

TEST(Plan, SaysWhyNothingFits) {
  ModelConfig big = Small();
  big.d_model = 16384;
  big.heads = 128;
  big.kv_heads = 8;
  big.d_ff = 65536;
  big.layers = 128;
  const PlanResult r = PlanModel(big, Topo("dgx-h100:1"), {.threads = 2});
  EXPECT_TRUE(r.best.empty());
  EXPECT_EQ(r.evaluated, 0);
  EXPECT_GT(r.over_memory, 0);
  EXPECT_EQ(r.rejected_because.count("over 90% of the device memory (the headroom keeps 10% free) with every "
                                     "recompute / ZeRO option"), 1u);
  const PlanResult none = PlanModel(big, Topo("dgx-h100:1"), {.threads = 2, .memory_headroom = 0});
  EXPECT_EQ(none.rejected_because.count("over the device memory with every recompute / ZeRO option"), 1u);
}

// Llama-3-8B at seq 8192, global batch 64, on 16 H100: without headroom the fastest fills more than 90% of its
// 79.65 GiB; the default 10% keeps every proposal at most 90% full.
TEST(Plan, TheHeadroomKeepsItsShareOfMemoryFree) {
  ModelConfig llama = LlamaModel(4096, 32, 32, 8, 14336, 8192);
  llama.name = "llama3_8b";
  llama.vocab = 128256;
  llama.global_batch = 64;
  PlanOptions options{.top = 1000, .threads = 2, .micro_batches = {1, 2}, .virtual_stages = {2},
                      .search_placement = false};
  const double capacity = static_cast<double>(Topology::Parse("dgx-h100:2").memory_bytes());
  options.memory_headroom = 0;
  const PlanResult full = PlanModel(llama, Topo("dgx-h100:2"), options);
  ASSERT_FALSE(full.best.empty());
  EXPECT_GT(full.best.front().peak_bytes(), 0.9 * capacity);
  options.memory_headroom = 0.10;
  const PlanResult kept = PlanModel(llama, Topo("dgx-h100:2"), options);
  ASSERT_FALSE(kept.best.empty());
  for (const PlanEntry& e : kept.best) EXPECT_LE(e.peak_bytes(), 0.9 * capacity) << e.Describe();
  EXPECT_GE(kept.best.front().step.step_seconds, full.best.front().step.step_seconds);
  EXPECT_DOUBLE_EQ(kept.memory_headroom, 0.10);
  EXPECT_THROW(PlanModel(llama, Topo("dgx-h100:2"), {.memory_headroom = 1.0}), Error);
  EXPECT_THROW(PlanModel(llama, Topo("dgx-h100:2"), {.memory_headroom = -0.1}), Error);
}

// On a TPU torus an axis order that does not keep each physical axis whole is placed with
// allow_split_physical_axes, as JAX's create_device_mesh allows; the written scenario asks for it and runs the
// same step. Before, such layouts were counted as "no placement of the mesh on the topology".
TEST(Plan, PlacesTpuLayoutsBySplittingPhysicalAxes) {
  const auto v4 = Topo("tpu-v4:4x4x4");
  const PlanResult r = PlanModel(Small(), v4,
                                 {.top = 100000, .threads = 2, .micro_batches = {1}, .virtual_stages = {2}});
  EXPECT_GT(r.split_placements, 0);
  EXPECT_EQ(r.rejected_because.count("no placement of the mesh on the topology"), 0u);
  int checked = 0;
  for (const PlanEntry& e : r.best) {
    if (!e.split_physical_axes || checked >= 2) continue;
    ++checked;
    EXPECT_THROW(MakeDeviceMesh(v4, e.mesh_axes), Error) << e.Describe();  // JAX's default refuses it
    EXPECT_NO_THROW(MakeDeviceMesh(v4, e.mesh_axes, {}, {.allow_split_physical_axes = true}));
    const std::string text = ModelScenarioYaml("p", e.Describe(), "tpu-v4:4x4x4", e.mesh_axes, e.config(), "", true);
    EXPECT_THAT(text, ::testing::HasSubstr("allow_split_physical_axes: true"));
    const Scenario s = ParseScenario(text, "plan.yaml");
    const std::vector<WorkloadResult> results = RunScenario(s, {.abstract = true});
    ASSERT_TRUE(results.at(0).model_step.has_value());
    EXPECT_DOUBLE_EQ(results[0].model_step->step_seconds, e.step.step_seconds) << e.Describe();
  }
  EXPECT_EQ(checked, 2);
}

// Exact ties in step time rank the leaner configuration first, then keep enumeration order: before, they kept
// enumeration order alone, so a configuration using twice the memory could rank above an equally fast one.
TEST(Plan, RanksExactTiesByMemoryThenEnumerationOrder) {
  const PlanResult r = PlanModel(Small(), Topo("dgx-h100:2"), {.top = 100000, .threads = 2});
  ASSERT_GE(r.best.size(), 4u);
  for (size_t i = 1; i < r.best.size(); ++i) {
    const PlanEntry& a = r.best[i - 1];
    const PlanEntry& b = r.best[i];
    EXPECT_FALSE(PlanRanksBefore(b, a)) << i << ": " << b.Describe() << " ranks below " << a.Describe();
  }
  // Four entries (in this enumeration order) made to tie: 1.0 s at 50 GiB, 1.0 s at 20 GiB twice, 0.9 s at 80 GiB.
  std::vector<PlanEntry> entries;
  const std::vector<std::pair<double, double>> step_and_peak = {{1.0, 50}, {1.0, 20}, {1.0, 20}, {0.9, 80}};
  for (size_t i = 0; i < step_and_peak.size(); ++i) {
    PlanEntry e = r.best[i];
    e.step.step_seconds = step_and_peak[i].first;
    e.accounting.peak_bytes = step_and_peak[i].second * kGiB;
    entries.push_back(std::move(e));
  }
  std::vector<std::string> names;
  for (const PlanEntry& e : entries) names.push_back(e.Describe());
  std::stable_sort(entries.begin(), entries.end(), PlanRanksBefore);
  EXPECT_EQ(entries[0].Describe(), names[3]);  // the fastest
  EXPECT_EQ(entries[1].Describe(), names[1]);  // the ties: the leaner first, in enumeration order ...
  EXPECT_EQ(entries[2].Describe(), names[2]);
  EXPECT_EQ(entries[3].Describe(), names[0]);  // ... and the one with the most memory last
  EXPECT_FALSE(PlanRanksBefore(entries[1], entries[2]));
  EXPECT_FALSE(PlanRanksBefore(entries[2], entries[1]));
}

TEST(Plan, RejectsBadOptions) {
  EXPECT_THROW(PlanModel(Small(), Topo("dgx-h100:1"), {.top = 0}), Error);
  EXPECT_THROW(PlanModel(Small(), Topo("dgx-h100:1"), {.threads = -1}), Error);
  EXPECT_THROW(PlanModel(Small(), nullptr, {}), Error);
}

}  // namespace
}  // namespace spmdsim
