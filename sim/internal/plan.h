// Internals of sim/device_context.h: the plan of one collective's results, the second of a collective's three
// jobs (after the call's checks and shape rules, sim/internal/collective_call.h; before its execution,
// sim/internal/execute.h). BuildPlan allocates the result buffers and splits the work into units; ExecutePlan
// computes them. Not for users; docs/runtime.md ("Scheduling") has the design.
//
// Thread safety: a Plan is built by one worker (the barrier's leader) while every device waits, then read by
// every worker, which executes disjoint unit ranges between two barrier phases (sim/internal/worker.cc); the
// barriers order those accesses. Nothing here is synchronised otherwise.
#ifndef SPMDSIM_SIM_INTERNAL_PLAN_H_
#define SPMDSIM_SIM_INTERNAL_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/shape.h"
#include "sim/internal/buffer.h"
#include "sim/internal/collective_call.h"

namespace spmdsim::internal {

// Reduction work per unit: 8192 elements, 32 KiB of float32 (fits L1+L2 comfortably).
inline constexpr int64_t kChunkElements = 8192;

// all_to_all's blocks (tiled or not): member k's block for receiver m is `shape` at k's input + m * src_step
// bytes (strides src_strides) and goes to m's output + k * dst_step bytes (strides dst_strides); strides in
// elements. Writes into the caller's vectors (kept to reuse their memory).
// Example: tiled all_to_all of float32[8] over 4 devices, split and concat axis 0: shape [2], src_step 8 B,
// dst_step 8 B (member k's elements [2m, 2m+2) go to m's output at [2k, 2k+2)).
struct AllToAllGeometry {
  std::vector<int64_t> shape, src_strides, dst_strides;
  int64_t src_step = 0;
  int64_t dst_step = 0;
};
void MakeAllToAllGeometry(const CollectiveCall& call, AllToAllGeometry* geometry);

// What the workers compute for one collective. A *target* is a result buffer (one per group for the all-reduces
// and all_gather, one per position otherwise) or, for psum_scatter over short blocks, a group; a *unit* is a
// disjoint piece of one target's work (a range of elements, a member, a receiver, a range of rows). Any
// partition of [0, num_units) among workers gives bitwise the same results. Filled by BuildPlan; read-only while
// executed.
struct Plan {
  OpKind op = OpKind::kBarrier;
  const GroupInfo* groups = nullptr;
  const CollectiveCall* ref = nullptr;  // the call every device made
  DType in_dtype = DType::kF32;
  int64_t in_elements = 0;
  int64_t out_elements = 0;
  bool abstract = false;
  bool per_group_output = true;  // psum/pmean/pmax/pmin/all_gather: one buffer per group
  std::vector<const void*> inputs;        // by position
  std::vector<const void*> group_inputs;  // [group * n + k]: the input of the group's member k (not ppermute)
  // all_gather, psum_scatter: the input (all_gather: the output) viewed as [outer, n, inner] around the axis.
  int64_t outer = 1;
  int64_t inner = 1;
  // Short rows (all_gather: output rows under 256 B; psum_scatter: blocks under 64 B): a unit is a range of
  // rows_per_unit outer rows of one group, for every member (all_gather) or every receiver (psum_scatter).
  // 0: a unit is one member's rows (all_gather) or one receiver's output (psum_scatter).
  int64_t rows_per_unit = 0;
  // all_to_all: member k's block for receiver m is `copy` from k's input + m * src_step to m's output +
  // k * dst_step (bytes).
  BlockCopy copy;
  int64_t src_step = 0;
  int64_t dst_step = 0;
  AllToAllGeometry scratch_geometry;  // BuildPlan's, kept to reuse its memory
  std::vector<std::shared_ptr<Buffer>> outputs;  // by group or by position
  std::vector<int64_t> result_source;  // ppermute: source position or -1
  std::shared_ptr<Buffer> zeros;
  int64_t num_units = 0;
  int64_t units_per_target = 1;  // reductions: element chunks per group
  std::vector<int64_t> active_targets;  // several processes: the targets computed here (empty: all)
  int64_t bytes_written = 0;

  // The result buffer of `position` (nullptr for abstract arrays and other ranks' positions).
  const std::shared_ptr<Buffer>& ResultBuffer(int64_t position) const {
    if (per_group_output && op != OpKind::kPpermute) return outputs[groups->group_of[position]];
    return outputs[position];
  }
  // Forgets the last collective (a barrier's plan).
  void Clear();
};

// Plans the collective every device called: `calls[p]` is position p's call (all SameCall). Allocates the result
// buffers (Error(kResourceExhausted) when the host cannot hold them) and splits the work into units; reuses
// `plan`'s memory.
// Several processes (cross_rank.h): `local` (by position) marks the positions whose results this process
// computes; calls[p] is nullptr for positions none of them reads, and `ref` is a full call (calls[0] may
// hold only an input). Results of the other positions are not computed (ResultBuffer is null there).
// `elsewhere` (by group, reductions only): groups whose local results the caller computes into
// ResultBuffer (a chain across ranks); their buffers are allocated, no unit computes them.
void BuildPlan(const GroupInfo& groups, const std::vector<const CollectiveCall*>& calls, Plan* plan,
               const CollectiveCall* ref = nullptr, const std::vector<uint8_t>* local = nullptr,
               const std::vector<uint8_t>* elsewhere = nullptr);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_PLAN_H_
