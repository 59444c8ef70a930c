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
    if (c == '"') return out;
    if (c == '\\' && pos_ < end_) {
      const char e = text_[pos_++];
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        default: out.push_back(e); break;
      }
    } else {
      out.push_back(c);
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
    FailAt(start, fmt::format("unbalanced brackets in {}: missing '{}' before the end of the line", what, closers.back()));
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
