#include "sim/internal/execute.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "common/shape.h"

namespace spmdsim::internal {
namespace {

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
      FoldChunk<In, Acc>(members, num_members, base + begin, std::min(shape.count - begin, kChunkElements), o + begin,
                         op);
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


// One unit of each op (Plan's comment says what a unit is). `target` is a result buffer (or, for a psum_scatter
// over short blocks, a group); `piece` the unit's part of it.

void ReduceUnit(const Plan& plan, int64_t target, int64_t piece) {
  const int64_t n = plan.ref->group_size;
  const int64_t begin = piece * kChunkElements;
  const int64_t count = std::min(plan.in_elements, begin + kChunkElements) - begin;
  if (count <= 0) return;
  char* out = static_cast<char*>(plan.outputs[target]->data()) + begin * DTypeSize(plan.ref->out_dtype);
  ReduceInto(plan.op, plan.in_dtype, &plan.group_inputs[target * n], n, {.offset = begin, .count = count}, out, n);
}

void AllGatherUnit(const Plan& plan, int64_t target, int64_t piece) {
  const int64_t n = plan.ref->group_size;
  const void* const* members = &plan.group_inputs[target * n];
  char* out = static_cast<char*>(plan.outputs[target]->data());
  const int64_t row_bytes = plan.inner * DTypeSize(plan.in_dtype);
  if (plan.rows_per_unit == 0) {  // member `piece`'s rows into slot `piece` of every output row
    const char* in = static_cast<const char*>(members[piece]);
    CopyRuns(in, out + piece * row_bytes, plan.outer, row_bytes, n * row_bytes, row_bytes);
    return;
  }
  // Output rows [begin, end) (a region that stays in the caches), member by member.
  const int64_t begin = piece * plan.rows_per_unit;
  const int64_t end = std::min(plan.outer, begin + plan.rows_per_unit);
  for (int64_t k = 0; k < n; ++k) {
    CopyRuns(static_cast<const char*>(members[k]) + begin * row_bytes, out + (begin * n + k) * row_bytes,
             end - begin, row_bytes, n * row_bytes, row_bytes);
  }
}

// Receiver m gets the members' sum of block m of every outer row: [outer, inner].
void PsumScatterUnit(const Plan& plan, int64_t target, int64_t piece) {
  const int64_t n = plan.ref->group_size;
  const int64_t out_size = DTypeSize(plan.ref->out_dtype);
  if (plan.rows_per_unit == 0) {  // one receiver: `target` is its position
    const int64_t m = plan.groups->index_in_group[target];
    const void* const* members = &plan.group_inputs[plan.groups->group_of[target] * n];
    ReduceInto(OpKind::kPsumScatter, plan.in_dtype, members, n,
               {.offset = m * plan.inner, .rows = plan.outer, .stride = n * plan.inner, .count = plan.inner},
               plan.outputs[target]->data(), n);
    return;
  }
  // Group `target`, outer rows [begin, end): reduce them whole, then scatter.
  const int64_t begin = piece * plan.rows_per_unit;
  const int64_t end = std::min(plan.outer, begin + plan.rows_per_unit);
  const int64_t row = n * plan.inner;  // elements of one outer row
  const auto sums = std::make_unique<char[]>(static_cast<size_t>((end - begin) * row * out_size));
  ReduceInto(OpKind::kPsumScatter, plan.in_dtype, &plan.group_inputs[target * n], n,
             {.offset = begin * row, .count = (end - begin) * row}, sums.get(), n);
  const int64_t block_bytes = plan.inner * out_size;
  const auto& members = plan.groups->groups[target];
  for (int64_t m = 0; m < n; ++m) {
    if (plan.outputs[members[m]] == nullptr) continue;  // another process's position
    char* out = static_cast<char*>(plan.outputs[members[m]]->data()) + begin * block_bytes;
    CopyRuns(sums.get() + m * block_bytes, out, end - begin, row * out_size, block_bytes, block_bytes);
  }
}

void AllToAllUnit(const Plan& plan, int64_t position) {
  const int64_t n = plan.ref->group_size;
  const int64_t m = plan.groups->index_in_group[position];
  const void* const* members = &plan.group_inputs[plan.groups->group_of[position] * n];
  char* out = static_cast<char*>(plan.outputs[position]->data());
  for (int64_t k = 0; k < n; ++k) {
    plan.copy.Run(static_cast<const char*>(members[k]) + m * plan.src_step, out + k * plan.dst_step);
  }
}

void ExecuteUnit(const Plan& plan, int64_t unit) {
  const int64_t target = plan.active_targets.empty() ? unit / plan.units_per_target
                                                      : plan.active_targets[unit / plan.units_per_target];
  const int64_t piece = unit % plan.units_per_target;
  switch (plan.op) {
    case OpKind::kPsum:
    case OpKind::kPmean:
    case OpKind::kPmax:
    case OpKind::kPmin:
      ReduceUnit(plan, target, piece);
      return;
    case OpKind::kAllGather:
      AllGatherUnit(plan, target, piece);
      return;
    case OpKind::kPsumScatter:
      PsumScatterUnit(plan, target, piece);
      return;
    case OpKind::kAllToAll:
      AllToAllUnit(plan, target);
      return;
    case OpKind::kBarrier:
    case OpKind::kPpermute:
      return;
  }
}

}  // namespace

void ExecuteUnits(const Plan& plan, int64_t unit_begin, int64_t unit_end) {
  for (int64_t u = unit_begin; u < unit_end; ++u) ExecuteUnit(plan, u);
}

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

}  // namespace spmdsim::internal
