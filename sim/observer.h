// RuntimeObserver: the seam through which a cost model (or a tracer) sees what the virtual devices do, so
// that simulated clocks can be advanced outside sim/.
//
// Example: a collective event for psum over 'x' on Mesh {x:4, y:2} with float32[1024] per device:
//   op CollectiveKind::kPsum, axes ("x"), group_size 4, num_groups 2, groups [[0,2,4,6],[1,3,5,7]] (positions),
//   input_bytes_per_device 4096, output_bytes_per_device 4096, dtype float32, sequence 0 (the Run's first).
//   Ppermute(x, "x", {{0, 1}, {1, 2}, {2, 3}, {3, 0}}) also carries permutation [(0,1),(1,2),(2,3),(3,0)].
//
// Thread safety and ordering (the runtime's contract with implementations):
//  - OnRunStart is called on the thread that calls Runtime::Run, before any device starts; OnRunEnd on that
//    thread after every other call of the Run has returned: after every device has finished, or, when the
//    Run failed while a device still runs, after the runtime stopped calling the observer for that Run.
//  - OnDeviceStart / OnDeviceFinish are called on runtime worker threads, one call at a time (the runtime
//    serialises them); for one device, Start happens before Finish. After a failed Run, devices that were
//    still running are not reported.
//  - OnCollective is called once per collective, on one worker thread, while every device is waiting at
//    that collective: it never overlaps any other observer call of the same Run. Everything an observer
//    wrote in OnDeviceStart/Finish or an earlier OnCollective is visible to it (the barrier orders them).
//  - Calls must not throw; an exception escaping an observer aborts the process (std::terminate).
#ifndef SPMDSIM_SIM_OBSERVER_H_
#define SPMDSIM_SIM_OBSERVER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/array.h"

namespace spmdsim {

// The collectives of sim/device_context.h.
enum class CollectiveKind : uint8_t {
  kBarrier, kPsum, kPmean, kPmax, kPmin, kAllGather, kPsumScatter, kAllToAll, kPpermute
};
// JAX's names: "barrier", "psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "all_to_all",
// "ppermute".
std::string_view CollectiveName(CollectiveKind op);

struct CollectiveEvent {
  CollectiveKind op = CollectiveKind::kBarrier;
  std::span<const std::string> axes;    // as the devices named them (first name major)
  int64_t group_size = 1;               // devices per group (1 for a barrier)
  int64_t num_groups = 1;
  // The groups as mesh positions, in group order; each in in-group order. Empty for a barrier (which
  // involves every device).
  std::span<const std::vector<int64_t>> groups;
  DType dtype = DType::kF32;            // of the input (barrier: float32, no bytes)
  int64_t input_bytes_per_device = 0;
  int64_t output_bytes_per_device = 0;
  bool abstract = false;                // the arrays have no elements (only shapes were computed)
  uint64_t sequence = 0;                // 0, 1, 2, ... within one Run
  // ppermute: the (source, destination) pairs as in-group indices in [0, group_size), as the runtime resolved
  // the devices' pairs; every group uses the same pairs. Empty for every other op.
  std::span<const std::pair<int64_t, int64_t>> permutation;
};

class RuntimeObserver {
 public:
  virtual ~RuntimeObserver() = default;
  virtual void OnRunStart(int64_t num_devices) {}
  virtual void OnRunEnd(bool ok) {}
  virtual void OnDeviceStart(int64_t position) {}
  // `failed`: the device's function threw (or was aborted because another device failed).
  virtual void OnDeviceFinish(int64_t position, bool failed) {}
  virtual void OnCollective(const CollectiveEvent& event) {}
};

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_OBSERVER_H_
