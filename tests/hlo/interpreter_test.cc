#include "hlo/interpreter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "hlo/internal/kernels.h"
#include "hlo/parser.h"

namespace spmdsim::hlo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
Value Make(DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  ValueBuilder b(dtype, std::move(dims));
  std::memcpy(b.raw(), values.data(), values.size() * sizeof(T));
  return std::move(b).Finish();
}
Value F32(std::vector<int64_t> dims, const std::vector<float>& v) { return Make(DType::kF32, std::move(dims), v); }
Value S32(std::vector<int64_t> dims, const std::vector<int32_t>& v) { return Make(DType::kI32, std::move(dims), v); }

template <typename T>
std::vector<T> Elements(const Value& v) {
  std::vector<T> out(static_cast<size_t>(v.size()));
  std::memcpy(out.data(), v.raw(), out.size() * sizeof(T));
  return out;
}

// Runs the entry of `text` on one device.
Value RunText(const std::string& text, std::vector<Value> args) {
  auto m = ParseModule(text, "t.txt");
  Interpreter interp(*m, InterpreterPlan::Build(*m), {});
  return interp.Run(std::move(args));
}

constexpr char kRegions[] = R"(
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}
%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] maximum(%a, %b)
}
%less (a: f32[], b: f32[], c: s32[], d: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %c = s32[] parameter(2)
  %d = s32[] parameter(3)
  ROOT %lt = pred[] compare(%a, %b), direction=LT
}
%ge (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = pred[] compare(%a, %b), direction=GE
}
)";

std::string Module(const std::string& entry) { return std::string("HloModule t\n") + kRegions + entry; }

TEST(Interpreter, IntegerArithmeticFollowsXla) {
  Value out = RunText(Module(R"(
ENTRY %e (a: s32[6], b: s32[6]) -> (s32[6], s32[6], s32[6], s32[6]) {
  %a = s32[6] parameter(0)
  %b = s32[6] parameter(1)
  %d = s32[6] divide(%a, %b)
  %r = s32[6] remainder(%a, %b)
  %s = s32[6] shift-left(%a, %b)
  %t = s32[6] shift-right-arithmetic(%a, %b)
  ROOT %o = (s32[6], s32[6], s32[6], s32[6]) tuple(%d, %r, %s, %t)
})"),
                      {S32({6}, {7, -7, 5, std::numeric_limits<int32_t>::min(), 3, -8}),
                       S32({6}, {2, 2, 0, -1, 40, 1})});
  EXPECT_THAT(Elements<int32_t>(out.element(0)), ElementsAre(3, -3, -1, std::numeric_limits<int32_t>::min(), 0, -8));
  EXPECT_THAT(Elements<int32_t>(out.element(1)), ElementsAre(1, -1, 5, 0, 3, 0));
  EXPECT_THAT(Elements<int32_t>(out.element(2)), ElementsAre(28, -28, 5, 0, 0, -16));
  EXPECT_THAT(Elements<int32_t>(out.element(3)), ElementsAre(1, -2, 5, -1, 0, -4));
}

TEST(Interpreter, FloatMaximumPropagatesNanAndOrdersSignedZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Value out = RunText(Module(R"(
ENTRY %e (a: f32[3], b: f32[3]) -> (f32[3], s32[3]) {
  %a = f32[3] parameter(0)
  %b = f32[3] parameter(1)
  %m = f32[3] maximum(%a, %b)
  %big = f32[3] constant({3e9, -3e9, nan})
  %c = s32[3] convert(%big)
  ROOT %o = (f32[3], s32[3]) tuple(%m, %c)
})"),
                      {F32({3}, {nan, -0.0f, 1}), F32({3}, {1, 0.0f, 2})});
  std::vector<float> m = Elements<float>(out.element(0));
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 0.0f);
  EXPECT_FALSE(std::signbit(m[1]));
  EXPECT_EQ(m[2], 2.0f);
  EXPECT_THAT(Elements<int32_t>(out.element(1)),
              ElementsAre(std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 0));
}

TEST(Interpreter, ShapeOpsMoveTheRightElements) {
  Value out = RunText(Module(R"(
ENTRY %e (x: f32[2,3]) -> (f32[3,2], f32[2,2], f32[4,7], f32[2,3], f32[2,2,3], f32[3,2]) {
  %x = f32[2,3] parameter(0)
  %t = f32[3,2] transpose(%x), dimensions={1,0}
  %s = f32[2,2] slice(%x), slice={[0:2], [0:3:2]}
  %z = f32[] constant(-1)
  %p = f32[4,7] pad(%x, %z), padding=1_1x0_2_1
  %r = f32[2,3] reverse(%x), dimensions={1}
  %b = f32[2,2,3] broadcast(%x), dimensions={0,2}
  %c = f32[3,2]{0,1} copy(%t)
  %bc = f32[3,2] bitcast(%c)
  ROOT %o = (f32[3,2], f32[2,2], f32[4,7], f32[2,3], f32[2,2,3], f32[3,2]) tuple(%t, %s, %p, %r, %b, %bc)
})"),
                      {F32({2, 3}, {0, 1, 2, 3, 4, 5})});
  EXPECT_THAT(Elements<float>(out.element(0)), ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_THAT(Elements<float>(out.element(1)), ElementsAre(0, 2, 3, 5));
  EXPECT_THAT(Elements<float>(out.element(2)),
              ElementsAre(-1, -1, -1, -1, -1, -1, -1, 0, -1, 1, -1, 2, -1, -1, 3, -1, 4, -1, 5, -1, -1, -1, -1, -1, -1,
                          -1, -1, -1));
  EXPECT_THAT(Elements<float>(out.element(3)), ElementsAre(2, 1, 0, 5, 4, 3));
  EXPECT_THAT(Elements<float>(out.element(4)), ElementsAre(0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5));
  // %c holds the transpose column-major: its bytes are x's, read back as a row-major [3,2].
  EXPECT_THAT(Elements<float>(out.element(5)), ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(Interpreter, DynamicSlicesClampTheirStarts) {
  Value out = RunText(Module(R"(
ENTRY %e (x: f32[4], i: s32[]) -> (f32[2], f32[4]) {
  %x = f32[4] parameter(0)
  %i = s32[] parameter(1)
  %d = f32[2] dynamic-slice(%x, %i), dynamic_slice_sizes={2}
  %u = f32[2] constant({10, 20})
  %w = f32[4] dynamic-update-slice(%x, %u, %i)
  ROOT %o = (f32[2], f32[4]) tuple(%d, %w)
})"),
                      {F32({4}, {0, 1, 2, 3}), S32({}, {7})});
  EXPECT_THAT(Elements<float>(out.element(0)), ElementsAre(2, 3));
  EXPECT_THAT(Elements<float>(out.element(1)), ElementsAre(0, 1, 10, 20));
}

TEST(Interpreter, ReductionsFoldInOrderFromTheInitValue) {
  Value out = RunText(Module(R"(
%argmax (a: f32[], b: s32[], c: f32[], d: s32[]) -> (f32[], s32[]) {
  %a = f32[] parameter(0)
  %b = s32[] parameter(1)
  %c = f32[] parameter(2)
  %d = s32[] parameter(3)
  %g = pred[] compare(%a, %c), direction=GE
  %v = f32[] select(%g, %a, %c)
  %i = s32[] select(%g, %b, %d)
  ROOT %t = (f32[], s32[]) tuple(%v, %i)
}
ENTRY %e (x: f32[2,3]) -> (f32[3], f32[2], s32[2], f32[2,2]) {
  %x = f32[2,3] parameter(0)
  %z = f32[] constant(0)
  %s = f32[3] reduce(%x, %z), dimensions={0}, to_apply=%add
  %ninf = f32[] constant(-inf)
  %zi = s32[] constant(0)
  %io = s32[2,3] iota(), iota_dimension=1
  %am = (f32[2], s32[2]) reduce(%x, %io, %ninf, %zi), dimensions={1}, to_apply=%argmax
  %v = f32[2] get-tuple-element(%am), index=0
  %i = s32[2] get-tuple-element(%am), index=1
  %rw = f32[2,2] reduce-window(%x, %ninf), window={size=1x2 stride=1x1}, to_apply=%max
  ROOT %o = (f32[3], f32[2], s32[2], f32[2,2]) tuple(%s, %v, %i, %rw)
})"),
                      {F32({2, 3}, {1, 5, 2, 7, 0, 7})});
  EXPECT_THAT(Elements<float>(out.element(0)), ElementsAre(8, 5, 9));
  EXPECT_THAT(Elements<float>(out.element(1)), ElementsAre(5, 7));
  EXPECT_THAT(Elements<int32_t>(out.element(2)), ElementsAre(1, 0));  // ties keep the first (GE)
  EXPECT_THAT(Elements<float>(out.element(3)), ElementsAre(5, 5, 7, 7));
}

TEST(Interpreter, SelectAndScatterSendsEachSourceToItsWindowsMaximum) {
  Value out = RunText(Module(R"(
ENTRY %e (x: f32[4], s: f32[2]) -> f32[4] {
  %x = f32[4] parameter(0)
  %s = f32[2] parameter(1)
  %z = f32[] constant(0)
  ROOT %r = f32[4] select-and-scatter(%x, %s, %z), window={size=2 stride=2}, select=%ge, scatter=%add
})"),
                      {F32({4}, {1, 3, 4, 2}), F32({2}, {10, 20})});
  EXPECT_THAT(Elements<float>(out), ElementsAre(0, 10, 20, 0));
}

TEST(Interpreter, DotAndConvolutionContract) {
  Value out = RunText(Module(R"(
ENTRY %e (a: f32[2,2,3], b: f32[2,3,1], x: f32[1,5,1], k: f32[3,1,1]) -> (f32[2,2,1], f32[1,5,1]) {
  %a = f32[2,2,3] parameter(0)
  %b = f32[2,3,1] parameter(1)
  %d = f32[2,2,1] dot(%a, %b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  %x = f32[1,5,1] parameter(2)
  %k = f32[3,1,1] parameter(3)
  %c = f32[1,5,1] convolution(%x, %k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f
  ROOT %o = (f32[2,2,1], f32[1,5,1]) tuple(%d, %c)
})"),
                      {F32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0}), F32({2, 3, 1}, {1, 1, 1, 7, 8, 9}),
                       F32({1, 5, 1}, {1, 2, 3, 4, 5}), F32({3, 1, 1}, {1, 10, 100})});
  EXPECT_THAT(Elements<float>(out.element(0)), ElementsAre(6, 15, 7, 8));
  EXPECT_THAT(Elements<float>(out.element(1)), ElementsAre(210, 321, 432, 543, 54));
}

TEST(Interpreter, GatherLooksUpRowsAndScatterAddsDuplicates) {
  Value out = RunText(Module(R"(
ENTRY %e (t: f32[4,2], i: s32[3,1], u: f32[3,2]) -> (f32[3,2], f32[4,2]) {
  %t = f32[4,2] parameter(0)
  %i = s32[3,1] parameter(1)
  %g = f32[3,2] gather(%t, %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}
  %u = f32[3,2] parameter(2)
  %s = f32[4,2] scatter(%t, %i, %u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
  ROOT %o = (f32[3,2], f32[4,2]) tuple(%g, %s)
})"),
                      {F32({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31}), S32({3, 1}, {2, 9, 2}),
                       F32({3, 2}, {1, 1, 5, 5, 2, 2})});
  EXPECT_THAT(Elements<float>(out.element(0)), ElementsAre(20, 21, 30, 31, 20, 21));  // 9 clamps to 3
  EXPECT_THAT(Elements<float>(out.element(1)), ElementsAre(0, 1, 10, 11, 23, 24, 30, 31));  // 9 is skipped
}

TEST(Interpreter, SortIsStableAndCarriesItsValuesAndTopKBreaksTiesByIndex) {
  Value out = RunText(Module(R"(
ENTRY %e (k: f32[5], v: s32[5]) -> ((f32[5], s32[5]), (f32[2], s32[2])) {
  %k = f32[5] parameter(0)
  %v = s32[5] parameter(1)
  %s = (f32[5], s32[5]) sort(%k, %v), dimensions={0}, is_stable=true, to_apply=%less
  %t = (f32[2], s32[2]) custom-call(%k), custom_call_target="TopK"
  ROOT %o = ((f32[5], s32[5]), (f32[2], s32[2])) tuple(%s, %t)
})"),
                      {F32({5}, {3, 1, 3, 0, 1}), S32({5}, {0, 1, 2, 3, 4})});
  EXPECT_THAT(Elements<float>(out.element(0).element(0)), ElementsAre(0, 1, 1, 3, 3));
  EXPECT_THAT(Elements<int32_t>(out.element(0).element(1)), ElementsAre(3, 1, 4, 0, 2));
  EXPECT_THAT(Elements<float>(out.element(1).element(0)), ElementsAre(3, 3));
  EXPECT_THAT(Elements<int32_t>(out.element(1).element(1)), ElementsAre(0, 2));
}

TEST(Interpreter, WhileConditionalAndFusionRunTheirComputations) {
  Value out = RunText(Module(R"(
%cond (s: (s32[], f32[2])) -> pred[] {
  %s = (s32[], f32[2]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
%fused (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %y = f32[2] multiply(%x, %x)
}
%body (s: (s32[], f32[2])) -> (s32[], f32[2]) {
  %s = (s32[], f32[2]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[2] get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  %y = f32[2] fusion(%x), kind=kLoop, calls=%fused
  ROOT %t = (s32[], f32[2]) tuple(%j, %y)
}
%neg (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %y = f32[2] negate(%x)
}
%id (x: f32[2]) -> f32[2] {
  ROOT %x = f32[2] parameter(0)
}
ENTRY %e (x: f32[2], b: s32[]) -> ((s32[], f32[2]), f32[2]) {
  %x = f32[2] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[2]) tuple(%zero, %x)
  %w = (s32[], f32[2]) while(%init), condition=%cond, body=%body
  %b = s32[] parameter(1)
  %c = f32[2] conditional(%b, %x, %x), branch_computations={%neg, %id}
  ROOT %o = ((s32[], f32[2]), f32[2]) tuple(%w, %c)
})"),
                      {F32({2}, {2, -1}), S32({}, {5})});
  EXPECT_THAT(Elements<int32_t>(out.element(0).element(0)), ElementsAre(3));
  EXPECT_THAT(Elements<float>(out.element(0).element(1)), ElementsAre(256, 1));
  EXPECT_THAT(Elements<float>(out.element(1)), ElementsAre(2, -1));  // index 5 is out of range: the last branch
}

// reduce-precision rounds the mantissa to nearest even and clamps the exponent range as XLA does (values worked
// by hand; tests/hlo/python/test_target_modules.py compares more with jax.lax.reduce_precision).
TEST(Interpreter, ReducePrecisionRoundsToNearestEvenAndClampsTheExponentRange) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // bfloat16's precision (8 exponent bits, 7 mantissa bits): 1 + 2^-8 and 1 + 3 x 2^-8 are ties (to even: 1 and
  // 1 + 2^-6); 1 + 2^-8 + 2^-20 is above the tie (1 + 2^-7); 3.4e38 rounds up into the exponent: inf.
  Value bf = RunText("HloModule t\nENTRY %e (a: f32[6]) -> f32[6] {\n  %a = f32[6] parameter(0)\n"
                     "  ROOT %r = f32[6] reduce-precision(%a), exponent_bits=8, mantissa_bits=7\n}\n",
                     {F32({6}, {1.00390625f, 1.01171875f, 1.0f + 0x1p-8f + 0x1p-20f, -2.5f, 3.4e38f, nan})});
  const auto b = Elements<float>(bf);
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], 1.015625f);
  EXPECT_EQ(b[2], 1.0078125f);
  EXPECT_EQ(b[3], -2.5f);
  EXPECT_EQ(b[4], inf);
  EXPECT_TRUE(std::isnan(b[5]));
  // float16's range (5 exponent bits, 10 mantissa bits): 65504 stays, 65536 overflows to inf, 2^-14 (the smallest
  // normal) stays, 2^-15 (a half denormal) flushes to a zero of its sign. No mantissa bit left: 1.6 rounds to 2,
  // a NaN stays a NaN (XLA CPU's lowering; its older emitter made it inf).
  Value h = RunText("HloModule t\nENTRY %e (a: f32[5]) -> f32[5] {\n  %a = f32[5] parameter(0)\n"
                    "  ROOT %r = f32[5] reduce-precision(%a), exponent_bits=5, mantissa_bits=10\n}\n",
                    {F32({5}, {65504.0f, -65536.0f, 0x1p-14f, -0x1p-15f, 0.1f})});
  const auto f = Elements<float>(h);
  EXPECT_EQ(f[0], 65504.0f);
  EXPECT_EQ(f[1], -inf);
  EXPECT_EQ(f[2], 0x1p-14f);
  EXPECT_EQ(f[3], 0.0f);
  EXPECT_TRUE(std::signbit(f[3]));
  EXPECT_EQ(f[4], 0.0999755859375f);  // float16(0.1)
  Value z = RunText("HloModule t\nENTRY %e (a: f32[2]) -> f32[2] {\n  %a = f32[2] parameter(0)\n"
                    "  ROOT %r = f32[2] reduce-precision(%a), exponent_bits=8, mantissa_bits=0\n}\n",
                    {F32({2}, {nan, 1.6f})});
  EXPECT_TRUE(std::isnan(Elements<float>(z)[0]));
  EXPECT_EQ(Elements<float>(z)[1], 2.0f);
}

TEST(Interpreter, RefusesArgumentsOfTheWrongShape) {
  try {
    RunText(Module("ENTRY %e (x: f32[2]) -> f32[2] {\n  ROOT %x = f32[2] parameter(0)\n}"), {F32({3}, {1, 2, 3})});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("argument 0 of %e is f32[3]; parameter 0 is f32[2]"));
  }
}

TEST(Interpreter, ACollectiveOverGroupsOfOneIsTheIdentityOnOneDevice) {
  Value out = RunText(Module(R"(
ENTRY %e (x: f32[2]) -> (f32[2], u32[]) {
  %x = f32[2] parameter(0)
  %a = f32[2] all-reduce(%x), replica_groups={}, to_apply=%add
  %p = u32[] partition-id()
  ROOT %o = (f32[2], u32[]) tuple(%a, %p)
})"),
                      {F32({2}, {1, 2})});
  EXPECT_THAT(Elements<float>(out.element(0)), ElementsAre(1, 2));
  EXPECT_THAT(Elements<uint32_t>(out.element(1)), ElementsAre(0u));
}

TEST(Interpreter, AWhileLoopThatNeverEndsFailsAtItsTimeLimitNamingIt) {
  auto m = ParseModule(
      "HloModule m\n"
      "%cond (s: s32[]) -> pred[] {\n  %s = s32[] parameter(0)\n  ROOT %t = pred[] constant(true)\n}\n"
      "%body (s: s32[]) -> s32[] {\n  %s = s32[] parameter(0)\n  %one = s32[] constant(1)\n"
      "  ROOT %n = s32[] add(%s, %one)\n}\n"
      "ENTRY %e (x: s32[]) -> s32[] {\n  %x = s32[] parameter(0)\n"
      "  ROOT %w = s32[] while(%x), condition=%cond, body=%body\n}\n", "forever.txt");
  InterpreterOptions options;
  options.max_while_seconds = 0.2;
  Interpreter interp(*m, InterpreterPlan::Build(*m), {}, nullptr, options);
  ValueBuilder x(DType::kI32, {});
  x.data<int32_t>()[0] = 0;
  try {
    interp.Run({std::move(x).Finish()});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
    EXPECT_THAT(e.message(), HasSubstr("forever.txt:13:3: while loop %w ran"));
    EXPECT_THAT(e.message(), HasSubstr("max_while_seconds = 0.2"));
  }
  options.max_while_iterations = 1000;
  options.max_while_seconds = 300;
  Interpreter counted(*m, InterpreterPlan::Build(*m), {}, nullptr, options);
  ValueBuilder y(DType::kI32, {});
  y.data<int32_t>()[0] = 0;
  EXPECT_THROW(counted.Run({std::move(y).Finish()}), Error);
}

}  // namespace
}  // namespace spmdsim::hlo
