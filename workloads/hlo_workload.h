// The hlo workload: a module XLA compiled (the SPMD-partitioned HLO of `jax.jit(f).lower(*args).compile()`),
// run on the scenario's topology: with data on one virtual device per logical device of the module (hlo/executor.h),
// and predicted instruction by instruction (hlo/predict.h), with its per-device memory from buffer liveness
// (hlo/memory.h). docs/hlo.md has the design; docs/scenarios.md the `kind: hlo` keys.
//
// Devices: the module runs on replica_count x num_partitions logical devices; logical device i is the i-th device
// of `device_assignment` (default: the context mesh's devices in row-major order, which is JAX's device
// assignment for a program jitted over that mesh). The context mesh must have that many devices.
//
// Inputs: one per entry parameter. A global array (zeros, ones, iota, normal random values, or given data) is cut
// into each device's block by the parameter's sharding (hlo/sharding.h), or each device's arguments are given
// directly (Python's from_jax, which lets JAX cut them).
//
// Result: steps are the op_name scopes ("jit(step)/jvp(MLP)/Dense_0"), each with the time its instructions took
// on the simulated device; WorkloadResult::hlo has the same totals by instruction class, the memory estimate and
// the notes; memory is the estimate (every device runs the same program); the trace holds one event per executed
// instruction on the simulated device's track. With data and `expected` outputs, the check compares them
// (numpy.isclose). Abstract: no data, the prediction only (N = 4096 in seconds).
//
// Errors: Error(kInvalidArgument) for a mesh of the wrong size, inputs that do not fit the parameters; what
// hlo/support.h refuses, before anything runs; Error(kResourceExhausted) when the run with data cannot fit the
// host's memory (every device's peak together), before anything is allocated.
#ifndef SPMDSIM_WORKLOADS_HLO_WORKLOAD_H_
#define SPMDSIM_WORKLOADS_HLO_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hlo/ir.h"
#include "hlo/value.h"
#include "workloads/workloads.h"

namespace spmdsim {

// The global value of one entry parameter.
struct HloInput {
  enum class Kind { kZeros, kOnes, kIota, kRandom, kData };
  Kind kind = Kind::kRandom;
  uint64_t seed = 0;       // kRandom: normal(0, scale) values (RandomValues, ops/random.h), converted
  double scale = 1.0;
  // kData: the global array, C order, little-endian, of `dtype` and `shape` (converted to the parameter's type).
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// An expected global output (the check): its index in the entry's result (0 for a non-tuple result).
struct HloExpected {
  int64_t output = 0;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

struct HloConfig {
  std::string name = "hlo";
  std::shared_ptr<const hlo::Module> module;
  // One per entry parameter; empty: kRandom with seeds 0, 1, 2, ... Ignored when device_arguments is given.
  std::vector<HloInput> inputs;
  // Per logical device, the entry's arguments (host values of the parameters' shapes).
  std::vector<std::vector<hlo::Value>> device_arguments;
  // Logical device -> device id of the topology; empty: the context mesh's devices in row-major order.
  std::vector<int> device_assignment;
  // With a device_assignment: the mesh the program was jitted over (name, size), its sizes' product the module's
  // devices, so that collectives are attributed to its axes (from_jax passes the program's mesh); empty: none.
  std::vector<std::pair<std::string, int64_t>> mesh_axes;
  std::vector<HloExpected> expected;
  double rtol = 1e-5, atol = 1e-6;
  // Price synchronous collectives as asynchronous ones, overlapping the compute up to their first use
  // (hlo/predict.h, PredictOptions::overlap_collectives).
  bool overlap_collectives = false;
  // Price the values XLA CPU widened from bf16 / f16 to f32 in their narrow type (PredictOptions::narrow_types);
  // unset: on TPUs and GPUs, not on CPUs.
  std::optional<bool> narrow_types;
  // What one step of the program is, for MFU and throughput (0: not given): the model's FLOPs of one step over
  // all devices (e.g. 6 x parameters x tokens for a dense decoder's training step) and the tokens it processes.
  double model_flops_per_step = 0;
  double tokens_per_step = 0;
  // Runs with data: a while loop that has not ended after this many iterations or seconds fails the run
  // (hlo/interpreter.h, InterpreterOptions).
  int64_t max_while_iterations = 100'000'000;
  double max_while_seconds = 300;
};

// `device_outputs` (optional) receives each logical device's result (data runs).
WorkloadResult RunHlo(const WorkloadContext& context, const HloConfig& config,
                      std::vector<hlo::Value>* device_outputs = nullptr);

}  // namespace spmdsim

#endif  // SPMDSIM_WORKLOADS_HLO_WORKLOAD_H_
