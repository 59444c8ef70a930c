// Internals of sim/device_context.h: the execution of a collective's plan, the third of a collective's three
// jobs (after its checks and shape rules, sim/internal/collective_call.h, and its plan, sim/internal/plan.h):
// the reduction kernels (left-to-right folds in in-group order, XLA's wrapping integers and NaN-propagating
// max/min), the copies of all_gather and all_to_all, and the fold in pieces the chain across ranks uses. Not
// for users.
//
// Every output element is computed from the group's members in in-group order, whatever unit range a worker
// executes, so results do not depend on the number of workers (or ranks).
//
// Thread safety: ExecutePlan may run concurrently on disjoint unit ranges of one Plan (each unit writes only
// its own part of the outputs); the Plan and the inputs are read-only meanwhile. The fold functions touch only
// their arguments.
#ifndef SPMDSIM_SIM_INTERNAL_EXECUTE_H_
#define SPMDSIM_SIM_INTERNAL_EXECUTE_H_

#include <cstdint>

#include "common/dtype.h"
#include "sim/internal/collective_call.h"
#include "sim/internal/plan.h"

namespace spmdsim::internal {

// Computes units [unit_begin, unit_end) of `plan` (REQUIRES: 0 <= unit_begin <= unit_end <= plan.num_units).
// Inline: a barrier's plan has no unit, and the kernels' frame is not worth setting up for none.
void ExecuteUnits(const Plan& plan, int64_t unit_begin, int64_t unit_end);
inline void ExecutePlan(const Plan& plan, int64_t unit_begin, int64_t unit_end) {
  if (unit_begin < unit_end) ExecuteUnits(plan, unit_begin, unit_end);
}

// A reduction's left-to-right fold in pieces (several processes: a chain of ranks, each folding its run of the
// group's members into the running value it received, cross_rank.h). The running value has FoldDType:
// the input's dtype, except int32 for sums of bools. Folding members [0, a) and then [a, n) gives bitwise the
// one-process result (the same operations in the same order).
DType FoldDType(OpKind op, DType in_dtype);
// acc[i] = op(...op(acc[i], members[0][offset + i])..., members[n - 1][offset + i]) for i in [0, count), or,
// when !continue_acc, the fold of the members alone (acc[i] = members[0][...] op members[1][...] ...).
// REQUIRES: op a reduction (psum, pmean, pmax, pmin, psum_scatter); members[k] of in_dtype.
void FoldInto(OpKind op, DType in_dtype, const void* const* members, int64_t num_members, int64_t offset,
              int64_t count, void* acc, bool continue_acc);
// The result from the group's whole fold: pmean's division (into its result dtype), else a copy (none when
// acc == out). `acc` may equal `out` for every op whose result dtype is FoldDType.
void FinishFold(OpKind op, DType in_dtype, const void* acc, int64_t count, void* out, int64_t group_size);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_EXECUTE_H_
