#include "partition/match_rules.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>

#include <boost/regex.hpp>
#include <fmt/format.h>

#include "common/error.h"
#include "common/error_context.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "partition/correction.h"

namespace spmdsim {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A code point >= 0x80 as its UTF-8 bytes, one non-capturing group of \xHH escapes.
std::string Utf8Bytes(uint32_t code) {
  std::string bytes;
  if (code < 0x800) {
    bytes = {static_cast<char>(0xc0 | (code >> 6)), static_cast<char>(0x80 | (code & 0x3f))};
  } else {
    bytes = {static_cast<char>(0xe0 | (code >> 12)), static_cast<char>(0x80 | ((code >> 6) & 0x3f)),
             static_cast<char>(0x80 | (code & 0x3f))};
  }
  std::string out = "(?:";
  for (char b : bytes) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(b));
  return out + ")";
}

// Turns a Python `re` pattern into ECMAScript, or rejects it (see match_rules.h).
class PatternTranslator {
 public:
  explicit PatternTranslator(std::string_view pattern) : p_(pattern) {}

  void Run() {
    if (p_.substr(0, 2) == "(?") LeadingFlags();
    while (i_ < p_.size()) {
      char c = p_[i_];
      switch (c) {
        case '\\':
          Escape(/*in_class=*/false);
          if (anchor_) {
            state_ = State::kStart;  // \A \Z \b \B cannot be repeated
          } else {
            Atom();
          }
          break;
        case '[': CharacterClass(); Atom(); break;
        case '(': Group(); break;
        case ')': Emit(")"); ++i_; Atom(); break;
        case '*':
        case '+':
        case '?': Quantifier(std::string(1, c), 1); break;
        case '{': Brace(); break;
        case '}': Emit("\\}"); ++i_; Atom(); break;
        case '|': Emit("|"); ++i_; state_ = State::kStart; break;
        case '^':
        case '$': Emit(std::string(1, c)); ++i_; state_ = State::kStart; break;
        case '.': Emit("[^\\n]"); ++i_; Atom(); break;  // Python's '.' matches '\r'; Boost's does not
        default: Emit(std::string(1, c)); ++i_; Atom(); break;
      }
    }
  }

  const std::string& out() const { return out_; }
  bool ignore_case() const { return ignore_case_; }

 private:
  enum class State { kStart, kAtom, kQuantifier, kLazy };

  [[noreturn]] void Fail(size_t at, std::string_view what) const {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kReError, "pattern {} at position {}: {}", PyRepr(p_), at, what);
  }
  void Emit(std::string_view text) { out_.append(text); }
  void Atom() { state_ = State::kAtom; }

  void LeadingFlags() {
    size_t j = 2;
    std::string flags;
    while (j < p_.size() && IsAsciiLetter(p_[j])) flags += p_[j++];
    if (flags.empty() || j >= p_.size()) return;  // not a flag group; Group() decides
    if (p_[j] == ':') Fail(0, fmt::format("scoped inline flags (?{}:...) are Python-only", flags));
    if (p_[j] != ')') return;
    if (flags.find_first_not_of('i') != std::string::npos) {
      Fail(0, fmt::format("inline flags (?{}) are Python-only; only a leading (?i) is supported", flags));
    }
    ignore_case_ = true;
    i_ = j + 1;
  }

  void Group() {
    if (i_ + 1 >= p_.size() || p_[i_ + 1] != '?') {
      Emit("(");
      ++i_;
      state_ = State::kStart;
      return;
    }
    if (i_ + 2 >= p_.size()) Fail(i_, "unexpected end of pattern after (?");
    char k = p_[i_ + 2];
    if (k == ':' || k == '=' || k == '!') {
      Emit(p_.substr(i_, 3));
      i_ += 3;
      state_ = State::kStart;
      return;
    }
    if (k == '#') {  // a comment runs to the first ')'
      size_t close = p_.find(')', i_);
      if (close == std::string_view::npos) Fail(i_, "missing ), unterminated comment");
      i_ = close + 1;
      return;
    }
    if (k == 'P') Fail(i_, "named groups (?P<name>...) and (?P=name) are Python-only; use a plain group");
    if (k == '<') {
      if (i_ + 3 < p_.size() && (p_[i_ + 3] == '=' || p_[i_ + 3] == '!')) {
        Fail(i_, "lookbehind (?<=...) / (?<!...) is not supported");
      }
      Fail(i_, "named groups (?<name>...) are not supported; use a plain group");
    }
    if (k == '>') Fail(i_, "atomic groups (?>...) are not supported");
    if (k == '(') Fail(i_, "conditional groups (?(id)yes|no) are not supported");
    if (IsAsciiLetter(k) || k == '-') {
      Fail(i_, "inline flags are only supported as a leading (?i) (Python requires global flags at the start)");
    }
    Fail(i_, fmt::format("unknown extension ?{}", k));
  }

  void Quantifier(std::string text, size_t length) {
    if (state_ == State::kQuantifier && text == "+") {
      Fail(i_, "possessive quantifiers (a*+, a++, a?+, a{2}+) are not supported");
    }
    if (state_ == State::kQuantifier && text == "?") {
      Emit("?");
      ++i_;
      state_ = State::kLazy;
      return;
    }
    if (state_ == State::kQuantifier || state_ == State::kLazy) Fail(i_, "multiple repeat");
    if (state_ == State::kStart) Fail(i_, "nothing to repeat");
    Emit(text);
    i_ += length;
    state_ = State::kQuantifier;
  }

  // Python's rules for '{': {m}, {m,}, {,n}, {m,n} repeat; anything else is a literal '{'.
  void Brace() {
    size_t j = i_ + 1;
    std::string lo, hi;
    while (j < p_.size() && IsDigit(p_[j])) lo += p_[j++];
    bool comma = j < p_.size() && p_[j] == ',';
    if (comma) {
      ++j;
      while (j < p_.size() && IsDigit(p_[j])) hi += p_[j++];
    }
    bool repeat = j < p_.size() && p_[j] == '}' && !(lo.empty() && !comma);
    if (!repeat) {
      Emit("\\{");
      ++i_;
      Atom();
      return;
    }
    if (!lo.empty() && !hi.empty() && std::stoll(hi) < std::stoll(lo)) Fail(i_, "min repeat greater than max repeat");
    std::string text = comma ? fmt::format("{{{},{}}}", lo.empty() ? "0" : lo, hi) : fmt::format("{{{}}}", lo);
    Quantifier(text, j + 1 - i_);
  }

  void Escape(bool in_class) {
    if (i_ + 1 >= p_.size()) Fail(i_, "bad escape (end of pattern)");
    char e = p_[i_ + 1];
    size_t at = i_;
    i_ += 2;
    anchor_ = !in_class && (e == 'A' || e == 'Z' || e == 'z' || e == 'b' || e == 'B');
    switch (e) {
      case 'A':
      case 'Z':
      case 'z':
        if (in_class) Fail(at, fmt::format("bad escape \\{}", e));
        Emit(e == 'A' ? "^" : "$");
        return;
      case 'b':
      case 'B':
        if (in_class && e == 'B') Fail(at, "bad escape \\B");
        Emit(in_class ? "\\b" : fmt::format("\\{}", e));
        return;
      case 'd': case 'D': case 's': case 'S': case 'w': case 'W':
      case 'n': case 'r': case 't': case 'f': case 'v':
        Emit(fmt::format("\\{}", e));
        return;
      case 'a': Emit("\\x07"); return;
      case 'x':
      case 'u': {
        size_t digits = e == 'x' ? 2 : 4;
        if (i_ + digits > p_.size() ||
            !std::all_of(p_.begin() + i_, p_.begin() + i_ + digits, [](char h) { return std::isxdigit(h); })) {
          Fail(at, fmt::format("incomplete escape \\{}", e));
        }
        const auto code = static_cast<uint32_t>(std::stoul(std::string(p_.substr(i_, digits)), nullptr, 16));
        i_ += digits;
        if (code < 0x80) {
          Emit(fmt::format("\\x{:02x}", code));
        } else if (in_class) {
          Fail(at, fmt::format("non-ASCII \\{} escapes inside a set are not supported", e));
        } else {
          Emit(Utf8Bytes(code));  // names are UTF-8: the code point's bytes, as one atom
        }
        return;
      }
      case '0':
        if (i_ < p_.size() && IsDigit(p_[i_])) Fail(at, "octal escapes are not supported; use \\xhh");
        Emit("\\0");
        return;
      default: break;
    }
    if (IsDigit(e)) {
      if (in_class) Fail(at, "backreferences or octal escapes inside a set are not supported");
      Emit(fmt::format("\\{}", e));  // a group reference; ECMAScript reads \1-\9 (and more digits) alike
      while (i_ < p_.size() && IsDigit(p_[i_]) && i_ - at < 3) Emit(std::string(1, p_[i_++]));
      return;
    }
    if (IsAsciiLetter(e)) {
      Fail(at, fmt::format("bad escape \\{} (Python rejects it or ECMAScript reads it differently)", e));
    }
    if (e == '_') {
      Emit("_");
    } else if (static_cast<unsigned char>(e) < 0x80) {
      Emit(fmt::format("\\{}", e));
    } else {
      Emit(std::string(1, e));
    }
  }

  void CharacterClass() {
    size_t start = i_;
    Emit("[");
    ++i_;
    if (i_ < p_.size() && p_[i_] == '^') {
      Emit("^");
      ++i_;
    }
    if (i_ < p_.size() && p_[i_] == ']') {  // Python: a ']' first in a set is literal
      Emit("\\]");
      ++i_;
    }
    while (true) {
      if (i_ >= p_.size()) Fail(start, "unterminated character set");
      char c = p_[i_];
      if (c == ']') {
        Emit("]");
        ++i_;
        return;
      }
      if (c == '\\') {
        Escape(/*in_class=*/true);
        continue;
      }
      if (c == '[') {
        if (i_ + 1 < p_.size() && (p_[i_ + 1] == ':' || p_[i_ + 1] == '=' || p_[i_ + 1] == '.')) {
          Fail(i_, "POSIX classes such as [[:alpha:]] mean a plain set in Python; write the set out");
        }
        Emit("\\[");
        ++i_;
        continue;
      }
      Emit(std::string(1, c));
      ++i_;
    }
  }

  std::string_view p_;
  size_t i_ = 0;
  std::string out_;
  bool ignore_case_ = false;
  bool anchor_ = false;  // the last escape was an anchor
  State state_ = State::kStart;
};

bool ShouldLog(const std::optional<bool>& log) { return log.has_value() ? *log : LogShardingMoveFromEnvironment(); }

void Log(const MatchOptions& options, const std::string& message) {
  std::ostream& out = options.log_stream != nullptr ? *options.log_stream : std::cerr;
  out << "spmdsim: " << message << '\n';
}

PartitionSpec Trimmed(const PartitionSpec& spec, size_t rank) {
  std::vector<PartitionSpec::Entry> entries(spec.entries().begin(), spec.entries().begin() + rank);
  return PartitionSpec(std::move(entries));
}

}  // namespace

struct PyRegex::Compiled {
  boost::regex regex;
};

PyRegex::PyRegex(std::string pattern) : pattern_(std::move(pattern)) {
  PatternTranslator translator(pattern_);
  translator.Run();
  translated_ = translator.out();
  ignore_case_ = translator.ignore_case();
  // no_mod_m: ^ and $ match at the ends of the text only, as in Python without re.MULTILINE.
  auto flags = boost::regex::ECMAScript | boost::regex::no_mod_m;
  if (ignore_case_) flags |= boost::regex::icase;
  try {
    regex_ = std::make_shared<const Compiled>(Compiled{boost::regex(translated_, flags)});
  } catch (const boost::regex_error& e) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kReError, "pattern {} is not a valid regular expression: {}",
              PyRepr(pattern_), e.what());
  }
}

bool PyRegex::Search(std::string_view text) const {
  try {
    return boost::regex_search(text.begin(), text.end(), regex_->regex);
  } catch (const std::runtime_error&) {
    // Boost.Regex's bound on backtracking (error_complexity) or on its own stack (error_stack).
    Throw(ErrorCode::kInvalidArgument, "the pattern {} is too expensive to match against {}", QuoteForError(pattern_),
          QuoteForError(text));
  }
}

std::string_view MatchReasonName(MatchReason reason) {
  switch (reason) {
    case MatchReason::kRule: return "rule";
    case MatchReason::kTrimmed: return "trimmed";
    case MatchReason::kBelowMinSize: return "below_min_size";
    case MatchReason::kScalar: return "scalar";
    case MatchReason::kNotAnArray: return "not_an_array";
  }
  return "";
}

int64_t MinShardingSizeFromEnvironment() {
  const char* raw = std::getenv("MIN_SHARDING_SIZE");
  if (raw == nullptr) return 16384;
  std::string_view text = Trim(raw);
  std::string digits;
  size_t i = 0;
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    i = 1;
  }
  bool ok = i < text.size();
  for (; i < text.size() && ok; ++i) {
    if (IsDigit(text[i])) {
      digits += text[i];
    } else {
      // Python allows one '_' between digits.
      ok = text[i] == '_' && !digits.empty() && i + 1 < text.size() && IsDigit(text[i + 1]);
    }
  }
  if (!ok || digits.empty() || digits.size() > 18) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "invalid literal for int() with base 10: {} (MIN_SHARDING_SIZE)", PyRepr(raw));
  }
  int64_t value = std::stoll(digits);
  return negative ? -value : value;
}

PartitionRules::PartitionRules(std::vector<PartitionRule> rules) : rules_(std::move(rules)) {
  compiled_.reserve(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    try {
      compiled_.emplace_back(rules_[r].pattern);
    } catch (const Error& e) {
      RethrowWithContext(e, fmt::format("partition rule {}: {}", r, e.message()));
    }
  }
}

MatchedSpec PartitionRules::Match(std::string_view name, std::optional<std::span<const int64_t>> shape,
                                  const MatchOptions& options) const {
  MatchedSpec out{std::string(name), PartitionSpec(), MatchReason::kRule, std::nullopt};
  if (options.strict) {
    if (!shape.has_value()) {
      out.reason = MatchReason::kNotAnArray;
      return out;
    }
    if (shape->empty()) {
      out.reason = MatchReason::kScalar;
      return out;
    }
  }
  for (size_t r = 0; r < compiled_.size(); ++r) {
    if (!compiled_[r].Search(name)) continue;
    out.rule_index = static_cast<int>(r);
    const PartitionSpec& spec = rules_[r].spec;
    if (!options.strict) {
      out.spec = spec;
      return out;
    }
    int64_t size = 1;
    for (int64_t d : *shape) size *= d;
    int64_t min_size = options.min_size.has_value() ? *options.min_size : MinShardingSizeFromEnvironment();
    if (size < min_size) {
      out.reason = MatchReason::kBelowMinSize;
      if (ShouldLog(options.log)) {
        Log(options, fmt::format("{} has {} elements (< min_size {}): replicated instead of {}", name, size, min_size,
                                 spec.ToString()));
      }
      return out;
    }
    if (static_cast<size_t>(spec.size()) > shape->size()) {
      out.spec = Trimmed(spec, shape->size());
      out.reason = MatchReason::kTrimmed;
      if (ShouldLog(options.log)) {
        Log(options, fmt::format("{} has rank {}: spec {} trimmed to {}", name, shape->size(), spec.ToString(),
                                 out.spec.ToString()));
      }
      return out;
    }
    out.spec = spec;
    return out;
  }
  ThrowKind(ErrorCode::kNotFound, ErrorKind::kValueError, "Partition rule not found for param: {}", name);
}

std::vector<MatchedSpec> PartitionRules::MatchAll(std::span<const NamedParameter> params,
                                                  const MatchOptions& options) const {
  MatchOptions resolved = options;
  if (!resolved.min_size.has_value()) resolved.min_size = MinShardingSizeFromEnvironment();
  if (!resolved.log.has_value()) resolved.log = LogShardingMoveFromEnvironment();
  std::vector<MatchedSpec> out;
  out.reserve(params.size());
  for (const NamedParameter& param : params) {
    std::optional<std::span<const int64_t>> shape;
    if (param.shape.has_value()) shape = std::span<const int64_t>(*param.shape);
    out.push_back(Match(param.name, shape, resolved));
  }
  return out;
}

std::vector<std::pair<std::string, PartitionSpec>> MatchPartitionRules(std::span<const PartitionRule> rules,
                                                                       std::span<const NamedParameter> params,
                                                                       const MatchOptions& options) {
  PartitionRules compiled(std::vector<PartitionRule>(rules.begin(), rules.end()));
  std::vector<std::pair<std::string, PartitionSpec>> out;
  for (MatchedSpec& m : compiled.MatchAll(params, options)) out.emplace_back(std::move(m.name), std::move(m.spec));
  return out;
}

std::vector<PartitionRule> ParsePatternRules(std::string_view pattern) {
  std::vector<PartitionRule> rules;
  for (const std::string& rule : Split(pattern, ',')) {
    size_t arrow = rule.find("->");
    if (arrow == std::string::npos) continue;
    if (rule.find("->", arrow + 2) != std::string::npos) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "too many values to unpack (expected 2) in pattern rule {} (one '->' per rule)", PyRepr(rule));
    }
    std::vector<PartitionSpec::Entry> entries;
    for (const std::string& axis : Split(std::string_view(rule).substr(arrow + 2), '.')) {
      entries.push_back(PartitionSpec::Entry::Axis(axis));
    }
    PartitionSpec spec(std::move(entries));
    for (const std::string& p : Split(std::string_view(rule).substr(0, arrow), '|')) rules.push_back({p, spec});
  }
  return rules;
}

PatternBasedPartitionSpec::PatternBasedPartitionSpec(std::string_view pattern, PartitionSpec default_spec)
    : rules_(ParsePatternRules(pattern)), default_spec_(std::move(default_spec)) {
  compiled_.reserve(rules_.size());
  for (const PartitionRule& rule : rules_) compiled_.emplace_back(rule.pattern);
}

const PartitionSpec& PatternBasedPartitionSpec::operator()(std::string_view name) const {
  for (size_t r = 0; r < compiled_.size(); ++r) {
    if (compiled_[r].Search(name)) return rules_[r].spec;
  }
  return default_spec_;
}

}  // namespace spmdsim
