// Small string helpers shared by every module: Python-like formatting of strings and tuples, byte sizes and
// durations (the units and how they are written), and parsing of integers and "a=4,b=2" lists for the CLI and
// scenario files (shapes: common/shape.h).
#ifndef SPMDSIM_COMMON_STRINGS_H_
#define SPMDSIM_COMMON_STRINGS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace spmdsim {

// Python's repr of a string: 'dp' (double quotes when the text holds a single quote and no double quote;
// backslash, the quote, newline and tab escaped).
std::string PyRepr(std::string_view text);
// Python's repr of a tuple of ints, as JAX prints shapes: (4,), (2, 2), ().
std::string PyTuple(std::span<const int64_t> values);
std::string PyTuple(const std::vector<int64_t>& values);
std::string PyTuple(const std::vector<int>& values);
// Python's repr of a tuple of strings: ('x',), ('x', 'y') (each entry as PyRepr).
std::string PyTuple(const std::vector<std::string>& values);

// A byte count as XLA writes it in its messages (JAX's "Out of memory while trying to allocate 2.00MiB"):
// under 1024 "12B"; otherwise two decimals and a binary unit, no space: "1.50KiB", "4.02MiB", "16.00GiB",
// "1.00TiB", "2.00PiB" (PiB is the largest unit); negative counts with a leading '-'.
std::string HumanBytes(int64_t bytes);
// A byte count as a size is written in a config or a sweep: the largest binary unit that divides it exactly, no
// decimals, no space: 4096 -> "4KiB", 3 * kMiB -> "3MiB", kGiB -> "1GiB", 1000 -> "1000B".
std::string ExactBytes(int64_t bytes);

// Binary units, in bytes: every size in the tree is written with them (64 * kKiB, 16 * kMiB, 4 * kGiB), never as a
// shift or a product of 1024s.
inline constexpr int64_t kKiB = int64_t{1} << 10;
inline constexpr int64_t kMiB = int64_t{1} << 20;
inline constexpr int64_t kGiB = int64_t{1} << 30;
inline constexpr int64_t kTiB = int64_t{1} << 40;

// A unit of a column or a value: its name and how many base units (bytes, seconds) it holds.
struct Unit {
  std::string_view name;
  double scale;  // a value is printed as value / scale
};
// The unit that keeps a column whose largest magnitude is `max_seconds` readable: s from 1 s, ms from 1 ms, us from
// 1 us (and for 0), ns below.
Unit TimeUnitFor(double max_seconds);
// The same for bytes: GiB from 1 GiB, MiB, KiB, B below 1 KiB.
Unit ByteUnitFor(double max_bytes);

// How FormatSeconds writes a duration.
enum class SecondsStyle {
  // Three significant digits in the unit TimeUnitFor picks: "1.5 us", "12.3 ms", "2.05 s", "0 us". What the
  // reports print (`spmdsim run` and `spmdsim plan`, their HTML pages): a prediction, which more digits would not
  // make truer.
  kThreeDigits,
  // Every digit of the value as {:g} writes it, in ms from 1 ms and in us below: "1 us", "0.1 us", "2.7 us",
  // "2 ms", "1500 ms". What `spmdsim mesh` prints for a link's latency: a figure a preset or a user wrote, which
  // rounding would misquote.
  kAsWritten,
};
// A duration with its unit ("1.50 us" style per SecondsStyle; negative durations keep their sign).
std::string FormatSeconds(double seconds, SecondsStyle style = SecondsStyle::kThreeDigits);

std::vector<std::string> Split(std::string_view text, char separator);
std::string_view Trim(std::string_view text);

// Parses a whole decimal integer; throws Error(kInvalidArgument) naming `what` otherwise.
int64_t ParseInt(std::string_view text, std::string_view what);
// "data=4,model=2" -> {{"data",4},{"model",2}}; order kept, names unique, sizes positive.
std::vector<std::pair<std::string, int64_t>> ParseNamedSizes(std::string_view text, std::string_view what);

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_STRINGS_H_
