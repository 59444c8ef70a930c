#include "cost/nccl_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim {
namespace {

constexpr double kUs = 1e-6;
constexpr double kGBps = 1e9;

// Index order of NCCL's tables: algorithms Tree, Ring, NVLS, NVLSTree (CollNet and PAT left out), protocols
// LL, LL128, Simple. Values in microseconds, from NVIDIA/nccl src/graph/tuning.cc (ncclTunerConstantsDefaults).
enum { kTree = 0, kRing = 1, kNvls = 2, kNvlsTree = 3 };
enum { kLl = 0, kLl128 = 1, kSimple = 2 };
constexpr double kBaseLatencyUs[4][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}};
constexpr double kNvlinkLatencyUs[4][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25}, {0, 0, 25}};
constexpr double kNetLatencyUs[4][3] = {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 18}, {0, 0, 20.9}};

// tuning.cc treeCorrectionFactor: tree all-reduce bandwidth factor by protocol and log2(S / 64), 64 B..256 MB.
constexpr double kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

// src/include/device.h: NCCL_STEPS, the slots of every channel's FIFO.
constexpr int kNcclSteps = 8;
// src/transport/nvls.cc: NVLS chunk size (NCCL_NVLS_CHUNKSIZE default) and channels per architecture.
constexpr double kNvlsChunk = 128 * kKiB;

int GenerationIndex(GpuGeneration generation) {
  switch (generation) {
    case GpuGeneration::kNone:
    case GpuGeneration::kVolta: return 0;
    case GpuGeneration::kAmpere: return 1;
    case GpuGeneration::kHopper: return 2;
    case GpuGeneration::kBlackwell: return 3;
  }
  return 2;
}

// Whether the group runs an NCCL release before 2.21, whose tuning.cc differs from the current one where it
// matters on NVLink: the ring LL bus bandwidth is 1/4 of the link's (1/3 for all_gather / reduce_scatter on one
// node) instead of 1/2, Hopper's one-node LL cap is Ampere's 87.7 GB/s instead of 141, and (2.20) NVLS's
// NVLink latency is 23 us instead of 25 (NVIDIA/nccl tags v2.18.5-1, v2.20.5-1 and v2.21.5-1, tuning.cc).
bool BeforeNccl221(const NcclGroup& g) { return g.nccl_version > 0 && g.nccl_version < 22100; }

// tuning.cc llMaxBws (GB/s of bus bandwidth): one node by GPU generation; several nodes by host CPU vendor
// (Intel row 0, AMD row 1) and node count (2 / more).
double LlMaxBusBps(const NcclGroup& g) {
  constexpr double kOneNode[4] = {39.0, 87.7, 141.0, 282.0};
  if (g.nodes == 1 && BeforeNccl221(g) && g.generation == GpuGeneration::kHopper) return 87.7 * kGBps;
  if (g.nodes == 1) return kOneNode[GenerationIndex(g.generation)] * kGBps;
  const double two_nodes = g.amd_host ? 22.5 : 39.0;
  const double more = g.amd_host ? 19.0 : 20.4;
  return (g.nodes <= 2 ? two_nodes : more) * kGBps;
}

// tuning.cc nvlsEfficiency: Hopper 0.85, Blackwell 0.74 (0 before Hopper: no NVLS).
double NvlsEfficiency(GpuGeneration generation) {
  switch (generation) {
    case GpuGeneration::kHopper: return 0.85;
    case GpuGeneration::kBlackwell: return 0.74;
    default: return 0;
  }
}

int Log2Floor(int x) {
  int r = 0;
  while (x > 1) {
    x >>= 1;
    ++r;
  }
  return r;
}

double BusFactor(NcclCollective op, int n) {
  return op == NcclCollective::kAllReduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
}

// Network latency of one inter-node step, per NCCL: the protocol's NET hardware latency (the Tree value when
// each node holds one rank: nothing hides it) plus the fabric's latency, twice for Simple (the extra flush).
double InterStepLatency(const NcclGroup& g, int algo, int proto) {
  const int table_algo = g.gpus_per_node == 1 ? kTree : algo;
  double latency = kNetLatencyUs[table_algo][proto] * kUs + g.network_latency_s;
  if (proto == kSimple) latency += g.network_latency_s;
  return latency;
}

NcclEstimate Ring(NcclCollective op, const NcclGroup& g, double S, int proto) {
  const int n = g.ranks();
  const int steps = op == NcclCollective::kAllReduce ? 2 * (n - 1) : n - 1;
  const int inter_steps = g.nodes == 1 ? 0 : (op == NcclCollective::kAllReduce ? 2 * (g.nodes - 1) : g.nodes - 1);
  double intra = kNvlinkLatencyUs[kRing][proto] * kUs;
  if (g.nodes > 1) {  // tuning.cc getNetOverhead: 1 us Intel, 2 us AMD per network post, x3 for Simple
    const double overhead = (g.amd_host ? 2.0 : 1.0) * (proto == kSimple ? 3 : 1) * kUs;
    intra = std::max(intra, overhead);
  }
  double latency = kBaseLatencyUs[kRing][proto] * kUs + (steps - inter_steps) * intra +
                   inter_steps * InterStepLatency(g, kRing, proto);
  // tuning.cc: multi-node Simple ring all-reduce latency x1.4 ("plateau effect of ring"; x1.9 before Ampere).
  if (g.nodes > 1 && proto == kSimple && op == NcclCollective::kAllReduce) {
    latency *= GenerationIndex(g.generation) >= 1 ? 1.4 : 1.9;
  }
  // Every rank sends f S; the ring is as fast as its slowest hop: NVLink inside a node, the node's NICs
  // between nodes (k rings, one per NIC, each crossing every node boundary once).
  double bus = g.gpus_per_node > 1 ? g.nvlink_Bps : g.network_Bps;
  if (g.nodes > 1) bus = std::min(bus, g.network_Bps);
  if (proto == kLl128) bus *= 0.92;                                   // 120 of 128 bytes are data
  if (proto == kLl) {  // 4 of 8 bytes are data (before 2.21 NCCL counted 1/4, or 1/3 for a one-node gather)
    double factor = 0.5;
    if (BeforeNccl221(g)) factor = g.nodes > 1 || op == NcclCollective::kAllReduce ? 0.25 : 1.0 / 3;
    bus = std::min(LlMaxBusBps(g), bus * factor);
  }
  const double f = BusFactor(op, n);
  NcclEstimate e;
  e.algorithm = NcclAlgorithm::kRing;
  e.latency_seconds = latency;
  e.bandwidth_seconds = f * S / bus;
  e.network_bytes = g.nodes > 1 ? f * S * g.nodes / n : 0;  // crossing hops: nodes of the n hops, per rank
  e.nvlink_bytes = f * S - e.network_bytes;
  return e;
}

// Inter-node bytes per node of a double binary tree, in units of S: two nodes exchange S/2 each way per tree;
// with more nodes an inner node sends S/2 up and 2 x S/2 down in one tree and S/2 up as a leaf of the other.
double TreeInterFactor(int nodes) { return nodes <= 1 ? 0 : (nodes == 2 ? 1.0 : 2.0); }

NcclEstimate Tree(const NcclGroup& g, double S, int proto) {
  const double latency =
      kBaseLatencyUs[kTree][proto] * kUs +
      2 * ((g.gpus_per_node - 1) * kNvlinkLatencyUs[kTree][proto] * kUs +
           Log2Floor(g.nodes) * InterStepLatency(g, kTree, proto));
  // Chain inside the node: every GPU sends S up (reduce) and S down (broadcast) through its NVLink port.
  double per_byte = 0;
  if (g.gpus_per_node > 1) per_byte = 2 / g.nvlink_Bps;
  if (g.nodes > 1) per_byte = std::max(per_byte, TreeInterFactor(g.nodes) / g.network_Bps);
  double algbw = 0.92 / per_byte;  // tuning.cc: tree all-reduce busBw x 0.92
  if (proto == kLl) algbw = std::min(algbw / 3.8, LlMaxBusBps(g) / 2);
  if (proto == kLl128) algbw *= g.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0;
  const int log_size = S >= 64 ? Log2Floor(static_cast<int>(std::min(S / 64, 1e9))) : -1;
  if (log_size >= 0 && log_size < 23) algbw *= kTreeCorrection[proto][log_size];
  NcclEstimate e;
  e.algorithm = NcclAlgorithm::kTree;
  e.latency_seconds = latency;
  e.bandwidth_seconds = S / algbw;
  e.nvlink_bytes = g.gpus_per_node > 1 ? 2 * S : 0;
  e.network_bytes = TreeInterFactor(g.nodes) * S / g.gpus_per_node;
  return e;
}

// NVLS pipeline start-up: each of the nvls channels streams its share through an NCCL_STEPS-deep FIFO of
// chunk-sized slots; the first window (all channels' FIFOs) is paid before the pipeline runs at full rate.
// Chunks shrink for small messages as in enqueue.cc (calcCollChunking).
double NvlsWindowBytes(const NcclGroup& g, double S, bool tree) {
  const double channels = g.generation == GpuGeneration::kBlackwell ? (g.nodes > 1 ? 32 : 24) : 16;
  double chunk = kNvlsChunk;
  if (tree) {
    if (g.nodes >= 4) chunk = 64 * kKiB;
    if (S < 4 * channels * chunk && chunk > 65536) chunk = 65536;
  } else {
    if (S < 64 * channels * chunk && chunk > 65536) chunk = 65536;
    if (S < 8 * channels * chunk && chunk > 32768) chunk = 32768;
    if (S < 2 * channels * chunk && chunk > 16384) chunk = 16384;
  }
  return std::min(S, kNcclSteps * channels * chunk);
}

NcclEstimate Nvls(NcclCollective op, const NcclGroup& g, double S) {
  const int n = g.ranks();
  const double B = g.nvlink_Bps * NvlsEfficiency(g.generation);
  // All-reduce: multimem.ld_reduce pulls every GPU's S through the switch (S/n per shard, n shards) and
  // multimem.st pushes the reduced S/n to all: S(1 + 1/n) each way per GPU. all_gather / reduce_scatter move S.
  const double wire = op == NcclCollective::kAllReduce ? 1 + 1.0 / n : 1.0;
  NcclEstimate e;
  e.algorithm = NcclAlgorithm::kNvls;
  e.protocol = Protocol::kSimple;
  const double start_us = g.nccl_version >= 22000 && g.nccl_version < 22100 ? 23 : kNvlinkLatencyUs[kNvls][kSimple];
  e.latency_seconds = start_us * kUs + wire * NvlsWindowBytes(g, S, false) / B;
  e.bandwidth_seconds = wire * S / B;
  e.nvlink_bytes = op == NcclCollective::kAllGather ? S / n : wire * S;
  return e;
}

NcclEstimate NvlsTree(const NcclGroup& g, double S) {
  const double B = g.nvlink_Bps * NvlsEfficiency(g.generation);
  const int gpn = g.gpus_per_node;
  const double wire = gpn > 1 ? 1 + 1.0 / gpn : 0;
  const double per_byte = std::max(wire / B, TreeInterFactor(g.nodes) / g.network_Bps);
  NcclEstimate e;
  e.algorithm = NcclAlgorithm::kNvlsTree;
  e.protocol = Protocol::kSimple;
  e.latency_seconds = kNvlinkLatencyUs[kNvlsTree][kSimple] * kUs +
                      2 * Log2Floor(g.nodes) * InterStepLatency(g, kNvlsTree, kSimple) +
                      NvlsWindowBytes(g, S, true) * per_byte;
  e.bandwidth_seconds = S * per_byte;
  e.nvlink_bytes = wire * S;
  e.network_bytes = TreeInterFactor(g.nodes) * S / gpn;
  return e;
}

bool NvlsApplies(NcclCollective op, const NcclGroup& g) {
  return g.nvlink_sharp && NvlsEfficiency(g.generation) > 0 && g.gpus_per_node >= 2 &&
         (g.nodes == 1 || op == NcclCollective::kAllReduce);
}

}  // namespace

std::string_view ProtocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::kAuto: return "auto";
    case Protocol::kLl: return "ll";
    case Protocol::kLl128: return "ll128";
    case Protocol::kSimple: return "simple";
  }
  return "?";
}

Protocol ParseProtocol(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (Protocol p : {Protocol::kAuto, Protocol::kLl, Protocol::kLl128, Protocol::kSimple}) {
    if (ProtocolName(p) == lower) return p;
  }
  Throw(ErrorCode::kNotFound, "unknown protocol '{}'; valid: auto, ll, ll128, simple", name);
}

std::string_view NcclAlgorithmName(NcclAlgorithm algorithm) {
  switch (algorithm) {
    case NcclAlgorithm::kRing: return "ring";
    case NcclAlgorithm::kTree: return "tree";
    case NcclAlgorithm::kNvls: return "nvls";
    case NcclAlgorithm::kNvlsTree: return "nvls_tree";
  }
  return "?";
}

std::vector<NcclEstimate> NcclEstimates(NcclCollective op, const NcclGroup& g, double S) {
  SPMDSIM_CHECK(g.ranks() >= 2 && S >= 0, "NCCL estimate needs >= 2 ranks and bytes >= 0");
  std::vector<NcclEstimate> out;
  for (int proto : {kLl, kLl128, kSimple}) {
    NcclEstimate e = Ring(op, g, S, proto);
    e.protocol = static_cast<Protocol>(proto + 1);
    out.push_back(e);
  }
  if (op == NcclCollective::kAllReduce) {
    for (int proto : {kLl, kLl128, kSimple}) {
      NcclEstimate e = Tree(g, S, proto);
      e.protocol = static_cast<Protocol>(proto + 1);
      out.push_back(e);
    }
  }
  if (NvlsApplies(op, g)) out.push_back(g.nodes == 1 ? Nvls(op, g, S) : NvlsTree(g, S));
  return out;
}

std::string NcclApplicableAlgorithms(NcclCollective op, const NcclGroup& g) {
  std::vector<std::string_view> names = {"ring"};
  if (op == NcclCollective::kAllReduce) names.push_back("tree");
  if (NvlsApplies(op, g)) names.push_back(g.nodes == 1 ? "nvls" : "nvls_tree");
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace spmdsim
