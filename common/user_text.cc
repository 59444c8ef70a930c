#include "common/user_text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <system_error>

#include <fmt/format.h>

#include "common/error.h"

namespace spmdsim {

std::string QuoteForError(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, kMaxQuotedChars)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f) out += fmt::format("\\x{:02x}", byte);
    else out.push_back(c);
  }
  out += "'";
  if (text.size() > kMaxQuotedChars) out += fmt::format("... ({} chars)", text.size());
  return out;
}

std::string OneLine(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  size_t i = 0;
  while (i < message.size()) {
    if (message[i] != '\n' && message[i] != '\r') {
      out += message[i++];
      continue;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    while (i < message.size() && (message[i] == '\n' || message[i] == '\r' || message[i] == ' ')) ++i;
    if (!out.empty() && i < message.size())
      out += (out.back() == '.' || out.back() == ';' || out.back() == ':') ? " " : "; ";
  }
  return out;
}

std::string ErrorLine(std::string_view message) {
  std::string line = OneLine(message);
  if (line.size() <= kMaxErrorLineChars) return line;
  return fmt::format("{}... ({} chars)", std::string_view(line).substr(0, kMaxErrorLineChars), line.size());
}

std::string Abbreviate(std::string_view repr) {
  if (repr.size() <= kMaxReprChars) return std::string(repr);
  return fmt::format("{}... ({} chars)", repr.substr(0, kMaxReprChars), repr.size());
}

std::string JoinFirst(const std::vector<std::string>& items, size_t max_items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) {
    if (i > 0) out += ", ";
    out += items[i];
  }
  if (items.size() > max_items) out += fmt::format(", ... ({} in all)", items.size());
  return out;
}

std::string DescribeIntRange(int64_t lo, int64_t hi) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (hi == kMax || hi == std::numeric_limits<int32_t>::max()) {
    std::string upper = hi == kMax ? "" : fmt::format(" (at most {})", hi);
    if (lo == 1) return "a positive integer" + upper;
    if (lo == 0) return "a non-negative integer" + upper;
    if (hi == kMax) return fmt::format("an integer >= {}", lo);
  }
  return fmt::format("an integer from {} to {}", lo, hi);
}

int64_t ParseIntIn(std::string_view text, std::string_view what, int64_t lo, int64_t hi) {
  std::string_view t = text;
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  const bool digits = !t.empty() && end == t.data() + t.size();
  if (ec == std::errc::result_out_of_range || (digits && ec == std::errc() && (value < lo || value > hi)))
    Throw(ErrorCode::kInvalidArgument, "{}: {} is out of range; expected {}", what, QuoteForError(text),
          DescribeIntRange(lo, hi));
  if (ec != std::errc() || !digits)
    Throw(ErrorCode::kInvalidArgument, "{}: {} is not an integer; expected {}", what, QuoteForError(text),
          DescribeIntRange(lo, hi));
  return value;
}

TextPosition PositionOf(std::string_view text, size_t offset) {
  TextPosition p;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

std::optional<size_t> FindInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the valid range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;  // no overlong forms
      if (c == 0xed) hi = 0x9f;  // no surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;  // at most U+10FFFF
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xbf) return i;
    i += len;
  }
  return std::nullopt;
}

namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const size_t cost = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                                  std::tolower(static_cast<unsigned char>(b[j - 1]))
                              ? 0
                              : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
      diagonal = up;
    }
  }
  return row[b.size()];
}

bool CloseEnough(std::string_view found, size_t distance) {
  const size_t limit = std::max<size_t>(2, found.size() / 3);
  return distance <= limit && distance < found.size();
}

}  // namespace

std::optional<std::string> DidYouMean(std::string_view found, const std::vector<std::string>& valid) {
  std::optional<std::string> best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const std::string& candidate : valid) {
    const size_t d = EditDistance(found, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  if (!best || !CloseEnough(found, best_distance)) return std::nullopt;
  return best;
}

std::vector<std::string> CloseMatches(std::string_view found, const std::vector<std::string>& valid) {
  std::vector<std::string> out;
  if (found.size() >= 3) {
    for (const std::string& candidate : valid)
      if (candidate.size() > found.size() && candidate.compare(0, found.size(), found) == 0) out.push_back(candidate);
  }
  if (out.empty()) {
    size_t best = std::numeric_limits<size_t>::max();
    for (const std::string& candidate : valid) best = std::min(best, EditDistance(found, candidate));
    if (!CloseEnough(found, best)) return out;
    for (const std::string& candidate : valid)
      if (EditDistance(found, candidate) == best) out.push_back(candidate);
  }
  if (out.size() > kMaxSuggestions) out.clear();  // many equally close names: none is the one meant
  return out;
}

std::string QuotedAlternatives(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += QuoteForError(names[i]);
  }
  return out;
}

std::string DidYouMeanSuffix(std::string_view found, const std::vector<std::string>& valid) {
  const std::vector<std::string> close = CloseMatches(found, valid);
  if (close.empty()) return "";
  return " (did you mean " + QuotedAlternatives(close) + "?)";
}

}  // namespace spmdsim
