// Mesh: ordered named axes over an N-d array of device ids (JAX: jax.sharding.Mesh).
//
// Positions: a mesh position is the row-major index of a cell of the device array; device ids are what the
// topology numbers. Everything that runs per device (sim/, shardmap/) is indexed by position.
//
// Groups along a tuple of axes (the replica groups of collectives): devices that differ only in the
// coordinates of those axes, ordered by the in-group index
//     sum_k coord[a_k] * prod_{m>k} size(a_m)        (the tuple's first name is the MAJOR one)
// and groups ordered by the row-major position of their first member.
// Example: Mesh {x:4, y:2} over ids 0..7 (id = 2*x + y):
//   Groups({"x"})      = [[0,2,4,6], [1,3,5,7]]
//   Groups({"y","x"})  = [[0,2,4,6,1,3,5,7]]     (y major: in-group index = 4*y + x)
//   Groups({})         = [[0], [1], ..., [7]]
//
// Mesh is an immutable value; copies share the topology.
#ifndef SPMDSIM_MESH_MESH_H_
#define SPMDSIM_MESH_MESH_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/device_array.h"
#include "mesh/topology.h"

namespace spmdsim {

// How an axis takes part in sharding (JAX: jax.sharding.AxisType). Auto: the compiler may choose shardings along it
// (JAX's Mesh(...) default); Explicit: shardings along it are part of the types (jax.make_mesh's default); Manual:
// inside shard_map. spmdsim stores and compares them; the one rule that reads them is JAX's: a spec may hold
// P.UNCONSTRAINED only when some axis of its mesh is Auto (partition/named_sharding.h).
enum class AxisType { kAuto, kExplicit, kManual };
// "Auto", "Explicit", "Manual" (as JAX prints them).
std::string_view AxisTypeName(AxisType type);

class Mesh {
 public:
  // An empty mesh (no axes, no devices); JAX rejects it where a real one is needed, and so do we.
  Mesh() = default;
  // REQUIRES: names unique and non-empty, one per dimension of `devices`, every id distinct and (when a
  // topology is given) a device of it. Throws Error(kInvalidArgument) naming the problem otherwise.
  // `axis_types`: one per axis, or empty for every axis Auto.
  Mesh(DeviceArray devices, std::vector<std::string> axis_names,
       std::shared_ptr<const Topology> topology = nullptr, std::vector<AxisType> axis_types = {});
  // Convenience: ids 0..N-1 in row-major order on a CPU topology of N devices.
  static Mesh Iota(std::vector<int64_t> shape, std::vector<std::string> axis_names);

  const std::vector<std::string>& axis_names() const { return axis_names_; }
  const std::vector<AxisType>& axis_types() const { return axis_types_; }  // one per axis
  // True when some axis is Auto (an empty mesh: false).
  bool HasAutoAxis() const;
  const std::vector<int64_t>& shape() const { return devices_.shape(); }  // JAX: mesh.devices.shape
  const DeviceArray& devices() const { return devices_; }
  const std::vector<int>& device_ids() const { return devices_.ids(); }  // row-major
  int64_t size() const { return devices_.size(); }
  int rank() const { return static_cast<int>(axis_names_.size()); }
  bool empty() const { return devices_.size() == 0; }
  const Topology* topology() const { return topology_.get(); }
  const std::shared_ptr<const Topology>& shared_topology() const { return topology_; }

  bool HasAxis(std::string_view name) const;
  // Index of the axis; throws Error(kNotFound) "mesh has no axis 'foo'; its axes are ('x', 'y')".
  int AxisIndex(std::string_view name) const;
  int64_t AxisSize(std::string_view name) const { return shape()[AxisIndex(name)]; }
  // Product of the sizes of `axes` (1 for none). Validates the names.
  int64_t AxesSize(std::span<const std::string> axes) const;
  // Throws Error(kNotFound) for an unknown axis and Error(kInvalidArgument) for one named twice.
  void ValidateAxes(std::span<const std::string> axes, std::string_view what = "axes") const;

  // Mesh coordinates of a position, and back.
  std::vector<int64_t> CoordsOfPosition(int64_t position) const;
  int64_t PositionOf(std::span<const int64_t> coords) const;
  // Position of a device id; throws Error(kNotFound) when the device is not in this mesh.
  int64_t PositionOfDevice(int device_id) const;
  int DeviceAt(int64_t position) const { return device_ids()[position]; }

  // The groups along `axes` as positions (see the file comment for the order) and as device ids.
  std::vector<std::vector<int64_t>> PositionGroups(std::span<const std::string> axes) const;
  std::vector<std::vector<int>> DeviceGroups(std::span<const std::string> axes) const;
  // A position's index within its group along `axes`, and which group it is in (the group's number in
  // PositionGroups order).
  int64_t IndexInGroup(int64_t position, std::span<const std::string> axes) const;
  int64_t GroupOf(int64_t position, std::span<const std::string> axes) const;

  // "Mesh('x': 4, 'y': 2)" as JAX prints mesh.shape.
  std::string ToString() const;
  bool operator==(const Mesh& other) const {
    return axis_names_ == other.axis_names_ && devices_ == other.devices_ && axis_types_ == other.axis_types_;
  }

 private:
  DeviceArray devices_;
  std::vector<std::string> axis_names_;
  std::vector<AxisType> axis_types_;
  std::shared_ptr<const Topology> topology_;
  std::vector<int64_t> strides_;
  std::vector<int64_t> position_of_device_;  // by device id; -1 when absent
};

}  // namespace spmdsim

#endif  // SPMDSIM_MESH_MESH_H_
