#include "mesh/device_array.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim {

DeviceArray::DeviceArray(std::vector<int64_t> shape, std::vector<int> ids)
    : shape_(std::move(shape)), ids_(std::move(ids)) {
  if (NumElements(shape_) != static_cast<int64_t>(ids_.size())) {
    Throw(ErrorCode::kInvalidArgument, "cannot lay {} devices out as shape {}", ids_.size(), PyTuple(shape_));
  }
}

int DeviceArray::at(const std::vector<int64_t>& index) const {
  SPMDSIM_CHECK(index.size() == shape_.size());
  auto strides = RowMajorStrides(shape_);
  int64_t flat = 0;
  for (size_t i = 0; i < index.size(); ++i) {
    SPMDSIM_CHECK(index[i] >= 0 && index[i] < shape_[i]);
    flat += index[i] * strides[i];
  }
  return ids_[flat];
}

DeviceArray DeviceArray::Reshape(std::vector<int64_t> shape) const {
  if (NumElements(shape) != size()) {
    Throw(ErrorCode::kInvalidArgument, "cannot reshape array of size {} into shape {}", size(), PyTuple(shape));
  }
  return DeviceArray(std::move(shape), ids_);
}

DeviceArray DeviceArray::Transpose(const std::vector<int>& perm) const {
  SPMDSIM_CHECK(perm.size() == shape_.size(), "transpose needs {} axes", shape_.size());
  const int r = rank();
  std::vector<int64_t> out_shape(r);
  for (int i = 0; i < r; ++i) out_shape[i] = shape_[perm[i]];
  auto in_strides = RowMajorStrides(shape_);
  std::vector<int> out(ids_.size());
  std::vector<int64_t> idx(r, 0);
  for (size_t flat = 0; flat < out.size(); ++flat) {
    int64_t src = 0;
    for (int i = 0; i < r; ++i) src += idx[i] * in_strides[perm[i]];
    out[flat] = ids_[src];
    for (int i = r - 1; i >= 0; --i) {
      if (++idx[i] < out_shape[i]) break;
      idx[i] = 0;
    }
  }
  return DeviceArray(std::move(out_shape), std::move(out));
}

std::string DeviceArray::ToString() const {
  if (shape_.empty()) return ids_.empty() ? "[]" : fmt::format("{}", ids_[0]);
  std::string s;
  auto strides = RowMajorStrides(shape_);
  for (size_t flat = 0; flat < ids_.size(); ++flat) {
    for (size_t d = 0; d < shape_.size(); ++d)
      if (flat % (strides[d] * shape_[d]) == 0) s += "[";
    s += fmt::format("{}", ids_[flat]);
    for (int d = static_cast<int>(shape_.size()) - 1; d >= 0; --d) {
      if ((flat + 1) % (strides[d] * shape_[d]) != 0) break;
      s += "]";
    }
    if (flat + 1 < ids_.size()) s += ", ";
  }
  if (ids_.empty()) s = "[]";
  return s;
}

}  // namespace spmdsim
