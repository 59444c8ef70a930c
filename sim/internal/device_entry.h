// Internals of sim/device_context.h: the runtime's entry points that a DeviceContext calls from its device's
// fiber. Declared here, below the runtime, so that DeviceContext's code does not include the runtime's core;
// defined by the core (CurrentSlot in sim/internal/slot.cc, the waits in sim/internal/core.cc). Not for users.
//
// Thread safety: called only on a device's fiber (the waits) or on the thread that runs it (CurrentSlot); see
// sim/internal/slot.h.
#ifndef SPMDSIM_SIM_INTERNAL_DEVICE_ENTRY_H_
#define SPMDSIM_SIM_INTERNAL_DEVICE_ENTRY_H_

#include "sim/array.h"

namespace spmdsim::internal {

struct CollectiveCall;
struct DeviceSlot;

// The slot of the device whose code runs on this thread (set by the worker around every switch into a device,
// cleared once a pass is over), or nullptr. Out of line: a thread-local's address must not be cached across a
// fiber switch.
DeviceSlot* CurrentSlot();
void SetCurrentSlot(DeviceSlot* slot);

// The device of `slot` waits at `call` (checked and shaped by ValidateCall) until every device has arrived and
// the workers computed the results; returns its result, charged to the device. Throws DeviceAborted (unwinding
// the device) when the Run is aborted. REQUIRES: CurrentSlot() == &slot.
Array WaitAtCollective(DeviceSlot& slot, CollectiveCall& call);
// The same for a Barrier (no call of its own: every device shares kBarrierCall).
void WaitAtBarrier(DeviceSlot& slot);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_DEVICE_ENTRY_H_
