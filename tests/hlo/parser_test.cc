#include "hlo/parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "hlo/groups.h"

namespace spmdsim::hlo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What jax.jit(f).lower(x, w).compile().as_text() printed for a sharded matmul + tanh + sum on 8 CPU devices
// (JAX 0.10.2), abridged to its computations.
constexpr char kMatmulModule[] = R"(HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[2,2]{1,0}, f32[2,2]{1,0})->f32[2]{0}}, allow_spmd_sharding_propagation_to_parameters={false,false}, allow_spmd_sharding_propagation_to_output={true}, num_partitions=8

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

TEST(Parser, ErrorsNameFileLineAndColumn) {
  EXPECT_EQ(ErrorOf(Entry("  ROOT %x = f32[] foo()")), "m.txt:4:19: unknown opcode 'foo': not one of XLA's (add, dot, fusion, all-reduce, ...)");
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

}  // namespace
}  // namespace spmdsim::hlo
