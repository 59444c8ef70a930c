// What a simulated step's timeline tells once it has run: each device's breakdown by category and the recorded
// schedule (model/step_schedule.h) with each op's label.
//
// Example: std::vector<DeviceTimes> times = timeline->Run(&intervals);
//          out.schedule = MakeSchedule(model, builder, *timeline, times, intervals, last);
//
// Thread safety: free functions over values.
#ifndef SPMDSIM_MODEL_INTERNAL_SCHEDULE_RECORDER_H_
#define SPMDSIM_MODEL_INTERNAL_SCHEDULE_RECORDER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cost/timeline.h"
#include "model/config.h"
#include "model/internal/step_builder.h"
#include "model/step_schedule.h"

namespace spmdsim::internal {

// The device's breakdown by category (compute phases; communication kinds, run and exposed).
void FillBreakdown(const DeviceTimes& t, std::map<std::string, double>* compute_by_phase,
                   std::map<std::string, double>* comm_by_kind, std::map<std::string, double>* exposed_by_kind);

// The schedule of the devices `builder` built on `timeline` (recorded: ModelStepOptions::record_schedule), run
// with `intervals`; `last` is the device that finishes last.
std::shared_ptr<const StepSchedule> MakeSchedule(const ValidatedModel& model, const StepBuilder& builder,
                                                 StepTimeline& timeline, const std::vector<DeviceTimes>& times,
                                                 const std::vector<std::vector<OpInterval>>& intervals, size_t last);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_MODEL_INTERNAL_SCHEDULE_RECORDER_H_
