// A user's program built against an installed spmdsim.
#include <cstdio>

#include "mesh/mesh.h"

int main() {
  spmdsim::Mesh mesh = spmdsim::Mesh::Iota({4, 2}, {"data", "model"});
  auto groups = mesh.DeviceGroups(std::vector<std::string>{"model"});
  std::printf("%s has %zu model groups\n", mesh.ToString().c_str(), groups.size());
  return groups.size() == 4 ? 0 : 1;
}
