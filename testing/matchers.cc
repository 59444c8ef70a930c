#include "testing/matchers.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace spmdsim::testing {
namespace {

std::string IndexOf(const std::vector<int64_t>* shape, int64_t flat) {
  if (shape == nullptr || shape->empty()) return fmt::format("{}", flat);
  std::vector<int64_t> c(shape->size());
  for (size_t k = shape->size(); k-- > 0;) {
    c[k] = flat % (*shape)[k];
    flat /= (*shape)[k];
  }
  return c.size() == 1 ? fmt::format("({},)", c[0]) : fmt::format("({})", fmt::join(c, ", "));
}

}  // namespace

namespace internal {

bool AllCloseValues(const Array& actual, const std::vector<double>& expected, const std::vector<int64_t>* shape,
                    double rtol, double atol, bool equal_nan, std::string* explanation) {
  if (!actual.valid()) {
    *explanation = "is an empty Array handle";
    return false;
  }
  if (actual.is_abstract()) {
    *explanation = fmt::format("is abstract ({}): it has no values to compare", actual.ShapeString());
    return false;
  }
  if (shape != nullptr && actual.shape() != *shape) {
    *explanation = fmt::format("has shape {}, expected {}", ShapeToString(actual.shape()), ShapeToString(*shape));
    return false;
  }
  if (actual.size() != static_cast<int64_t>(expected.size())) {
    *explanation = fmt::format("has {} elements ({}), expected {}", actual.size(), actual.ShapeString(),
                               expected.size());
    return false;
  }
  std::vector<double> got = actual.ToDoubles();
  int64_t bad = 0, worst = -1;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    double a = got[i], e = expected[i];
    bool ok;
    double excess;
    if (std::isnan(a) || std::isnan(e)) {
      ok = equal_nan && std::isnan(a) && std::isnan(e);
      excess = ok ? 0 : INFINITY;
    } else if (std::isinf(a) || std::isinf(e)) {
      ok = a == e;
      excess = ok ? 0 : INFINITY;
    } else {
      double diff = std::abs(a - e), tol = atol + rtol * std::abs(e);
      ok = diff <= tol;
      excess = diff - tol;
    }
    if (!ok) {
      ++bad;
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = static_cast<int64_t>(i);
      }
    }
  }
  const std::vector<int64_t>& index_shape = shape != nullptr ? *shape : actual.shape();
  if (bad == 0) {
    *explanation = fmt::format("all {} elements within tolerance", got.size());
    return true;
  }
  double a = got[worst], e = expected[worst];
  *explanation = fmt::format("differs at {} of {} elements; worst at index {}: {} vs expected {} (|diff| {} > "
                             "tolerance {})",
                             bad, got.size(), IndexOf(&index_shape, worst), a, e, std::abs(a - e),
                             atol + rtol * std::abs(e));
  return false;
}

bool BitwiseEqualArrays(const Array& actual, const Array& expected, std::string* explanation) {
  if (!actual.valid() || !expected.valid()) {
    *explanation = "an empty Array handle";
    return false;
  }
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    *explanation = fmt::format("is {}, expected {}", actual.ShapeString(), expected.ShapeString());
    return false;
  }
  if (actual.is_abstract() || expected.is_abstract()) {
    *explanation = "an abstract array has no bytes to compare";
    return false;
  }
  if (actual.BitwiseEquals(expected)) {
    *explanation = "identical bytes";
    return true;
  }
  const int64_t es = DTypeSize(actual.dtype());
  auto* pa = static_cast<const unsigned char*>(actual.raw_data());
  auto* pe = static_cast<const unsigned char*>(expected.raw_data());
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(pa + i * es, pe + i * es, static_cast<size_t>(es)) != 0) {
      if (first < 0) first = i;
      ++count;
    }
  }
  std::vector<double> a = actual.ToDoubles(), e = expected.ToDoubles();
  *explanation = fmt::format("differs at {} of {} elements; first at index {}: {} vs expected {}", count, actual.size(),
                             IndexOf(&actual.shape(), first), a[first], e[first]);
  return false;
}

bool SameSharding(const PartitionSpec& actual, const PartitionSpec& expected, std::string* explanation) {
  int rank = std::max(actual.size(), expected.size());
  if (actual.Normalized(rank) == expected.Normalized(rank)) {
    *explanation = fmt::format("is {}", actual.ToString());
    return true;
  }
  for (int d = 0; d < rank; ++d) {
    const PartitionSpec a = actual.Normalized(rank), e = expected.Normalized(rank);
    if (!(a[d] == e[d])) {
      *explanation = fmt::format("is {}: dimension {} is {}, expected {}", actual.ToString(), d, a[d].ToString(),
                                 e[d].ToString());
      return false;
    }
  }
  *explanation = fmt::format("is {}", actual.ToString());
  return false;
}

bool NoCorrection(const CorrectionReport& report, std::string* explanation) {
  if (report.corrections.empty() && report.corrected == report.original) {
    *explanation = fmt::format("{} fits as written", report.original.ToString());
    return true;
  }
  std::string list;
  for (const Correction& c : report.corrections) {
    list += fmt::format("\n  dimension {}: {} ({})", c.dim, CorrectionReasonName(c.reason), c.message);
  }
  *explanation = fmt::format("{} was corrected to {} ({} mode):{}", report.original.ToString(),
                             report.corrected.ToString(), CorrectionModeName(report.mode), list);
  return false;
}

}  // namespace internal

AllCloseMatcher AllClose(const Array& expected, double rtol, double atol, bool equal_nan) {
  return AllCloseMatcher(expected.is_abstract() ? std::vector<double>{} : expected.ToDoubles(), expected.shape(), true,
                         expected.ShapeString(), rtol, atol, equal_nan);
}

AllCloseMatcher AllCloseTo(std::vector<double> expected, double rtol, double atol, bool equal_nan) {
  std::string what = fmt::format("[{}]", fmt::join(expected, ", "));
  if (what.size() > 80) what = fmt::format("{} values", expected.size());
  return AllCloseMatcher(std::move(expected), {}, false, what, rtol, atol, equal_nan);
}

BitwiseEqualMatcher BitwiseEqual(const Array& expected) { return BitwiseEqualMatcher(expected); }

ShardedAsMatcher IsShardedAs(std::string_view spec) { return ShardedAsMatcher(PartitionSpec::Parse(spec)); }
ShardedAsMatcher IsShardedAs(const PartitionSpec& spec) { return ShardedAsMatcher(spec); }

NoCorrectionMatcher NeededNoCorrection() { return {}; }

}  // namespace spmdsim::testing
