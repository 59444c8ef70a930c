// Internals of ops/: dtype dispatch, element conversion, result allocation, strided copies and cost reporting
// shared by the ops/*.cc files. Includes Eigen; never include it from a public header. Not for users.
//
// Thread safety: every function is reentrant; none touches shared state except ReportCost (the Runtime's
// sink, ops/cost.h).
#ifndef SPMDSIM_OPS_INTERNAL_KERNELS_H_
#define SPMDSIM_OPS_INTERNAL_KERNELS_H_

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "common/error.h"
#include "common/shape.h"
#include "common/strings.h"
#include "ops/cost.h"
#include "sim/array.h"
#include "sim/array_builder.h"

namespace spmdsim::ops_internal {

// ---- dtypes ---------------------------------------------------------------------------------------------

// The type arithmetic runs in: float for float32/bfloat16/float16 (XLA CPU upcasts 16-bit floats to f32),
// double, int32_t, int64_t, bool.
template <typename F>
decltype(auto) VisitCompute(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
    case DType::kBF16:
    case DType::kF16:
      return f(float{});
    case DType::kF64:
      return f(double{});
    case DType::kI32:
      return f(int32_t{});
    case DType::kI64:
      return f(int64_t{});
    case DType::kBool:
      return f(bool{});
    default: break;  // not an array dtype
  }
  return f(float{});
}

inline float Bf16ToFloat(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t FloatToBf16(float f) { return Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(f)); }
inline float HalfToFloat(uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}
inline uint16_t FloatToHalf(float f) { return Eigen::numext::bit_cast<uint16_t>(Eigen::half(f)); }

// Scalar conversion with XLA's convert semantics: float -> integer truncates toward zero, saturates at the
// integer's range and maps NaN to 0; anything -> bool is `!= 0`.
template <typename To, typename From>
inline To ConvertScalar(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From{0};
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (v != v) return 0;
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From hi = static_cast<From>(std::numeric_limits<To>::max());
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// Reads n elements of `src` (dtype `dt`) as C.
template <typename C>
void LoadAs(const void* src, DType dt, int64_t n, C* dst) {
  switch (dt) {
    case DType::kF32: {
      auto* s = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertScalar<C>(s[i]);
      break;
    }
    case DType::kF64: {
      auto* s = static_cast<const double*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertScalar<C>(s[i]);
      break;
    }
    case DType::kBF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertScalar<C>(Bf16ToFloat(s[i]));
      break;
    }
    case DType::kF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertScalar<C>(HalfToFloat(s[i]));
      break;
    }
    case DType::kI32: {
      auto* s = static_cast<const int32_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertScalar<C>(s[i]);
      break;
    }
    case DType::kI64: {
      auto* s = static_cast<const int64_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertScalar<C>(s[i]);
      break;
    }
    case DType::kBool: {
      auto* s = static_cast<const bool*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertScalar<C>(s[i]);
      break;
    }
    default: break;  // not an array dtype
  }
}

// Writes n values of C into `dst` (dtype `dt`), rounding once (bf16/f16: round to nearest even).
template <typename C>
void StoreAs(const C* src, int64_t n, void* dst, DType dt) {
  switch (dt) {
    case DType::kF32: {
      auto* d = static_cast<float*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = ConvertScalar<float>(src[i]);
      break;
    }
    case DType::kF64: {
      auto* d = static_cast<double*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = ConvertScalar<double>(src[i]);
      break;
    }
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToBf16(ConvertScalar<float>(src[i]));
      break;
    }
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToHalf(ConvertScalar<float>(src[i]));
      break;
    }
    case DType::kI32: {
      auto* d = static_cast<int32_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = ConvertScalar<int32_t>(src[i]);
      break;
    }
    case DType::kI64: {
      auto* d = static_cast<int64_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = ConvertScalar<int64_t>(src[i]);
      break;
    }
    case DType::kBool: {
      auto* d = static_cast<bool*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = ConvertScalar<bool>(src[i]);
      break;
    }
    default: break;  // not an array dtype
  }
}

// A run of n uninitialised C (std::vector<bool> has no data(), so not a vector).
template <typename C>
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(size_t n) { resize(n); }
  void resize(size_t n) {
    ptr_.reset(n == 0 ? nullptr : new C[n]);
    size_ = n;
  }
  C* data() { return ptr_.get(); }
  const C* data() const { return ptr_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  C& operator[](size_t i) { return ptr_[i]; }
  const C& operator[](size_t i) const { return ptr_[i]; }

 private:
  std::unique_ptr<C[]> ptr_;
  size_t size_ = 0;
};

// Whether C is the storage type of dt (no conversion needed).
template <typename C>
bool IsStorageOf(DType dt) {
  if constexpr (std::is_same_v<C, float>) return dt == DType::kF32;
  if constexpr (std::is_same_v<C, double>) return dt == DType::kF64;
  if constexpr (std::is_same_v<C, int32_t>) return dt == DType::kI32;
  if constexpr (std::is_same_v<C, int64_t>) return dt == DType::kI64;
  if constexpr (std::is_same_v<C, bool>) return dt == DType::kBool;
  return false;
}

// An array's elements as a contiguous run of C: the array's own buffer when no conversion is needed, else a
// converted copy.
template <typename C>
class ComputeBuffer {
 public:
  explicit ComputeBuffer(const Array& a) {
    if (IsStorageOf<C>(a.dtype())) {
      ptr_ = static_cast<const C*>(a.raw_data());
    } else {
      storage_.resize(static_cast<size_t>(a.size()));
      LoadAs<C>(a.raw_data(), a.dtype(), a.size(), storage_.data());
      ptr_ = storage_.data();
    }
  }
  const C* data() const { return ptr_; }

 private:
  const C* ptr_ = nullptr;
  Scratch<C> storage_;
};

// ---- results -----------------------------------------------------------------------------------------------

// The union of the inputs' varying mesh axes (the bitmask of shard_map's varying-manual-axes), 0 until Array
// carries one. Switches itself on when Array gains varying_axes() (checked at compile time).
template <typename A = Array>
uint64_t VaryingAxes(const A& a) {
  if constexpr (requires { a.varying_axes(); }) {
    return a.varying_axes();
  } else {
    return 0;
  }
}
template <typename A = Array>
A WithVaryingAxes(const A& a, uint64_t mask) {
  if constexpr (requires { a.WithVaryingAxes(mask); }) {
    return mask == 0 ? a : a.WithVaryingAxes(mask);
  } else {
    return a;
  }
}
inline uint64_t VaryingUnion(std::initializer_list<const Array*> inputs) {
  uint64_t mask = 0;
  for (const Array* a : inputs) mask |= VaryingAxes(*a);
  return mask;
}
inline uint64_t VaryingUnion(std::span<const Array> inputs) {
  uint64_t mask = 0;
  for (const Array& a : inputs) mask |= VaryingAxes(a);
  return mask;
}
// True when Array carries varying axes in this build.
template <typename A = Array>
inline constexpr bool kArrayHasVaryingAxes = requires(const A& a) { a.varying_axes(); };

// A new result charged to the current device (sim/array_builder.h); abstract when `abstract`. Elements
// uninitialised.
inline ArrayBuilder NewResult(DType dtype, std::vector<int64_t> shape, bool abstract) {
  return ArrayBuilder(dtype, std::move(shape), {.abstract = abstract});
}

// Throws a typed error for an invalid (default-constructed) input of `op`.
void CheckValid(std::string_view op, const Array& a, int index = 0);

// ---- shapes and axes ---------------------------------------------------------------------------------------

// An axis in [-rank, rank) made non-negative; else ValueError "axis 3 is out of bounds for array of
// dimension 2" (numpy/JAX), prefixed with the op.
int CanonicalAxis(std::string_view op, int axis, int rank);
// RowMajorStrides and StridedCopy: common/shape.h.

// Copies `a` permuted by `perm` (out dim i = a dim perm[i]) into a contiguous run of C.
template <typename C>
Scratch<C> PermutedCompute(const Array& a, std::span<const int> perm) {
  std::vector<int64_t> strides = RowMajorStrides(a.shape());
  std::vector<int64_t> out_shape(perm.size()), src_strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out_shape[i] = a.shape()[perm[i]];
    src_strides[i] = strides[perm[i]];
  }
  Scratch<C> out(static_cast<size_t>(a.size()));
  if (IsStorageOf<C>(a.dtype())) {
    StridedCopy(a.raw_data(), 0, src_strides, out.data(), 0, RowMajorStrides(out_shape), out_shape, sizeof(C));
  } else {
    Scratch<C> converted(static_cast<size_t>(a.size()));
    LoadAs<C>(a.raw_data(), a.dtype(), a.size(), converted.data());
    StridedCopy(converted.data(), 0, src_strides, out.data(), 0, RowMajorStrides(out_shape), out_shape,
                sizeof(C));
  }
  return out;
}

// ---- cost ---------------------------------------------------------------------------------------------------

// Reports one op's cost to the op cost sink of the running device's Runtime (ops/cost.h); a no-op on a host
// thread or when that Runtime has no sink.
void ReportCost(const OpCost& cost);
// bytes_read = sum of the inputs' nbytes, bytes_written = out's nbytes.
void ReportCost(std::string_view op, int64_t flops, int64_t transcendentals,
                std::initializer_list<const Array*> inputs, const ArrayBuilder& out);

}  // namespace spmdsim::ops_internal

#endif  // SPMDSIM_OPS_INTERNAL_KERNELS_H_
