// Constants' literals: "0", "{1, 2}", "{ {1, 2}, {3, 4} }", "true", "-inf", "nan", "(1, -2)" (complex), "{...}"
// (elided).
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include <Eigen/Core>

#include "common/user_text.h"
#include "hlo/internal/scanner.h"

namespace spmdsim::hlo::internal {
namespace {

// The largest constant the parser materialises (elements); a larger one is refused.
constexpr int64_t kMaxLiteralElements = int64_t{1} << 28;

template <typename T>
void Put(std::vector<uint8_t>* bytes, T value) {
  const size_t at = bytes->size();
  bytes->resize(at + sizeof(T));
  std::memcpy(bytes->data() + at, &value, sizeof(T));
}

bool IsValueChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '+' ||
         c == '.' || c == '_';
}

// A floating-point word as a double ("1.5", "-inf", "nan", "1e-08").
bool ParseFloatWord(std::string_view w, double* out) {
  const bool negative = !w.empty() && w[0] == '-';
  std::string_view body = negative || (!w.empty() && w[0] == '+') ? w.substr(1) : w;
  if (body == "inf") {
    *out = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return true;
  }
  if (body.substr(0, 3) == "nan") {
    *out = negative ? -std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  auto [ptr, ec] = std::from_chars(w.data() + (w[0] == '+' ? 1 : 0), w.data() + w.size(), *out);
  return ec == std::errc() && ptr == w.data() + w.size();
}

bool ParseFloat32Word(std::string_view w, float* out) {
  double d = 0;
  if (!ParseFloatWord(w, &d)) return false;
  if (std::isnan(d) || std::isinf(d)) {
    *out = static_cast<float>(d);
    return true;
  }
  // Round the decimal text to float directly (double rounding through double could differ by one ulp).
  auto [ptr, ec] = std::from_chars(w.data() + (w[0] == '+' ? 1 : 0), w.data() + w.size(), *out);
  if (ec == std::errc::result_out_of_range) {
    *out = static_cast<float>(d);  // overflow to inf / underflow to 0, as the cast does
    return true;
  }
  return ec == std::errc() && ptr == w.data() + w.size();
}

// Appends one element of `dtype` written as `w`; false when `w` is not a valid value of it.
bool AppendElement(DType dtype, std::string_view w, std::vector<uint8_t>* bytes) {
  if (dtype == DType::kBool) {
    if (w == "true" || w == "1") return Put<uint8_t>(bytes, 1), true;
    if (w == "false" || w == "0") return Put<uint8_t>(bytes, 0), true;
    return false;
  }
  if (IsFloating(dtype)) {
    float f = 0;
    double d = 0;
    switch (dtype) {
      case DType::kF64: return ParseFloatWord(w, &d) && (Put(bytes, d), true);
      case DType::kF32: return ParseFloat32Word(w, &f) && (Put(bytes, f), true);
      case DType::kBF16:
        return ParseFloat32Word(w, &f) && (Put(bytes, Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(f))), true);
      case DType::kF16:
        return ParseFloat32Word(w, &f) && (Put(bytes, Eigen::numext::bit_cast<uint16_t>(Eigen::half(f))), true);
      default: return false;  // f8: refused by the caller
    }
  }
  if (IsUnsigned(dtype)) {
    uint64_t u = 0;
    auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), u);
    if (ec != std::errc() || ptr != w.data() + w.size()) return false;
    switch (dtype) {
      case DType::kU8: return u <= 0xff && (Put<uint8_t>(bytes, static_cast<uint8_t>(u)), true);
      case DType::kU16: return u <= 0xffff && (Put<uint16_t>(bytes, static_cast<uint16_t>(u)), true);
      case DType::kU32: return u <= 0xffffffffu && (Put<uint32_t>(bytes, static_cast<uint32_t>(u)), true);
      default: return Put<uint64_t>(bytes, u), true;
    }
  }
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
  if (ec != std::errc() || ptr != w.data() + w.size()) return false;
  switch (dtype) {
    case DType::kI8: return v >= -128 && v <= 127 && (Put<int8_t>(bytes, static_cast<int8_t>(v)), true);
    case DType::kI16: return v >= -32768 && v <= 32767 && (Put<int16_t>(bytes, static_cast<int16_t>(v)), true);
    case DType::kI32:
      return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max() &&
             (Put<int32_t>(bytes, static_cast<int32_t>(v)), true);
    default: return Put<int64_t>(bytes, v), true;
  }
}

// A complex element "(re, im)" of c64 / c128: the two parts in the part type, real first (XLA's layout).
void ReadComplexElement(Scanner& s, const Shape& shape, std::vector<uint8_t>* bytes) {
  s.Expect('(', fmt::format("to open a {} value (re, im)", HloTypeName(shape.dtype)));
  for (int part = 0; part < 2; ++part) {
    if (part == 1) s.Expect(',', "between the real and imaginary parts");
    s.SkipSpace();
    const size_t at = s.pos();
    size_t end = at;
    while (end < at + s.Rest().size() && IsValueChar(s.text()[end])) ++end;
    const std::string_view w = s.text().substr(at, end - at);
    const bool ok = !w.empty() && AppendElement(shape.dtype == DType::kC64 ? DType::kF32 : DType::kF64, w, bytes);
    if (!ok) s.FailAt(at, fmt::format("expected a number, found {}", w.empty() ? s.Found() : QuoteForError(w)));
    s.set_pos(end);
  }
  s.Expect(')', "to close a complex value");
}

void ReadElement(Scanner& s, const Shape& shape, std::vector<uint8_t>* bytes) {
  if (IsComplex(shape.dtype)) {
    ReadComplexElement(s, shape, bytes);
    return;
  }
  s.SkipSpace();
  const size_t at = s.pos();
  size_t end = at;
  const std::string_view text = s.text();
  while (end < s.pos() + s.Rest().size() && IsValueChar(text[end])) ++end;
  std::string_view w = text.substr(at, end - at);
  // A NaN with its payload, nan(0x7fc00000): the payload is dropped (the interpreter's NaNs are quiet).
  if ((w == "nan" || w == "-nan") && end < text.size() && text[end] == '(') {
    const size_t close = text.find(')', end);
    if (close != std::string_view::npos && close - end < 40) w = text.substr(at, close + 1 - at);
  }
  const bool f8 = shape.dtype == DType::kF8E4M3FN || shape.dtype == DType::kF8E5M2;
  double ignored = 0;
  if (w.empty() || (f8 ? !ParseFloatWord(w, &ignored) : !AppendElement(shape.dtype, w, bytes))) {
    s.FailAt(at, fmt::format("expected a {} value, found {}", HloTypeName(shape.dtype),
                             w.empty() ? s.Found() : QuoteForError(w)));
  }
  s.set_pos(at + w.size());
}

// The elements of dimensions [dim, rank) as nested braces.
void ReadNested(Scanner& s, const Shape& shape, int dim, std::vector<uint8_t>* bytes) {
  if (dim == shape.rank()) {
    ReadElement(s, shape, bytes);
    return;
  }
  s.Expect('{', fmt::format("to open dimension {} of a {} constant", dim, shape.ToString()));
  const int64_t n = shape.dims[dim];
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) s.Expect(',', fmt::format("between the elements of dimension {} ({} of them)", dim, n));
    ReadNested(s, shape, dim + 1, bytes);
  }
  s.Expect('}', fmt::format("to close dimension {} of a {} constant ({} elements)", dim, shape.ToString(), n));
}

}  // namespace

Literal ReadLiteral(Scanner& s, const Shape& shape) {
  Literal lit;
  s.SkipSpace();
  if (!shape.IsArray())
    s.Fail(fmt::format("constants of shape {} are not supported; use array constants", shape.ToString()));
  if (s.Rest().substr(0, 5) == "{...}") {
    s.set_pos(s.pos() + 5);
    lit.elided = true;
    return lit;
  }
  const int64_t n = shape.NumElements();
  if (n > kMaxLiteralElements)
    s.Fail(fmt::format("constant of {} elements is too large (at most {})", n, kMaxLiteralElements));
  lit.bytes.reserve(static_cast<size_t>(n * DTypeSize(shape.dtype)));
  ReadNested(s, shape, 0, &lit.bytes);
  // f8 values are read (their syntax checked) but not kept: spmdsim has no f8 arithmetic (runs are abstract).
  if (shape.dtype == DType::kF8E4M3FN || shape.dtype == DType::kF8E5M2) lit.elided = true;
  return lit;
}

}  // namespace spmdsim::hlo::internal
