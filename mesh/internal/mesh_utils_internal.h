// The steps of CreateDeviceMesh (mesh/mesh_utils.h), exposed for white-box tests only. Each mirrors a private
// function of jax/_src/mesh_utils.py (named in its comment) so that JAX's tests of those functions can be
// ported one for one. Not part of the public API.
#ifndef SPMDSIM_MESH_INTERNAL_MESH_UTILS_INTERNAL_H_
#define SPMDSIM_MESH_INTERNAL_MESH_UTILS_INTERNAL_H_

#include <cstdint>
#include <span>
#include <vector>

#include "mesh/device_array.h"
#include "mesh/topology.h"

namespace spmdsim::internal {

// Row p, column l: how much of physical axis p logical axis l uses. Rows multiply to the physical shape,
// columns to the logical shape once complete.
using AssignmentMatrix = std::vector<std::vector<int64_t>>;

struct TorusAssignment {
  DeviceArray logical;        // the devices in the logical mesh shape
  AssignmentMatrix assignment;  // [physical axis][logical axis]
};

// JAX: _get_prime_factors. Ascending, with repeats: 12 -> {2, 2, 3}; 1 -> {}.
std::vector<int64_t> PrimeFactors(int64_t x);

// JAX: _get_physical_tpu_mesh. The devices `ids` of `topology` placed at (x, y, z) relative to their minimum
// coordinates; "TPU v2"/"TPU v3": (x, y, core_on_chip) instead. Throws Error(kind "AssertionError") when the
// devices do not fill a cuboid, leave a hole, or (v4 and later) sit on a core other than 0.
// Example: tpu-v4:2x2x4 devices 4..7 (z = 1) -> shape (2, 2, 1), ids [[[4],[6]],[[5],[7]]].
DeviceArray PhysicalTpuMesh(const Topology& topology, std::span<const int> ids);

// JAX: _create_device_mesh_for_nd_torus. See mesh/mesh_utils.h, step 2. With allow_split_physical_axes and
// no exact assignment, delegates to CreateDeviceMeshForNdTorusSplittingAxes.
// Example: physical (4, 4, 4), mesh (1, 16, 4) -> assignment columns (), (1, 2), (0,).
TorusAssignment CreateDeviceMeshForNdTorus(const DeviceArray& physical_mesh, const std::vector<int64_t>& mesh_shape,
                                           bool allow_split_physical_axes);

// JAX: _create_device_mesh_for_nd_torus_splitting_axes. Any mesh shape with the right number of devices:
// for each logical axis, last first, the most preferred feasible assignment (PreferFirstLogicalAxisAssignment).
// Example: physical (4, 4, 4), mesh (2, 1, 32) -> rows [1,1,4], [1,1,4], [2,1,2].
TorusAssignment CreateDeviceMeshForNdTorusSplittingAxes(const DeviceArray& physical_mesh,
                                                        const std::vector<int64_t>& mesh_shape);

// JAX: _enumerate_feasible_logical_axis_assignments. Every vector z with prod(z) == logical_axis_size and
// z[i] dividing what physical axis i has left. JAX yields them in Python set order; ours come sorted in
// descending lexicographic order (the choice among them does not depend on the order).
// Example: physical (12, 4, 4), used so far (2, 2, 1), size 6 -> {6,1,1}, {3,2,1}, {3,1,2}.
std::vector<std::vector<int64_t>> EnumerateFeasibleLogicalAxisAssignments(
    const std::vector<int64_t>& physical_mesh_shape, const AssignmentMatrix& assignment, int64_t logical_axis_size);

// JAX: _prefer_first_logical_axis_assignment. Compares, in order: the product of the whole physical axes x
// takes; how many whole axes (> 1) it takes; the product of its sizes on physical axes already in use; and
// finally the larger tuple.
// Example: physical (2, 2, 4): [1,2,1] is preferred to [1,1,2] (it takes the whole axis 1).
bool PreferFirstLogicalAxisAssignment(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                                      const std::vector<int64_t>& physical_mesh_shape,
                                      const AssignmentMatrix& assignment);

// JAX: _generate_logical_mesh. Splits each physical axis p into sizes assignment[p][0..L-1] (row-major) and
// groups the pieces by logical axis, physical axis major within a logical axis.
DeviceArray GenerateLogicalMesh(const DeviceArray& physical_mesh, const std::vector<int64_t>& logical_mesh_shape,
                                const AssignmentMatrix& assignment);

// JAX: _transpose_trick (contiguous_submeshes). Throws Error(kind "ValueError") naming the physical shape and,
// when the shape is known, the mesh shapes that are.
DeviceArray TransposeTrick(const DeviceArray& physical_mesh, const std::vector<int64_t>& mesh_shape);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_MESH_INTERNAL_MESH_UTILS_INTERNAL_H_
