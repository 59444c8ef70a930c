#include "mesh/mesh.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim {

Mesh::Mesh(DeviceArray devices, std::vector<std::string> axis_names, std::shared_ptr<const Topology> topology)
    : devices_(std::move(devices)), axis_names_(std::move(axis_names)), topology_(std::move(topology)) {
  if (static_cast<int>(axis_names_.size()) != devices_.rank()) {
    Throw(ErrorCode::kInvalidArgument, "mesh axis names {} must be one per dimension of the device array of shape {}",
          PyTuple(axis_names_), PyTuple(devices_.shape()));
  }
  for (size_t i = 0; i < axis_names_.size(); ++i) {
    if (axis_names_[i].empty()) Throw(ErrorCode::kInvalidArgument, "mesh axis {} has an empty name", i);
    for (size_t j = 0; j < i; ++j) {
      if (axis_names_[i] == axis_names_[j]) {
        Throw(ErrorCode::kInvalidArgument, "mesh axis names must be unique, got {} ('{}' twice)",
              PyTuple(axis_names_), axis_names_[i]);
      }
    }
  }
  strides_ = RowMajorStrides(devices_.shape());
  int max_id = -1;
  for (int id : devices_.ids()) {
    if (id < 0) Throw(ErrorCode::kInvalidArgument, "mesh device id {} is negative", id);
    max_id = std::max(max_id, id);
  }
  if (topology_ && max_id >= topology_->num_devices()) {
    Throw(ErrorCode::kInvalidArgument, "mesh names device {} but {} has devices 0..{}", max_id,
          topology_->ToString(), topology_->num_devices() - 1);
  }
  position_of_device_.assign(static_cast<size_t>(max_id + 1), -1);
  for (int64_t p = 0; p < devices_.size(); ++p) {
    int id = devices_.ids()[p];
    if (position_of_device_[id] != -1) {
      Throw(ErrorCode::kInvalidArgument, "device {} appears twice in the mesh", id);
    }
    position_of_device_[id] = p;
  }
}

Mesh Mesh::Iota(std::vector<int64_t> shape, std::vector<std::string> axis_names) {
  int64_t n = NumElements(shape);
  std::vector<int> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int>(i);
  auto topology = std::make_shared<const Topology>(Topology::Cpu(static_cast<int>(std::max<int64_t>(n, 1))));
  return Mesh(DeviceArray(std::move(shape), std::move(ids)), std::move(axis_names), n > 0 ? topology : nullptr);
}

bool Mesh::HasAxis(std::string_view name) const {
  return std::find(axis_names_.begin(), axis_names_.end(), name) != axis_names_.end();
}

int Mesh::AxisIndex(std::string_view name) const {
  auto it = std::find(axis_names_.begin(), axis_names_.end(), name);
  if (it == axis_names_.end()) {
    Throw(ErrorCode::kNotFound, "mesh has no axis '{}'; its axes are {}", name, PyTuple(axis_names_));
  }
  return static_cast<int>(it - axis_names_.begin());
}

void Mesh::ValidateAxes(std::span<const std::string> axes, std::string_view what) const {
  for (size_t i = 0; i < axes.size(); ++i) {
    AxisIndex(axes[i]);
    for (size_t j = 0; j < i; ++j) {
      if (axes[i] == axes[j]) {
        Throw(ErrorCode::kInvalidArgument, "{} name mesh axis '{}' twice", what, axes[i]);
      }
    }
  }
}

int64_t Mesh::AxesSize(std::span<const std::string> axes) const {
  ValidateAxes(axes);
  int64_t n = 1;
  for (const auto& a : axes) n *= AxisSize(a);
  return n;
}

std::vector<int64_t> Mesh::CoordsOfPosition(int64_t position) const {
  SPMDSIM_CHECK(position >= 0 && position < size(), "position {} outside mesh of {}", position, size());
  std::vector<int64_t> coords(rank());
  for (int d = 0; d < rank(); ++d) coords[d] = (position / strides_[d]) % shape()[d];
  return coords;
}

int64_t Mesh::PositionOf(std::span<const int64_t> coords) const {
  SPMDSIM_CHECK(static_cast<int>(coords.size()) == rank());
  int64_t p = 0;
  for (int d = 0; d < rank(); ++d) {
    SPMDSIM_CHECK(coords[d] >= 0 && coords[d] < shape()[d]);
    p += coords[d] * strides_[d];
  }
  return p;
}

int64_t Mesh::PositionOfDevice(int device_id) const {
  if (device_id < 0 || device_id >= static_cast<int>(position_of_device_.size()) ||
      position_of_device_[device_id] < 0) {
    Throw(ErrorCode::kNotFound, "device {} is not in mesh {}", device_id, ToString());
  }
  return position_of_device_[device_id];
}

int64_t Mesh::IndexInGroup(int64_t position, std::span<const std::string> axes) const {
  int64_t index = 0;
  for (const auto& a : axes) {
    int d = AxisIndex(a);
    index = index * shape()[d] + (position / strides_[d]) % shape()[d];
  }
  return index;
}

int64_t Mesh::GroupOf(int64_t position, std::span<const std::string> axes) const {
  // Groups are numbered by the remaining axes in mesh order (row-major over them).
  std::vector<bool> in_group(rank(), false);
  for (const auto& a : axes) in_group[AxisIndex(a)] = true;
  int64_t group = 0;
  for (int d = 0; d < rank(); ++d) {
    if (!in_group[d]) group = group * shape()[d] + (position / strides_[d]) % shape()[d];
  }
  return group;
}

std::vector<std::vector<int64_t>> Mesh::PositionGroups(std::span<const std::string> axes) const {
  ValidateAxes(axes);
  int64_t group_size = 1;
  for (const auto& a : axes) group_size *= AxisSize(a);
  int64_t num_groups = size() / group_size;
  std::vector<std::vector<int64_t>> groups(num_groups, std::vector<int64_t>(group_size));
  for (int64_t p = 0; p < size(); ++p) groups[GroupOf(p, axes)][IndexInGroup(p, axes)] = p;
  return groups;
}

std::vector<std::vector<int>> Mesh::DeviceGroups(std::span<const std::string> axes) const {
  auto positions = PositionGroups(axes);
  std::vector<std::vector<int>> groups(positions.size());
  for (size_t g = 0; g < positions.size(); ++g) {
    groups[g].reserve(positions[g].size());
    for (int64_t p : positions[g]) groups[g].push_back(DeviceAt(p));
  }
  return groups;
}

std::string Mesh::ToString() const {
  std::vector<std::string> parts;
  for (int d = 0; d < rank(); ++d) parts.push_back(fmt::format("'{}': {}", axis_names_[d], shape()[d]));
  return fmt::format("Mesh({})", fmt::join(parts, ", "));
}

}  // namespace spmdsim
