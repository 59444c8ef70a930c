// Predicted time of NCCL's all-reduce, all_gather and reduce_scatter on a GPU group, for every algorithm x
// protocol NCCL has (CollNet off), and the choice NCCL's tuner would make (the fastest prediction).
//
// Our own model of the machine; the constants come from NVIDIA/nccl (src/graph/tuning.cc: base and per-step
// hardware latencies per algorithm and protocol, LL / LL128 bandwidth factors and caps, NVLS efficiency;
// src/transport/nvls.cc and src/enqueue.cc: NVLS channels and chunk sizes; src/include/device.h: NCCL_STEPS)
// and from the topology's figures. docs/cost-model.md has every formula with its source.
//
// A group is `nodes` x `gpus_per_node` GPUs (n = nodes x gpus_per_node), NVLink one-way bandwidth B (after
// the NVLink efficiency) and per node the one-way bandwidth N of the NICs its GPUs use (rail-optimised: one
// NIC per GPU). With f = 2(n-1)/n (all-reduce) or (n-1)/n (all_gather, reduce_scatter):
//   ring       t = latency + f S / busbw, busbw = min(B, N) x protocol factor
//   tree       (all-reduce) chain inside the node, double binary tree across nodes:
//              t = latency + max(2 S / B, inter S / N) / 0.92, inter = 1 (2 nodes) or 2 (more)
//   nvls       (one node, NVSwitch with SHARP) t = 25 us + w S / (0.85 B) + pipeline fill
//   nvls_tree  (all-reduce, several nodes) t = latency + max(S(1+1/g) / (e B), inter S / N)
// Example: dgx-h100:1 all-reduce of 8 B: ring / LL, 6.6 + 14 x 0.6 = 15.0 us; of 1 GiB: nvls / simple,
// 25 us + 1.125 x 2^30 / (0.85 x 360e9) + 61.7 us = 4.03 ms (busbw 466 GB/s).
#ifndef SPMDSIM_COST_NCCL_MODEL_H_
#define SPMDSIM_COST_NCCL_MODEL_H_

#include <string>
#include <string_view>
#include <vector>

#include "mesh/topology.h"

namespace spmdsim {

// NCCL's protocols (NCCL_PROTO); kAuto lets the model choose.
enum class Protocol { kAuto, kLl, kLl128, kSimple };
std::string_view ProtocolName(Protocol protocol);  // "auto", "ll", "ll128", "simple"
Protocol ParseProtocol(std::string_view name);     // case-insensitive; throws Error(kNotFound) listing the names

enum class NcclAlgorithm { kRing, kTree, kNvls, kNvlsTree };
std::string_view NcclAlgorithmName(NcclAlgorithm algorithm);  // "ring", "tree", "nvls", "nvls_tree"

enum class NcclCollective { kAllReduce, kAllGather, kReduceScatter };

// The physical shape of one GPU group.
struct NcclGroup {
  int nodes = 1;
  int gpus_per_node = 1;              // members of the group per node (the same on every node)
  double nvlink_Bps = 0;              // one-way NVLink bandwidth per GPU, efficiency applied
  double network_Bps = 0;             // one-way network bandwidth per node for this group, efficiency applied
  double network_latency_s = 0;       // the fabric's one-way latency (NetworkSpec::latency_s)
  GpuGeneration generation = GpuGeneration::kHopper;
  bool nvlink_sharp = false;
  bool amd_host = false;
  // The NCCL release whose tuning constants apply, as NCCL_VERSION_CODE (2.18.5 = 21805); 0 = the current ones
  // (2.21 and later). Only what changed for NVLink groups is kept: see NcclRelease in nccl_model.cc.
  int nccl_version = 0;
  int ranks() const { return nodes * gpus_per_node; }
};

// One algorithm x protocol's prediction.
struct NcclEstimate {
  NcclAlgorithm algorithm = NcclAlgorithm::kRing;
  Protocol protocol = Protocol::kSimple;
  double latency_seconds = 0;    // base + per-step latencies (+ NVLS pipeline fill)
  double bandwidth_seconds = 0;  // bytes over the algorithm's bandwidth
  double nvlink_bytes = 0;       // bytes one GPU sends over NVLink
  double network_bytes = 0;      // bytes one GPU's NIC sends
  double seconds() const { return latency_seconds + bandwidth_seconds; }
};

// Every algorithm x protocol that applies to `op` on `group` (NCCL's rules: tree is all-reduce only; NVLS
// needs NVLink SHARP and, for all_gather / reduce_scatter, one node; NVLS tree is all-reduce on several nodes;
// NVLS and NVLS tree are Simple only). REQUIRES: group.ranks() >= 2, bytes >= 0.
std::vector<NcclEstimate> NcclEstimates(NcclCollective op, const NcclGroup& group, double bytes);

// Names of the algorithms / protocols that apply, for error messages ("ring, tree, nvls").
std::string NcclApplicableAlgorithms(NcclCollective op, const NcclGroup& group);

}  // namespace spmdsim

#endif  // SPMDSIM_COST_NCCL_MODEL_H_
