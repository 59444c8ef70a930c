// Predicted time of a collective on the links its group spans (Hockney alpha-beta per link class).
//
// Message size S follows nccl-tests (doc/PERFORMANCE.md and src/*.cu GetBw), i.e. the LARGEST per-device
// buffer of the call:
//   all-reduce (psum, pmean, pmax, pmin)   S = per-device buffer (input = output)
//   all_gather                            S = per-device OUTPUT = group size x input shard (the whole array)
//   reduce_scatter (psum_scatter)         S = per-device INPUT  = group size x output shard (the whole array)
//   all_to_all                            S = per-device send buffer (S / n goes to each member)
//   ppermute (send/recv)                  S = bytes each device sends to its peer
// algbw = S / t and busbw = algbw x factor, factor = 2(n-1)/n (all-reduce), (n-1)/n (all_gather,
// reduce_scatter, all_to_all), 1 (ppermute).
//
// Per stage of the group's span (cost/link_model.h), p members, one-way bandwidth B (after sharing, times
// the link-class efficiency), latency alpha, buffer D entering the stage:
//   ring                 reduce_scatter / all_gather: (p-1) alpha + (p-1)/p D/B; all-reduce twice that
//   bidirectional_ring   (torus ring with wraparound) ceil((p-1)/2) alpha + (p-1)/p D/(2B)
//   halving_doubling     (p a power of two, switched) log2(p) alpha + (p-1)/p D/B per half
//   direct               (switched) alpha + (p-1)/p D/B per half; all_to_all pairwise (p-1) alpha + (p-1)/p D/B
//   nvls                 (NVLink SHARP, all-reduce, irregular GPU groups only) 2 alpha + (1 + 1/p) D/B
// A line stage (torus without wraparound) runs a ring embedded on the line, which occupies both directions
// of every link: the `ring` formula at one-way B, 2x the bidirectional ring (scaling book).
// Several stages compose dimension by dimension on a shrinking buffer (ASTRA-sim): reduce_scatter stage 1
// on D, stage 2 on D/p1, ...; all_gather in reverse; all-reduce = both ("sequential"). Torus (ICI) stages
// may instead run "concurrent": the buffer split into k stripes that visit the k dimensions in rotated
// orders, so every dimension's links are busy at once (the scaling book's V/(kW) over k axes).
// docs/cost-model.md has every formula with its source.
//
// GPU all-reduce, all_gather and reduce_scatter follow NCCL instead (cost/nccl_model.h: ring, tree, nvls,
// nvls_tree x LL, LL128, Simple, the fastest chosen); GPU all_to_all across hosts is bounded by each GPU's NIC.
//
// Example: dgx-h100:1 (8 GPUs, NVLink 450e9 B/s one-way, efficiency 0.8), psum of S = 1 GiB over all 8 with
// algorithm ring: NCCL's ring / Simple, t = (8.4 + 14 x 3.4) us + 2*7/8 * 2^30 / 3.6e11 = 5.276 ms;
// busbw = 356.2 GB/s. With the default (auto) choice it runs nvls: 4.03 ms, busbw 466 GB/s.
#ifndef SPMDSIM_COST_COLLECTIVE_MODEL_H_
#define SPMDSIM_COST_COLLECTIVE_MODEL_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cost/link_model.h"
#include "cost/nccl_model.h"
#include "mesh/mesh.h"

namespace spmdsim {

enum class CollectiveOp { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kPermute };
std::string_view CollectiveOpName(CollectiveOp op);  // "all_reduce", "all_gather", ...
// Accepts JAX's names (psum, pmean, pmax, pmin, all_gather, psum_scatter, all_to_all, ppermute) and
// nccl-tests' (all_reduce, reduce_scatter, alltoall, sendrecv). Throws Error(kNotFound) listing them.
CollectiveOp ParseCollectiveOp(std::string_view name);
// nccl-tests' busbw factor for a group of n.
double BusBandwidthFactor(CollectiveOp op, int n);

// Per-stage algorithm; kAuto picks the fastest applicable one per stage. On GPUs, all-reduce, all_gather and
// reduce_scatter use NCCL's algorithms instead (cost/nccl_model.h): ring, tree, nvls, nvls_tree.
enum class Algorithm { kAuto, kRing, kBidirectionalRing, kHalvingDoubling, kDirect, kNvls, kTree, kNvlsTree };
std::string_view AlgorithmName(Algorithm algorithm);  // "auto", "ring", "bidirectional_ring", ...
Algorithm ParseAlgorithm(std::string_view name);      // throws Error(kNotFound) listing the names

// How several stages are combined; kAuto picks the faster.
enum class Composition { kAuto, kSequential, kConcurrent };
std::string_view CompositionName(Composition composition);  // "auto", "sequential", "concurrent"
Composition ParseComposition(std::string_view name);

// {infiniband: 0.96}: see CollectiveOptions::link_efficiency. NVLink's default depends on the GPU generation:
// DefaultNvlinkEfficiency.
std::map<LinkClass, double> DefaultLinkEfficiency();
// The fraction of NVLink's line rate NCCL reaches: 0.73 on Ampere (220 of 300 GB/s, nccl-tests issues 228 and
// 331), 0.8 otherwise (nccl-tests issue 212: ~20% protocol overhead on Hopper).
double DefaultNvlinkEfficiency(GpuGeneration generation);
// The fraction of the ICI link rate XLA's collectives reach, and their fixed cost per collective: v5e 0.855 (95% of
// the book's 4.5e10 B/s, of the preset's 5e10) and 2.7 us, from the JAX scaling book's measured all_gather
// bandwidth curve and 128 KiB profile (sharding.md); other generations 1 and 0.
double DefaultIciEfficiency(Topology::TpuGeneration generation);
double TpuCollectiveOverheadSeconds(Topology::TpuGeneration generation);

struct CollectiveOptions {
  // Forced per-stage algorithm (kAuto: fastest applicable per stage), like NCCL_ALGO. A forced algorithm that
  // does not apply to some stage of the group is an error naming the stage and the algorithms that apply.
  Algorithm algorithm = Algorithm::kAuto;
  // Forced NCCL protocol for GPU all-reduce / all_gather / reduce_scatter, like NCCL_PROTO (kAuto: the fastest).
  // GPU all_to_all and ppermute run Simple whatever this says; on TPU and CPU a forced protocol is an error.
  Protocol protocol = Protocol::kAuto;
  Composition composition = Composition::kAuto;
  // Fraction of the line rate a collective library reaches, per link class (1 when absent, except NVLink:
  // DefaultNvlinkEfficiency of the GPU generation). InfiniBand 0.96: the NCCL maintainers' ~24 GB/s of busbw
  // per 200 Gb/s NIC (nccl-tests issue 119).
  std::map<LinkClass, double> link_efficiency = DefaultLinkEfficiency();
  // Whether kAuto may choose NVLink SHARP (nvls, nvls_tree) where the topology has it (H100 and later).
  bool allow_nvls = true;
  // The NCCL release to model, as NCCL_VERSION_CODE (2.18.5 = 21805); 0: the current tuning constants (2.21 and
  // later). Before 2.21 the ring LL protocol counts 1/4 of the link instead of 1/2 and Hopper's LL cap is 87.7
  // GB/s (cost/nccl_model.cc); validation rows measured with an older NCCL say which.
  int nccl_version = 0;
};

// One stage of a predicted collective.
struct StageCost {
  SpanStage stage;
  std::string algorithm;        // per-stage algorithm name
  double buffer_bytes = 0;      // D entering the stage (per device)
  double bytes_sent = 0;        // bytes one device transmits on this stage, forwarded bytes included
  double latency_seconds = 0;   // alpha part
  double bandwidth_seconds = 0; // bytes/B part
  double seconds = 0;           // this stage's share of the total
  std::vector<std::string> mesh_axes;  // axes of the call whose groups vary along this stage
};

// Predicted cost of one collective on one group.
struct CollectiveCost {
  CollectiveOp op = CollectiveOp::kAllReduce;
  double bytes = 0;   // S, as in the file comment
  int group_size = 1;
  double seconds = 0;
  std::string algorithm;  // "ring", "nvls", "tree", "torus[concurrent](bidirectional_ring, bidirectional_ring)", "none"
  // NCCL protocol of a GPU collective ("ll", "ll128", "simple"); empty on TPU and CPU (no protocols there).
  std::string protocol;
  std::vector<StageCost> stages;
  std::map<LinkClass, double> bytes_sent;           // per device, by link class (on-chip stages excluded)
  std::map<LinkClass, double> seconds_by_link;      // stage seconds summed by link class
  std::map<std::string, double> seconds_by_axis;    // stage seconds split over the axes varying the stage
  double algbw_Bps = 0;        // S / seconds (0 when seconds == 0)
  double busbw_factor = 0;     // BusBandwidthFactor(op, group_size)
  double busbw_Bps = 0;        // algbw * busbw_factor
  std::string ToString() const;
};

// Collective costs on one mesh. Not thread-safe (caches group spans); cheap to copy.
class CollectiveModel {
 public:
  // Throws Error(kFailedPrecondition) when the mesh has no topology, Error(kInvalidArgument) for an
  // efficiency outside (0, 1].
  explicit CollectiveModel(Mesh mesh, CollectiveOptions options = {});

  const Mesh& mesh() const { return mesh_; }
  const CollectiveOptions& options() const { return options_; }

  // Cost of each group along `axes` (Mesh::PositionGroups order). `pairs` (ppermute only): (source,
  // destination) indices within the group, as jax.lax.ppermute's perm.
  // Throws Error(kNotFound) for an unknown axis, Error(kInvalidArgument) for a negative or non-finite
  // `bytes`, a repeated axis, pairs on another op or bad pairs (out of range, a repeated source or
  // destination), and for a forced algorithm that does not apply.
  std::vector<CollectiveCost> CostPerGroup(CollectiveOp op, std::span<const std::string> axes, double bytes,
                                           std::span<const std::pair<int, int>> pairs = {}) const;
  // The slowest group's cost.
  CollectiveCost Cost(CollectiveOp op, std::span<const std::string> axes, double bytes,
                      std::span<const std::pair<int, int>> pairs = {}) const;
  // Cost on an explicit group of mesh positions (`axes` only labels the per-axis breakdown).
  CollectiveCost CostOfGroup(CollectiveOp op, std::span<const int64_t> positions, double bytes,
                             std::span<const std::pair<int, int>> pairs = {},
                             std::span<const std::string> axes = {}) const;

 private:
  CollectiveCost CostOfSpan(CollectiveOp op, const GroupSpan& span, double bytes,
                            std::span<const std::pair<int, int>> pairs,
                            const std::vector<std::vector<std::string>>& stage_axes) const;
  std::vector<std::vector<std::string>> AxesOfStages(const GroupSpan& span, std::span<const int64_t> positions,
                                                     std::span<const std::string> axes) const;

  Mesh mesh_;
  CollectiveOptions options_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_COST_COLLECTIVE_MODEL_H_
