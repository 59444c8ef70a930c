#include "hlo/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "hlo/parser.h"

namespace spmdsim::hlo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::vector<T> Elements(const Value& v) {
  std::vector<T> out(static_cast<size_t>(v.size()));
  std::memcpy(out.data(), v.raw(), out.size() * sizeof(T));
  return out;
}

// Every collective of JAX's shard_map over groups {0,1,2,3} and {4,5,6,7} of 8 partitions, as XLA prints them.
constexpr char kCollectives[] = R"(HloModule coll, num_partitions=8
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}
ENTRY %e (x: f32[4]) -> (f32[4], f32[16], f32[1], f32[4], f32[4], f32[4]) {
  %x = f32[4] parameter(0)
  %ar = f32[4] all-reduce(%x), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%add
  %ag = f32[16] all-gather(%x), channel_id=2, replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true
  %rs = f32[1] reduce-scatter(%x), channel_id=3, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}, use_global_device_ids=true, to_apply=%add
  %a2a = f32[4] all-to-all(%x), channel_id=4, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}
  %cp = f32[4] collective-permute(%x), channel_id=5, source_target_pairs={{0,1},{1,2},{2,3},{3,0},{4,5},{5,6},{6,7}}
  %ars = f32[4] all-reduce-start(%x), channel_id=6, replica_groups={{0,4},{1,5},{2,6},{3,7}}, use_global_device_ids=true, to_apply=%add
  %ard = f32[4] all-reduce-done(%ars)
  ROOT %o = (f32[4], f32[16], f32[1], f32[4], f32[4], f32[4]) tuple(%ar, %ag, %rs, %a2a, %cp, %ard)
}
)";

SupportedModule WithData(std::shared_ptr<const Module> m) {
  return SupportedModule::Check(std::move(m), SupportedModule::Use::kWithData);
}

std::vector<DeviceRun> RunCollectives(int threads) {
  ExecuteOptions options;
  options.runtime.num_threads = threads;
  return Execute(WithData(ParseModule(kCollectives, "coll.txt")), Mesh::Iota({8}, {"devices"}), [](int64_t p) {
    ValueBuilder b(DType::kF32, {4});
    for (int i = 0; i < 4; ++i) b.data<float>()[i] = static_cast<float>(4 * p + i);
    return std::vector<Value>{std::move(b).Finish()};
  }, options);
}

class ExecuteTest : public ::testing::TestWithParam<int> {};

TEST_P(ExecuteTest, RunsEveryCollectiveOverItsReplicaGroups) {
  std::vector<DeviceRun> runs = RunCollectives(GetParam());
  const Value& d1 = runs[1].output;
  EXPECT_THAT(Elements<float>(d1.element(0)), ElementsAre(24, 28, 32, 36));
  EXPECT_THAT(Elements<float>(runs[6].output.element(0)), ElementsAre(88, 92, 96, 100));
  EXPECT_THAT(Elements<float>(d1.element(1)), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  EXPECT_THAT(Elements<float>(d1.element(2)), ElementsAre(28));
  EXPECT_THAT(Elements<float>(runs[5].output.element(2)), ElementsAre(92));
  // all-to-all: rank 1 receives element 1 of every member.
  EXPECT_THAT(Elements<float>(d1.element(3)), ElementsAre(1, 5, 9, 13));
  EXPECT_THAT(Elements<float>(d1.element(4)), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Elements<float>(runs[4].output.element(4)), ElementsAre(0, 0, 0, 0));  // nobody sends to 4
  EXPECT_THAT(Elements<float>(runs[2].output.element(5)), ElementsAre(8 + 24, 9 + 25, 10 + 26, 11 + 27));
  EXPECT_GT(runs[0].memory.peak_bytes, 0);
}

INSTANTIATE_TEST_SUITE_P(Workers, ExecuteTest, ::testing::Values(1, 2, 3));

TEST(Execute, RefusesAMeshOfTheWrongSizeAndUnsupportedOpsBeforeRunning) {
  const SupportedModule m = WithData(ParseModule(kCollectives, "coll.txt"));
  auto no_args = [](int64_t) { return std::vector<Value>{}; };
  try {
    Execute(m, Mesh::Iota({4}, {"devices"}), no_args);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("runs on 8 devices (1 replicas x 8 partitions); the mesh has 4"));
  }
  try {
    WithData(ParseModule("HloModule f\nENTRY %e (x: c64[4]) -> c64[4] {\n  %x = c64[4] parameter(0)\n"
                         "  ROOT %f = c64[4] fft(%x), fft_type=FFT, fft_length={4}\n}\n", "fft.txt"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_THAT(e.message(), HasSubstr("fft.txt:4:3: %f (fft) cannot run: fft is not supported"));
  }
}

TEST(Execute, RefusesAModuleCheckedForAbstractUseOnly) {
  const SupportedModule m = SupportedModule::Check(ParseModule(kCollectives, "coll.txt"),
                                                   SupportedModule::Use::kAbstract);
  try {
    Execute(m, Mesh::Iota({8}, {"devices"}), [](int64_t) { return std::vector<Value>{}; });
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_THAT(e.message(), HasSubstr("checked for abstract use only"));
  }
}

}  // namespace
}  // namespace spmdsim::hlo
