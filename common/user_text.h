// Text that users give (flags, scenario values, file contents) as it appears in error messages.
//
// QuoteForError is the one place that decides how a user's value is quoted in a message: in single quotes,
// control and non-ASCII bytes escaped as \xNN, and at most kMaxQuotedChars characters of it, so that a 100 kB
// value gives a one-line message.
//
// Example:
//   QuoteForError("tpu-v4:2x2")           -> 'tpu-v4:2x2'
//   QuoteForError(std::string(1000, 'a')) -> 'aaaa...aaaa'... (1000 chars)   (80 a's, then the length)
#ifndef SPMDSIM_COMMON_USER_TEXT_H_
#define SPMDSIM_COMMON_USER_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spmdsim {

inline constexpr size_t kMaxQuotedChars = 80;

// 'text' with bytes < 0x20 and >= 0x7f as \xNN, cut after kMaxQuotedChars bytes ("'...'... (N chars)").
std::string QuoteForError(std::string_view text);

// A repr (a spec, a mesh, a tuple) inside a peer's message, as is up to kMaxReprChars characters, else its
// first kMaxReprChars characters and "... (N chars)": a 1000-axis spec must not make a 100 kB message.
inline constexpr size_t kMaxReprChars = 200;
std::string Abbreviate(std::string_view repr);

// A message on one line, as the CLI prints every error: each line break (with the blanks around it) becomes
// "; " (" " after a line that ends in '.', ';' or ':'), so a peer's multi-line message keeps its words:
// "No default mesh ... explicitly. \nPlatform: tpu\nBounds: ..." -> "... explicitly. Platform: tpu; Bounds: ...".
std::string OneLine(std::string_view message);

// What the CLI prints of an error: OneLine(message), cut after kMaxErrorLineChars with "... (N chars)" -- the
// last guard against a message that quotes a huge value somewhere QuoteForError/Abbreviate was not used.
inline constexpr size_t kMaxErrorLineChars = 1000;
std::string ErrorLine(std::string_view message);

// The first `max_items` of `items` joined by ", ", then ", ... (N in all)" when there are more.
std::string JoinFirst(const std::vector<std::string>& items, size_t max_items = 5);

// Parses a whole decimal integer in [lo, hi]; throws Error(kInvalidArgument) naming `what` and the valid range
// in words otherwise ("--submesh entry: 4294967297 is out of range; expected an integer from 1 to 2147483647").
// Never wraps: a value that does not fit in 64 bits is out of range too.
int64_t ParseIntIn(std::string_view text, std::string_view what, int64_t lo, int64_t hi);
// "an integer from 1 to 2147483647", "a positive integer", "a non-negative integer", "an integer >= 20".
std::string DescribeIntRange(int64_t lo, int64_t hi);

// The entry of `valid` closest to `found` by edit distance (case-insensitive), when it is close enough to be a
// likely typo: at most max(2, |found| / 3) edits and fewer than |found|. nullopt otherwise.
// Example: DidYouMean("tpu-v5", {"tpu-v4", "tpu-v5e", "tpu-v5p"}) -> "tpu-v4" (1 edit; ties: the first)
std::optional<std::string> DidYouMean(std::string_view found, const std::vector<std::string>& valid);
// Every entry of `valid` that starts with `found` (at least 3 characters), else every one at the smallest edit
// distance when that is close enough (as DidYouMean): "tpu-v5" -> {"tpu-v5e", "tpu-v5p"}. Empty when none is
// close, or when more than kMaxSuggestions are (a thousand axes "axis0".."axis999" suggest nothing for "axis_x").
inline constexpr size_t kMaxSuggestions = 3;
std::vector<std::string> CloseMatches(std::string_view found, const std::vector<std::string>& valid);
// "'x'", "'x' or 'y'", "'x', 'y' or 'z'": each name through QuoteForError.
std::string QuotedAlternatives(const std::vector<std::string>& names);
// " (did you mean 'x'?)", " (did you mean 'x' or 'y'?)" for CloseMatches, "" when there are none.
std::string DidYouMeanSuffix(std::string_view found, const std::vector<std::string>& valid);

// Where a byte sits in a text: 1-based line and column (column counted in bytes).
struct TextPosition {
  int line = 1;
  int column = 1;
};
TextPosition PositionOf(std::string_view text, size_t offset);

// The offset of the first byte that does not belong to a valid UTF-8 sequence (overlong forms, surrogates and
// code points above U+10FFFF are invalid, as in Python's bytes.decode('utf-8')); nullopt when all is valid.
std::optional<size_t> FindInvalidUtf8(std::string_view text);

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_USER_TEXT_H_
