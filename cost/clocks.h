// Simulated clocks: one per mesh position, advanced by the cost model.
//
//  - A local op advances one device by its nominal time divided by the device's speed factor (a straggler
//    with factor 0.5 takes twice as long).
//  - A collective advances every member of each group to the group's latest arrival plus the collective's
//    modelled time for that group (groups are independent: a slow group does not delay another). Link
//    time does not depend on speed factors; a straggler delays a collective only by arriving late.
//  - Every step is recorded (per device start/end; per collective group the arrival, start, end and the
//    bytes and seconds per link class) for traces and reports.
//
// Example: 4 positions, position 2 at speed 0.5. LocalAll("matmul", 1 ms) -> clocks [1, 1, 2, 1] ms.
// A psum over groups {0,1},{2,3} costing 0.25 ms -> [1.25, 1.25, 2.25, 2.25] ms; positions 0 and 1 waited 0,
// position 3 waited 1 ms for the straggler.
//
// Thread safety: none; one SimClocks belongs to one thread (the scheduler that runs the steps).
#ifndef SPMDSIM_COST_CLOCKS_H_
#define SPMDSIM_COST_CLOCKS_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "cost/collective_model.h"
#include "mesh/topology.h"

namespace spmdsim {

// One device's part in a step.
struct DeviceInterval {
  int64_t position = 0;
  double start = 0;  // when the device reached the step (its clock before it)
  double end = 0;    // its clock after the step
};

// One group of a collective step.
struct GroupInterval {
  std::vector<int64_t> positions;
  double arrival = 0;  // latest arrival of the members: the collective starts then
  double end = 0;      // arrival + cost.seconds
  CollectiveCost cost;
};

struct StepRecord {
  enum class Kind { kLocal, kCollective };
  std::string name;
  Kind kind = Kind::kLocal;
  std::vector<DeviceInterval> devices;  // every device the step touched, in position order
  std::vector<GroupInterval> groups;    // collectives only, in group order
};

class SimClocks {
 public:
  // REQUIRES: num_devices >= 1 (throws Error(kInvalidArgument) otherwise). Every clock starts at 0.
  explicit SimClocks(int64_t num_devices);

  int64_t num_devices() const { return static_cast<int64_t>(clock_.size()); }
  double now(int64_t position) const;  // throws Error(kOutOfRange) for a position outside 0..N-1
  const std::vector<double>& clocks() const { return clock_; }
  double Makespan() const;  // the latest clock

  // Straggler: the device computes at `factor` x nominal speed. REQUIRES factor > 0 and finite.
  void SetSpeedFactor(int64_t position, double factor);
  double speed_factor(int64_t position) const;

  // Advances one device by nominal_seconds / speed factor. REQUIRES nominal_seconds >= 0 and finite.
  void AdvanceLocal(const std::string& name, int64_t position, double nominal_seconds);
  // Advances every device by the same nominal time (each divided by its own speed factor), one record.
  void AdvanceLocalAll(const std::string& name, double nominal_seconds);
  // Advances each group (positions) to its latest arrival plus costs[g].seconds.
  // REQUIRES: groups.size() == costs.size(); positions valid and not in two groups.
  void AdvanceCollective(const std::string& name, const std::vector<std::vector<int64_t>>& groups,
                         const std::vector<CollectiveCost>& costs);
  // Convenience: the groups along `axes` of model.mesh(), costed by `model`.
  // REQUIRES: the mesh has num_devices() positions.
  void AdvanceCollective(const std::string& name, const CollectiveModel& model, CollectiveOp op,
                         std::span<const std::string> axes, double bytes);

  // Every step so far, unless set_keep_steps(false) was called (then empty: memory does not grow with the
  // number of steps, for callers that keep their own aggregates).
  const std::vector<StepRecord>& steps() const { return steps_; }
  void set_keep_steps(bool keep) { keep_steps_ = keep; }
  // Time each device spent waiting at collectives for later arrivals (a straggler's cost to the others).
  const std::vector<double>& wait_seconds() const { return wait_; }

 private:
  void CheckPosition(int64_t position) const;
  std::vector<double> clock_;
  std::vector<double> speed_;
  std::vector<double> wait_;
  std::vector<StepRecord> steps_;
  bool keep_steps_ = true;
};

}  // namespace spmdsim

#endif  // SPMDSIM_COST_CLOCKS_H_
