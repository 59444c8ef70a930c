#include "common/strings.h"

#include <charconv>
#include <cmath>

#include "common/error.h"
#include "common/user_text.h"

namespace spmdsim {
namespace {
template <typename T>
std::string PyTupleOf(const std::vector<T>& values) {
  if (values.size() == 1) return fmt::format("({},)", values[0]);
  return fmt::format("({})", fmt::join(values, ", "));
}
}  // namespace

std::string PyRepr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == quote) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

std::string PyTuple(std::span<const int64_t> values) {
  if (values.size() == 1) return fmt::format("({},)", values[0]);
  return fmt::format("({})", fmt::join(values, ", "));
}
std::string PyTuple(const std::vector<int64_t>& values) { return PyTuple(std::span<const int64_t>(values)); }
std::string PyTuple(const std::vector<int>& values) { return PyTupleOf(values); }
std::string PyTuple(const std::vector<std::string>& values) {
  std::vector<std::string> quoted;
  quoted.reserve(values.size());
  for (const auto& v : values) quoted.push_back(PyRepr(v));
  return PyTupleOf(quoted);
}

std::string HumanBytes(int64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 0) return fmt::format("-{}", HumanBytes(bytes == INT64_MIN ? INT64_MAX : -bytes));
  if (bytes < 1024) return fmt::format("{}B", bytes);
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.2f}{}", value, kUnits[unit]);
}

std::string ExactBytes(int64_t bytes) {
  if (bytes >= kGiB && bytes % kGiB == 0) return fmt::format("{}GiB", bytes / kGiB);
  if (bytes >= kMiB && bytes % kMiB == 0) return fmt::format("{}MiB", bytes / kMiB);
  if (bytes >= kKiB && bytes % kKiB == 0) return fmt::format("{}KiB", bytes / kKiB);
  return fmt::format("{}B", bytes);
}

Unit TimeUnitFor(double max_seconds) {
  if (max_seconds >= 1) return {"s", 1};
  if (max_seconds >= 1e-3) return {"ms", 1e-3};
  if (max_seconds >= 1e-6 || max_seconds == 0) return {"us", 1e-6};
  return {"ns", 1e-9};
}

Unit ByteUnitFor(double max_bytes) {
  if (max_bytes >= kGiB) return {"GiB", static_cast<double>(kGiB)};
  if (max_bytes >= kMiB) return {"MiB", static_cast<double>(kMiB)};
  if (max_bytes >= kKiB) return {"KiB", static_cast<double>(kKiB)};
  return {"B", 1};
}

std::string FormatSeconds(double seconds, SecondsStyle style) {
  if (style == SecondsStyle::kAsWritten) {
    if (seconds >= 1e-3) return fmt::format("{:g} ms", seconds * 1e3);
    return fmt::format("{:g} us", seconds * 1e6);
  }
  const Unit u = TimeUnitFor(std::fabs(seconds));
  return fmt::format("{:.3g} {}", seconds / u.scale, u.name);
}

std::vector<std::string> Split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? text.npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string_view Trim(std::string_view text) {
  const char* ws = " \t\r\n";
  size_t b = text.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = text.find_last_not_of(ws);
  return text.substr(b, e - b + 1);
}

int64_t ParseInt(std::string_view text, std::string_view what) {
  text = Trim(text);
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    Throw(ErrorCode::kInvalidArgument, "{}: {} is not an integer", what, QuoteForError(text));
  }
  return value;
}

std::vector<std::pair<std::string, int64_t>> ParseNamedSizes(std::string_view text, std::string_view what) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const std::string& item : Split(text, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos) {
      Throw(ErrorCode::kInvalidArgument, "{}: expected name=size, got '{}' (e.g. data=4,model=2)", what, item);
    }
    std::string name(Trim(std::string_view(item).substr(0, eq)));
    if (name.empty()) Throw(ErrorCode::kInvalidArgument, "{}: empty axis name in '{}'", what, item);
    int64_t size = ParseInt(std::string_view(item).substr(eq + 1), what);
    if (size <= 0) Throw(ErrorCode::kInvalidArgument, "{}: size of '{}' must be positive, got {}", what, name, size);
    for (const auto& [n, s] : out) {
      if (n == name) Throw(ErrorCode::kInvalidArgument, "{}: axis '{}' is named twice", what, name);
    }
    out.emplace_back(std::move(name), size);
  }
  return out;
}

}  // namespace spmdsim
