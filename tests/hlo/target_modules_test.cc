// Conformance on real modules of XLA's TPU and GPU compilers (tests/hlo/testdata/targets/README.md): every one is
// read in full, verified and accepted for an abstract run, with what the text says kept (layouts, async shorthand,
// aliases, stack frames).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "hlo/parser.h"
#include "hlo/support.h"

namespace spmdsim::hlo {
namespace {

using ::testing::ElementsAre;

const std::string kTargets = std::string(SPMDSIM_SOURCE_DIR) + "/tests/hlo/testdata/targets/";

std::vector<std::string> TargetModules() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(kTargets)) {
    if (e.path().extension() == ".txt") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The instruction lines of a module's text: indented lines with " = " (instructions are written one per line,
// indented, in the computations' bodies; the header, the debug information and computation headers are not).
int64_t InstructionLines(const std::string& path) {
  std::ifstream in(path);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("  ") && line.find(" = ") != std::string::npos) ++n;
  }
  return n;
}

const Instruction* Find(const Module& m, std::string_view name) {
  for (int64_t c = 0; c < m.computation_count(); ++c) {
    const Computation& comp = *m.computation(c);
    if (comp.is_async_wrapped()) continue;
    for (int64_t i = 0; i < comp.instruction_count(); ++i) {
      if (comp.instruction(i)->name() == name) return comp.instruction(i);
    }
  }
  return nullptr;
}

std::shared_ptr<const Module> Load(const std::string& name) { return LoadModule(kTargets + name + ".txt"); }

TEST(TargetModules, EveryModuleIsReadInFullAndAcceptedForAnAbstractRun) {
  const std::vector<std::string> names = TargetModules();
  EXPECT_EQ(names.size(), 20u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    std::shared_ptr<const Module> m = Load(name);
    EXPECT_EQ(m->instruction_count(), InstructionLines(kTargets + name + ".txt"));
    EXPECT_TRUE(m->is_scheduled());
    EXPECT_GT(m->stack_frame_count(), 0);
    const SupportedModule supported = SupportedModule::Check(m, SupportedModule::Use::kAbstract);
    EXPECT_GE(supported.device_count(), 1);
  }
}

TEST(TargetModules, KeepTheTpuLayoutsTilesAndMemorySpaces) {
  auto m = Load("tpu_v5e__matmul");
  // The cross-program prefetch: (destination in VMEM, source in HBM, a sync flag).
  const Instruction* start = Find(*m, "copy-start");
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start->opcode(), Opcode::kCopyStart);
  EXPECT_EQ(start->attrs().cross_program_prefetch_index, 0);
  const Shape& dest = start->shape().tuple[0];
  EXPECT_EQ(dest.memory_space, 1);
  EXPECT_THAT(dest.tiles, ElementsAre(ElementsAre(8, 128), ElementsAre(2, 1)));
  EXPECT_EQ(start->shape().tuple[1].memory_space, 0);
  EXPECT_EQ(start->shape().tuple[2].memory_space, 2);
  EXPECT_EQ(start->shape().ToString(true),
            "(bf16[4096,4096]{1,0:T(8,128)(2,1)S(1)}, bf16[4096,4096]{1,0:T(8,128)(2,1)}, u32[]{:S(2)})");
  EXPECT_EQ(dest.PhysicalByteSize(), 4096 * 4096 * 2);
  // A scalar (u32[]{:T(128)}, bf16[]{:T(256)}) takes its whole tile.
  auto v5p = Load("tpu_v5p__transformer_fsdp");
  const Instruction* loop = nullptr;
  for (int64_t i = 0; i < v5p->entry()->instruction_count() && loop == nullptr; ++i) {
    if (v5p->entry()->instruction(i)->opcode() == Opcode::kWhile) loop = v5p->entry()->instruction(i);
  }
  ASSERT_NE(loop, nullptr);
  bool tiled_scalar = false;
  for (const Shape& s : loop->shape().tuple) {
    if (s.IsArray() && s.rank() == 0 && !s.tiles.empty()) {
      tiled_scalar = true;
      int64_t tile = 1;
      for (int64_t d : s.tiles[0]) tile *= d;
      EXPECT_EQ(s.PhysicalByteSize(), tile * DTypeSize(s.dtype));
    }
  }
  EXPECT_TRUE(tiled_scalar);
}

TEST(TargetModules, ReadXlasAsyncShorthandAsAsyncStartAroundTheWrappedOp) {
  // GPU: a combined reduce-scatter, ((operands...), (results...)).
  auto gpu = Load("h100x8__transformer_fsdp_tp");
  const Instruction* rs = Find(*gpu, "reduce-scatter-start");
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(rs->opcode(), Opcode::kAsyncStart);
  const Instruction* wrapped = AsyncWrapped(*rs);
  ASSERT_NE(wrapped, nullptr);
  EXPECT_EQ(wrapped->opcode(), Opcode::kReduceScatter);
  EXPECT_EQ(wrapped->operand_count(), 6);
  EXPECT_EQ(wrapped->shape().ToString(true), rs->shape().tuple[1].ToString(true));
  EXPECT_THAT(wrapped->attrs().dimensions, ElementsAre(0));
  EXPECT_NE(wrapped->to_apply(), nullptr);
  EXPECT_TRUE(wrapped->attrs().has_replica_groups);
  const Instruction* done = Find(*gpu, "reduce-scatter-done");
  EXPECT_EQ(done->opcode(), Opcode::kAsyncDone);
  EXPECT_EQ(AsyncWrapped(*done), wrapped);
  // TPU: an async slice into VMEM, and an all-reduce called on the SparseCore thread.
  auto tpu = Load("tpu_7x__mlp_dp");
  const Instruction* slice = AsyncWrapped(*Find(*tpu, "slice-start"));
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->opcode(), Opcode::kSlice);
  EXPECT_EQ(slice->shape().memory_space, 1);
  const Instruction* call_start = Find(*tpu, "all-reduce.6.cloned.1.call-start");
  ASSERT_NE(call_start, nullptr);
  EXPECT_EQ(call_start->attrs().async_execution_thread, "sparsecore");
  const Instruction* call = AsyncWrapped(*call_start);
  EXPECT_EQ(call->opcode(), Opcode::kCall);
  EXPECT_EQ(call->called()[0]->name(), "called_computation");
  EXPECT_EQ(call->called()[0]->execution_thread(), "sparsecore");
  EXPECT_EQ(call->called()[0]->root()->opcode(), Opcode::kAllReduce);
}

TEST(TargetModules, KeepTheHeadersAliasesAndTheSourceLocations) {
  auto m = Load("h100x8__mlp_dp");
  ASSERT_EQ(m->input_output_aliases().size(), 2u);
  EXPECT_THAT(m->input_output_aliases()[1].output_index, ElementsAre(1));
  EXPECT_EQ(m->input_output_aliases()[1].parameter_number, 1);
  EXPECT_FALSE(m->input_output_aliases()[1].must_alias);
  EXPECT_EQ(m->frontend_attributes().count("fingerprint_before_lhs"), 1u);
  EXPECT_EQ(m->num_partitions(), 8);
  // tpu_v5e__matmul's dot: frame 3, line 93 of aot_compile.py in prog_matmul.<locals>.f, called from main.
  auto tpu = Load("tpu_v5e__matmul");
  const Instruction* root = tpu->entry()->root();
  EXPECT_EQ(root->attrs().stack_frame_id, 3);
  const StackFrame* frame = tpu->SourceOf(*root);
  ASSERT_NE(frame, nullptr);
  EXPECT_TRUE(frame->file.ends_with("aot_compile.py"));
  EXPECT_EQ(frame->function, "prog_matmul.<locals>.f");
  EXPECT_EQ(frame->line, 93);
  EXPECT_EQ(frame->column, 15);
  EXPECT_EQ(tpu->stack_frame(frame->parent_id)->function, "main");
  EXPECT_EQ(tpu->frontend_attributes().at("arg_memory_spaces"), "0;0");
}

TEST(TargetModules, TypeTheBackendConfigsOfBothCompilers) {
  auto gpu = Load("h100x8__transformer_fsdp_tp");
  int syncs = 0, triton = 0;
  for (int64_t c = 0; c < gpu->computation_count(); ++c) {
    for (int64_t i = 0; i < gpu->computation(c)->instruction_count(); ++i) {
      const Attributes& a = gpu->computation(c)->instruction(i)->attrs();
      syncs += a.is_sync;
      triton += a.gpu_fusion_kind == "__triton_nested_gemm_fusion";
      EXPECT_FALSE(a.is_pipelined);
    }
  }
  EXPECT_GT(syncs, 0);
  EXPECT_GT(triton, 0);
  auto tpu = Load("tpu_v5e_2slices__mlp_dp");
  const Instruction* send = Find(*tpu, "send");
  ASSERT_NE(send, nullptr);
  EXPECT_TRUE(send->attrs().is_host_transfer);
  EXPECT_EQ(send->attrs().frontend_attributes.at("_xla_megascale_transfer_type"), "ALL_REDUCE");
}

// fuzz/hlo_corpus/target-*.txt: malformed pieces of such modules; each is refused with one error at its
// file:line:col (fuzz.hlo_replay feeds them and their mutations to the parser too).
TEST(TargetModules, MalformedPiecesAreRefusedWithOneLocatedError) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"target-alias-missing-parameter", ":1:171: input_output_alias {0}: (7, {}): %main has no parameter 7"},
      {"target-async-done-of-non-start", ":17:62: slice-done's operand %p is a parameter, not a slice-start"},
      {"target-async-start-not-a-tuple", ":17:46: slice-start must produce ((operands...), result, context...)"},
      {"target-bad-memory-space", ":17:43: expected the memory space S(n) (an integer), found 'x)}'"},
      {"target-bad-parameter-sharding", ":16:3: %p (parameter): sharding {devices=[2,1,1]0,1} tiles 3 dimensions"},
      {"target-bad-stack-frame", ":13:39: expected parent_frame_id (an integer), found '}'"},
      {"target-bad-tile", ":16:33: tile dimension 0 is outside 1.."},
      {"target-integer-float-mix", ":18:3: %b (broadcast): must keep the element type of s32[256]"},
      {"target-missing-control-predecessor", ":17:80: control predecessor %copy-done.7 is not defined above"},
      {"target-send-without-token", ":17:3: %s (send): its second operand must be a token"},
      {"target-stack-frame-of-no-location", ":14:21: file_location_id 4 names no FileLocations entry (there are 1)"},
      {"target-trip-count-overflow",
       ":28:122: known_trip_count '18446744073709551616' must be an integer from 0 to 2^50"},
      {"target-truncated-layout", ":16:26: unterminated layout: no matching '}' on this line"},
      {"target-unquoted-execution-thread", ":17:21: expected execution_thread (a quoted string), found 'sparsecore'"},
      {"target-unterminated-comment", ":17:48: unterminated /* comment"},
      {"target-unterminated-frontend-attribute", ":17:101: unterminated string (frontend_attributes)"},
  };
  const std::string corpus = std::string(SPMDSIM_SOURCE_DIR) + "/fuzz/hlo_corpus/";
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus))
    files += e.path().filename().string().starts_with("target-");
  EXPECT_EQ(files, expected.size());
  for (const auto& [name, message] : expected) {
    SCOPED_TRACE(name);
    const std::string path = corpus + name + ".txt";
    try {
      LoadModule(path);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_THAT(e.message(), ::testing::StartsWith(path + message));
      EXPECT_EQ(e.message().find('\n'), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace spmdsim::hlo
