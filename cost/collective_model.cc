#include "cost/collective_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace spmdsim {
namespace {

// What a stage does in the composition: reduce_scatter, all_gather, all-reduce, all_to_all.
enum class Phase { kReduceScatter, kAllGather, kAllReduce, kAllToAll };

Phase PhaseOf(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return Phase::kAllReduce;
    case CollectiveOp::kAllGather: return Phase::kAllGather;
    case CollectiveOp::kReduceScatter: return Phase::kReduceScatter;
    case CollectiveOp::kAllToAll: return Phase::kAllToAll;
    case CollectiveOp::kPermute: break;
  }
  SPMDSIM_CHECK(false, "ppermute has no phase");
  return Phase::kAllReduce;
}

bool IsPowerOfTwo(int p) { return p > 0 && (p & (p - 1)) == 0; }

struct StageTime {
  double latency = 0;
  double bandwidth = 0;
  double bytes_sent = 0;
  double total() const { return latency + bandwidth; }
};

// Time of one stage of p members at one-way bandwidth B running `algorithm` for `phase` on buffer D.
// REQUIRES: the algorithm applies (Applies()).
StageTime TimeOfStage(Phase phase, Algorithm algorithm, const SpanStage& stage, double B, double D) {
  const double p = stage.size;
  const double alpha = stage.latency_s;
  const double fraction = (p - 1) / p;
  StageTime t;
  if (phase == Phase::kAllToAll) {
    t.bytes_sent = fraction * D;
    switch (algorithm) {
      case Algorithm::kDirect:  // pairwise exchange through a switch (Thakur, Rabenseifner and Gropp 2005)
        t.latency = (p - 1) * alpha;
        t.bandwidth = fraction * D / B;
        break;
      case Algorithm::kBidirectionalRing: {  // shortest-way routing; busiest directed link carries this
        const double quarter = std::floor(p * p / 4);
        t.latency = std::floor(p / 2) * alpha;
        t.bandwidth = D * quarter / (2 * p) / B;
        break;
      }
      case Algorithm::kRing:
        if (stage.shape == StageShape::kLine) {  // the middle cut carries floor(p/2) ceil(p/2) chunks of D/p
          t.latency = (p - 1) * alpha;
          t.bandwidth = std::floor(p / 2) * std::ceil(p / 2) * (D / p) / B;
        } else {  // one direction only: each link carries D (p-1)/2
          t.latency = (p - 1) * alpha;
          t.bandwidth = D * (p - 1) / 2 / B;
        }
        break;
      default: SPMDSIM_CHECK(false, "algorithm {} does not apply to all_to_all", AlgorithmName(algorithm));
    }
    return t;
  }
  if (algorithm == Algorithm::kNvls) {  // the switch reduces: each GPU sends D(1 + 1/p) and receives as much
    SPMDSIM_CHECK(phase == Phase::kAllReduce, "nvls is an all-reduce");
    t.latency = 2 * alpha;
    t.bandwidth = (1 + 1 / p) * D / B;
    t.bytes_sent = (1 + 1 / p) * D;
    return t;
  }
  // reduce_scatter or all_gather on D (the whole array of the stage).
  switch (algorithm) {
    case Algorithm::kRing:
      t.latency = (p - 1) * alpha;
      t.bandwidth = fraction * D / B;
      break;
    case Algorithm::kBidirectionalRing:
      t.latency = std::ceil((p - 1) / 2) * alpha;
      t.bandwidth = fraction * D / (2 * B);
      break;
    case Algorithm::kHalvingDoubling:
      t.latency = std::log2(p) * alpha;
      t.bandwidth = fraction * D / B;
      break;
    case Algorithm::kDirect:
      t.latency = alpha;
      t.bandwidth = fraction * D / B;
      break;
    default: SPMDSIM_CHECK(false, "algorithm {} does not apply here", AlgorithmName(algorithm));
  }
  t.bytes_sent = fraction * D;
  if (phase == Phase::kAllReduce) {
    t.latency *= 2;
    t.bandwidth *= 2;
    t.bytes_sent *= 2;
  }
  return t;
}

bool Applies(Algorithm algorithm, Phase phase, const SpanStage& stage, int num_stages) {
  if (stage.shape == StageShape::kOnChip) return algorithm == Algorithm::kDirect;
  switch (algorithm) {
    case Algorithm::kRing: return true;
    case Algorithm::kBidirectionalRing: return stage.shape == StageShape::kRing;
    case Algorithm::kHalvingDoubling:
      return stage.shape == StageShape::kSwitch && IsPowerOfTwo(stage.size) && phase != Phase::kAllToAll;
    case Algorithm::kDirect: return stage.shape == StageShape::kSwitch;
    case Algorithm::kNvls:
      return stage.link == LinkClass::kNvlink && stage.shape == StageShape::kSwitch &&
             phase == Phase::kAllReduce && num_stages == 1;
    case Algorithm::kTree:
    case Algorithm::kNvlsTree:
    case Algorithm::kAuto: return false;
  }
  return false;
}

constexpr Algorithm kStageAlgorithms[] = {Algorithm::kRing, Algorithm::kBidirectionalRing,
                                          Algorithm::kHalvingDoubling, Algorithm::kDirect, Algorithm::kNvls};

std::string ApplicableNames(Phase phase, const SpanStage& stage, int num_stages) {
  std::vector<std::string_view> names;
  for (Algorithm a : kStageAlgorithms) {
    if (Applies(a, phase, stage, num_stages)) names.push_back(AlgorithmName(a));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

// The options' figure for the link class, else its default: NVLink by GPU generation (DefaultNvlinkEfficiency).
double Efficiency(const CollectiveOptions& options, LinkClass link, const Topology& topology) {
  auto it = options.link_efficiency.find(link);
  if (it != options.link_efficiency.end()) return it->second;
  if (link == LinkClass::kNvlink) return DefaultNvlinkEfficiency(topology.gpu_generation());
  if (link == LinkClass::kIci && topology.tpu_generation()) return DefaultIciEfficiency(*topology.tpu_generation());
  return 1.0;
}

bool IsTorus(const SpanStage& stage) {
  return stage.shape == StageShape::kRing || stage.shape == StageShape::kLine;
}

}  // namespace

std::string_view CollectiveOpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kAllToAll: return "all_to_all";
    case CollectiveOp::kPermute: return "ppermute";
  }
  return "?";
}

CollectiveOp ParseCollectiveOp(std::string_view name) {
  static const std::pair<std::string_view, CollectiveOp> kNames[] = {
      {"psum", CollectiveOp::kAllReduce},         {"pmean", CollectiveOp::kAllReduce},
      {"pmax", CollectiveOp::kAllReduce},         {"pmin", CollectiveOp::kAllReduce},
      {"all_reduce", CollectiveOp::kAllReduce},   {"all_gather", CollectiveOp::kAllGather},
      {"psum_scatter", CollectiveOp::kReduceScatter}, {"reduce_scatter", CollectiveOp::kReduceScatter},
      {"all_to_all", CollectiveOp::kAllToAll},    {"alltoall", CollectiveOp::kAllToAll},
      {"ppermute", CollectiveOp::kPermute},       {"sendrecv", CollectiveOp::kPermute},
  };
  std::vector<std::string_view> valid;
  for (const auto& [n, op] : kNames) {
    if (n == name) return op;
    valid.push_back(n);
  }
  Throw(ErrorCode::kNotFound, "unknown collective '{}'; valid: {}", name, fmt::join(valid, ", "));
}

std::map<LinkClass, double> DefaultLinkEfficiency() {
  std::map<LinkClass, double> efficiency;
  efficiency[LinkClass::kInfiniband] = 0.96;
  return efficiency;
}

// TPU v5e's ICI as XLA's collectives use it (the JAX scaling book, sharding.md): an all_gather on a v5e 8x16
// slice reaches "about 95% of the peak claimed bandwidth (4.5e10)" per link one way from ~10 MB (the empirical
// bandwidth figure, scaling-book PR 82): 4.275e10 of the preset's 5e10 B/s. The book's profile of a 128 KiB
// all_gather over the 4-chip axis of a v5e {X: 8, Y: 4} (no wraparound, 3 hops) took ~8 us: 3 hops x 1 us and
// 3 x 32 KiB at 4.275e10 B/s (2.3 us) leave 2.7 us of fixed cost per collective.
constexpr double kV5eIciEfficiency = 0.95 * 4.5e10 / 5e10;
constexpr double kV5eCollectiveOverheadSeconds = 8e-6 - 3e-6 - 0.75 * 131072 / (0.95 * 4.5e10);

double DefaultIciEfficiency(Topology::TpuGeneration generation) {
  // Measured on v5e only (above); other generations keep the link rate (the book's TPU v2 reduce-scatter profile
  // ran at 0.97 of its 1.2e11 B/s figure: profiling.md).
  return generation == Topology::TpuGeneration::kV5e ? kV5eIciEfficiency : 1.0;
}

double TpuCollectiveOverheadSeconds(Topology::TpuGeneration generation) {
  return generation == Topology::TpuGeneration::kV5e ? kV5eCollectiveOverheadSeconds : 0.0;
}

double DefaultNvlinkEfficiency(GpuGeneration generation) {
  // Ampere (NVLink 3, 12 links x 25 GB/s): 220 GB/s of all-reduce busbw on 8x A100-SXM4-80GB once P2P is on
  // (nccl-tests issue 228), 72 of 100 GB/s over a 4-link A100 pair (nccl-tests issue 331): ~0.73. Hopper and
  // later: the NCCL maintainers' ~20% protocol overhead (nccl-tests issue 212: 370 of 450 GB/s).
  return generation == GpuGeneration::kAmpere ? 220.0 / 300.0 : 0.8;
}

double BusBandwidthFactor(CollectiveOp op, int n) {
  switch (op) {
    case CollectiveOp::kAllReduce: return 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll: return static_cast<double>(n - 1) / n;
    case CollectiveOp::kPermute: return 1.0;
  }
  return 1.0;
}

std::string_view AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kBidirectionalRing: return "bidirectional_ring";
    case Algorithm::kHalvingDoubling: return "halving_doubling";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kNvls: return "nvls";
    case Algorithm::kTree: return "tree";
    case Algorithm::kNvlsTree: return "nvls_tree";
  }
  return "?";
}

Algorithm ParseAlgorithm(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "nvlstree") lower = "nvls_tree";  // NCCL_ALGO's spelling
  for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kBidirectionalRing,
                      Algorithm::kHalvingDoubling, Algorithm::kDirect, Algorithm::kNvls, Algorithm::kTree,
                      Algorithm::kNvlsTree}) {
    if (AlgorithmName(a) == lower) return a;
  }
  Throw(ErrorCode::kNotFound,
        "unknown collective algorithm '{}'; valid: auto, ring, tree, nvls, nvls_tree, bidirectional_ring, "
        "halving_doubling, direct",
        name);
}

std::string_view CompositionName(Composition composition) {
  switch (composition) {
    case Composition::kAuto: return "auto";
    case Composition::kSequential: return "sequential";
    case Composition::kConcurrent: return "concurrent";
  }
  return "?";
}

Composition ParseComposition(std::string_view name) {
  for (Composition c : {Composition::kAuto, Composition::kSequential, Composition::kConcurrent}) {
    if (CompositionName(c) == name) return c;
  }
  Throw(ErrorCode::kNotFound, "unknown composition '{}'; valid: auto, sequential, concurrent", name);
}

std::string CollectiveCost::ToString() const {
  std::string text = fmt::format("{} of {} B over {} devices: {:.4g} s ({}{}), algbw {:.4g} GB/s, busbw {:.4g} GB/s",
                                 CollectiveOpName(op), bytes, group_size, seconds, algorithm,
                                 protocol.empty() ? "" : "/" + protocol, algbw_Bps / 1e9, busbw_Bps / 1e9);
  for (const StageCost& s : stages) {
    text += fmt::format("\n  {} [{}] buffer {:.4g} B, sent {:.4g} B, {:.4g} s (alpha {:.3g} s, bytes {:.3g} s)",
                        s.stage.ToString(), s.algorithm, s.buffer_bytes, s.bytes_sent, s.seconds,
                        s.latency_seconds, s.bandwidth_seconds);
    if (!s.mesh_axes.empty()) text += fmt::format(" axes ({})", fmt::join(s.mesh_axes, ", "));
  }
  return text;
}

CollectiveModel::CollectiveModel(Mesh mesh, CollectiveOptions options)
    : mesh_(std::move(mesh)), options_(std::move(options)) {
  if (mesh_.topology() == nullptr) {
    Throw(ErrorCode::kFailedPrecondition,
          "the cost model needs a topology: {} was built without one; pass a Topology (e.g. "
          "Topology::Parse(\"tpu-v4:2x2x4\")) to the Mesh constructor",
          mesh_.ToString());
  }
  if (options_.protocol != Protocol::kAuto && mesh_.topology()->platform() != Platform::kGpu) {
    Throw(ErrorCode::kInvalidArgument,
          "protocol '{}' applies to GPU (NCCL) collectives only; {} has no protocols; valid here: auto",
          ProtocolName(options_.protocol), mesh_.topology()->ToString());
  }
  for (const auto& [link, efficiency] : options_.link_efficiency) {
    if (!(efficiency > 0 && efficiency <= 1)) {
      Throw(ErrorCode::kInvalidArgument, "link efficiency for {} must be in (0, 1], got {}", LinkClassName(link),
            efficiency);
    }
  }
}

std::vector<std::vector<std::string>> CollectiveModel::AxesOfStages(const GroupSpan& span,
                                                                    std::span<const int64_t> positions,
                                                                    std::span<const std::string> axes) const {
  std::vector<std::vector<std::string>> result(span.stages.size());
  if (axes.empty() || span.stages.empty()) return result;
  if (!span.regular) {
    for (auto& entry : result) entry.assign(axes.begin(), axes.end());
    return result;
  }
  const std::vector<int64_t> origin = mesh_.CoordsOfPosition(positions[0]);
  for (const std::string& axis : axes) {
    const int index = mesh_.AxisIndex(axis);
    std::vector<int64_t> members;
    std::vector<int64_t> coords = origin;
    for (int64_t k = 0; k < mesh_.shape()[index]; ++k) {
      coords[index] = k;
      members.push_back(mesh_.PositionOf(coords));
    }
    GroupSpan alone = SpanOfGroup(mesh_, members);
    for (const SpanStage& s : alone.stages) {
      for (size_t i = 0; i < span.stages.size(); ++i) {
        if (span.stages[i].dimension == s.dimension || !alone.regular) result[i].push_back(axis);
      }
    }
  }
  for (auto& entry : result) {
    if (entry.empty()) entry.assign(axes.begin(), axes.end());  // varied only by the axes together
    std::vector<std::string> unique;
    for (const std::string& a : entry) {
      if (std::find(unique.begin(), unique.end(), a) == unique.end()) unique.push_back(a);
    }
    entry = std::move(unique);
  }
  return result;
}

namespace {

// The (source, destination) routes of a ppermute within a group of n: `pairs` validated, or a shift by one
// (nccl-tests sendrecv) when empty. Other ops take no pairs (and get none).
std::vector<std::pair<int, int>> PermuteRoutes(CollectiveOp op, std::span<const std::pair<int, int>> pairs, int n) {
  std::vector<std::pair<int, int>> routes(pairs.begin(), pairs.end());
  if (op == CollectiveOp::kPermute) {
    std::set<int> sources, destinations;
    for (const auto& [src, dst] : routes) {
      if (src < 0 || src >= n || dst < 0 || dst >= n) {
        Throw(ErrorCode::kInvalidArgument, "ppermute pair ({}, {}) is outside the group of {}: indices are 0..{}",
              src, dst, n, n - 1);
      }
      if (!sources.insert(src).second) {
        ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                  "ppermute sources and destinations must be unique, got source {} twice", src);
      }
      if (!destinations.insert(dst).second) {
        ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                  "ppermute sources and destinations must be unique, got destination {} twice", dst);
      }
    }
    if (pairs.empty()) {
      for (int i = 0; i < n; ++i) routes.emplace_back(i, (i + 1) % n);
    }
  } else if (!pairs.empty()) {
    Throw(ErrorCode::kInvalidArgument, "pairs apply to ppermute only, not {}", CollectiveOpName(op));
  }
  return routes;
}

// ppermute: dimension-order routing over the stages; a ring stage goes the shorter way round. Load per directed
// link (torus) or per device port (switch); time = busiest link / B + longest path's latency.
void CostPermute(const GroupSpan& span, double bytes, const std::vector<std::pair<int, int>>& routes,
                 const std::vector<double>& B, CollectiveCost* cost) {
  const int k = static_cast<int>(span.stages.size());
  std::map<std::vector<int>, double> load;  // {stage, kind, position..., direction}
  std::vector<double> stage_bw(k, 0), stage_latency(k, 0);
  std::vector<bool> crossed(k, false);
  double worst_latency = 0;
  for (const auto& [src, dst] : routes) {
    if (src == dst) continue;
    std::vector<int> cur = span.member_coords[src];
    const std::vector<int>& target = span.member_coords[dst];
    double path_latency = 0;
    for (int s = 0; s < k; ++s) {
      if (cur[s] == target[s]) continue;
      crossed[s] = true;
      const SpanStage& stage = span.stages[s];
      const int p = stage.size;
      int hops = 1;
      if (IsTorus(stage)) {
        int forward = ((target[s] - cur[s]) % p + p) % p;
        int direction = 1;
        hops = forward;
        if (stage.shape == StageShape::kRing && p - forward < forward) {
          direction = -1;
          hops = p - forward;
        } else if (stage.shape == StageShape::kLine && target[s] < cur[s]) {
          direction = -1;
          hops = cur[s] - target[s];
        }
        int at = cur[s];
        for (int h = 0; h < hops; ++h) {
          std::vector<int> key = cur;
          key[s] = at;
          key.insert(key.begin(), {s, direction});
          load[key] += bytes;
          at = ((at + direction) % p + p) % p;
        }
      } else {  // switch / on-chip: the sender's egress and the receiver's ingress
        std::vector<int> out = cur;
        out.insert(out.begin(), {s, 2});
        load[out] += bytes;
        std::vector<int> in = cur;
        in[s] = target[s];
        in.insert(in.begin(), {s, 3});
        load[in] += bytes;
      }
      stage_latency[s] = std::max(stage_latency[s], hops * stage.latency_s);
      path_latency += hops * stage.latency_s;
      cur[s] = target[s];
    }
    worst_latency = std::max(worst_latency, path_latency);
  }
  double worst_bw = 0;
  for (const auto& [key, bytes_on_link] : load) {
    const int s = key[0];
    stage_bw[s] = std::max(stage_bw[s], bytes_on_link / B[s]);
    worst_bw = std::max(worst_bw, bytes_on_link / B[s]);
  }
  cost->seconds = worst_bw + worst_latency;
  cost->algorithm = "direct";
  double busy = 0;
  for (int s = 0; s < k; ++s) busy += stage_bw[s] + stage_latency[s];
  for (int s = 0; s < k; ++s) {
    StageCost& sc = cost->stages[s];
    sc.algorithm = "direct";
    sc.buffer_bytes = bytes;
    sc.bytes_sent = crossed[s] ? bytes : 0;
    sc.latency_seconds = stage_latency[s];
    sc.bandwidth_seconds = stage_bw[s];
    sc.seconds = busy > 0 ? cost->seconds * (stage_bw[s] + stage_latency[s]) / busy : 0;
  }
}

// Each stage's algorithm and the buffer it works on when the stages run one after another.
struct StagePlan {
  std::vector<Algorithm> algorithm;
  std::vector<double> buffer;  // bytes: the stage's input when run sequentially (shrinks after a reduce-scatter)
};

// Per stage: the forced algorithm, or the fastest applicable one on the sequential buffer.
StagePlan ChooseAlgorithms(CollectiveOp op, Phase phase, const GroupSpan& span, const std::vector<double>& B,
                           double bytes, const CollectiveOptions& options) {
  const int k = static_cast<int>(span.stages.size());
  StagePlan plan{std::vector<Algorithm>(k), std::vector<double>(k)};
  double buffer = bytes;
  for (int s = 0; s < k; ++s) {
    plan.buffer[s] = buffer;
    const SpanStage& stage = span.stages[s];
    if (options.algorithm != Algorithm::kAuto && stage.shape != StageShape::kOnChip) {
      if (!Applies(options.algorithm, phase, stage, k)) {
        Throw(ErrorCode::kInvalidArgument,
              "algorithm '{}' does not apply to {} on stage '{}'{}; applicable: {}",
              AlgorithmName(options.algorithm), CollectiveOpName(op), stage.ToString(),
              options.algorithm == Algorithm::kNvls && k > 1 ? " (nvls needs a group inside one host)" : "",
              ApplicableNames(phase, stage, k));
      }
      plan.algorithm[s] = options.algorithm;
    } else {
      double best = std::numeric_limits<double>::infinity();
      for (Algorithm a : kStageAlgorithms) {
        if (!Applies(a, phase, stage, k)) continue;
        if (a == Algorithm::kNvls && !options.allow_nvls) continue;
        double t = TimeOfStage(phase, a, stage, B[s], buffer).total();
        if (t < best) {
          best = t;
          plan.algorithm[s] = a;
        }
      }
    }
    if (phase != Phase::kAllToAll) buffer /= stage.size;
  }
  return plan;
}

// The contiguous run of torus stages [first, last] that a concurrent composition stripes over.
struct TorusBlock {
  int first = -1, last = -1;
  bool applies = false;  // at least two torus stages, all contiguous
  int size() const { return first < 0 ? 0 : last - first + 1; }
  bool contains(int s) const { return s >= first && s <= last; }
};

TorusBlock FindTorusBlock(const GroupSpan& span) {
  TorusBlock block;
  for (int s = 0; s < static_cast<int>(span.stages.size()); ++s) {
    if (IsTorus(span.stages[s])) {
      if (block.first < 0) block.first = s;
      block.last = s;
    }
  }
  block.applies = block.size() >= 2;
  for (int s = block.first; block.applies && s <= block.last; ++s) block.applies = IsTorus(span.stages[s]);
  return block;
}

// Concurrent composition: the block's stages split into stripes visiting them in rotated orders; `con` starts as
// the sequential times and gets the block's stages replaced. Returns the total time.
double ConcurrentTimes(Phase phase, const GroupSpan& span, const StagePlan& plan, const std::vector<double>& B,
                       const TorusBlock& block, std::vector<StageTime>* con) {
  const int k = static_cast<int>(span.stages.size());
  const int n = block.size();
  const double block_in = plan.buffer[block.first];
  for (int s = block.first; s <= block.last; ++s) (*con)[s] = StageTime{};
  for (int r = 0; r < n; ++r) {
    double stripe = block_in / n;
    for (int q = 0; q < n; ++q) {
      const int s = block.first + (r + q) % n;
      StageTime t = TimeOfStage(phase, plan.algorithm[s], span.stages[s], B[s], stripe);
      (*con)[s].bandwidth += t.bandwidth;
      (*con)[s].bytes_sent += t.bytes_sent;
      if (r == 0) (*con)[s].latency = t.latency;  // latency paid once per stage (stripes pipeline)
      if (phase != Phase::kAllToAll) stripe /= span.stages[s].size;
    }
  }
  double block_bw = 0, block_latency = 0;
  for (int s = block.first; s <= block.last; ++s) {
    block_bw = std::max(block_bw, (*con)[s].bandwidth);
    block_latency += (*con)[s].latency;
  }
  double total = block_bw + block_latency;
  for (int s = 0; s < k; ++s) {
    if (!block.contains(s)) total += (*con)[s].total();
  }
  return total;
}

// "ring" for one stage; "torus[sequential](ring, ring)" or "hierarchical[sequential](...)" (GPU clusters) for
// several.
std::string AlgorithmLabel(const GroupSpan& span, const std::vector<std::string>& names, bool concurrent) {
  if (names.size() == 1) return names[0];
  bool gpu = span.stages.back().link == LinkClass::kInfiniband || span.stages.back().link == LinkClass::kDcn;
  return fmt::format("{}[{}]({})", gpu && !concurrent ? "hierarchical" : "torus",
                     concurrent ? "concurrent" : "sequential", fmt::join(names, ", "));
}

// all-reduce, all_gather, reduce_scatter, all_to_all: one algorithm per stage, stages composed sequentially or
// (torus stages) concurrently, whichever is faster unless the options force one.
void CostPhased(CollectiveOp op, const GroupSpan& span, double bytes, const std::vector<double>& B,
                const CollectiveOptions& options, CollectiveCost* cost) {
  const int k = static_cast<int>(span.stages.size());
  const Phase phase = PhaseOf(op);
  const StagePlan plan = ChooseAlgorithms(op, phase, span, B, bytes, options);

  // Sequential: stage s on its shrinking buffer.
  std::vector<StageTime> seq(k);
  double seq_total = 0;
  for (int s = 0; s < k; ++s) {
    seq[s] = TimeOfStage(phase, plan.algorithm[s], span.stages[s], B[s], plan.buffer[s]);
    seq_total += seq[s].total();
  }

  const TorusBlock block = FindTorusBlock(span);
  if (options.composition == Composition::kConcurrent && !block.applies) {
    Throw(ErrorCode::kInvalidArgument,
          "composition 'concurrent' needs a group spanning at least two ICI torus dimensions; this group "
          "spans {}; use 'sequential' or 'auto'",
          span.ToString());
  }
  std::vector<StageTime> con = seq;
  double con_total = std::numeric_limits<double>::infinity();
  if (block.applies) con_total = ConcurrentTimes(phase, span, plan, B, block, &con);
  bool use_concurrent = block.applies && options.composition != Composition::kSequential &&
                        (options.composition == Composition::kConcurrent || con_total < seq_total);
  const std::vector<StageTime>& chosen = use_concurrent ? con : seq;
  cost->seconds = use_concurrent ? con_total : seq_total;

  std::vector<std::string> names;
  for (int s = 0; s < k; ++s) names.emplace_back(AlgorithmName(plan.algorithm[s]));
  cost->algorithm = AlgorithmLabel(span, names, use_concurrent);
  // Concurrent torus stages overlap: their share of the block time is in proportion to their busy time.
  double block_busy = 0, block_time = 0;
  if (use_concurrent) {
    double block_bw = 0;
    for (int s = block.first; s <= block.last; ++s) {
      block_busy += chosen[s].total();
      block_bw = std::max(block_bw, chosen[s].bandwidth);
      block_time += chosen[s].latency;
    }
    block_time += block_bw;
  }
  for (int s = 0; s < k; ++s) {
    StageCost& sc = cost->stages[s];
    sc.algorithm = names[s];
    sc.buffer_bytes = plan.buffer[s];
    sc.bytes_sent = chosen[s].bytes_sent;
    sc.latency_seconds = chosen[s].latency;
    sc.bandwidth_seconds = chosen[s].bandwidth;
    const bool in_block = use_concurrent && block.contains(s);
    sc.seconds = in_block ? (block_busy > 0 ? block_time * chosen[s].total() / block_busy : 0) : chosen[s].total();
  }
}

// Bytes and seconds per link class and per mesh axis, and the bandwidths, from the stage costs.
void AddBreakdowns(double bytes, CollectiveCost* cost) {
  for (const StageCost& sc : cost->stages) {
    if (sc.stage.shape != StageShape::kOnChip) cost->bytes_sent[sc.stage.link] += sc.bytes_sent;
    cost->seconds_by_link[sc.stage.link] += sc.seconds;
    for (const std::string& axis : sc.mesh_axes) {
      cost->seconds_by_axis[axis] += sc.seconds / static_cast<double>(sc.mesh_axes.size());
    }
  }
  if (cost->seconds > 0) {
    cost->algbw_Bps = bytes / cost->seconds;
    cost->busbw_Bps = cost->algbw_Bps * cost->busbw_factor;
  }
}

bool IsNcclCollective(CollectiveOp op) {
  return op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllGather || op == CollectiveOp::kReduceScatter;
}

NcclCollective ToNccl(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllGather: return NcclCollective::kAllGather;
    case CollectiveOp::kReduceScatter: return NcclCollective::kReduceScatter;
    default: return NcclCollective::kAllReduce;
  }
}

// The NCCL view of a regular GPU group: nodes and GPUs per node from its stages, bandwidths after efficiency.
NcclGroup NcclGroupOf(const GroupSpan& span, const Topology& topology, const std::vector<double>& B,
                      int nccl_version) {
  NcclGroup g;
  g.nccl_version = nccl_version;
  double per_gpu_network = 0;
  for (size_t s = 0; s < span.stages.size(); ++s) {
    const SpanStage& stage = span.stages[s];
    if (stage.link == LinkClass::kNvlink) {
      g.gpus_per_node = stage.size;
      g.nvlink_Bps = B[s];
    } else if (stage.link == LinkClass::kInfiniband) {
      g.nodes = stage.size;
      per_gpu_network = B[s];
    }
  }
  g.network_Bps = per_gpu_network * g.gpus_per_node;  // rail-optimised: each GPU of the group has its NIC share
  g.network_latency_s = topology.network().latency_s;
  g.generation = topology.gpu_generation();
  g.nvlink_sharp = topology.nvlink_sharp();
  g.amd_host = topology.amd_host();
  return g;
}

// The NCCL algorithm a forced Algorithm names, if any.
bool ToNcclAlgorithm(Algorithm a, NcclAlgorithm* out) {
  switch (a) {
    case Algorithm::kRing: *out = NcclAlgorithm::kRing; return true;
    case Algorithm::kTree: *out = NcclAlgorithm::kTree; return true;
    case Algorithm::kNvls: *out = NcclAlgorithm::kNvls; return true;
    case Algorithm::kNvlsTree: *out = NcclAlgorithm::kNvlsTree; return true;
    default: return false;
  }
}

// The candidates the options allow; throws naming what applies when a forced algorithm or protocol does not.
std::vector<NcclEstimate> AllowedEstimates(CollectiveOp op, const NcclGroup& g, double bytes,
                                           const CollectiveOptions& options) {
  std::vector<NcclEstimate> all = NcclEstimates(ToNccl(op), g, bytes);
  NcclAlgorithm forced{};
  if (options.algorithm != Algorithm::kAuto) {
    if (!ToNcclAlgorithm(options.algorithm, &forced) ||
        std::none_of(all.begin(), all.end(), [&](const NcclEstimate& e) { return e.algorithm == forced; })) {
      Throw(ErrorCode::kInvalidArgument,
            "algorithm '{}' does not apply to {} on {} node(s) x {} GPU(s){}; applicable: {}",
            AlgorithmName(options.algorithm), CollectiveOpName(op), g.nodes, g.gpus_per_node,
            g.nvlink_sharp ? "" : " without NVLink SHARP", NcclApplicableAlgorithms(ToNccl(op), g));
    }
  }
  std::vector<NcclEstimate> allowed;
  for (const NcclEstimate& e : all) {
    if (options.algorithm != Algorithm::kAuto && e.algorithm != forced) continue;
    if (options.algorithm == Algorithm::kAuto && !options.allow_nvls &&
        (e.algorithm == NcclAlgorithm::kNvls || e.algorithm == NcclAlgorithm::kNvlsTree))
      continue;
    if (options.protocol != Protocol::kAuto && e.protocol != options.protocol) continue;
    allowed.push_back(e);
  }
  if (allowed.empty()) {
    std::vector<std::string_view> protocols;
    for (const NcclEstimate& e : all) {
      if (options.algorithm != Algorithm::kAuto && e.algorithm != forced) continue;
      if (std::find(protocols.begin(), protocols.end(), ProtocolName(e.protocol)) == protocols.end())
        protocols.push_back(ProtocolName(e.protocol));
    }
    Throw(ErrorCode::kInvalidArgument, "protocol '{}' does not apply to {} with algorithm '{}'; applicable: {}",
          ProtocolName(options.protocol), CollectiveOpName(op), AlgorithmName(options.algorithm),
          fmt::join(protocols, ", "));
  }
  return allowed;
}

// Spreads a whole-group time over the stages in proportion to each stage's busy time (bytes / bandwidth).
void SpreadOverStages(double latency, double bandwidth, const std::vector<double>& stage_bytes,
                      const std::vector<double>& B, const std::string& name, double buffer, CollectiveCost* cost) {
  const size_t k = cost->stages.size();
  double busy = 0;
  for (size_t s = 0; s < k; ++s) busy += stage_bytes[s] / B[s];
  for (size_t s = 0; s < k; ++s) {
    StageCost& sc = cost->stages[s];
    const double share = busy > 0 ? stage_bytes[s] / B[s] / busy : 1.0 / k;
    sc.algorithm = name;
    sc.buffer_bytes = buffer;
    sc.bytes_sent = stage_bytes[s];
    sc.latency_seconds = latency * share;
    sc.bandwidth_seconds = bandwidth * share;
    sc.seconds = (latency + bandwidth) * share;
  }
}

// GPU all-reduce / all_gather / reduce_scatter: NCCL's algorithm x protocol with the least predicted time.
void CostNccl(CollectiveOp op, const GroupSpan& span, double bytes, const NcclGroup& g,
              const std::vector<double>& B, const CollectiveOptions& options, CollectiveCost* cost) {
  const std::vector<NcclEstimate> allowed = AllowedEstimates(op, g, bytes, options);
  const NcclEstimate* best = &allowed[0];
  for (const NcclEstimate& e : allowed) {
    if (e.seconds() < best->seconds()) best = &e;
  }
  cost->seconds = best->seconds();
  cost->algorithm = std::string(NcclAlgorithmName(best->algorithm));
  cost->protocol = std::string(ProtocolName(best->protocol));
  std::vector<double> stage_bytes;
  for (const SpanStage& stage : span.stages)
    stage_bytes.push_back(stage.link == LinkClass::kNvlink ? best->nvlink_bytes : best->network_bytes);
  SpreadOverStages(best->latency_seconds, best->bandwidth_seconds, stage_bytes, B, cost->algorithm, bytes, cost);
}

// GPU all_to_all across nodes: every GPU sends (g-1)/n S over NVLink and (n-g)/n S through its own NIC at
// once (rail-optimised with PXN: no NIC aggregation beyond the GPU's own; nccl-tests issue 130); one message
// per peer: (g-1) NVLink latencies + (n-g) network latencies.
void CostGpuAllToAll(const GroupSpan& span, double bytes, const NcclGroup& g, const std::vector<double>& B,
                     CollectiveCost* cost) {
  const double n = g.ranks();
  const double per_gpu_network = g.network_Bps / g.gpus_per_node;
  const double nvlink_bytes = (g.gpus_per_node - 1) / n * bytes;
  const double network_bytes = (n - g.gpus_per_node) / n * bytes;
  double latency = 0;
  for (const SpanStage& stage : span.stages) {
    latency += stage.link == LinkClass::kNvlink ? (g.gpus_per_node - 1) * stage.latency_s
                                                : (n - g.gpus_per_node) * stage.latency_s;
  }
  double bandwidth = network_bytes / per_gpu_network;
  if (g.gpus_per_node > 1) bandwidth = std::max(bandwidth, nvlink_bytes / g.nvlink_Bps);
  cost->seconds = latency + bandwidth;
  cost->algorithm = "pairwise";
  std::vector<double> stage_bytes;
  for (const SpanStage& stage : span.stages)
    stage_bytes.push_back(stage.link == LinkClass::kNvlink ? nvlink_bytes : network_bytes);
  SpreadOverStages(latency, bandwidth, stage_bytes, B, "pairwise", bytes, cost);
}

}  // namespace

CollectiveCost CollectiveModel::CostOfSpan(CollectiveOp op, const GroupSpan& span, double bytes,
                                           std::span<const std::pair<int, int>> pairs,
                                           const std::vector<std::vector<std::string>>& stage_axes) const {
  CollectiveCost cost;
  cost.op = op;
  cost.bytes = bytes;
  cost.group_size = span.size();
  cost.busbw_factor = BusBandwidthFactor(op, cost.group_size);
  const int k = static_cast<int>(span.stages.size());
  const std::vector<std::pair<int, int>> routes = PermuteRoutes(op, pairs, span.size());
  if (k == 0 || bytes == 0) {
    cost.algorithm = "none";
    return cost;
  }
  std::vector<double> B(k);  // bytes/s: each stage's one-way bandwidth times its link's efficiency
  for (int s = 0; s < k; ++s)
    B[s] = span.stages[s].bandwidth_Bps * Efficiency(options_, span.stages[s].link, *mesh_.topology());
  cost.stages.resize(k);
  for (int s = 0; s < k; ++s) {
    cost.stages[s].stage = span.stages[s];
    cost.stages[s].mesh_axes = stage_axes[s];
  }
  const Topology& topology = *mesh_.topology();
  const bool gpu = topology.platform() == Platform::kGpu && span.regular;
  const bool across_nodes = span.stages.back().link == LinkClass::kInfiniband;
  if (op == CollectiveOp::kPermute) {
    CostPermute(span, bytes, routes, B, &cost);
  } else if (gpu && IsNcclCollective(op)) {
    CostNccl(op, span, bytes, NcclGroupOf(span, topology, B, options_.nccl_version), B, options_, &cost);
  } else if (gpu && op == CollectiveOp::kAllToAll && across_nodes && options_.algorithm == Algorithm::kAuto) {
    CostGpuAllToAll(span, bytes, NcclGroupOf(span, topology, B, options_.nccl_version), B, &cost);
  } else {
    CostPhased(op, span, bytes, B, options_, &cost);
    // A TPU collective's fixed cost (the scaling book's small all_gather profile), on its first stage.
    if (topology.tpu_generation() && op != CollectiveOp::kPermute) {
      const double overhead = TpuCollectiveOverheadSeconds(*topology.tpu_generation());
      cost.seconds += overhead;
      cost.stages.front().latency_seconds += overhead;
      cost.stages.front().seconds += overhead;
    }
  }
  if (topology.platform() == Platform::kGpu && cost.protocol.empty()) cost.protocol = "simple";
  AddBreakdowns(bytes, &cost);
  return cost;
}

CollectiveCost CollectiveModel::CostOfGroup(CollectiveOp op, std::span<const int64_t> positions, double bytes,
                                            std::span<const std::pair<int, int>> pairs,
                                            std::span<const std::string> axes) const {
  if (!(bytes >= 0) || !std::isfinite(bytes)) {
    Throw(ErrorCode::kInvalidArgument, "{}: message size must be a finite number of bytes >= 0, got {}",
          CollectiveOpName(op), bytes);
  }
  GroupSpan span = SpanOfGroup(mesh_, positions);
  return CostOfSpan(op, span, bytes, pairs, AxesOfStages(span, positions, axes));
}

std::vector<CollectiveCost> CollectiveModel::CostPerGroup(CollectiveOp op, std::span<const std::string> axes,
                                                          double bytes,
                                                          std::span<const std::pair<int, int>> pairs) const {
  mesh_.ValidateAxes(axes, fmt::format("{} axes", CollectiveOpName(op)));
  if (!(bytes >= 0) || !std::isfinite(bytes)) {
    Throw(ErrorCode::kInvalidArgument, "{}: message size must be a finite number of bytes >= 0, got {}",
          CollectiveOpName(op), bytes);
  }
  std::vector<CollectiveCost> costs;
  // Groups with the same physical span cost the same; the per-axis attribution is computed once per span.
  std::map<std::string, CollectiveCost> by_span;
  const std::vector<int> per_host = MeshDevicesPerHost(mesh_);  // once, not per group (link_model.h)
  for (const std::vector<int64_t>& group : mesh_.PositionGroups(axes)) {
    GroupSpan span = SpanOfGroup(mesh_, group, per_host);
    std::string signature = span.ToString();
    for (const auto& coords : span.member_coords) signature += fmt::format("|{}", fmt::join(coords, ","));
    auto it = by_span.find(signature);
    if (it == by_span.end()) {
      it = by_span.emplace(signature, CostOfSpan(op, span, bytes, pairs, AxesOfStages(span, group, axes))).first;
    }
    costs.push_back(it->second);
  }
  return costs;
}

CollectiveCost CollectiveModel::Cost(CollectiveOp op, std::span<const std::string> axes, double bytes,
                                     std::span<const std::pair<int, int>> pairs) const {
  std::vector<CollectiveCost> costs = CostPerGroup(op, axes, bytes, pairs);
  size_t worst = 0;
  for (size_t i = 1; i < costs.size(); ++i) {
    if (costs[i].seconds > costs[worst].seconds) worst = i;
  }
  return costs[worst];
}

}  // namespace spmdsim
