// ShardMap: splitting and holding inputs, assembling outputs, the replication check, errors with JAX's wording,
// partial auto, ShardedArray inputs/outputs and the typed interface.
#include "shardmap/shard_map.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "tests/shardmap/local_ops.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Error ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorCode::kInternal, "no error");
}

const ShardFunction kIdentity = [](DeviceContext&, std::span<const Array> b) {
  return std::vector<Array>(b.begin(), b.end());
};

TEST(P, BuildsSpecsAsPythonWritesThem) {
  EXPECT_EQ(P().ToString(), "P()");
  EXPECT_EQ(P("x").ToString(), "P('x',)");
  EXPECT_EQ(P("z", {"x", "y"}).ToString(), "P('z', ('x', 'y'))");
  EXPECT_EQ(P("x", kNone).ToString(), "P('x', None)");
  EXPECT_EQ(P({"x"}), P("x"));  // a one-name tuple is the name, as JAX canonicalises
}

TEST(ShardMap, SplitsTupleEntriesMajorToMinor) {
  // JAX (shard_map notebook): mesh (x:4, y:2), arange(8) with P(('x','y')) -> device (i,j) holds [2i+j];
  // with P(('y','x')) -> [4j+i].
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  std::vector<double> got_xy(8), got_yx(8);
  auto record = [&](std::vector<double>& got) {
    return [&got](DeviceContext& d, std::span<const Array> b) {
      got[d.position()] = b[0].ToDoubles()[0];
      return std::vector<Array>{b[0]};
    };
  };
  Array x = Array::Iota({8}, DType::kF32);
  ShardMap(record(got_xy), mesh, {P({"x", "y"})}, {P({"x", "y"})})(x);
  ShardMap(record(got_yx), mesh, {P({"y", "x"})}, {P({"y", "x"})})(x);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      EXPECT_EQ(got_xy[2 * i + j], 2 * i + j);
      EXPECT_EQ(got_yx[2 * i + j], 4 * j + i);
    }
}

TEST(ShardMap, LeavesTrailingDimensionsWholeAndHoldsReplicatedBlocksOnce) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  std::mutex mu;
  std::vector<const void*> data(4);
  std::vector<int64_t> charged(4);
  std::vector<uint64_t> masks(4);
  auto f = ShardMap(
      [&](DeviceContext& d, const Array& b) {
        std::lock_guard<std::mutex> lock(mu);
        data[d.position()] = b.raw_data();
        charged[d.position()] = b.charged_position();
        masks[d.position()] = b.varying_axes();
        EXPECT_THAT(b.shape(), ElementsAre(2, 3));
        return b;
      },
      mesh, {P("x")}, {P("x")});
  Array x = Array::Iota({4, 3}, DType::kF32);
  EXPECT_EQ(f(x)[0].ToDoubles(), x.ToDoubles());
  // y replicates: positions 0 and 1 (x=0) read one buffer, positions 2 and 3 another; each charged to itself.
  EXPECT_EQ(data[0], data[1]);
  EXPECT_EQ(data[2], data[3]);
  EXPECT_NE(data[0], data[2]);
  for (int p = 0; p < 4; ++p) EXPECT_EQ(charged[p], p);
  for (int p = 0; p < 4; ++p) EXPECT_EQ(masks[p], 0b01u);  // varies over x only
}

TEST(ShardMap, PassThroughHandsTheWholeArrayToEveryDevice) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  Array w = Array::FromVector<float>({10, 20}, {2});
  auto f = ShardMap(
      [](DeviceContext&, const Array& b, const Array& whole) {
        EXPECT_THAT(whole.shape(), ElementsAre(2));
        EXPECT_EQ(whole.varying_axes(), 0u);
        return testops::Add(b, whole);
      },
      mesh, {P("x"), InSpec::PassThrough()}, {P("x")});
  EXPECT_THAT(f(Array::Iota({8}, DType::kF32), w)[0].ToDoubles(), ElementsAre(10, 21, 12, 23, 14, 25, 16, 27));
}

TEST(ShardMap, OutputsOmittingAnAxisKeepOneCopy) {
  // JAX (shard_map notebook): mesh (x:4,y:2), arange(8.), P(('x','y')): psum 'y' -> P('x') [1,5,9,13]; psum 'x' ->
  // P('y') [12,16]; pmean over ('x','y') -> 3.5.
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  Array x = Array::Iota({8}, DType::kF32);
  auto f = ShardMap(
      [](DeviceContext& d, const Array& b) {
        return std::tuple{d.Psum(b, "y"), d.Psum(b, "x"), d.Pmean(b, {"x", "y"})};
      },
      mesh, {P({"x", "y"})}, {P("x"), P("y"), P()});
  std::vector<Array> out = f(x);
  EXPECT_THAT(out[0].ToDoubles(), ElementsAre(1, 5, 9, 13));
  EXPECT_THAT(out[1].ToDoubles(), ElementsAre(12, 16));
  EXPECT_THAT(out[2].ToDoubles(), ElementsAre(3.5));
}

TEST(ShardMap, DynamicCheckCatchesValuesBuiltFromThePosition) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  auto f = ShardMap(
      [](DeviceContext& d) { return Array::FromVector<float>({static_cast<float>(d.coords()[1])}, {1}); }, mesh, {},
      {P("x")});
  Error e = ErrorOf([&] { f(); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_THAT(e.message(), HasSubstr("returned for out_specs[0] = P('x',) a value that is not replicated across mesh "
                                     "axis 'y'"));
  EXPECT_THAT(e.message(), HasSubstr("the blocks of device 0 (x=0, y=0) and device 1 (x=0, y=1) differ along mesh "
                                     "axis 'y' (first at flat element 0: 0 vs 1)"));
}

TEST(ShardMap, StaticErrorReportsTwoDevicesWhoseBlocksDiffer) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  auto f = ShardMap([](DeviceContext&, const Array& b) { return b; }, mesh, {P("x", "y")}, {P(kNone, "y")});
  Error e = ErrorOf([&] { f(Array::Iota({4, 4}, DType::kF32)); });
  EXPECT_THAT(e.message(), HasSubstr("spmdsim compared the blocks: out_specs[0]: the blocks of device 0 (x=0, y=0) "
                                     "and device 2 (x=1, y=0) differ along mesh axis 'x'"));
  // Equal blocks still fail the static rule, as in JAX, and say so.
  Error e2 = ErrorOf([&] { f(Array::Zeros({4, 4}, DType::kF32)); });
  EXPECT_THAT(e2.message(), HasSubstr("the blocks happen to be equal along x in this call"));
}

TEST(ShardMap, CheckVmaOffKeepsTheBlockAtIndexZeroOfOmittedAxes) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  ShardMapOptions options;
  options.check_vma = false;
  auto f = ShardMap([](DeviceContext& d) { return d.AxisIndexArray({"x", "y"}).Reshape({1}); }, mesh, {}, {P("y")},
                    options);
  EXPECT_THAT(f()[0].ToDoubles(), ElementsAre(0, 1));  // x = 0 row
  std::vector<ShardedArray> s = f.CallSharded({});
  EXPECT_THAT(s[0].shard(2).ToDoubles(), ElementsAre(0));  // device (1,0) holds (0,0)'s block
  EXPECT_TRUE(s[0].shard(2).SharesBufferWith(s[0].shard(0)));
}

TEST(ShardMap, CollectivesUpdateTheVaryingAxesSeenByTheStaticCheck) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  std::atomic<uint64_t> gathered{99}, reduced{99}, permuted{99};
  auto f = ShardMap(
      [&](DeviceContext& d, const Array& b) {
        Array g = d.AllGather(b, "y", 0, true);
        Array r = d.Psum(g, "x");
        Array p = d.Ppermute(r, "x", {{0, 1}, {1, 0}});
        gathered = g.varying_axes();
        reduced = r.varying_axes();
        permuted = p.varying_axes();
        return r;
      },
      mesh, {P("x")}, {P(kNone)});
  // all_gather keeps y varying, so P() (omits y) fails statically although the blocks are equal.
  Error e = ErrorOf([&] { f(Array::Iota({4}, DType::kF32)); });
  EXPECT_THAT(e.message(), HasSubstr("out_specs[0] is P(None,) which implies that the corresponding output value is "
                                     "only varying across mesh axes {} and not {y}, but it was inferred to be possibly "
                                     "varying over {y}"));
  EXPECT_THAT(e.message(), HasSubstr("the blocks happen to be equal along y in this call"));
  EXPECT_EQ(gathered.load(), 0b11u);
  EXPECT_EQ(reduced.load(), 0b10u);
  EXPECT_EQ(permuted.load(), 0b11u);
}

TEST(ShardMap, ErrorsForSpecsAndMeshesUseJaxWording) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  Error unknown = ErrorOf([&] { ShardMap(kIdentity, mesh, {P("z")}, {P()}); });
  EXPECT_EQ(unknown.kind(), ErrorKind::kValueError);
  EXPECT_EQ(unknown.message(),
            "shard_map in_specs argument must refer to an axis marked as manual (frozenset({'x', 'y'})), but: "
            "in_specs[0] refers to 'z'. Check the in_specs values passed to shard_map.");
  Error out_unknown = ErrorOf([&] { ShardMap(kIdentity, mesh, {P()}, {P("w")}); });
  EXPECT_THAT(out_unknown.message(), HasSubstr("out_specs[0] refers to 'w'"));

  Error dup = ErrorOf([&] { ShardMap(kIdentity, mesh, {P("x", "x")}, {P()}); });
  EXPECT_EQ(dup.kind(), ErrorKind::kDuplicateSpecError);
  EXPECT_THAT(dup.message(), HasSubstr("has duplicate entries for `x`"));

  Error empty = ErrorOf([&] { ShardMap(kIdentity, Mesh(), {}, {}); });
  EXPECT_EQ(empty.kind(), ErrorKind::kValueError);
  EXPECT_THAT(empty.message(), HasSubstr("shard_map requires a non-empty mesh."));

  ShardMapOptions options;
  options.axis_names = {"q"};
  Error subset = ErrorOf([&] { ShardMap(kIdentity, mesh, {}, {}, options); });
  EXPECT_EQ(subset.message(),
            "jax.shard_map requires axis_names=frozenset({'q'}) to be a subset of "
            "mesh.axis_names=frozenset({'x', 'y'})");
}

TEST(ShardMap, ArgumentAndOutputCountsMustMatchTheSpecs) {
  Mesh mesh = Mesh::Iota({2}, {"x"});
  auto f = ShardMap(kIdentity, mesh, {P("x")}, {P("x")});
  Error e = ErrorOf([&] { f(Array::Iota({2}, DType::kF32), Array::Iota({2}, DType::kF32)); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_THAT(e.message(), HasSubstr("pytree structure error: different lengths of tuple at key path shard_map "
                                     "in_specs. "));
  EXPECT_THAT(e.message(),
              HasSubstr("of length 1, but the full pytree has a subtree of the same type but of length 2."));
  auto g = ShardMap(kIdentity, mesh, {P("x")}, {P("x"), P("x")});
  EXPECT_THAT(ErrorOf([&] { g(Array::Iota({2}, DType::kF32)); }).message(), HasSubstr("shard_map out_specs"));
}

TEST(ShardMap, DivisibilityMessageIsJaxsInFull) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  ShardMapOptions options;
  options.name = "layer";
  auto f = ShardMap(kIdentity, mesh, {P("x")}, {P("x")}, options);
  EXPECT_EQ(ErrorOf([&] { f(Array::Iota({6}, DType::kF32)); }).message(),
            "shard_map applied to the function 'layer' was given argument arrays with axis sizes that are not evenly "
            "divisible by the corresponding mesh axis sizes: The mesh given has shape (4,) with corresponding axis "
            "names ('x',). the passed args[0] of shape float32[6] corresponds to in_specs[0] of value P('x',), "
            "which maps array axis 0 (of size 6) to mesh axis 'x' (of size 4), but 4 does not evenly divide 6. "
            "Array arguments' axis sizes must be evenly divisible by the mesh axis or axes indicated by the "
            "corresponding elements of the argument's in_specs entry. Consider checking that in_specs are correct, "
            "and if so consider changing the mesh axis sizes or else padding the input and adapting 'layer' "
            "appropriately.");
}

TEST(ShardMap, RankErrorListsEveryArgument) {
  Mesh mesh = Mesh::Iota({2}, {"x"});
  auto f = ShardMap(kIdentity, mesh, {P("x", kNone), P("x", kNone)}, {P()});
  Error e = ErrorOf([&] { f(Array::Iota({2}, DType::kF32), Array::Iota({2}, DType::kF32)); });
  EXPECT_THAT(e.message(), HasSubstr(": in_specs[0] is P('x', None) which has length 2, but the passed args[0] has "
                                     "shape float32[2], which has rank 1 (and 1 < 2); in_specs[1] is P('x', None)"));
  EXPECT_EQ(e.message().find('\n'), std::string::npos);
}

TEST(ShardMap, PpermuteWithRepeatedPairsIsJaxsValueError) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  auto f = ShardMap([](DeviceContext& d, const Array& b) { return d.Ppermute(b, "x", {{0, 1}, {0, 2}}); }, mesh,
                    {P("x")}, {P("x")});
  Error e = ErrorOf([&] { f(Array::Iota({4}, DType::kF32)); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_THAT(e.message(), HasSubstr("ppermute sources and destinations must be unique, got ((0, 1), (0, 2))."));
}

TEST(ShardMap, AnExceptionOnADeviceIsRethrownWithItsPosition) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  auto f = ShardMap(
      [](DeviceContext& d, const Array& b) {
        if (d.position() == 2) throw std::runtime_error("boom");
        return d.Psum(b, "x");
      },
      mesh, {P("x")}, {P()});
  try {
    f(Array::Iota({4}, DType::kF32));
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.position(), 2);
    EXPECT_THAT(e.message(), HasSubstr("boom"));
  }
}

TEST(ShardMap, TypedFunctionsMayReturnVectorsAndMustTakeTheRightArity) {
  Mesh mesh = Mesh::Iota({2}, {"x"});
  auto f = ShardMap([](DeviceContext&, const Array& a) { return std::vector<Array>{a, a}; }, mesh, {P("x")},
                    {P("x"), P("x")});
  EXPECT_EQ(f(Array::Iota({2}, DType::kF32)).size(), 2u);
  auto g = ShardMap([](DeviceContext&, const Array& a) { return a; }, mesh, {P("x"), P("x")}, {P("x")});
  Error e = ErrorOf([&] { g(Array::Iota({2}, DType::kF32), Array::Iota({2}, DType::kF32)); });
  EXPECT_EQ(e.kind(), ErrorKind::kTypeError);
  EXPECT_THAT(e.message(), HasSubstr("f() takes 1 arrays but 2 were given"));
}

TEST(ShardMap, RejectsARuntimeOverAnotherMesh) {
  Runtime runtime(Mesh::Iota({2}, {"x"}));
  ShardMapOptions options;
  options.runtime = &runtime;
  EXPECT_THAT(ErrorOf([&] { ShardMap(kIdentity, Mesh::Iota({4}, {"x"}), {}, {}, options); }).message(),
              HasSubstr("ShardMapOptions::runtime runs on Mesh('x': 2)"));
  auto f = ShardMap(kIdentity, Mesh::Iota({2}, {"x"}), {P("x")}, {P("x")}, options);
  EXPECT_EQ(&f.runtime(), &runtime);
  EXPECT_THAT(f(Array::Iota({2}, DType::kF32))[0].ToDoubles(), ElementsAre(0, 1));
}

TEST(ShardMap, PartialAutoRunsOneInstancePerManualCoordinate) {
  Mesh mesh = Mesh::Iota({4, 2}, {"i", "j"});
  ShardMapOptions options;
  options.axis_names = {"i"};
  std::atomic<int> calls{0};
  std::mutex mu;
  std::set<int> devices;
  auto f = ShardMap(
      [&](DeviceContext& d, const Array& b) {
        ++calls;
        std::lock_guard<std::mutex> lock(mu);
        devices.insert(d.device_id());
        return testops::Scale(b, 2);
      },
      mesh, {P("i")}, {P("i")}, options);
  EXPECT_EQ(f.instance_mesh().ToString(), "Mesh('i': 4)");
  std::vector<ShardedArray> out = f.CallSharded({Array::Iota({8}, DType::kF32)});
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ(devices, (std::set<int>{0, 2, 4, 6}));  // j = 0
  EXPECT_EQ(f.last_call_stats().instances, 4);
  EXPECT_THAT(out[0].Gather().ToDoubles(), ElementsAre(0, 2, 4, 6, 8, 10, 12, 14));
  EXPECT_TRUE(out[0].shard(1).SharesBufferWith(out[0].shard(0)));  // (0,1) replicates (0,0) along auto j
  // A collective over the auto axis is unbound inside, as in JAX.
  auto g = ShardMap([](DeviceContext& d, const Array& b) { return d.Psum(b, "j"); }, mesh, {P("i")}, {P("i")},
                    options);
  EXPECT_THAT(ErrorOf([&] { g(Array::Iota({8}, DType::kF32)); }).message(),
              HasSubstr("Found an unbound axis name: j."));
}

TEST(ShardMap, ShardedInputsMatchingTheSpecAreNotMoved) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  Array x = Array::Iota({4, 4}, DType::kF32);
  ShardedArray a = ShardedArray::DevicePut(x, NamedSharding(mesh, P("x", "y")));
  std::mutex mu;
  std::vector<const void*> seen(4);
  auto f = ShardMap(
      [&](DeviceContext& d, const Array& b) {
        std::lock_guard<std::mutex> lock(mu);
        seen[d.position()] = b.raw_data();
        return b;
      },
      mesh, {P("x", "y")}, {P("x", "y")});
  std::vector<ShardedArray> out = f.CallSharded({a});
  for (int p = 0; p < 4; ++p) EXPECT_EQ(seen[p], a.shard(p).raw_data()) << p;
  EXPECT_EQ(f.last_call_stats().input_reshards[0].total_bytes_moved, 0);
  EXPECT_EQ(out[0].sharding().spec(), P("x", "y"));
  EXPECT_EQ(out[0].Gather().ToDoubles(), x.ToDoubles());
}

TEST(ShardMap, ShardedInputsWithAnotherShardingAreResharded) {
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  Array x = Array::Iota({4, 4}, DType::kF32);
  ShardedArray a = ShardedArray::DevicePut(x, NamedSharding(mesh, P("x", "y")));
  auto f = ShardMap([](DeviceContext&, const Array& b) { return b; }, mesh, {P("x")}, {P("x")});
  EXPECT_EQ(f(a)[0].ToDoubles(), x.ToDoubles());
  // P('x','y') -> P('x'): each device holds 2x2 of its 2x4 rows and receives the other 2x2 (16 bytes).
  const ReshardReport& r = f.last_call_stats().input_reshards[0];
  EXPECT_EQ(r.total_bytes_moved, 64);
  EXPECT_THAT(r.bytes_received, ElementsAre(16, 16, 16, 16));
  EXPECT_THAT(r.bytes_local, ElementsAre(16, 16, 16, 16));
}

}  // namespace
}  // namespace spmdsim
