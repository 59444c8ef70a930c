// AbstractCollective: one collective as every device of a mesh would call it, evaluated on shapes alone without
// running a device: DeviceContext's checks and JAX's shape rules (the same errors), the result's shape and dtype,
// and the CollectiveEvent the runtime would give its observer (sim/observer.h). For engines that price
// collectives whose every device makes the same call on abstract arrays, at any scale: no Runtime, no fiber
// stack per device (workloads/: the abstract collectives sweep).
//
// Example: Mesh {x:4, y:2};
//   AbstractCollective c(mesh, {.op = CollectiveKind::kAllGather, .axes = {"x"}, .tiled = true}, DType::kF32, {1024});
//   c.result_shape() == {4096}; c.result_bytes() == 16384;
//   c.event().groups == [[0, 2, 4, 6], [1, 3, 5, 7]], c.event().output_bytes_per_device == 16384, abstract.
//   AbstractCollective(mesh, {.op = CollectiveKind::kPsum, .axes = {"z"}}, DType::kF32, {4})  // throws NameError
//
// Thread safety: immutable after construction; const members may be called from any thread. event() points into
// the object: it is valid while the object lives.
#ifndef SPMDSIM_SIM_ABSTRACT_COLLECTIVE_H_
#define SPMDSIM_SIM_ABSTRACT_COLLECTIVE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "mesh/mesh.h"
#include "sim/axes.h"
#include "sim/observer.h"

namespace spmdsim {

// What a device asks (DeviceContext's parameters).
struct CollectiveRequest {
  CollectiveKind op = CollectiveKind::kPsum;
  std::vector<std::string> axes{};  // first name major
  int64_t axis = 0;               // all_gather's axis, psum_scatter's scatter_dimension, all_to_all's split_axis
  int64_t concat_axis = 0;        // all_to_all
  bool tiled = false;
  PermutationPairs perm{};        // ppermute
};

class AbstractCollective {
 public:
  // Checks `request` on an input of `dtype` and `shape` as DeviceContext does (Error with JAX's message and
  // kind: an unbound axis is a NameError, a scatter dimension that does not divide a ValueError, ...).
  // REQUIRES: request.op is not kBarrier.
  AbstractCollective(const Mesh& mesh, CollectiveRequest request, DType dtype, std::vector<int64_t> shape);
  ~AbstractCollective();
  AbstractCollective(const AbstractCollective&) = delete;
  AbstractCollective& operator=(const AbstractCollective&) = delete;

  // The result every device gets. identity(): DeviceContext returns the input itself and runs no collective
  // (psum, pmax, pmin, all_gather and psum_scatter over no axes, as JAX); then there is no event either.
  bool identity() const;
  const std::vector<int64_t>& result_shape() const;
  DType result_dtype() const;
  int64_t input_bytes() const;   // per device
  int64_t result_bytes() const;  // per device
  // What the runtime's observer would be told when every device makes this call (abstract; sequence 0).
  // REQUIRES: !identity().
  const CollectiveEvent& event() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_ABSTRACT_COLLECTIVE_H_
