#include "testing/matchers.h"

#include <cmath>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mesh/mesh.h"

namespace spmdsim::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The explanation a matcher gives for `value`.
template <typename M, typename T>
std::string Explain(const M& matcher, const T& value) {
  std::ostringstream os;
  matcher.MatchAndExplain(value, &os);
  return os.str();
}

TEST(AllClose, UsesNumpyAllcloseTolerances) {
  Array e = Array::FromVector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array a = Array::FromVector<float>({1, 2, 3, 4.00003f, 5, 6}, {2, 3});
  EXPECT_THAT(a, AllClose(e));                        // 3e-5 <= 1e-8 + 1e-5 * 4
  EXPECT_THAT(a, Not(AllClose(e, 1e-6, 0)));
  EXPECT_THAT(a, AllClose(e, 0, 1e-4));
  EXPECT_THAT(a, AllCloseTo({1, 2, 3, 4, 5, 6}, 1e-4));
}

TEST(AllClose, ReportsTheWorstElementAndItsIndex) {
  Array e = Array::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array a = Array::FromVector<float>({1, 2.05f, 3, 4.5f, 5, 6}, {2, 3});
  std::string why = Explain(AllClose(e, 0.01, 0), a);
  EXPECT_THAT(why, HasSubstr("differs at 2 of 6 elements; worst at index (1, 0): 4.5 vs expected 4"));
  EXPECT_THAT(Explain(AllClose(e), Array::Zeros({3, 2}, DType::kF32)), HasSubstr("has shape [3,2], expected [2,3]"));
  EXPECT_THAT(Explain(AllCloseTo({1, 2}), e), HasSubstr("has 6 elements"));
  EXPECT_THAT(Explain(AllClose(e), Array::Abstract({2, 3}, DType::kF32)), HasSubstr("is abstract"));
}

TEST(AllClose, NaNAndInfinityFollowNumpy) {
  Array n = Array::FromVector<float>({NAN, INFINITY}, {2});
  EXPECT_THAT(n, Not(AllCloseTo({NAN, INFINITY})));
  EXPECT_THAT(n, AllCloseTo({NAN, INFINITY}, 1e-5, 1e-8, /*equal_nan=*/true));
  EXPECT_THAT(n, Not(AllCloseTo({NAN, -INFINITY}, 1e-5, 1e-8, true)));
  EXPECT_THAT(n, Not(AllCloseTo({NAN, 1e30}, 1, 1, true)));
}

TEST(BitwiseEqual, ComparesDtypeShapeAndBytes) {
  Array a = Array::FromVector<float>({1, 2, 3}, {3});
  EXPECT_THAT(a, BitwiseEqual(Array::FromVector<float>({1, 2, 3}, {3})));
  EXPECT_THAT(a, Not(BitwiseEqual(Array::FromVector<double>({1, 2, 3}, {3}))));
  EXPECT_THAT(Array::FromVector<float>({0.0f}, {1}), Not(BitwiseEqual(Array::FromVector<float>({-0.0f}, {1}))));
  EXPECT_THAT(Explain(BitwiseEqual(a), Array::FromVector<float>({1, 5, 7}, {3})),
              HasSubstr("differs at 2 of 3 elements; first at index (1,): 5 vs expected 2"));
  EXPECT_THAT(Explain(BitwiseEqual(a), Array::Zeros({3}, DType::kI32)), HasSubstr("is int32[3], expected float32[3]"));
}

TEST(IsShardedAs, ComparesSpecsPaddedWithNone) {
  Mesh mesh = Mesh::Iota({2, 4}, {"dp", "tp"});
  NamedSharding s(mesh, PartitionSpec::Parse("P('dp', None)"));
  EXPECT_THAT(s, IsShardedAs("P('dp')"));
  EXPECT_THAT(s, IsShardedAs("P('dp', None, None)"));
  EXPECT_THAT(s, Not(IsShardedAs("P('tp')")));
  EXPECT_THAT(PartitionSpec::Parse("P(('dp', 'tp'),)"), IsShardedAs("(('dp', 'tp'),)"));
  EXPECT_THAT(Explain(IsShardedAs("P(None, 'tp')"), s), HasSubstr("dimension 0 is 'dp', expected None"));
}

TEST(NeededNoCorrection, PassesAFittingSpecAndListsCorrections) {
  Mesh mesh = Mesh::Iota({2, 4}, {"dp", "tp"});
  std::vector<int64_t> shape = {8, 12};
  EXPECT_THAT(CorrectSpec(PartitionSpec::Parse("P('dp', 'tp')"), mesh, shape), NeededNoCorrection());
  CorrectionReport bad = CorrectSpec(PartitionSpec::Parse("P('dp', 'sp')"), mesh, shape);
  EXPECT_THAT(bad, Not(NeededNoCorrection()));
  EXPECT_THAT(Explain(NeededNoCorrection(), bad), HasSubstr("dimension 1: unknown_axis"));
}

}  // namespace
}  // namespace spmdsim::testing
