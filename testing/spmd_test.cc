#include "testing/spmd_test.h"

#include "mesh/mesh_utils.h"
#include "mesh/topology.h"

namespace spmdsim::testing {

const Mesh& SpmdTest::UseMesh(std::string_view topology, const std::vector<std::pair<std::string, int64_t>>& axes) {
  runtime_.reset();
  auto topo = std::make_shared<const Topology>(Topology::Parse(topology));
  mesh_ = std::make_unique<Mesh>(MakeDeviceMesh(std::move(topo), axes));
  return *mesh_;
}

const Mesh& SpmdTest::UseIotaMesh(const std::vector<std::pair<std::string, int64_t>>& axes) {
  runtime_.reset();
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  for (const auto& [name, size] : axes) {
    names.push_back(name);
    shape.push_back(size);
  }
  mesh_ = std::make_unique<Mesh>(Mesh::Iota(shape, names));
  return *mesh_;
}

const Mesh& SpmdTest::mesh() const {
  if (mesh_ == nullptr) {
    ADD_FAILURE() << "SpmdTest: call UseMesh or UseIotaMesh before using the mesh";
    static const Mesh kOneDevice = Mesh::Iota({1}, {"x"});
    return kOneDevice;
  }
  return *mesh_;
}

Runtime& SpmdTest::runtime() {
  if (runtime_ == nullptr) runtime_ = std::make_unique<Runtime>(mesh(), runtime_options);
  return *runtime_;
}

std::vector<Array> SpmdTest::RunOnEachDevice(const std::function<Array(DeviceContext&)>& fn) {
  Runtime& r = runtime();
  std::vector<Array> out(static_cast<size_t>(r.num_devices()));
  r.Run([&](DeviceContext& d) { out[static_cast<size_t>(d.position())] = fn(d); });
  return out;
}

void SpmdTest::Run(const std::function<void(DeviceContext&)>& fn) { runtime().Run(fn); }

}  // namespace spmdsim::testing
