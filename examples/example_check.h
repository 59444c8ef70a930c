// Helpers the examples share: seeded random inputs and a numpy.allclose check that prints what it compared.
// Copy this file next to an example you copy; it uses only the public spmdsim headers.
#ifndef SPMDSIM_EXAMPLES_EXAMPLE_CHECK_H_
#define SPMDSIM_EXAMPLES_EXAMPLE_CHECK_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "sim/array.h"

namespace spmdsim::examples {

// A float32 array of the given shape with N(0, scale^2) elements from `rng`.
// Example: RandomNormal(rng, {2, 3}) -> float32[2,3].
inline Array RandomNormal(std::mt19937& rng, std::vector<int64_t> shape, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(static_cast<size_t>(NumElements(shape)));
  for (float& v : values) v = normal(rng);
  return Array::FromVector<float>(values, std::move(shape));
}

// FNV-1a over the values' bits: equal for bitwise-equal results (e.g. the same program alone and under mpirun).
inline uint64_t Fingerprint(const std::vector<double>& values) {
  uint64_t h = 14695981039346656037ull;
  for (double v : values) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 8; ++i) h = (h ^ ((bits >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

// numpy.allclose(got, want, rtol, atol) with equal shapes: |got - want| <= atol + rtol * |want| everywhere.
// Prints one line either way ("<what>: OK, max |diff| 2.4e-07 over 512 elements, fingerprint <hex>" or where it
// fails).
inline bool AllClose(const std::string& what, const Array& got, const Array& want, double rtol = 1e-5,
                     double atol = 1e-6) {
  if (got.shape() != want.shape()) {
    std::printf("%s: MISMATCH, shape %s but the unsharded computation gives %s\n", what.c_str(),
                got.ShapeString().c_str(), want.ShapeString().c_str());
    return false;
  }
  std::vector<double> g = got.ToDoubles(), w = want.ToDoubles();
  double max_diff = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double diff = std::abs(g[i] - w[i]);
    if (!(diff <= atol + rtol * std::abs(w[i]))) {  // also catches NaN
      std::printf("%s: MISMATCH at flat index %zu: %.9g vs %.9g from the unsharded computation (rtol %g, atol %g)\n",
                  what.c_str(), i, g[i], w[i], rtol, atol);
      return false;
    }
    max_diff = std::max(max_diff, diff);
  }
  std::printf("%s: OK, max |diff| %.2g over %zu elements, fingerprint %016llx\n", what.c_str(), max_diff, g.size(),
              static_cast<unsigned long long>(Fingerprint(g)));
  return true;
}

}  // namespace spmdsim::examples

#endif  // SPMDSIM_EXAMPLES_EXAMPLE_CHECK_H_
