// Element types of the interpreter: the C++ type of each HLO dtype, and a visitor over them.
#ifndef SPMDSIM_HLO_INTERNAL_TYPES_H_
#define SPMDSIM_HLO_INTERNAL_TYPES_H_

#include <cstdint>
#include <type_traits>

#include <Eigen/Core>

#include "common/dtype.h"
#include "common/error.h"
#include "hlo/shape.h"

namespace spmdsim::hlo::internal {

using bf16 = Eigen::bfloat16;
using f16 = Eigen::half;

template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>;
template <typename T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Calls f(T{}) with T the C++ type of `dtype` (bool for pred). Throws Error(kUnimplemented) for f8 and complex.
template <typename F>
decltype(auto) VisitType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBool: return f(bool{});
    case DType::kI8: return f(int8_t{});
    case DType::kI16: return f(int16_t{});
    case DType::kI32: return f(int32_t{});
    case DType::kI64: return f(int64_t{});
    case DType::kU8: return f(uint8_t{});
    case DType::kU16: return f(uint16_t{});
    case DType::kU32: return f(uint32_t{});
    case DType::kU64: return f(uint64_t{});
    case DType::kF16: return f(f16{});
    case DType::kBF16: return f(bf16{});
    case DType::kF32: return f(float{});
    case DType::kF64: return f(double{});
    default: break;
  }
  throw Error(ErrorCode::kUnimplemented,
              fmt::format("the interpreter has no arithmetic for {} elements", HloTypeName(dtype)));
}

// Floating-point values are computed in float (16-bit types) or their own type.
template <typename T>
using Wide = std::conditional_t<std::is_same_v<T, bf16> || std::is_same_v<T, f16>, float, T>;

template <typename T>
inline Wide<T> Widen(T v) {
  return static_cast<Wide<T>>(v);
}

}  // namespace spmdsim::hlo::internal

#endif  // SPMDSIM_HLO_INTERNAL_TYPES_H_
