#include "sim/internal/plan.h"

#include <algorithm>

#include "common/strings.h"
#include "sim/internal/array_access.h"

namespace spmdsim::internal {
namespace {

// all_gather rows shorter than this are gathered a range of output rows per unit (every member's row, in
// order), not a member per unit: writes stay sequential and workers do not share the output's cache lines.
constexpr int64_t kShortGatherRowBytes = 256;
constexpr int64_t kGatherUnitBytes = 64 * kKiB;  // output bytes per unit of a row-range all_gather
// psum_scatter blocks (a receiver's part of one outer row) shorter than a cache line are reduced a range of
// outer rows per unit, for every receiver of the group at once.
constexpr int64_t kShortScatterBlockBytes = 64;

bool WantedTarget(const Plan& plan, int64_t target, bool group_target, const std::vector<uint8_t>& local) {
  if (!group_target) return local[target] != 0;
  for (int64_t p : plan.groups->groups[target]) {
    if (local[p] != 0) return true;
  }
  return false;
}

// ppermute: no bytes move; a receiver shares its source's buffer (values are immutable), others one zero buffer.
void PlanPermute(const GroupInfo& groups, const std::vector<const CollectiveCall*>& calls, int64_t out_bytes,
                 const std::vector<uint8_t>* local, Plan& plan) {
  const int64_t num_devices = static_cast<int64_t>(calls.size());
  plan.result_source.assign(num_devices, -1);
  for (const auto& members : groups.groups) {
    for (const auto& [src, dst] : plan.ref->perm) plan.result_source[members[dst]] = members[src];
  }
  plan.outputs.resize(num_devices);
  if (plan.abstract) return;
  for (int64_t p = 0; p < num_devices; ++p) {
    if (local != nullptr && (*local)[p] == 0) continue;
    if (plan.result_source[p] >= 0) {
      plan.outputs[p] = ArrayAccess::buffer(*calls[plan.result_source[p]]->input);
    } else {
      if (plan.zeros == nullptr) plan.zeros = Buffer::AllocateZeroed(out_bytes);
      plan.outputs[p] = plan.zeros;
    }
  }
  plan.bytes_written = plan.zeros ? out_bytes : 0;
}

// Every group's member inputs in member order, and a result buffer per target (only the targets of local
// positions across ranks: a group with a local member, or a local position).
void AllocateTargets(int64_t num_targets, int64_t out_bytes, const std::vector<uint8_t>* local, Plan& plan) {
  const GroupInfo& groups = *plan.groups;
  const int64_t num_groups = static_cast<int64_t>(groups.groups.size());
  const int64_t n = plan.ref->group_size;
  plan.group_inputs.resize(num_groups * n);
  for (int64_t g = 0; g < num_groups; ++g) {
    for (int64_t k = 0; k < n; ++k) plan.group_inputs[g * n + k] = plan.inputs[groups.groups[g][k]];
  }
  if (local == nullptr) {
    for (auto& out : plan.outputs) out = Buffer::Allocate(out_bytes);
    plan.bytes_written = num_targets * out_bytes;
    return;
  }
  for (int64_t t = 0; t < num_targets; ++t) {
    if (!WantedTarget(plan, t, plan.per_group_output, *local)) continue;
    plan.outputs[t] = Buffer::Allocate(out_bytes);
    plan.bytes_written += out_bytes;
  }
}

// all_gather: the output as [outer, n, inner] around the gather axis; member k's [outer, inner] fills slot k.
void SplitAllGather(Plan& plan, int64_t in_size) {
  const std::vector<int64_t>& s = plan.ref->input->shape();
  const int64_t n = plan.ref->group_size;
  plan.outer = 1;
  for (int64_t d = 0; d < plan.ref->p0; ++d) plan.outer *= s[d];
  plan.inner = plan.outer == 0 ? 0 : plan.in_elements / plan.outer;
  plan.rows_per_unit = 0;
  plan.units_per_target = n;  // one unit copies one member's value into the group's buffer
  if (plan.outer > 1 && plan.inner * in_size < kShortGatherRowBytes) {
    // Short rows: a unit writes a range of output rows, every member's row in turn.
    plan.rows_per_unit = std::max<int64_t>(1, kGatherUnitBytes / std::max<int64_t>(1, n * plan.inner * in_size));
    plan.units_per_target = (plan.outer + plan.rows_per_unit - 1) / plan.rows_per_unit;
  }
}

// psum_scatter: the input as [outer, n, inner] around the scatter dimension; one unit per receiver. Returns
// whether a unit's target is a group (short blocks).
bool SplitPsumScatter(Plan& plan, int64_t in_size) {
  const std::vector<int64_t>& s = plan.ref->input->shape();
  const int64_t n = plan.ref->group_size;
  plan.outer = 1;
  for (int64_t d = 0; d < plan.ref->p0; ++d) plan.outer *= s[d];
  plan.inner = plan.outer == 0 ? 0 : plan.in_elements / plan.outer / n;
  plan.rows_per_unit = 0;
  if (!(plan.outer > 1 && plan.inner > 0 && plan.inner * in_size < kShortScatterBlockBytes)) return false;
  // Short blocks: a receiver would read a few bytes of every cache line of the members' inputs, and every
  // receiver the same lines. Instead a unit reduces a contiguous range of whole outer rows (for all receivers
  // at once, each line read once) and scatters the sums to the receivers.
  plan.rows_per_unit = std::max<int64_t>(1, kChunkElements / (n * plan.inner));
  plan.units_per_target = (plan.outer + plan.rows_per_unit - 1) / plan.rows_per_unit;
  return true;
}

// Sets units_per_target by op; returns whether a unit's target is a group rather than a position.
bool SplitUnits(Plan& plan) {
  const int64_t in_size = DTypeSize(plan.in_dtype);
  plan.units_per_target = 1;
  switch (plan.op) {
    case OpKind::kPsum:
    case OpKind::kPmean:
    case OpKind::kPmax:
    case OpKind::kPmin:
      plan.units_per_target = std::max<int64_t>(1, (plan.in_elements + kChunkElements - 1) / kChunkElements);
      return true;
    case OpKind::kAllGather:
      SplitAllGather(plan, in_size);
      return true;
    case OpKind::kPsumScatter:
      return SplitPsumScatter(plan, in_size);
    case OpKind::kAllToAll: {
      AllToAllGeometry& g = plan.scratch_geometry;
      MakeAllToAllGeometry(*plan.ref, &g);
      plan.src_step = g.src_step;
      plan.dst_step = g.dst_step;
      plan.copy.Init(g.shape, g.src_strides, g.dst_strides, in_size);
      return false;
    }
    case OpKind::kBarrier:
    case OpKind::kPpermute:
      break;
  }
  return false;
}

}  // namespace

void MakeAllToAllGeometry(const CollectiveCall& ref, AllToAllGeometry* geometry) {
  // One unit per receiver m: from every member k, the block of k's input at index [m*c, (m+1)*c) of the
  // split axis a goes to m's output at index [k*s[b], (k+1)*s[b]) of the concat axis b (a != b), or at
  // [k*c, (k+1)*c) of a (a == b), c = s[a] / n. Untiled all_to_all is the tiled one on x with a size-1
  // dimension inserted at concat_axis, then that dimension squeezed (lax/parallel.py); size-1 dimensions
  // do not change the row-major layout.
  const std::vector<int64_t>& s = ref.input->shape();
  const int64_t n = ref.group_size;
  const int64_t in_size = DTypeSize(ref.input->dtype());
  std::vector<int64_t>& shape = geometry->shape;
  shape.assign(s.begin(), s.end());
  int64_t a = ref.p0, b = ref.p1;
  if (!ref.tiled && a != b) {
    if (a < b) {
      b += 1;
    } else {
      a += 1;
    }
    shape.insert(shape.begin() + b, 1);
  }
  const int64_t c = shape[a] / n;
  const std::vector<int64_t>& src_strides = RowMajorStrides(shape, &geometry->src_strides);
  geometry->src_step = c * src_strides[a] * in_size;
  const int64_t concat_block = a == b ? c : shape[b];  // the extent of one member's block along b
  if (a != b) {  // the output's shape (a == b: the input's)
    shape[b] *= n;
    shape[a] = c;
  }
  const std::vector<int64_t>& dst_strides = RowMajorStrides(shape, &geometry->dst_strides);
  geometry->dst_step = concat_block * dst_strides[b] * in_size;
  shape[b] = concat_block;  // the block: the input's shape with c at a
  shape[a] = c;
}

void Plan::Clear() {
  inputs.clear();
  group_inputs.clear();
  outputs.clear();
  result_source.clear();
  zeros.reset();
  num_units = 0;
  bytes_written = 0;
  ref = nullptr;
  active_targets.clear();
}

void BuildPlan(const GroupInfo& groups, const std::vector<const CollectiveCall*>& calls, Plan* out,
               const CollectiveCall* ref_call, const std::vector<uint8_t>* local,
               const std::vector<uint8_t>* elsewhere) {
  Plan& plan = *out;
  plan.Clear();
  const CollectiveCall& ref = ref_call != nullptr ? *ref_call : *calls[0];
  plan.ref = &ref;
  plan.op = ref.op;
  plan.groups = &groups;
  if (plan.op == OpKind::kBarrier) return;
  const int64_t num_devices = static_cast<int64_t>(calls.size());
  plan.in_dtype = ref.input->dtype();
  plan.in_elements = ref.input->size();
  plan.out_elements = NumElements(ref.out_shape);
  plan.abstract = ref.input->is_abstract();
  const int64_t out_bytes = plan.out_elements * DTypeSize(ref.out_dtype);
  plan.per_group_output = plan.op == OpKind::kPsum || plan.op == OpKind::kPmean || plan.op == OpKind::kPmax ||
                          plan.op == OpKind::kPmin || plan.op == OpKind::kAllGather;
  plan.inputs.resize(num_devices);
  if (local == nullptr) {
    for (int64_t p = 0; p < num_devices; ++p) plan.inputs[p] = calls[p]->input->raw_data();
  } else {
    for (int64_t p = 0; p < num_devices; ++p)
      plan.inputs[p] = calls[p] != nullptr ? calls[p]->input->raw_data() : nullptr;
  }
  if (plan.op == OpKind::kPpermute) {
    PlanPermute(groups, calls, out_bytes, local, plan);
    return;
  }
  const int64_t num_targets = plan.per_group_output ? static_cast<int64_t>(groups.groups.size()) : num_devices;
  plan.outputs.resize(num_targets);
  if (plan.abstract) return;
  AllocateTargets(num_targets, out_bytes, local, plan);
  const bool group_target = SplitUnits(plan);
  // A psum_scatter over short blocks has a group per unit target, not a position.
  int64_t unit_targets = group_target ? static_cast<int64_t>(groups.groups.size()) : num_targets;
  if (local != nullptr) {
    for (int64_t t = 0; t < unit_targets; ++t) {
      bool wanted = WantedTarget(plan, t, group_target, *local);
      if (elsewhere != nullptr) wanted = wanted && (*elsewhere)[group_target ? t : groups.group_of[t]] == 0;
      if (wanted) plan.active_targets.push_back(t);
    }
    unit_targets = static_cast<int64_t>(plan.active_targets.size());
  }
  plan.num_units = unit_targets * plan.units_per_target;
}

}  // namespace spmdsim::internal
