// ShardMap across ranks with outputs kept by their owners (ShardMapOptions::share_outputs): launched by mpirun
// on 1-3 local ranks (tests/shardmap/CMakeLists.txt); every rank checks what it holds against one process.
#include <mpi.h>

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "shardmap/shard_map.h"
#include "sim/multiprocess.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<ProcessGroup> NewGroup() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) return nullptr;
  MPI_Comm world = MPI_COMM_WORLD;
  return ProcessGroupFromMpi(&world);
}

Runtime& SharedRuntime(const Mesh& mesh) {
  static Runtime* runtime = [&] {
    RuntimeOptions options;
    options.num_threads = 2;
    options.process_group = NewGroup();
    return new Runtime(mesh, options);
  }();
  return *runtime;
}

// x float32[8, 3] = iota; each device doubles its row and psums a row sum over x.
std::vector<Array> TwiceAndTotal(DeviceContext& d, std::span<const Array> blocks) {
  const Array& b = blocks[0];
  std::vector<float> twice;
  float sum = 0;
  for (double v : b.ToDoubles()) {
    twice.push_back(static_cast<float>(2 * v));
    sum += static_cast<float>(v);
  }
  return {Array::FromVector<float>(twice, b.shape()).WithVaryingAxes(b.varying_axes()),
          d.Psum(Array::FromVector<float>({sum}, {1}).WithVaryingAxes(b.varying_axes()), "x")};
}

TEST(ShardMapAcrossRanks, KeepsEachRanksBlocksAndStandInsForTheOthers) {
  const Mesh mesh = Mesh::Iota({8}, {"x"});
  Runtime& runtime = SharedRuntime(mesh);
  ShardMapOptions options;
  options.runtime = &runtime;
  options.share_outputs = ShareData::kShapesOnly;
  ShardMapped f = ShardMap(TwiceAndTotal, mesh, {P("x")}, {P("x"), P()}, options);
  const Array x = Array::Iota({8, 3}, DType::kF32);
  const std::vector<ShardedArray> out = f.CallSharded({ShardMapArg(x)});
  ASSERT_EQ(out.size(), 2u);
  for (int64_t p = 0; p < 8; ++p) {
    const Array& twice = out[0].shard(p);
    EXPECT_EQ(twice.shape(), (std::vector<int64_t>{1, 3}));
    if (!runtime.is_local(p)) {
      EXPECT_TRUE(twice.is_abstract()) << p;
      continue;
    }
    EXPECT_EQ(twice.ToDoubles(), (std::vector<double>{6.0 * p, 6.0 * p + 2, 6.0 * p + 4})) << p;
    EXPECT_EQ(out[1].shard(p).ToDoubles(), (std::vector<double>{276})) << p;  // 0 + 1 + ... + 23
  }
}

TEST(ShardMapAcrossRanks, BlocksThatDifferOnlyAcrossRanksFailTheReplicationCheckOnEveryRank) {
  const Mesh mesh = Mesh::Iota({8}, {"x"});
  Runtime& runtime = SharedRuntime(mesh);
  if (runtime.options().process_group == nullptr || runtime.options().process_group->size() < 2)
    GTEST_SKIP() << "needs mpirun -np 2 or more";
  ShardMapOptions options;
  options.runtime = &runtime;
  options.share_outputs = ShareData::kShapesOnly;
  // Equal on every device of a rank, different between ranks: the static rule sees an invariant value; only
  // the digests exchanged between ranks show the difference.
  ShardMapped f = ShardMap(
      [&](DeviceContext& d, std::span<const Array>) -> std::vector<Array> {
        return {Array::Full({2}, DType::kF32, static_cast<double>(runtime.owner(d.position())))};
      },
      mesh, {P("x")}, {P()}, options);
  try {
    f.CallSharded({ShardMapArg(Array::Iota({8}, DType::kF32))});
    ADD_FAILURE() << "no replication error on rank " << runtime.rank();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValueError);
    EXPECT_THAT(e.message(), HasSubstr("compared by digest"));
  }
}

}  // namespace
}  // namespace spmdsim

int main(int argc, char** argv) {
  spmdsim::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  int worst = failed;
  if (mpi.size() > 1) MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}
