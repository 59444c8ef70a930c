// Megatron-LM's pipeline schedules (model/pipeline.h).
#include "model/pipeline.h"

#include <algorithm>

#include "common/error.h"

namespace spmdsim {

double PipelineBubbleFraction(PipelineSchedule schedule, int64_t stages, int64_t micro_batches,
                              int64_t virtual_stages) {
  SPMDSIM_CHECK(stages >= 1 && micro_batches >= 1 && virtual_stages >= 1, "bad pipeline figures");
  const double bubble = static_cast<double>(stages - 1) / static_cast<double>(micro_batches);
  return schedule == PipelineSchedule::kInterleaved1F1B ? bubble / static_cast<double>(virtual_stages) : bubble;
}

int64_t InFlightChunks(PipelineSchedule schedule, int64_t stages, int64_t stage, int64_t micro_batches,
                       int64_t virtual_stages) {
  switch (schedule) {
    case PipelineSchedule::kGpipe: return micro_batches;
    case PipelineSchedule::k1F1B: return std::min(stages - stage, micro_batches);
    case PipelineSchedule::kInterleaved1F1B:
      return std::min((stages - stage - 1) * 2 + (virtual_stages - 1) * stages + 1, micro_batches * virtual_stages);
  }
  return micro_batches;
}

std::vector<LayerRange> PipelineLayerLayout(const ModelConfig& c, int64_t stages) {
  const ModelParallelism& par = c.parallel;
  const int64_t p = stages, v = par.virtual_stages;
  SPMDSIM_CHECK(p >= 1 && v >= 1, "bad pipeline figures");
  std::vector<int64_t> counts(static_cast<size_t>(p * v));
  if (par.first_stage_layers >= 0 || par.last_stage_layers >= 0) {
    const int64_t first = std::max<int64_t>(par.first_stage_layers, 0),
                  last = std::max<int64_t>(par.last_stage_layers, 0);
    const int64_t middle_stages = p - (par.first_stage_layers >= 0 ? 1 : 0) - (par.last_stage_layers >= 0 ? 1 : 0);
    const int64_t per_middle = middle_stages > 0 ? (c.layers - first - last) / middle_stages : 0;
    for (int64_t k = 0; k < p * v; ++k) {
      const int64_t stage = k % p;
      int64_t per_stage = per_middle;
      if (stage == 0 && par.first_stage_layers >= 0) per_stage = first;
      if (stage == p - 1 && par.last_stage_layers >= 0) per_stage = last;
      counts[static_cast<size_t>(k)] = per_stage / v;
    }
  } else {
    const int64_t e = par.embedding_in_split ? 1 : 0, l = par.loss_in_split ? 1 : 0;
    counts.assign(counts.size(), (c.layers + e + l) / (p * v));
    counts.front() -= e;
    counts.back() -= l;
  }
  std::vector<LayerRange> out;
  int64_t next = 0;
  for (int64_t count : counts) {
    SPMDSIM_CHECK(count >= 0, "a virtual stage with fewer than no layers");
    out.push_back({next, count});
    next += count;
  }
  SPMDSIM_CHECK(next == c.layers, "the pipeline layout does not hold every layer");
  return out;
}

std::vector<PipelineTask> PipelineOrder(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                        int64_t micro_batches, int64_t virtual_stages) {
  SPMDSIM_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1 && virtual_stages >= 1,
                "bad pipeline figures");
  std::vector<PipelineTask> order;
  const int64_t m = micro_batches, p = stages;
  if (schedule == PipelineSchedule::kGpipe) {
    for (int64_t i = 0; i < m; ++i) order.push_back({true, i, 0});
    for (int64_t i = 0; i < m; ++i) order.push_back({false, i, 0});
    return order;
  }
  const int64_t v = schedule == PipelineSchedule::kInterleaved1F1B ? virtual_stages : 1;
  const int64_t total = m * v;
  SPMDSIM_CHECK(v == 1 || m % p == 0, "interleaved needs micro_batches % stages == 0");
  // The k-th forward / backward chunk-task: micro-batches in groups of p per chunk (Megatron's
  // get_model_chunk_id and the micro-batch id of the same group).
  auto task = [&](int64_t k, bool forward) {
    if (v == 1) return PipelineTask{forward, k, 0};
    const int64_t in_group = k % (p * v);
    const int64_t chunk = in_group / p;
    const int64_t micro_batch = (k / (p * v)) * p + k % p;
    return PipelineTask{forward, micro_batch, forward ? chunk : v - 1 - chunk};
  };
  const int64_t warmup =
      std::min(total, v == 1 ? p - stage - 1 : (p - stage - 1) * 2 + (v - 1) * p);
  for (int64_t k = 0; k < warmup; ++k) order.push_back(task(k, true));
  for (int64_t k = 0; k < total - warmup; ++k) {
    order.push_back(task(warmup + k, true));
    order.push_back(task(k, false));
  }
  for (int64_t k = total - warmup; k < total; ++k) order.push_back(task(k, false));
  return order;
}

}  // namespace spmdsim
