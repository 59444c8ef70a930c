#include "cost/link_model.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace spmdsim {
namespace {

// The distinct values one coordinate takes over the members, sorted, and each member's index among them.
struct CoordinateSet {
  std::vector<int> values;
  std::vector<int> member_index;
};

CoordinateSet Collect(const std::vector<int>& per_member) {
  CoordinateSet set;
  set.values = per_member;
  std::sort(set.values.begin(), set.values.end());
  set.values.erase(std::unique(set.values.begin(), set.values.end()), set.values.end());
  set.member_index.reserve(per_member.size());
  for (int v : per_member) {
    set.member_index.push_back(
        static_cast<int>(std::lower_bound(set.values.begin(), set.values.end(), v) - set.values.begin()));
  }
  return set;
}

// Common difference of the sorted values, or the largest gap when they are not evenly spaced.
int StrideOf(const std::vector<int>& values, bool* evenly_spaced) {
  int first = values[1] - values[0];
  int largest = first;
  *evenly_spaced = true;
  for (size_t i = 2; i < values.size(); ++i) {
    int gap = values[i] - values[i - 1];
    if (gap != first) *evenly_spaced = false;
    largest = std::max(largest, gap);
  }
  return largest;
}

const char* const kTorusDimNames[3] = {"x", "y", "z"};

}  // namespace

std::string_view StageShapeName(StageShape shape) {
  switch (shape) {
    case StageShape::kRing: return "ring";
    case StageShape::kLine: return "line";
    case StageShape::kSwitch: return "switch";
    case StageShape::kOnChip: return "on_chip";
  }
  return "?";
}

std::string SpanStage::ToString() const {
  std::string text = fmt::format("{} {}: {} of {}", LinkClassName(link), dimension, StageShapeName(shape), size);
  if (stride != 1) text += fmt::format(" (stride {})", stride);
  return text + fmt::format(", {:.4g} B/s, {:.3g} s", bandwidth_Bps, latency_s);
}

std::string GroupSpan::ToString() const {
  if (stages.empty()) return "single device";
  std::vector<std::string> parts;
  for (const SpanStage& stage : stages) parts.push_back(stage.ToString());
  std::string text = fmt::format("{}", fmt::join(parts, " + "));
  if (!regular) text += " [irregular group: coarse model]";
  return text;
}

std::string AxisLinks::ToString() const {
  std::vector<std::string_view> names;
  for (LinkClass link : links) names.push_back(LinkClassName(link));
  return fmt::format("{} ({}): [{}] {}{}", axis, size, fmt::join(names, ", "), span.ToString(),
                     uniform ? "" : " [groups differ; slowest shown]");
}

std::vector<int> MeshDevicesPerHost(const Mesh& mesh) {
  const Topology* topology = mesh.topology();
  std::vector<int> count(topology != nullptr ? static_cast<size_t>(topology->num_processes()) : 0, 0);
  if (topology == nullptr) return count;
  for (int id : mesh.device_ids()) ++count[topology->device(id).process_index];
  return count;
}

GroupSpan SpanOfGroup(const Mesh& mesh, std::span<const int64_t> positions) {
  // The hosts' load only matters to a group across slices: count it only then (it is the same for every group).
  return SpanOfGroup(mesh, positions, mesh.topology() != nullptr && mesh.topology()->num_slices() > 1
                                          ? MeshDevicesPerHost(mesh)
                                          : std::vector<int>{});
}

namespace {

// Throws unless the mesh has a topology and `positions` are distinct positions of it.
const Topology& CheckGroup(const Mesh& mesh, std::span<const int64_t> positions) {
  const Topology* topology = mesh.topology();
  if (topology == nullptr) {
    Throw(ErrorCode::kFailedPrecondition,
          "the cost model needs a topology: {} was built without one; pass a Topology (e.g. "
          "Topology::Parse(\"tpu-v4:2x2x4\")) to the Mesh constructor",
          mesh.ToString());
  }
  if (positions.empty()) Throw(ErrorCode::kInvalidArgument, "a collective group needs at least one member");
  std::set<int64_t> seen;
  for (int64_t p : positions) {
    if (p < 0 || p >= mesh.size()) {
      Throw(ErrorCode::kOutOfRange, "group member {} is not a position of {}; positions are 0..{}", p,
            mesh.ToString(), mesh.size() - 1);
    }
    if (!seen.insert(p).second) {
      Throw(ErrorCode::kInvalidArgument, "group lists position {} twice; members must be distinct", p);
    }
  }
  return *topology;
}

// A group's span as its stages are found, with every coordinate set a stage varies over (for the regularity
// check).
struct SpanBuilder {
  const Topology& topology;
  std::vector<const Device*> devices;  // the members'
  GroupSpan span;
  std::vector<CoordinateSet> sets;

  template <typename Getter>
  CoordinateSet Coordinate(Getter getter) const {
    std::vector<int> values;
    for (const Device* d : devices) values.push_back(getter(*d));
    return Collect(values);
  }
  void Add(SpanStage stage, const CoordinateSet& set) {
    sets.push_back(set);
    for (size_t i = 0; i < devices.size(); ++i) span.member_coords[i].push_back(set.member_index[i]);
    span.stages.push_back(std::move(stage));
  }
};

// TPU: the cores of a chip, then each torus dimension (a ring when it wraps around), then the slices over DCN.
void AddTpuStages(const std::vector<int>& devices_per_host, SpanBuilder& b) {
  const Topology& topology = b.topology;
  CoordinateSet cores = b.Coordinate([](const Device& d) { return d.core_on_chip; });
  CoordinateSet slices = b.Coordinate([](const Device& d) { return d.slice_index; });
  const LinkSpec& ici = topology.link(LinkClass::kIci);
  // Groups that hold only some cores of each chip share the chip's links with the other cores' groups.
  const double core_share = static_cast<double>(topology.cores_per_chip()) / static_cast<double>(cores.values.size());
  if (cores.values.size() > 1) {
    SpanStage stage;
    stage.link = LinkClass::kIci;
    stage.shape = StageShape::kOnChip;
    stage.dimension = "cores";
    stage.size = static_cast<int>(cores.values.size());
    stage.bandwidth_Bps = topology.memory_bandwidth_Bps();
    stage.latency_s = 0;
    b.Add(stage, cores);
  }
  for (int d = 0; d < 3; ++d) {
    CoordinateSet set = b.Coordinate([d](const Device& dev) { return dev.coords[d]; });
    if (set.values.size() < 2) continue;
    bool evenly_spaced = true;
    int stride = StrideOf(set.values, &evenly_spaced);
    int m = static_cast<int>(set.values.size());
    bool ring = evenly_spaced && topology.wraparound()[d] && m * stride == topology.chips_per_dim()[d];
    SpanStage stage;
    stage.link = LinkClass::kIci;
    stage.shape = ring ? StageShape::kRing : StageShape::kLine;
    stage.dimension = kTorusDimNames[d];
    stage.size = m;
    stage.stride = stride;
    stage.bandwidth_Bps = ici.bandwidth_Bps / stride / core_share;
    stage.latency_s = ici.latency_s * stride;
    b.Add(stage, set);
  }
  if (slices.values.size() > 1) {
    const LinkSpec& dcn = topology.link(LinkClass::kDcn);
    // The host NIC is shared by the mesh's devices on the busiest host of the group.
    SPMDSIM_CHECK(devices_per_host.size() == static_cast<size_t>(topology.num_processes()),
                  "devices per host: {} hosts counted, the topology has {}", devices_per_host.size(),
                  topology.num_processes());
    int sharing = 1;
    for (const Device* d : b.devices) sharing = std::max(sharing, devices_per_host[d->process_index]);
    SpanStage stage;
    stage.link = LinkClass::kDcn;
    stage.shape = StageShape::kSwitch;
    stage.dimension = "slices";
    stage.size = static_cast<int>(slices.values.size());
    stage.bandwidth_Bps = dcn.bandwidth_Bps / sharing;
    stage.latency_s = dcn.latency_s;
    b.Add(stage, slices);
  }
}

// One stage over link class `link` with that link's bandwidth and latency, `size` members along `set`.
void AddLinkStage(SpanBuilder& b, LinkClass link, const char* dimension, int size, const CoordinateSet& set) {
  const LinkSpec& spec = b.topology.link(link);
  SpanStage stage;
  stage.link = link;
  stage.dimension = dimension;
  stage.size = size;
  stage.bandwidth_Bps = spec.bandwidth_Bps;
  stage.latency_s = spec.latency_s;
  b.Add(stage, set);
}

// GPU: the devices of a host over NVLink, then the hosts over InfiniBand.
void AddGpuStages(SpanBuilder& b) {
  CoordinateSet local = b.Coordinate([](const Device& d) { return d.coords[0]; });
  CoordinateSet hosts = b.Coordinate([](const Device& d) { return d.process_index; });
  if (local.values.size() > 1) {
    AddLinkStage(b, LinkClass::kNvlink, "local", static_cast<int>(local.values.size()), local);
  }
  if (hosts.values.size() > 1) {
    AddLinkStage(b, LinkClass::kInfiniband, "hosts", static_cast<int>(hosts.values.size()), hosts);
  }
}

// CPU: one stage over host memory.
void AddCpuStage(SpanBuilder& b) {
  CoordinateSet ids = b.Coordinate([](const Device& d) { return d.id; });
  AddLinkStage(b, LinkClass::kHostMemory, "devices", static_cast<int>(b.devices.size()), ids);
}

// A group that is not a full product of per-dimension coordinates becomes one line over all members on the
// slowest link class it crosses, at the bandwidth of that class's narrowest stage.
void CoarsenIfIrregular(const std::vector<CoordinateSet>& sets, GroupSpan& span) {
  const int n = static_cast<int>(span.member_coords.size());
  int64_t product = 1;
  for (const CoordinateSet& set : sets) product *= static_cast<int64_t>(set.values.size());
  if (product == n) return;
  SpanStage coarse = span.stages.back();
  for (const SpanStage& stage : span.stages) {
    if (stage.link == coarse.link) coarse.bandwidth_Bps = std::min(coarse.bandwidth_Bps, stage.bandwidth_Bps);
  }
  if (coarse.shape != StageShape::kSwitch) coarse.shape = StageShape::kLine;
  coarse.dimension = "irregular";
  coarse.size = n;
  span.stages = {coarse};
  for (int i = 0; i < n; ++i) span.member_coords[i] = {i};
  span.regular = false;
}

}  // namespace

GroupSpan SpanOfGroup(const Mesh& mesh, std::span<const int64_t> positions, const std::vector<int>& devices_per_host) {
  const Topology& topology = CheckGroup(mesh, positions);
  SpanBuilder b{topology, {}, {}, {}};
  b.span.member_coords.assign(positions.size(), {});
  if (positions.size() == 1) return b.span;
  for (int64_t p : positions) b.devices.push_back(&topology.device(mesh.DeviceAt(p)));
  switch (topology.platform()) {
    case Platform::kTpu: AddTpuStages(devices_per_host, b); break;
    case Platform::kGpu: AddGpuStages(b); break;
    case Platform::kCpu: AddCpuStage(b); break;
  }
  CoarsenIfIrregular(b.sets, b.span);
  return b.span;
}

namespace {

// Bandwidth-time proxy used to pick the slowest group of an axis: sum over stages of (p-1)/p / bandwidth.
double SlownessOf(const GroupSpan& span) {
  double total = 0;
  for (const SpanStage& stage : span.stages) {
    total += (stage.size - 1.0) / stage.size / stage.bandwidth_Bps + stage.latency_s * 1e-3;
  }
  return total;
}

}  // namespace

std::vector<AxisLinks> DescribeAxes(const Mesh& mesh) {
  std::vector<AxisLinks> result;
  const std::vector<int> per_host = MeshDevicesPerHost(mesh);
  for (const std::string& axis : mesh.axis_names()) {
    AxisLinks entry;
    entry.axis = axis;
    entry.size = mesh.AxisSize(axis);
    std::vector<std::string> axes = {axis};
    bool first = true;
    std::string first_text;
    double worst = -1;
    for (const std::vector<int64_t>& group : mesh.PositionGroups(axes)) {
      GroupSpan span = SpanOfGroup(mesh, group, per_host);
      std::string text = span.ToString();
      if (first) {
        first_text = text;
        first = false;
      } else if (text != first_text) {
        entry.uniform = false;
      }
      double slowness = SlownessOf(span);
      if (slowness > worst) {
        worst = slowness;
        entry.span = std::move(span);
      }
    }
    for (const SpanStage& stage : entry.span.stages) {
      if (std::find(entry.links.begin(), entry.links.end(), stage.link) == entry.links.end()) {
        entry.links.push_back(stage.link);
      }
    }
    result.push_back(std::move(entry));
  }
  return result;
}

}  // namespace spmdsim
