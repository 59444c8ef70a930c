// Deterministic random arrays: the same seed gives the same values on every machine, whole or block by block.
// One fill for the whole project: the workloads' weights and inputs and the scenario's `data: random` arrays.
//
// Values are made in float64 in flat (row-major) order and rounded to the dtype as Cast rounds float64:
//   kNormal   N(0, scale^2): std::mt19937_64, Box-Muller on 53-bit uniforms in pairs (std::normal_distribution
//             is not specified exactly by the standard, so it would differ between standard libraries)
//   kUniform  U[-scale, scale): std::mt19937_64 through std::uniform_real_distribution<double>
// A block of an array (one IndexRange per dimension) is bitwise the same block cut from the whole array; it is
// made without the whole array: the memory is that of the block, the time that of the array up to the block's
// last element (values are streamed and only the block's are kept).
//
// Example:
//   Array w = RandomArray({1024, 4096}, DType::kBF16, {.seed = 7, .scale = 0.02});
//   std::vector<Array> mine = RandomArrayBlocks({1024, 4096}, DType::kBF16, {.seed = 7, .scale = 0.02},
//                                               {{{0, 512}, {0, 4096}}});   // == rows 0-511 of w, bitwise
// Thread safety: free functions over values; safe to call concurrently.
#ifndef SPMDSIM_OPS_RANDOM_H_
#define SPMDSIM_OPS_RANDOM_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/dtype.h"
#include "common/shape.h"
#include "sim/array.h"

namespace spmdsim {

enum class RandomDistribution { kNormal, kUniform };

struct RandomFill {
  uint64_t seed = 0;
  double scale = 1.0;  // standard deviation (normal) or half-width (uniform)
  RandomDistribution distribution = RandomDistribution::kNormal;
};

// Values streamed in flat order: `chunk(first, values)` gets elements [first, first + values.size()), at most
// kValueChunk at a time; it returns false when no more are needed.
inline constexpr int64_t kValueChunk = 65536;
using ValueChunk = std::function<bool(int64_t first, std::span<const double> values)>;

// The fill's first `n` values in float64, streamed to `chunk` until all are given or it returns false.
void RandomValues(int64_t n, const RandomFill& fill, const ValueChunk& chunk);

// The whole array.
Array RandomArray(std::vector<int64_t> shape, DType dtype, const RandomFill& fill);
// N(0, scale^2), the workloads' usual fill.
inline Array RandomArray(std::vector<int64_t> shape, DType dtype, uint64_t seed, double scale = 1.0) {
  return RandomArray(std::move(shape), dtype, RandomFill{.seed = seed, .scale = scale});
}
// Blocks of RandomArray(shape, dtype, fill), bitwise. REQUIRES: every block inside the shape.
std::vector<Array> RandomArrayBlocks(std::span<const int64_t> shape, DType dtype, const RandomFill& fill,
                                     const std::vector<std::vector<IndexRange>>& blocks);
inline std::vector<Array> RandomArrayBlocks(std::span<const int64_t> shape, DType dtype, uint64_t seed, double scale,
                                            const std::vector<std::vector<IndexRange>>& blocks) {
  return RandomArrayBlocks(shape, dtype, RandomFill{.seed = seed, .scale = scale}, blocks);
}
// float64 `values` rounded to dtype as the fills round them (Cast), with `shape`.
Array RoundedArray(const std::vector<double>& values, std::vector<int64_t> shape, DType dtype);

// Blocks (index ranges per dimension) of an array of `shape` whose flat elements `stream(n, chunk)` produces in
// order (the first n of them), each chunk rounded to dtype by RoundedArray (element by element, so chunk by
// chunk gives the bits of the whole array's). Keeps only the blocks' elements.
// Example: BlocksOfValues({4, 4}, kF32, {{{2, 4}, {0, 4}}}, an iota stream) -> [[8..11], [12..15]].
std::vector<Array> BlocksOfValues(std::span<const int64_t> shape, DType dtype,
                                  const std::vector<std::vector<IndexRange>>& blocks,
                                  const std::function<void(int64_t n, const ValueChunk& chunk)>& stream);

}  // namespace spmdsim

#endif  // SPMDSIM_OPS_RANDOM_H_
