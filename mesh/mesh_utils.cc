#include "mesh/mesh_utils.h"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/strings.h"
#include "mesh/internal/mesh_utils_internal.h"

namespace spmdsim {
namespace {

// device_kind strings JAX's handlers dispatch on (jax/_src/mesh_utils.py, device_kind_handler_dict). Of the
// kinds JAX knows, spmdsim's presets produce these six; "TPU v4 lite", "TPU7x", "TPU7", "TPU8i" have no preset.
constexpr std::string_view kTpuV2 = "TPU v2";
constexpr std::string_view kTpuV3 = "TPU v3";
constexpr std::string_view kTpuV5Lite = "TPU v5 lite";
constexpr std::string_view kTpuV5e = "TPU v5e";
constexpr std::string_view kTpuV5p = "TPU v5p";
constexpr std::string_view kTpuV6Lite = "TPU v6 lite";

// Device orders from jax/_src/mesh_utils.py (the physical rings of a tray or a small slice).
constexpr std::array<int, 8> kTrayRingOrder = {0, 1, 2, 3, 6, 7, 4, 5};       // v2/v3: 8 cores of a 2x2 tray
constexpr std::array<int, 4> kTray2x2RingOrder = {0, 1, 3, 2};                // 2x2 chips
constexpr std::array<int, 16> kTray4x4RingOrder = {0, 1, 2, 3, 7, 6, 5, 9, 10, 11, 15, 14, 13, 12, 8, 4};
constexpr std::array<int, 8> kV5eTrayRingOrder = {0, 1, 2, 3, 7, 6, 5, 4};    // v5e 8 chips
constexpr std::array<int, 8> kV5eTrayIotaOrder = {0, 4, 2, 6, 1, 5, 3, 7};    // v5e 2x2x2
constexpr std::array<int, 8> kV5p2x2x2Order = {0, 1, 3, 2, 6, 7, 5, 4};

// JAX's _TRANSPOSE_TRICKS: physical shape -> (mesh shape without 1s -> transpose of the physical mesh), in
// the order JAX lists them (its error message lists them in this order).
struct TransposeTrickEntry {
  std::vector<int64_t> physical;
  std::vector<std::pair<std::vector<int64_t>, std::vector<int>>> meshes;
};
const std::vector<TransposeTrickEntry>& TransposeTricks() {
  static const std::vector<TransposeTrickEntry> table = {
      {{2, 2, 1}, {{{2, 2}, {0, 1, 2}}}},
      {{2, 2, 4}, {{{4, 4}, {0, 1, 2}}}},
      {{4, 4, 4}, {{{16, 4}, {0, 2, 1}}}},
      {{4, 8, 8}, {{{64, 4}, {0, 2, 1}}, {{4, 64}, {0, 2, 1}}}},
      {{8, 8, 8}, {{{64, 8}, {0, 2, 1}}}},
      {{8, 16, 16}, {{{256, 8}, {0, 2, 1}}, {{8, 256}, {0, 2, 1}}}},
  };
  return table;
}

// Python's repr of a list of ints: [0, 0, 4].
std::string PyList(const std::vector<int64_t>& values) { return fmt::format("[{}]", fmt::join(values, ", ")); }

// ids picked by `order`, reshaped.
template <size_t N>
DeviceArray Pick(const std::vector<int>& ids, const std::array<int, N>& order, const std::vector<int64_t>& shape) {
  std::vector<int> out;
  out.reserve(N);
  for (int i : order) out.push_back(ids[i]);
  return DeviceArray(shape, std::move(out));
}

// JAX: _tpu_v2_v3_create_device_mesh (never declines).
DeviceArray TpuV2V3Mesh(const std::vector<int64_t>& mesh_shape, const std::vector<int>& ids) {
  if (ids.size() == 8) return Pick(ids, kTrayRingOrder, mesh_shape);
  if (mesh_shape.empty()) {
    // JAX indexes mesh_shape[-1] here; an empty shape (one device) raises IndexError.
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kIndexError,
              "create_device_mesh on TPU v2/v3 needs a mesh shape with at least one axis (JAX reads its last "
              "size); got ()");
  }
  DeviceArray mesh(mesh_shape, ids);
  if (mesh_shape.back() != 8) return mesh;
  // Apply the tray ring along the last axis.
  std::vector<int> out(ids.size());
  for (size_t row = 0; row < ids.size() / 8; ++row) {
    for (int k = 0; k < 8; ++k) out[row * 8 + k] = ids[row * 8 + kTrayRingOrder[k]];
  }
  return DeviceArray(mesh_shape, std::move(out));
}

// The devices sorted by (z, y, x), stably (JAX: sorted(devices, key=reversed(coords))).
std::vector<int> SequentialByCoords(const Topology& topology, const std::vector<int>& ids) {
  std::vector<int> sorted = ids;
  std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) {
    const auto& ca = topology.device(a).coords;
    const auto& cb = topology.device(b).coords;
    return std::tie(ca[2], ca[1], ca[0]) < std::tie(cb[2], cb[1], cb[0]);
  });
  return sorted;
}

// JAX takes max() over the coordinate TUPLES (lexicographic), then adds 1 to each entry.
std::array<int, 3> LexicographicBounds(const Topology& topology, const std::vector<int>& ids) {
  std::array<int, 3> best = topology.device(ids[0]).coords;
  for (int id : ids) best = std::max(best, topology.device(id).coords);
  return {best[0] + 1, best[1] + 1, best[2] + 1};
}

// JAX: _v5e_create_device_mesh (also used for "TPU v6 lite"). Empty when it declines.
std::optional<DeviceArray> V5eMesh(const std::vector<int64_t>& mesh_shape, const Topology& topology,
                                   const std::vector<int>& ids) {
  const auto [bx, by, bz] = LexicographicBounds(topology, ids);
  const size_t n = ids.size();
  if (bx == 2 && by == 2 && bz == 1 && n == 4) {
    return Pick(SequentialByCoords(topology, ids), kTray2x2RingOrder, mesh_shape);
  }
  if (n == 8) {
    bool cube = bx == 2 && by == 2 && bz == 2;
    return Pick(SequentialByCoords(topology, ids), cube ? kV5eTrayIotaOrder : kV5eTrayRingOrder, mesh_shape);
  }
  if (bx == 4 && by == 4 && bz == 1 && n == 16) {
    // The ring only when one axis spans every device.
    if (*std::max_element(mesh_shape.begin(), mesh_shape.end()) == static_cast<int64_t>(n)) {
      return Pick(SequentialByCoords(topology, ids), kTray4x4RingOrder, mesh_shape);
    }
  }
  return std::nullopt;
}

// JAX: _v5p_create_device_mesh.
std::optional<DeviceArray> V5pMesh(const std::vector<int64_t>& mesh_shape, const Topology& topology,
                                   const std::vector<int>& ids) {
  const auto [bx, by, bz] = LexicographicBounds(topology, ids);
  if (bx == 2 && by == 2 && bz == 2 && ids.size() == 8) {
    return Pick(SequentialByCoords(topology, ids), kV5p2x2x2Order, mesh_shape);
  }
  return std::nullopt;
}

void CheckIds(const Topology& topology, const std::vector<int>& ids) {
  for (int id : ids) topology.device(id);  // throws kOutOfRange naming the valid ids
}

void CheckSizes(const std::vector<int64_t>& shape, std::string_view parameter, std::string_view function) {
  for (int64_t s : shape) {
    if (s < 1) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "`{}` passed to `{}` must hold sizes >= 1; got {}", parameter, function, PyTuple(shape));
    }
  }
}

std::vector<std::string> Names(const std::vector<std::pair<std::string, int64_t>>& axes) {
  std::vector<std::string> names;
  for (const auto& [name, size] : axes) names.push_back(name);
  return names;
}
std::vector<int64_t> Sizes(const std::vector<std::pair<std::string, int64_t>>& axes) {
  std::vector<int64_t> sizes;
  for (const auto& [name, size] : axes) sizes.push_back(size);
  return sizes;
}

}  // namespace

namespace internal {

std::vector<int64_t> PrimeFactors(int64_t x) {
  SPMDSIM_CHECK(x > 0, "PrimeFactors({})", x);
  std::vector<int64_t> factors;
  for (int64_t p = 2; p * p <= x; ++p) {
    while (x % p == 0) {
      factors.push_back(p);
      x /= p;
    }
  }
  if (x > 1) factors.push_back(x);
  return factors;
}

DeviceArray PhysicalTpuMesh(const Topology& topology, std::span<const int> ids) {
  SPMDSIM_CHECK(!ids.empty());
  std::array<int, 3> lo = topology.device(ids[0]).coords, hi = lo;
  int core_lo = topology.device(ids[0]).core_on_chip, core_hi = core_lo;
  for (int id : ids) {
    const Device& d = topology.device(id);
    for (int i = 0; i < 3; ++i) {
      lo[i] = std::min(lo[i], d.coords[i]);
      hi[i] = std::max(hi[i], d.coords[i]);
    }
    core_lo = std::min(core_lo, d.core_on_chip);
    core_hi = std::max(core_hi, d.core_on_chip);
  }
  const std::array<int64_t, 3> dims = {hi[0] - lo[0] + 1, hi[1] - lo[1] + 1, hi[2] - lo[2] + 1};
  const int64_t cores = core_hi - core_lo + 1;
  if (static_cast<int64_t>(ids.size()) != dims[0] * dims[1] * dims[2] * cores) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kAssertionError,
              "the devices' coordinates do not form a cuboid: {} devices, but their coordinates span {}x{}x{} "
              "chips with {} core(s) per chip (devices of several slices share coordinates: use "
              "create_hybrid_device_mesh for those)",
              ids.size(), dims[0], dims[1], dims[2], cores);
  }
  const std::string& kind = topology.device_kind();
  const bool core_axis_replaces_z = kind == kTpuV2 || kind == kTpuV3;
  const bool core_axis_extra = kind == kTpuV5p && cores == 2;  // JAX 0.10.2 names "TPU v5p" only
  std::vector<int64_t> shape;
  if (core_axis_replaces_z) {
    shape = {dims[0], dims[1], cores};
  } else if (core_axis_extra) {
    shape = {dims[0], dims[1], dims[2], cores};
  } else {
    shape = {dims[0], dims[1], dims[2]};
  }
  const std::vector<int64_t> strides = RowMajorStrides(shape);
  std::vector<int> cells(ids.size(), -1);
  for (int id : ids) {
    const Device& d = topology.device(id);
    std::vector<int64_t> index = {d.coords[0] - lo[0], d.coords[1] - lo[1]};
    if (core_axis_replaces_z) {
      SPMDSIM_CHECK(d.coords[2] == 0, "TPU v2/v3 device {} has z = {}", id, d.coords[2]);
      index.push_back(d.core_on_chip - core_lo);
    } else {
      index.push_back(d.coords[2] - lo[2]);
      if (core_axis_extra) {
        index.push_back(d.core_on_chip - core_lo);
      } else if (d.core_on_chip != 0) {
        ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kAssertionError,
                  "creating meshes for TPUs newer than v3 needs one device per chip (\"megacore\" mode); device "
                  "{} of kind {} is core {} of its chip",
                  id, kind, d.core_on_chip);
      }
    }
    int64_t flat = 0;
    for (size_t i = 0; i < index.size(); ++i) flat += index[i] * strides[i];
    cells[flat] = id;
  }
  if (std::find(cells.begin(), cells.end(), -1) != cells.end()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kAssertionError,
              "Constructed mesh contains a \"hole\"; probable cause: coordinates of the devices are not a "
              "contiguous cuboid (a device listed twice?): {}",
              fmt::join(ids, ", "));
  }
  return DeviceArray(std::move(shape), std::move(cells));
}

TorusAssignment CreateDeviceMeshForNdTorus(const DeviceArray& physical_mesh, const std::vector<int64_t>& mesh_shape,
                                           bool allow_split_physical_axes) {
  const std::vector<int64_t>& physical = physical_mesh.shape();
  const int num_physical = static_cast<int>(physical.size());
  const int num_logical = static_cast<int>(mesh_shape.size());
  std::vector<int64_t> assignable = physical;  // 0 once taken
  std::vector<std::vector<int>> taken(num_logical);

  for (int logical = num_logical - 1; logical >= 0; --logical) {
    const int64_t size = mesh_shape[logical];
    bool found = false;
    for (int count = num_physical; count >= 1 && !found; --count) {
      // Subsets of `count` physical axes in itertools.combinations order (lexicographic).
      std::vector<int> subset(count);
      std::iota(subset.begin(), subset.end(), 0);
      while (true) {
        int64_t product = 1;
        for (int p : subset) product *= assignable[p];
        if (product == size) {
          taken[logical] = subset;
          for (int p : subset) assignable[p] = 0;
          found = true;
          break;
        }
        int i = count - 1;
        while (i >= 0 && subset[i] == num_physical - count + i) --i;
        if (i < 0) break;
        ++subset[i];
        for (int j = i + 1; j < count; ++j) subset[j] = subset[j - 1] + 1;
      }
    }
    if (!found && size > 1) {
      if (allow_split_physical_axes) return CreateDeviceMeshForNdTorusSplittingAxes(physical_mesh, mesh_shape);
      // Sizes this axis could take from what is left: products of subsets of the untaken axes.
      std::set<int64_t> possible;
      for (int mask = 1; mask < (1 << num_physical); ++mask) {
        int64_t product = 1;
        for (int p = 0; p < num_physical; ++p)
          if (mask & (1 << p)) product *= assignable[p];
        if (product > 0) possible.insert(product);
      }
      ThrowKind(ErrorCode::kUnimplemented, ErrorKind::kNotImplementedError,
                "Failed to find assignment for logical_axis_index {} of size {} with remaining assignable mesh "
                "{}. Each logical axis size must be the product of some of the physical mesh axis sizes {} (axes "
                "are assigned from the last logical axis to the first; sizes still possible for this one: {}). "
                "To split physical axes instead, set allow_split_physical_axes to True.",
                logical, size, PyList(assignable), PyTuple(physical),
                possible.empty() ? std::string("none") : fmt::format("{}", fmt::join(possible, ", ")));
    }
  }

  std::vector<int> transpose;
  AssignmentMatrix assignment(num_physical, std::vector<int64_t>(num_logical, 1));
  for (int logical = 0; logical < num_logical; ++logical) {
    for (int p : taken[logical]) {
      assignment[p][logical] = physical[p];
      transpose.push_back(p);
    }
  }
  if (static_cast<int>(transpose.size()) != num_physical) {
    // JAX transposes with too few axes here and numpy raises; it happens for a mesh of rank 0.
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "axes don't match array: mesh shape {} leaves physical axes of the mesh {} unassigned",
              PyTuple(mesh_shape), PyTuple(physical));
  }
  return {physical_mesh.Transpose(transpose).Reshape(mesh_shape), std::move(assignment)};
}

std::vector<std::vector<int64_t>> EnumerateFeasibleLogicalAxisAssignments(
    const std::vector<int64_t>& physical_mesh_shape, const AssignmentMatrix& assignment, int64_t logical_axis_size) {
  const size_t num_physical = physical_mesh_shape.size();
  // Prime factors of the logical size with multiplicities, in ascending order.
  std::vector<std::pair<int64_t, int>> factors;
  for (int64_t f : PrimeFactors(logical_axis_size)) {
    if (!factors.empty() && factors.back().first == f) {
      ++factors.back().second;
    } else {
      factors.push_back({f, 1});
    }
  }
  // Each physical axis listed once per occurrence of the prime in what it has left.
  std::vector<std::vector<int>> axes_by_factor(factors.size());
  for (size_t p = 0; p < num_physical; ++p) {
    int64_t used = 1;
    for (int64_t v : assignment[p]) used *= v;
    for (int64_t f : PrimeFactors(physical_mesh_shape[p] / used)) {
      for (size_t k = 0; k < factors.size(); ++k)
        if (factors[k].first == f) axes_by_factor[k].push_back(static_cast<int>(p));
    }
  }
  // Per prime: the distinct multisets of physical axes that take its `multiplicity` copies.
  std::vector<std::vector<std::vector<int>>> choices(factors.size());
  for (size_t k = 0; k < factors.size(); ++k) {
    const std::vector<int>& pool = axes_by_factor[k];
    const int m = factors[k].second;
    if (static_cast<int>(pool.size()) < m) return {};
    std::set<std::vector<int>> distinct;
    std::vector<int> pick(m);
    std::iota(pick.begin(), pick.end(), 0);
    while (true) {
      std::vector<int> chosen;
      for (int i : pick) chosen.push_back(pool[i]);
      distinct.insert(chosen);
      int i = m - 1;
      while (i >= 0 && pick[i] == static_cast<int>(pool.size()) - m + i) --i;
      if (i < 0) break;
      ++pick[i];
      for (int j = i + 1; j < m; ++j) pick[j] = pick[j - 1] + 1;
    }
    choices[k].assign(distinct.begin(), distinct.end());
  }
  // Cartesian product over the primes.
  std::set<std::vector<int64_t>, std::greater<>> results;
  std::vector<size_t> at(factors.size(), 0);
  while (true) {
    std::vector<int64_t> result(num_physical, 1);
    for (size_t k = 0; k < factors.size(); ++k)
      for (int p : choices[k][at[k]]) result[p] *= factors[k].first;
    results.insert(std::move(result));
    size_t k = 0;
    for (; k < factors.size(); ++k) {
      if (++at[k] < choices[k].size()) break;
      at[k] = 0;
    }
    if (k == factors.size()) break;
  }
  return {results.begin(), results.end()};
}

bool PreferFirstLogicalAxisAssignment(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                                      const std::vector<int64_t>& physical_mesh_shape,
                                      const AssignmentMatrix& assignment) {
  const size_t n = physical_mesh_shape.size();
  auto whole_size = [&](const std::vector<int64_t>& v) {
    int64_t product = 1;
    for (size_t i = 0; i < n; ++i)
      if (v[i] == physical_mesh_shape[i]) product *= v[i];
    return product;
  };
  auto whole_count = [&](const std::vector<int64_t>& v) {
    int count = 0;
    for (size_t i = 0; i < n; ++i) count += (v[i] == physical_mesh_shape[i] && v[i] > 1);
    return count;
  };
  // JAX's third criterion multiplies the sizes on physical axes that earlier (heavier) logical axes already
  // use, and prefers the LARGER product.
  auto on_used_axes = [&](const std::vector<int64_t>& v) {
    int64_t product = 1;
    for (size_t i = 0; i < n; ++i) {
      int64_t used = 1;
      for (int64_t a : assignment[i]) used *= a;
      if (used > 1) product *= v[i];
    }
    return product;
  };
  if (whole_size(x) != whole_size(y)) return whole_size(x) > whole_size(y);
  if (whole_count(x) != whole_count(y)) return whole_count(x) > whole_count(y);
  if (on_used_axes(x) != on_used_axes(y)) return on_used_axes(x) > on_used_axes(y);
  return x > y;
}

DeviceArray GenerateLogicalMesh(const DeviceArray& physical_mesh, const std::vector<int64_t>& logical_mesh_shape,
                                const AssignmentMatrix& assignment) {
  const int num_physical = static_cast<int>(assignment.size());
  const int num_logical = static_cast<int>(logical_mesh_shape.size());
  std::vector<int64_t> split_shape;  // (physical, logical) pairs, physical major
  for (int p = 0; p < num_physical; ++p)
    for (int l = 0; l < num_logical; ++l) split_shape.push_back(assignment[p][l]);
  std::vector<int> transpose;  // regroup as (logical, physical), logical major
  for (int l = 0; l < num_logical; ++l)
    for (int p = 0; p < num_physical; ++p) transpose.push_back(p * num_logical + l);
  return physical_mesh.Reshape(split_shape).Transpose(transpose).Reshape(logical_mesh_shape);
}

TorusAssignment CreateDeviceMeshForNdTorusSplittingAxes(const DeviceArray& physical_mesh,
                                                        const std::vector<int64_t>& mesh_shape) {
  const std::vector<int64_t>& physical = physical_mesh.shape();
  if (NumElements(physical) != NumElements(mesh_shape)) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "The number of devices in physical mesh {} does not match the number of devices in logical mesh {}.",
              PyTuple(physical), PyTuple(mesh_shape));
  }
  AssignmentMatrix assignment(physical.size(), std::vector<int64_t>(mesh_shape.size(), 1));
  for (int logical = static_cast<int>(mesh_shape.size()) - 1; logical >= 0; --logical) {
    std::optional<std::vector<int64_t>> best;
    for (auto& candidate : EnumerateFeasibleLogicalAxisAssignments(physical, assignment, mesh_shape[logical])) {
      if (!best || PreferFirstLogicalAxisAssignment(candidate, *best, physical, assignment)) best = candidate;
    }
    SPMDSIM_CHECK(best.has_value(), "no feasible assignment for logical axis {} of {}", logical, PyTuple(mesh_shape));
    for (size_t p = 0; p < physical.size(); ++p) assignment[p][logical] = (*best)[p];
  }
  return {GenerateLogicalMesh(physical_mesh, mesh_shape, assignment), std::move(assignment)};
}

DeviceArray TransposeTrick(const DeviceArray& physical_mesh, const std::vector<int64_t>& mesh_shape) {
  const std::vector<int64_t>& physical = physical_mesh.shape();
  const TransposeTrickEntry* entry = nullptr;
  for (const auto& e : TransposeTricks())
    if (e.physical == physical) entry = &e;
  if (entry == nullptr) {
    std::vector<std::string> known;
    for (const auto& e : TransposeTricks()) known.push_back(PyTuple(e.physical));
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "create_device_mesh cannot create contiguous submeshes for physical mesh topology {} (it can for "
              "physical meshes {})",
              PyTuple(physical), fmt::join(known, ", "));
  }
  std::vector<int64_t> non_trivial;
  for (int64_t s : mesh_shape)
    if (s != 1) non_trivial.push_back(s);
  for (const auto& [shape, perm] : entry->meshes) {
    if (shape == non_trivial) return physical_mesh.Transpose(perm);
  }
  std::vector<std::string> available;
  for (const auto& [shape, perm] : entry->meshes) available.push_back(PyTuple(shape));
  ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
            "create_device_mesh cannot create contiguous submeshes for mesh_shape {} and physical mesh topology "
            "{}. Available mesh_shapes: [{}]",
            PyTuple(mesh_shape), PyTuple(physical), fmt::join(available, ", "));
}

}  // namespace internal

std::vector<int> JaxDevicesOrder(const Topology& topology) {
  std::vector<int> ids;
  ids.reserve(topology.num_devices());
  for (const Device& d : topology.devices()) ids.push_back(d.id);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) {
    return topology.device(a).process_index < topology.device(b).process_index;
  });
  return ids;
}

DeviceArray CreateDeviceMesh(const std::vector<int64_t>& mesh_shape, const Topology& topology,
                             std::optional<std::vector<int>> devices, CreateDeviceMeshOptions options) {
  std::vector<int> ids = devices ? std::move(*devices) : JaxDevicesOrder(topology);
  CheckIds(topology, ids);
  CheckSizes(mesh_shape, "mesh_shape", "create_device_mesh");
  if (NumElements(mesh_shape) != static_cast<int64_t>(ids.size())) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Number of devices {} must equal the product of mesh_shape {}", ids.size(), PyTuple(mesh_shape));
  }
  const std::string& kind = topology.device_kind();
  if (kind == kTpuV2 || kind == kTpuV3) return TpuV2V3Mesh(mesh_shape, ids);
  if (kind == kTpuV5Lite || kind == kTpuV5e || kind == kTpuV6Lite) {
    if (auto mesh = V5eMesh(mesh_shape, topology, ids)) return *std::move(mesh);
  }
  // JAX 0.10.2's handler table has "TPU v5p" and not "TPU v5" (the kind of spmdsim's tpu-v5p preset), so a "TPU v5"
  // machine takes the torus assignment there, and here (checked against JAX by tests/peers/test_mesh_utils.py).
  if (kind == kTpuV5p) {
    if (auto mesh = V5pMesh(mesh_shape, topology, ids)) return *std::move(mesh);
  }
  switch (topology.platform()) {
    case Platform::kTpu: {
      DeviceArray physical = internal::PhysicalTpuMesh(topology, ids);
      if (options.contiguous_submeshes) physical = internal::TransposeTrick(physical, mesh_shape);
      return internal::CreateDeviceMeshForNdTorus(physical, mesh_shape, options.allow_split_physical_axes).logical;
    }
    case Platform::kGpu:
      std::sort(ids.begin(), ids.end());
      return DeviceArray(mesh_shape, std::move(ids));
    case Platform::kCpu:
      return DeviceArray(mesh_shape, std::move(ids));
  }
  SPMDSIM_CHECK(false, "unknown platform");
  return {};
}

DeviceArray CreateHybridDeviceMesh(const std::vector<int64_t>& ici_shape, const std::vector<int64_t>& dcn_shape,
                                   const Topology& topology, std::optional<std::vector<int>> devices,
                                   CreateHybridDeviceMeshOptions options) {
  std::vector<int> ids = devices ? std::move(*devices) : JaxDevicesOrder(topology);
  CheckIds(topology, ids);
  CheckSizes(ici_shape, "mesh_shape", "create_hybrid_device_mesh");
  CheckSizes(dcn_shape, "dcn_mesh_shape", "create_hybrid_device_mesh");
  if (ids.empty()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kIndexError,
              "create_hybrid_device_mesh needs at least one device");
  }
  // Granules keyed by slice (or process), in key order or in order of first appearance.
  std::vector<int> keys;
  std::map<int, std::vector<int>> by_key;
  for (int id : ids) {
    const Device& d = topology.device(id);
    int key = options.process_is_granule ? d.process_index : d.slice_index;
    auto [it, inserted] = by_key.try_emplace(key);
    if (inserted) keys.push_back(key);
    it->second.push_back(id);
  }
  if (options.should_sort_granules_by_key) std::sort(keys.begin(), keys.end());
  const int64_t num_granules = static_cast<int64_t>(keys.size());
  if (NumElements(dcn_shape) != num_granules) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Number of slices {} must equal the product of dcn_mesh_shape {} (the devices form {} {})",
              num_granules, PyTuple(dcn_shape), num_granules, options.process_is_granule ? "processes" : "slices");
  }
  std::vector<DeviceArray> blocks;
  for (int key : keys) {
    blocks.push_back(CreateDeviceMesh(ici_shape, topology, by_key[key],
                                      {.allow_split_physical_axes = options.allow_split_physical_axes}));
  }
  // numpy.block: rank r = max(ranks); shapes padded with leading 1s; granule g sits at the DCN coordinates of
  // g in row-major order, each block at dcn_index * block_size along every axis.
  const size_t rank = std::max(ici_shape.size(), dcn_shape.size());
  std::vector<int64_t> block(rank, 1), grid(rank, 1), out_shape(rank);
  std::copy(ici_shape.begin(), ici_shape.end(), block.end() - ici_shape.size());
  std::copy(dcn_shape.begin(), dcn_shape.end(), grid.end() - dcn_shape.size());
  for (size_t i = 0; i < rank; ++i) out_shape[i] = block[i] * grid[i];
  const std::vector<int64_t> out_strides = RowMajorStrides(out_shape);
  const std::vector<int64_t> block_strides = RowMajorStrides(block);
  const std::vector<int64_t> grid_strides = RowMajorStrides(grid);
  std::vector<int> out(static_cast<size_t>(NumElements(out_shape)));
  for (int64_t g = 0; g < num_granules; ++g) {
    const std::vector<int>& block_ids = blocks[g].ids();
    for (int64_t b = 0; b < static_cast<int64_t>(block_ids.size()); ++b) {
      int64_t flat = 0;
      for (size_t i = 0; i < rank; ++i) {
        int64_t gi = (g / grid_strides[i]) % grid[i];
        int64_t bi = (b / block_strides[i]) % block[i];
        flat += (gi * block[i] + bi) * out_strides[i];
      }
      out[flat] = block_ids[b];
    }
  }
  return DeviceArray(std::move(out_shape), std::move(out));
}

Mesh MakeMesh(const std::vector<int64_t>& axis_shapes, const std::vector<std::string>& axis_names,
              std::shared_ptr<const Topology> topology, std::optional<std::vector<int>> devices) {
  SPMDSIM_CHECK(topology != nullptr);
  std::vector<int> ids = devices ? std::move(*devices) : JaxDevicesOrder(*topology);
  CheckSizes(axis_shapes, "axis_shapes", "make_mesh");
  const int64_t size = NumElements(axis_shapes);
  if (size > static_cast<int64_t>(ids.size())) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Number of devices {} must be >= the product of mesh_shape {}", ids.size(), PyTuple(axis_shapes));
  }
  ids.resize(static_cast<size_t>(size));
  const std::string& kind = topology->device_kind();
  CreateDeviceMeshOptions options;
  options.allow_split_physical_axes = kind == kTpuV5Lite || kind == kTpuV5e;
  DeviceArray mesh = CreateDeviceMesh(axis_shapes, *topology, std::move(ids), options);
  std::set<int> slices;
  for (int id : mesh.ids()) slices.insert(topology->device(id).slice_index);
  if (slices.size() > 1) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "`jax.make_mesh` does not support multi-slice topologies. Please use "
              "jax.experimental.mesh_utils.create_hybrid_device_mesh");
  }
  return Mesh(std::move(mesh), axis_names, std::move(topology));
}

Mesh MakeDeviceMesh(std::shared_ptr<const Topology> topology,
                    const std::vector<std::pair<std::string, int64_t>>& ici_axes,
                    const std::vector<std::pair<std::string, int64_t>>& dcn_axes, MeshOptions options) {
  SPMDSIM_CHECK(topology != nullptr);
  std::vector<std::string> names = Names(ici_axes);
  if (dcn_axes.empty()) {
    if (options.process_is_granule || !options.should_sort_granules_by_key) {
      Throw(ErrorCode::kInvalidArgument,
            "process_is_granule and should_sort_granules_by_key apply to hybrid meshes only; give DCN axes too");
    }
    DeviceArray devices =
        CreateDeviceMesh(Sizes(ici_axes), *topology, options.devices,
                         {.contiguous_submeshes = options.contiguous_submeshes,
                          .allow_split_physical_axes = options.allow_split_physical_axes});
    return Mesh(std::move(devices), std::move(names), std::move(topology));
  }
  if (Names(dcn_axes) != names) {
    Throw(ErrorCode::kInvalidArgument,
          "the DCN axes {} must be the ICI axes {}, in the same order (give size 1 where an axis has no DCN part)",
          PyTuple(Names(dcn_axes)), PyTuple(names));
  }
  if (options.contiguous_submeshes) {
    Throw(ErrorCode::kInvalidArgument,
          "contiguous_submeshes applies to create_device_mesh only; create_hybrid_device_mesh has no such option");
  }
  DeviceArray devices = CreateHybridDeviceMesh(
      Sizes(ici_axes), Sizes(dcn_axes), *topology, options.devices,
      {.process_is_granule = options.process_is_granule,
       .should_sort_granules_by_key = options.should_sort_granules_by_key,
       .allow_split_physical_axes = options.allow_split_physical_axes});
  return Mesh(std::move(devices), std::move(names), std::move(topology));
}

}  // namespace spmdsim
