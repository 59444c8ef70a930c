#include "sim/internal/collective_call.h"

#include <algorithm>
#include <ranges>

#include <fmt/format.h>

#include "common/error.h"
#include "common/shape.h"
#include "common/strings.h"

namespace spmdsim::internal {

AxesKey MakeAxesKey(const Mesh& mesh, const Axes& axes, std::string_view api) {
  AxesKey key;
  const auto& names = axes.names();
  const auto& mesh_names = mesh.axis_names();
  if (names.size() > static_cast<size_t>(kMaxAxes)) {
    for (const auto& name : names) {
      if (std::find(mesh_names.begin(), mesh_names.end(), name) == mesh_names.end()) {
        ThrowKind(ErrorCode::kNotFound, ErrorKind::kNameError,
                  "Found an unbound axis name: {}. To fix this, please call {} under `jax.shard_map`.", name, api);
      }
    }
    mesh.ValidateAxes(names, api);
    Throw(ErrorCode::kInvalidArgument, "{} over {} axes; at most {} are supported", api, names.size(), kMaxAxes);
  }
  // One search per name, no strings made: this runs on every device for every collective.
  for (size_t i = 0; i < names.size(); ++i) {
    const auto it = std::find(mesh_names.begin(), mesh_names.end(), names[i]);
    if (it == mesh_names.end()) {
      // JAX (lax/parallel.py _check_axis_names).
      ThrowKind(ErrorCode::kNotFound, ErrorKind::kNameError,
                "Found an unbound axis name: {}. To fix this, please call {} under `jax.shard_map`.", names[i], api);
    }
    key.index[i] = static_cast<uint8_t>(it - mesh_names.begin());
  }
  key.count = static_cast<uint8_t>(names.size());
  for (int i = 1; i < key.count; ++i) {
    for (int j = 0; j < i; ++j) {
      if (key.index[i] == key.index[j]) mesh.ValidateAxes(names, api);  // throws the duplicate's error
    }
  }
  return key;
}

int64_t GroupSize(const Mesh& mesh, const AxesKey& key) {
  int64_t n = 1;
  for (int i = 0; i < key.count; ++i) n *= mesh.shape()[key.index[i]];
  return n;
}

std::vector<std::string> AxesNames(const Mesh& mesh, const AxesKey& key) {
  std::vector<std::string> names;
  for (int i = 0; i < key.count; ++i) names.push_back(mesh.axis_names()[key.index[i]]);
  return names;
}

void CallShape::insert(size_t pos, int64_t value) {
  if (size_ + 1 > kInline && size_ <= kInline) heap_.assign(inline_.begin(), inline_.begin() + size_);
  if (size_ + 1 > kInline) {
    heap_.insert(heap_.begin() + static_cast<std::ptrdiff_t>(pos), value);
  } else {
    std::copy_backward(inline_.begin() + pos, inline_.begin() + size_, inline_.begin() + size_ + 1);
    inline_[pos] = value;
  }
  ++size_;
}

void CallShape::erase(size_t pos) {
  if (size_ > kInline) {
    heap_.erase(heap_.begin() + static_cast<std::ptrdiff_t>(pos));
    if (size_ - 1 <= kInline) std::copy(heap_.begin(), heap_.end(), inline_.begin());
  } else {
    std::copy(inline_.begin() + pos + 1, inline_.begin() + size_, inline_.begin() + pos);
  }
  --size_;
}

namespace {

// numpy/JAX canonicalize_axis (jax/_src/util.py).
int64_t CanonicalizeAxis(int64_t axis, int64_t num_dims) {
  if (!(-num_dims <= axis && axis < num_dims)) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "axis {} is out of bounds for array of dimension {}",
              axis, num_dims);
  }
  return axis < 0 ? axis + num_dims : axis;
}

std::string PermText(std::span<const std::pair<int64_t, int64_t>> perm) {
  std::vector<std::string> pairs;
  for (const auto& [s, d] : perm) pairs.push_back(fmt::format("({}, {})", s, d));
  if (pairs.size() == 1) return fmt::format("({},)", pairs[0]);
  return fmt::format("({})", fmt::join(pairs, ", "));
}

int64_t PyMod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

// UniquePairs for more than 32 pairs: two bitmaps over [0, n), on the stack up to n = 4096. Out of line, so
// that the usual call's frame does not carry the bitmaps.
[[gnu::noinline]] bool UniquePairsByBitmap(std::span<const std::pair<int64_t, int64_t>> perm, int64_t n) {
  constexpr int64_t kStackBits = 4096;
  const size_t words = static_cast<size_t>((n + 63) / 64);
  uint64_t stack_bits[2 * kStackBits / 64];
  std::vector<uint64_t> heap_bits;
  uint64_t* bits = stack_bits;
  if (n > kStackBits) {
    heap_bits.resize(2 * words);
    bits = heap_bits.data();
  }
  std::fill(bits, bits + 2 * words, 0);
  uint64_t* sources = bits;
  uint64_t* destinations = bits + words;
  for (const auto& [src, dst] : perm) {
    const uint64_t s_bit = uint64_t{1} << (src % 64), d_bit = uint64_t{1} << (dst % 64);
    if ((sources[src / 64] & s_bit) != 0 || (destinations[dst / 64] & d_bit) != 0) return false;
    sources[src / 64] |= s_bit;
    destinations[dst / 64] |= d_bit;
  }
  return true;
}

// Whether the sources are distinct and the destinations are distinct (indices in [0, n)), with no memory
// allocated below n = 4096: up to 32 pairs by comparing every two.
bool UniquePairs(std::span<const std::pair<int64_t, int64_t>> perm, int64_t n) {
  const size_t count = perm.size();
  if (count > static_cast<size_t>(n)) return false;  // pigeonhole
  if (count > 32) return UniquePairsByBitmap(perm, n);
  for (size_t i = 1; i < count; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (perm[i].first == perm[j].first || perm[i].second == perm[j].second) return false;
    }
  }
  return true;
}

// Whether the group's devices, listed in the order of `key` (first name major), come out in mesh order. JAX
// compares the group with its sorted self; the positions are sums of coordinate times mesh stride, so the
// group is sorted exactly when the axes of size > 1 appear in mesh order (an axis of size 1 may go anywhere).
bool GroupInMeshOrder(const Mesh& mesh, const AxesKey& key) {
  int last = -1;
  for (int i = 0; i < key.count; ++i) {
    if (mesh.shape()[key.index[i]] == 1) continue;
    if (key.index[i] < last) return false;
    last = key.index[i];
  }
  return true;
}

// ppermute's checks in JAX's order (lax/parallel.py _pcollectives_lowering_common): sources and destinations
// unique modulo n (ValueError), the group in mesh order (RuntimeError, raise_on_ppermute_sort_diff), then
// each index used to index the group tuple, so -n..-1 count from the end and anything else is an IndexError.
// Every device runs this on every call: nothing is allocated unless an index is negative or out of range.
void ValidatePermutation(const Mesh& mesh, CollectiveCall& call, const PermutationPairs& raw_perm) {
  const int64_t n = call.group_size;
  bool in_range = true;
  for (const auto& [src, dst] : raw_perm) in_range = in_range && 0 <= src && src < n && 0 <= dst && dst < n;
  if (in_range) {
    call.perm = raw_perm;
  } else {
    call.perm_storage.clear();
    for (const auto& [src, dst] : raw_perm) call.perm_storage.emplace_back(PyMod(src, n), PyMod(dst, n));
    call.perm = call.perm_storage;
  }
  if (!UniquePairs(call.perm, n)) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "ppermute sources and destinations must be unique, got {}.", PermText(raw_perm));
  }
  if (!GroupInMeshOrder(mesh, call.axes)) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kRuntimeError,
              "Make sure that the axis_name passed to jax.lax.ppermute is in the same order as the axis_names "
              "declared on the mesh. If you want to allow different order, you can disable the check via `with "
              "jax.raise_on_ppermute_sort_diff(False):` context manager.");
  }
  if (in_range) return;
  for (const auto& [src, dst] : raw_perm) {
    for (const int64_t index : {src, dst}) {
      if (-n <= index && index < n) continue;
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kIndexError,
                "tuple index out of range (ppermute perm {} uses index {} in a group of {} devices; valid indices are "
                "{}..{})",
                PermText(raw_perm), index, n, -n, n - 1);
    }
  }
}

}  // namespace

// How JAX prints axis_name in messages: a single name bare, several as a tuple.
std::string AxesText(const Axes& axes) {
  return axes.names().size() == 1 ? axes.names()[0] : PyTuple(axes.names());
}

const CollectiveCall kBarrierCall{};

namespace {

void ShapeAllGather(CollectiveCall& call, int64_t rank) {
  const int64_t n = call.group_size;
  call.p0 = CanonicalizeAxis(call.p0, call.tiled ? rank : rank + 1);
  if (call.tiled) {
    call.out_shape[call.p0] *= n;
  } else {
    call.out_shape.insert(call.p0, n);
  }
}

void ShapePsumScatter(CollectiveCall& call, const std::vector<int64_t>& s) {
  const int64_t n = call.group_size;
  call.p0 = CanonicalizeAxis(call.p0, static_cast<int64_t>(s.size()));
  const int64_t size = s[call.p0];
  if (call.tiled) {
    if (size % n != 0) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "tiled reduce_scatter operand scatter dimension size {} must be divisible by shard_count {}", size, n);
    }
    call.out_shape[call.p0] = size / n;
  } else {
    if (size != n) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "reduce_scatter operand scatter dimension size {} must match shard count {}", size, n);
    }
    call.out_shape.erase(call.p0);
  }
}

void ShapeAllToAll(CollectiveCall& call, const std::vector<int64_t>& s, const Axes& axes) {
  const int64_t n = call.group_size;
  const int64_t r = static_cast<int64_t>(s.size());
  call.p0 = CanonicalizeAxis(call.p0, r);
  call.p1 = CanonicalizeAxis(call.p1, r);
  const int64_t size = s[call.p0];
  if (call.tiled) {
    if (size % n != 0) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "The size of all_to_all split_axis ({}) has to be divisible by the size of the named axis {} ({})",
                size, AxesText(axes), n);
    }
    call.out_shape[call.p0] /= n;
    call.out_shape[call.p1] *= n;
    return;
  }
  if (size != n) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "all_to_all requires the size of the mapped axis axis_name to equal x.shape[split_axis], but they "
              "are {} and {} respectively.",
              n, size);
  }
  if (call.p0 != call.p1) {
    call.out_shape.erase(call.p0);
    call.out_shape.insert(call.p1, n);
  }
}

}  // namespace

void ValidateCall(const Mesh& mesh, CollectiveCall& call, const Axes& axes, const PermutationPairs& raw_perm) {
  call.group_size = GroupSize(mesh, call.axes);
  if (call.op == OpKind::kBarrier) return;
  const Array& x = *call.input;
  call.out_dtype = x.dtype();
  call.out_shape.assign(x.shape());
  switch (call.op) {
    case OpKind::kPsum:
      if (x.dtype() == DType::kBool) call.out_dtype = DType::kI32;  // JAX: booleans are summed as int32
      break;
    case OpKind::kPmean:
      // psum(x) / n is true division: integers (and bools, summed as int32) become floating.
      if (x.dtype() == DType::kBool || x.dtype() == DType::kI32) call.out_dtype = DType::kF32;
      if (x.dtype() == DType::kI64) call.out_dtype = DType::kF64;
      break;
    case OpKind::kAllGather:
      ShapeAllGather(call, x.rank());
      break;
    case OpKind::kPsumScatter:
      ShapePsumScatter(call, x.shape());
      if (x.dtype() == DType::kBool) call.out_dtype = DType::kI32;
      break;
    case OpKind::kAllToAll:
      ShapeAllToAll(call, x.shape(), axes);
      break;
    case OpKind::kPpermute:
      ValidatePermutation(mesh, call, raw_perm);
      break;
    case OpKind::kBarrier:
    case OpKind::kPmax:
    case OpKind::kPmin:
      break;
  }
}

bool SameCall(const CollectiveCall& a, const CollectiveCall& b) {
  if (&a == &b) return true;
  if (a.op != b.op || !(a.axes == b.axes) || a.tiled != b.tiled || a.p0 != b.p0 || a.p1 != b.p1) return false;
  if ((a.input == nullptr) != (b.input == nullptr)) return false;
  if (a.input != nullptr) {
    if (a.input->dtype() != b.input->dtype() || a.input->shape() != b.input->shape() ||
        a.input->is_abstract() != b.input->is_abstract())
      return false;
  }
  return std::ranges::equal(a.perm, b.perm);
}

std::string DescribeCall(const Mesh& mesh, const CollectiveCall& call) {
  if (call.op == OpKind::kBarrier) return "barrier()";
  std::string out = fmt::format("{}({}{}, axes={}", OpName(call.op), call.input->ShapeString(),
                                call.input->is_abstract() ? "{abstract}" : "", PyTuple(AxesNames(mesh, call.axes)));
  switch (call.op) {
    case OpKind::kAllGather:
      out += fmt::format(", axis={}, tiled={}", call.p0, call.tiled ? "True" : "False");
      break;
    case OpKind::kPsumScatter:
      out += fmt::format(", scatter_dimension={}, tiled={}", call.p0, call.tiled ? "True" : "False");
      break;
    case OpKind::kAllToAll:
      out += fmt::format(", split_axis={}, concat_axis={}, tiled={}", call.p0, call.p1, call.tiled ? "True" : "False");
      break;
    case OpKind::kPpermute:
      out += fmt::format(", perm={}", PermText(call.perm));
      break;
    default:
      break;
  }
  return out + ")";
}

GroupInfo MakeGroupInfo(const Mesh& mesh, const AxesKey& key) {
  GroupInfo info;
  std::vector<std::string> names = AxesNames(mesh, key);
  info.groups = mesh.PositionGroups(names);
  info.group_of.assign(mesh.size(), 0);
  info.index_in_group.assign(mesh.size(), 0);
  for (size_t g = 0; g < info.groups.size(); ++g) {
    for (size_t k = 0; k < info.groups[g].size(); ++k) {
      info.group_of[info.groups[g][k]] = static_cast<int64_t>(g);
      info.index_in_group[info.groups[g][k]] = static_cast<int64_t>(k);
    }
  }
  return info;
}

CollectiveEvent MakeEvent(const Mesh& mesh, const CollectiveCall& call, const GroupInfo* groups, uint64_t sequence,
                          std::vector<std::string>* names) {
  CollectiveEvent event;
  event.op = call.op;
  *names = AxesNames(mesh, call.axes);
  event.axes = *names;
  event.group_size = call.group_size;
  event.num_groups = groups == nullptr ? 1 : static_cast<int64_t>(groups->groups.size());
  if (groups != nullptr) {
    event.groups = groups->groups;
    event.dtype = call.input->dtype();
    event.input_bytes_per_device = call.input->nbytes();
    event.output_bytes_per_device = NumElements(call.out_shape) * DTypeSize(call.out_dtype);
    event.abstract = call.input->is_abstract();
    event.permutation = call.perm;
  }
  event.sequence = sequence;
  return event;
}

std::string PositionRanges(const std::vector<int64_t>& positions) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < positions.size();) {
    size_t j = i;
    while (j + 1 < positions.size() && positions[j + 1] == positions[j] + 1) ++j;
    parts.push_back(j == i ? fmt::format("{}", positions[i]) : fmt::format("{}-{}", positions[i], positions[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string DescribeDevices(const Mesh& mesh, const std::vector<int64_t>& positions) {
  if (positions.empty()) return "none";
  std::string text = fmt::format("{} {}", positions.size() == 1 ? "position" : "positions", PositionRanges(positions));
  bool same = true;
  for (int64_t p : positions) same = same && mesh.DeviceAt(p) == p;
  if (!same) {
    std::vector<int> ids;
    for (int64_t p : positions) ids.push_back(mesh.DeviceAt(p));
    text += fmt::format(" (device ids {})", fmt::join(ids, ", "));
  }
  return text;
}

}  // namespace spmdsim::internal
