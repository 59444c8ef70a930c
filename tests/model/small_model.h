// What the model, plan and workloads tests share: the small Llama-style model (2048 wide, 8 layers, GQA 16/4) and
// meshes laid on a topology preset.
#ifndef SPMDSIM_TESTS_WORKLOADS_SMALL_MODEL_H_
#define SPMDSIM_TESTS_WORKLOADS_SMALL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "mesh/mesh.h"
#include "mesh/topology.h"
#include "model/model.h"

namespace spmdsim::testing_model {

inline ModelConfig SmallModel() {
  ModelConfig c = LlamaModel(2048, 8, 16, 4, 5632, 2048);
  c.name = "small";
  c.global_batch = 32;
  return c;
}

// A mesh with `axes` (name, size) on topology preset `topology`, as JAX's mesh_utils lays it.
inline Mesh MeshOn(const std::string& topology, const std::vector<std::pair<std::string, int64_t>>& axes) {
  return MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse(topology)), axes);
}

// MeshOn over cpu:N, N the product of the axes' sizes.
inline Mesh CpuMesh(const std::vector<std::pair<std::string, int64_t>>& axes) {
  int64_t n = 1;
  for (const auto& [_, size] : axes) n *= size;
  return MeshOn(fmt::format("cpu:{}", n), axes);
}

}  // namespace spmdsim::testing_model

#endif  // SPMDSIM_TESTS_WORKLOADS_SMALL_MODEL_H_
