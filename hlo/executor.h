// Execute: runs an HLO module with data on a Runtime (sim/runtime.h), one Interpreter per virtual device,
// the devices meeting at collectives through a GroupExchange (sim/group_exchange.h) over the groups XLA's
// replica groups name (hlo/groups.h).
//
// The mesh has one position per logical device of the module (replica_count x num_partitions); position i runs
// replica i / num_partitions, partition i % num_partitions. Which physical device each position is (the device
// assignment) is the mesh's business: its device ids and topology.
//
// Example (a module compiled for 8 partitions on an 8-device mesh):
//   const SupportedModule m = SupportedModule::Check(ParseModule(text), SupportedModule::Use::kWithData);
//   std::vector<DeviceRun> runs = Execute(m, mesh, [&](int64_t position) { return ArgumentsOf(position); });
//   runs[3].output   // device 3's result (a tuple for a tuple root)
//
// Errors: Error(kFailedPrecondition) for a module checked for abstract use only; Error(kInvalidArgument) for a
// mesh of the wrong size; a device's failure as Runtime::Run reports it (DeviceError with the device's id).
//
// Thread safety: Execute may be called from any thread; it runs its own Runtime.
#ifndef SPMDSIM_HLO_EXECUTOR_H_
#define SPMDSIM_HLO_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "hlo/interpreter.h"
#include "hlo/ir.h"
#include "hlo/support.h"
#include "hlo/value.h"
#include "mesh/mesh.h"
#include "sim/memory.h"
#include "sim/runtime.h"

namespace spmdsim::hlo {

struct ExecuteOptions {
  // Runtime options (threads, timeouts, device memory). The fiber stack is raised to at least 1 MiB (the
  // interpreter recurses into called computations and Eigen's GEMM).
  RuntimeOptions runtime{};
  InterpreterOptions interpreter{};
};

struct DeviceRun {
  Value output;          // the entry's result on this device
  MemoryStats memory;    // the device's memory: peak over the run (arguments, values, outputs)
};

// `arguments(position)` makes the entry's arguments of that device; it is called on the device (its arrays are
// charged to it).
std::vector<DeviceRun> Execute(const SupportedModule& module, const Mesh& mesh,
                               const std::function<std::vector<Value>(int64_t position)>& arguments,
                               const ExecuteOptions& options = {});

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_EXECUTOR_H_
