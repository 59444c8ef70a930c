// The model workload's data run (docs/model.md, "Running with data"): one training step of a small decoder LM
// written as a shard_map program (workloads/internal/program.h), built for the configured parallelism, and the
// same model built for one device, whose loss and weight gradients the parallel run must reproduce.
//
// Example (2 stages x 2 tensor ranks, GPipe ticks with ppermute between stages):
//   ModelProgram par = BuildModelProgram(ValidateModel(config, mesh));   // stacked per-stage weights, [P, ...]
//   ModelProgram one = BuildModelProgram(ValidateModel(OneDeviceModel(config), one_device_mesh));
//   // par.labels[k].names[s] names, for stage s, the output of `one` that par.program.outputs[k] holds.
//
// Thread safety: free functions over values.
#ifndef SPMDSIM_WORKLOADS_INTERNAL_MODEL_PROGRAM_H_
#define SPMDSIM_WORKLOADS_INTERNAL_MODEL_PROGRAM_H_

#include <string>
#include <vector>

#include "model/model.h"
#include "workloads/workloads.h"

namespace spmdsim::internal {

// What one output of a model program is, in the one-device model's terms.
struct ModelOutputLabel {
  // "loss", "grad/embed", "grad/layers.3.wq", ...: one name, or one per pipeline stage when `stacked` (the
  // output's leading dimension is the stage; slice s is names[s]).
  std::vector<std::string> names;
  bool stacked = false;
};

struct ModelProgram {
  ShardMapConfig program;               // inputs (tokens, targets, mask, weights), steps, outputs
  std::vector<ModelOutputLabel> labels; // one per program.outputs entry
};

// The config with every parallelism removed and the whole batch as one micro-batch: the one-device model.
ModelConfig OneDeviceModel(const ModelConfig& config);

// Throws Error(kUnimplemented) for what the data run does not express yet (KV heads or vocab not divisible by
// the tensor degree, MoE layers that differ between pipeline stages) and
// Error(kResourceExhausted) for a model too large to run with data (both suggest --abstract);
// Error(kInvalidArgument) for rope with an odd head_dim.
void CheckModelRunsWithData(const ValidatedModel& model);

// The training step's program on `mesh` (float32 data; deterministic from config.seed).
// REQUIRES: CheckModelRunsWithData(config, mesh) passes.
ModelProgram BuildModelProgram(const ValidatedModel& model);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_WORKLOADS_INTERNAL_MODEL_PROGRAM_H_
