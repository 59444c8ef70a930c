#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "cost/compute_model.h"
#include "cost/timeline.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "tests/model/small_model.h"
#include "model/model.h"
#include "model/validation.h"

namespace spmdsim {
namespace {

Mesh MeshOn(const std::string& topology, const std::vector<std::pair<std::string, int64_t>>& axes) {
  return MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse(topology)), axes);
}

// --- schedules ---

TEST(PipelineOrder, OneF1BWarmsUpThenAlternatesThenDrains) {
  const std::vector<PipelineTask> order = PipelineOrder(PipelineSchedule::k1F1B, 4, 0, 6, 1);
  std::string text;
  for (const PipelineTask& t : order) text += fmt::format("{}{} ", t.forward ? "F" : "B", t.micro_batch);
  EXPECT_EQ(text, "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  std::string last;
  for (const PipelineTask& t : PipelineOrder(PipelineSchedule::k1F1B, 4, 3, 3, 1))
    last += fmt::format("{}{} ", t.forward ? "F" : "B", t.micro_batch);
  EXPECT_EQ(last, "F0 B0 F1 B1 F2 B2 ");
}

TEST(PipelineOrder, EveryScheduleRunsEachChunkOfEachMicroBatchOnceEachWay) {
  for (PipelineSchedule s : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B}) {
    const int64_t p = 4, m = 8, v = s == PipelineSchedule::kInterleaved1F1B ? 3 : 1;
    for (int64_t stage = 0; stage < p; ++stage) {
      std::set<std::tuple<bool, int64_t, int64_t>> seen;
      std::map<std::pair<int64_t, int64_t>, int> forward_done;
      for (const PipelineTask& t : PipelineOrder(s, p, stage, m, v)) {
        EXPECT_TRUE(seen.insert({t.forward, t.micro_batch, t.chunk}).second);
        if (t.forward) forward_done[{t.micro_batch, t.chunk}] = 1;
        else EXPECT_EQ(forward_done.count({t.micro_batch, t.chunk}), 1u) << "backward before forward";
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(2 * m * v));
    }
  }
}

// The bubble of each schedule with unit task costs and free transfers: forward 1, backward 2 per stage (split
// over the v chunks): the step is (m + (p - 1) / v) (f + b), i.e. the published bubble (p - 1) / m and
// (p - 1) / (v m) (Narayanan et al. 2021).
double PipelineStep(PipelineSchedule s, int64_t p, int64_t m, int64_t v) {
  StepTimeline timeline(p, 0.0);
  const double f = 1.0 / v, b = 2.0 / v;
  const int64_t last = p * v - 1;
  auto tag = [&](bool forward, int64_t mb, int64_t vstage) { return ((forward ? 0 : 1) * m + mb) * p * v + vstage; };
  for (int64_t stage = 0; stage < p; ++stage) {
    std::vector<TimelineOp> ops;
    for (const PipelineTask& t : PipelineOrder(s, p, stage, m, v)) {
      const int64_t vs = t.chunk * p + stage;
      if (t.forward) {
        if (vs > 0) ops.push_back(TimelineOp::Recv((stage + p - 1) % p, tag(true, t.micro_batch, vs), 0));
        ops.push_back(TimelineOp::Compute(f, 0));
        if (vs < last) ops.push_back(TimelineOp::Send((stage + 1) % p, tag(true, t.micro_batch, vs + 1), 0, 0));
      } else {
        if (vs < last) ops.push_back(TimelineOp::Recv((stage + 1) % p, tag(false, t.micro_batch, vs), 0));
        ops.push_back(TimelineOp::Compute(b, 0));
        if (vs > 0) ops.push_back(TimelineOp::Send((stage + p - 1) % p, tag(false, t.micro_batch, vs - 1), 0, 0));
      }
    }
    timeline.SetProgram(stage, std::move(ops));
  }
  double end = 0;
  for (const DeviceTimes& d : timeline.Run()) end = std::max(end, d.end);
  return end;
}

TEST(PipelineOrder, SchedulesHaveThePublishedBubble) {
  for (auto [p, m] : {std::pair<int64_t, int64_t>{4, 8}, {8, 16}, {4, 4}, {2, 12}}) {
    const double ideal = 3.0 * m;
    EXPECT_NEAR(PipelineStep(PipelineSchedule::k1F1B, p, m, 1) / ideal - 1,
                PipelineBubbleFraction(PipelineSchedule::k1F1B, p, m, 1), 1e-9) << p << " " << m;
    EXPECT_NEAR(PipelineStep(PipelineSchedule::kGpipe, p, m, 1) / ideal - 1,
                PipelineBubbleFraction(PipelineSchedule::kGpipe, p, m, 1), 1e-9) << p << " " << m;
    for (int64_t v : {2, 3}) {
      EXPECT_NEAR(PipelineStep(PipelineSchedule::kInterleaved1F1B, p, m, v) / ideal - 1,
                  PipelineBubbleFraction(PipelineSchedule::kInterleaved1F1B, p, m, v), 1e-9)
          << p << " " << m << " " << v;
    }
  }
}

// --- the step ---

ModelConfig Small() { return testing_model::SmallModel(); }

struct Layout {
  std::string name;
  std::vector<std::pair<std::string, int64_t>> axes;
  ModelConfig config;
};

std::vector<Layout> Layouts() {
  std::vector<Layout> out;
  {
    Layout l{"dp2 x pp4 (1f1b) x tp8 + sp, zero 1", {{"data", 2}, {"pipe", 4}, {"tensor", 8}}, Small()};
    l.config.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                         .pipeline_axes = {"pipe"}};
    out.push_back(l);
  }
  {
    Layout l{"dp4 x pp4 interleaved 2 x tp4, selective", {{"data", 4}, {"pipe", 4}, {"tensor", 4}}, Small()};
    l.config.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .pipeline_axes = {"pipe"},
                         .schedule = PipelineSchedule::kInterleaved1F1B, .virtual_stages = 2};
    l.config.recompute = Recompute::kSelective;
    l.config.flash_attention = false;
    out.push_back(l);
  }
  {
    Layout l{"fsdp 16 x tp 4, full recompute", {{"data", 16}, {"tensor", 4}}, Small()};
    l.config.parallel = {.data_axes = {"data"}, .zero_stage = 3, .tensor_axes = {"tensor"}};
    l.config.recompute = Recompute::kFull;
    out.push_back(l);
  }
  {
    Layout l{"dp 2 x cp 2 x pp 2 gpipe x tp 8", {{"data", 2}, {"context", 2}, {"pipe", 2}, {"tensor", 8}}, Small()};
    l.config.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}, .context_axes = {"context"},
                         .pipeline_axes = {"pipe"}, .schedule = PipelineSchedule::kGpipe};
    out.push_back(l);
  }
  {
    Layout l{"moe: dp 8 with ep 8 x tp 8", {{"data", 8}, {"tensor", 8}}, Small()};
    l.config.moe = {.experts = 8, .top_k = 2, .capacity_factor = 1.25, .every = 2};
    l.config.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                         .expert_axes = {"data"}};
    out.push_back(l);
  }
  return out;
}

TEST(ModelStep, TheReducedSimulationEqualsTheFullOneOnEveryParallelism) {
  for (const Layout& l : Layouts()) {
    const Mesh mesh = MeshOn("dgx-h100:8", l.axes);
    const ModelStepTimes full = PredictModelStep(ValidateModel(l.config, mesh), {.reduced = false});
    const ModelStepTimes reduced = PredictModelStep(ValidateModel(l.config, mesh), {.reduced = true});
    EXPECT_EQ(full.simulated_devices, 64) << l.name;
    EXPECT_LT(reduced.simulated_devices, full.simulated_devices) << l.name;
    EXPECT_NEAR(reduced.step_seconds, full.step_seconds, 1e-12 * full.step_seconds) << l.name;
    EXPECT_NEAR(reduced.exposed_comm_seconds, full.exposed_comm_seconds, 1e-9 * full.step_seconds) << l.name;
    EXPECT_NEAR(reduced.bubble_seconds, full.bubble_seconds, 1e-9 * full.step_seconds) << l.name;
    EXPECT_GT(full.step_seconds, 0) << l.name;
  }
}

TEST(ModelStep, AStragglerIsSimulatedWithEveryDeviceAndSlowsTheStep) {
  const Layout l = Layouts()[0];
  const Mesh mesh = MeshOn("dgx-h100:8", l.axes);
  const ModelStepTimes even = PredictModelStep(ValidateModel(l.config, mesh));
  const ModelStepTimes slow = PredictModelStep(ValidateModel(l.config, mesh), {.speed_factors = {{mesh.DeviceAt(5), 0.5}}});
  EXPECT_EQ(even.simulated_devices, 4);   // one per pipeline stage
  EXPECT_EQ(slow.simulated_devices, 64);  // the fallback: devices are no longer interchangeable
  // Its tensor group waits for it at every collective; this small model is mostly communication (compute is a
  // fifth of the step, mostly under the collectives), so the step grows by part of the straggler's extra compute.
  EXPECT_GT(slow.compute_seconds, 1.9 * even.compute_seconds);  // the straggler's (the slowest device's) compute
  EXPECT_GT(slow.step_seconds, even.step_seconds + 0.02 * even.compute_seconds);
  EXPECT_THROW(PredictModelStep(ValidateModel(l.config, mesh), {.speed_factors = {{0, 0.0}}}), Error);
}

// A larger mesh (512 devices) for the reduced simulation.
TEST(ModelStep, TheReducedSimulationEqualsTheFullOneOnFiveHundredTwelveDevices) {
  ModelConfig c = Small();
  c.global_batch = 64;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 1, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .pipeline_axes = {"pipe"}, .schedule = PipelineSchedule::kInterleaved1F1B, .virtual_stages = 2};
  const Mesh mesh = MeshOn("dgx-h100:64", {{"data", 16}, {"pipe", 4}, {"tensor", 8}});
  const ModelStepTimes full = PredictModelStep(ValidateModel(c, mesh), {.reduced = false});
  const ModelStepTimes reduced = PredictModelStep(ValidateModel(c, mesh));
  EXPECT_EQ(full.simulated_devices, 512);
  EXPECT_EQ(reduced.simulated_devices, 4);
  EXPECT_NEAR(reduced.step_seconds, full.step_seconds, 1e-12 * full.step_seconds);
  EXPECT_NEAR(reduced.exposed_comm_seconds, full.exposed_comm_seconds, 1e-9 * full.step_seconds);
}

// Extending the line from two micro-batch counts gives the whole simulation's times.
TEST(ModelStep, MicroBatchExtrapolationEqualsTheWholeSimulation) {
  for (const Layout& l : Layouts()) {
    // 1020: micro-batch counts whose distance to m1 is not a multiple of p (where the schedule allows them).
    for (int64_t global_batch : {64, 256, 1024, 1020}) {
      ModelConfig c = l.config;
      c.global_batch = global_batch;
      const Mesh mesh = MeshOn("dgx-h100:8", l.axes);
      try {
        ValidateModel(c, mesh);
      } catch (const Error&) {
        continue;  // e.g. interleaved needs m % p == 0
      }
      const ModelStepTimes whole = PredictModelStep(ValidateModel(c, mesh), {.extrapolate = false});
      const ModelStepTimes line = PredictModelStep(ValidateModel(c, mesh), {.extrapolate = true});
      const std::string what = fmt::format("{}, global batch {}", l.name, global_batch);
      EXPECT_LE(line.timeline_ops, whole.timeline_ops) << what;
      EXPECT_NEAR(line.step_seconds, whole.step_seconds, 1e-9 * whole.step_seconds) << what;
      EXPECT_NEAR(line.compute_seconds, whole.compute_seconds, 1e-9 * whole.step_seconds) << what;
      EXPECT_NEAR(line.exposed_comm_seconds, whole.exposed_comm_seconds, 1e-9 * whole.step_seconds) << what;
      EXPECT_NEAR(line.bubble_seconds, whole.bubble_seconds, 1e-9 * whole.step_seconds) << what;
      for (const auto& [kind, seconds] : whole.comm_by_kind)
        EXPECT_NEAR(line.comm_by_kind.at(kind), seconds, 1e-9 * whole.step_seconds) << what << " " << kind;
    }
  }
}

// Overlap never makes a step slower than computing and communicating one after the other, nor faster than the
// busier of the two.
TEST(ModelStep, OverlapLiesBetweenTheSerialSumAndTheMaximum) {
  for (const Layout& l : Layouts()) {
    const Mesh mesh = MeshOn("dgx-h100:8", l.axes);
    const ModelStepTimes t = PredictModelStep(ValidateModel(l.config, mesh), {.comm_slowdown = 0});
    double comm = 0;
    for (const auto& [kind, seconds] : t.comm_by_kind) comm += seconds;
    EXPECT_LE(t.step_seconds, t.compute_seconds + comm + t.bubble_seconds + 1e-9) << l.name;
    // Tensor and expert collectives share one stream, data and context ones the other.
    const auto& k = t.comm_by_kind;
    const double busiest = std::max({t.compute_seconds, k.at("tensor") + k.at("expert"), k.at("data") + k.at("context")});
    EXPECT_GE(t.step_seconds, busiest - 1e-9) << l.name;
    EXPECT_NEAR(t.step_seconds, t.compute_seconds + t.exposed_comm_seconds + t.bubble_seconds,
                1e-6 * t.step_seconds) << l.name;
  }
}

TEST(ModelStep, RecomputeAndSlowdownCostTimeAndMoreMicroBatchesShrinkTheBubble) {
  const Mesh mesh = MeshOn("dgx-h100:4", {{"pipe", 4}, {"tensor", 8}});
  ModelConfig c = Small();
  c.parallel = {.tensor_axes = {"tensor"}, .sequence_parallel = true, .pipeline_axes = {"pipe"}};
  const ModelStepTimes none = PredictModelStep(ValidateModel(c, mesh));
  c.recompute = Recompute::kFull;
  const ModelStepTimes full = PredictModelStep(ValidateModel(c, mesh));
  EXPECT_GT(full.step_seconds, none.step_seconds);
  EXPECT_GT(full.compute_by_phase.at("recompute"), 0);
  EXPECT_NEAR(full.mfu * full.step_seconds, none.mfu * none.step_seconds, 1e-9);  // same model FLOPs
  c.recompute = Recompute::kNone;
  const ModelStepTimes fast = PredictModelStep(ValidateModel(c, mesh), {.comm_slowdown = 0});
  EXPECT_LT(fast.step_seconds, none.step_seconds);
  EXPECT_GT(none.comm_slowdown, 0);  // GPUs: NCCL's channels take SMs
  c.global_batch = 128;
  const ModelStepTimes more = PredictModelStep(ValidateModel(c, mesh));
  EXPECT_LT(more.bubble_seconds / more.step_seconds, none.bubble_seconds / none.step_seconds);
}

// Megatron 2022's blocking pipeline transfers: every schedule still finishes, the step is never faster than with
// eager sends, the reduced simulation and the micro-batch extrapolation stay exact.
TEST(ModelStep, BlockingPipelineTransfersCostTimeAndKeepTheSimulationExact) {
  for (const Layout& l : Layouts()) {
    if (l.config.parallel.pipeline_axes.empty()) continue;
    for (int64_t global_batch : {32, 256}) {
      ModelConfig c = l.config;
      c.global_batch = global_batch;
      const Mesh mesh = MeshOn("dgx-h100:8", l.axes);
      const std::string what = fmt::format("{}, global batch {}", l.name, global_batch);
      const ModelStepTimes eager = PredictModelStep(ValidateModel(c, mesh));
      const ModelStepTimes blocking = PredictModelStep(ValidateModel(c, mesh), {.blocking_p2p = true});
      EXPECT_GE(blocking.step_seconds, eager.step_seconds - 1e-12) << what;
      // The same work; no longer slowed by sends in flight under it.
      EXPECT_LE(blocking.compute_seconds, eager.compute_seconds + 1e-12) << what;
      EXPECT_GT(blocking.compute_seconds, 0.95 * eager.compute_seconds) << what;
      const ModelStepTimes full = PredictModelStep(ValidateModel(c, mesh), {.reduced = false, .blocking_p2p = true});
      EXPECT_NEAR(full.step_seconds, blocking.step_seconds, 1e-12 * full.step_seconds) << what;
      const ModelStepTimes whole = PredictModelStep(ValidateModel(c, mesh), {.extrapolate = false, .blocking_p2p = true});
      EXPECT_NEAR(whole.step_seconds, blocking.step_seconds, 1e-9 * whole.step_seconds) << what;
    }
  }
  // A pipeline whose transfers cross nodes: blocking exposes them.
  ModelConfig c = Small();
  c.global_batch = 64;
  c.parallel = {.tensor_axes = {"tensor"}, .sequence_parallel = true, .pipeline_axes = {"pipe"}};
  const Mesh mesh = MeshOn("dgx-h100:4", {{"pipe", 4}, {"tensor", 8}});
  EXPECT_GT(PredictModelStep(ValidateModel(c, mesh), {.blocking_p2p = true}).step_seconds, PredictModelStep(ValidateModel(c, mesh)).step_seconds);
}

// GQA / MQA: context parallelism moves only the kv_heads' keys and values (Megatron's kv_projection_size), so an
// 8-group model moves what an 8-head MHA model of the same head size does, whatever its query heads.
TEST(ModelStep, ContextParallelismMovesTheKeyAndValueHeadsOnly) {
  const Mesh mesh = MeshOn("dgx-h100:2", {{"context", 2}, {"tensor", 8}});
  auto context_comm = [&](int64_t heads, int64_t kv_heads) {
    ModelConfig c = Small();
    c.heads = heads;
    c.kv_heads = kv_heads;
    c.head_dim = 128;
    c.parallel = {.tensor_axes = {"tensor"}, .sequence_parallel = true, .context_axes = {"context"}};
    return PredictModelStep(ValidateModel(c, mesh)).comm_by_kind.at("context");
  };
  const double mha = context_comm(8, 8);
  EXPECT_GT(mha, 0);
  EXPECT_NEAR(context_comm(32, 8), mha, 1e-12 * mha);
  EXPECT_NEAR(context_comm(64, 8), mha, 1e-12 * mha);
  // MQA: its one K / V head is replicated over the 8 tensor ranks: one per rank, as MHA-8 has.
  EXPECT_NEAR(context_comm(32, 1), mha, 1e-12 * mha);
  EXPECT_GT(context_comm(32, 16), mha);  // two K / V heads per rank
}

// Rotary embedding rotates q (heads) and k (kv_heads), not v: its forward cost per layer and micro-batch is
// one memory-bound pass over T x (q + k) elements, read and written.
TEST(ModelStep, RotaryEmbeddingRotatesTheQueryAndKeyHeads) {
  const Mesh mesh = MeshOn("dgx-h100:1", {{"data", 8}});
  ModelConfig c = Small();  // GQA 16 heads / 4 KV heads of 128
  c.parallel = {.data_axes = {"data"}};
  const ModelStepOptions options{.comm_slowdown = 0};
  c.position = PositionEmbedding::kRope;
  const ModelStepTimes rope = PredictModelStep(ValidateModel(c, mesh), options);
  c.position = PositionEmbedding::kLearned;
  const ModelStepTimes learned = PredictModelStep(ValidateModel(c, mesh), options);
  const double tokens = static_cast<double>(c.micro_batch * c.seq);
  const double elements = 2 * tokens * (c.heads + c.kv_heads) * c.effective_head_dim();
  const double one = ComputeModel(*mesh.topology()).Cost(elements, elements * 2, ContractionDims{}, c.dtype).seconds;
  const double micro_batches = static_cast<double>(c.global_batch / (c.micro_batch * 8));
  const double expected = one * static_cast<double>(c.layers) * micro_batches;
  EXPECT_NEAR(rope.compute_by_phase.at("forward") - learned.compute_by_phase.at("forward"), expected, 1e-9 * expected);
}

// Without flash attention the core is Q K^T, Megatron's causal fused softmax and P V. The softmax kernel
// (scaled_upper_triang_masked_softmax) reads only the unmasked lower triangle of the scores and writes all of
// them: 1.5 passes over the scores forward.
TEST(ModelStep, NonFlashAttentionIsTwoMatmulsAndACausalSoftmax) {
  const Mesh mesh = MeshOn("dgx-h100:1", {{"data", 8}});
  ModelConfig c = Small();  // 16 heads of 128, seq 2048, no dropout
  c.parallel = {.data_axes = {"data"}};
  const ModelStepOptions options{.comm_slowdown = 0};
  const ModelStepTimes flash = PredictModelStep(ValidateModel(c, mesh), options);
  c.flash_attention = false;
  const ModelStepTimes plain = PredictModelStep(ValidateModel(c, mesh), options);
  const ComputeModel model(*mesh.topology());
  const int64_t b = c.micro_batch * c.heads, s = c.seq, d = c.effective_head_dim();
  const double size = 2, bd = static_cast<double>(b), sd = static_cast<double>(s), dd = static_cast<double>(d);
  const double qk = model.Cost(2 * bd * sd * dd * sd, bd * (sd * dd + dd * sd + sd * sd) * size, {b, s, s, d},
                               c.dtype).seconds;
  const double pv = model.Cost(2 * bd * sd * sd * dd, bd * (sd * sd + sd * dd + sd * dd) * size, {b, s, d, s},
                               c.dtype).seconds;
  const double scores = bd * sd * sd;
  const double softmax = model.Cost(1.5 * scores, 1.5 * scores * size, {}, c.dtype).seconds;
  const double fused = model.FlashAttention(c.micro_batch, c.heads, c.kv_heads, s, s, d, true, false, c.dtype).seconds;
  const double micro_batches = static_cast<double>(c.global_batch / (c.micro_batch * 8));
  const double expected = (qk + softmax + pv - fused) * static_cast<double>(c.layers) * micro_batches;
  EXPECT_NEAR(plain.compute_by_phase.at("forward") - flash.compute_by_phase.at("forward"), expected,
              1e-9 * std::fabs(expected));
}

// docs/model-validation.md is the table this computes, and every enforced row is within its tolerance.
TEST(ModelValidation, EveryEnforcedRowIsWithinItsToleranceAndDocumented) {
  const std::vector<ModelValidationRow> rows = ComputeModelValidationRows();
  ASSERT_GE(rows.size(), 15u);
  std::ifstream doc(std::string(SPMDSIM_SOURCE_DIR) + "/docs/model-validation.md");
  std::stringstream text;
  text << doc.rdbuf();
  for (const ModelValidationRow& row : rows) {
    if (row.enforced) {
      EXPECT_TRUE(row.within()) << row.name << ": gap " << row.gap();
    }
    EXPECT_THAT(text.str(), ::testing::HasSubstr(row.name)) << "docs/model-validation.md lacks a row";
  }
}

// --- the recorded schedule (ModelStepOptions::record_schedule) ---

// The schedule's events of one device summed per (stream kind, category).
std::map<std::pair<StepEvent::Kind, std::string>, double> SumsOf(const StepDeviceSchedule& d) {
  std::map<std::pair<StepEvent::Kind, std::string>, double> sums;
  for (const StepEvent& e : d.events) sums[{e.kind, std::string(e.category)}] += e.end - e.start;
  return sums;
}

// The schedule's events add up to the prediction's breakdown for the device that finishes last, every stream
// runs one thing at a time, and recording changes no time.
void ExpectScheduleMatches(const ModelStepTimes& t, const ModelStepTimes& plain, const std::string& what) {
  ASSERT_NE(t.schedule, nullptr) << what;
  EXPECT_EQ(plain.schedule, nullptr) << what;
  EXPECT_EQ(t.step_seconds, plain.step_seconds) << what;
  const StepSchedule& s = *t.schedule;
  const StepDeviceSchedule& last = s.devices.at(static_cast<size_t>(s.last_device));
  const auto sums = SumsOf(last);
  auto sum = [&](StepEvent::Kind kind, const std::string& category) {
    auto it = sums.find({kind, category});
    return it == sums.end() ? 0.0 : it->second;
  };
  const double tol = 1e-9 * t.step_seconds;
  EXPECT_NEAR(last.end_seconds, t.step_seconds, tol) << what;
  for (const auto& [phase, seconds] : t.compute_by_phase)
    EXPECT_NEAR(sum(StepEvent::Kind::kCompute, phase), seconds, tol) << what << " " << phase;
  for (const auto& [kind, seconds] : t.comm_by_kind) {
    EXPECT_NEAR(sum(StepEvent::Kind::kCommunication, kind), seconds, tol) << what << " " << kind;
    EXPECT_NEAR(sum(StepEvent::Kind::kExposed, kind), t.exposed_by_kind.at(kind), tol) << what << " " << kind;
  }
  EXPECT_NEAR(sum(StepEvent::Kind::kBubble, "pipeline"), t.bubble_seconds, tol) << what;
  for (const StepDeviceSchedule& d : s.devices) {
    std::map<StepEvent::Stream, double> free;
    for (const StepEvent& e : d.events) {
      EXPECT_GT(e.end, e.start) << what;
      if (e.stream == StepEvent::Stream::kCompute) {  // in program order, one after another
        EXPECT_GE(e.start, free[e.stream] - 1e-15) << what << " " << e.op;
        free[e.stream] = e.end;
      }
    }
  }
}

TEST(ModelStepSchedule, AddsUpToTheBreakdownOnEveryParallelism) {
  for (const Layout& l : Layouts()) {
    const Mesh mesh = MeshOn("dgx-h100:8", l.axes);
    const ValidatedModel model = ValidateModel(l.config, mesh);
    const ModelStepTimes plain = PredictModelStep(model);
    const ModelStepTimes recorded = PredictModelStep(model, {.record_schedule = true});
    ExpectScheduleMatches(recorded, plain, l.name);
    EXPECT_EQ(static_cast<int64_t>(recorded.schedule->devices.size()), recorded.simulated_devices) << l.name;
    EXPECT_EQ(recorded.schedule->micro_batches_shown, model.degrees().micro_batches) << l.name;
  }
}

TEST(ModelStepSchedule, NamesEveryOpByLayerPhaseAndMicroBatch) {
  const Layout l = Layouts()[1];  // pp 4 interleaved 2, selective recompute without flash attention
  const Mesh mesh = MeshOn("dgx-h100:8", l.axes);
  const ValidatedModel model = ValidateModel(l.config, mesh);
  const ModelStepTimes t = PredictModelStep(model, {.record_schedule = true});
  ASSERT_EQ(t.schedule->devices.size(), 4u);  // one per stage
  const int64_t m = model.degrees().micro_batches;
  for (const StepDeviceSchedule& d : t.schedule->devices) {
    // Layers of stage s with 2 chunks of 1 layer: s and 4 + s; each forward, backward and recompute once per
    // micro-batch.
    std::map<std::tuple<std::string, int32_t>, std::set<int32_t>> seen;  // (phase, layer) -> micro-batches
    for (const StepEvent& e : d.events) {
      if (e.kind != StepEvent::Kind::kCompute || e.layer < 0) continue;
      EXPECT_FALSE(e.op.empty());
      seen[{std::string(e.phase), e.layer}].insert(e.micro_batch);
      EXPECT_EQ(e.layer % 4, d.stage) << e.op;
      EXPECT_EQ(e.chunk, e.layer / 4) << e.op;
    }
    for (const std::string phase : {"forward", "backward", "recompute"})
      for (int32_t layer : {static_cast<int32_t>(d.stage), static_cast<int32_t>(4 + d.stage)})
        EXPECT_EQ(seen[std::make_tuple(phase, layer)].size(), static_cast<size_t>(m)) << phase << " L" << layer;
    bool optimizer = false, bubble = false;
    for (const StepEvent& e : d.events) {
      optimizer = optimizer || (e.kind == StepEvent::Kind::kCompute && e.phase == "optimizer" && e.op == "adamw");
      bubble = bubble || e.kind == StepEvent::Kind::kBubble;
    }
    EXPECT_TRUE(optimizer);
    EXPECT_TRUE(bubble) << "stage " << d.stage;  // a pipeline waits for its neighbours
  }
}

TEST(ModelStepSchedule, AnExtrapolatedStepIsShownWhole) {
  ModelConfig c = Layouts()[0].config;
  c.global_batch = 256;  // 128 micro-batches on 4 stages: the prediction extrapolates
  const Mesh mesh = MeshOn("dgx-h100:8", Layouts()[0].axes);
  const ValidatedModel model = ValidateModel(c, mesh);
  const ModelStepTimes plain = PredictModelStep(model);
  const ModelStepTimes recorded = PredictModelStep(model, {.record_schedule = true});
  EXPECT_LT(plain.timeline_ops, PredictModelStep(model, {.extrapolate = false}).timeline_ops);  // extrapolated
  ExpectScheduleMatches(recorded, plain, "extrapolated");
  EXPECT_EQ(recorded.schedule->micro_batches_shown, 128);
  EXPECT_EQ(recorded.schedule->micro_batches, 128);
}

}  // namespace
}  // namespace spmdsim
