// Deterministic random arrays (ops/random.h).
#include "ops/random.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

#include "common/error.h"
#include "ops/elementwise.h"
#include "sim/array_builder.h"

namespace spmdsim {
namespace {

// N(0, scale^2) by Box-Muller on 53-bit uniforms: the same values on every platform.
void NormalValues(int64_t n, uint64_t seed, double scale, const ValueChunk& chunk) {
  std::mt19937_64 gen(seed);
  auto uniform = [&gen] { return (static_cast<double>(gen() >> 11) + 0.5) * 0x1.0p-53; };
  static_assert(kValueChunk % 2 == 0);  // a pair never straddles two chunks
  std::vector<double> values;
  for (int64_t first = 0; first < n; first += kValueChunk) {
    values.resize(static_cast<size_t>(std::min(kValueChunk, n - first)));
    for (size_t i = 0; i < values.size(); i += 2) {
      const double r = std::sqrt(-2.0 * std::log(uniform()));
      const double theta = 2.0 * std::numbers::pi * uniform();
      values[i] = scale * r * std::cos(theta);
      if (i + 1 < values.size()) values[i + 1] = scale * r * std::sin(theta);
    }
    if (!chunk(first, values)) return;
  }
}

// U[-scale, scale).
void UniformValues(int64_t n, uint64_t seed, double scale, const ValueChunk& chunk) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-scale, scale);
  std::vector<double> values;
  for (int64_t first = 0; first < n; first += kValueChunk) {
    values.resize(static_cast<size_t>(std::min(kValueChunk, n - first)));
    for (double& v : values) v = uniform(rng);
    if (!chunk(first, values)) return;
  }
}

}  // namespace

void RandomValues(int64_t n, const RandomFill& fill, const ValueChunk& chunk) {
  if (fill.distribution == RandomDistribution::kNormal) {
    NormalValues(n, fill.seed, fill.scale, chunk);
  } else {
    UniformValues(n, fill.seed, fill.scale, chunk);
  }
}

Array RoundedArray(const std::vector<double>& values, std::vector<int64_t> shape, DType dtype) {
  Array f64 = Array::FromVector<double>(values, std::move(shape));
  return dtype == DType::kF64 ? f64 : Cast(f64, dtype);
}

Array RandomArray(std::vector<int64_t> shape, DType dtype, const RandomFill& fill) {
  const int64_t n = NumElements(shape);
  std::vector<double> values(static_cast<size_t>(n));
  RandomValues(n, fill, [&](int64_t first, std::span<const double> chunk) {
    std::copy(chunk.begin(), chunk.end(), values.begin() + first);
    return true;
  });
  return RoundedArray(values, std::move(shape), dtype);
}

namespace {

// One block being filled from streamed chunks.
struct BlockFill {
  std::vector<int64_t> starts;  // BlockRunStarts
  int64_t length = 1;           // elements per run
  size_t next = 0;              // the run being filled
  int64_t offset = 0;           // elements of that run filled
  int64_t filled = 0;           // elements of the block filled
  ArrayBuilder data;

  // Copies the elements of a chunk (flat [first, first + count), `element` bytes each) this block holds.
  void Keep(int64_t first, int64_t count, const std::byte* chunk, size_t element) {
    const int64_t end = first + count;
    auto* out = static_cast<std::byte*>(data.mutable_data());
    while (next < starts.size()) {
      const int64_t start = starts[next] + offset;
      if (start >= end) return;
      const int64_t take = std::min(starts[next] + length, end) - start;
      std::memcpy(out + static_cast<size_t>(filled) * element, chunk + static_cast<size_t>(start - first) * element,
                  static_cast<size_t>(take) * element);
      filled += take;
      offset += take;
      if (offset == length) {
        ++next;
        offset = 0;
      }
    }
  }
};

}  // namespace

std::vector<Array> BlocksOfValues(std::span<const int64_t> shape, DType dtype,
                                  const std::vector<std::vector<IndexRange>>& blocks,
                                  const std::function<void(int64_t n, const ValueChunk& chunk)>& stream) {
  std::vector<BlockFill> fills;
  int64_t last = 0;  // one past the last flat element a block holds
  for (const auto& index : blocks) {
    SPMDSIM_CHECK(index.size() == shape.size(), "block of rank {} for an array of rank {}", index.size(), shape.size());
    std::vector<int64_t> block_shape;
    for (size_t d = 0; d < index.size(); ++d) {
      SPMDSIM_CHECK(index[d].start >= 0 && index[d].start <= index[d].stop && index[d].stop <= shape[d],
                    "block outside the array");
      block_shape.push_back(index[d].size());
    }
    BlockFill f{.starts = BlockRunStarts(shape, index),
                .length = shape.empty() ? 1 : index.back().size(),
                .data = ArrayBuilder(dtype, block_shape)};
    if (!f.starts.empty()) last = std::max(last, f.starts.back() + f.length);
    fills.push_back(std::move(f));
  }
  const size_t element = static_cast<size_t>(DTypeSize(dtype));
  if (last > 0) {
    stream(last, [&](int64_t first, std::span<const double> chunk) {
      const Array rounded = RoundedArray(std::vector<double>(chunk.begin(), chunk.end()),
                                         {static_cast<int64_t>(chunk.size())}, dtype);
      for (BlockFill& f : fills)
        f.Keep(first, rounded.size(), static_cast<const std::byte*>(rounded.raw_data()), element);
      return first + static_cast<int64_t>(chunk.size()) < last;
    });
  }
  std::vector<Array> out;
  for (BlockFill& f : fills) {
    SPMDSIM_CHECK(f.filled == f.data.size(), "a block got {} of its {} elements", f.filled, f.data.size());
    out.push_back(std::move(f.data).Freeze());
  }
  return out;
}

std::vector<Array> RandomArrayBlocks(std::span<const int64_t> shape, DType dtype, const RandomFill& fill,
                                     const std::vector<std::vector<IndexRange>>& blocks) {
  const int64_t n = NumElements(shape);
  return BlocksOfValues(shape, dtype, blocks, [&](int64_t needed, const ValueChunk& chunk) {
    RandomValues(n, fill, [&](int64_t first, std::span<const double> values) {
      return chunk(first, values) && first + static_cast<int64_t>(values.size()) < needed;
    });
  });
}

}  // namespace spmdsim
