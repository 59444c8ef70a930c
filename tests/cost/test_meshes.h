// Meshes on real topologies for the cost-model tests.
#ifndef SPMDSIM_TESTS_COST_TEST_MESHES_H_
#define SPMDSIM_TESTS_COST_TEST_MESHES_H_

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "mesh/mesh.h"
#include "mesh/topology.h"

namespace spmdsim::testing_meshes {

// A mesh of `shape` over `topology`'s device ids in order (or `ids` when given).
inline Mesh OnTopology(const Topology& topology, std::vector<int64_t> shape, std::vector<std::string> names,
                       std::vector<int> ids = {}) {
  if (ids.empty()) {
    ids.resize(topology.num_devices());
    std::iota(ids.begin(), ids.end(), 0);
  }
  return Mesh(DeviceArray(std::move(shape), std::move(ids)), std::move(names),
              std::make_shared<const Topology>(topology));
}

inline Mesh OnTopology(const std::string& preset, std::vector<int64_t> shape, std::vector<std::string> names,
                       std::vector<int> ids = {}, int num_slices = 1) {
  return OnTopology(Topology::Parse(preset, num_slices), std::move(shape), std::move(names), std::move(ids));
}

}  // namespace spmdsim::testing_meshes

#endif  // SPMDSIM_TESTS_COST_TEST_MESHES_H_
