// `spmdsim run --dump DIR`: a workload's kept inputs and outputs (WorkloadResult::inputs / outputs /
// sharded_inputs / sharded_outputs) as .npy files, in a layout that depends on each array's size only, never on
// how many ranks ran it:
//   DIR/<workload>/{inputs,outputs}/<name>.npy               an array of at most kGatherArrayBytes, whole
//   DIR/<workload>/{inputs,outputs}/<name>.shards/index.json a larger one: global shape, dtype, spec, and per
//   DIR/<workload>/{inputs,outputs}/<name>.shards/<id>.npy   distinct block (shard id, row-major over the block
//                                                            grid) its file and index ranges
// Across ranks, rank 0 writes the whole arrays (gathered to it) and every index.json; each block is written by
// the rank of its first device (DeviceShard order), so no data moves for a large array (docs/multiprocess.md).
//
// Example: y float32[8192,4096] (128 MiB) with spec P('x') on Mesh {x: 4}: y.shards/0.npy .. 3.npy, each
// float32[2048,4096], and index.json {"shape":[8192,4096],"dtype":"float32","spec":"P('x',)",
// "shards":[{"file":"0.npy","index":[[0,2048],[0,4096]]}, ...]}.
//
// Errors: Error(kInvalidArgument) naming the file that cannot be created or written.
// Thread safety: none needed (the CLI's host thread).
#ifndef SPMDSIM_SCENARIO_DUMP_H_
#define SPMDSIM_SCENARIO_DUMP_H_

#include <string>

#include "mesh/mesh.h"
#include "workloads/workloads.h"

namespace spmdsim {

// Writes what this rank owns of `result`'s kept arrays under `dir` (`rank` 0 in one process). `mesh` is the
// workload's mesh (the layout of a large whole array kept in one process).
void DumpWorkload(const std::string& dir, const WorkloadResult& result, const Mesh& mesh, int rank);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_DUMP_H_
