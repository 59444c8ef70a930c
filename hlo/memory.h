// Per-device memory of a module from buffer liveness along its schedule, in the terms of XLA's
// compiled.memory_analysis(): argument bytes (the entry's parameters, live throughout), output bytes (the
// buffers the entry returns), and temporary bytes (the most the other buffers hold at once). Every device of an
// SPMD module runs the same program, so one estimate serves all.
//
// Buffers, following XLA's buffer assignment (xla/service/buffer_assignment.cc, hlo_dataflow_analysis.cc):
//  - each instruction that produces data allocates its result's arrays, except those that alias an operand:
//    bitcast, get-tuple-element, tuple, opt-barrier, add-dependency (views), while (its state is its operand's
//    buffers, reused by the body), the -done half of async ops (the -start's result), async-start's operands;
//  - a dynamic-update-slice (or a fusion whose root is one) writes into its operand's buffer when that buffer
//    dies there and is a temporary; an elementwise op or loop fusion reuses a dying temporary operand of the
//    same size (XLA's CanShareOperandBufferWithUser);
//  - a buffer lives from the instruction that makes it to the last use of it or of any view of it;
//  - called computations (while bodies and conditions, conditional branches, calls) add their own
//    temporaries' peak at the point of the call; fusions have none (fused values are not materialised);
//  - constants are module-wide data (not counted, as XLA keeps them in separate allocations).
// Placement, as XLA's BufferAssigner does it: the output's allocations also hold temporaries whose live ranges do
// not overlap the output's (largest first; ranges may touch where the later op may write over its operand); the
// other temporaries share one heap, each at a 64-byte boundary (XLA:CPU's alignment), a dying operand's slot
// taken over by a same-shaped result (CanShareOperandBufferWithUser), tuples with their 8-byte index tables.
// Measured against XLA's memory_analysis() for the modules of tests/hlo (docs/hlo.md, "Memory"): the peak of
// the JAX programs there within 3%, the GPT of test_model_comparison.py within 5%.
//
// Example: ENTRY (x: f32[1024]) { a = exp(x); b = exp(a); ROOT c = add(a, b) } -> arguments 4096, output 4096
// (c, written into a's buffer, which dies there), temporaries 4096 (b).
//
// Thread safety: pure.
#ifndef SPMDSIM_HLO_MEMORY_H_
#define SPMDSIM_HLO_MEMORY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hlo/ir.h"

namespace spmdsim::hlo {

struct MemoryEstimate {
  int64_t argument_bytes = 0;
  int64_t output_bytes = 0;   // outputs that are not arguments passed through
  int64_t temp_bytes = 0;     // peak of the temporaries
  int64_t alias_bytes = 0;    // outputs written into donated arguments (input_output_alias)
  std::string peak_at;        // the instruction at which the temporaries peak ("%name", "" when none)
  // The largest temporaries live at that peak (up to 8): the instruction that made each, and its bytes.
  std::vector<std::pair<std::string, int64_t>> live_at_peak;
  // What one device needs at the peak: arguments + outputs + temporaries - aliased outputs (XLA's
  // argument_size + output_size + temp_size - alias_size). Every figure saturates at INT64_MAX (8 EiB) instead of
  // wrapping (a module may declare arrays of 2^62 bytes).
  int64_t peak_bytes() const {
    const long double sum = static_cast<long double>(argument_bytes) + output_bytes + temp_bytes - alias_bytes;
    return sum >= static_cast<long double>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(sum);
  }
};

MemoryEstimate EstimateMemory(const Module& module);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_MEMORY_H_
