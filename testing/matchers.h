// GoogleTest matchers for arrays, shardings and spec corrections (namespace spmdsim::testing).
//
//   EXPECT_THAT(actual, AllClose(expected, 1e-5, 1e-8));   // numpy.allclose: |a - e| <= atol + rtol * |e|
//   EXPECT_THAT(actual, AllCloseTo({1.0, 2.0, 3.0}));      // against values (row-major), shape not checked
//   EXPECT_THAT(actual, BitwiseEqual(expected));           // same dtype, shape and bytes
//   EXPECT_THAT(sharding, IsShardedAs("P('dp', None)"));    // a NamedSharding or a PartitionSpec
//   EXPECT_THAT(CorrectSpec(spec, mesh, shape), NeededNoCorrection());
//
// On a mismatch each explains itself, e.g. AllClose:
//   "differs at 3 of 6 elements; worst at index (1, 0): 4.5 vs expected 4 (|diff| 0.5 > tolerance 0.04)".
// numpy.allclose semantics (its defaults rtol=1e-5, atol=1e-8 are ours); NaN never equals NaN unless
// equal_nan; infinities must match exactly. Shapes must be equal (no broadcasting); dtypes may differ (values
// are compared as doubles). An abstract array matches nothing.
// IsShardedAs compares specs after padding both with None to the same length (JAX: P('x') and P('x', None)
// shard a 2-D array alike) and reading UNCONSTRAINED as None.
#ifndef SPMDSIM_TESTING_MATCHERS_H_
#define SPMDSIM_TESTING_MATCHERS_H_

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>

#include "partition/correction.h"
#include "partition/named_sharding.h"
#include "partition/partition_spec.h"
#include "sim/array.h"

namespace spmdsim::testing {

namespace internal {
// Each returns true on a match and writes why not (or a short confirmation) to *explanation.
bool AllCloseValues(const Array& actual, const std::vector<double>& expected, const std::vector<int64_t>* shape,
                    double rtol, double atol, bool equal_nan, std::string* explanation);
bool BitwiseEqualArrays(const Array& actual, const Array& expected, std::string* explanation);
bool SameSharding(const PartitionSpec& actual, const PartitionSpec& expected, std::string* explanation);
bool NoCorrection(const CorrectionReport& report, std::string* explanation);
}  // namespace internal

class AllCloseMatcher {
 public:
  using is_gtest_matcher = void;
  AllCloseMatcher(std::vector<double> expected, std::vector<int64_t> shape, bool check_shape, std::string what,
                  double rtol, double atol, bool equal_nan)
      : expected_(std::move(expected)), shape_(std::move(shape)), check_shape_(check_shape), what_(std::move(what)),
        rtol_(rtol), atol_(atol), equal_nan_(equal_nan) {}
  bool MatchAndExplain(const Array& actual, std::ostream* os) const {
    std::string why;
    bool ok = internal::AllCloseValues(actual, expected_, check_shape_ ? &shape_ : nullptr, rtol_, atol_, equal_nan_,
                                       &why);
    if (os != nullptr) *os << why;
    return ok;
  }
  void DescribeTo(std::ostream* os) const {
    *os << "is all close to " << what_ << " (rtol=" << rtol_ << ", atol=" << atol_ << ")";
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "is not all close to " << what_ << " (rtol=" << rtol_ << ", atol=" << atol_ << ")";
  }

 private:
  std::vector<double> expected_;
  std::vector<int64_t> shape_;
  bool check_shape_;
  std::string what_;
  double rtol_, atol_;
  bool equal_nan_;
};

// numpy.allclose against an Array of the same shape.
AllCloseMatcher AllClose(const Array& expected, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
// numpy.allclose against row-major values (the element count must match; the shape is not checked).
AllCloseMatcher AllCloseTo(std::vector<double> expected, double rtol = 1e-5, double atol = 1e-8,
                           bool equal_nan = false);

class BitwiseEqualMatcher {
 public:
  using is_gtest_matcher = void;
  explicit BitwiseEqualMatcher(Array expected) : expected_(std::move(expected)) {}
  bool MatchAndExplain(const Array& actual, std::ostream* os) const {
    std::string why;
    bool ok = internal::BitwiseEqualArrays(actual, expected_, &why);
    if (os != nullptr) *os << why;
    return ok;
  }
  void DescribeTo(std::ostream* os) const { *os << "is bitwise equal to " << expected_.ShapeString(); }
  void DescribeNegationTo(std::ostream* os) const { *os << "is not bitwise equal to " << expected_.ShapeString(); }

 private:
  Array expected_;
};
BitwiseEqualMatcher BitwiseEqual(const Array& expected);

class ShardedAsMatcher {
 public:
  using is_gtest_matcher = void;
  explicit ShardedAsMatcher(PartitionSpec expected) : expected_(std::move(expected)) {}
  bool MatchAndExplain(const PartitionSpec& actual, std::ostream* os) const {
    std::string why;
    bool ok = internal::SameSharding(actual, expected_, &why);
    if (os != nullptr) *os << why;
    return ok;
  }
  bool MatchAndExplain(const NamedSharding& actual, std::ostream* os) const {
    return MatchAndExplain(actual.spec(), os);
  }
  void DescribeTo(std::ostream* os) const { *os << "is sharded as " << expected_.ToString(); }
  void DescribeNegationTo(std::ostream* os) const { *os << "is not sharded as " << expected_.ToString(); }

 private:
  PartitionSpec expected_;
};
// `spec` is Python text ("P('dp', None)", "('dp', ('fsdp', 'tp'))"; PartitionSpec::Parse) or a PartitionSpec.
ShardedAsMatcher IsShardedAs(std::string_view spec);
ShardedAsMatcher IsShardedAs(const PartitionSpec& spec);

class NoCorrectionMatcher {
 public:
  using is_gtest_matcher = void;
  bool MatchAndExplain(const CorrectionReport& report, std::ostream* os) const {
    std::string why;
    bool ok = internal::NoCorrection(report, &why);
    if (os != nullptr) *os << why;
    return ok;
  }
  void DescribeTo(std::ostream* os) const { *os << "needed no correction"; }
  void DescribeNegationTo(std::ostream* os) const { *os << "needed a correction"; }
};
NoCorrectionMatcher NeededNoCorrection();

}  // namespace spmdsim::testing

#endif  // SPMDSIM_TESTING_MATCHERS_H_
