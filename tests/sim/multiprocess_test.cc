// The runtime over several processes (sim/multiprocess.h), launched by ctest as `mpirun -np K` (K = 1..4,
// tests/sim/CMakeLists.txt). Every rank runs the same program once on the one-process runtime and once across
// the ranks, and checks that its own devices' outputs are bitwise the same; faults must end the Run on every
// rank with the same message. Run without mpirun, the cross-rank cases are skipped.
#include "sim/multiprocess.h"

#include <mpi.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"
#include "sim/internal/transport.h"  // white-box: the bytes a rank sends
#include "sim/runtime.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

int WorldSize() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int WorldRank() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// A fresh group per test: a test that leaves messages behind (a rank that never ran) cannot disturb the next.
std::shared_ptr<ProcessGroup> NewGroup() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) return nullptr;
  MPI_Comm world = MPI_COMM_WORLD;
  return ProcessGroupFromMpi(&world);
}

// Whether every rank holds the same string.
bool SameOnEveryRank(const std::string& text) {
  if (WorldSize() == 1) return true;
  const uint64_t h = std::hash<std::string>{}(text);
  uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

// Values whose sums round differently in every order: a reduction done in another order shows.
Array RandomArray(const std::vector<int64_t>& shape, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-1e3, 1e3);
  const int64_t n = NumElements(shape);
  switch (dtype) {
    case DType::kI32: {
      std::vector<int32_t> v(static_cast<size_t>(n));
      for (auto& x : v) x = static_cast<int32_t>(rng() % 2001) - 1000;
      return Array::FromVector<int32_t>(v, shape);
    }
    case DType::kBool: {
      std::vector<bool> v(static_cast<size_t>(n));
      for (size_t i = 0; i < v.size(); ++i) v[i] = (rng() & 1) != 0;
      return Array::FromVector(v, shape);
    }
    case DType::kBF16: {
      std::vector<bfloat16> v(static_cast<size_t>(n));
      for (auto& x : v) x = ToBFloat16(static_cast<float>(real(rng) / 7.0));
      return Array::FromVector<bfloat16>(v, shape);
    }
    default: {
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& x : v) x = static_cast<float>(real(rng) / 7.0);
      return Array::FromVector<float>(v, shape);
    }
  }
}

using Program = std::function<std::vector<Array>(DeviceContext&)>;

// Runs `program` on every device in one process and across the ranks (num_threads workers each), and checks
// the local devices' outputs bitwise.
void ExpectSameAsOneProcess(const Mesh& mesh, const Program& program, int threads) {
  const int64_t n = mesh.size();
  std::vector<std::vector<Array>> want(n), got(n);
  Runtime one(mesh, {.num_threads = threads});
  one.Run([&](DeviceContext& d) { want[d.position()] = program(d); });
  RuntimeOptions options;
  options.num_threads = threads;
  options.process_group = NewGroup();
  Runtime many(mesh, options);
  many.Run([&](DeviceContext& d) { got[d.position()] = program(d); });
  for (int64_t p = 0; p < n; ++p) {
    if (!many.is_local(p)) {
      EXPECT_TRUE(got[p].empty()) << "position " << p << " ran on rank " << many.rank();
      continue;
    }
    ASSERT_EQ(got[p].size(), want[p].size());
    for (size_t i = 0; i < want[p].size(); ++i) {
      const Array& a = want[p][i];
      const Array& b = got[p][i];
      ASSERT_EQ(a.ShapeString(), b.ShapeString()) << "position " << p << " output " << i;
      ASSERT_EQ(a.is_abstract(), b.is_abstract());
      if (a.is_abstract()) continue;
      EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.nbytes())), 0)
          << "position " << p << " output " << i << " (" << a.ShapeString() << ") differs on rank " << many.rank()
          << " of " << WorldSize();
    }
  }
}

// Every collective over every axis tuple of a (4, 2) mesh, for several dtypes and shapes (short rows, the
// parallel path's sizes, abstract arrays).
Program AllCollectives(DType dtype, std::vector<int64_t> shape, bool abstract) {
  return [=](DeviceContext& d) {
    const Array x = abstract ? Array::Abstract(shape, dtype) : RandomArray(shape, dtype, 1000 + d.position());
    std::vector<Array> out;
    for (const Axes& axes : {Axes("x"), Axes("y"), Axes({"x", "y"}), Axes({"y", "x"})}) {
      const int64_t n = axes.names().size() == 2 ? 8 : (axes.names()[0] == "x" ? 4 : 2);
      out.push_back(d.Psum(x, axes));
      out.push_back(d.Pmax(x, axes));
      out.push_back(d.Pmin(x, axes));
      if (dtype != DType::kBool) out.push_back(d.Pmean(x, axes));
      out.push_back(d.AllGather(x, axes, 0, false));
      out.push_back(d.AllGather(x, axes, static_cast<int>(shape.size()) - 1, true));
      if (shape[0] % n == 0) {
        out.push_back(d.PsumScatter(x, axes, 0, true));
        out.push_back(d.AllToAll(x, axes, 0, static_cast<int>(shape.size()) - 1, true));
      }
      if (shape.back() % n == 0 && shape.size() > 1) out.push_back(d.PsumScatter(x, axes, 1, true));
      if (axes.names()[0] != "y" || axes.names().size() == 1) {  // JAX: ppermute's axes in mesh order
        PermutationPairs shift;
        for (int64_t i = 0; i < n; ++i) shift.emplace_back(i, (i + 1) % n);
        out.push_back(d.Ppermute(x, axes, shift));
        out.push_back(d.Ppermute(x, axes, {{0, n - 1}}));  // one pair: other receivers get zeros
      }
      d.Barrier();
    }
    return out;
  };
}

class EveryCollective : public ::testing::TestWithParam<int> {};  // worker threads

TEST_P(EveryCollective, Float32IsBitwiseTheOneProcessResult) {
  const Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  ExpectSameAsOneProcess(mesh, AllCollectives(DType::kF32, {8, 8}, false), GetParam());
  ExpectSameAsOneProcess(mesh, AllCollectives(DType::kF32, {64, 2}, false), GetParam());  // short rows
  ExpectSameAsOneProcess(mesh, AllCollectives(DType::kF32, {16, 4096}, false), GetParam());  // parallel path
}

TEST_P(EveryCollective, OtherDtypesAndAbstractArraysMatch) {
  const Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  ExpectSameAsOneProcess(mesh, AllCollectives(DType::kBF16, {8, 16}, false), GetParam());
  ExpectSameAsOneProcess(mesh, AllCollectives(DType::kI32, {8, 3}, false), GetParam());
  ExpectSameAsOneProcess(mesh, AllCollectives(DType::kBool, {8, 2}, false), GetParam());
  ExpectSameAsOneProcess(mesh, AllCollectives(DType::kF32, {8, 8}, true), GetParam());
}

TEST_P(EveryCollective, AStepProgramOverALargerMeshMatches) {
  // A few steps of a data-parallel update on 16 devices: local math between collectives.
  const Mesh mesh = Mesh::Iota({8, 2}, {"data", "model"});
  ExpectSameAsOneProcess(
      mesh,
      [](DeviceContext& d) {
        Array w = RandomArray({32, 32}, DType::kF32, 7);
        Array x = RandomArray({32, 32}, DType::kF32, 100 + d.position());
        std::vector<Array> out;
        for (int step = 0; step < 3; ++step) {
          std::vector<float> g(x.data<float>().begin(), x.data<float>().end());
          const auto wv = w.data<float>();
          for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] * wv[i] + static_cast<float>(step);
          Array grad = d.Pmean(Array::FromVector<float>(g, {32, 32}), "data");
          Array scattered = d.PsumScatter(grad, "model", 0, true);
          w = d.AllGather(scattered, "model", 0, true);
          out.push_back(w);
        }
        return out;
      },
      GetParam());
}

// Reductions large enough for several pipeline chunks of the chain across ranks (1 MiB each, the last one
// partial), in the dtypes whose running fold differs from the result (bool sums in int32, pmean of int32 into
// float32) or rounds at every step (bfloat16).
Program LargeReductions(DType dtype, int64_t elements) {
  return [=](DeviceContext& d) {
    const Array x = RandomArray({elements}, dtype, 2000 + d.position());
    std::vector<Array> out;
    for (const Axes& axes : {Axes("x"), Axes({"y", "x"})}) {
      out.push_back(d.Psum(x, axes));
      out.push_back(d.Pmax(x, axes));
      out.push_back(d.Pmin(x, axes));
      if (dtype != DType::kBool) out.push_back(d.Pmean(x, axes));
      out.push_back(d.PsumScatter(x, axes, 0, true));
    }
    return out;
  };
}

TEST_P(EveryCollective, ReductionsOverSeveralChunksMatch) {
  const Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  ExpectSameAsOneProcess(mesh, LargeReductions(DType::kF32, 600'000), GetParam());
  ExpectSameAsOneProcess(mesh, LargeReductions(DType::kBF16, 700'000), GetParam());
  ExpectSameAsOneProcess(mesh, LargeReductions(DType::kI32, 300'008), GetParam());
  ExpectSameAsOneProcess(mesh, LargeReductions(DType::kBool, 300'008), GetParam());
}

// Placement by host on a mesh whose device ids are the transpose of its positions: host h holds column y = h,
// so a rank's positions are not contiguous, groups over "x" stay on one rank, and groups over "y" (not the
// outermost axis) and over ("y", "x") (member order unlike position order) run across ranks, interleaved.
TEST_P(EveryCollective, GroupsInterleavedOverRanksMatch) {
  std::vector<int> ids(16);
  for (int x = 0; x < 4; ++x) {
    for (int y = 0; y < 4; ++y) ids[x * 4 + y] = y * 4 + x;
  }
  const Mesh mesh(DeviceArray({4, 4}, ids), {"x", "y"}, std::make_shared<const Topology>(Topology::Parse("gpu:4x4")));
  const Program program = [](DeviceContext& d) {
    const Array x = RandomArray({16, 48}, DType::kF32, 3000 + d.position());
    std::vector<Array> out;
    for (const Axes& axes : {Axes("x"), Axes("y"), Axes({"x", "y"}), Axes({"y", "x"})}) {
      out.push_back(d.Psum(x, axes));
      out.push_back(d.Pmean(x, axes));
      out.push_back(d.Pmax(x, axes));
      out.push_back(d.Pmin(x, axes));
      out.push_back(d.PsumScatter(x, axes, 0, true));
      out.push_back(d.AllToAll(x, axes, 1, 0, true));
      out.push_back(d.AllGather(x, axes, 1, true));
    }
    return out;
  };
  ExpectSameAsOneProcess(mesh, program, GetParam());
}

// all_to_all in every layout: tiled and untiled, split before, after and at the concat axis.
TEST_P(EveryCollective, AllToAllInEveryLayoutMatches) {
  const Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  const Program program = [](DeviceContext& d) {
    std::vector<Array> out;
    const Array x = RandomArray({4, 8, 6}, DType::kF32, 4000 + d.position());
    for (const Axes& axes : {Axes("x"), Axes({"y", "x"})}) {
      const int64_t n = axes.names().size() == 2 ? 8 : 4;
      out.push_back(d.AllToAll(x, axes, 1, 1, true));
      out.push_back(d.AllToAll(x, axes, 1, 2, true));
      out.push_back(d.AllToAll(x, axes, 1, 0, true));
      const Array u = RandomArray({3, n, 5}, DType::kI32, 5000 + d.position());
      out.push_back(d.AllToAll(u, axes, 1, 0, false));
      out.push_back(d.AllToAll(u, axes, 1, 2, false));
    }
    return out;
  };
  ExpectSameAsOneProcess(mesh, program, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Threads, EveryCollective, ::testing::Values(1, 3));

// --- What moves between ranks ---------------------------------------------------------------------------------

// Bytes this rank sends during one Run of `fn` across the ranks (8 devices, axis "x").
int64_t BytesSentByRun(const std::function<void(DeviceContext&)>& fn) {
  RuntimeOptions options;
  options.num_threads = 2;
  options.process_group = NewGroup();
  Runtime runtime(Mesh::Iota({8}, {"x"}), options);
  const int64_t before = options.process_group->transport().bytes_sent();
  runtime.Run(fn);
  return options.process_group->transport().bytes_sent() - before;
}

class DataVolume : public ::testing::Test {
 protected:
  void SetUp() override {
    if (WorldSize() < 2) GTEST_SKIP() << "needs mpirun -np 2 or more";
  }
  // Status records: at most 4 KiB to each other rank per episode (3 episodes: start, the collective, the end).
  int64_t status_bytes_ = 3 * 4096 * (WorldSize() - 1);
  static constexpr int64_t kBytes = kMiB;  // each device's input
};

// A psum moves one running sum along the chain and the result back: the first rank sends kBytes, a middle
// rank kBytes, the last rank the result to every other rank; never every member's input.
TEST_F(DataVolume, APsumMovesPartialSumsNotInputs) {
  const int k = WorldSize(), me = WorldRank();
  const int64_t sent = BytesSentByRun([](DeviceContext& d) {
    d.Psum(Array::Full({kBytes / 4}, DType::kF32, 1.0 + d.position()), "x");
  });
  const int64_t data = me == k - 1 ? (k - 1) * kBytes : kBytes;
  EXPECT_GE(sent, data);
  EXPECT_LE(sent, data + status_bytes_);
}

// psum_scatter: the running sum along the chain, then each block only to its owner.
TEST_F(DataVolume, APsumScatterSendsEachBlockToItsOwner) {
  const int k = WorldSize(), me = WorldRank();
  const int64_t sent = BytesSentByRun([](DeviceContext& d) {
    d.PsumScatter(Array::Full({kBytes / 4}, DType::kF32, 1.0 + d.position()), "x", 0, true);
  });
  const std::vector<int> owner = PlaceDevices(Mesh::Iota({8}, {"x"}), k);
  const int64_t remote_blocks = std::count_if(owner.begin(), owner.end(), [&](int r) { return r != k - 1; });
  const int64_t data = me == k - 1 ? remote_blocks * kBytes / 8 : kBytes;
  EXPECT_GE(sent, data);
  EXPECT_LE(sent, data + status_bytes_);
}

// all_to_all: each rank receives only the blocks addressed to its devices.
TEST_F(DataVolume, AnAllToAllSendsOnlyTheBlocksAddressedToEachRank) {
  const int k = WorldSize(), me = WorldRank();
  const int64_t sent = BytesSentByRun([](DeviceContext& d) {
    d.AllToAll(Array::Full({kBytes / 4}, DType::kF32, 1.0 + d.position()), "x", 0, 0, true);
  });
  const std::vector<int> owner = PlaceDevices(Mesh::Iota({8}, {"x"}), k);
  const int64_t mine = std::count(owner.begin(), owner.end(), me);
  const int64_t data = mine * (8 - mine) * kBytes / 8;  // each local member's blocks for the other ranks' members
  EXPECT_GE(sent, data);
  EXPECT_LE(sent, data + status_bytes_);
}

TEST(PlaceDevices, SplitsByHostWhenTheRanksDivideTheHosts) {
  // 4 hosts of 4 GPUs; ids in row-major order, so host h holds positions 4h .. 4h+3.
  std::vector<int> ids(16);
  for (int i = 0; i < 16; ++i) ids[i] = i;
  const Mesh mesh(DeviceArray({4, 4}, ids), {"x", "y"}, std::make_shared<const Topology>(Topology::Parse("gpu:4x4")));
  const std::vector<int> owner = PlaceDevices(mesh, 2);
  for (int64_t p = 0; p < 16; ++p) EXPECT_EQ(owner[p], mesh.topology()->device(mesh.DeviceAt(p)).process_index / 2);
}

TEST(PlaceDevices, SplitsContiguousBlocksOtherwise) {
  EXPECT_EQ(PlaceDevices(Mesh::Iota({8}, {"x"}), 3), (std::vector<int>{0, 0, 1, 1, 1, 2, 2, 2}));
  EXPECT_THROW(PlaceDevices(Mesh::Iota({2}, {"x"}), 3), Error);
}

TEST(ProcessGroup, AllGatherBytesGivesEveryRankEveryRanksRecordOfAnyLength) {
  const std::shared_ptr<ProcessGroup> group = NewGroup();
  if (group == nullptr) GTEST_SKIP() << "needs mpirun";
  const int me = group->rank();
  const std::string mine(static_cast<size_t>(me * 3), static_cast<char>('a' + me));  // rank 0 sends nothing
  const std::vector<std::string> all = group->AllGatherBytes(mine);
  ASSERT_EQ(static_cast<int>(all.size()), group->size());
  for (int r = 0; r < group->size(); ++r)
    EXPECT_EQ(all[r], std::string(static_cast<size_t>(r * 3), static_cast<char>('a' + r)));
}

// Each position's device returns [position, position + 1] as float32[2] (varying over x).
std::vector<std::vector<Array>> BlocksOfEveryLocalDevice(Runtime& runtime) {
  std::vector<std::vector<Array>> by_position(static_cast<size_t>(runtime.num_devices()));
  runtime.Run([&](DeviceContext& d) {
    const double p = static_cast<double>(d.position());
    by_position[d.position()] = {Array::FromVector<float>({static_cast<float>(p), static_cast<float>(p + 1)}, {2})
                                     .WithVaryingAxes(1)};
  });
  return by_position;
}

TEST(ShareArrays, ShapesOnlyGivesAbstractStandInsAndRankZeroAloneReceivesTheElements) {
  RuntimeOptions options;
  options.num_threads = 2;
  options.process_group = NewGroup();
  Runtime runtime(Mesh::Iota({8}, {"x"}), options);
  for (ShareData data : {ShareData::kShapesOnly, ShareData::kRankZero, ShareData::kEveryRank}) {
    std::vector<std::vector<Array>> by_position = BlocksOfEveryLocalDevice(runtime);
    ShareArrays(runtime, by_position, data);
    const bool receives = data == ShareData::kEveryRank || (data == ShareData::kRankZero && runtime.rank() == 0);
    for (int64_t p = 0; p < 8; ++p) {
      ASSERT_EQ(by_position[p].size(), 1u) << p;
      const Array& a = by_position[p][0];
      EXPECT_EQ(a.shape(), (std::vector<int64_t>{2}));
      EXPECT_EQ(a.varying_axes(), 1u);
      if (runtime.is_local(p) || receives) {
        ASSERT_FALSE(a.is_abstract()) << p;
        EXPECT_EQ(a.ToDoubles(), (std::vector<double>{static_cast<double>(p), static_cast<double>(p + 1)}));
      } else {
        EXPECT_TRUE(a.is_abstract()) << p;
      }
    }
  }
}

// --- Faults across ranks ----------------------------------------------------------------------------------

// Runs `fn` across the ranks (timeout `timeout_ms`) and returns the error every rank must report.
Error RunExpectingError(const Mesh& mesh, const std::function<void(DeviceContext&)>& fn, int timeout_ms = 60'000,
                        std::shared_ptr<ProcessGroup> group = NewGroup()) {
  RuntimeOptions options;
  options.num_threads = 2;
  options.collective_timeout = std::chrono::milliseconds(timeout_ms);
  options.process_group = std::move(group);
  Runtime runtime(mesh, options);
  try {
    runtime.Run(fn);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "Run did not throw on rank " << WorldRank();
  return Error(ErrorCode::kInternal, "no error");
}

class Faults : public ::testing::Test {
 protected:
  void SetUp() override {
    if (WorldSize() < 2) GTEST_SKIP() << "needs mpirun -np 2 or more";
  }
  int last_ = WorldSize() - 1;
};

TEST_F(Faults, ADeviceThatThrowsEndsTheRunOnEveryRankWithItsError) {
  const Mesh mesh = Mesh::Iota({8}, {"x"});
  const int64_t victim = 7;  // on the last rank
  const Error e = RunExpectingError(mesh, [&](DeviceContext& d) {
    Array x = d.Psum(Array::Scalar<float>(1.0f), "x");
    if (d.position() == victim) throw std::runtime_error("boom");
    d.Psum(x, "x");
  });
  EXPECT_THAT(e.message(), HasSubstr(fmt::format("rank {}: device 7 (position 7, coords (7,)) failed: boom", last_)));
  EXPECT_TRUE(SameOnEveryRank(e.message())) << e.message();
}

TEST_F(Faults, DifferentCollectivesOnTwoRanksAreAMismatchEverywhere) {
  const Mesh mesh = Mesh::Iota({8}, {"x"});
  const Error e = RunExpectingError(mesh, [&](DeviceContext& d) {
    const Array x = Array::Scalar<float>(1.0f);
    if (d.position() == 0) {
      d.Psum(x, "x");
    } else if (d.position() == 7) {
      d.Pmax(x, "x");
    } else {
      d.Psum(x, "x");
    }
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.message();
  EXPECT_THAT(e.message(), HasSubstr("different collectives"));
  EXPECT_THAT(e.message(), HasSubstr("pmax"));
  EXPECT_THAT(e.message(), HasSubstr(fmt::format("rank {}", last_)));
  EXPECT_TRUE(SameOnEveryRank(e.message())) << e.message();
}

TEST_F(Faults, ARankWhoseDevicesReturnWhileOthersWaitIsAnEarlyReturn) {
  const Mesh mesh = Mesh::Iota({8}, {"x"});
  const Error e = RunExpectingError(mesh, [&](DeviceContext& d) {
    if (d.position() < 2) return;  // rank 0's devices (2 of 8 on 4 ranks, 4 of 8 on 2)
    if (d.position() >= 4) d.Barrier();
  });
  EXPECT_TRUE(SameOnEveryRank(e.message())) << e.message();
  EXPECT_THAT(e.message(), HasSubstr("returned"));
}

TEST_F(Faults, ADeviceThatNeverArrivesIsReportedByItsRankAfterTheTimeout) {
  const Mesh mesh = Mesh::Iota({8}, {"x"});
  const auto start = std::chrono::steady_clock::now();
  const Error e = RunExpectingError(
      mesh,
      [&](DeviceContext& d) {
        if (d.position() == 7) std::this_thread::sleep_for(std::chrono::milliseconds(900));
        d.Barrier();
      },
      300);
  EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded) << e.message();
  EXPECT_THAT(e.message(), HasSubstr(fmt::format("rank {}: devices did not arrive", last_)));
  EXPECT_THAT(e.message(), HasSubstr("position 7 never arrived"));
  EXPECT_TRUE(SameOnEveryRank(e.message())) << e.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(900));  // let the sleeper finish before ~Runtime
}

TEST_F(Faults, ARankThatNeverRunsIsNamedAfterTheDeadline) {
  const Mesh mesh = Mesh::Iota({8}, {"x"});
  std::shared_ptr<ProcessGroup> group = NewGroup();  // collective: every rank
  if (WorldRank() == last_) {
    // This rank hangs outside the runtime (as a dead rank would): the others must give up on it.
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  } else {
    const Error e = RunExpectingError(mesh, [&](DeviceContext& d) { d.Barrier(); }, 300, group);
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded) << e.message();
    EXPECT_THAT(e.message(), HasSubstr(fmt::format("rank {} (", last_)));
    EXPECT_THAT(e.message(), HasSubstr("sent nothing"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace spmdsim

// `--rank-dies`: the last rank's process ends in the middle of a Run (as a crashed host would). The ctest entry
// expects the whole job to fail promptly (Open MPI ends every rank when one exits abnormally; a rank left
// waiting would give up after the runtime's deadline) rather than hang.
int RankDies(spmdsim::MpiSession& mpi) {
  using namespace spmdsim;
  RuntimeOptions options;
  options.num_threads = 2;
  options.collective_timeout = std::chrono::milliseconds(500);
  options.process_group = mpi.world();
  Runtime runtime(Mesh::Iota({8}, {"x"}), options);
  runtime.Run([&](DeviceContext& d) {
    Array x = d.Psum(Array::Scalar<float>(1.0f), "x");
    if (d.position() == 7) std::_Exit(3);
    d.Psum(x, "x");
  });
  return 0;
}

// `--rank-stops`: the last rank's process stops (SIGSTOP) in the middle of a Run, as a host that hangs would. The
// other ranks must report the lost rank in one line (DEADLINE_EXCEEDED, after the documented deadline) and the job
// must end with a non-zero code: MpiSession gives up on the stopped rank at exit and ends the job with MPI_Abort
// rather than waiting for it in MPI_Finalize (tests/sim/stopped_rank.cmake checks the line, the code and the time).
int RankStops(spmdsim::MpiSession& mpi) {
  using namespace spmdsim;
  RuntimeOptions options;
  options.num_threads = 2;
  options.collective_timeout = std::chrono::milliseconds(500);
  options.process_group = mpi.world();
  Runtime runtime(Mesh::Iota({8}, {"x"}), options);
  try {
    runtime.Run([&](DeviceContext& d) {
      Array x = d.Psum(Array::Scalar<float>(1.0f), "x");
      if (d.position() == 7) raise(SIGSTOP);  // every thread of the last rank's process stops
      d.Psum(x, "x");
    });
  } catch (const Error& e) {
    fmt::print(stderr, "sim_multiprocess_test: {}\n", e.what());  // one line, as the spmdsim CLI prints an error
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  spmdsim::MpiSession mpi(&argc, &argv);
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--rank-dies") return RankDies(mpi);
    if (std::string(argv[i]) == "--rank-stops") return RankStops(mpi);
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  // Every rank's verdict: a failure on any rank fails the job.
  int worst = failed;
  if (mpi.size() > 1) MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}
