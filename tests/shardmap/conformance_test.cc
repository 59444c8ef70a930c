// Conformance with jax.shard_map: the cases of JAX's tests/shard_map_test.py and docs/notebooks/shard_map.md,
// on the public API only (shardmap/shard_map.h, shardmap/sharded_array.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <tuple>
#include <vector>

#include "shardmap/shard_map.h"
#include "tests/shardmap/local_ops.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<double> Range(int64_t n, double scale = 1) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i) * scale;
  return v;
}

// The columns [c0, c1) of a row-major [rows, cols] array.
std::vector<double> Columns(const std::vector<double>& a, int64_t rows, int64_t cols, int64_t c0, int64_t c1) {
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = c0; c < c1; ++c) out.push_back(a[r * cols + c]);
  return out;
}

std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return std::string(ErrorKindName(e.kind())) + ": " + e.message();
  }
  return "no error";
}

// shard_map_test.py create_inputs: mesh (2,2,2) ('x','y','z'), a = arange(64).reshape(8,8).
struct Inputs {
  Mesh mesh = Mesh::Iota({2, 2, 2}, {"x", "y", "z"});
  Array a = Array::Iota({8, 8}, DType::kF32);
  Array b = Array::Iota({8, 8}, DType::kF32);
};

TEST(Conformance, IdentityKeepsBlocksOfFourByTwo) {  // test_identity
  Inputs in;
  auto f = ShardMap([](DeviceContext&, const Array& x) { return x; }, in.mesh, {P("z", {"x", "y"})},
                    {P("z", {"x", "y"})});
  std::vector<ShardedArray> c = f.CallSharded({in.a});
  EXPECT_THAT(c[0].shard(0).shape(), ElementsAre(4, 2));
  EXPECT_EQ(c[0].Gather().ToDoubles(), in.a.ToDoubles());
  EXPECT_EQ(f(in.a)[0].ToDoubles(), in.a.ToDoubles());
}

TEST(Conformance, AllGatherOverZAndOverXY) {  // test_all_gather
  Inputs in;
  auto f = ShardMap(
      [](DeviceContext& d, const Array& a) {
        return std::tuple{d.AllGather(a, "z", 0, true), d.AllGather(a, {"x", "y"}, -1, true)};
      },
      in.mesh, {P("z", {"x", "y"})}, {P("z", {"x", "y"}), P("z", {"x", "y"})});
  std::vector<ShardedArray> out = f.CallSharded({in.a});
  const ShardedArray& c = out[0];
  const ShardedArray& d = out[1];
  std::vector<double> a = in.a.ToDoubles();
  EXPECT_THAT(c.shard(0).shape(), ElementsAre(8, 2));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.shard(2 * i).ToDoubles(), Columns(a, 8, 8, 2 * i, 2 * i + 2)) << i;
  EXPECT_THAT(d.shard(0).shape(), ElementsAre(4, 8));
  for (int i = 0; i < 2; ++i) {
    std::vector<double> rows(a.begin() + i * 32, a.begin() + (i + 1) * 32);
    EXPECT_EQ(d.shard(i).ToDoubles(), rows) << i;
  }
}

TEST(Conformance, MatmulThenPsumScatter) {  // test_matmul_reduce_scatter
  Inputs in;
  auto f = ShardMap(
      [](DeviceContext& d, const Array& a, const Array& b) {
        Array c = testops::Matmul(a, b);
        return std::tuple{d.PsumScatter(c, "y", 0, true), d.PsumScatter(c, {"z", "y"}, 0, true)};
      },
      in.mesh, {P("z", "y"), P("y", kNone)}, {P({"z", "y"}, kNone), P({"z", "y"}, kNone)});
  std::vector<ShardedArray> out = f.CallSharded({in.a, in.b});
  std::vector<double> expected = testops::Matmul(in.a, in.b).ToDoubles();
  EXPECT_THAT(out[0].shard(0).shape(), ElementsAre(2, 8));
  EXPECT_EQ(out[0].Gather().ToDoubles(), expected);
  EXPECT_THAT(out[1].shard(0).shape(), ElementsAre(1, 8));
  std::vector<double> halves(32);
  for (int i = 0; i < 32; ++i) halves[i] = expected[i] + expected[32 + i];
  EXPECT_EQ(out[1].Gather().ToDoubles(), halves);
}

TEST(Conformance, CollectivePermuteShiftsRowsByOne) {  // test_collective_permute
  Mesh mesh = Mesh::Iota({8}, {"x"});
  Array a = Array::Iota({8, 8}, DType::kI32);
  auto f = ShardMap(
      [](DeviceContext& d, const Array& x) {
        const int64_t n = d.AxisSize("x");
        PermutationPairs perm;
        for (int64_t j = 0; j < n; ++j) perm.push_back({j, (j + 1) % n});
        return d.Ppermute(x, "x", perm);
      },
      mesh, {P("x", kNone)}, {P("x", kNone)});
  std::vector<double> c = f(a)[0].ToDoubles(), x = a.ToDoubles();
  for (int r = 0; r < 8; ++r)
    for (int col = 0; col < 8; ++col) EXPECT_EQ(c[((r + 1) % 8) * 8 + col], x[r * 8 + col]);
}

TEST(Conformance, CollectivePermuteOverSeveralAxes) {  // test_collective_permute_with_multiple_axis_names
  Mesh mesh = Mesh::Iota({2, 2, 2}, {"x", "y", "z"});
  Array a = Array::Iota({4, 16}, DType::kI32);
  auto shift = [](int64_t n) {
    PermutationPairs perm;
    for (int64_t j = 0; j < n; ++j) perm.push_back({j, (j + 1) % n});
    return perm;
  };
  auto f = ShardMap(
      [&](DeviceContext& d, const Array& x) {
        return std::tuple{d.Ppermute(x, {"x", "y"}, shift(d.AxisSize({"x", "y"}))),
                          d.Ppermute(x, {"y", "z"}, shift(d.AxisSize({"y", "z"})))};
      },
      mesh, {P("x", {"y", "z"})}, {P("x", {"y", "z"}), P("x", {"y", "z"})});
  ShardedArray in = ShardedArray::DevicePut(a, NamedSharding(mesh, P("x", {"y", "z"})));
  std::vector<ShardedArray> out = f.CallSharded({in});
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(in.shard(i).ToDoubles(), out[0].shard((i + 2) % 8).ToDoubles()) << i;
    EXPECT_EQ(in.shard(i).ToDoubles(), out[1].shard(4 * (i / 4) + (i + 1) % 4).ToDoubles()) << i;
  }
}

TEST(Conformance, AllToAllOnOneAxisTransposes) {  // test_all_to_all, single axis
  Mesh mesh = Mesh::Iota({8}, {"x"});
  Array a = Array::Iota({8, 8}, DType::kI32);
  auto f = ShardMap([](DeviceContext& d, const Array& x) { return d.AllToAll(x, "x", 1, 1, true); }, mesh,
                    {P("x", kNone)}, {P(kNone, "x")});
  Array c = f(a)[0];
  EXPECT_THAT(c.shape(), ElementsAre(1, 64));
  EXPECT_EQ(c.ToDoubles(), testops::Transpose(a).ToDoubles());
}

TEST(Conformance, AllToAllOverXAndY) {  // test_all_to_all, ('x', 'y') on mesh x=4, y=2
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  Array a = Array::Iota({8, 8}, DType::kI32);
  auto f = ShardMap([](DeviceContext& d, const Array& x) { return d.AllToAll(x, {"x", "y"}, 1, 1, true); }, mesh,
                    {P({"x", "y"}, kNone)}, {P(kNone, {"x", "y"})});
  Array c = f(a)[0];
  EXPECT_THAT(c.shape(), ElementsAre(1, 64));
  EXPECT_EQ(c.ToDoubles(), testops::Transpose(a).ToDoubles());
}

TEST(Conformance, AxisIndexOverOneAxis) {  // test_axis_index / test_axis_index_basic
  Mesh mesh = Mesh::Iota({4}, {"x"});
  auto f = ShardMap([](DeviceContext& d) { return d.AxisIndexArray("x").Reshape({1}); }, mesh, {}, {P("x")});
  EXPECT_THAT(f()[0].ToDoubles(), ElementsAre(0, 1, 2, 3));
}

TEST(Conformance, AxisIndexOverTwoAxes) {  // test_axis_index_twoaxes
  Mesh mesh = Mesh::Iota({4, 2}, {"i", "j"});
  auto f = ShardMap(
      [](DeviceContext& d) {
        return std::tuple{d.AxisIndexArray("i").Reshape({1, 1}), d.AxisIndexArray("j").Reshape({1, 1}),
                          d.AxisIndexArray({"i", "j"}).Reshape({1, 1})};
      },
      mesh, {}, {P("i", "j"), P("i", "j"), P("i", "j")});
  std::vector<Array> out = f();
  EXPECT_THAT(out[0].ToDoubles(), ElementsAre(0, 0, 1, 1, 2, 2, 3, 3));
  EXPECT_THAT(out[1].ToDoubles(), ElementsAre(0, 1, 0, 1, 0, 1, 0, 1));
  EXPECT_THAT(out[2].ToDoubles(), ElementsAreArray(Range(8)));
}

TEST(Conformance, PminAndPmaxReplicateOverTheAxis) {  // test_pmin / test_pmax
  Mesh mesh = Mesh::Iota({4}, {"i"});
  Array x = Array::Iota({8}, DType::kF32);
  auto pmin = ShardMap([](DeviceContext& d, const Array& b) { return d.Pmin(b, "i"); }, mesh, {P("i")}, {P()});
  auto pmax = ShardMap([](DeviceContext& d, const Array& b) { return d.Pmax(b, "i"); }, mesh, {P("i")}, {P()});
  EXPECT_THAT(pmin(x)[0].ToDoubles(), ElementsAre(0, 1));
  EXPECT_THAT(pmax(x)[0].ToDoubles(), ElementsAre(6, 7));
}

TEST(Conformance, RepeatedPsumMultipliesByTheAxisSize) {  // test_repeated_psum_allowed
  Mesh mesh = Mesh::Iota({4}, {"i"});
  auto g = ShardMap([](DeviceContext& d, const Array& x) { return d.Psum(d.Psum(x, "i"), "i"); }, mesh, {P("i")},
                    {P()});
  EXPECT_THAT(g(Array::Iota({4}, DType::kF32))[0].ToDoubles(), ElementsAre(24));
}

TEST(Conformance, PsumOfAxisIndexIsInvariant) {  // test_axis_index_eager
  Mesh mesh = Mesh::Iota({4}, {"x"});
  auto f = ShardMap([](DeviceContext& d) { return d.Psum(d.AxisIndexArray("x"), "x"); }, mesh, {}, {P()});
  Array out = f()[0];
  EXPECT_EQ(out.rank(), 0);
  EXPECT_THAT(out.ToDoubles(), ElementsAre(6));
}

TEST(Conformance, ReplicationCheckerRejectsAnOutputThatVariesOverAnOmittedAxis) {  // test_replication_checker_eager
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  Array x = Array::Iota({8, 8}, DType::kF32);
  auto g = ShardMap([](DeviceContext&, const Array& b) { return testops::Scale(b, 2); }, mesh, {P("x", "y")},
                    {P(kNone, "y")});
  std::string error = ErrorOf([&] { g(x); });
  EXPECT_THAT(error, HasSubstr("ValueError: shard_map applied to the function 'f' was given out_specs which require "
                               "replication which can't be statically inferred given the mesh"));
  EXPECT_THAT(error, HasSubstr("out_specs[0] is P(None, 'y') which implies that the corresponding output value is "
                               "replicated across mesh axis 'x', but could not infer replication over any axes"));
  EXPECT_THAT(error, HasSubstr("The mesh given has shape (2, 2) with corresponding axis names ('x', 'y')."));

  auto g2 = ShardMap([](DeviceContext& d, const Array& b) { return d.Psum(b, "x"); }, mesh, {P("x", "y")},
                     {P(kNone, "y")});
  EXPECT_NO_THROW(g2(x));
}

TEST(Conformance, VmaErrorNamesTheAxesItCouldNotReplicate) {  // test_vma_out_specs_error_check
  Mesh mesh = Mesh::Iota({2, 2, 2}, {"x", "y", "z"});
  auto f = ShardMap([](DeviceContext&, const Array& b) { return testops::Scale(b, 2); }, mesh, {P("x", "y", "z")},
                    {P("x")});
  std::string error = ErrorOf([&] { f(Array::Iota({4, 2, 2}, DType::kI32)); });
  EXPECT_THAT(error, HasSubstr("out_specs[0] is P('x',) which implies that the corresponding output value is only "
                               "varying across mesh axes {x} and not {y,z}, but it was inferred to be possibly "
                               "varying over {x,y,z}"));
}

TEST(Conformance, RankErrors) {  // test_rank_errors
  Mesh mesh = Mesh::Iota({2, 2}, {"x", "y"});
  auto foo = ShardMap([](DeviceContext&) { return Array::Scalar<float>(3); }, mesh, {}, {P("x")});
  EXPECT_THAT(ErrorOf([&] { foo(); }), HasSubstr("which has length 1"));
  auto bar = ShardMap([](DeviceContext&, const Array& a) { return a; }, mesh, {P("x")}, {P()});
  std::string error = ErrorOf([&] { bar(Array::Scalar<float>(3)); });
  EXPECT_THAT(error, HasSubstr("which has rank 0"));
  EXPECT_THAT(error, HasSubstr("consider using an in_specs entry of `P()`"));
}

TEST(Conformance, DivisibilityErrors) {  // test_spec_divisibility_error-style cases ('divisible')
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  auto f = ShardMap([](DeviceContext&, const Array& a) { return a; }, mesh, {P("x")}, {P("x")});
  std::string error = ErrorOf([&] { f(Array::Iota({6}, DType::kF32)); });
  EXPECT_THAT(error, HasSubstr("not evenly divisible"));
  EXPECT_THAT(error, HasSubstr("maps array axis 0 (of size 6) to mesh axis 'x' (of size 4), but 4 does not evenly "
                               "divide 6"));
  auto g = ShardMap([](DeviceContext&, const Array& a) { return a; }, mesh, {P({"x", "y"})}, {P({"x", "y"})});
  EXPECT_THAT(ErrorOf([&] { g(Array::Iota({12}, DType::kF32)); }),
              HasSubstr("to mesh axes ('x', 'y') (of total size 8), but 8 does not evenly divide 12"));
}

TEST(Conformance, PartialAutoPpermute) {  // test_partial_auto_ppermute
  Mesh mesh = Mesh::Iota({4, 2}, {"i", "j"});
  ShardMapOptions options;
  options.check_vma = false;
  options.axis_names = {"i"};
  auto f = ShardMap(
      [](DeviceContext& d, const Array& x) {
        return d.Ppermute(x, "i", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
      },
      mesh, {P("i")}, {P("i")}, options);
  EXPECT_THAT(f(Array::Iota({8}, DType::kF32))[0].ToDoubles(), ElementsAre(6, 7, 0, 1, 2, 3, 4, 5));
}

TEST(Conformance, PartialAutoRejectsSpecsOnAutoAxes) {  // test_partial_auto_error_wrong_in_specs
  Mesh mesh = Mesh::Iota({2, 2}, {"i", "j"});
  ShardMapOptions options;
  options.axis_names = {"i"};
  EXPECT_THAT(ErrorOf([&] {
                ShardMap([](DeviceContext&, const Array& x) { return x; }, mesh, {P("i", "j")}, {P("i", kNone)},
                         options);
              }),
              HasSubstr("in_specs[0] refers to 'j'"));
}

TEST(Conformance, PartialAutoAxisIndex) {  // test_partial_auto_axis_index
  Mesh mesh = Mesh::Iota({4, 2}, {"i", "j"});
  ShardMapOptions options;
  options.check_vma = false;
  options.axis_names = {"i"};
  auto f = ShardMap([](DeviceContext& d) { return d.AxisIndexArray("i").Reshape({1, 1}); }, mesh, {},
                    {P("i", kNone)}, options);
  EXPECT_THAT(f()[0].ToDoubles(), ElementsAre(0, 1, 2, 3));
}

TEST(Conformance, NotebookPsumOnAOneDimensionalMeshOfFour) {
  Mesh mesh1d = Mesh::Iota({4}, {"i"});
  Array x = Array::FromVector<int32_t>({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2}, {16});
  auto f1 = ShardMap([](DeviceContext& d, const Array& b) { return d.Psum(b, "i"); }, mesh1d, {P("i")}, {P()});
  EXPECT_THAT(f1(x)[0].ToDoubles(), ElementsAre(22, 20, 12, 17));
  EXPECT_EQ(f1(x)[0].ToString(), "[22, 20, 12, 17]");  // docs/shardmap.md's opening example
}

TEST(Conformance, NotebookTiledAllToAll) {
  Mesh mesh1d = Mesh::Iota({4}, {"i"});
  Array x = Array::FromVector<int32_t>({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2}, {16});
  auto f9 = ShardMap([](DeviceContext& d, const Array& b) { return d.AllToAll(b, "i", 0, 0, true); }, mesh1d,
                     {P("i")}, {P("i")});
  EXPECT_THAT(f9(x)[0].ToDoubles(), ElementsAre(3, 5, 5, 9, 1, 9, 3, 7, 4, 2, 5, 1, 1, 6, 8, 2));
}

TEST(Conformance, UnboundAxisNameInsideShardMap) {  // "Found an unbound axis name"
  Mesh mesh = Mesh::Iota({4}, {"x"});
  auto f = ShardMap([](DeviceContext& d, const Array& b) { return d.Psum(b, "z"); }, mesh, {P("x")}, {P()});
  EXPECT_THAT(ErrorOf([&] { f(Array::Iota({4}, DType::kF32)); }),
              HasSubstr("Found an unbound axis name: z. To fix this, please call psum under `jax.shard_map`."));
}

}  // namespace
}  // namespace spmdsim
