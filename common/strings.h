// Small string helpers shared by every module: joining, Python-like formatting of tuples, parsing of
// "a=4,b=2" lists and "2x2x4" dimension strings for the CLI and scenario files.
#ifndef SPMDSIM_COMMON_STRINGS_H_
#define SPMDSIM_COMMON_STRINGS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace spmdsim {

// Python's repr of a tuple of ints: (4,), (2, 2), ().
std::string PyTuple(const std::vector<int64_t>& values);
std::string PyTuple(const std::vector<int>& values);
// Python's repr of a tuple of strings: ('x',), ('x', 'y').
std::string PyTuple(const std::vector<std::string>& values);

std::vector<std::string> Split(std::string_view text, char separator);
std::string_view Trim(std::string_view text);

// Parses a whole decimal integer; throws Error(kInvalidArgument) naming `what` otherwise.
int64_t ParseInt(std::string_view text, std::string_view what);
// "2x2x4" -> {2, 2, 4}; every entry a positive integer. `what` names the field in errors.
std::vector<int64_t> ParseDims(std::string_view text, std::string_view what);
// "data=4,model=2" -> {{"data",4},{"model",2}}; order kept, names unique, sizes positive.
std::vector<std::pair<std::string, int64_t>> ParseNamedSizes(std::string_view text, std::string_view what);

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_STRINGS_H_
