#include "sim/internal/collectives.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim::internal {

std::string_view OpName(OpKind op) {
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

AxesKey MakeAxesKey(const Mesh& mesh, const Axes& axes, std::string_view api) {
  AxesKey key;
  const auto& names = axes.names();
  for (const auto& name : names) {
    if (!mesh.HasAxis(name)) {
      // JAX (lax/parallel.py _check_axis_names).
      ThrowKind(ErrorCode::kNotFound, "NameError",
                "Found an unbound axis name: {}. To fix this, please call {} under `jax.shard_map`.", name, api);
    }
  }
  if (names.size() > 1) mesh.ValidateAxes(names, api);  // duplicates (no formatting on this hot path)
  if (names.size() > static_cast<size_t>(kMaxAxes)) {
    Throw(ErrorCode::kInvalidArgument, "{} over {} axes; at most {} are supported", api, names.size(), kMaxAxes);
  }
  key.count = static_cast<uint8_t>(names.size());
  for (size_t i = 0; i < names.size(); ++i) key.index[i] = static_cast<uint8_t>(mesh.AxisIndex(names[i]));
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

namespace {

// numpy/JAX canonicalize_axis (jax/_src/util.py).
int64_t CanonicalizeAxis(int64_t axis, int64_t num_dims) {
  if (!(-num_dims <= axis && axis < num_dims)) {
    ThrowKind(ErrorCode::kInvalidArgument, "ValueError", "axis {} is out of bounds for array of dimension {}", axis,
              num_dims);
  }
  return axis < 0 ? axis + num_dims : axis;
}

std::string PermText(const PermutationPairs& perm) {
  std::vector<std::string> pairs;
  for (const auto& [s, d] : perm) pairs.push_back(fmt::format("({}, {})", s, d));
  if (pairs.size() == 1) return fmt::format("({},)", pairs[0]);
  return fmt::format("({})", fmt::join(pairs, ", "));
}

int64_t PyMod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

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
  call.out_shape = s;
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
        call.out_shape.insert(call.out_shape.begin() + call.p0, n);
      }
      break;
    }
    case OpKind::kPsumScatter: {
      call.p0 = CanonicalizeAxis(call.p0, r);
      const int64_t size = s[call.p0];
      if (call.tiled) {
        if (size % n != 0) {
          ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
                    "tiled reduce_scatter operand scatter dimension size {} must be divisible by shard_count {}",
                    size, n);
        }
        call.out_shape[call.p0] = size / n;
      } else {
        if (size != n) {
          ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
                    "reduce_scatter operand scatter dimension size {} must match shard count {}", size, n);
        }
        call.out_shape.erase(call.out_shape.begin() + call.p0);
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
          ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
                    "The size of all_to_all split_axis ({}) has to be divisible by the size of the named axis {} ({})",
                    size, AxesText(axes), n);
        }
        call.out_shape[call.p0] /= n;
        call.out_shape[call.p1] *= n;
      } else {
        if (size != n) {
          ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
                    "all_to_all requires the size of the mapped axis axis_name to equal x.shape[split_axis], but they "
                    "are {} and {} respectively.",
                    n, size);
        }
        if (call.p0 != call.p1) {
          call.out_shape.erase(call.out_shape.begin() + call.p0);
          call.out_shape.insert(call.out_shape.begin() + call.p1, n);
        }
      }
      break;
    }
    case OpKind::kPpermute: {
      for (int i = 1; i < call.axes.count; ++i) {
        if (call.axes.index[i] < call.axes.index[i - 1]) {
          // JAX (lax/parallel.py _pcollectives_lowering_common, raise_on_ppermute_sort_diff).
          ThrowKind(ErrorCode::kInvalidArgument, "RuntimeError",
                    "Make sure that the axis_name passed to jax.lax.ppermute is in the same order as the axis_names "
                    "declared on the mesh. If you want to allow different order, you can disable the check via `with "
                    "jax.raise_on_ppermute_sort_diff(False):` context manager.");
        }
      }
      std::set<int64_t> sources, destinations;
      call.perm.clear();
      for (const auto& [src, dst] : raw_perm) {
        int64_t s0 = PyMod(src, n), d0 = PyMod(dst, n);
        sources.insert(s0);
        destinations.insert(d0);
        call.perm.emplace_back(s0, d0);
      }
      if (sources.size() != raw_perm.size() || destinations.size() != raw_perm.size()) {
        ThrowKind(ErrorCode::kInvalidArgument, "ValueError", "ppermute sources and destinations must be unique, got {}.",
                  PermText(raw_perm));
      }
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
  return a.perm == b.perm;
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

// out[i] = reduce over members k (in order) of in[k][offset + i], for i in [0, count).
// In is the stored type, Acc the result type (bool -> int32 for sums).
// Members are folded in up to four per pass over `out` (the chunk stays in L1), left to right, so each
// element is op(...op(op(in0, in1), in2)..., in[n-1]) exactly as one member at a time would compute it, with
// fewer passes: 1 at n <= 4, 2 at n <= 7.
template <typename In, typename Acc, typename Op>
void ReduceRange(const std::vector<const void*>& member_inputs, int64_t offset, int64_t count, Acc* out, Op op) {
  const auto input = [&](size_t k) { return static_cast<const In*>(member_inputs[k]) + offset; };
  const auto at = [](const In* in, int64_t i) { return static_cast<Acc>(in[i]); };
  const size_t n = member_inputs.size();
  // First pass: member 0 and up to three more.
  const In* a = input(0);
  size_t k = 1;
  switch (std::min<size_t>(n - 1, 3)) {
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
  k += std::min<size_t>(n - 1, 3);
  // Further passes: out and up to three more members.
  while (k < n) {
    const size_t take = std::min<size_t>(n - k, 3);
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

// Reduces the members' [offset, offset+count) into out (of out_dtype) for op.
void ReduceInto(OpKind op, DType in_dtype, DType out_dtype, const std::vector<const void*>& members, int64_t offset,
                int64_t count, void* out, int64_t group_size) {
  if (in_dtype == DType::kBool && (op == OpKind::kPsum || op == OpKind::kPsumScatter || op == OpKind::kPmean)) {
    // Sum bools as int32.
    int32_t* acc = op == OpKind::kPmean ? nullptr : static_cast<int32_t*>(out);
    std::vector<int32_t> tmp;
    if (acc == nullptr) {
      tmp.resize(count);
      acc = tmp.data();
    }
    const auto add = [](int32_t a, int32_t b) { return Add(a, b); };
    ReduceRange<bool, int32_t>(members, offset, count, acc, add);
    if (op == OpKind::kPmean) {
      float* o = static_cast<float*>(out);
      for (int64_t i = 0; i < count; ++i) o[i] = static_cast<float>(acc[i]) / static_cast<float>(group_size);
    }
    return;
  }
  VisitDType(in_dtype, [&](auto zero) {
    using T = decltype(zero);
    if (op == OpKind::kPmax || op == OpKind::kPmin) {
      if constexpr (std::is_same_v<T, bool>) {
        if (op == OpKind::kPmax) {
          ReduceRange<bool, bool>(members, offset, count, static_cast<bool*>(out), [](bool a, bool b) { return a || b; });
        } else {
          ReduceRange<bool, bool>(members, offset, count, static_cast<bool*>(out), [](bool a, bool b) { return a && b; });
        }
      } else if (op == OpKind::kPmax) {
        ReduceRange<T, T>(members, offset, count, static_cast<T*>(out), [](T a, T b) { return Max(a, b); });
      } else {
        ReduceRange<T, T>(members, offset, count, static_cast<T*>(out), [](T a, T b) { return Min(a, b); });
      }
      return;
    }
    if constexpr (!std::is_same_v<T, bool>) {
      const auto add = [](T a, T b) { return Add(a, b); };
      if (op != OpKind::kPmean) {
        ReduceRange<T, T>(members, offset, count, static_cast<T*>(out), add);
        return;
      }
      // pmean: the sum in T, then true division (JAX: psum(x) / n).
      if constexpr (std::is_floating_point_v<T> || kIsSmallFloat<T>) {
        T* o = static_cast<T*>(out);
        ReduceRange<T, T>(members, offset, count, o, add);
        if constexpr (kIsSmallFloat<T>) {
          for (int64_t i = 0; i < count; ++i) o[i] = T(static_cast<float>(o[i]) / static_cast<float>(group_size));
        } else {
          for (int64_t i = 0; i < count; ++i) o[i] = o[i] / static_cast<T>(group_size);
        }
      } else {
        std::vector<T> sums(static_cast<size_t>(count));
        ReduceRange<T, T>(members, offset, count, sums.data(), add);
        using F = std::conditional_t<std::is_same_v<T, int64_t>, double, float>;
        F* o = static_cast<F*>(out);
        for (int64_t i = 0; i < count; ++i) o[i] = static_cast<F>(sums[i]) / static_cast<F>(group_size);
      }
    }
  });
}

}  // namespace

void Plan::Clear() {
  inputs_.clear();
  outputs_.clear();
  result_source_.clear();
  zeros_.reset();
  num_units_ = 0;
  bytes_written_ = 0;
  ref_ = nullptr;
}

void Plan::Build(const Mesh& mesh, const GroupInfo& groups, const std::vector<const CollectiveCall*>& calls) {
  Clear();
  const CollectiveCall& ref = *calls[0];
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
  for (int64_t p = 0; p < num_devices; ++p) inputs_[p] = calls[p]->input->raw_data();

  if (op_ == OpKind::kPpermute) {
    // No bytes move: a receiver shares its source's buffer (values are immutable); others share one zero buffer.
    result_source_.assign(num_devices, -1);
    for (const auto& members : groups.groups) {
      for (const auto& [src, dst] : ref.perm) result_source_[members[dst]] = members[src];
    }
    outputs_.resize(num_devices);
    if (abstract_) return;
    for (int64_t p = 0; p < num_devices; ++p) {
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
  for (auto& out : outputs_) out = Buffer::Allocate(out_bytes);
  bytes_written_ = num_targets * out_bytes;
  if (op_ == OpKind::kAllGather) {
    units_per_target_ = n;  // one unit copies one member's value into the group's buffer
  } else if (per_group_output_) {
    units_per_target_ = std::max<int64_t>(1, (in_elements_ + kChunkElements - 1) / kChunkElements);
  } else {
    units_per_target_ = 1;  // one receiver's whole output
  }
  num_units_ = num_targets * units_per_target_;
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
  const int64_t target = unit / units_per_target_;
  const int64_t piece = unit % units_per_target_;
  const int64_t n = ref.group_size;
  const int64_t in_size = DTypeSize(in_dtype_);
  const int64_t out_size = DTypeSize(ref.out_dtype);
  const std::vector<int64_t>& s = ref.input->shape();

  switch (op_) {
    case OpKind::kPsum:
    case OpKind::kPmean:
    case OpKind::kPmax:
    case OpKind::kPmin: {
      const auto& members = groups_->groups[target];
      std::vector<const void*> member_inputs(members.size());
      for (size_t k = 0; k < members.size(); ++k) member_inputs[k] = inputs_[members[k]];
      const int64_t begin = piece * kChunkElements;
      const int64_t count = std::min(in_elements_, begin + kChunkElements) - begin;
      if (count <= 0) return;
      char* out = static_cast<char*>(outputs_[target]->data()) + begin * out_size;
      ReduceInto(op_, in_dtype_, ref.out_dtype, member_inputs, begin, count, out, n);
      return;
    }
    case OpKind::kAllGather: {
      // Output viewed as [outer, n, inner]: member k's value fills slot k of every outer row.
      const int64_t k = piece;
      const int64_t axis = ref.p0;
      int64_t outer = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= s[d];
      const int64_t inner_bytes = outer == 0 ? 0 : in_elements_ / outer * in_size;
      const char* in = static_cast<const char*>(inputs_[groups_->groups[target][k]]);
      char* out = static_cast<char*>(outputs_[target]->data());
      for (int64_t o = 0; o < outer; ++o) {
        std::memcpy(out + (o * n + k) * inner_bytes, in + o * inner_bytes, static_cast<size_t>(inner_bytes));
      }
      return;
    }
    case OpKind::kPsumScatter: {
      // Input viewed as [outer, n, inner]; receiver m gets the members' sum of block m: [outer, inner].
      const int64_t position = target;
      const int64_t m = groups_->index_in_group[position];
      const auto& members = groups_->groups[groups_->group_of[position]];
      const int64_t d = ref.p0;
      int64_t outer = 1;
      for (int64_t i = 0; i < d; ++i) outer *= s[i];
      const int64_t inner = outer == 0 ? 0 : in_elements_ / outer / n;
      std::vector<const void*> member_inputs(members.size());
      char* out = static_cast<char*>(outputs_[position]->data());
      for (int64_t o = 0; o < outer; ++o) {
        const int64_t offset = (o * n + m) * inner;
        for (size_t k = 0; k < members.size(); ++k) member_inputs[k] = inputs_[members[k]];
        ReduceInto(OpKind::kPsumScatter, in_dtype_, ref.out_dtype, member_inputs, offset, inner,
                   out + o * inner * out_size, n);
      }
      return;
    }
    case OpKind::kAllToAll: {
      const int64_t position = target;
      const int64_t m = groups_->index_in_group[position];
      const auto& members = groups_->groups[groups_->group_of[position]];
      // Untiled all_to_all is the tiled one on x with a size-1 dimension inserted at concat_axis, then that
      // dimension squeezed (lax/parallel.py); size-1 dimensions do not change the row-major layout.
      std::vector<int64_t> shape = s;
      int64_t a = ref.p0, b = ref.p1;
      if (!ref.tiled && a != b) {
        if (a < b) {
          b += 1;
        } else {
          a += 1;
        }
        shape.insert(shape.begin() + b, 1);
      }
      const int64_t rank = static_cast<int64_t>(shape.size());
      const int64_t c = shape[a] / n;
      std::vector<int64_t> out_shape = shape;
      out_shape[a] = c;
      out_shape[b] *= n;
      if (a == b) out_shape[a] = shape[a];
      const int64_t q = std::max(a, b);
      int64_t inner = 1;
      for (int64_t i = q + 1; i < rank; ++i) inner *= shape[i];
      std::vector<int64_t> in_strides(rank);
      int64_t stride = 1;
      for (int64_t i = rank - 1; i >= 0; --i) {
        in_strides[i] = stride;
        stride *= shape[i];
      }
      int64_t steps = 1;
      for (int64_t i = 0; i <= q; ++i) steps *= out_shape[i];
      std::vector<int64_t> idx(q + 1, 0);
      char* out = static_cast<char*>(outputs_[position]->data());
      const int64_t run_bytes = inner * in_size;
      for (int64_t step = 0; step < steps; ++step) {
        int64_t k;
        int64_t src_offset = 0;
        for (int64_t i = 0; i <= q; ++i) {
          int64_t j = idx[i];
          if (a != b) {
            if (i == b) j = idx[b] % shape[b];
            if (i == a) j = m * c + idx[a];
          } else if (i == a) {
            j = m * c + idx[a] % c;
          }
          src_offset += j * in_strides[i];
        }
        k = a != b ? idx[b] / shape[b] : idx[a] / c;
        const char* in = static_cast<const char*>(inputs_[members[k]]);
        std::memcpy(out + step * run_bytes, in + src_offset * in_size, static_cast<size_t>(run_bytes));
        for (int64_t i = q; i >= 0; --i) {  // odometer over out_shape[0..q]
          if (++idx[i] < out_shape[i]) break;
          idx[i] = 0;
        }
      }
      return;
    }
    case OpKind::kBarrier:
    case OpKind::kPpermute:
      return;
  }
}

}  // namespace spmdsim::internal
