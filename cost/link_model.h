// Which physical links a collective's group spans: the logical (mesh axis) vs physical (torus dimension,
// host, slice) topology of each group.
//
// A group (the members of one collective call, as mesh positions) is broken into STAGES, one per physical
// dimension the group varies over, ordered fastest link first:
//   TPU: on-chip cores (v2/v3), ICI torus x, y, z, then DCN between slices;
//   GPU: NVLink inside a host (switched), then InfiniBand between hosts (one NIC per GPU);
//   CPU: host memory.
// A torus stage is a RING when the group covers the whole dimension and the topology wraps it around, and a
// LINE otherwise (the scaling book: an axis without wraparound is ~2x slower for ring collectives).
// Members are used as a SET: a collective may walk its ring in physical order whatever the logical order.
//
// Example: tpu-v4:4x4x4 (wraparound on every dimension, 1 us and 4.5e10 B/s one-way per link), mesh
// {data: 4, model: 16} with model = (x, y) and data = z. SpanOfGroup of the model group holding device 0:
//   stages = [ici x: ring of 4, 4.5e10 B/s, 1 us], [ici y: ring of 4, 4.5e10 B/s, 1 us]
// and DescribeAxes reports  model -> ici (x ring 4, y ring 4),  data -> ici (z ring 4).
//
// Bandwidth sharing (all groups of one collective run at once, so links used by several groups are shared):
//  - a torus stage whose members sit s chips apart (stride s) shares each link with the s-1 interleaved
//    groups: bandwidth / s, latency s * alpha;
//  - v2/v3 chips hold 2 cores: when the group holds one core per chip, the other core's group uses the same
//    chip links: bandwidth / 2. A group holding both cores exchanges them on the chip (an on-chip stage at
//    the device's HBM bandwidth, no ICI bytes);
//  - DCN: the host's NIC bandwidth is shared by the mesh's devices on that host;
//  - NVLink (NVSwitch) and InfiniBand (one NIC per GPU): no sharing, every GPU at its full bandwidth.
#ifndef SPMDSIM_COST_LINK_MODEL_H_
#define SPMDSIM_COST_LINK_MODEL_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mesh/mesh.h"
#include "mesh/topology.h"

namespace spmdsim {

// How the members of one stage are wired.
enum class StageShape {
  kRing,    // torus dimension with wraparound, covered whole: both directions usable (bidirectional ring)
  kLine,    // torus dimension without wraparound (or only part of it): a ring embedded on a line
  kSwitch,  // switched fabric (NVSwitch, InfiniBand, DCN, host memory): any pair at full per-device bandwidth
  kOnChip,  // the cores of one TPU chip (v2/v3)
};
std::string_view StageShapeName(StageShape shape);  // "ring", "line", "switch", "on_chip"

// One physical dimension a group varies over.
struct SpanStage {
  LinkClass link = LinkClass::kIci;
  StageShape shape = StageShape::kSwitch;
  std::string dimension;     // "x", "y", "z" (ICI), "cores", "slices", "local" (NVLink), "hosts", "devices"
  int size = 1;              // members along this dimension
  int stride = 1;            // physical links per logical hop (torus stages), else 1
  double bandwidth_Bps = 0;  // ONE-WAY bytes/s per device per direction, after the sharing rules above
  double latency_s = 0;      // alpha per step (per logical hop on a torus)
  std::string ToString() const;  // "ici x: ring of 4 (stride 1), 4.5e+10 B/s, 1e-06 s"
};

// The physical span of one group.
struct GroupSpan {
  std::vector<SpanStage> stages;  // fastest link first; empty for a single-member group
  // member_coords[i][s]: index of member i (in the group's order) along stage s, in 0..stages[s].size-1.
  std::vector<std::vector<int>> member_coords;
  // False when the members are not a full product of their per-dimension coordinates (a coarse fallback
  // model is used then: one line stage over all members at one link's bandwidth; see docs/cost-model.md).
  bool regular = true;
  int size() const { return static_cast<int>(member_coords.size()); }
  std::string ToString() const;  // stages joined by " + ", or "single device"
};

// Physical span of the group `positions` (mesh positions) of `mesh`.
// Throws Error(kFailedPrecondition) when the mesh has no topology, Error(kOutOfRange) for a position outside
// the mesh, Error(kInvalidArgument) for an empty group or a repeated position, and Error(kNotFound) when the
// topology lacks a link class the group needs.
GroupSpan SpanOfGroup(const Mesh& mesh, std::span<const int64_t> positions);
// How many of the mesh's devices each host holds, by process_index: what a group crossing DCN shares its hosts'
// NICs with. The same for every group of a mesh: a caller that spans many groups computes it once and passes it
// (a pod-scale mesh has tens of thousands of groups; counting per group made pricing one collective quadratic).
std::vector<int> MeshDevicesPerHost(const Mesh& mesh);
GroupSpan SpanOfGroup(const Mesh& mesh, std::span<const int64_t> positions, const std::vector<int>& devices_per_host);

// What each mesh axis crosses physically (ASTRA-sim users' "logical vs physical topology per axis").
struct AxisLinks {
  std::string axis;
  int64_t size = 1;
  std::vector<LinkClass> links;  // link classes its groups cross, fastest first (empty for size 1)
  GroupSpan span;                // span of the slowest group along this axis alone
  bool uniform = true;           // whether every group along the axis has the same span
  std::string ToString() const;  // "model (16): ici x: ring of 4 ... [uniform]"
};
// One entry per mesh axis, in mesh order. Throws as SpanOfGroup.
std::vector<AxisLinks> DescribeAxes(const Mesh& mesh);

}  // namespace spmdsim

#endif  // SPMDSIM_COST_LINK_MODEL_H_
