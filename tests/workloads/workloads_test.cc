#include "workloads/workloads.h"
#include "ops/random.h"

#include <cmath>
#include <memory>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/strings.h"
#include "cost/collective_model.h"
#include "cost/compute_model.h"
#include "cost/roofline.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "ops/ops.h"
#include "shardmap/shard_map.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

WorkloadContext Context(const std::string& topology, std::vector<std::pair<std::string, int64_t>> axes,
                        int threads = 2) {
  auto topo = std::make_shared<const Topology>(Topology::Parse(topology));
  WorkloadContext ctx;
  ctx.mesh = MakeDeviceMesh(topo, axes);
  ctx.runtime.num_threads = threads;
  return ctx;
}

const StepResult& StepNamed(const WorkloadResult& r, const std::string& name) {
  for (const StepResult& s : r.steps) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "no step " << name;
  static StepResult none;
  return none;
}

std::string ErrorMessage(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- collectives -------------------------------------------------------------------------------------------------

TEST(RunCollectives, EveryOpPassesItsDataCheckOnCpu8) {
  WorkloadContext ctx = Context("cpu:8", {{"x", 4}, {"y", 2}});
  CollectivesConfig c;
  c.ops = {"psum", "pmax", "pmean", "all_gather", "psum_scatter", "all_to_all", "ppermute"};
  c.axes = {{"x"}, {"y"}, {"x", "y"}};
  c.sizes = {256, 4096};
  c.iterations = 2;
  WorkloadResult r = RunCollectives(ctx, c);
  ASSERT_EQ(r.sweep.size(), 7u * 3 * 2);
  EXPECT_TRUE(r.check.performed);
  EXPECT_TRUE(r.check.passed);
  for (const SweepRow& row : r.sweep) {
    EXPECT_TRUE(row.check_passed) << row.op << " " << row.bytes;
    EXPECT_EQ(row.max_abs_error, 0) << row.op;
    EXPECT_GT(row.predicted_seconds, 0) << row.op;
    EXPECT_GT(row.measured_seconds, 0) << row.op;
  }
}

TEST(RunCollectives, SweepTotalsArePerIterationLikeThePredictedTotal) {
  WorkloadContext ctx = Context("cpu:8", {{"x", 4}, {"y", 2}});
  CollectivesConfig c;
  c.ops = {"psum", "all_gather"};
  c.axes = {{"x"}, {"x", "y"}};
  c.sizes = {4096};
  c.iterations = 3;
  WorkloadResult r = RunCollectives(ctx, c);
  double rows = 0;
  for (const SweepRow& row : r.sweep) rows += row.predicted_seconds;
  EXPECT_DOUBLE_EQ(r.totals.predicted_seconds, rows);
  // Every step is a collective: communication is the whole predicted time, on the same (one-iteration) basis.
  EXPECT_NEAR(r.totals.communication_seconds, r.totals.predicted_seconds, 1e-9 * rows);
  double by_axis = 0;
  for (const auto& [axis, seconds] : r.totals.communication_seconds_by_axis) by_axis += seconds;
  EXPECT_GT(by_axis, 0);
}

TEST(RunCollectives, PsumPredictionIsTheRingFormulaOnDgxH100) {
  WorkloadContext ctx = Context("dgx-h100:1", {{"tensor", 8}});
  ctx.cost.collectives.algorithm = Algorithm::kRing;
  CollectivesConfig c;
  c.ops = {"all_reduce"};
  c.sizes = {kGiB};
  c.iterations = 1;
  c.warmup = 0;
  ctx.abstract = true;  // 1 GiB per device: shapes only
  WorkloadResult r = RunCollectives(ctx, c);
  ASSERT_EQ(r.sweep.size(), 1u);
  // 0.8: the default NVLink efficiency.
  const double bandwidth = ctx.mesh.topology()->link(LinkClass::kNvlink).bandwidth_Bps * 0.8;
  const double s = static_cast<double>(kGiB);
  const double want = (8.4 + 14 * 3.4) * 1e-6 + 2.0 * 7 / 8 * s / bandwidth;  // NCCL ring / Simple latencies
  EXPECT_NEAR(r.sweep[0].predicted_seconds, want, want * 1e-12);
  EXPECT_EQ(r.sweep[0].algorithm, "ring");
  EXPECT_EQ(r.sweep[0].protocol, "simple");
  EXPECT_NEAR(r.sweep[0].predicted_busbw, s / want * 2 * 7 / 8, 1);
  EXPECT_FALSE(r.check.performed);
  EXPECT_EQ(r.sweep[0].op, "psum");
}

TEST(RunCollectives, AbstractRunPredictsTheSameAsTheRealRun) {
  WorkloadContext ctx = Context("tpu-v4:2x2x2", {{"data", 2}, {"model", 4}});
  CollectivesConfig c;
  c.ops = {"psum", "all_gather", "ppermute"};
  c.sizes = {1 << 12, 1 << 16};
  WorkloadResult real = RunCollectives(ctx, c);
  ctx.abstract = true;
  WorkloadResult abstract = RunCollectives(ctx, c);
  ASSERT_EQ(real.sweep.size(), abstract.sweep.size());
  for (size_t i = 0; i < real.sweep.size(); ++i) {
    EXPECT_DOUBLE_EQ(real.sweep[i].predicted_seconds, abstract.sweep[i].predicted_seconds);
    EXPECT_EQ(real.sweep[i].bytes, abstract.sweep[i].bytes);
  }
  EXPECT_EQ(real.memory.peak_bytes_max, abstract.memory.peak_bytes_max);
  EXPECT_DOUBLE_EQ(real.totals.predicted_seconds, abstract.totals.predicted_seconds);
}

// Abstract sweeps run no device (AbstractSweep): everything they report must be what the Runtime's run of the
// same sweep reports, bit for bit, with groups of different costs (a pod and a second slice over DCN), every op,
// warmup, several iterations, a dtype whose psum widens (bool -> int32) and the trace's simulated times.
TEST(RunCollectives, AbstractSweepReportsExactlyWhatTheRuntimeRunReports) {
  auto topo = std::make_shared<const Topology>(Topology::Parse("tpu-v4:2x2x2", 2));
  WorkloadContext ctx;
  ctx.mesh = MakeDeviceMesh(topo, {{"x", 2}, {"y", 4}, {"dcn", 1}}, {{"x", 1}, {"y", 1}, {"dcn", 2}});
  ctx.runtime.num_threads = 2;
  ctx.record_trace = true;
  for (DType dtype : {DType::kF32, DType::kBool}) {
    CollectivesConfig c;
    c.ops = {"psum", "pmean", "pmax", "all_gather", "psum_scatter", "all_to_all", "ppermute"};
    c.axes = {{"x"}, {"x", "y"}, {"dcn"}, {"x", "y", "dcn"}};
    c.sizes = {256, 1 << 16};
    c.dtype = dtype;
    c.iterations = 3;
    c.warmup = 2;
    c.check = false;
    ctx.abstract = false;
    const WorkloadResult real = RunCollectives(ctx, c);
    ctx.abstract = true;
    const WorkloadResult abstract = RunCollectives(ctx, c);
    ASSERT_EQ(real.sweep.size(), abstract.sweep.size());
    for (size_t i = 0; i < real.sweep.size(); ++i) {
      EXPECT_EQ(real.sweep[i].predicted_seconds, abstract.sweep[i].predicted_seconds) << i;
      EXPECT_EQ(real.sweep[i].predicted_busbw, abstract.sweep[i].predicted_busbw) << i;
      EXPECT_EQ(real.sweep[i].algorithm, abstract.sweep[i].algorithm) << i;
    }
    ASSERT_EQ(real.steps.size(), abstract.steps.size());
    for (size_t i = 0; i < real.steps.size(); ++i) {
      EXPECT_EQ(real.steps[i].name, abstract.steps[i].name);
      EXPECT_EQ(real.steps[i].count, abstract.steps[i].count);
      EXPECT_EQ(real.steps[i].predicted_seconds, abstract.steps[i].predicted_seconds) << real.steps[i].name;
      EXPECT_EQ(real.steps[i].communication_seconds, abstract.steps[i].communication_seconds) << real.steps[i].name;
      EXPECT_EQ(real.steps[i].bytes_by_link, abstract.steps[i].bytes_by_link) << real.steps[i].name;
    }
    EXPECT_EQ(real.totals.predicted_seconds, abstract.totals.predicted_seconds);
    EXPECT_EQ(real.totals.wait_seconds, abstract.totals.wait_seconds);
    EXPECT_EQ(real.memory.peak_bytes_per_position, abstract.memory.peak_bytes_per_position);
    EXPECT_EQ(real.memory.capacity_bytes, abstract.memory.capacity_bytes);
    ASSERT_EQ(real.trace.size(), abstract.trace.size());
    for (size_t i = 0; i < real.trace.size(); ++i) {
      EXPECT_EQ(real.trace[i].position, abstract.trace[i].position);
      EXPECT_EQ(real.trace[i].sim_start, abstract.trace[i].sim_start);
      EXPECT_EQ(real.trace[i].sim_end, abstract.trace[i].sim_end);
    }
  }
}

// A sweep the devices cannot run fails the same way with or without devices (device 0's error).
TEST(RunCollectives, AbstractSweepFailsAsTheRuntimeRunFails) {
  WorkloadContext ctx = Context("cpu:8", {{"x", 4}, {"y", 2}});
  CollectivesConfig c;
  c.ops = {"ppermute"};
  c.axes = {{"y", "x"}};  // not in mesh order: JAX's RuntimeError
  c.sizes = {1024};
  const std::string real = ErrorMessage([&] { RunCollectives(ctx, c); });
  ctx.abstract = true;
  EXPECT_EQ(ErrorMessage([&] { RunCollectives(ctx, c); }), real);
  EXPECT_THAT(real, HasSubstr("in the same order as the axis_names"));
  c.ops = {"all_gather"};
  c.axes = {{"x"}};
  c.sizes = {kMiB};
  ctx.runtime.device_memory_bytes = 2 * kMiB;  // the input (256 KiB) and one result (1 MiB) fit, two results do not
  ctx.abstract = false;
  const std::string full = ErrorMessage([&] { RunCollectives(ctx, c); });
  ctx.abstract = true;
  EXPECT_EQ(ErrorMessage([&] { RunCollectives(ctx, c); }), full);
  EXPECT_THAT(full, HasSubstr("RESOURCE_EXHAUSTED"));
}

// Iterations at their maximum on a pod would price 4096 x 10^6 device-iterations: refused before anything runs,
// naming the field and the range that fits.
TEST(RunCollectives, AbstractSweepRefusesMoreWorkThanItPricesInSeconds) {
  WorkloadContext ctx = Context("tpu-v4:16x16x16", {{"x", 16}, {"y", 16}, {"z", 16}});
  ctx.abstract = true;
  CollectivesConfig c;
  c.name = "pod";
  c.axes = {{"x"}};
  c.sizes = {1024};
  c.iterations = 1000000;
  EXPECT_EQ(ErrorMessage([&] { RunCollectives(ctx, c); }),
            "INVALID_ARGUMENT: collectives 'pod': iterations must be in [1, 16384] for an abstract sweep of 1 rows on "
            "4096 devices (it prices every iteration of every row for every device, at most 67108864 in all); got "
            "1000000");
  c.iterations = 2;
  EXPECT_EQ(RunCollectives(ctx, c).sweep.size(), 1u);
}

TEST(RunCollectives, SizesAreRoundedDownToWholeElementsPerMember) {
  WorkloadContext ctx = Context("cpu:8", {{"x", 4}, {"y", 2}});
  CollectivesConfig c;
  c.ops = {"all_gather", "psum_scatter", "psum"};
  c.axes = {{"x"}};
  c.sizes = {1000};
  c.iterations = 1;
  WorkloadResult r = RunCollectives(ctx, c);
  ASSERT_EQ(r.sweep.size(), 3u);
  EXPECT_EQ(r.sweep[0].bytes, 992);  // all_gather: S = output = 4 x 62 floats
  EXPECT_EQ(r.sweep[0].count, 62);
  EXPECT_EQ(r.sweep[1].bytes, 992);  // psum_scatter: S = input = 248 floats
  EXPECT_EQ(r.sweep[1].count, 248);
  EXPECT_EQ(r.sweep[2].bytes, 992);
  EXPECT_TRUE(r.check.passed);
}

TEST(RunCollectives, StepsCarryTheCollectiveModelsBreakdown) {
  WorkloadContext ctx = Context("dgx-h100:2", {{"data", 2}, {"tensor", 8}});
  CollectivesConfig c;
  c.axes = {{"data", "tensor"}};
  c.sizes = {kMiB};
  c.iterations = 1;
  WorkloadResult r = RunCollectives(ctx, c);
  ASSERT_EQ(r.steps.size(), 1u);
  CollectiveModel model(ctx.mesh);
  std::vector<std::string> axes = {"data", "tensor"};
  CollectiveCost want = model.Cost(CollectiveOp::kAllReduce, axes, kMiB);
  EXPECT_DOUBLE_EQ(r.steps[0].communication_seconds, want.seconds);
  EXPECT_EQ(r.steps[0].algorithm, want.algorithm);
  EXPECT_GT(r.steps[0].bytes_by_link.at("nvlink"), 0);
  EXPECT_GT(r.steps[0].bytes_by_link.at("infiniband"), 0);
  EXPECT_EQ(r.steps[0].kind, StepKind::kCollective);
  EXPECT_EQ(r.steps[0].group_size, 16);
}

TEST(RunCollectives, RejectsUnknownOpsAxesAndBadCounts) {
  WorkloadContext ctx = Context("cpu:8", {{"x", 8}});
  CollectivesConfig c;
  c.ops = {"allreduce_typo"};
  EXPECT_THROW(RunCollectives(ctx, c), Error);
  c.ops = {"psum"};
  c.axes = {{"z"}};
  EXPECT_THAT(ErrorMessage([&] { RunCollectives(ctx, c); }), HasSubstr("'z'"));
  c.axes = {};
  c.iterations = 0;
  EXPECT_THAT(ErrorMessage([&] { RunCollectives(ctx, c); }), HasSubstr("iterations"));
  c.iterations = 1;
  c.sizes = {0};
  EXPECT_THAT(ErrorMessage([&] { RunCollectives(ctx, c); }), HasSubstr("size 0"));
}

TEST(SweepSizes, DoublesFromMinToMax) {
  EXPECT_EQ(SweepSizes(8, 64), (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(SweepSizes(8, 100, 4), (std::vector<int64_t>{8, 32}));
  EXPECT_THROW(SweepSizes(0, 8), Error);
  EXPECT_THROW(SweepSizes(16, 8), Error);
  EXPECT_THROW(SweepSizes(1, 8, 1), Error);
}

// ---- shard_map programs -------------------------------------------------------------------------------------------

ShardMapConfig MegatronProgram(const std::string& reduce_axis) {
  ShardMapConfig p;
  p.name = "tp_mlp";
  p.inputs = {{"x", RandomArray({8, 16}, DType::kF32, 1), P("data")},
              {"w1", RandomArray({16, 32}, DType::kF32, 2, 0.25), P(kNone, "model")},
              {"w2", RandomArray({32, 16}, DType::kF32, 3, 0.25), P("model", kNone)}};
  ProgramStep h{.name = "h", .op = "einsum", .args = {"x", "w1"}, .equation = "bd,df->bf"};
  ProgramStep a{.name = "a", .op = "gelu", .args = {"h"}};
  ProgramStep z{.name = "z", .op = "matmul", .args = {"a", "w2"}};
  ProgramStep y{.name = "y", .op = "psum", .args = {"z"}, .axes = {reduce_axis}};
  p.steps = {h, a, z, y};
  p.outputs = {{"y", P("data")}};
  return p;
}

TEST(RunShardMapProgram, MegatronMlpMatchesTheOneDeviceProgram) {
  WorkloadContext ctx = Context("tpu-v4:2x2x2", {{"data", 2}, {"model", 4}});
  WorkloadResult r = RunShardMapProgram(ctx, MegatronProgram("model"));
  EXPECT_TRUE(r.check.performed);
  EXPECT_TRUE(r.check.passed) << r.check.values[0].worst;
  EXPECT_LT(r.check.max_abs_error, 1e-5);
  ASSERT_EQ(r.steps.size(), 4u);
  EXPECT_EQ(r.steps[3].kind, StepKind::kCollective);
  EXPECT_EQ(r.steps[3].axes, std::vector<std::string>{"model"});
  EXPECT_GT(r.steps[3].communication_seconds, 0);
  EXPECT_GT(r.steps[0].compute_seconds, 0);
  EXPECT_EQ(r.steps[0].communication_seconds, 0);
  EXPECT_GT(r.totals.predicted_seconds, 0);
  EXPECT_GT(r.memory.peak_bytes_max, 0);
}

TEST(RunShardMapProgram, PsumOverTheWrongAxisFailsTheCheck) {
  WorkloadContext ctx = Context("tpu-v4:2x2x2", {{"data", 2}, {"model", 4}});
  ShardMapConfig wrong = MegatronProgram("data");
  wrong.check_vma = false;  // the static check would refuse it before it runs
  WorkloadResult r = RunShardMapProgram(ctx, wrong);
  EXPECT_TRUE(r.check.performed);
  EXPECT_FALSE(r.check.passed);
  EXPECT_GT(r.check.max_abs_error, 1e-3);
  EXPECT_THAT(r.check.values[0].worst, HasSubstr("y["));
}

TEST(RunShardMapProgram, PsumOverTheWrongAxisIsRefusedByTheReplicationCheck) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 2}, {"model", 4}});
  EXPECT_THROW(RunShardMapProgram(ctx, MegatronProgram("data")), Error);
}

TEST(RunShardMapProgram, ComputeStepCostIsTheComputeModel) {
  WorkloadContext ctx = Context("tpu-v4:2x2x2", {{"data", 2}, {"model", 4}});
  WorkloadResult r = RunShardMapProgram(ctx, MegatronProgram("model"));
  // z = a @ w2 per device: [4, 8] x [8, 16] float32.
  const StepResult& z = StepNamed(r, "z");
  const double flops = 2.0 * 4 * 8 * 16;
  const double bytes = (4 * 8 + 8 * 16 + 4 * 16) * 4.0;
  ComputeModel compute(*ctx.mesh.topology());
  EXPECT_DOUBLE_EQ(z.flops, flops);
  EXPECT_DOUBLE_EQ(z.memory_bytes, bytes);
  EXPECT_DOUBLE_EQ(z.compute_seconds, compute.Cost(flops, bytes, {1, 4, 16, 8}, DType::kF32).seconds);
  // So small a matmul fills one 8 x 128 x 128 MXU tile: slower than the plain roofline's flops / peak.
  EXPECT_GT(z.compute_seconds, Roofline(*ctx.mesh.topology()).Cost(flops, bytes, DType::kF32).seconds);
  EXPECT_DOUBLE_EQ(z.predicted_seconds, z.compute_seconds);
  // The psum: the model's cost of a 4 x 16 float32 all-reduce over model.
  CollectiveModel model(ctx.mesh);
  std::vector<std::string> axes = {"model"};
  EXPECT_DOUBLE_EQ(StepNamed(r, "y").communication_seconds,
                   model.Cost(CollectiveOp::kAllReduce, axes, 4 * 16 * 4).seconds);
}

TEST(RunShardMapProgram, AStragglerSlowsItsComputeAndMakesOthersWait) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 2}, {"model", 4}});
  WorkloadResult base = RunShardMapProgram(ctx, MegatronProgram("model"));
  ctx.cost.speed_factors[0] = 0.5;
  WorkloadResult slow = RunShardMapProgram(ctx, MegatronProgram("model"));
  EXPECT_DOUBLE_EQ(StepNamed(slow, "h").compute_seconds, 2 * StepNamed(base, "h").compute_seconds);
  EXPECT_GT(slow.totals.wait_seconds, 0);
  EXPECT_EQ(base.totals.wait_seconds, 0);
  EXPECT_GT(slow.totals.predicted_seconds, base.totals.predicted_seconds);
}

TEST(RunShardMapProgram, AbstractModeGivesTheSamePredictionsAndMemory) {
  WorkloadContext ctx = Context("tpu-v4:2x2x2", {{"data", 2}, {"model", 4}});
  WorkloadResult real = RunShardMapProgram(ctx, MegatronProgram("model"));
  ctx.abstract = true;
  WorkloadResult abstract = RunShardMapProgram(ctx, MegatronProgram("model"));
  EXPECT_FALSE(abstract.check.performed);
  ASSERT_EQ(real.steps.size(), abstract.steps.size());
  for (size_t i = 0; i < real.steps.size(); ++i) {
    EXPECT_DOUBLE_EQ(real.steps[i].predicted_seconds, abstract.steps[i].predicted_seconds) << real.steps[i].name;
  }
  EXPECT_DOUBLE_EQ(real.totals.predicted_seconds, abstract.totals.predicted_seconds);
  EXPECT_EQ(real.memory.peak_bytes_per_position, abstract.memory.peak_bytes_per_position);
}

TEST(RunShardMapProgram, RecordsOneTraceEventPerDevicePerStep) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 2}, {"model", 4}});
  ctx.record_trace = true;
  ctx.keep_arrays = true;
  WorkloadResult r = RunShardMapProgram(ctx, MegatronProgram("model"));
  ASSERT_EQ(r.trace.size(), 8u * 4);
  for (const TraceEvent& e : r.trace) {
    EXPECT_LE(e.sim_start, e.sim_end);
    EXPECT_LE(e.wall_start, e.wall_end);
  }
  EXPECT_EQ(r.inputs.size(), 3u);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].second.shape(), (std::vector<int64_t>{8, 16}));
}

TEST(RunShardMapProgram, EveryOpRunsAndMatchesOneDevice) {
  WorkloadContext ctx = Context("cpu:8", {{"x", 4}, {"y", 2}});
  ShardMapConfig p;
  p.inputs = {{"a", RandomArray({8, 4}, DType::kF32, 5), P("x")},
              {"b", RandomArray({8, 4}, DType::kF32, 6), P("x")}};
  auto step = [](std::string name, std::string op, std::vector<std::string> args) {
    ProgramStep s;
    s.name = std::move(name);
    s.op = std::move(op);
    s.args = std::move(args);
    return s;
  };
  std::vector<ProgramStep> steps;
  for (std::string op : {"add", "sub", "mul", "max", "min"}) steps.push_back(step(op, op, {"a", "b"}));
  for (std::string op : {"neg", "abs", "exp", "tanh", "sigmoid", "relu", "gelu", "silu", "square"}) {
    steps.push_back(step(op, op, {"a"}));
  }
  ProgramStep sq = step("sqrt", "sqrt", {"abs"});
  ProgramStep scaled = step("scaled", "mul", {"a"});
  scaled.scalar = 0.5;
  ProgramStep sm = step("sm", "softmax", {"a"});
  sm.axis = 1;
  ProgramStep smg = step("smg", "softmax_grad", {"sm", "b"});
  smg.axis = 1;
  ProgramStep gg = step("gg", "gelu_grad", {"a", "b"});
  ProgramStep tr = step("tr", "transpose", {"a"});
  tr.dims = {1, 0};
  ProgramStep rs = step("rs", "reshape", {"tr"});
  rs.shape = {-1};
  ProgramStep sl = step("sl", "slice", {"a"});
  sl.start = {0, 0};
  sl.limit = {1, 2};
  ProgramStep red = step("red", "sum", {"a"});  // every element of the block: a scalar
  ProgramStep tot = step("tot", "psum", {"red"});
  tot.axes = {"x"};
  ProgramStep mm = step("mm", "einsum", {"a", "b"});
  mm.equation = "ij,ij->i";
  // A reshard from rows to columns: P('x', None) -> P(None, 'x').
  ProgramStep a2a = step("a2a", "all_to_all", {"a"});
  a2a.axes = {"x"};
  a2a.split_axis = 1;
  a2a.concat_axis = 0;
  a2a.tiled = true;
  for (auto s : {sq, scaled, sm, smg, gg, tr, rs, sl, red, tot, mm, a2a}) steps.push_back(s);
  p.steps = steps;
  p.outputs = {{"add", P("x")}, {"gelu", P("x")}, {"smg", P("x")}, {"gg", P("x")}, {"tot", P()},
               {"mm", P("x")}, {"a2a", P(kNone, "x")}, {"sqrt", P("x")}, {"scaled", P("x")}};
  WorkloadResult r = RunShardMapProgram(ctx, p);
  EXPECT_TRUE(r.check.passed);
  for (const CheckedValue& v : r.check.values) EXPECT_TRUE(v.passed) << v.worst;
}

TEST(RunShardMapProgram, BadProgramsNameWhatIsWrong) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 2}, {"model", 4}});
  ShardMapConfig p = MegatronProgram("model");
  p.steps[1].args = {"nope"};
  EXPECT_THAT(ErrorMessage([&] { RunShardMapProgram(ctx, p); }), HasSubstr("'nope'"));
  p = MegatronProgram("model");
  p.steps[1].op = "frobnicate";
  EXPECT_THAT(ErrorMessage([&] { RunShardMapProgram(ctx, p); }), HasSubstr("unknown op 'frobnicate'"));
  p = MegatronProgram("model");
  p.steps[3].axes = {"tensor"};
  EXPECT_THAT(ErrorMessage([&] { RunShardMapProgram(ctx, p); }), HasSubstr("tensor"));
  p = MegatronProgram("model");
  p.steps[2].args = {"a"};
  EXPECT_THAT(ErrorMessage([&] { RunShardMapProgram(ctx, p); }), HasSubstr("takes 2 argument"));
  p = MegatronProgram("model");
  p.outputs = {{"q", P()}};
  EXPECT_THAT(ErrorMessage([&] { RunShardMapProgram(ctx, p); }), HasSubstr("output 'q'"));
  p = MegatronProgram("model");
  p.steps[1].name = "h";
  EXPECT_THAT(ErrorMessage([&] { RunShardMapProgram(ctx, p); }), HasSubstr("defined twice"));
  Mesh no_topology = Mesh::Iota({8}, {"x"});
  WorkloadContext bare;
  bare.mesh = Mesh(no_topology.devices(), {"x"});
  EXPECT_THAT(ErrorMessage([&] { RunShardMapProgram(bare, MegatronProgram("x")); }), HasSubstr("topology"));
}

ProgramStep Step(std::string name, std::string op, std::vector<std::string> args, std::vector<std::string> axes = {}) {
  ProgramStep s;
  s.name = std::move(name);
  s.op = std::move(op);
  s.args = std::move(args);
  s.axes = std::move(axes);
  return s;
}

// The one-device reference runs every collective over a group of one: a ppermute there is its one device sending
// to itself, not the sharded run's pairs collapsed onto index 0 (which would repeat sources and destinations).
TEST(RunShardMapProgram, AMultiPairPpermutePassesTheReferenceRun) {
  WorkloadContext ctx = Context("cpu:8", {{"x", 4}, {"y", 2}});
  ShardMapConfig p;
  p.name = "ring";
  p.inputs = {{"a", RandomArray({8, 4}, DType::kF32, 5), P("x")}};
  ProgramStep forward = Step("forward", "ppermute", {"a"}, {"x"});
  forward.pairs = {{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  ProgramStep back = Step("back", "ppermute", {"forward"}, {"x"});
  back.pairs = {{1, 0}, {2, 1}, {3, 2}, {0, 3}};
  p.steps = {forward, back};
  p.outputs = {{"back", P("x")}};
  WorkloadResult r = RunShardMapProgram(ctx, p);
  EXPECT_TRUE(r.check.performed);
  EXPECT_TRUE(r.check.passed) << r.check.values[0].worst;
}

// JAX: psum, pmax, pmin, all_gather and psum_scatter over () return x; pmean divides by psum(1, ()) == 1;
// all_to_all and ppermute run over a group of one; axis_index(()) is 0.
TEST(RunShardMapProgram, CollectivesOverNoAxesAreJaxsGroupOfOne) {
  WorkloadContext ctx = Context("cpu:8", {{"x", 4}, {"y", 2}});
  ShardMapConfig p;
  p.name = "no_axes";
  p.inputs = {{"a", RandomArray({8, 4}, DType::kF32, 5), P("x")}};
  std::vector<ProgramStep> steps;
  for (std::string op : {"psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter"}) {
    steps.push_back(Step(op, op, {"a"}));
  }
  ProgramStep a2a = Step("all_to_all", "all_to_all", {"a"});
  a2a.split_axis = 1;
  a2a.concat_axis = 0;
  a2a.tiled = true;
  ProgramStep perm = Step("ppermute", "ppermute", {"a"});
  perm.pairs = {{0, 0}};
  ProgramStep index = Step("axis_index", "axis_index", {});
  for (const ProgramStep& s : {a2a, perm, index}) steps.push_back(s);
  p.steps = steps;
  for (std::string op : {"psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "all_to_all", "ppermute"}) {
    p.outputs.push_back({op, P("x")});
  }
  p.outputs.push_back({"axis_index", P()});
  ctx.keep_arrays = true;
  WorkloadResult r = RunShardMapProgram(ctx, p);
  EXPECT_TRUE(r.check.passed);
  for (const CheckedValue& v : r.check.values) EXPECT_TRUE(v.passed) << v.worst;
  const Array& a = p.inputs[0].value;
  for (const auto& [name, value] : r.outputs) {
    if (name == "axis_index") {
      EXPECT_EQ(value.dtype(), DType::kI32);
      EXPECT_EQ(value.ToDoubles(), std::vector<double>{0});
    } else {
      EXPECT_TRUE(value.BitwiseEquals(a)) << name;
    }
  }
}

// An untiled psum_scatter needs the dimension to equal the group size: valid on the mesh, inexpressible on the
// reference's group of one. The workload runs; the check is not performed and says why.
TEST(RunShardMapProgram, AStepTheReferenceCannotRunLeavesTheCheckNotPerformed) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 2}, {"model", 4}});
  ShardMapConfig p;
  p.name = "scatter";
  p.inputs = {{"x", RandomArray({8, 6}, DType::kF32, 5), P("data")}};  // blocks [4, 6]
  p.steps = {Step("y", "psum_scatter", {"x"}, {"model"})};
  p.outputs = {{"y", P({"data", "model"})}};
  WorkloadResult r = RunShardMapProgram(ctx, p);
  EXPECT_FALSE(r.check.performed);
  EXPECT_THAT(r.check.compared, HasSubstr("the one-device reference cannot run this program"));
  EXPECT_THAT(r.check.compared, HasSubstr("must match shard count 1"));
}

// JAX traces the whole function: a step no output needs is still checked.
TEST(RunShardMapProgram, AnInvalidStepThatNoOutputUsesIsRejected) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 2}, {"model", 4}});
  ShardMapConfig p = MegatronProgram("model");
  ProgramStep unused = Step("unused", "psum_scatter", {"x"}, {"model"});  // x's block is [4, 16]: 4 rows, 16 cols
  unused.axis = 1;
  unused.tiled = false;  // untiled needs the dimension to equal the group size 4
  p.steps.push_back(unused);
  EXPECT_THAT(ErrorMessage([&] { RunShardMapProgram(ctx, p); }),
              HasSubstr("reduce_scatter operand scatter dimension size 16 must match shard count 4"));
  ctx.abstract = true;
  EXPECT_THAT(ErrorMessage([&] { RunShardMapProgram(ctx, p); }),
              HasSubstr("reduce_scatter operand scatter dimension size 16 must match shard count 4"));
}

// ---- mlp and transformer_block ------------------------------------------------------------------------------------

struct ShardingCase {
  std::string topology{};
  std::vector<std::pair<std::string, int64_t>> axes{};
  LayerSharding sharding{};
};

std::vector<ShardingCase> ShardingCases() {
  return {
      {"cpu:8", {{"data", 2}, {"model", 4}}, {.batch_axes = {"data"}, .tensor_axes = {"model"}}},
      {"cpu:8", {{"data", 8}}, {.batch_axes = {"data"}}},
      {"cpu:8", {{"fsdp", 4}, {"model", 2}}, {.batch_axes = {"fsdp"}, .fsdp_axes = {"fsdp"}, .tensor_axes = {"model"}}},
      {"tpu-v4:2x2x2", {{"data", 2}, {"model", 4}},
       {.batch_axes = {"data"}, .tensor_axes = {"model"}, .sequence_parallel = true}},
      {"tpu-v4:2x2x2", {{"data", 2}, {"fsdp", 2}, {"model", 2}},
       {.batch_axes = {"data", "fsdp"}, .fsdp_axes = {"fsdp"}, .tensor_axes = {"model"}, .sequence_parallel = true}},
      {"dgx-h100:1", {{"tensor", 8}}, {.tensor_axes = {"tensor"}}},
      {"dgx-h100:2", {{"data", 2}, {"tensor", 8}}, {.batch_axes = {"data"}, .tensor_axes = {"tensor"}}},
  };
}

TEST(RunMlp, ForwardAndBackwardMatchUnshardedUnderEverySharding) {
  for (const ShardingCase& c : ShardingCases()) {
    WorkloadContext ctx = Context(c.topology, c.axes);
    MlpConfig mlp{.batch = 8, .seq = 8, .d_model = 16, .d_ff = 32};
    mlp.sharding = c.sharding;
    WorkloadResult r = RunMlp(ctx, mlp);
    EXPECT_TRUE(r.check.passed) << c.topology << " " << c.sharding.ToString();
    EXPECT_EQ(r.check.values.size(), 4u);
    for (const CheckedValue& v : r.check.values) EXPECT_TRUE(v.passed) << c.sharding.ToString() << " " << v.worst;
  }
}

TEST(RunMlp, UsesMegatronsCollectives) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 2}, {"model", 4}});
  MlpConfig mlp{.batch = 4, .seq = 4, .d_model = 8, .d_ff = 16};
  mlp.sharding = {.batch_axes = {"data"}, .tensor_axes = {"model"}};
  WorkloadResult r = RunMlp(ctx, mlp);
  std::vector<std::string> collectives;
  for (const StepResult& s : r.steps) {
    if (s.kind == StepKind::kCollective) collectives.push_back(s.op + ":" + s.name);
  }
  EXPECT_EQ(collectives, (std::vector<std::string>{"psum:fwd/out", "psum:bwd/dx", "psum:bwd/dw1", "psum:bwd/dw2"}));
  mlp.sharding.sequence_parallel = true;
  r = RunMlp(ctx, mlp);
  collectives.clear();
  for (const StepResult& s : r.steps) {
    if (s.kind == StepKind::kCollective) collectives.push_back(s.op + ":" + s.name);
  }
  EXPECT_EQ(collectives, (std::vector<std::string>{"all_gather:fwd/x_all_gather", "psum_scatter:fwd/out",
                                                   "all_gather:bwd/dy_all_gather", "psum_scatter:bwd/dx",
                                                   "psum:bwd/dw1", "psum:bwd/dw2"}));
}

TEST(RunMlp, AWrongReductionAxisFailsTheCheck) {
  WorkloadContext ctx = Context("tpu-v4:2x2x2", {{"data", 2}, {"model", 4}});
  MlpConfig mlp{.batch = 4, .seq = 4, .d_model = 8, .d_ff = 16};
  mlp.sharding = {.batch_axes = {"data"}, .tensor_axes = {"model"}};
  ShardMapConfig p = MlpProgram(mlp, ctx.mesh, false);
  for (ProgramStep& s : p.steps) {
    if (s.name == "bwd/dw1") s.axes = {"model"};  // should be summed over the batch axis
  }
  p.check_vma = false;
  WorkloadResult r = RunShardMapProgram(ctx, p);
  EXPECT_FALSE(r.check.passed);
  bool dw1_failed = false;
  for (const CheckedValue& v : r.check.values) {
    if (v.name == "bwd/dw1") dw1_failed = !v.passed;
    if (v.name == "fwd/out") {
      EXPECT_TRUE(v.passed);
    }
  }
  EXPECT_TRUE(dw1_failed);
}

// Loss L = sum(y * dy): the backward's gradients must be L's derivatives (central differences, float64).
double Loss(const WorkloadContext& ctx, ShardMapConfig forward, const Array& dy) {
  WorkloadContext one = ctx;
  one.keep_arrays = true;
  WorkloadResult r = RunShardMapProgram(one, forward);
  const std::vector<double> y = r.outputs[0].second.ToDoubles();
  const std::vector<double> g = dy.ToDoubles();
  double loss = 0;
  for (size_t i = 0; i < y.size(); ++i) loss += y[i] * g[i];
  return loss;
}

Array Perturbed(const Array& a, int64_t index, double delta) {
  std::vector<double> v = a.ToDoubles();
  v[index] += delta;
  return Array::FromVector<double>(v, a.shape());
}

template <typename Config, typename Program>
void ExpectGradientsAreDerivatives(Config config, Program program, const std::vector<std::string>& params) {
  WorkloadContext ctx = Context("cpu:1", {{"data", 1}, {"model", 1}});
  ctx.keep_arrays = true;
  config.dtype = DType::kF64;
  config.backward = true;
  ShardMapConfig full = program(config, ctx.mesh, false);
  WorkloadResult grads = RunShardMapProgram(ctx, full);
  config.backward = false;
  ShardMapConfig forward = program(config, ctx.mesh, false);
  Array dy;
  for (const ProgramInput& in : full.inputs) {
    if (in.name == "dy") dy = WholeProgramInput(in);
  }
  std::mt19937 gen(7);
  for (const std::string& param : params) {
    size_t input = 0, output = 0;
    for (size_t i = 0; i < forward.inputs.size(); ++i) {
      if (forward.inputs[i].name == param) input = i;
    }
    const std::string grad_name = param == "x" ? "dx" : "d" + param;
    for (size_t i = 0; i < grads.outputs.size(); ++i) {
      const std::string& n = grads.outputs[i].first;
      if (n.size() >= grad_name.size() && n.compare(n.size() - grad_name.size(), grad_name.size(), grad_name) == 0) {
        output = i;
      }
    }
    const std::vector<double> g = grads.outputs[output].second.ToDoubles();
    const Array value = WholeProgramInput(forward.inputs[input]);  // made on demand (AddInput)
    for (int trial = 0; trial < 3; ++trial) {
      const int64_t index = std::uniform_int_distribution<int64_t>(0, value.size() - 1)(gen);
      const double eps = 1e-5;
      ShardMapConfig plus = forward, minus = forward;
      plus.inputs[input].value = Perturbed(value, index, eps);
      minus.inputs[input].value = Perturbed(value, index, -eps);
      const double numeric = (Loss(ctx, plus, dy) - Loss(ctx, minus, dy)) / (2 * eps);
      EXPECT_NEAR(g[index], numeric, 1e-6 + 1e-5 * std::abs(numeric)) << param << "[" << index << "]";
    }
  }
}

TEST(MlpProgram, BackwardGradientsAreTheLossDerivatives) {
  ExpectGradientsAreDerivatives(MlpConfig{.batch = 2, .seq = 3, .d_model = 4, .d_ff = 6}, MlpProgram,
                                {"x", "w1", "w2"});
  MlpConfig relu{.batch = 2, .seq = 3, .d_model = 4, .d_ff = 6};
  relu.activation = "relu";
  ExpectGradientsAreDerivatives(relu, MlpProgram, {"x", "w1"});
}

TEST(TransformerBlockProgram, BackwardGradientsAreTheLossDerivatives) {
  ExpectGradientsAreDerivatives(TransformerBlockConfig{.batch = 2, .seq = 3, .d_model = 4, .d_ff = 8, .heads = 2},
                                TransformerBlockProgram, {"x", "wq", "wk", "wv", "wo", "w1", "w2"});
}

TEST(RunTransformerBlock, MatchesUnshardedUnderEverySharding) {
  for (const ShardingCase& c : ShardingCases()) {
    WorkloadContext ctx = Context(c.topology, c.axes);
    TransformerBlockConfig t{.batch = 8, .seq = 8, .d_model = 16, .d_ff = 32, .heads = 8};
    t.sharding = c.sharding;
    WorkloadResult r = RunTransformerBlock(ctx, t);
    EXPECT_TRUE(r.check.passed) << c.topology << " " << c.sharding.ToString();
    for (const CheckedValue& v : r.check.values) EXPECT_TRUE(v.passed) << c.sharding.ToString() << " " << v.worst;
    EXPECT_EQ(r.check.values.size(), 8u);
  }
}

TEST(RunTransformerBlock, AbstractModeGivesTheSamePredictionsAndMemory) {
  WorkloadContext ctx = Context("tpu-v4:2x2x2", {{"data", 2}, {"model", 4}});
  TransformerBlockConfig t{.batch = 4, .seq = 8, .d_model = 16, .d_ff = 32, .heads = 4};
  t.sharding = {.batch_axes = {"data"}, .tensor_axes = {"model"}, .sequence_parallel = true};
  WorkloadResult real = RunTransformerBlock(ctx, t);
  ctx.abstract = true;
  WorkloadResult abstract = RunTransformerBlock(ctx, t);
  EXPECT_DOUBLE_EQ(real.totals.predicted_seconds, abstract.totals.predicted_seconds);
  EXPECT_DOUBLE_EQ(real.totals.communication_seconds, abstract.totals.communication_seconds);
  EXPECT_EQ(real.memory.peak_bytes_per_position, abstract.memory.peak_bytes_per_position);
}

TEST(RunTransformerBlock, RejectsHeadsThatDoNotDivideDModel) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 8}});
  TransformerBlockConfig t{.d_model = 10, .heads = 4};
  EXPECT_THAT(ErrorMessage([&] { RunTransformerBlock(ctx, t); }), HasSubstr("heads"));
}

TEST(LayerSharding, FromT5xStyleLogicalRules) {
  LayerSharding sh = LayerSharding::FromLogicalRules(
      ParseLogicalAxisRules("batch=data,embed=data,mlp=model,heads=model,length=model"));
  EXPECT_EQ(sh.batch_axes, std::vector<std::string>{"data"});
  EXPECT_EQ(sh.fsdp_axes, std::vector<std::string>{"data"});
  EXPECT_EQ(sh.tensor_axes, std::vector<std::string>{"model"});
  EXPECT_TRUE(sh.sequence_parallel);
  sh = LayerSharding::FromLogicalRules(ParseLogicalAxisRules("batch=data,embed=,mlp=model"));
  EXPECT_TRUE(sh.fsdp_axes.empty());
  EXPECT_FALSE(sh.sequence_parallel);
}

// ---- partition ----------------------------------------------------------------------------------------------------

TEST(RunPartition, ReportsSpecsSourcesAndBytesPerDevice) {
  WorkloadContext ctx = Context("tpu-v4:2x2x2", {{"data", 2}, {"model", 4}});
  PartitionConfig c;
  c.logical_rules = ParseLogicalAxisRules("embed=data,mlp=model");
  c.regex_rules = {{"bias", P()}, {"attention/.*kernel", P(kNone, "model")}};
  c.params = {
      {.name = "mlp/wi", .shape = {1024, 4096}, .logical_axes = ParseLogicalAxes("embed,mlp")},
      {.name = "attention/q/kernel", .shape = {1024, 1024}},
      {.name = "mlp/bias", .shape = {4096}},
      {.name = "odd", .shape = {6, 10}, .spec = P("model", "data")},  // 6 % 4 != 0: corrected
  };
  WorkloadResult r = RunPartition(ctx, c);
  ASSERT_TRUE(r.partition.has_value());
  const auto& ps = r.partition->params;
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[0].spec, P("data", "model"));
  EXPECT_EQ(ps[0].bytes_per_device, 1024 * 4096 * 4 / 8);
  EXPECT_THAT(ps[0].source, HasSubstr("logical"));
  EXPECT_EQ(ps[1].spec, P(kNone, "model"));
  EXPECT_EQ(ps[1].replication, 2);
  EXPECT_THAT(ps[1].source, HasSubstr("regex rule 1"));
  EXPECT_EQ(ps[2].bytes_per_device, 4096 * 4);
  EXPECT_EQ(ps[2].replication, 8);
  EXPECT_FALSE(ps[3].corrections.empty());
  EXPECT_EQ(ps[3].requested, P("model", "data"));
  EXPECT_EQ(r.partition->largest, "mlp/wi");
  EXPECT_EQ(r.memory.peak_bytes_max, 1024 * 4096 * 4 / 8 + 1024 * 1024 + 4096 * 4 + ps[3].bytes_per_device);
  EXPECT_FALSE(r.check.performed);
}

TEST(RunPartition, NoCorrectionModeThrowsJaxsError) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 8}});
  PartitionConfig c;
  c.correction = CorrectionMode::kNone;
  c.params = {{.name = "w", .shape = {6}, .spec = P("data")}};
  EXPECT_THROW(RunPartition(ctx, c), Error);
  c.params = {{.name = "w", .shape = {6, 2}, .logical_axes = ParseLogicalAxes("embed")}};
  EXPECT_THAT(ErrorMessage([&] { RunPartition(ctx, c); }), HasSubstr("rank 2"));
}

}  // namespace
}  // namespace spmdsim

namespace spmdsim {
namespace {

// A [128,256] x [256,128] float32 GEMM puts Eigen's blocking buffers on the device fiber's stack; the engines
// give each device at least 1 MiB so it does not overflow (the runtime's default is 256 KiB).
TEST(RunMlp, LargeLocalMatmulsDoNotOverflowTheDeviceStack) {
  WorkloadContext ctx = Context("cpu:8", {{"data", 2}, {"model", 4}});
  MlpConfig mlp{.batch = 8, .seq = 64, .d_model = 128, .d_ff = 512};
  mlp.sharding = {.batch_axes = {"data"}, .tensor_axes = {"model"}};
  mlp.rtol = 1e-3;
  EXPECT_TRUE(RunMlp(ctx, mlp).check.passed);
}

}  // namespace
}  // namespace spmdsim
