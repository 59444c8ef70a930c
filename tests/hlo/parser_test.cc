#include "hlo/parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "hlo/groups.h"
#include "hlo/verify.h"

namespace spmdsim::hlo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What jax.jit(f).lower(x, w).compile().as_text() printed for a sharded matmul + tanh + sum on 8 CPU devices
// (JAX 0.10.2), abridged to its computations.
constexpr char kMatmulModule[] =
    R"(HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[2,2]{1,0}, f32[2,2]{1,0})->f32[2]{0}}, allow_spmd_sharding_propagation_to_parameters={false,false}, allow_spmd_sharding_propagation_to_output={true}, num_partitions=8

FileNames
1 "/tmp/t1.py"

FunctionNames
1 "<module>"
2 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=12 end_line=12 column=4 end_column=4}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


%add.clone (x.3: f32[], y.1: f32[]) -> f32[] {
  %x.3 = f32[] parameter(0)
  %y.1 = f32[] parameter(1)
  ROOT %add.1 = f32[] add(%x.3, %y.1)
}

%region_0.0 (reduce_sum.0: f32[], reduce_sum.1: f32[]) -> f32[] {
  %reduce_sum.0 = f32[] parameter(0), metadata={op_name="jit(f)/reduce_sum"}
  %reduce_sum.1 = f32[] parameter(1), metadata={op_name="jit(f)/reduce_sum"}
  ROOT %reduce_sum.2 = f32[] add(%reduce_sum.0, %reduce_sum.1), metadata={op_name="jit(f)/reduce_sum" stack_frame_id=3}
}

%fused_computation (param_0.2: f32[2,2]) -> f32[2] {
  %param_0.2 = f32[2,2]{1,0} parameter(0)
  %tanh.3 = f32[2,2]{1,0} tanh(%param_0.2), metadata={op_name="jit(f)/tanh" stack_frame_id=3}
  %constant.0.clone.1 = f32[] constant(0)
  ROOT %reduce.1 = f32[2]{0} reduce(%tanh.3, %constant.0.clone.1), dimensions={1}, to_apply=%region_0.0, metadata={op_name="jit(f)/reduce_sum" stack_frame_id=3}
}

ENTRY %main.0_spmd (param: f32[2,2], param.1: f32[2,2]) -> f32[2] {
  %param = f32[2,2]{1,0} parameter(0), sharding={devices=[2,4]<=[8]}, metadata={op_name="x"}
  %param.1 = f32[2,2]{1,0} parameter(1), sharding={devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}, metadata={op_name="w"}
  %dot = f32[2,2]{1,0} dot(%param, %param.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general" stack_frame_id=2}
  %all-reduce = f32[2,2]{1,0} all-reduce(%dot), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%add.clone, metadata={op_name="jit(f)/dot_general" stack_frame_id=2}
  ROOT %tanh_reduce_fusion = f32[2]{0} fusion(%all-reduce), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(f)/reduce_sum" stack_frame_id=3}
}
)";

std::string ErrorOf(const std::string& text) {
  try {
    ParseModule(text, "m.txt");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.message();
  }
  return "no error";
}

// A module around one entry body (instructions), for short tests.
std::string Entry(const std::string& body) { return "HloModule m\n\nENTRY %e {\n" + body + "\n}\n"; }

constexpr char kSum[] = "%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
                        "  ROOT %c = f32[] add(%a, %b)\n}\n";
// The same with a scalar sum computation defined first.
std::string WithSum(const std::string& body) {
  return std::string("HloModule m\n") + kSum + "ENTRY %e {\n" + body + "\n}\n";
}

TEST(Parser, ReadsAModuleThatJaxCompiled) {
  auto m = ParseModule(kMatmulModule, "jit_f.txt");
  EXPECT_EQ(m->name(), "jit_f");
  EXPECT_EQ(m->num_partitions(), 8);
  EXPECT_TRUE(m->is_scheduled());
  EXPECT_EQ(m->computation_count(), 4);
  const Computation* entry = m->entry();
  EXPECT_EQ(entry->name(), "main.0_spmd");
  EXPECT_EQ(entry->parameter_count(), 2);
  const Instruction* root = entry->root();
  EXPECT_EQ(root->opcode(), Opcode::kFusion);
  EXPECT_EQ(root->attrs().fusion_kind, "kLoop");
  EXPECT_EQ(root->called()[0]->name(), "fused_computation");
  EXPECT_EQ(root->attrs().op_name, "jit(f)/reduce_sum");
  const Instruction* ar = root->operand(0);
  EXPECT_EQ(ar->opcode(), Opcode::kAllReduce);
  EXPECT_EQ(ar->attrs().channel_id, 1);
  EXPECT_TRUE(ar->attrs().use_global_device_ids);
  EXPECT_EQ(ar->to_apply()->name(), "add.clone");
  EXPECT_EQ(GroupsOf(*ar, 1, 8), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  const Instruction* dot = ar->operand(0);
  EXPECT_THAT(dot->attrs().dot.lhs_contracting, ElementsAre(1));
  EXPECT_THAT(dot->attrs().dot.rhs_contracting, ElementsAre(0));
  EXPECT_EQ(dot->location().line, 39);
  EXPECT_EQ(dot->location().column, 3);
  EXPECT_EQ(dot->Where(), "jit_f.txt:39:3");
  EXPECT_THAT(m->entry_parameter_layouts()[0].minor_to_major, ElementsAre(1, 0));
}

TEST(Parser, ExpandsIotaShardingsAndReplicaGroups) {
  auto m = ParseModule(kMatmulModule);
  const Sharding& w = *m->entry()->parameter(1)->attrs().sharding;
  EXPECT_EQ(w.kind, Sharding::Kind::kTiled);
  EXPECT_THAT(w.tile_dims, ElementsAre(4, 1, 2));
  // iota(8) as [2,4], transposed to [4,2]: 0,4,1,5,2,6,3,7.
  EXPECT_THAT(w.tile_devices, ElementsAre(0, 4, 1, 5, 2, 6, 3, 7));
  EXPECT_EQ(w.subgroup_dims, 1);
  auto h = ParseModule("HloModule m, num_partitions=8\n" + std::string(kSum) +
                       "ENTRY %e {\n  %p = f32[4] parameter(0)\n"
                       "  ROOT %a = f32[4] all-reduce(%p), channel_id=3, replica_groups=[4,2]<=[2,4]T(1,0), "
                       "use_global_device_ids=true, to_apply=%sum\n}\n");
  EXPECT_EQ(GroupsOf(*h->entry()->root(), 1, 8),
            (std::vector<std::vector<int64_t>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

// Mesh-axes replica groups (JAX >= 0.8 prints these): the devices that differ only in the named axes, over the
// mesh's devices in its order: iota, the ids listed, or the ids in iota form "[reshape]T(perm)".
TEST(Parser, ExpandsMeshAxesReplicaGroups) {
  auto groups = [](const std::string& form) {
    auto h = ParseModule("HloModule m, num_partitions=8\n" + std::string(kSum) +
                         "ENTRY %e {\n  %p = f32[4] parameter(0)\n"
                         "  ROOT %a = f32[4] all-reduce(%p), channel_id=3, replica_groups=" + form +
                         ", use_global_device_ids=true, to_apply=%sum\n}\n");
    return GroupsOf(*h->entry()->root(), 1, 8);
  };
  using G = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(groups("mesh['a'=2,'b'=4] {'a'}"), (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(groups("mesh['a'=2,'b'=4] {'b'}"), (G{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  // The mesh's device (a, c) is iota(8).reshape(2,4).T.flat[2a + c] = 4c + a: 'a' groups what JAX's last axis does.
  EXPECT_EQ(groups("mesh['a'=4,'b'=1,'c'=2], device_ids=([2,4]T(1,0)) {'a'}"), (G{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(groups("mesh['a'=4,'b'=1,'c'=2], device_ids=([0,4,1,5,2,6,3,7]) {'c'}"),
            (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(groups("mesh['a'=4,'b'=2], device_ids=([[0,4],[1,5],[2,6],[3,7]]) {'a'}"), (G{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(groups("mesh['a'=8] {'a':(1)2}"), (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(Parser, ReadsTypedAttributes) {
  auto m = ParseModule(WithSum(
      "  %x = f32[4,6]{1,0} parameter(0)\n"
      "  %z = f32[] constant(0)\n"
      "  %s = f32[2,2]{1,0} slice(%x), slice={[0:4:2], [1:5:2]}\n"
      "  %pd = f32[7,11]{1,0} pad(%x, %z), padding=1_2x0_0_1\n"
      "  %rw = f32[3,5]{1,0} reduce-window(%x, %z), window={size=2x2 stride=1x1 pad=0_0x0_0}, to_apply=%sum\n"
      "  %c = pred[4,6]{1,0} compare(%x, %x), direction=LT, type=TOTALORDER\n"
      "  %t = f32[6,4]{0,1} transpose(%x), dimensions={1,0}\n"
      "  ROOT %r = (f32[2,2], f32[7,11], f32[3,5], pred[4,6], f32[6,4]) tuple(%s, %pd, %rw, %c, %t)"));
  const Computation* e = m->entry();
  const Instruction* s = e->instruction(2);
  ASSERT_EQ(s->attrs().slice.size(), 2u);
  EXPECT_EQ(s->attrs().slice[1].start, 1);
  EXPECT_EQ(s->attrs().slice[1].limit, 5);
  EXPECT_EQ(s->attrs().slice[1].stride, 2);
  const Instruction* pd = e->instruction(3);
  EXPECT_EQ(pd->attrs().padding[0].high, 2);
  EXPECT_EQ(pd->attrs().padding[1].interior, 1);
  const Instruction* rw = e->instruction(4);
  EXPECT_EQ(rw->attrs().window[0].size, 2);
  const Instruction* c = e->instruction(5);
  EXPECT_EQ(c->attrs().direction, ComparisonDirection::kLt);
  EXPECT_EQ(c->attrs().comparison_type, ComparisonType::kTotalOrder);
  EXPECT_THAT(e->instruction(6)->shape().minor_to_major, ElementsAre(0, 1));
  EXPECT_FALSE(e->instruction(6)->shape().HasDefaultLayout());
}

TEST(Parser, ReadsConstants) {
  auto m = ParseModule(Entry(
      "  %a = f32[2,2] constant({ {1, 2.5}, {-inf, nan} })\n"
      "  %b = pred[3] constant({true, false, true})\n"
      "  %c = s8[2] constant({-128, 127})\n"
      "  %d = u32[] constant(4294967295)\n"
      "  %e = bf16[] constant(0.1)\n"
      "  %f = f32[1000] constant({...})\n"
      "  ROOT %t = (f32[2,2], pred[3], s8[2], u32[], bf16[], f32[1000]) tuple(%a, %b, %c, %d, %e, %f)"));
  const Computation* e = m->entry();
  const auto& a = e->instruction(0)->literal().bytes;
  ASSERT_EQ(a.size(), 16u);
  float v[4];
  std::memcpy(v, a.data(), 16);
  EXPECT_EQ(v[1], 2.5f);
  EXPECT_TRUE(std::isinf(v[2]) && v[2] < 0);
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_THAT(e->instruction(1)->literal().bytes, ElementsAre(1, 0, 1));
  EXPECT_THAT(e->instruction(2)->literal().bytes, ElementsAre(0x80, 0x7f));
  EXPECT_THAT(e->instruction(3)->literal().bytes, ElementsAre(0xff, 0xff, 0xff, 0xff));
  // bfloat16(0.1) = 0x3dcd (round to nearest even of 0x3dcccccd).
  EXPECT_THAT(e->instruction(4)->literal().bytes, ElementsAre(0xcd, 0x3d));
  EXPECT_TRUE(e->instruction(5)->literal().elided);
}

TEST(Parser, ReadsWhileTripCountsConvolutionsAndTheOlderOperandForm) {
  auto m = ParseModule(
      "HloModule m\n"
      "%cond (s: (s32[], f32[2])) -> pred[] {\n"
      "  %s = (s32[], f32[2]) parameter(0)\n"
      "  %i = s32[] get-tuple-element((s32[], f32[2]) %s), index=0\n"
      "  %n = s32[] constant(4)\n"
      "  ROOT %lt = pred[] compare(s32[] %i, s32[] %n), direction=LT\n"
      "}\n"
      "%body (s: (s32[], f32[2])) -> (s32[], f32[2]) {\n"
      "  ROOT %s = (s32[], f32[2]) parameter(0)\n"
      "}\n"
      "ENTRY %e (x: f32[1,3,5,2], k: f32[3,3,2,4], s: (s32[], f32[2])) -> (f32[1,3,5,4], (s32[], f32[2])) {\n"
      "  %x = f32[1,3,5,2] parameter(0)\n"
      "  %k = f32[3,3,2,4] parameter(1)\n"
      "  %s = (s32[], f32[2]) parameter(2)\n"
      "  %cv = f32[1,3,5,4] convolution(%x, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
      "  %w = (s32[], f32[2]) while(%s), condition=%cond, body=%body, "
      "backend_config={\"known_trip_count\":{\"n\":\"4\"}}\n"
      "  ROOT %t = (f32[1,3,5,4], (s32[], f32[2])) tuple(%cv, %w)\n"
      "}\n");
  const Instruction* cv = m->entry()->instruction(3);
  EXPECT_EQ(cv->attrs().conv.input_feature, 3);
  EXPECT_THAT(cv->attrs().conv.input_spatial, ElementsAre(1, 2));
  EXPECT_EQ(cv->attrs().conv.kernel_output_feature, 3);
  EXPECT_EQ(m->entry()->instruction(4)->attrs().known_trip_count, 4);
}

// Every opcode of xla/hlo/ir/hlo_opcode.h (HLO_OPCODE_LIST) is known, so that "not one of XLA's" is never said of
// one XLA prints.
TEST(Parser, KnowsEveryOpcodeXlaPrints) {
  const char* const kXlaOpcodes[] = {
      "abs", "acos", "acosh", "add", "add-dependency", "after-all", "all-gather", "all-gather-done",
      "all-gather-start", "all-reduce", "all-reduce-done", "all-reduce-start", "all-to-all", "and", "asin",
      "asinh", "async-done", "async-start", "async-update", "atan", "atan2", "atanh", "batch-norm-grad",
      "batch-norm-inference", "batch-norm-training", "bitcast", "bitcast-convert", "broadcast", "call", "cbrt",
      "ceil", "cholesky", "clamp", "count-leading-zeros", "collective-broadcast", "collective-permute",
      "collective-permute-done", "collective-permute-start", "collective-reduce", "compare", "complex",
      "concatenate", "conditional", "constant", "convert", "convolution", "copy", "copy-done", "copy-start",
      "cosine", "cosh", "custom-call", "divide", "domain", "dot", "dynamic-reshape", "dynamic-slice",
      "dynamic-update-slice", "erf", "exponential", "exponential-minus-one", "fft", "floor", "fusion", "gather",
      "get-dimension-size", "get-tuple-element", "imag", "infeed", "iota", "is-finite", "log", "log-plus-one",
      "logistic", "map", "maximum", "minimum", "mulhi", "multiply", "negate", "not", "opt-barrier", "or",
      "outfeed", "pad", "parameter", "partition-id", "popcnt", "power", "ragged-all-to-all", "ragged-dot", "real",
      "recv", "recv-done", "reduce", "reduce-precision", "reduce-scatter", "reduce-window", "remainder",
      "replica-id", "reshape", "reverse", "rng", "rng-bit-generator", "rng-get-and-update-state",
      "round-nearest-afz", "round-nearest-even", "rsqrt", "scaled-dot", "scan", "scatter", "select",
      "select-and-scatter", "send", "send-done", "set-dimension-size", "shift-left", "shift-right-arithmetic",
      "shift-right-logical", "shuffle", "sign", "sine", "sinh", "slice", "sort", "sqrt", "stochastic-convert",
      "subtract", "tan", "tanh", "topk", "transpose", "triangular-solve", "tuple", "while", "xor"};
  for (const char* name : kXlaOpcodes) {
    Opcode op = Opcode::kAdd;
    EXPECT_TRUE(ParseOpcode(name, &op)) << name;
    EXPECT_EQ(OpcodeName(op), name);
  }
  EXPECT_EQ(std::size(kXlaOpcodes), 136u);
}

TEST(Parser, ErrorsNameFileLineAndColumn) {
  EXPECT_EQ(ErrorOf(Entry("  ROOT %x = f32[] foo()")),
            "m.txt:4:19: unknown opcode 'foo': not one of XLA's (add, dot, fusion, all-reduce, ...)");
  EXPECT_THAT(ErrorOf(Entry("  ROOT %x = f32[] negate(%y)")),
              HasSubstr("m.txt:4:26: operand %y is not defined above its use in this computation"));
  EXPECT_THAT(ErrorOf(Entry("  ROOT %x = q32[] parameter(0)")), HasSubstr("m.txt:4:13: unknown element type 'q32'"));
  EXPECT_THAT(ErrorOf(Entry("  %x = f32[2] parameter(0)\n  ROOT %s = f32[2] slice(%x), slice={[0:2]")),
              HasSubstr("m.txt:5:37: unbalanced brackets in slice: missing '}' before the end of the line"));
  EXPECT_THAT(ErrorOf("HloModule m\nENTRY %e {\n  ROOT %x = f32[] parameter(0)\n"), HasSubstr("is not closed"));
  EXPECT_THAT(ErrorOf(""), HasSubstr("m.txt:1:1: expected 'HloModule name'"));
  EXPECT_THAT(ErrorOf(Entry("  ROOT %c = f32[2] constant({1, 2, 3})")), HasSubstr("m.txt:4:34: expected '}'"));
}

TEST(Verifier, RefusesShapesThatDoNotFollowXlasRules) {
  EXPECT_THAT(ErrorOf(Entry("  %a = f32[2] parameter(0)\n  %b = f32[3] parameter(1)\n  ROOT %c = f32[2] add(%a, %b)")),
              HasSubstr("m.txt:6:3: %c (add): operands have shapes f32[2] and f32[3]"));
  EXPECT_THAT(ErrorOf(Entry("  %a = f32[2,3] parameter(0)\n  %b = f32[4,5] parameter(1)\n"
                            "  ROOT %d = f32[2,5] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}")),
              HasSubstr("contracting dimensions 1 of f32[2,3] and 0 of f32[4,5] differ in size"));
  EXPECT_THAT(ErrorOf(Entry("  %a = f32[4] parameter(0)\n  ROOT %s = f32[3] slice(%a), slice={[0:5]}")),
              HasSubstr("needs 0 <= start <= limit <= size"));
  EXPECT_THAT(ErrorOf(Entry("  %a = f32[4] parameter(0)\n  ROOT %b = f32[4,2] broadcast(%a), dimensions={1}")),
              HasSubstr("operand dimension 0 (size 4) maps to output dimension 1 of size 2"));
  EXPECT_THAT(ErrorOf(Entry("  %a = s32[4] parameter(0)\n  ROOT %b = s32[4] exponential(%a)")),
              HasSubstr("needs a floating-point operand, not s32"));
  EXPECT_THAT(ErrorOf("HloModule m, num_partitions=4\n" + std::string(kSum) +
                      "ENTRY %e {\n  %p = f32[4] parameter(0)\n"
                      "  ROOT %a = f32[4] all-reduce(%p), channel_id=1, replica_groups={{0,1},{1,2}}, "
                      "use_global_device_ids=true, to_apply=%sum\n}\n"),
              HasSubstr("devices 1 appears in two replica groups"));
}

// What libtpu and XLA's GPU compiler print beside the CPU's: comments inside operand lists, tuple shapes and
// parameter lists (every fifth element is numbered /*index=5*/).
TEST(Parser, SkipsIndexCommentsInOperandListsTupleShapesAndParameterLists) {
  auto m = ParseModule(
      "HloModule m\n\n"
      "ENTRY %e (a: f32[], b: f32[], c: f32[], d: f32[], e: f32[], /*index=5*/f: f32[]) -> (f32[], f32[], f32[], "
      "f32[], f32[], /*index=5*/f32[]) {\n"
      "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  %c = f32[] parameter(2)\n"
      "  %d = f32[] parameter(3)\n  %e = f32[] parameter(4)\n  %f = f32[] parameter(5)\n"
      "  ROOT %t = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[]) tuple(%a, %b, %c, %d, %e, /*index=5*/%f)\n"
      "}\n");
  EXPECT_EQ(m->entry()->root()->operand_count(), 6);
  EXPECT_EQ(m->entry()->root()->shape().tuple.size(), 6u);
  EXPECT_THAT(ErrorOf(Entry("  ROOT %a = f32[] parameter(0) /* open")),
              HasSubstr("m.txt:4:32: unterminated /* comment"));
}

// The debug information after the header: instructions' stack_frame_id name Python source locations.
TEST(Parser, ReadsTheStackFramesThatMetadataNames) {
  auto m = ParseModule(
      "HloModule m\n\nFileNames\n1 \"/work/step.py\"\n2 \"/jax/api.py\"\n\nFunctionNames\n1 \"<module>\"\n2 \"main\"\n"
      "3 \"step\"\n\nFileLocations\n"
      "1 {file_name_id=1 function_name_id=1 line=333 end_line=333 column=4 end_column=10}\n"
      "2 {file_name_id=1 function_name_id=2 line=287 end_line=287 column=14 end_column=30}\n"
      "3 {file_name_id=2 function_name_id=3 line=133 end_line=134 column=18 end_column=2}\n\nStackFrames\n"
      "1 {file_location_id=1 parent_frame_id=1}\n2 {file_location_id=2 parent_frame_id=2}\n"
      "3 {file_location_id=3 parent_frame_id=3}\n\n\n"
      "ENTRY %e {\n  ROOT %x = f32[] parameter(0), metadata={op_name=\"x\" stack_frame_id=3 "
      "scheduling_name=\"x.1\" deduplicated_name=\"x.0\" source_file=\"/work/step.py\" source_line=12}\n}\n");
  EXPECT_EQ(m->stack_frame_count(), 3);
  const Instruction& x = *m->entry()->root();
  EXPECT_EQ(x.attrs().stack_frame_id, 3);
  EXPECT_EQ(x.attrs().scheduling_name, "x.1");
  EXPECT_EQ(x.attrs().deduplicated_name, "x.0");
  EXPECT_EQ(x.attrs().source_file, "/work/step.py");
  EXPECT_EQ(x.attrs().source_line, 12);
  const StackFrame* f = m->SourceOf(x);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->file, "/jax/api.py");
  EXPECT_EQ(f->function, "step");
  EXPECT_EQ(f->line, 133);
  EXPECT_EQ(f->end_line, 134);
  EXPECT_EQ(f->column, 18);
  // The chain: step <- main <- <module>.
  EXPECT_EQ(f->parent_id, 2);
  EXPECT_EQ(m->stack_frame(f->parent_id)->function, "main");
  EXPECT_EQ(m->stack_frame(m->stack_frame(2)->parent_id)->function, "<module>");
  EXPECT_EQ(m->stack_frame(1)->parent_id, 0);
  EXPECT_EQ(m->stack_frame(0), nullptr);
  EXPECT_EQ(m->stack_frame(4), nullptr);
}

TEST(Parser, RefusesDebugInformationThatNamesNothing) {
  const std::string head = "HloModule m\nFileNames\n1 \"a.py\"\nFunctionNames\n1 \"f\"\nFileLocations\n";
  const std::string entry = "ENTRY %e {\n  ROOT %x = f32[] parameter(0)\n}\n";
  EXPECT_THAT(ErrorOf(head + "1 {file_name_id=2 function_name_id=1 line=1}\nStackFrames\n" + entry),
              HasSubstr("m.txt:7:17: file_name_id 2 names no FileNames entry (there are 1)"));
  EXPECT_THAT(ErrorOf(head + "1 {file_name_id=1 function_name_id=1 line=1}\nStackFrames\n"
                             "1 {file_location_id=1 parent_frame_id=3}\n" + entry),
              HasSubstr("m.txt:9:39: parent_frame_id 3 of frame 1 must be from 1 (no parent) to 1"));
  EXPECT_THAT(ErrorOf(head + "1 {file_name_id=1 function_name_id=1 line=1}\nStackFrames\n1 {file_location_id=1}\n" +
                      entry),
              HasSubstr("m.txt:9:3: the entry has no parent_frame_id"));
  EXPECT_THAT(ErrorOf(head + "1 {file_name_id=1 colour=2}\n" + entry), HasSubstr("m.txt:7:19: unknown field 'colour'"));
  EXPECT_THAT(ErrorOf("HloModule m\nFileNames\n1 \"a.py\"\n" + entry),
              HasSubstr("m.txt:4:1: expected the debug information's FunctionNames section, found 'ENTRY %e {'"));
}

// Strings hold C escapes (\' in op_name="p[\'embed\']"), and any bytes: invalid UTF-8 is made valid (U+FFFD) so
// that reports in JSON and Python can hold them.
TEST(Parser, UnescapesStringsAndMakesThemValidUtf8) {
  auto m = ParseModule(
      Entry("  ROOT %p = f32[] parameter(0), metadata={op_name=\"p[\\'embed\\'] \\\"q\\\" \xff\xfe caf\xc3\xa9\"}"));
  EXPECT_EQ(m->entry()->root()->attrs().op_name, "p['embed'] \"q\" \xef\xbf\xbd\xef\xbf\xbd caf\xc3\xa9");
  auto c = ParseModule(Entry("  ROOT %c = f32[] custom-call(), custom_call_target=\"a\\x41\\101\xc0\xaf\""));
  EXPECT_EQ(c->entry()->root()->attrs().custom_call_target, "aAA\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(Parser, ReadsTheModuleHeadersAliasesAndFrontendAttributes) {
  auto m = ParseModule(
      "HloModule m, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, "
      "entry_computation_layout={(f32[4]{0}, f32[2]{0})->(f32[4]{0}, f32[2]{0})}, frontend_attributes="
      "{arg_layout_modes=\"default;default\",xla.sdy.meshes={empty_mesh = #sdy.mesh<[]>}}\n"
      "ENTRY %e (a: f32[4], b: f32[2]) -> (f32[4], f32[2]) {\n  %a = f32[4]{0} parameter(0)\n"
      "  %b = f32[2]{0} parameter(1)\n  ROOT %t = (f32[4]{0}, f32[2]{0}) tuple(%a, %b)\n}\n");
  ASSERT_EQ(m->input_output_aliases().size(), 2u);
  const InputOutputAlias& a = m->input_output_aliases()[1];
  EXPECT_THAT(a.output_index, ElementsAre(1));
  EXPECT_EQ(a.parameter_number, 1);
  EXPECT_TRUE(a.parameter_index.empty());
  EXPECT_TRUE(a.must_alias);
  EXPECT_FALSE(m->input_output_aliases()[0].must_alias);
  EXPECT_EQ(m->frontend_attributes().at("arg_layout_modes"), "default;default");
  EXPECT_EQ(m->frontend_attributes().at("xla.sdy.meshes"), "{empty_mesh = #sdy.mesh<[]>}");
  const std::string body = "ENTRY %e {\n  %a = f32[4] parameter(0)\n  ROOT %t = (f32[4], f32[2]) tuple(%a, %a)\n}\n";
  EXPECT_THAT(ErrorOf("HloModule m, input_output_alias={ {0}: (3, {}, may-alias) }\n" + body),
              HasSubstr("m.txt:1:33: input_output_alias {0}: (3, {}): %e has no parameter 3 (it has 1)"));
  EXPECT_THAT(ErrorOf("HloModule m, input_output_alias={ {1}: (0, {}, may-alias) }\n" + body),
              HasSubstr("the output is f32[2] and the parameter f32[4]; an alias needs one array shape"));
  EXPECT_THAT(ErrorOf("HloModule m, input_output_alias={ {2}: (0, {}, may-alias) }\n" + body),
              HasSubstr("the result (f32[4], f32[2]) has no such output"));
  EXPECT_THAT(ErrorOf("HloModule m, input_output_alias={ {0}: (0, {}, maybe) }\n" + body),
              HasSubstr("m.txt:1:48: alias kind 'maybe' is not may-alias or must-alias"));
}

// TPU7x SparseCore computations end with `}, execution_thread="sparsecore"`.
TEST(Parser, ReadsAComputationsExecutionThread) {
  auto m = ParseModule(
      "HloModule m\n%sc (a: f32[]) -> f32[] {\n  ROOT %a = f32[] parameter(0)\n}, execution_thread=\"sparsecore\"\n"
      "ENTRY %e {\n  %p = f32[] parameter(0)\n  ROOT %c = f32[] call(%p), to_apply=%sc\n}\n");
  EXPECT_EQ(m->FindComputation("sc")->execution_thread(), "sparsecore");
  EXPECT_EQ(m->entry()->execution_thread(), "main");
  EXPECT_THAT(ErrorOf("HloModule m\nENTRY %e {\n  ROOT %a = f32[] parameter(0)\n}, colour=\"red\"\n"),
              HasSubstr("m.txt:4:4: unknown computation attribute 'colour'; valid: execution_thread"));
}

// XLA's async shorthand: `X-start` of an X with no opcode of that name is an async-start wrapping X in a
// computation the parser makes (xla/hlo/parser/hlo_parser.cc), with X's attributes; -done shares it.
constexpr char kAsyncShorthand[] = R"(HloModule m, num_partitions=4
%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}
%sc (p: f32[8], t: token[]) -> f32[8] {
  %p = f32[8] parameter(0)
  %t = token[] parameter(1)
  ROOT %n = f32[8] negate(%p)
}, execution_thread="sparsecore"
ENTRY %e {
  %a = f32[8]{0} parameter(0)
  %b = f32[8]{0} parameter(1)
  %rs = ((f32[8]{0}, f32[8]{0}), (f32[2]{0}, f32[2]{0})) reduce-scatter-start(%a, %b), channel_id=3, replica_groups={{0,1,2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=%add, metadata={op_name="rs"}, backend_config={"collective_backend_config":{"is_sync":true,"is_pipelined":false}}
  %rsd = (f32[2]{0}, f32[2]{0}) reduce-scatter-done(%rs), metadata={op_name="rs"}
  %ss = ((f32[8]{0}), f32[4]{0:S(1)}, s32[]{:S(2)}) slice-start(%a), slice={[0:4]}
  %sd = f32[4]{0:S(1)} slice-done(%ss)
  %tok = token[] after-all()
  %cs = ((f32[8]{0}, token[]), f32[8]{0}) call-start(%a, %tok), async_execution_thread="sparsecore", to_apply=%sc
  %cd = f32[8]{0} call-done(%cs)
  ROOT %r = ((f32[2]{0}, f32[2]{0}), f32[4]{0}, f32[8]{0}) tuple(%rsd, %sd, %cd)
}
)";

TEST(Parser, ReadsXlasAsyncShorthandAsAsyncStartAndDoneAroundTheWrappedOp) {
  auto m = ParseModule(kAsyncShorthand, "async.txt");
  const Computation* e = m->entry();
  const Instruction* rs = e->instruction(2);
  EXPECT_EQ(rs->opcode(), Opcode::kAsyncStart);
  EXPECT_EQ(rs->name(), "rs");
  ASSERT_EQ(rs->called().size(), 1u);
  const Computation* wrapped = rs->called()[0];
  EXPECT_TRUE(wrapped->is_async_wrapped());
  EXPECT_EQ(wrapped->name(), "rs.async_wrapped");
  EXPECT_EQ(wrapped->parameter_count(), 2);
  EXPECT_EQ(wrapped->parameter(1)->shape().ToString(), "f32[8]");
  const Instruction* op = AsyncWrapped(*rs);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op, wrapped->root());
  EXPECT_EQ(op->opcode(), Opcode::kReduceScatter);
  EXPECT_EQ(op->shape().ToString(), "(f32[2], f32[2])");
  EXPECT_THAT(op->attrs().dimensions, ElementsAre(0));
  EXPECT_EQ(op->to_apply()->name(), "add");
  EXPECT_EQ(op->attrs().channel_id, 3);
  EXPECT_EQ(op->attrs().op_name, "rs");
  EXPECT_TRUE(op->attrs().is_sync);
  EXPECT_EQ(op->Where(), "async.txt:15:3");
  EXPECT_EQ(rs->attrs().op_name, "rs");
  EXPECT_TRUE(rs->attrs().is_sync);
  EXPECT_EQ(rs->attrs().async_execution_thread, "main");
  const Instruction* rsd = e->instruction(3);
  EXPECT_EQ(rsd->opcode(), Opcode::kAsyncDone);
  EXPECT_EQ(AsyncWrapped(*rsd), op);
  EXPECT_EQ(AsyncWrapped(*e->instruction(0)), nullptr);
  const Instruction* slice = AsyncWrapped(*e->instruction(4));
  EXPECT_EQ(slice->opcode(), Opcode::kSlice);
  EXPECT_EQ(slice->shape().memory_space, 1);
  EXPECT_EQ(slice->attrs().slice[0].limit, 4);
  const Instruction* cs = e->instruction(7);
  EXPECT_EQ(cs->attrs().async_execution_thread, "sparsecore");
  const Instruction* call = AsyncWrapped(*cs);
  EXPECT_EQ(call->opcode(), Opcode::kCall);
  EXPECT_EQ(call->called()[0]->name(), "sc");
  EXPECT_EQ(call->called()[0]->execution_thread(), "sparsecore");
  // Only what the text holds is counted.
  EXPECT_EQ(m->instruction_count(), 3 + 3 + 10);
}

TEST(Parser, RefusesAsyncShorthandThatDoesNotPair) {
  EXPECT_THAT(ErrorOf(Entry("  %a = f32[8] parameter(0)\n  ROOT %d = f32[4] slice-done(%a)")),
              HasSubstr("m.txt:5:31: slice-done's operand %a is a parameter, not a slice-start"));
  EXPECT_THAT(ErrorOf(
                  Entry("  %a = f32[8] parameter(0)\n  %s = ((f32[8]), f32[4], s32[]) slice-start(%a), slice={[0:4]}\n"
                        "  ROOT %d = f32[4] reverse-done(%s)")),
              HasSubstr("m.txt:6:33: reverse-done's operand %s is an async slice, not a reverse-start"));
  EXPECT_THAT(ErrorOf(Entry("  %a = f32[8] parameter(0)\n  ROOT %s = f32[4] slice-start(%a), slice={[0:4]}")),
              HasSubstr("m.txt:5:20: slice-start must produce ((operands...), result, context...), not f32[4]"));
  EXPECT_THAT(ErrorOf(Entry(
                  "  %a = f32[8] parameter(0)\n  ROOT %s = ((f32[8]), f32[5], s32[]) slice-start(%a), slice={[0:4]}")),
              HasSubstr("m.txt:5:3: %s (slice): declared shape f32[5] does not match f32[4]"));
  EXPECT_THAT(ErrorOf(Entry("  ROOT %s = ((), f32[], s32[]) parameter-start()")),
              HasSubstr("m.txt:4:32: parameter cannot run asynchronously"));
}

TEST(Parser, ReadsTheAttributesOfTpuAndGpuCompiles) {
  auto m = ParseModule(
      "HloModule m, num_partitions=2\n"
      "%f (p: f32[4]) -> f32[4] {\n  ROOT %p = f32[4] parameter(0)\n}\n"
      "ENTRY %e {\n"
      "  %a = f32[4]{0:T(128)} parameter(0)\n"
      "  %cs = (f32[4]{0:S(1)}, f32[4]{0}, u32[]{:S(2)}) copy-start(%a), cross_program_prefetch_index=0\n"
      "  %cd = f32[4]{0:S(1)} copy-done(%cs), control-predecessors={%a}\n"
      "  %fu = f32[4] fusion(%cd), kind=kCustom, calls=%f, output_to_operand_aliasing={{}: (0, {})}, "
      "backend_config={\"operation_queue_id\":\"0\",\"fusion_backend_config\":{\"kind\":\"__triton_nested_gemm_"
      "fusion\"}}\n"
      "  %tok = token[] after-all(), frontend_attributes={MegascaleRendezvousKeyName=\"all-reduce.3_0\"}\n"
      "  %s = (f32[4], u32[], token[]) send(%fu, %tok), channel_id=2, is_host_transfer=true, "
      "frontend_attributes={_xla_megascale_target=\"{1,2}x{0:15}\",_xla_host_transfer_rendezvous=\"ar\"}\n"
      "  %sd = token[] send-done(%s), channel_id=2, is_host_transfer=true\n"
      "  %r = (f32[4], u32[], token[]) recv(%tok), channel_id=1, is_host_transfer=true\n"
      "  %rd = (f32[4], token[]) recv-done(%r), channel_id=1, is_host_transfer=true\n"
      "  %cc = s32[4]{0:T(1024)} custom-call(%a), custom_call_target=\"AssumeGatherIndicesInBound\", "
      "operand_layout_constraints={f32[4]{0:T(1024)}}, custom_call_has_side_effect=true, "
      "api_version=API_VERSION_TYPED_FFI, "
      "backend_config={\"async_collective_fusion_config\":{\"flag_start\":\"2\"}}\n"
      "  ROOT %t = (f32[4], token[], (f32[4], token[]), s32[4]) tuple(%fu, %sd, %rd, %cc), control-predecessors={%s, "
      "%r}\n"
      "}\n");
  const Computation* e = m->entry();
  EXPECT_EQ(e->instruction(1)->attrs().cross_program_prefetch_index, 0);
  EXPECT_EQ(e->instruction(1)->shape().tuple[0].memory_space, 1);
  EXPECT_THAT(e->instruction(2)->control_predecessors(), ElementsAre(e->instruction(0)));
  const Attributes& fu = e->instruction(3)->attrs();
  EXPECT_EQ(fu.gpu_fusion_kind, "__triton_nested_gemm_fusion");
  EXPECT_THAT(fu.backend_config, HasSubstr("\"operation_queue_id\":\"0\""));
  ASSERT_EQ(fu.output_to_operand_aliasing.size(), 1u);
  EXPECT_TRUE(fu.output_to_operand_aliasing[0].output_index.empty());
  EXPECT_EQ(fu.output_to_operand_aliasing[0].operand_number, 0);
  EXPECT_EQ(e->instruction(4)->attrs().frontend_attributes.at("MegascaleRendezvousKeyName"), "all-reduce.3_0");
  const Attributes& send = e->instruction(5)->attrs();
  EXPECT_TRUE(send.is_host_transfer);
  EXPECT_EQ(send.frontend_attributes.at("_xla_megascale_target"), "{1,2}x{0:15}");
  EXPECT_EQ(send.channel_id, 2);
  const Attributes& cc = e->instruction(9)->attrs();
  ASSERT_EQ(cc.operand_layout_constraints.size(), 1u);
  EXPECT_THAT(cc.operand_layout_constraints[0].tiles, ElementsAre(ElementsAre(1024)));
  EXPECT_TRUE(cc.custom_call_has_side_effect);
  EXPECT_EQ(cc.api_version, "API_VERSION_TYPED_FFI");
  EXPECT_TRUE(cc.has_async_collective_fusion_config);
  EXPECT_EQ(e->root()->control_predecessors().size(), 2u);
  EXPECT_THAT(ErrorOf(Entry("  %a = f32[] parameter(0)\n  ROOT %b = f32[] negate(%a), control-predecessors={%z}")),
              HasSubstr("m.txt:5:53: control predecessor %z is not defined above its use in this computation"));
}

// Integers that do not fit are errors where they are written, never truncated.
TEST(Parser, RefusesIntegersThatDoNotFitWhereTheyAreWritten) {
  const std::string loop =
      "HloModule m\n%c (s: s32[]) -> pred[] {\n  %s = s32[] parameter(0)\n  ROOT %t = pred[] constant(true)\n}\n"
      "%b (s: s32[]) -> s32[] {\n  ROOT %s = s32[] parameter(0)\n}\nENTRY %e {\n  %i = s32[] parameter(0)\n"
      "  ROOT %w = s32[] while(%i), condition=%c, body=%b, backend_config=";
  EXPECT_EQ(ParseModule(loop + "{\"known_trip_count\":{\"n\":\"1125899906842624\"}}\n}\n")
                ->entry()
                ->root()
                ->attrs()
                .known_trip_count,
            int64_t{1} << 50);
  EXPECT_THAT(ErrorOf(loop + "{\"known_trip_count\":{\"n\":\"1125899906842625\"}}\n}\n"),
              HasSubstr("m.txt:11:94: known_trip_count '1125899906842625' must be an integer from 0 to 2^50"));
  EXPECT_THAT(ErrorOf(loop + "{\"known_trip_count\":{\"n\":\"99999999999999999999999\"}}\n}\n"),
              HasSubstr("m.txt:11:94: known_trip_count '99999999999999999999999' must be an integer"));
  EXPECT_THAT(ErrorOf(Entry("  ROOT %p = f32[] parameter(0), metadata={stack_frame_id=9223372036854775808}")),
              HasSubstr("m.txt:4:58: stack_frame_id '9223372036854775808' does not fit in 64 bits"));
  EXPECT_THAT(ErrorOf(Entry("  %p = f32[4] parameter(0)\n  ROOT %g = f32[4] all-gather(%p), "
                            "channel_id=99999999999999999999, dimensions={0}")),
              HasSubstr("m.txt:5:47: channel_id '99999999999999999999' does not fit in 64 bits"));
}

// A parameter's sharding must fit it: the error is where the module says it, not only in the scenario.
TEST(Verifier, LocatesAShardingThatDoesNotFitItsValue) {
  EXPECT_THAT(
      ErrorOf("HloModule m, num_partitions=4\nENTRY %e {\n  ROOT %p = f32[4,4] parameter(0), "
              "sharding={devices=[2,2,2]<=[8]}\n}\n"),
      HasSubstr(
          "m.txt:3:3: %p (parameter): sharding {devices=[2,2,2]0,1,2,3,4,5,6,7} tiles 3 dimensions; f32[4,4] has 2"));
  EXPECT_THAT(
      ErrorOf(
          "HloModule m, num_partitions=2\nENTRY %e {\n  ROOT %p = f32[4] parameter(0), sharding={devices=[2]1,1}\n}\n"),
      HasSubstr("m.txt:3:3: %p (parameter): sharding {devices=[2]1,1} names device 1 twice"));
  EXPECT_THAT(ErrorOf(
                  "HloModule m\nENTRY %e {\n  ROOT %p = (f32[4], f32[]) parameter(0), sharding={{replicated}}\n}\n"),
              HasSubstr("sharding {{replicated}} has 1 elements; the value (f32[4], f32[]) has 2 leaves"));
}

TEST(Parser, ReadsComplexAndF8Constants) {
  auto m = ParseModule(
      Entry("  %c = c64[2] constant({(1, -2), (0.5, 3)})\n  %s = c128[] constant((1, 0))\n"
            "  %f = f8e4m3fn[2] constant({1.5, -448})\n  ROOT %t = (c64[2], c128[], f8e4m3fn[2]) tuple(%c, %s, %f)"));
  const auto& c = m->entry()->instruction(0)->literal().bytes;
  ASSERT_EQ(c.size(), 16u);
  float parts[4];
  std::memcpy(parts, c.data(), 16);
  EXPECT_EQ(parts[1], -2.0f);
  EXPECT_EQ(parts[2], 0.5f);
  EXPECT_EQ(m->entry()->instruction(1)->literal().bytes.size(), 16u);
  EXPECT_TRUE(m->entry()->instruction(2)->literal().elided);
  EXPECT_THAT(ErrorOf(Entry("  ROOT %c = c64[] constant((1, x))")),
              HasSubstr("m.txt:4:32: expected a number, found 'x'"));
}

// XLA's TPU and GPU pipelines verify with allow_mixed_precision: floating-point types may differ where XLA's
// ShapeVerifier then allows it; IsMixedPrecision says which instructions rely on that.
TEST(Verifier, AllowsMixedPrecisionAsXlasTpuAndGpuPipelinesDo) {
  auto m = ParseModule(WithSum(
      "  %a = f32[4] parameter(0)\n  %b = bf16[4,2] broadcast(%a), dimensions={0}\n"
      "  %ar = bf16[4] all-reduce(%a), to_apply=%sum\n  %x = bf16[4] add(%a, %ar)\n"
      "  ROOT %t = (bf16[4,2], bf16[4], bf16[4]) tuple(%b, %ar, %x)"));
  std::string why;
  EXPECT_TRUE(IsMixedPrecision(*m->entry()->instruction(1), &why));
  EXPECT_EQ(why, "must keep the element type of f32[4]");
  EXPECT_TRUE(IsMixedPrecision(*m->entry()->instruction(2), &why));
  EXPECT_TRUE(IsMixedPrecision(*m->entry()->instruction(3), &why));
  EXPECT_FALSE(IsMixedPrecision(*m->entry()->instruction(0), &why));
  EXPECT_FALSE(IsMixedPrecision(*m->entry()->root(), &why));
  // Integers and floats never mix.
  EXPECT_THAT(ErrorOf(Entry("  %a = s32[4] parameter(0)\n  ROOT %b = f32[4,2] broadcast(%a), dimensions={0}")),
              HasSubstr("must keep the element type of s32[4]"));
}

TEST(Verifier, ChecksCopyStartSendAndRecvAsXlaDoes) {
  EXPECT_THAT(ErrorOf(Entry("  %a = f32[4] parameter(0)\n  ROOT %c = (f32[4], f32[4]) copy-start(%a)")),
              HasSubstr("%c (copy-start): must produce (f32[4], f32[4], u32[]) (destination, source, context)"));
  EXPECT_THAT(ErrorOf(Entry("  %a = f32[4] parameter(0)\n  %t = token[] after-all()\n"
                            "  ROOT %s = (f32[2], u32[], token[]) send(%a, %t), channel_id=1")),
              HasSubstr("%s (send): declared shape (f32[2], u32[], token[]) does not match (f32[4], u32[], token[])"));
  EXPECT_THAT(ErrorOf(
                  Entry("  %a = f32[8] parameter(0)\n  %s = ((f32[8]), f32[4], s32[]) slice-start(%a), slice={[0:4]}\n"
                        "  ROOT %d = f32[4] copy-done(%s)")),
              HasSubstr("%d (copy-done): its operand must be a copy-start, not an async-start"));
  EXPECT_THAT(ErrorOf(Entry("  %a = f32[4] parameter(0)\n  ROOT %d = token[] send-done(%a), channel_id=1")),
              HasSubstr("%d (send-done): its operand must be a send ((data, u32[], token[])), not f32[4]"));
  EXPECT_THAT(
      ErrorOf(Entry(
          "  %a = f32[4] parameter(0)\n  ROOT %r = f32[4] reduce-precision(%a), exponent_bits=0, mantissa_bits=2")),
      HasSubstr("exponent_bits=0 must be >= 1"));
}

}  // namespace
}  // namespace spmdsim::hlo
