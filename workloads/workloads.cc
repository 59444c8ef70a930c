// Small helpers of workloads/workloads.h; the engines are in workloads/internal/.
#include "workloads/workloads.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

#include "common/error.h"
#include "ops/elementwise.h"
#include "sim/array_builder.h"

namespace spmdsim {

std::string_view StepKindName(StepKind kind) {
  return kind == StepKind::kCollective ? "collective" : "compute";
}

void RandomNormalValues(int64_t n, uint64_t seed, double scale, const ValueChunk& chunk) {
  std::mt19937_64 gen(seed);
  // Box-Muller on 53-bit uniforms: the same values on every platform (std::normal_distribution is not
  // specified exactly by the standard).
  auto uniform = [&gen] { return (static_cast<double>(gen() >> 11) + 0.5) * 0x1.0p-53; };
  constexpr int64_t kChunk = kValueChunk;  // even: a pair never straddles two chunks
  static_assert(kChunk % 2 == 0);
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

std::vector<int64_t> BlockRunStarts(std::span<const int64_t> shape, std::span<const IndexRange> index) {
  std::vector<int64_t> starts;
  const int rank = static_cast<int>(shape.size());
  std::vector<int64_t> strides(static_cast<size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
  for (int d = 0; d < rank; ++d)
    if (index[d].size() == 0) return starts;
  std::vector<int64_t> at(static_cast<size_t>(std::max(rank - 1, 0)));  // odometer over the outer dimensions
  for (int d = 0; d + 1 < rank; ++d) at[d] = index[d].start;
  while (true) {
    int64_t flat = rank == 0 ? 0 : index[rank - 1].start;
    for (int d = 0; d + 1 < rank; ++d) flat += at[d] * strides[d];
    starts.push_back(flat);
    int d = rank - 2;
    for (; d >= 0; --d) {
      if (++at[d] < index[d].stop) break;
      at[d] = index[d].start;
    }
    if (d < 0) break;
  }
  return starts;
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

std::vector<Array> BlocksOfValues(
    std::span<const int64_t> shape, DType dtype, const std::vector<std::vector<IndexRange>>& blocks,
    const std::function<void(int64_t n, const ValueChunk& chunk)>& stream,
    const std::function<Array(const std::vector<double>& values, DType dtype)>& round) {
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
      const Array rounded = round(std::vector<double>(chunk.begin(), chunk.end()), dtype);
      for (BlockFill& f : fills) f.Keep(first, rounded.size(), static_cast<const std::byte*>(rounded.raw_data()), element);
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

std::vector<Array> RandomArrayBlocks(std::span<const int64_t> shape, DType dtype, uint64_t seed, double scale,
                                     const std::vector<std::vector<IndexRange>>& blocks) {
  const int64_t n = NumElements(shape);
  return BlocksOfValues(
      shape, dtype, blocks,
      [&](int64_t needed, const ValueChunk& chunk) {
        RandomNormalValues(n, seed, scale, [&](int64_t first, std::span<const double> values) {
          return chunk(first, values) && first + static_cast<int64_t>(values.size()) < needed;
        });
      },
      [](const std::vector<double>& values, DType d) {
        return RandomArrayOfValues(values, {static_cast<int64_t>(values.size())}, d);
      });
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
