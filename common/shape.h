// Shapes (row-major, dimensions as int64_t): strides, element counts, printing, parsing, and the strided block
// copy every layer uses (collectives, ops, scatter/gather of shards).
//
// Example:
//   RowMajorStrides({2, 3, 4}) == {12, 4, 1};  NumElements({2, 3, 4}) == 24;  ShapeToString({2, 3}) == "[2,3]"
//   ParseShape("8x1024", "--shape") == {8, 1024};  ParseShape("(8,)", "--shape") == {8}
//
// Thread safety: free functions are pure; a BlockCopy is immutable after Init (Run may be called concurrently).
#ifndef SPMDSIM_COMMON_SHAPE_H_
#define SPMDSIM_COMMON_SHAPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>

namespace spmdsim {

// Row-major strides in elements: {2, 3, 4} -> {12, 4, 1}; {} -> {}.
std::vector<int64_t> RowMajorStrides(std::span<const int64_t> shape);
// The same into *strides, reusing its memory; returns *strides.
const std::vector<int64_t>& RowMajorStrides(std::span<const int64_t> shape, std::vector<int64_t>* strides);

// Product of the dimensions (1 for a scalar); throws Error(kInvalidArgument) for a negative dimension.
int64_t NumElements(std::span<const int64_t> shape);
// Whether product(shape) * element_bytes exceeds int64 (a zero dimension never overflows).
bool ElementCountOverflows(std::span<const int64_t> shape, int64_t element_bytes);

// A half-open range [start, stop) of one dimension (a Python slice with step 1); a block of an array is one
// range per dimension.
struct IndexRange {
  int64_t start = 0;
  int64_t stop = 0;
  int64_t size() const { return stop - start; }
  bool operator==(const IndexRange&) const = default;
};

// The flat index of each run of the last dimension in the block `index` of a row-major array of `shape`, in
// increasing order (none for an empty block). Example: shape {4, 4}, block rows 1-2, columns 1-3 -> {5, 9}.
// REQUIRES: index.size() == shape.size(), every range inside its dimension.
std::vector<int64_t> BlockRunStarts(std::span<const int64_t> shape, std::span<const IndexRange> index);

// "[2,3]", "[]" (XLA's and jax.Array's spelling after the dtype: "float32[2,3]").
std::string ShapeToString(std::span<const int64_t> shape);

// A shape as users type it, in flags and files. Accepted:
//   "8,1024,4096"  "8, 1024"   commas (blanks ignored)
//   "8x1024x4096"  "2x2x4"     'x' when the text has no comma
//   "(8, 1024)"  "(8,)"        a Python tuple, trailing comma allowed after the last dimension
//   ""  "()"                   a scalar: {}
// Every dimension a decimal integer >= 0. `what` names the flag or field in errors. Throws Error(kInvalidArgument)
// naming `what` and the bad token, or when the shape's bytes at 16 bytes per element (the largest dtype) overflow
// int64.
std::vector<int64_t> ParseShape(std::string_view text, std::string_view what);
// ParseShape, then at least one dimension and every dimension >= 1 (mesh and topology dimensions: "2x2x4").
std::vector<int64_t> ParseDims(std::string_view text, std::string_view what);

namespace shape_internal {
template <size_t kBytes>
inline void CopyRuns(const char* src, char* dst, int64_t count, int64_t src_step, int64_t dst_step) {
  for (int64_t i = 0; i < count; ++i) std::memcpy(dst + i * dst_step, src + i * src_step, kBytes);
}
}  // namespace shape_internal

// `count` runs of `run_bytes` bytes: run i moves from src + i * src_step to dst + i * dst_step (bytes). Runs of
// 1, 2, 4, 8 or 16 bytes are fixed-size copies (one load and one store each). Inline: collectives call it in
// their inner loops.
inline void CopyRuns(const char* src, char* dst, int64_t count, int64_t src_step, int64_t dst_step,
                     int64_t run_bytes) {
  switch (run_bytes) {
    case 1: return shape_internal::CopyRuns<1>(src, dst, count, src_step, dst_step);
    case 2: return shape_internal::CopyRuns<2>(src, dst, count, src_step, dst_step);
    case 4: return shape_internal::CopyRuns<4>(src, dst, count, src_step, dst_step);
    case 8: return shape_internal::CopyRuns<8>(src, dst, count, src_step, dst_step);
    case 16: return shape_internal::CopyRuns<16>(src, dst, count, src_step, dst_step);
    default:
      for (int64_t i = 0; i < count; ++i) {
        std::memcpy(dst + i * dst_step, src + i * src_step, static_cast<size_t>(run_bytes));
      }
  }
}

// A copy of one n-d block between two strided layouts, with the dimensions merged wherever both layouts are
// contiguous across them: at every index of `shape` (row-major, may be empty), one element moves from
// src + sum(index * src_stride) to dst + sum(index * dst_stride). A flat block is then one memcpy however it was
// shaped, and a block whose runs are single elements is copied by a typed loop instead of one memcpy call per
// element (docs/runtime.md measures it).
// Strides are in ELEMENTS of `element_bytes` bytes and may be 0 (broadcast a source) or negative.
// Example: the transpose of a row-major float32 [2,3] into [3,2]:
//   BlockCopy c;  c.Init({3, 2}, /*src_strides=*/{1, 3}, /*dst_strides=*/{2, 1}, 4);  c.Run(src, dst);
// REQUIRES: src_strides.size() == dst_strides.size() == shape.size(); every addressed byte inside its buffer;
// source and destination do not overlap.
// Dimensions kept inline up to rank 8 (no heap allocation for the shapes arrays have in practice).
using DimVector = boost::container::small_vector<int64_t, 8>;

class BlockCopy {
 public:
  // No allocation up to rank 8 (DimVector); reuses its storage beyond.
  void Init(std::span<const int64_t> shape, std::span<const int64_t> src_strides,
            std::span<const int64_t> dst_strides, int64_t element_bytes);
  void Run(const void* src, void* dst) const;
  // Bytes of the innermost contiguous run, and the dimensions left around it (merged, outermost first).
  int64_t run_bytes() const { return run_bytes_; }
  std::span<const int64_t> shape() const { return {shape_.data(), shape_.size()}; }

 private:
  bool empty_ = true;
  int64_t run_bytes_ = 0;
  DimVector shape_, src_stride_, dst_stride_;  // outermost first, strides in bytes
};

// One BlockCopy from element offsets: dst[dst_offset + sum(index * dst_strides)] =
// src[src_offset + sum(index * src_strides)] for every index of `shape` (offsets and strides in elements of
// `element_bytes` bytes). REQUIRES: as BlockCopy.
void StridedCopy(const void* src, int64_t src_offset, std::span<const int64_t> src_strides, void* dst,
                 int64_t dst_offset, std::span<const int64_t> dst_strides, std::span<const int64_t> shape,
                 int64_t element_bytes);

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_SHAPE_H_
