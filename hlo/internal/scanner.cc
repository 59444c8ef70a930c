#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>

#include "common/error.h"
#include "common/user_text.h"
#include "hlo/internal/scanner.h"

namespace spmdsim::hlo::internal {

Source::Source(std::string_view text_in, std::string file_in) : text(text_in), file(std::move(file_in)) {
  line_starts.push_back(0);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') line_starts.push_back(i + 1);
  }
}

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-' || c == '$';
}

}  // namespace

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    size_t n = 0;            // continuation bytes
    uint32_t min = 0;        // the smallest code point of that length (no overlong forms)
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    if (b >= 0xc2 && b <= 0xdf) n = 1, min = 0x80;
    else if (b >= 0xe0 && b <= 0xef) n = 2, min = 0x800;
    else if (b >= 0xf0 && b <= 0xf4) n = 3, min = 0x10000;
    bool ok = n > 0 && i + n < text.size();
    uint32_t cp = n == 1 ? b & 0x1f : n == 2 ? b & 0x0f : b & 0x07;
    for (size_t k = 1; ok && k <= n; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (c & 0x3f);
    }
    ok = ok && cp >= min && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    if (ok) {
      out.append(text.substr(i, n + 1));
      i += n + 1;
    } else {
      out.append("\xef\xbf\xbd");  // U+FFFD for the one byte that does not start a valid sequence
      ++i;
    }
  }
  return out;
}

void Scanner::SkipBlanks() {
  while (pos_ < end_) {
    const char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++pos_;
    } else if (c == '/' && PeekAt(1) == '*') {
      const size_t close = text_.find("*/", pos_ + 2);
      if (close == std::string_view::npos || close + 2 > end_) Fail("unterminated /* comment");
      pos_ = close + 2;
    } else {
      return;
    }
  }
}

void Scanner::SkipSpace() {
  while (true) {
    SkipBlanks();
    if (pos_ < end_ && text_[pos_] == '\n') {
      ++pos_;
    } else {
      return;
    }
  }
}

bool Scanner::TryConsume(char c) {
  SkipSpace();
  if (Peek() != c) return false;
  ++pos_;
  return true;
}

bool Scanner::TryConsume(std::string_view word) {
  SkipSpace();
  if (Rest().substr(0, word.size()) != word) return false;
  pos_ += word.size();
  return true;
}

void Scanner::Expect(char c, std::string_view context) {
  if (!TryConsume(c)) Fail(fmt::format("expected '{}' {}, found {}", c, context, Found()));
}

std::string_view Scanner::TryName() {
  SkipSpace();
  size_t p = pos_;
  if (p < end_ && text_[p] == '%') ++p;
  const size_t start = p;
  while (p < end_ && IsNameChar(text_[p])) ++p;
  if (p == start) return {};
  pos_ = p;
  return text_.substr(start, p - start);
}

std::string_view Scanner::Name(std::string_view what) {
  std::string_view name = TryName();
  if (name.empty()) Fail(fmt::format("expected {}, found {}", what, Found()));
  return name;
}

int64_t Scanner::Int(std::string_view what) {
  SkipSpace();
  size_t p = pos_;
  if (p < end_ && (text_[p] == '-' || text_[p] == '+')) ++p;
  const size_t digits = p;
  while (p < end_ && text_[p] >= '0' && text_[p] <= '9') ++p;
  if (p == digits) Fail(fmt::format("expected {} (an integer), found {}", what, Found()));
  const char* first = text_.data() + pos_ + (text_[pos_] == '+' ? 1 : 0);
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(first, text_.data() + p, value);
  if (ec != std::errc() || ptr != text_.data() + p) {
    Fail(fmt::format("{} {} does not fit in 64 bits", what, QuoteForError(text_.substr(pos_, p - pos_))));
  }
  pos_ = p;
  return value;
}

std::string Scanner::QuotedString(std::string_view what) {
  SkipSpace();
  if (Peek() != '"') Fail(fmt::format("expected {} (a quoted string), found {}", what, Found()));
  const size_t start = pos_;
  std::string out;
  ++pos_;
  while (true) {
    if (pos_ >= end_) FailAt(start, fmt::format("unterminated string ({})", what));
    const char c = text_[pos_++];
    if (c == '"') return ValidUtf8(out);
    if (c != '\\' || pos_ >= end_) {
      out.push_back(c);
      continue;
    }
    // C escapes (absl::CUnescape, as XLA's lexer reads strings): \n \t \r \a \b \f \v, \NNN octal, \xNN hex,
    // anything else is itself (\' \" \\ \?).
    const char e = text_[pos_++];
    auto digit_value = [](char d, int base) {
      if (d >= '0' && d <= '9' && d - '0' < base) return d - '0';
      if (base == 16 && d >= 'a' && d <= 'f') return d - 'a' + 10;
      if (base == 16 && d >= 'A' && d <= 'F') return d - 'A' + 10;
      return -1;
    };
    switch (e) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': {
        int value = 0, n = 0;
        while (n < 2 && pos_ < end_ && digit_value(text_[pos_], 16) >= 0)
          value = value * 16 + digit_value(text_[pos_++], 16), ++n;
        if (n == 0) FailAt(pos_ - 2, "\\x needs hexadecimal digits");
        out.push_back(static_cast<char>(value));
        break;
      }
      default:
        if (digit_value(e, 8) >= 0) {
          int value = e - '0', n = 1;
          while (n < 3 && pos_ < end_ && digit_value(text_[pos_], 8) >= 0)
            value = value * 8 + (text_[pos_++] - '0'), ++n;
          out.push_back(static_cast<char>(value & 0xff));
        } else {
          out.push_back(e);
        }
        break;
    }
  }
}

std::pair<size_t, size_t> Scanner::RawValue(std::string_view what) {
  SkipSpace();
  const size_t start = pos_;
  if (Peek() == '"') {
    QuotedString(what);
    return {start, pos_};
  }
  std::vector<char> closers;
  while (pos_ < end_) {
    const char c = text_[pos_];
    if (closers.empty() && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ')' ||
                            c == '}' || c == ']')) {
      break;
    }
    if (c == '"') {
      QuotedString(what);
      continue;
    }
    if (c == '\n') break;  // values are written on one line
    if (c == '(' || c == '[' || c == '{') {
      if (static_cast<int>(closers.size()) >= kMaxNesting) Fail(fmt::format("{} nests too deeply", what));
      closers.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (c != closers.back()) Fail(fmt::format("unbalanced '{}' in {}", c, what));
      closers.pop_back();
    }
    ++pos_;
  }
  if (!closers.empty()) {
    FailAt(start,
           fmt::format("unbalanced brackets in {}: missing '{}' before the end of the line", what, closers.back()));
  }
  return {start, pos_};
}

TextLocation Scanner::LocationOf(size_t offset) const {
  const auto& starts = source_->line_starts;
  const auto it = std::upper_bound(starts.begin(), starts.end(), offset);
  const size_t line = static_cast<size_t>(it - starts.begin());  // 1-based: it points past the line's start
  return TextLocation{static_cast<int>(line), static_cast<int>(offset - starts[line - 1] + 1)};
}

std::string Scanner::Where(size_t offset) const {
  const TextLocation l = LocationOf(offset);
  return fmt::format("{}:{}:{}", source_->file, l.line, l.column);
}

void Scanner::FailAt(size_t offset, const std::string& message) const {
  throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", Where(offset), message));
}

std::string Scanner::Found() const {
  if (pos_ >= end_) return "end of text";
  size_t n = 0;
  while (pos_ + n < end_ && n < 24 && text_[pos_ + n] != '\n') ++n;
  if (n == 0) return "a line break";
  return QuoteForError(text_.substr(pos_, n));
}

}  // namespace spmdsim::hlo::internal
