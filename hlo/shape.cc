#include "hlo/shape.h"

#include <algorithm>
#include <array>
#include <limits>
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

namespace {

// a * b, saturated at INT64_MAX (both >= 0).
int64_t SaturatingMultiply(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::numeric_limits<int64_t>::max();
  return out;
}

int64_t RoundUp(int64_t n, int64_t multiple) {
  if (multiple <= 1 || n % multiple == 0) return n;
  return SaturatingMultiply(n / multiple + 1, multiple);
}

// XLA's printing order of the layout items after the tiles (xla/layout.cc Layout::Print): L, #, * come before
// E and S; SC, P, M after. D (dimension level types) first.
int LayoutItemRank(std::string_view item) {
  if (item.starts_with("SC")) return 5;
  switch (item.empty() ? ' ' : item[0]) {
    case 'D': return 0;
    case 'L': return 1;
    case '#': return 2;
    case '*': return 3;
    case 'P': return 6;
    case 'M': return 7;
    default: return 8;
  }
}

}  // namespace

int64_t Shape::PhysicalByteSize() const {
  if (IsToken()) return 0;
  if (IsTuple()) {
    int64_t total = 0;
    for (const Shape& e : tuple)
      total = std::min(total + e.PhysicalByteSize(), std::numeric_limits<int64_t>::max() / 2);
    return total;
  }
  int64_t elements = 1;
  if (tiles.empty()) {
    elements = NumElements();
  } else {
    const std::vector<int64_t> m2m = MinorToMajor();
    const std::vector<int64_t>& tile = tiles.front();
    const size_t k = tile.size();
    std::vector<int64_t> padded = dims;
    for (size_t j = 0; j < k; ++j) {
      const int64_t t = tile[k - 1 - j];  // the tile's last dimension pads the minor-most one
      if (j < m2m.size()) {
        padded[static_cast<size_t>(m2m[j])] = RoundUp(padded[static_cast<size_t>(m2m[j])], t);
      } else {
        elements = SaturatingMultiply(elements, RoundUp(1, t));  // above the array: a dimension of size 1
      }
    }
    for (int64_t d : padded) elements = SaturatingMultiply(elements, d);
  }
  const int64_t bits = element_size_in_bits > 0 ? element_size_in_bits : DTypeSize(dtype) * 8;
  const int64_t total_bits = SaturatingMultiply(elements, bits);
  return total_bits == std::numeric_limits<int64_t>::max() ? total_bits : (total_bits + 7) / 8;
}

bool Shape::HasLayoutItems() const {
  return !tiles.empty() || element_size_in_bits != 0 || memory_space != 0 || !other_layout.empty();
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

bool Shape::CompatibleIgnoringFpPrecision(const Shape& other) const {
  if (kind != other.kind) return false;
  if (IsToken()) return true;
  if (IsArray()) return (dtype == other.dtype || (IsFloating(dtype) && IsFloating(other.dtype))) && dims == other.dims;
  if (tuple.size() != other.tuple.size()) return false;
  for (size_t i = 0; i < tuple.size(); ++i) {
    if (!tuple[i].CompatibleIgnoringFpPrecision(other.tuple[i])) return false;
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
  if (!with_layout || (minor_to_major.empty() && !HasLayoutItems())) return s;
  s += fmt::format("{{{}", fmt::join(minor_to_major, ","));
  if (HasLayoutItems()) {
    s += ':';
    std::vector<std::string> items = other_layout;
    std::stable_sort(items.begin(), items.end(),
                     [](const std::string& a, const std::string& b) { return LayoutItemRank(a) < LayoutItemRank(b); });
    auto print_items = [&](int from, int to) {
      for (const std::string& item : items) {
        if (LayoutItemRank(item) >= from && LayoutItemRank(item) < to) s += item;
      }
    };
    print_items(0, 1);
    if (!tiles.empty()) {
      s += 'T';
      for (const auto& tile : tiles) {
        std::vector<std::string> parts;
        for (int64_t d : tile) parts.push_back(d == kCombinedTileDimension ? "*" : std::to_string(d));
        s += fmt::format("({})", fmt::join(parts, ","));
      }
    }
    print_items(1, 4);
    if (element_size_in_bits != 0) s += fmt::format("E({})", element_size_in_bits);
    if (memory_space != 0) s += fmt::format("S({})", memory_space);
    print_items(4, 9);
  }
  return s + "}";
}

}  // namespace spmdsim::hlo
