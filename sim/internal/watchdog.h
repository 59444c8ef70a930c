// Internals of sim/runtime.h: the watchdog that Runtime::Run's thread runs while the workers run the devices.
// Not for users; docs/runtime.md ("Faults").
//
// A Run is stuck when devices wait at a collective and nothing progresses for RuntimeOptions::
// collective_timeout: no barrier completes, no device reaches its next collective or finishes (each worker
// counts the devices it resumes), and no collective work is under way. The watchdog then aborts the Run with
// Error(kDeadlineExceeded) naming who never arrived and who waits at what. A device that computes for long
// while its worker's other devices queue behind it is not stuck.
//
// Thread safety: called only by the thread in Runtime::Run; it reads the slots' and blocks' atomics (never the
// devices' other state, which belongs to the workers) and the Run's state under RunState::mu.
#ifndef SPMDSIM_SIM_INTERNAL_WATCHDOG_H_
#define SPMDSIM_SIM_INTERNAL_WATCHDOG_H_

#include <chrono>
#include <string>

#include "sim/internal/core.h"
#include "sim/internal/run_state.h"

namespace spmdsim::internal {

// Waits until every block of `run` is closed (returns true), or until the Run was aborted (by a device, or by
// the deadline) and a grace period of min(timeout, 1 s) has passed for the other blocks to close (false).
bool WatchRun(const RuntimeCore& core, RunState& run);

// Waits until every block of `run` is closed or `deadline` passes; returns whether all closed.
bool WaitClosed(RunState& run, std::chrono::steady_clock::time_point deadline);

// "2-3, 7": the positions of the devices that have not finished.
std::string StillRunning(const RuntimeCore& core);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_WATCHDOG_H_
