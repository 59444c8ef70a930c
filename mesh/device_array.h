// An N-d array of device ids in row-major order: what numpy's ndarray of jax.Device is to mesh_utils.
//
// Example: DeviceArray({2, 4}, {0,1,2,3,4,5,6,7}).Transpose({1, 0}) has shape (4, 2) and ids
// [0,4,1,5,2,6,3,7].
#ifndef SPMDSIM_MESH_DEVICE_ARRAY_H_
#define SPMDSIM_MESH_DEVICE_ARRAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/shape.h"  // RowMajorStrides, NumElements

namespace spmdsim {

class DeviceArray {
 public:
  DeviceArray() = default;
  // REQUIRES: product(shape) == ids.size() (throws Error(kInvalidArgument) otherwise).
  DeviceArray(std::vector<int64_t> shape, std::vector<int> ids);

  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int>& ids() const { return ids_; }
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  int rank() const { return static_cast<int>(shape_.size()); }

  int at(const std::vector<int64_t>& index) const;
  // numpy reshape (row-major); throws when the sizes differ.
  DeviceArray Reshape(std::vector<int64_t> shape) const;
  // numpy transpose: result axis i is input axis perm[i].
  DeviceArray Transpose(const std::vector<int>& perm) const;

  bool operator==(const DeviceArray& other) const = default;
  // numpy-like nested list: [[0, 1], [2, 3]].
  std::string ToString() const;

 private:
  std::vector<int64_t> shape_;
  std::vector<int> ids_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_MESH_DEVICE_ARRAY_H_
