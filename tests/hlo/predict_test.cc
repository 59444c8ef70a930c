#include "hlo/predict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <memory>
#include <string>

#include "common/error.h"
#include "cost/collective_model.h"
#include "cost/compute_model.h"
#include "hlo/cost.h"
#include "hlo/memory.h"
#include "hlo/parser.h"

namespace spmdsim::hlo {
namespace {

using ::testing::DoubleNear;
using ::testing::Contains;
using ::testing::HasSubstr;

Mesh DevicesOf(const std::string& topology, int64_t n) {
  auto t = std::make_shared<const Topology>(Topology::Parse(topology));
  std::vector<int> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[i] = i;
  return Mesh(DeviceArray({n}, ids), {"devices"}, t);
}

SupportedModule Abstract(std::shared_ptr<const Module> m) {
  return SupportedModule::Check(std::move(m), SupportedModule::Use::kAbstract);
}

constexpr char kSum[] = "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
                        "  ROOT %c = f32[] add(%a, %b)\n}\n";

TEST(Cost, CountsADotsFlopsBytesAndDimensions) {
  std::shared_ptr<const Module> m = ParseModule("HloModule m\nENTRY %e (a: f32[8,64], b: f32[64,32]) -> f32[8,32] {\n"
                       "  %a = f32[8,64] parameter(0)\n  %b = f32[64,32] parameter(1)\n"
                       "  ROOT %d = f32[8,32] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
                       "metadata={op_name=\"jit(f)/layer_0/dot_general\"}\n}\n");
  const InstructionCost c = CostOf(*m->entry()->root());
  EXPECT_EQ(c.flops, 2.0 * 8 * 64 * 32);
  EXPECT_EQ(c.bytes_read, (8 * 64 + 64 * 32) * 4.0);
  EXPECT_EQ(c.bytes_written, 8 * 32 * 4.0);
  EXPECT_EQ(c.dims.m, 8);
  EXPECT_EQ(c.dims.n, 32);
  EXPECT_EQ(c.dims.k, 64);
  EXPECT_EQ(InstructionClass(*m->entry()->root()), "dot");
  EXPECT_EQ(ScopeOf(*m->entry()->root()), "jit(f)/layer_0");
  // XLA's combiners join the op_names of what they combine: the scope is what the parts share.
  auto j = ParseModule("HloModule m\nENTRY %e (a: f32[8]) -> f32[8] {\n  %a = f32[8] parameter(0)\n"
                       "  ROOT %n = f32[8] negate(%a), metadata={op_name=\"jit(f)/(transpose(jvp())/layer/dot_general:"
                       "transpose(jvp())/layer/reduce_sum:transpose(jvp())/mlp/dot_general)\"}\n}\n");
  EXPECT_EQ(ScopeOf(*j->entry()->root()), "jit(f)/transpose(jvp())");
}

// XLA CPU widens bf16 to f32 behind converts (here as its convert fusions feeding a dot fusion, and a bf16 stack
// converted to f32 and back around a dynamic-update-slice); a TPU or GPU compile keeps the values bf16, so with
// narrow types they are priced in bf16: the dot at bf16's peak on bf16 bytes, the update in place. A dot of f32
// data stays f32.
TEST(Cost, NarrowTypesPriceWhatXlaCpuWidenedInItsNarrowType) {
  std::shared_ptr<const Module> m = ParseModule(
      "HloModule m\n"
      "%widen (p: bf16[8,64]) -> f32[8,64] {\n  %p = bf16[8,64] parameter(0)\n"
      "  ROOT %c = f32[8,64] convert(%p)\n}\n"
      "%mm (x: f32[8,64], y: f32[64,32]) -> f32[8,32] {\n  %x = f32[8,64] parameter(0)\n"
      "  %y = f32[64,32] parameter(1)\n"
      "  ROOT %d = f32[8,32] dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n"
      "%stack (s: bf16[4,8,32], u: f32[8,32], i: s32[]) -> bf16[4,8,32] {\n  %s = bf16[4,8,32] parameter(0)\n"
      "  %w = f32[4,8,32] convert(%s)\n  %u = f32[8,32] parameter(1)\n  %r = bf16[8,32] convert(%u)\n"
      "  %x = f32[8,32] convert(%r)\n  %b = f32[1,8,32] bitcast(%x)\n  %i = s32[] parameter(2)\n"
      "  %z = s32[] constant(0)\n  %d = f32[4,8,32] dynamic-update-slice(%w, %b, %i, %z, %z)\n"
      "  ROOT %n = bf16[4,8,32] convert(%d)\n}\n"
      "ENTRY %e (a: bf16[8,64], b: bf16[32,64], c: f32[64,32], s: bf16[4,8,32], i: s32[]) -> (f32[8,32], f32[8,32], "
      "bf16[4,8,32]) {\n"
      "  %a = bf16[8,64] parameter(0)\n  %b = bf16[32,64] parameter(1)\n  %c = f32[64,32] parameter(2)\n"
      "  %s = bf16[4,8,32] parameter(3)\n  %i = s32[] parameter(4)\n"
      "  %wa = f32[8,64] fusion(%a), kind=kLoop, calls=%widen\n"
      "  %cb = f32[32,64] convert(%b)\n  %tb = f32[64,32] transpose(%cb), dimensions={1,0}\n"
      "  %narrow = f32[8,32] fusion(%wa, %tb), kind=kOutput, calls=%mm\n"
      "  %wide = f32[8,32] fusion(%wa, %c), kind=kOutput, calls=%mm\n"
      "  %st = bf16[4,8,32] fusion(%s, %narrow, %i), kind=kLoop, calls=%stack\n"
      "  ROOT %t = (f32[8,32], f32[8,32], bf16[4,8,32]) tuple(%narrow, %wide, %st)\n}\n");
  const Instruction& narrow = *m->entry()->root()->operand(0);
  const Instruction& wide = *m->entry()->root()->operand(1);
  const Instruction& stack = *m->entry()->root()->operand(2);
  EXPECT_EQ(CostOf(narrow).dtype, DType::kF32);             // the module's own types
  EXPECT_EQ(CostOf(narrow).bytes_read, (8 * 64 + 64 * 32) * 4.0);
  EXPECT_EQ(CostOf(narrow, true).dtype, DType::kBF16);      // narrow types
  EXPECT_EQ(CostOf(narrow, true).bytes_read, (8 * 64 + 64 * 32) * 2.0);
  EXPECT_EQ(CostOf(narrow, true).bytes_written, 8 * 32 * 4.0);  // the dot's f32 result is f32
  EXPECT_EQ(NarrowType(wide), DType::kF32);
  EXPECT_EQ(CostOf(wide, true).dtype, DType::kF32);
  EXPECT_EQ(CostOf(stack).bytes_read, 4 * 8 * 32 * 2.0 + 8 * 32 * 4.0 + 4);  // the whole stack read
  EXPECT_EQ(CostOf(stack).bytes_written, 4 * 8 * 32 * 2.0);
  EXPECT_EQ(CostOf(stack, true).bytes_read, 8 * 32 * 4.0 + 4);  // in place; the update as the module has it
  EXPECT_EQ(CostOf(stack, true).bytes_written, 8 * 32 * 2.0);
}

TEST(Predict, PricesLocalOpsWithTheComputeModelAndCollectivesWithTheCollectiveModel) {
  std::shared_ptr<const Module> m = ParseModule(
      std::string("HloModule m, num_partitions=8\n") +
      "%add (a: bf16[], b: bf16[]) -> bf16[] {\n  %a = bf16[] parameter(0)\n  %b = bf16[] parameter(1)\n"
      "  ROOT %c = bf16[] add(%a, %b)\n}\n"
      "ENTRY %e (a: bf16[1024,1024], b: bf16[1024,1024]) -> bf16[1024,1024] {\n"
      "  %a = bf16[1024,1024] parameter(0)\n  %b = bf16[1024,1024] parameter(1)\n"
      "  %d = bf16[1024,1024] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  ROOT %r = bf16[1024,1024] all-reduce(%d), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, "
      "use_global_device_ids=true, to_apply=%add\n}\n");
  const Mesh mesh = DevicesOf("dgx-h100:1", 8);
  const Prediction p = Predict(Abstract(m), mesh);
  const ComputeModel compute(*mesh.topology());
  const double dot =
      compute.Cost(2.0 * 1024 * 1024 * 1024, 3 * 1024 * 1024 * 2.0, {1, 1024, 1024, 1024}, DType::kBF16).seconds;
  CollectiveModel collectives(mesh);
  const std::vector<int64_t> all{0, 1, 2, 3, 4, 5, 6, 7};
  const double ar = collectives.CostOfGroup(CollectiveOp::kAllReduce, all, 1024 * 1024 * 2.0).seconds;
  EXPECT_THAT(p.compute_seconds, DoubleNear(dot, 1e-12));
  EXPECT_THAT(p.comm_seconds, DoubleNear(ar, 1e-12));
  EXPECT_THAT(p.step_seconds, DoubleNear(dot + ar, 1e-12));
  EXPECT_THAT(p.exposed_comm_seconds, DoubleNear(ar, 1e-12));
  ASSERT_EQ(p.by_class.size(), 2u);
  EXPECT_EQ(p.events.size(), 2u);
}

TEST(Predict, AnAsyncCollectiveOverlapsTheComputeScheduledBeforeItsDone) {
  std::shared_ptr<const Module> m = ParseModule(std::string("HloModule m, num_partitions=8\n") + kSum +
                       "ENTRY %e (a: f32[4096,4096], g: f32[4096]) -> (f32[4096,4096], f32[4096]) {\n"
                       "  %a = f32[4096,4096] parameter(0)\n  %g = f32[4096] parameter(1)\n"
                       "  %s = f32[4096] all-reduce-start(%g), channel_id=1, replica_groups={}, "
                       "use_global_device_ids=true, to_apply=%add\n"
                       "  %t = f32[4096,4096] tanh(%a)\n"
                       "  %d = f32[4096] all-reduce-done(%s)\n"
                       "  ROOT %o = (f32[4096,4096], f32[4096]) tuple(%t, %d)\n}\n");
  const Prediction p = Predict(Abstract(m), DevicesOf("tpu-v4:2x2x2", 8));
  ASSERT_GT(p.compute_seconds, p.comm_seconds);  // the tanh is longer than the small all-reduce
  EXPECT_EQ(p.exposed_comm_seconds, 0);
  EXPECT_THAT(p.step_seconds, DoubleNear(p.compute_seconds, 1e-15));
}

// XLA's collective matmul shifts each tensor group's shards round a ring: on a wrapping torus dimension every
// transfer, the last one back to the first device included, is one hop, and the 16 rows' rings share no link.
// The permute costs one transfer's time (priced pair by pair, the last pair of each row went 15 hops back).
TEST(Predict, ARingShiftOnAWrappingTorusDimensionIsOneHopForEveryTransfer) {
  auto shift = [](bool wrap) {
    std::string pairs;
    for (int row = 0; row < 16; ++row) {
      for (int i = 0; i < 16; ++i) {
        if (!wrap && i == 15) continue;
        pairs += fmt::format("{}{{{},{}}}", pairs.empty() ? "" : ",", row * 16 + i, row * 16 + (i + 1) % 16);
      }
    }
    return ParseModule("HloModule m, num_partitions=256\nENTRY %e (a: bf16[1024,1024]) -> bf16[1024,1024] {\n"
                       "  %a = bf16[1024,1024] parameter(0)\n  ROOT %p = bf16[1024,1024] collective-permute(%a), "
                       "channel_id=1, source_target_pairs={" + pairs + "}\n}\n");
  };
  const Mesh mesh = DevicesOf("tpu-v5e:16x16", 256);
  const Prediction ring = Predict(Abstract(shift(true)), mesh);
  const Prediction line = Predict(Abstract(shift(false)), mesh);
  ASSERT_GT(line.comm_seconds, 0);
  EXPECT_THAT(ring.comm_seconds, DoubleNear(line.comm_seconds, line.comm_seconds * 1e-9));
  // One hop: what a single transfer between neighbours costs.
  CollectiveModel collectives(mesh);
  const std::vector<int64_t> neighbours{0, 1};
  const std::vector<std::pair<int, int>> one_way{{0, 1}};
  const double hop = collectives.CostOfGroup(CollectiveOp::kPermute, neighbours, 1024 * 1024 * 2.0, one_way).seconds;
  EXPECT_THAT(ring.comm_seconds, DoubleNear(hop, hop * 1e-9));
}

TEST(Predict, RunsWhileBodiesTheirTripCount) {
  std::shared_ptr<const Module> m = ParseModule(
      "HloModule m\n"
      "%cond (s: (s32[], f32[256])) -> pred[] {\n  %s = (s32[], f32[256]) parameter(0)\n"
      "  %i = s32[] get-tuple-element(%s), index=0\n  %n = s32[] constant(5)\n"
      "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n}\n"
      "%body (s: (s32[], f32[256])) -> (s32[], f32[256]) {\n  %s = (s32[], f32[256]) parameter(0)\n"
      "  %i = s32[] get-tuple-element(%s), index=0\n  %x = f32[256] get-tuple-element(%s), index=1\n"
      "  %one = s32[] constant(1)\n  %j = s32[] add(%i, %one)\n  %y = f32[256] exponential(%x)\n"
      "  ROOT %t = (s32[], f32[256]) tuple(%j, %y)\n}\n"
      "ENTRY %e (x: f32[256]) -> (s32[], f32[256]) {\n  %x = f32[256] parameter(0)\n  %z = s32[] constant(2)\n"
      "  %init = (s32[], f32[256]) tuple(%z, %x)\n"
      "  ROOT %w = (s32[], f32[256]) while(%init), condition=%cond, body=%body\n}\n");
  EXPECT_EQ(StaticTripCount(*m->entry()->root()), 3);
  const Prediction p = Predict(Abstract(m), DevicesOf("cpu:1", 1));
  int64_t exps = 0;
  for (const OpEvent& e : p.events) exps += e.instruction->opcode() == Opcode::kExp;
  EXPECT_EQ(exps, 3);
  PredictOptions measured;
  measured.trip_counts[m->entry()->root()] = 7;
  EXPECT_EQ(Predict(Abstract(m), DevicesOf("cpu:1", 1), measured).by_class.front().count, 7 * 2 + 8);
}

TEST(Memory, FollowsBufferLivenessAlongTheSchedule) {
  std::shared_ptr<const Module> m = ParseModule(
      "HloModule m\nENTRY %e (x: f32[1024]) -> f32[1024] {\n  %x = f32[1024] parameter(0)\n"
      "  %a = f32[1024] exponential(%x)\n  %b = f32[1024] exponential(%a)\n"
      "  ROOT %c = f32[1024] add(%a, %b)\n}\n");
  const MemoryEstimate e = EstimateMemory(*m);
  EXPECT_EQ(e.argument_bytes, 4096);
  EXPECT_EQ(e.output_bytes, 4096);
  // a and b live together until c, which writes into a's buffer (a dies there): b is the one temporary.
  EXPECT_EQ(e.temp_bytes, 4096);
  EXPECT_EQ(e.peak_at, "%b");
  EXPECT_EQ(e.peak_bytes(), 12288);
  // -exp(exp(exp(x))): each op reuses the buffer of the one before it, which dies there, and the last one is the
  // output: no temporaries.
  auto chain = ParseModule("HloModule m\nENTRY %e (x: f32[1024]) -> f32[1024] {\n  %x = f32[1024] parameter(0)\n"
                           "  %a = f32[1024] exponential(%x)\n  %b = f32[1024] exponential(%a)\n"
                           "  %c = f32[1024] exponential(%b)\n  ROOT %d = f32[1024] negate(%c)\n}\n");
  EXPECT_EQ(EstimateMemory(*chain).temp_bytes, 0);
}

// Hostile but legal modules: a call chain 100,000 deep (no recursion in the walk or the memory estimate), twenty
// nested loops of 1,000 trips each (priced once per distinct state, not 2^20 walks; counts saturate), arrays of 2^62
// bytes (no wrap-around), and 200,000 instructions (the memory estimate is linear: under a second).
TEST(Predict, ADeepCallChainIsWalkedWithoutRecursion) {
  constexpr int kDepth = 100'000;
  std::string text = "HloModule deep\n%c0 (x: f32[4]) -> f32[4] {\n  %x = f32[4] parameter(0)\n"
                     "  ROOT %y = f32[4] exponential(%x)\n}\n";
  for (int i = 1; i < kDepth; ++i) {
    text += fmt::format("%c{} (x: f32[4]) -> f32[4] {{\n  %x = f32[4] parameter(0)\n  ROOT %y = f32[4] call(%x), "
                        "to_apply=%c{}\n}}\n", i, i - 1);
  }
  text += fmt::format("ENTRY %e (x: f32[4]) -> f32[4] {{\n  %x = f32[4] parameter(0)\n  ROOT %y = f32[4] call(%x), "
                      "to_apply=%c{}\n}}\n", kDepth - 1);
  const Prediction p = Predict(Abstract(ParseModule(text)), DevicesOf("cpu:1", 1));
  EXPECT_EQ(p.by_class.front().count, 1);
  EXPECT_EQ(p.memory.argument_bytes, 16);
}

TEST(Predict, NestedLoopsArePricedOncePerStateAndTheirCountsSaturate) {
  constexpr int kDepth = 20;
  std::string text = "HloModule nested\n"
      "%cond (s: (s32[], f32[64])) -> pred[] {\n  %s = (s32[], f32[64]) parameter(0)\n"
      "  %i = s32[] get-tuple-element(%s), index=0\n  %n = s32[] constant(1000)\n"
      "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n}\n"
      "%body0 (s: (s32[], f32[64])) -> (s32[], f32[64]) {\n  %s = (s32[], f32[64]) parameter(0)\n"
      "  %i = s32[] get-tuple-element(%s), index=0\n  %x = f32[64] get-tuple-element(%s), index=1\n"
      "  %one = s32[] constant(1)\n  %j = s32[] add(%i, %one)\n  %y = f32[64] exponential(%x)\n"
      "  ROOT %t = (s32[], f32[64]) tuple(%j, %y)\n}\n";
  auto loop = [](int body) {
    return fmt::format("  %zero = s32[] constant(0)\n  %init = (s32[], f32[64]) tuple(%zero, %x)\n"
                       "  %w = (s32[], f32[64]) while(%init), condition=%cond, body=%body{}, "
                       "backend_config={{\"known_trip_count\":{{\"n\":\"1000\"}}}}\n", body);
  };
  for (int k = 1; k < kDepth; ++k) {
    text += fmt::format("%body{} (s: (s32[], f32[64])) -> (s32[], f32[64]) {{\n  %s = (s32[], f32[64]) parameter(0)\n"
                        "  %i = s32[] get-tuple-element(%s), index=0\n  %x = f32[64] get-tuple-element(%s), index=1\n"
                        "{}  %y = f32[64] get-tuple-element(%w), index=1\n  %one = s32[] constant(1)\n"
                        "  %j = s32[] add(%i, %one)\n  ROOT %t = (s32[], f32[64]) tuple(%j, %y)\n}}\n", k, loop(k - 1));
  }
  text += fmt::format("ENTRY %e (x: f32[64]) -> f32[64] {{\n  %x = f32[64] parameter(0)\n{}"
                      "  ROOT %y = f32[64] get-tuple-element(%w), index=1\n}}\n", loop(kDepth - 1));
  const Prediction p = Predict(Abstract(ParseModule(text)), DevicesOf("cpu:1", 1));
  EXPECT_EQ(p.executed_ops, INT64_MAX);
  EXPECT_GT(p.step_seconds, 1e40);  // 1000^20 exponentials
  EXPECT_THAT(p.notes, Contains(HasSubstr("ran again from a state they had run from")));
}

TEST(Memory, ArraysOfTwoToTheSixtyTwoBytesSaturateInsteadOfWrapping) {
  const MemoryEstimate e = EstimateMemory(*ParseModule(
      "HloModule huge\nENTRY %e (a: f32[1073741824,1073741824], b: f32[1073741824,1073741824]) -> "
      "f32[1073741824,1073741824] {\n  %a = f32[1073741824,1073741824] parameter(0)\n"
      "  %b = f32[1073741824,1073741824] parameter(1)\n  ROOT %d = f32[1073741824,1073741824] dot(%a, %b), "
      "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n"));
  EXPECT_EQ(e.argument_bytes, INT64_MAX);
  EXPECT_EQ(e.peak_bytes(), INT64_MAX);
}

TEST(Memory, TheEstimateIsLinearInTheModulesSize) {
  std::string text = "HloModule wide\nENTRY %e (x: f32[256]) -> f32[256] {\n  %v0 = f32[256] parameter(0)\n";
  constexpr int kInstructions = 200'000;
  for (int i = 1; i < kInstructions; ++i) {
    text += fmt::format("  %v{} = f32[256] {}(%v{})\n", i, i % 2 ? "exponential" : "negate", i - 1);
  }
  text += fmt::format("  ROOT %r = f32[256] add(%v{}, %v{})\n}}\n", kInstructions - 1, kInstructions / 2);
  const auto m = ParseModule(text);
  const MemoryEstimate e = EstimateMemory(*m);  // 33 s before the interval sets; ~0.3 s now (not timed here)
  // %v100000, held to the end, lives in the output's allocation (the root adds it in place); the chain before and
  // after it reuses one heap slot each, never live together: one 1 KiB slot at a time.
  EXPECT_EQ(e.temp_bytes, 1024);
}

// A type the topology has no peak for is priced at a type of its width, with a note, never refused: f16 on a TPU
// (its peak is bf16's), f64 on a TPU (at f32's).
TEST(Predict, ATypeWithoutAPeakIsPricedAtATypeOfItsWidthWithANote) {
  for (const char* type : {"f16", "f64"}) {
    const std::string t = type;
    const Prediction p = Predict(Abstract(ParseModule(
        "HloModule m\nENTRY %e (a: " + t + "[512,512], b: " + t + "[512,512]) -> " + t + "[512,512] {\n  %a = " + t +
        "[512,512] parameter(0)\n  %b = " + t + "[512,512] parameter(1)\n  ROOT %d = " + t +
        "[512,512] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")),
        DevicesOf("tpu-v5e:1x1", 1));
    EXPECT_GT(p.step_seconds, 0) << type;
    EXPECT_THAT(p.notes, Contains(HasSubstr("has no " + t + " peak"))) << type;
  }
}

// jax.debug.print / io_callback lower to host callbacks: abstract runs price them at 0 with a note; runs with data
// refuse them in one line saying how to take them out.
TEST(Predict, HostCallbacksArePricedAtZeroWithANoteAndRefusedWithData) {
  const std::string text =
      "HloModule m\nENTRY %e (x: f32[4]) -> f32[4] {\n  %x = f32[4] parameter(0)\n"
      "  %cb = () custom-call(%x), custom_call_target=\"xla_ffi_python_cpu_callback\", "
      "custom_call_has_side_effect=true\n"
      "  ROOT %y = f32[4] negate(%x)\n}\n";
  const Prediction p = Predict(Abstract(ParseModule(text, "debug_print.txt")), DevicesOf("cpu:1", 1));
  EXPECT_THAT(p.notes, Contains(HasSubstr("1 host callback(s) (jax.debug.print, io_callback, pure_callback)")));
  try {
    SupportedModule::Check(ParseModule(text, "debug_print.txt"), SupportedModule::Use::kWithData);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("debug_print.txt:4:3: %cb (custom-call) cannot run"));
    EXPECT_THAT(e.message(), HasSubstr("take the callback out of the program"));
  }
}

TEST(Predict, RefusesAMeshOfTheWrongSize) {
  std::shared_ptr<const Module> m = ParseModule(
      "HloModule m, num_partitions=4\nENTRY %e (x: f32[2]) -> f32[2] {\n  ROOT %x = f32[2] parameter(0)\n}\n");
  try {
    Predict(Abstract(m), DevicesOf("cpu:8", 8));
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("runs on 4 devices"));
  }
}

}  // namespace
}  // namespace spmdsim::hlo
