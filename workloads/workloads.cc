// Small helpers of workloads/workloads.h; the engines are in workloads/engines/.
#include "workloads/workloads.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include "common/error.h"
#include "ops/elementwise.h"

namespace spmdsim {

std::string_view StepKindName(StepKind kind) {
  return kind == StepKind::kCollective ? "collective" : "compute";
}

void RandomNormalValues(int64_t n, uint64_t seed, double scale,
                        const std::function<bool(int64_t first, std::span<const double> values)>& chunk) {
  std::mt19937_64 gen(seed);
  // Box-Muller on 53-bit uniforms: the same values on every platform (std::normal_distribution is not
  // specified exactly by the standard).
  auto uniform = [&gen] { return (static_cast<double>(gen() >> 11) + 0.5) * 0x1.0p-53; };
  constexpr int64_t kChunk = 65536;  // even: a pair never straddles two chunks
  std::vector<double> values;
  for (int64_t first = 0; first < n; first += kChunk) {
    values.resize(static_cast<size_t>(std::min(kChunk, n - first)));
    for (size_t i = 0; i < values.size(); i += 2) {
      const double r = std::sqrt(-2.0 * std::log(uniform()));
      const double theta = 2.0 * std::numbers::pi * uniform();
      values[i] = scale * r * std::cos(theta);
      if (i + 1 < values.size()) values[i + 1] = scale * r * std::sin(theta);
    }
    if (!chunk(first, values)) return;
  }
}

Array RandomArray(std::vector<int64_t> shape, DType dtype, uint64_t seed, double scale, bool abstract) {
  if (abstract) return Array::Abstract(std::move(shape), dtype);
  const int64_t n = NumElements(shape);
  std::vector<double> values(static_cast<size_t>(n));
  RandomNormalValues(n, seed, scale, [&](int64_t first, std::span<const double> chunk) {
    std::copy(chunk.begin(), chunk.end(), values.begin() + first);
    return true;
  });
  return RandomArrayOfValues(values, std::move(shape), dtype);
}

Array RandomArrayOfValues(const std::vector<double>& values, std::vector<int64_t> shape, DType dtype) {
  Array f64 = Array::FromVector<double>(values, std::move(shape));
  return dtype == DType::kF64 ? f64 : Cast(f64, dtype);
}

std::vector<int64_t> SweepSizes(int64_t min_bytes, int64_t max_bytes, int64_t factor) {
  if (min_bytes <= 0 || max_bytes < min_bytes || factor < 2) {
    Throw(ErrorCode::kInvalidArgument,
          "collectives sizes: need 0 < min <= max and factor >= 2, got min {}, max {}, factor {}", min_bytes,
          max_bytes, factor);
  }
  std::vector<int64_t> sizes;
  for (int64_t s = min_bytes; s <= max_bytes; s *= factor) {
    sizes.push_back(s);
    if (s > max_bytes / factor) break;
  }
  return sizes;
}

}  // namespace spmdsim
