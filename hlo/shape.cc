#include "hlo/shape.h"

#include <array>
#include <numeric>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace spmdsim::hlo {
namespace {

constexpr std::array<std::pair<std::string_view, DType>, 17> kTypes = {{
    {"pred", DType::kBool},
    {"s8", DType::kI8},
    {"s16", DType::kI16},
    {"s32", DType::kI32},
    {"s64", DType::kI64},
    {"u8", DType::kU8},
    {"u16", DType::kU16},
    {"u32", DType::kU32},
    {"u64", DType::kU64},
    {"f16", DType::kF16},
    {"bf16", DType::kBF16},
    {"f32", DType::kF32},
    {"f64", DType::kF64},
    {"f8e4m3fn", DType::kF8E4M3FN},
    {"f8e5m2", DType::kF8E5M2},
    {"c64", DType::kC64},
    {"c128", DType::kC128},
}};

}  // namespace

std::string_view HloTypeName(DType dtype) {
  for (const auto& [name, d] : kTypes) {
    if (d == dtype) return name;
  }
  return "?";
}

bool ParseHloType(std::string_view name, DType* dtype) {
  for (const auto& [n, d] : kTypes) {
    if (n == name) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

std::string HloTypeNames() {
  std::vector<std::string_view> names;
  for (const auto& [n, d] : kTypes) names.push_back(n);
  return fmt::format("{}", fmt::join(names, ", "));
}

bool IsUnsigned(DType dtype) {
  return dtype == DType::kU8 || dtype == DType::kU16 || dtype == DType::kU32 || dtype == DType::kU64;
}
bool IsSigned(DType dtype) {
  return dtype == DType::kI8 || dtype == DType::kI16 || dtype == DType::kI32 || dtype == DType::kI64;
}
bool IsComplex(DType dtype) { return dtype == DType::kC64 || dtype == DType::kC128; }

Shape Shape::Array(DType dtype, std::vector<int64_t> dims) {
  Shape s;
  s.dtype = dtype;
  s.dims = std::move(dims);
  return s;
}

Shape Shape::Tuple(std::vector<Shape> elements) {
  Shape s;
  s.kind = Kind::kTuple;
  s.tuple = std::move(elements);
  return s;
}

Shape Shape::Token() {
  Shape s;
  s.kind = Kind::kToken;
  return s;
}

int64_t Shape::NumElements() const {
  if (!IsArray()) return 0;
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t Shape::ByteSize() const {
  if (IsToken()) return 0;
  if (IsTuple()) {
    int64_t total = 0;
    for (const Shape& e : tuple) total += e.ByteSize();
    return total;
  }
  return NumElements() * DTypeSize(dtype);
}

std::vector<int64_t> Shape::MinorToMajor() const {
  if (!minor_to_major.empty() || dims.empty()) return minor_to_major;
  std::vector<int64_t> m(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) m[i] = static_cast<int64_t>(dims.size() - 1 - i);
  return m;
}

bool Shape::HasDefaultLayout() const {
  if (minor_to_major.empty()) return true;
  for (size_t i = 0; i < minor_to_major.size(); ++i) {
    if (minor_to_major[i] != static_cast<int64_t>(minor_to_major.size() - 1 - i)) return false;
  }
  return true;
}

bool Shape::Compatible(const Shape& other) const {
  if (kind != other.kind) return false;
  if (IsToken()) return true;
  if (IsArray()) return dtype == other.dtype && dims == other.dims;
  if (tuple.size() != other.tuple.size()) return false;
  for (size_t i = 0; i < tuple.size(); ++i) {
    if (!tuple[i].Compatible(other.tuple[i])) return false;
  }
  return true;
}

std::string Shape::ToString(bool with_layout) const {
  if (IsToken()) return "token[]";
  if (IsTuple()) {
    std::vector<std::string> parts;
    for (const Shape& e : tuple) parts.push_back(e.ToString(with_layout));
    return fmt::format("({})", fmt::join(parts, ", "));
  }
  std::string s = fmt::format("{}[{}]", HloTypeName(dtype), fmt::join(dims, ","));
  if (with_layout && !minor_to_major.empty()) s += fmt::format("{{{}}}", fmt::join(minor_to_major, ","));
  return s;
}

}  // namespace spmdsim::hlo
