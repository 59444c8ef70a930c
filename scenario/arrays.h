// The scenario's arrays made concrete: whole, or block by block where they live (each rank its own devices'
// blocks, docs/multiprocess.md), from their `data:` (zeros, ones, iota, random, a .npy file), and arrays written
// back as .npy values (--dump).
//
// Example: for `{name: w, shape: [8, 16], dtype: bfloat16, data: random, seed: 3}`
//   MakeScenarioArray(s.array("w"), false)                      -> the whole bf16[8,16], N(0, 1) values
//   MakeScenarioArrayBlocks(s.array("w"), {{{0, 4}, {0, 16}}})  -> its first four rows, bitwise
// Thread safety: free functions over values; a .npy file is read by each call.
#ifndef SPMDSIM_SCENARIO_ARRAYS_H_
#define SPMDSIM_SCENARIO_ARRAYS_H_

#include <vector>

#include "common/shape.h"
#include "scenario/npy.h"
#include "scenario/scenario.h"
#include "sim/array.h"

namespace spmdsim {

// The array's global value: its init made concrete (abstract: shape and dtype only, no data; an npy file is
// then not read). Random data as RandomArray (ops/random.h).
Array MakeScenarioArray(const ScenarioArray& array, bool abstract);

// Blocks of the array's global value (each the index ranges of one block, per dimension), bitwise those of
// MakeScenarioArray(array, false) cut at the same ranges, made without the whole array: zeros and ones
// directly, iota and random values streamed once in flat order and kept where a block holds them (the time is
// that of the whole array up to the last element kept; the memory that of the blocks), npy data read block by
// block from the file (only the blocks' bytes; a Fortran-order file whole). Across ranks each
// rank makes only its own devices' blocks (docs/multiprocess.md). REQUIRES: ranges within the shape.
std::vector<Array> MakeScenarioArrayBlocks(const ScenarioArray& array,
                                           const std::vector<std::vector<IndexRange>>& blocks);

// An array's bytes as a .npy value (bfloat16 is widened to float32 when written). Throws
// Error(kFailedPrecondition) for an abstract array.
NpyArray ToNpy(const Array& array);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_ARRAYS_H_
