#include "sim/internal/collectives.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <ranges>
#include <type_traits>

#include <fmt/format.h>

#include "common/error.h"
#include "common/shape.h"
#include "common/strings.h"

namespace spmdsim {

std::string_view CollectiveName(CollectiveKind op) {
  using OpKind = CollectiveKind;
  switch (op) {
    case OpKind::kBarrier: return "barrier";
    case OpKind::kPsum: return "psum";
    case OpKind::kPmean: return "pmean";
    case OpKind::kPmax: return "pmax";
    case OpKind::kPmin: return "pmin";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kPsumScatter: return "psum_scatter";
    case OpKind::kAllToAll: return "all_to_all";
    case OpKind::kPpermute: return "ppermute";
  }
  return "unknown";
}

}  // namespace spmdsim

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
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "axis {} is out of bounds for array of dimension {}", axis,
              num_dims);
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
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "ppermute sources and destinations must be unique, got {}.",
              PermText(raw_perm));
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

void ValidateCall(const Mesh& mesh, CollectiveCall& call, const Axes& axes, const PermutationPairs& raw_perm) {
  call.group_size = GroupSize(mesh, call.axes);
  const int64_t n = call.group_size;
  if (call.op == OpKind::kBarrier) return;
  const Array& x = *call.input;
  const std::vector<int64_t>& s = x.shape();
  const int64_t r = x.rank();
  call.out_dtype = x.dtype();
  call.out_shape.assign(s);
  switch (call.op) {
    case OpKind::kBarrier:
      break;
    case OpKind::kPsum:
      if (x.dtype() == DType::kBool) call.out_dtype = DType::kI32;  // JAX: booleans are summed as int32
      break;
    case OpKind::kPmean:
      // psum(x) / n is true division: integers (and bools, summed as int32) become floating.
      if (x.dtype() == DType::kBool || x.dtype() == DType::kI32) call.out_dtype = DType::kF32;
      if (x.dtype() == DType::kI64) call.out_dtype = DType::kF64;
      break;
    case OpKind::kPmax:
    case OpKind::kPmin:
      break;
    case OpKind::kAllGather: {
      call.p0 = CanonicalizeAxis(call.p0, call.tiled ? r : r + 1);
      if (call.tiled) {
        call.out_shape[call.p0] *= n;
      } else {
        call.out_shape.insert(call.p0, n);
      }
      break;
    }
    case OpKind::kPsumScatter: {
      call.p0 = CanonicalizeAxis(call.p0, r);
      const int64_t size = s[call.p0];
      if (call.tiled) {
        if (size % n != 0) {
          ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                    "tiled reduce_scatter operand scatter dimension size {} must be divisible by shard_count {}",
                    size, n);
        }
        call.out_shape[call.p0] = size / n;
      } else {
        if (size != n) {
          ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                    "reduce_scatter operand scatter dimension size {} must match shard count {}", size, n);
        }
        call.out_shape.erase(call.p0);
      }
      if (x.dtype() == DType::kBool) call.out_dtype = DType::kI32;
      break;
    }
    case OpKind::kAllToAll: {
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
      } else {
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
      break;
    }
    case OpKind::kPpermute: {
      ValidatePermutation(mesh, call, raw_perm);
      break;
    }
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

// ---------------------------------------------------------------------------------------------------------
// Kernels. Every output element is computed from the group's members in in-group order, whatever unit
// range a worker executes, so results do not depend on the number of workers.

namespace {

constexpr int64_t kChunkElements = 8192;  // reduction work per unit: 32 KiB of float32 (fits L1+L2 comfortably)

template <typename F>
void VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: f(float{}); return;
    case DType::kF64: f(double{}); return;
    case DType::kBF16: f(Eigen::bfloat16{}); return;
    case DType::kF16: f(Eigen::half{}); return;
    case DType::kI32: f(int32_t{}); return;
    case DType::kI64: f(int64_t{}); return;
    case DType::kBool: f(bool{}); return;
    default: break;  // not an array dtype
  }
}

template <typename T>
constexpr bool kIsSmallFloat = std::is_same_v<T, Eigen::bfloat16> || std::is_same_v<T, Eigen::half>;

// a + b in T (integers wrap, as XLA's do; 16-bit floats round after every addition).
template <typename T>
inline T Add(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else if constexpr (kIsSmallFloat<T>) {
    return T(static_cast<float>(a) + static_cast<float>(b));
  } else {
    return a + b;
  }
}

template <typename T>
inline bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else if constexpr (kIsSmallFloat<T>) {
    return std::isnan(static_cast<float>(v));
  } else {
    return false;
  }
}

// XLA's max/min propagate NaN.
template <typename T>
inline T Max(T a, T b) {
  if (IsNan(a)) return a;
  if (IsNan(b)) return b;
  return a < b ? b : a;
}
template <typename T>
inline T Min(T a, T b) {
  if (IsNan(a)) return a;
  if (IsNan(b)) return b;
  return b < a ? b : a;
}

// Where a reduction reads and writes: out[r * count + i] = reduce over members k (in order) of
// in[k][offset + r * stride + i], for r in [0, rows) and i in [0, count).
struct ReduceShape {
  int64_t offset = 0;
  int64_t rows = 1;
  int64_t stride = 0;
  int64_t count = 0;
  int64_t size() const { return rows * count; }
};

// Below this many elements a row is reduced element by element (every member's value, then the next
// element) rather than member by member over the row: the same additions in the same order, without a pass
// per member over a handful of elements.
constexpr int64_t kShortRow = 16;

// out[i] = op(...op(op(out[i], members[from][offset + i]), members[from + 1][...])..., members[n - 1][...]): the
// running values in `out` folded on with members [from, n), up to three per pass over `out`.
template <typename In, typename Acc, typename Op>
void FoldMore(const void* const* members, int64_t from, int64_t n, int64_t offset, int64_t count, Acc* out, Op op) {
  const auto input = [&](int64_t k) { return static_cast<const In*>(members[k]) + offset; };
  const auto at = [](const In* in, int64_t i) { return static_cast<Acc>(in[i]); };
  for (int64_t k = from; k < n;) {
    const int64_t take = std::min<int64_t>(n - k, 3);
    const In* b = input(k);
    if (take == 1) {
      for (int64_t i = 0; i < count; ++i) out[i] = op(out[i], at(b, i));
    } else if (take == 2) {
      const In* c = input(k + 1);
      for (int64_t i = 0; i < count; ++i) out[i] = op(op(out[i], at(b, i)), at(c, i));
    } else {
      const In *c = input(k + 1), *d = input(k + 2);
      for (int64_t i = 0; i < count; ++i) out[i] = op(op(op(out[i], at(b, i)), at(c, i)), at(d, i));
    }
    k += take;
  }
}

// out[i] = op over members k (in order) of members[k][offset + i], for i in [0, count): a chunk that stays in
// L1. Members are folded in up to four per pass over `out`, left to right, so each element is
// op(...op(op(in0, in1), in2)..., in[n-1]) exactly as one member at a time would compute it, with fewer passes
// (1 at n <= 4, 2 at n <= 7): a 16 MiB psum moved 1.2x memcpy's rate on the same bytes (docs/runtime.md).
template <typename In, typename Acc, typename Op>
void FoldChunk(const void* const* members, int64_t n, int64_t offset, int64_t count, Acc* out, Op op) {
  const auto input = [&](int64_t k) { return static_cast<const In*>(members[k]) + offset; };
  const auto at = [](const In* in, int64_t i) { return static_cast<Acc>(in[i]); };
  const In* a = input(0);
  const int64_t first = std::min<int64_t>(n - 1, 3);  // members folded in with member 0 in the first pass
  switch (first) {
    case 0:
      for (int64_t i = 0; i < count; ++i) out[i] = at(a, i);
      break;
    case 1: {
      const In* b = input(1);
      for (int64_t i = 0; i < count; ++i) out[i] = op(at(a, i), at(b, i));
      break;
    }
    case 2: {
      const In *b = input(1), *c = input(2);
      for (int64_t i = 0; i < count; ++i) out[i] = op(op(at(a, i), at(b, i)), at(c, i));
      break;
    }
    default: {
      const In *b = input(1), *c = input(2), *d = input(3);
      for (int64_t i = 0; i < count; ++i) out[i] = op(op(op(at(a, i), at(b, i)), at(c, i)), at(d, i));
      break;
    }
  }
  FoldMore<In, Acc>(members, 1 + first, n, offset, count, out, op);  // further passes
}

// In is the stored type, Acc the result type (bool -> int32 for sums).
template <typename In, typename Acc, typename Op>
void ReduceRange(const void* const* members, int64_t num_members, const ReduceShape& shape, Acc* out, Op op) {
  for (int64_t r = 0; r < shape.rows; ++r) {
    const int64_t base = shape.offset + r * shape.stride;
    Acc* o = out + r * shape.count;
    if (shape.count < kShortRow) {
      for (int64_t i = 0; i < shape.count; ++i) {
        Acc acc = static_cast<Acc>(static_cast<const In*>(members[0])[base + i]);
        for (int64_t k = 1; k < num_members; ++k) {
          acc = op(acc, static_cast<Acc>(static_cast<const In*>(members[k])[base + i]));
        }
        o[i] = acc;
      }
      continue;
    }
    // Over chunks that stay in the caches.
    for (int64_t begin = 0; begin < shape.count; begin += kChunkElements) {
      FoldChunk<In, Acc>(members, num_members, base + begin, std::min(shape.count - begin, kChunkElements), o + begin, op);
    }
  }
}

// Calls f(In{}, Acc{}, fn) with the stored type In, the type Acc of the running value, and the binary op of a
// reduction `op` over `in_dtype` (pmean: the sum; its division is FinishMean's).
template <typename F>
void VisitFold(OpKind op, DType in_dtype, F&& f) {
  const bool sum = op == OpKind::kPsum || op == OpKind::kPsumScatter || op == OpKind::kPmean;
  if (in_dtype == DType::kBool && sum) {  // bools sum as int32
    f(bool{}, int32_t{}, [](int32_t a, int32_t b) { return Add(a, b); });
    return;
  }
  VisitDType(in_dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      if (op == OpKind::kPmax) {
        f(bool{}, bool{}, [](bool a, bool b) { return a || b; });
      } else {
        f(bool{}, bool{}, [](bool a, bool b) { return a && b; });
      }
    } else if (op == OpKind::kPmax) {
      f(T{}, T{}, [](T a, T b) { return Max(a, b); });
    } else if (op == OpKind::kPmin) {
      f(T{}, T{}, [](T a, T b) { return Min(a, b); });
    } else {
      f(T{}, T{}, [](T a, T b) { return Add(a, b); });
    }
  });
}

// pmean's division of the group's sums (of the fold's type) into out: JAX's psum(x) / n, in the input's float
// type, or float32 (bool, int32) / float64 (int64) for the others.
void FinishMean(DType in_dtype, const void* sums, int64_t count, void* out, int64_t group_size) {
  if (in_dtype == DType::kBool) {
    const int32_t* acc = static_cast<const int32_t*>(sums);
    float* o = static_cast<float*>(out);
    for (int64_t i = 0; i < count; ++i) o[i] = static_cast<float>(acc[i]) / static_cast<float>(group_size);
    return;
  }
  VisitDType(in_dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* acc = static_cast<const T*>(sums);
    if constexpr (kIsSmallFloat<T>) {
      T* o = static_cast<T*>(out);
      for (int64_t i = 0; i < count; ++i) o[i] = T(static_cast<float>(acc[i]) / static_cast<float>(group_size));
    } else if constexpr (std::is_floating_point_v<T>) {
      T* o = static_cast<T*>(out);
      for (int64_t i = 0; i < count; ++i) o[i] = acc[i] / static_cast<T>(group_size);
    } else if constexpr (!std::is_same_v<T, bool>) {
      using F = std::conditional_t<std::is_same_v<T, int64_t>, double, float>;
      F* o = static_cast<F*>(out);
      for (int64_t i = 0; i < count; ++i) o[i] = static_cast<F>(acc[i]) / static_cast<F>(group_size);
    }
  });
}

// Reduces the members' elements at `shape` into out (of out_dtype) for op.
void ReduceInto(OpKind op, DType in_dtype, const void* const* members, int64_t num_members,
                const ReduceShape& shape, void* out, int64_t group_size) {
  const int64_t count = shape.size();
  VisitFold(op, in_dtype, [&](auto in, auto acc_zero, auto fn) {
    using In = decltype(in);
    using Acc = decltype(acc_zero);
    if constexpr (std::is_integral_v<Acc> && !std::is_same_v<Acc, bool>) {
      if (op == OpKind::kPmean) {  // integer sums, then a float result
        std::vector<Acc> sums(static_cast<size_t>(count));
        ReduceRange<In, Acc>(members, num_members, shape, sums.data(), fn);
        FinishMean(in_dtype, sums.data(), count, out, group_size);
        return;
      }
    }
    // The fold has the result's type: in place (pmean of floats: divided in place).
    ReduceRange<In, Acc>(members, num_members, shape, static_cast<Acc*>(out), fn);
    if (op == OpKind::kPmean) FinishMean(in_dtype, out, count, out, group_size);
  });
}

// all_gather rows shorter than this are gathered a range of output rows per unit (every member's row, in
// order), not a member per unit: writes stay sequential and workers do not share the output's cache lines.
constexpr int64_t kShortGatherRowBytes = 256;
constexpr int64_t kGatherUnitBytes = 64 << 10;  // output bytes per unit of a row-range all_gather
// psum_scatter blocks (a receiver's part of one outer row) shorter than a cache line are reduced a range of
// outer rows per unit, for every receiver of the group at once.
constexpr int64_t kShortScatterBlockBytes = 64;

}  // namespace

DType FoldDType(OpKind op, DType in_dtype) {
  const bool sum = op == OpKind::kPsum || op == OpKind::kPsumScatter || op == OpKind::kPmean;
  return in_dtype == DType::kBool && sum ? DType::kI32 : in_dtype;
}

void FoldInto(OpKind op, DType in_dtype, const void* const* members, int64_t num_members, int64_t offset,
              int64_t count, void* acc, bool continue_acc) {
  VisitFold(op, in_dtype, [&](auto in, auto acc_zero, auto fn) {
    using In = decltype(in);
    using Acc = decltype(acc_zero);
    Acc* out = static_cast<Acc*>(acc);
    for (int64_t begin = 0; begin < count; begin += kChunkElements) {  // chunks that stay in the caches
      const int64_t n = std::min(count - begin, kChunkElements);
      if (continue_acc) {
        FoldMore<In, Acc>(members, 0, num_members, offset + begin, n, out + begin, fn);
      } else {
        FoldChunk<In, Acc>(members, num_members, offset + begin, n, out + begin, fn);
      }
    }
  });
}

void FinishFold(OpKind op, DType in_dtype, const void* acc, int64_t count, void* out, int64_t group_size) {
  if (op == OpKind::kPmean) {
    FinishMean(in_dtype, acc, count, out, group_size);
  } else if (acc != out) {
    std::memcpy(out, acc, static_cast<size_t>(count * DTypeSize(FoldDType(op, in_dtype))));
  }
}

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
  inputs_.clear();
  group_inputs_.clear();
  outputs_.clear();
  result_source_.clear();
  zeros_.reset();
  num_units_ = 0;
  bytes_written_ = 0;
  ref_ = nullptr;
  active_targets_.clear();
}

void Plan::Build(const Mesh& mesh, const GroupInfo& groups, const std::vector<const CollectiveCall*>& calls,
                 const CollectiveCall* ref_call, const std::vector<uint8_t>* local,
                 const std::vector<uint8_t>* elsewhere) {
  Clear();
  const CollectiveCall& ref = ref_call != nullptr ? *ref_call : *calls[0];
  ref_ = &ref;
  op_ = ref.op;
  groups_ = &groups;
  if (op_ == OpKind::kBarrier) return;
  const int64_t num_devices = static_cast<int64_t>(calls.size());
  in_dtype_ = ref.input->dtype();
  in_elements_ = ref.input->size();
  out_elements_ = NumElements(ref.out_shape);
  abstract_ = ref.input->is_abstract();
  const int64_t out_bytes = out_elements_ * DTypeSize(ref.out_dtype);
  const int64_t num_groups = static_cast<int64_t>(groups.groups.size());
  const int64_t n = ref.group_size;
  per_group_output_ = op_ == OpKind::kPsum || op_ == OpKind::kPmean || op_ == OpKind::kPmax || op_ == OpKind::kPmin ||
                      op_ == OpKind::kAllGather;
  inputs_.resize(num_devices);
  if (local == nullptr) {
    for (int64_t p = 0; p < num_devices; ++p) inputs_[p] = calls[p]->input->raw_data();
  } else {
    for (int64_t p = 0; p < num_devices; ++p) inputs_[p] = calls[p] != nullptr ? calls[p]->input->raw_data() : nullptr;
  }

  if (op_ == OpKind::kPpermute) {
    // No bytes move: a receiver shares its source's buffer (values are immutable); others share one zero buffer.
    result_source_.assign(num_devices, -1);
    for (const auto& members : groups.groups) {
      for (const auto& [src, dst] : ref.perm) result_source_[members[dst]] = members[src];
    }
    outputs_.resize(num_devices);
    if (abstract_) return;
    for (int64_t p = 0; p < num_devices; ++p) {
      if (local != nullptr && (*local)[p] == 0) continue;
      if (result_source_[p] >= 0) {
        outputs_[p] = ArrayAccess::buffer(*calls[result_source_[p]]->input);
      } else {
        if (zeros_ == nullptr) zeros_ = Buffer::AllocateZeroed(out_bytes);
        outputs_[p] = zeros_;
      }
    }
    bytes_written_ = zeros_ ? out_bytes : 0;
    return;
  }

  const int64_t num_targets = per_group_output_ ? num_groups : num_devices;
  outputs_.resize(num_targets);
  if (abstract_) return;
  group_inputs_.resize(num_groups * n);
  for (int64_t g = 0; g < num_groups; ++g) {
    for (int64_t k = 0; k < n; ++k) group_inputs_[g * n + k] = inputs_[groups.groups[g][k]];
  }
  if (local == nullptr) {
    for (auto& out : outputs_) out = Buffer::Allocate(out_bytes);
    bytes_written_ = num_targets * out_bytes;
  } else {
    // Only the targets of local positions: a group with a local member, or a local position.
    for (int64_t t = 0; t < num_targets; ++t) {
      bool wanted = false;
      if (per_group_output_) {
        for (int64_t p : groups.groups[t]) wanted = wanted || (*local)[p] != 0;
      } else {
        wanted = (*local)[t] != 0;
      }
      if (!wanted) continue;
      outputs_[t] = Buffer::Allocate(out_bytes);
      bytes_written_ += out_bytes;
    }
  }
  const std::vector<int64_t>& s = ref.input->shape();
  const int64_t in_size = DTypeSize(in_dtype_);
  units_per_target_ = 1;
  int64_t unit_targets = num_targets;
  switch (op_) {
    case OpKind::kPsum:
    case OpKind::kPmean:
    case OpKind::kPmax:
    case OpKind::kPmin:
      units_per_target_ = std::max<int64_t>(1, (in_elements_ + kChunkElements - 1) / kChunkElements);
      break;
    case OpKind::kAllGather: {
      // Output viewed as [outer, n, inner] around the gather axis: member k's [outer, inner] fills slot k.
      outer_ = 1;
      for (int64_t d = 0; d < ref.p0; ++d) outer_ *= s[d];
      inner_ = outer_ == 0 ? 0 : in_elements_ / outer_;
      rows_per_unit_ = 0;
      units_per_target_ = n;  // one unit copies one member's value into the group's buffer
      if (outer_ > 1 && inner_ * in_size < kShortGatherRowBytes) {
        // Short rows: a unit writes a range of output rows, every member's row in turn.
        rows_per_unit_ = std::max<int64_t>(1, kGatherUnitBytes / std::max<int64_t>(1, n * inner_ * in_size));
        units_per_target_ = (outer_ + rows_per_unit_ - 1) / rows_per_unit_;
      }
      break;
    }
    case OpKind::kPsumScatter:
      // Input viewed as [outer, n, inner] around the scatter dimension; one unit per receiver.
      outer_ = 1;
      for (int64_t d = 0; d < ref.p0; ++d) outer_ *= s[d];
      inner_ = outer_ == 0 ? 0 : in_elements_ / outer_ / n;
      rows_per_unit_ = 0;
      if (outer_ > 1 && inner_ > 0 && inner_ * in_size < kShortScatterBlockBytes) {
        // Short blocks: a receiver would read a few bytes of every cache line of the members' inputs, and
        // every receiver the same lines. Instead a unit reduces a contiguous range of whole outer rows (for
        // all receivers at once, each line read once) and scatters the sums to the receivers.
        rows_per_unit_ = std::max<int64_t>(1, kChunkElements / (n * inner_));
        units_per_target_ = (outer_ + rows_per_unit_ - 1) / rows_per_unit_;
        unit_targets = num_groups;  // a unit's target is a group
      }
      break;
    case OpKind::kAllToAll: {
      AllToAllGeometry& g = scratch_geometry_;
      MakeAllToAllGeometry(ref, &g);
      src_step_ = g.src_step;
      dst_step_ = g.dst_step;
      copy_.Init(g.shape, g.src_strides, g.dst_strides, in_size);
      break;
    }
    case OpKind::kBarrier:
    case OpKind::kPpermute:
      break;
  }
  if (local != nullptr) {
    for (int64_t t = 0; t < unit_targets; ++t) {
      bool wanted = false;
      const bool group_target = per_group_output_ || (op_ == OpKind::kPsumScatter && rows_per_unit_ > 0);
      if (group_target) {
        for (int64_t p : groups.groups[t]) wanted = wanted || (*local)[p] != 0;
      } else {
        wanted = (*local)[t] != 0;
      }
      if (elsewhere != nullptr) wanted = wanted && (*elsewhere)[group_target ? t : groups.group_of[t]] == 0;
      if (wanted) active_targets_.push_back(t);
    }
    unit_targets = static_cast<int64_t>(active_targets_.size());
  }
  num_units_ = unit_targets * units_per_target_;
}

const std::shared_ptr<Buffer>& Plan::ResultBuffer(int64_t position) const {
  if (per_group_output_ && op_ != OpKind::kPpermute) return outputs_[groups_->group_of[position]];
  return outputs_[position];
}

void Plan::Execute(int64_t unit_begin, int64_t unit_end) const {
  for (int64_t u = unit_begin; u < unit_end; ++u) ExecuteUnit(u);
}

void Plan::ExecuteUnit(int64_t unit) const {
  const CollectiveCall& ref = *ref_;
  const int64_t target = active_targets_.empty() ? unit / units_per_target_ : active_targets_[unit / units_per_target_];
  const int64_t piece = unit % units_per_target_;
  const int64_t n = ref.group_size;
  const int64_t in_size = DTypeSize(in_dtype_);
  const int64_t out_size = DTypeSize(ref.out_dtype);

  switch (op_) {
    case OpKind::kPsum:
    case OpKind::kPmean:
    case OpKind::kPmax:
    case OpKind::kPmin: {
      const int64_t begin = piece * kChunkElements;
      const int64_t count = std::min(in_elements_, begin + kChunkElements) - begin;
      if (count <= 0) return;
      char* out = static_cast<char*>(outputs_[target]->data()) + begin * out_size;
      ReduceInto(op_, in_dtype_, &group_inputs_[target * n], n, {.offset = begin, .count = count}, out, n);
      return;
    }
    case OpKind::kAllGather: {
      const void* const* members = &group_inputs_[target * n];
      char* out = static_cast<char*>(outputs_[target]->data());
      const int64_t row_bytes = inner_ * in_size;
      if (rows_per_unit_ == 0) {  // member `piece`'s rows into slot `piece` of every output row
        const char* in = static_cast<const char*>(members[piece]);
        CopyRuns(in, out + piece * row_bytes, outer_, row_bytes, n * row_bytes, row_bytes);
        return;
      }
      // Output rows [begin, end) (a region that stays in the caches), member by member.
      const int64_t begin = piece * rows_per_unit_;
      const int64_t end = std::min(outer_, begin + rows_per_unit_);
      for (int64_t k = 0; k < n; ++k) {
        CopyRuns(static_cast<const char*>(members[k]) + begin * row_bytes, out + (begin * n + k) * row_bytes,
                 end - begin, row_bytes, n * row_bytes, row_bytes);
      }
      return;
    }
    case OpKind::kPsumScatter: {
      // Receiver m gets the members' sum of block m of every outer row: [outer, inner].
      if (rows_per_unit_ > 0) {  // group `target`, outer rows [begin, end): reduce them whole, then scatter
        const int64_t begin = piece * rows_per_unit_;
        const int64_t end = std::min(outer_, begin + rows_per_unit_);
        const int64_t row = n * inner_;  // elements of one outer row
        const auto sums = std::make_unique<char[]>(static_cast<size_t>((end - begin) * row * out_size));
        ReduceInto(OpKind::kPsumScatter, in_dtype_, &group_inputs_[target * n], n,
                   {.offset = begin * row, .count = (end - begin) * row}, sums.get(), n);
        const int64_t block_bytes = inner_ * out_size;
        const auto& members = groups_->groups[target];
        for (int64_t m = 0; m < n; ++m) {
          if (outputs_[members[m]] == nullptr) continue;  // another process's position
          char* out = static_cast<char*>(outputs_[members[m]]->data()) + begin * block_bytes;
          CopyRuns(sums.get() + m * block_bytes, out, end - begin, row * out_size, block_bytes, block_bytes);
        }
        return;
      }
      const int64_t position = target;
      const int64_t m = groups_->index_in_group[position];
      const void* const* members = &group_inputs_[groups_->group_of[position] * n];
      ReduceInto(OpKind::kPsumScatter, in_dtype_, members, n,
                 {.offset = m * inner_, .rows = outer_, .stride = n * inner_, .count = inner_},
                 outputs_[position]->data(), n);
      return;
    }
    case OpKind::kAllToAll: {
      const int64_t position = target;
      const int64_t m = groups_->index_in_group[position];
      const void* const* members = &group_inputs_[groups_->group_of[position] * n];
      char* out = static_cast<char*>(outputs_[position]->data());
      for (int64_t k = 0; k < n; ++k) {
        copy_.Run(static_cast<const char*>(members[k]) + m * src_step_, out + k * dst_step_);
      }
      return;
    }
    case OpKind::kBarrier:
    case OpKind::kPpermute:
      return;
  }
}

}  // namespace spmdsim::internal
