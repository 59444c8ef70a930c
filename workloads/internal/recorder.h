// CostRecorder: the engines' link between the Runtime and the cost model. It is the RuntimeObserver of the
// Runtime the workload runs on and that Runtime's op cost sink (RuntimeOptions::op_cost_sink, ops/cost.h):
//  - a device marks the step it is in with BeginStep / EndStep (its own slot only);
//  - every op the device runs is priced by the ComputeModel (cost/compute_model.h) when it is recorded and added
//    to the device's pending local time for the current step;
//  - at each collective (when every device waits, sim/observer.h) and at the end of the Run, the pending local
//    time of every device is charged to its SimClocks clock, then the collective is costed per group by the
//    CollectiveModel (cached per op/axes/bytes/pairs) and the groups advanced;
//  - Finish() turns what was recorded into StepResults, totals and trace events. Without a trace, finished
//    events are summed per step as they complete, so memory does not grow with the number of iterations.
//  - Across ranks (a process_group of several ranks), each rank records only its own devices, and a clock
//    depends on every member of a group: the recorder then logs, per local device, its events and what each
//    flush charged to them, and the collectives' costs, without touching the clocks; Finish exchanges the
//    logs (ProcessGroup::AllGatherBytes) and replays every device's flushes and the collectives in order on
//    fresh clocks, so every rank ends with the one-process figures for every device (docs/multiprocess.md).
//    The log keeps every event of a charged Run (no folding).
//
// Example: 2 devices, step 0 "h" (matmul 1 us each), step 1 "y" (psum costing 3 us):
//   events per device: h [0, 1 us], y [1 us, 4 us]; steps: h compute 1 us, y collective 3 us; makespan 4 us.
//
// Thread safety: BeginStep/EndStep/Record for position p are called only by the code of device p
// (one fiber at a time); OnCollective and OnRunEnd run while no device runs (the runtime's barrier orders them
// after every device's earlier writes). AddStep, set_charging and Finish are called on the host thread between
// Runs.
#ifndef SPMDSIM_WORKLOADS_ENGINES_RECORDER_H_
#define SPMDSIM_WORKLOADS_ENGINES_RECORDER_H_

#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cost/clocks.h"
#include "cost/collective_model.h"
#include "sim/runtime.h"
#include "cost/compute_model.h"
#include "ops/cost.h"
#include "workloads/workloads.h"
#include "sim/observer.h"

namespace spmdsim::internal {

// The topology's peak_flops key for a dtype (bf16, f16, f64 themselves; every other dtype f32), falling back to
// f32 when the topology lacks the key.
DType PeakFlopsKey(const Topology& topology, DType dtype);

class CostRecorder final : public RuntimeObserver, public OpCostSink {
 public:
  // REQUIRES: mesh has a topology (Error(kFailedPrecondition) naming the mesh otherwise).
  CostRecorder(const WorkloadContext& context, const Mesh& mesh);

  // Registers a step (host thread, before the Run that uses it); returns its index.
  int AddStep(std::string name, std::string op, StepKind kind, std::vector<std::string> axes = {});
  int num_steps() const { return static_cast<int>(steps_.size()); }

  // Device side.
  void BeginStep(int64_t position, int step, DType dtype);
  void EndStep(int64_t position);

  // Whether Runs are charged (warmup Runs are not). Host thread, between Runs.
  void set_charging(bool charging) { charging_ = charging; }

  void Record(int64_t device_position, const OpCost& cost) override;
  void OnCollective(const CollectiveEvent& event) override;
  void OnRunEnd(bool ok) override;

  // Fills result->steps, totals, trace (when asked). Wall times are relative to the recorder's creation (each
  // rank's own). Across ranks every rank must call it (it exchanges the logs, see above).
  void Finish(WorkloadResult* result);

  // An error the cost model threw inside an observer call (which must not throw) is kept and rethrown here,
  // on the host thread after the Run.
  void RethrowIfFailed();

  const SimClocks& clocks() const { return clocks_; }
  double WallNow() const;

 private:
  struct Event {
    int step = 0;
    double sim_start = -1, sim_end = 0;      // simulated seconds (-1: not charged yet)
    double wall_start = 0, wall_end = 0;     // wall seconds
    double local_seconds = 0;                // charged local time (speed factor applied)
    double flops = 0, bytes = 0;
    double pending_nominal = 0, pending_flops = 0, pending_bytes = 0;  // recorded, not yet on the clock
  };
  // One device's figures for one step, summed over the events folded into it.
  struct StepSums {
    double duration = 0, local = 0, flops = 0, bytes = 0, wall = 0;
    int64_t count = 0;
    void Add(const Event& e);
  };
  // One per device and cache line: devices record concurrently on their workers.
  struct alignas(64) DeviceState {
    // Events not folded yet: all of them when a trace is recorded, else the last one or few (a sweep of 10^6
    // iterations must not keep 10^6 records per device).
    std::vector<Event> events;
    std::vector<StepSums> folded;            // per step, of the events already dropped from `events`
    size_t flushed = 0;                      // first event that may still hold pending cost
    bool in_step = false;                    // between BeginStep and EndStep (ops outside steps are not charged)
    DType peak_key = DType::kF32;
  };
  static_assert(sizeof(DeviceState) == 64, "one device's state per cache line");
  struct StepInfo {
    std::string name, op;
    StepKind kind = StepKind::kCompute;
    std::vector<std::string> axes;
    // Collective figures, summed over the collectives the step ran (slowest group of each).
    double communication_seconds = 0;
    std::map<std::string, double> by_axis, by_link;
    std::string algorithm, protocol;
    double message_bytes = 0;
    int64_t group_size = 1;
  };
  // What one flush charged to one event of one device (across ranks, for the replay).
  struct Charge {
    int64_t flush = 0;
    int64_t event = 0;  // index in the device's events
    double nominal = 0, flops = 0, bytes = 0;
  };
  // A collective's clock advance (across ranks, for the replay): at flush `flush`.
  struct LoggedCollective {
    int64_t flush = 0;
    std::string name;
    std::vector<std::vector<int64_t>> groups;
    const std::vector<CollectiveCost>* costs = nullptr;  // in cost_cache_ (std::map: stable)
  };
  void FlushLocal();
  // Advances the clocks of `groups` by `costs` and ends every device's current event there.
  void AdvanceCollective(const std::string& name, const std::vector<std::vector<int64_t>>& groups,
                         const std::vector<CollectiveCost>& costs);
  // Across ranks, instead of FlushLocal: logs what a flush would charge to each local device's events.
  void LogFlush();
  // Across ranks, in Finish: exchanges the logs and replays them on fresh clocks.
  void ReplayAcrossRanks();
  // Without a trace, sums the events that can no longer change into `folded` and drops them.
  void FoldFinished(DeviceState& d) const;

  const Mesh& mesh_;
  bool record_trace_;
  ComputeModel compute_;
  CollectiveModel model_;
  SimClocks clocks_;
  std::vector<DeviceState> devices_;
  std::vector<StepInfo> steps_;
  bool charging_ = true;
  std::chrono::steady_clock::time_point wall_origin_;
  std::map<std::string, std::vector<CollectiveCost>> cost_cache_;
  std::exception_ptr error_;
  // Across ranks only (see the file comment).
  std::shared_ptr<ProcessGroup> group_;   // null in one process
  std::vector<int> owner_;                // rank of each position
  SimClocks fresh_clocks_;                // the clocks as constructed (speed factors set)
  std::vector<std::vector<Charge>> charges_;  // per position
  std::vector<LoggedCollective> collectives_;
  int64_t flushes_ = 0;
  bool fold_ = true;                      // FoldFinished may drop events (off while logging and replaying)
};

// Every device's peak memory in `runtime` (a Runtime over `mesh`), with the highest and lowest and their
// devices (first in mesh order), and the capacity.
MemoryResult MemoryOf(const Runtime& runtime, const Mesh& mesh);
// The same from every position's peak bytes (REQUIRES: one per position of `mesh`) and the devices' capacity.
MemoryResult MemoryOfPeaks(const Mesh& mesh, const std::vector<int64_t>& peaks, int64_t capacity_bytes);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_WORKLOADS_ENGINES_RECORDER_H_
