// A user's program built against an installed spmdsim: public headers only (internal/ is not installed).
#include <cstdio>
#include <utility>

#include "mesh/mesh.h"
#include "ops/ops.h"
#include "sim/array_builder.h"
#include "sim/runtime.h"

int main() {
  spmdsim::Mesh mesh = spmdsim::Mesh::Iota({4, 2}, {"data", "model"});
  auto groups = mesh.DeviceGroups(std::vector<std::string>{"model"});
  std::printf("%s has %zu model groups\n", mesh.ToString().c_str(), groups.size());
  spmdsim::Runtime runtime(mesh, spmdsim::RuntimeOptions{.num_threads = 1});
  std::vector<float> sums(8);
  runtime.Run([&](spmdsim::DeviceContext& d) {
    spmdsim::ArrayBuilder b(spmdsim::DType::kF32, {2});
    b.data<float>()[0] = static_cast<float>(d.position());
    b.data<float>()[1] = 1;
    spmdsim::Array x = spmdsim::Add(std::move(b).Freeze(), spmdsim::Array::Zeros({2}, spmdsim::DType::kF32));
    sums[d.position()] = d.Psum(x, "model").data<float>()[0];
  });
  std::printf("psum over model at position 5: %g\n", sums[5]);
  return groups.size() == 4 && sums[5] == 9.0f ? 0 : 1;
}
