// RuntimeOptions: how a Runtime (sim/runtime.h) runs its devices: worker threads, the collective timeout, fiber
// stacks, device memory, the observer and op cost sink the cost model plugs in, and the ranks of a run over
// several processes.
//
// Thread safety: a value; a Runtime keeps its own copy, read-only while it lives.
#ifndef SPMDSIM_SIM_RUNTIME_OPTIONS_H_
#define SPMDSIM_SIM_RUNTIME_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/strings.h"
#include "mesh/mesh.h"

namespace spmdsim {

class ProcessGroup;     // sim/process_group.h
class RuntimeObserver;  // sim/observer.h
class OpCostSink;       // sim/op_cost.h

// The fiber stack a device needs to run Eigen's GEMM: Eigen keeps its blocking buffers on the stack (up to
// EIGEN_STACK_ALLOCATION_LIMIT, 128 KiB), and a [128,256] x [256,128] matmul overflowed the default 64 KiB. Every
// engine whose devices run local ops (ops/: shard_map programs, layers, the model's data run, collectives sweeps
// that check results, the HLO interpreter) raises RuntimeOptions::fiber_stack_bytes to at least this. Only the
// pages a device touches are resident, so the larger reservation costs address space, not memory.
inline constexpr size_t kEigenFiberStackBytes = kMiB;

// Device memory of a mesh without a topology: 16 GiB (a TPU v5e chip's HBM, mesh/topology.cc).
inline constexpr int64_t kDefaultDeviceMemoryBytes = 16 * kGiB;

struct RuntimeOptions {
  // Worker threads. Default 0: std::thread::hardware_concurrency() (at least 1). Never more than devices.
  int num_threads = 0;
  // How long devices may wait at a collective for a device that does not arrive before Run throws
  // Error(kDeadlineExceeded). Default 60 s.
  std::chrono::milliseconds collective_timeout{60'000};
  // Stack of each device fiber, with a guard page below it (overflow faults instead of corrupting memory).
  // Default 64 KiB (x4 in ASan/TSan builds, whose frames are larger; the engines that run ops raise it to
  // kEigenFiberStackBytes); only the pages a device touches become resident.
  // Stacks are pooled across Runs. Larger stacks spread 4096 devices over more page-table entries: a barrier
  // episode at 4096 devices costs ~2x more with 256 KiB (docs/runtime.md). A device that overflows its stack ends
  // the process after naming itself on stderr.
  // The stacks are one mapping per Runtime, with a guard page below each while the kernel's mapping budget
  // allows (vm.max_map_count, each guard page costs two mappings); beyond that (~28,000 devices at the default
  // 65530) no guard pages but a canary word below each stack, checked when its device switches out.
  //
  // The devices a worker thread runs share its floating-point environment (rounding mode, exception masks):
  // device switches do not save it (docs/runtime.md). A device that changes it restores it before a collective.
  size_t fiber_stack_bytes = 64 * kKiB;
  // Memory capacity of every device. Default 0: the mesh topology's memory_bytes(), or
  // kDefaultDeviceMemoryBytes for a mesh without a topology.
  int64_t device_memory_bytes = 0;
  // Told about device starts/finishes and every collective (sim/observer.h). Default none. Not owned; must
  // outlive every Run.
  RuntimeObserver* observer = nullptr;
  // Charged with the cost of every local op (ops/) the devices run, tagged with the device's position
  // (sim/op_cost.h). Default none. Not owned; must outlive every Run. Ops run on host threads charge no sink.
  OpCostSink* op_cost_sink = nullptr;
  // Several processes (sim/multiprocess.h): the ranks that share the mesh. Each rank runs the devices
  // PlaceDevices gives it; a collective spanning ranks exchanges data over MPI. Default none (or a group of
  // one rank): this process runs every device.
  std::shared_ptr<ProcessGroup> process_group = nullptr;
};

// Checks `options` for a Runtime over `mesh` (what Runtime's constructor requires): a non-empty mesh of at most
// 2^31 devices, num_threads >= 0, fiber_stack_bytes >= 16 KiB, device_memory_bytes >= 0, a positive
// collective_timeout. Throws Error(kInvalidArgument) naming the option otherwise.
void ValidateRuntimeOptions(const Mesh& mesh, const RuntimeOptions& options);

// The memory capacity of every device of a Runtime over `mesh` with `options`: device_memory_bytes when set,
// else the mesh topology's memory_bytes(), else kDefaultDeviceMemoryBytes.
int64_t DeviceMemoryCapacity(const Mesh& mesh, const RuntimeOptions& options);

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_RUNTIME_OPTIONS_H_
