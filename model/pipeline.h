// Pipeline schedules as Megatron-LM runs them (megatron/core/pipeline_parallel/schedules.py): the order a stage
// runs its forward and backward tasks, how many micro-batches' activations it holds at once, and the bubble.
//
// Example: PipelineOrder(k1F1B, 4 stages, stage 0, 8 micro-batches, 1) = F0 F1 F2 F3 B0 F4 B1 ... B7.
// Thread safety: free functions over values.
#ifndef SPMDSIM_MODEL_PIPELINE_H_
#define SPMDSIM_MODEL_PIPELINE_H_

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace spmdsim {

// One forward or backward of one micro-batch through one model chunk, in the order a pipeline stage runs them.
struct PipelineTask {
  bool forward = true;
  int64_t micro_batch = 0;
  int64_t chunk = 0;  // virtual stage index on this device (0 unless interleaved)
  bool operator==(const PipelineTask&) const = default;
};

// The order stage `stage` of `stages` runs its tasks, as Megatron-LM's schedules do
// (megatron/core/pipeline_parallel/schedules.py): GPipe all forwards then all backwards; 1F1B min(p - s - 1, m)
// warm-up forwards, then one forward and one backward alternately, then the remaining backwards; interleaved
// 1F1B the same over m v chunk-tasks with (p - s - 1) 2 + (v - 1) p warm-up forwards, micro-batches taken in
// groups of p per chunk. REQUIRES (ValidateModel checks it): interleaved needs m % p == 0.
std::vector<PipelineTask> PipelineOrder(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                        int64_t micro_batches, int64_t virtual_stages);

// The pipeline bubble over ideal compute: (p - 1) / m for GPipe and 1F1B, (p - 1) / (v m) interleaved
// (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters").
double PipelineBubbleFraction(PipelineSchedule schedule, int64_t stages, int64_t micro_batches, int64_t virtual_stages);

// Micro-batch chunks (each 1/v of a stage's layers) whose activations stage `stage` of `stages` holds at once,
// as Megatron-LM's schedules run them (megatron/core/pipeline_parallel/schedules.py): GPipe m chunks; 1F1B
// min(p - stage, m); interleaved min((p - stage - 1) * 2 + (v - 1) * p + 1, m v).
int64_t InFlightChunks(PipelineSchedule schedule, int64_t stages, int64_t stage, int64_t micro_batches,
                       int64_t virtual_stages);

// The transformer layers [first, first + count) of one virtual pipeline stage.
struct LayerRange {
  int64_t first = 0, count = 0;
  bool operator==(const LayerRange&) const = default;
};

// The layers of every virtual stage (p v of them; chunk j of stage s is virtual stage j p + s), contiguous in
// virtual-stage order, as Megatron-Core builds them (megatron/core/transformer/transformer_block.py
// get_num_layers_to_build, transformer_layer.py get_transformer_layer_offset):
//   even          L / (p v) each;
//   first / last  the first stage's `first_stage_layers` and the last stage's `last_stage_layers` (each split
//                 over its v chunks), the other stages sharing the rest evenly;
//   embedding / loss in the split   (L + e + l) / (p v) each, virtual stage 0 one fewer with the embedding
//                 counted and virtual stage p v - 1 one fewer with the loss (Llama 3 405B: 126 layers,
//                 p 16 x v 8: one layer per chunk, the first chunk only the embedding, the last only the loss).
// REQUIRES: `config` validated for `stages` (ValidateModel checks the divisibility).
std::vector<LayerRange> PipelineLayerLayout(const ModelConfig& config, int64_t stages);

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_PIPELINE_H_
