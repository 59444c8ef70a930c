// Element-level semantics of HLO's elementwise ops, as XLA's CPU backend computes them
// (xla/service/elemental_ir_emitter.cc):
//  - integers wrap (two's complement); x / 0 = -1 (unsigned: all ones), INT_MIN / -1 = INT_MIN, x % 0 = x,
//    INT_MIN % -1 = 0; shifts by >= the bit width give 0 (arithmetic right shift: the sign);
//  - maximum / minimum are IEEE 754-2019 maximum / minimum (llvm.maximum): NaN propagates, -0 < +0;
//  - 16-bit floats compute in float and round to nearest even after every op;
//  - float -> integer converts saturate, NaN -> 0;
//  - compare type=TOTALORDER orders -NaN < -inf < ... < -0 < +0 < ... < inf < NaN.
// Transcendentals use the C library (XLA CPU uses its own polynomial approximations: a few ulps apart; the tests
// compare those with a tolerance).
#ifndef SPMDSIM_HLO_INTERNAL_ELEMENT_OPS_H_
#define SPMDSIM_HLO_INTERNAL_ELEMENT_OPS_H_

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "hlo/internal/types.h"
#include "hlo/ir.h"

namespace spmdsim::hlo::internal {

template <typename T>
using Unsigned = std::make_unsigned_t<std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>;

template <typename T>
T FloatMax(T a, T b) {
  const auto x = Widen(a), y = Widen(b);
  if (std::isnan(x)) return a;
  if (std::isnan(y)) return b;
  if (x == y) return std::signbit(x) ? b : a;  // +0 over -0
  return x > y ? a : b;
}

template <typename T>
T FloatMin(T a, T b) {
  const auto x = Widen(a), y = Widen(b);
  if (std::isnan(x)) return a;
  if (std::isnan(y)) return b;
  if (x == y) return std::signbit(x) ? a : b;  // -0 over +0
  return x < y ? a : b;
}

template <typename T>
T IntDivide(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == 0) return T(-1);
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return a;
    return static_cast<T>(a / b);
  } else {
    if (b == 0) return std::numeric_limits<T>::max();
    return static_cast<T>(a / b);
  }
}

template <typename T>
T IntRemainder(T a, T b) {
  if (b == 0) return a;
  if constexpr (std::is_signed_v<T>) {
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return T(0);
  }
  return static_cast<T>(a % b);
}

template <typename T>
T IntPower(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) return base == 1 ? T(1) : base == T(-1) ? ((exp & 1) ? T(-1) : T(1)) : T(0);
  }
  Unsigned<T> result = 1, b = static_cast<Unsigned<T>>(base);
  auto e = static_cast<Unsigned<T>>(exp);
  while (e != 0) {
    if (e & 1) result = static_cast<Unsigned<T>>(result * b);
    b = static_cast<Unsigned<T>>(b * b);
    e >>= 1;
  }
  return static_cast<T>(result);
}

template <typename T>
T ShiftLeft(T a, T b) {
  constexpr auto bits = static_cast<Unsigned<T>>(sizeof(T) * 8);
  if (static_cast<Unsigned<T>>(b) >= bits) return T(0);
  return static_cast<T>(static_cast<Unsigned<T>>(static_cast<Unsigned<T>>(a) << static_cast<Unsigned<T>>(b)));
}

template <typename T>
T ShiftRightLogical(T a, T b) {
  constexpr auto bits = static_cast<Unsigned<T>>(sizeof(T) * 8);
  if (static_cast<Unsigned<T>>(b) >= bits) return T(0);
  return static_cast<T>(static_cast<Unsigned<T>>(a) >> static_cast<Unsigned<T>>(b));
}

template <typename T>
T ShiftRightArithmetic(T a, T b) {
  using S = std::make_signed_t<T>;
  constexpr auto bits = static_cast<Unsigned<T>>(sizeof(T) * 8);
  const S sa = static_cast<S>(a);
  if (static_cast<Unsigned<T>>(b) >= bits) return static_cast<T>(sa < 0 ? S(-1) : S(0));
  return static_cast<T>(static_cast<S>(sa >> static_cast<Unsigned<T>>(b)));
}

// Calls g with the functor of a binary opcode on T (an element function (T, T) -> T).
template <typename T, typename G>
void DispatchBinary(Opcode op, G&& g) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case Opcode::kAnd: case Opcode::kMultiply: case Opcode::kMinimum: return g([](T a, T b) { return T(a && b); });
      case Opcode::kOr: case Opcode::kMaximum: return g([](T a, T b) { return T(a || b); });
      case Opcode::kXor: case Opcode::kAdd: case Opcode::kSubtract:
        return g([](T a, T b) { return T(a != b); });
      default: break;
    }
  } else if constexpr (kIsInt<T>) {
    using U = Unsigned<T>;
    switch (op) {
      case Opcode::kAdd:
        return g([](T a, T b) { return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b))); });
      case Opcode::kSubtract:
        return g([](T a, T b) { return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b))); });
      case Opcode::kMultiply:
        return g([](T a, T b) { return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b))); });
      case Opcode::kDivide: return g([](T a, T b) { return IntDivide(a, b); });
      case Opcode::kRemainder: return g([](T a, T b) { return IntRemainder(a, b); });
      case Opcode::kMaximum: return g([](T a, T b) { return a > b ? a : b; });
      case Opcode::kMinimum: return g([](T a, T b) { return a < b ? a : b; });
      case Opcode::kPower: return g([](T a, T b) { return IntPower(a, b); });
      case Opcode::kAnd: return g([](T a, T b) { return static_cast<T>(a & b); });
      case Opcode::kOr: return g([](T a, T b) { return static_cast<T>(a | b); });
      case Opcode::kXor: return g([](T a, T b) { return static_cast<T>(a ^ b); });
      case Opcode::kShiftLeft: return g([](T a, T b) { return ShiftLeft(a, b); });
      case Opcode::kShiftRightLogical: return g([](T a, T b) { return ShiftRightLogical(a, b); });
      case Opcode::kShiftRightArithmetic: return g([](T a, T b) { return ShiftRightArithmetic(a, b); });
      default: break;
    }
  } else {
    using W = Wide<T>;
    switch (op) {
      case Opcode::kAdd: return g([](T a, T b) { return T(W(a) + W(b)); });
      case Opcode::kSubtract: return g([](T a, T b) { return T(W(a) - W(b)); });
      case Opcode::kMultiply: return g([](T a, T b) { return T(W(a) * W(b)); });
      case Opcode::kDivide: return g([](T a, T b) { return T(W(a) / W(b)); });
      case Opcode::kRemainder: return g([](T a, T b) { return T(std::fmod(W(a), W(b))); });
      case Opcode::kMaximum: return g([](T a, T b) { return FloatMax(a, b); });
      case Opcode::kMinimum: return g([](T a, T b) { return FloatMin(a, b); });
      case Opcode::kPower: return g([](T a, T b) { return T(std::pow(W(a), W(b))); });
      case Opcode::kAtan2: return g([](T a, T b) { return T(std::atan2(W(a), W(b))); });
      default: break;
    }
  }
  throw Error(ErrorCode::kUnimplemented, fmt::format("{} of {} elements is not supported", OpcodeName(op),
                                                     std::is_same_v<T, bool> ? "pred" : "these"));
}

template <typename T>
T RoundHalfAway(T x) {
  return T(std::round(Widen(x)));
}

// Calls g with the functor of a unary opcode on T ((T) -> T); is-finite is separate (it returns pred).
template <typename T, typename G>
void DispatchUnary(Opcode op, G&& g) {
  if constexpr (std::is_same_v<T, bool>) {
    if (op == Opcode::kNot) return g([](T a) { return T(!a); });
    if (op == Opcode::kAbs || op == Opcode::kSign) return g([](T a) { return a; });
  } else if constexpr (kIsInt<T>) {
    using U = Unsigned<T>;
    switch (op) {
      case Opcode::kNegate: return g([](T a) { return static_cast<T>(static_cast<U>(U(0) - static_cast<U>(a))); });
      case Opcode::kAbs:
        return g([](T a) { return a < T(0) ? static_cast<T>(static_cast<U>(U(0) - static_cast<U>(a))) : a; });
      case Opcode::kSign: return g([](T a) { return static_cast<T>((a > T(0)) - (a < T(0))); });
      case Opcode::kNot: return g([](T a) { return static_cast<T>(~a); });
      case Opcode::kPopulationCount: return g([](T a) { return static_cast<T>(std::popcount(static_cast<U>(a))); });
      case Opcode::kClz: return g([](T a) { return static_cast<T>(std::countl_zero(static_cast<U>(a))); });
      default: break;
    }
  } else {
    using W = Wide<T>;
    switch (op) {
      case Opcode::kNegate: return g([](T a) { return T(-W(a)); });
      case Opcode::kAbs: return g([](T a) { return T(std::fabs(W(a))); });
      case Opcode::kSign:
        return g([](T a) { W x = W(a); return std::isnan(x) ? a : x > 0 ? T(1) : x < 0 ? T(-1) : a; });
      case Opcode::kFloor: return g([](T a) { return T(std::floor(W(a))); });
      case Opcode::kCeil: return g([](T a) { return T(std::ceil(W(a))); });
      case Opcode::kRoundNearestAfz: return g([](T a) { return RoundHalfAway(a); });
      case Opcode::kRoundNearestEven: return g([](T a) { return T(std::nearbyint(W(a))); });
      case Opcode::kSqrt: return g([](T a) { return T(std::sqrt(W(a))); });
      case Opcode::kRsqrt: return g([](T a) { return T(W(1) / std::sqrt(W(a))); });
      case Opcode::kCbrt: return g([](T a) { return T(std::cbrt(W(a))); });
      case Opcode::kExp: return g([](T a) { return T(std::exp(W(a))); });
      case Opcode::kExpm1: return g([](T a) { return T(std::expm1(W(a))); });
      case Opcode::kLog: return g([](T a) { return T(std::log(W(a))); });
      case Opcode::kLog1p: return g([](T a) { return T(std::log1p(W(a))); });
      case Opcode::kLogistic: return g([](T a) { return T(W(1) / (W(1) + std::exp(-W(a)))); });
      case Opcode::kSin: return g([](T a) { return T(std::sin(W(a))); });
      case Opcode::kCos: return g([](T a) { return T(std::cos(W(a))); });
      case Opcode::kTan: return g([](T a) { return T(std::tan(W(a))); });
      case Opcode::kTanh: return g([](T a) { return T(std::tanh(W(a))); });
      case Opcode::kErf: return g([](T a) { return T(std::erf(W(a))); });
      default: break;
    }
  }
  throw Error(ErrorCode::kUnimplemented, fmt::format("{} of these elements is not supported", OpcodeName(op)));
}

// A float's position in the total order as a signed integer of its width.
template <typename T>
auto TotalOrderKey(T x) {
  using I = std::conditional_t<sizeof(T) == 2, int16_t, std::conditional_t<sizeof(T) == 4, int32_t, int64_t>>;
  I bits;
  std::memcpy(&bits, &x, sizeof(T));
  return bits < 0 ? static_cast<I>(bits ^ std::numeric_limits<I>::max()) : bits;
}

template <typename T>
bool Compare(ComparisonDirection d, ComparisonType type, T a, T b) {
  if constexpr (kIsFloat<T>) {
    if (type == ComparisonType::kTotalOrder)
      return Compare(d, ComparisonType::kSigned, TotalOrderKey(a), TotalOrderKey(b));
    const auto x = Widen(a), y = Widen(b);
    switch (d) {
      case ComparisonDirection::kEq: return x == y;
      case ComparisonDirection::kNe: return x != y;  // true for NaN (unordered)
      case ComparisonDirection::kLt: return x < y;
      case ComparisonDirection::kLe: return x <= y;
      case ComparisonDirection::kGt: return x > y;
      case ComparisonDirection::kGe: return x >= y;
    }
  } else {
    switch (d) {
      case ComparisonDirection::kEq: return a == b;
      case ComparisonDirection::kNe: return a != b;
      case ComparisonDirection::kLt: return a < b;
      case ComparisonDirection::kLe: return a <= b;
      case ComparisonDirection::kGt: return a > b;
      case ComparisonDirection::kGe: return a >= b;
    }
  }
  return false;
}

// XLA's convert.
template <typename To, typename From>
To Convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    if constexpr (kIsFloat<From>) {
      return Widen(x) != 0;
    } else {
      return x != From(0);
    }
  } else if constexpr (kIsFloat<From> && !kIsFloat<To>) {
    const double v = static_cast<double>(Widen(x));
    if (std::isnan(v)) return To(0);
    if (v <= static_cast<double>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (v >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else if constexpr (kIsFloat<To>) {
    if constexpr (std::is_same_v<From, bool>) {
      return To(x ? 1.0f : 0.0f);
    } else if constexpr (kIsFloat<From>) {
      return static_cast<To>(Widen(x));
    } else {
      return static_cast<To>(static_cast<Wide<To>>(x));
    }
  } else {
    return static_cast<To>(x);
  }
}

}  // namespace spmdsim::hlo::internal

#endif  // SPMDSIM_HLO_INTERNAL_ELEMENT_OPS_H_
