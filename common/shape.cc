#include "common/shape.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim {

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


std::vector<int64_t> RowMajorStrides(std::span<const int64_t> shape) {
  std::vector<int64_t> strides;
  RowMajorStrides(shape, &strides);
  return strides;
}

const std::vector<int64_t>& RowMajorStrides(std::span<const int64_t> shape, std::vector<int64_t>* strides) {
  strides->resize(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    (*strides)[i] = stride;
    stride *= shape[i];
  }
  return *strides;
}

int64_t NumElements(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) Throw(ErrorCode::kInvalidArgument, "negative dimension in shape {}", ShapeToString(shape));
    n *= d;
  }
  return n;
}

bool ElementCountOverflows(std::span<const int64_t> shape, int64_t element_bytes) {
  for (int64_t d : shape) {
    if (d == 0) return false;
  }
  int64_t total = element_bytes;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(total, d, &total)) return true;
  }
  return false;
}

std::string ShapeToString(std::span<const int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

std::vector<int64_t> ParseShape(std::string_view text, std::string_view what) {
  std::string_view t = Trim(text);
  if (t.size() >= 2 && t.front() == '(' && t.back() == ')') t = Trim(t.substr(1, t.size() - 2));
  std::vector<int64_t> shape;
  if (t.empty()) return shape;
  const char separator = t.find(',') == std::string_view::npos && t.find('x') != std::string_view::npos ? 'x' : ',';
  const std::vector<std::string> parts = Split(t, separator);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (Trim(parts[i]).empty()) {
      if (separator == ',' && i + 1 == parts.size() && i > 0) continue;  // Python's trailing comma: (8,)
      Throw(ErrorCode::kInvalidArgument, "{}: empty dimension in shape '{}'; expected sizes such as 8,1024,4096", what,
            text);
    }
    const int64_t v = ParseInt(parts[i], what);
    if (v < 0) Throw(ErrorCode::kInvalidArgument, "{}: dimension sizes must be >= 0, got {} in '{}'", what, v, text);
    shape.push_back(v);
  }
  if (ElementCountOverflows(shape, 16)) {
    Throw(ErrorCode::kInvalidArgument, "{}: shape '{}' holds more than 2^63 bytes (the largest dtype is 16 bytes)",
          what, text);
  }
  return shape;
}

std::vector<int64_t> ParseDims(std::string_view text, std::string_view what) {
  std::vector<int64_t> dims = ParseShape(text, what);
  const bool positive = std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d > 0; });
  if (dims.empty() || !positive) {
    Throw(ErrorCode::kInvalidArgument, "{}: dimensions must be positive, got '{}'", what, text);
  }
  return dims;
}

void BlockCopy::Init(std::span<const int64_t> shape, std::span<const int64_t> src_strides,
                     std::span<const int64_t> dst_strides, int64_t element_bytes) {
  shape_.clear();
  src_stride_.clear();
  dst_stride_.clear();
  empty_ = false;
  for (int64_t d : shape) empty_ = empty_ || d == 0;
  if (empty_) return;
  // Innermost first: drop size-1 dimensions, merge a dimension into the one inside it when both layouts step
  // over it exactly as over the whole inner one.
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (!shape_.empty() && src_strides[i] == src_stride_.back() * shape_.back() &&
        dst_strides[i] == dst_stride_.back() * shape_.back()) {
      shape_.back() *= shape[i];
      continue;
    }
    shape_.push_back(shape[i]);
    src_stride_.push_back(src_strides[i]);
    dst_stride_.push_back(dst_strides[i]);
  }
  run_bytes_ = element_bytes;
  if (!shape_.empty() && src_stride_.front() == 1 && dst_stride_.front() == 1) {
    run_bytes_ *= shape_.front();
    shape_.erase(shape_.begin());
    src_stride_.erase(src_stride_.begin());
    dst_stride_.erase(dst_stride_.begin());
  }
  std::reverse(shape_.begin(), shape_.end());
  std::reverse(src_stride_.begin(), src_stride_.end());
  std::reverse(dst_stride_.begin(), dst_stride_.end());
  for (int64_t& v : src_stride_) v *= element_bytes;
  for (int64_t& v : dst_stride_) v *= element_bytes;
}

void BlockCopy::Run(const void* src_bytes, void* dst_bytes) const {
  if (empty_) return;
  const char* src = static_cast<const char*>(src_bytes);
  char* dst = static_cast<char*>(dst_bytes);
  const size_t rank = shape_.size();
  if (rank == 0) {
    std::memcpy(dst, src, static_cast<size_t>(run_bytes_));
    return;
  }
  // The innermost dimension in one tight loop; an odometer over the others.
  const int64_t count = shape_.back(), src_step = src_stride_.back(), dst_step = dst_stride_.back();
  if (rank == 1) {
    CopyRuns(src, dst, count, src_step, dst_step, run_bytes_);
    return;
  }
  constexpr size_t kInlineRank = 16;
  int64_t inline_index[kInlineRank] = {};
  std::vector<int64_t> heap_index;
  int64_t* index = inline_index;
  if (rank - 1 > kInlineRank) {
    heap_index.assign(rank - 1, 0);
    index = heap_index.data();
  }
  for (;;) {
    CopyRuns(src, dst, count, src_step, dst_step, run_bytes_);
    size_t d = rank - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      src += src_stride_[d];
      dst += dst_stride_[d];
      if (++index[d] < shape_[d]) break;
      src -= shape_[d] * src_stride_[d];
      dst -= shape_[d] * dst_stride_[d];
      index[d] = 0;
    }
  }
}

void StridedCopy(const void* src, int64_t src_offset, std::span<const int64_t> src_strides, void* dst,
                 int64_t dst_offset, std::span<const int64_t> dst_strides, std::span<const int64_t> shape,
                 int64_t element_bytes) {
  BlockCopy copy;
  copy.Init(shape, src_strides, dst_strides, element_bytes);
  copy.Run(static_cast<const char*>(src) + src_offset * element_bytes,
           static_cast<char*>(dst) + dst_offset * element_bytes);
}

}  // namespace spmdsim
