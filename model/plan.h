// PlanModel: search the parallel configurations of a model on a machine and rank them by predicted step time
// (`spmdsim plan`, docs/plan.md).
//
// For a model (ModelConfig; its `parallel`, `micro_batch` and `recompute` are ignored: they are what is searched),
// a topology and a global batch, every configuration is enumerated:
//   degrees      tensor t (dividing the devices of one host / NVLink domain on GPUs), pipeline p (the layers
//                split evenly, else with the embedding and loss counted as layers, else with lighter first and last
//                stages: Megatron-Core's uneven stages, model/pipeline.h), context c, data d (the rest:
//                t p c d = devices), expert e (MoE: dividing d and the experts; also e x t over the tensor ranks,
//                expert tensor parallelism 1)
//   placement    the order of the mesh axes (the last varies fastest: on GPUs it rides NVLink inside a host,
//                on TPUs the mesh is laid on the torus by MakeDeviceMesh as JAX's mesh_utils does)
//   micro-batch, pipeline schedule (1F1B; interleaved with v virtual stages), recompute, ZeRO stage (0, 1, 3),
//   sequence parallelism with tensor parallelism
// The mesh of each distinct axis order is built once and shared by the configurations that use it. Each
// configuration is validated once (ValidateModel), accounted (AccountModel: memory per device) and, when it fits,
// predicted (PredictModelStep). Configurations are independent and evaluated in parallel on a oneTBB arena of
// `threads` workers, each with its own cost models; the result does not depend on the number of threads.
//
// Thread safety: PlanModel may be called concurrently; `progress` is called from the worker threads, serialised.
// Placement on TPUs: an axis order that MakeDeviceMesh cannot lay out keeping each physical torus axis whole is
// tried again with allow_split_physical_axes (JAX's create_device_mesh flag: a physical axis may then serve several
// mesh axes), as a user of mesh_utils would; the entry records it.
// Ranking: by predicted step time; exact ties by peak memory per device (lower first), then in enumeration order
// (the order above: degrees, then placement, then micro-batch and schedule), so the result is deterministic and
// the leaner of two equally fast configurations is listed first. Among the memory options of one candidate the
// same order picks the one kept.
// Errors: Error(kInvalidArgument) for a global batch < 1, a non-positive top, threads < 0 or a memory headroom
// outside [0, 1); a model that is
// invalid on any mesh (e.g. heads = 0) throws what ValidateModel throws for the first configuration tried.
#ifndef SPMDSIM_MODEL_PLAN_H_
#define SPMDSIM_MODEL_PLAN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mesh/topology.h"
#include "model/accounting.h"
#include "model/config.h"
#include "model/step.h"

namespace spmdsim {

struct PlanOptions {
  int64_t global_batch = 0;       // sequences per step (0: the model's own)
  int64_t top = 10;               // how many of the fastest to keep
  int threads = 0;                // worker threads (0: hardware concurrency)
  // Searched values; empty: the defaults below.
  std::vector<int64_t> micro_batches{1, 2, 4, 8};
  std::vector<int64_t> virtual_stages{2, 3, 4, 6, 8, 12};
  std::vector<Recompute> recomputes{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  std::vector<int> zero_stages{0, 1, 3};
  int64_t max_context = 8;         // context degrees 1, 2, 4, ... up to this (and dividing seq)
  bool search_placement = true;    // every order of the mesh axes; false: tensor innermost, then context,
                                   // pipeline, data outermost (Megatron's order)
  // A calibration profile's figures every configuration is predicted with (default: none).
  StepCalibration calibration{};
  // The fraction of each device's memory a configuration must leave free, in [0, 1): it fits when its peak
  // (AccountModel) is at most (1 - memory_headroom) x capacity. The default 10% covers what the accounting leaves
  // out (the runtime's context and workspaces, allocator fragmentation); docs/plan.md, "Memory headroom".
  double memory_headroom = 0.10;
  // Called after each configuration with (done, total).
  std::function<void(int64_t, int64_t)> progress = nullptr;
};

struct PlanEntry {
  ValidatedModel model;                                    // the model with the searched fields set, validated on
                                                           // the mesh it was evaluated on (model.shared_mesh())
  std::vector<std::pair<std::string, int64_t>> mesh_axes;  // in mesh order (the last varies fastest)
  ModelAccounting accounting;                              // AccountModel(model): memory per device
  ModelStepTimes step;                                     // PredictModelStep(model) with the plan's calibration
  // The mesh needed JAX's create_device_mesh(..., allow_split_physical_axes=True): a physical torus axis shared
  // by several mesh axes (TPUs; tried when no placement keeps the physical axes whole).
  bool split_physical_axes = false;

  const ModelConfig& config() const { return model.config(); }
  double peak_bytes() const { return accounting.peak_bytes; }  // peak memory per device
  std::string Describe() const;  // "dp 64 x pp 8 (interleaved 12) x tp 4 + sp, mb 1, recompute none, zero 1"
};

// One evaluated configuration (predicted and within memory), for the step time vs memory scatter.
struct PlanPoint {
  double step_seconds = 0;
  double peak_bytes = 0;      // per device
  std::string description;    // PlanEntry::Describe()
};

struct PlanResult {
  int64_t devices = 0;
  std::string topology;         // "tpu-v5p:4x4x4, 64 chips (Cloud TPU v5p-128 counts 128 TensorCores, 2 per chip)"
  int64_t enumerated = 0;       // configurations generated
  int64_t invalid = 0;          // rejected by ValidateModel or without a placement on the topology
  double memory_headroom = 0;   // PlanOptions::memory_headroom
  double capacity_bytes = 0;    // memory per device
  int64_t split_placements = 0; // configurations placed only with allow_split_physical_axes
  int64_t over_memory = 0;      // valid but over the device memory
  int64_t evaluated = 0;        // predicted
  std::map<std::string, int64_t> rejected_because;  // reason (the error's first words) -> count
  std::vector<PlanEntry> best;  // the `top` fastest, fastest first (exact ties: lower peak memory, then
                                // enumeration order)
  std::vector<PlanPoint> points;  // every evaluated configuration, in enumeration order
  int64_t equivalent_placements = 0;  // entries left out of `best` as the same time as a listed axis order
  double wall_seconds = 0;
};

// The ranking's order: true when `a` is faster than `b`, or exactly as fast with a lower peak memory per device.
// Neither before the other: the ranking keeps them in enumeration order (it sorts stably).
// Example: steps 1.08 s / 40.6 GiB, 1.08 s / 21.7 GiB and 1.07 s / 80 GiB rank 1.07 s, then 21.7 GiB, then 40.6 GiB.
bool PlanRanksBefore(const PlanEntry& a, const PlanEntry& b);

PlanResult PlanModel(const ModelConfig& model, std::shared_ptr<const Topology> topology, const PlanOptions& options);

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_PLAN_H_
