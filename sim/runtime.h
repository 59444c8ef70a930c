// Runtime: runs one function per virtual device of a Mesh, all concurrently, on a few worker threads.
//
// Each device is a fiber (boost::context) with its own stack. The W worker threads (a oneTBB task_arena of
// W threads, one long task per thread) each own a contiguous block of devices and run them round-robin; a
// device that reaches a collective switches back to its worker, so a waiting device never holds a thread.
// When every device of a block waits, its worker arrives at one cross-thread barrier; the last worker to
// arrive checks that every device called the same collective, and the workers then compute the results
// together, in a fixed order (docs/runtime.md has the design and the measurements behind it).
//
// Example:
//   Runtime runtime(Mesh::Iota({4, 2}, {"x", "y"}));
//   std::vector<Array> out(8);
//   runtime.Run([&](DeviceContext& d) {
//     Array x = Array::Scalar<float>(static_cast<float>(d.position()));
//     out[d.position()] = d.Psum(x, "y");            // positions 2i, 2i+1 -> 4i + 1
//   });
//   out[5].data<float>()[0] == 9.0f
//
// Several processes: with RuntimeOptions::process_group, each rank runs only its devices and collectives span
// ranks over MPI, with bitwise the one-process results (sim/multiprocess.h, docs/multiprocess.md).
//
// Faults (Run throws; no device is left waiting):
//  - a device throws: every other device is released at its next (or current) collective, and Run throws
//    DeviceError carrying the device's position and id, the original message, and the original exception
//    (nested_ptr()); with several, the lowest position's.
//  - devices call different collectives, or the same one with different shapes/dtypes/axes/parameters:
//    Error(kInvalidArgument) naming the devices and what each called.
//  - a device returns while others wait at a collective: Error(kFailedPrecondition) listing both.
//  - a device never arrives while others wait: after RuntimeOptions::collective_timeout,
//    Error(kDeadlineExceeded) naming the missing devices. Run returns although that device's worker thread
//    is still busy; the device is unwound (DeviceAborted) when it next reaches a collective, and the next Run
//    (or ~Runtime) waits up to collective_timeout for it, then throws Error(kFailedPrecondition) (the
//    destructor instead leaves the thread behind, keeping the runtime's state alive until it finishes).
//
// Thread safety: Run may be called from one thread at a time (a concurrent or nested call throws
// Error(kFailedPrecondition)); the const accessors are thread-safe. The device function is called
// concurrently from several threads, once per device.
// Memory ordering: everything the calling thread did before Run happens before every device starts; every
// device's writes happen before Run returns or throws (except a device left running after a timeout).
#ifndef SPMDSIM_SIM_RUNTIME_H_
#define SPMDSIM_SIM_RUNTIME_H_

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "common/error.h"
#include "mesh/mesh.h"
#include "sim/array.h"
#include "sim/device_context.h"
#include "sim/memory.h"
#include "sim/observer.h"
#include "sim/op_cost.h"

namespace spmdsim {

class ProcessGroup;  // sim/multiprocess.h

namespace internal {
struct WorkerPool;
}  // namespace internal

// Device memory of a mesh without a topology: 16 GiB (a TPU v5e chip's HBM, mesh/topology.cc).
inline constexpr int64_t kDefaultDeviceMemoryBytes = int64_t{16} << 30;

struct RuntimeOptions {
  // Worker threads. Default 0: std::thread::hardware_concurrency() (at least 1). Never more than devices.
  int num_threads = 0;
  // How long devices may wait at a collective for a device that does not arrive before Run throws
  // Error(kDeadlineExceeded). Default 60 s.
  std::chrono::milliseconds collective_timeout{60'000};
  // Stack of each device fiber, with a guard page below it (overflow faults instead of corrupting memory).
  // Default 64 KiB (x4 in ASan/TSan builds, whose frames are larger; the workload engines raise it to at least
  // 1 MiB for Eigen's GEMM, workloads/internal/recorder.h); only the pages a device touches become resident. Stacks are pooled across Runs. Larger stacks spread 4096 devices over more page-table
  // entries: a barrier episode at 4096 devices costs ~2x more with 256 KiB (docs/runtime.md). A device that
  // overflows its stack ends the process after naming itself on stderr.
  // The stacks are one mapping per Runtime, with a guard page below each while the kernel's mapping budget
  // allows (vm.max_map_count, each guard page costs two mappings); beyond that (~28,000 devices at the default
  // 65530) no guard pages but a canary word below each stack, checked when its device switches out.
  //
  // The devices a worker thread runs share its floating-point environment (rounding mode, exception masks):
  // device switches do not save it (docs/runtime.md). A device that changes it restores it before a collective.
  size_t fiber_stack_bytes = 64 * 1024;
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

// An exception thrown by the function on one virtual device, as Run rethrows it.
// code()/kind() are the original's when it was a spmdsim::Error, else kAborted and the C++ type's
// std::exception what(). message(): "device 3 (position 3, coords (1, 1)) failed: <original what()>".
class DeviceError : public Error {
 public:
  DeviceError(ErrorCode code, std::string message, ErrorKind kind, int64_t position, int device_id,
              std::exception_ptr original);
  int64_t position() const noexcept { return position_; }
  int device_id() const noexcept { return device_id_; }
  const std::exception_ptr& nested_ptr() const noexcept { return original_; }
  [[noreturn]] void RethrowNested() const { std::rethrow_exception(original_); }

 private:
  int64_t position_;
  int device_id_;
  std::exception_ptr original_;
};

class Runtime {
 public:
  // REQUIRES: a non-empty mesh of at most 2^31 devices; options.fiber_stack_bytes >= 16 KiB;
  // device_memory_bytes >= 0; num_threads >= 0. Throws Error(kInvalidArgument) otherwise.
  explicit Runtime(Mesh mesh, RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Runs fn once per device, concurrently; returns when all have returned, or throws (see the faults above).
  void Run(const std::function<void(DeviceContext&)>& fn);

  const Mesh& mesh() const;
  int64_t num_devices() const;
  int num_workers() const;  // worker threads actually used: min(num_threads, local devices)
  // Several processes: this process's rank (0 in one process) and the rank that runs `position`.
  int rank() const;
  int owner(int64_t position) const;  // REQUIRES: 0 <= position < num_devices()
  bool is_local(int64_t position) const { return owner(position) == rank(); }
  const RuntimeOptions& options() const;
  // Memory of the device at `position` (REQUIRES: 0 <= position < num_devices()).
  MemoryStats memory_stats(int64_t position) const;
  // Sets every device's peak to its current use.
  void ResetPeakMemory();

 private:
  std::shared_ptr<internal::RuntimeCore> core_;
  std::unique_ptr<internal::WorkerPool> pool_;  // the oneTBB arena and thread limit
};

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_RUNTIME_H_
