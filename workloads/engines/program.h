// The shard_map program interpreter shared by the shard_map, mlp and transformer_block engines.
//
// A program (ShardMapConfig) is validated once on the host (names, ops, arguments), then one ShardMap call runs
// it on the workload's Runtime with the CostRecorder attached; the same interpreter, run on a one-device mesh
// with the same axis names (every axis of size 1, so every collective is over a group of one), gives the
// unsharded reference the outputs are checked against.
//
// Example: steps {h = einsum(x, w1) "bd,df->bf"; y = psum(h) over model} on Mesh {model: 4} with x P(), w1
// P(None, 'model') and y P(): the reference computes x @ w1 whole; the check compares the two y's.
//
// Thread safety: EvaluateStep is reentrant (it runs on every device at once); the Run functions are called from
// one host thread.
#ifndef SPMDSIM_WORKLOADS_ENGINES_PROGRAM_H_
#define SPMDSIM_WORKLOADS_ENGINES_PROGRAM_H_

#include <span>
#include <string>
#include <vector>

#include "workloads/engines/recorder.h"
#include "workloads/workloads.h"
#include "sim/device_context.h"

namespace spmdsim::internal {

bool IsCollectiveOp(std::string_view op);

// One step on one device. `recorder` may be null (reference runs); it gets ppermute's pairs.
Array EvaluateStep(DeviceContext& device, const ProgramStep& step, std::span<const Array> args,
                   CostRecorder* recorder);

// numpy.isclose-style comparison of two global arrays of the same shape.
CheckedValue CompareArrays(const std::string& name, const Array& got, const Array& want, double rtol,
                           double atol);

// Runs `config` as a workload of `kind` ("shard_map", "mlp", "transformer_block").
WorkloadResult RunProgram(const WorkloadContext& context, const ShardMapConfig& config, const std::string& kind);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_WORKLOADS_ENGINES_PROGRAM_H_
