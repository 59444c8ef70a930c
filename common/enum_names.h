// A closed enum's names, written once as a table beside the enum and read both ways: NameOf to print or write a
// value, ParseName to read one, NamesOf for the "valid values: ..." list of an error. The model's enums
// (model/config.h), the software stacks (model/stack.h) and the workload kinds (workloads/workloads.h) keep theirs
// this way, and the scenario files' reader and writer use those tables instead of spelling the names again.
//
// Example:
//   enum class Norm { kLayerNorm, kRmsNorm };
//   inline constexpr EnumName<Norm> kNormNames[] = {{Norm::kLayerNorm, "layernorm"}, {Norm::kRmsNorm, "rmsnorm"}};
//   NameOf(kNormNames, Norm::kRmsNorm) == "rmsnorm";  ParseName(kNormNames, "layernorm") == Norm::kLayerNorm;
//   ParseName(kNormNames, "batchnorm") == std::nullopt;  NamesOf(kNormNames) == {"layernorm", "rmsnorm"}
//
// Thread safety: constant tables and pure functions.
#ifndef SPMDSIM_COMMON_ENUM_NAMES_H_
#define SPMDSIM_COMMON_ENUM_NAMES_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spmdsim {

template <typename Enum>
struct EnumName {
  Enum value;
  std::string_view name;
};

// The name of `value`; "?" when the table lacks it (a table covers every value of its enum).
template <typename Enum, size_t N>
constexpr std::string_view NameOf(const EnumName<Enum> (&table)[N], Enum value) {
  for (const EnumName<Enum>& e : table)
    if (e.value == value) return e.name;
  return "?";
}

// The value named `name` (exact, case-sensitive), or nullopt.
template <typename Enum, size_t N>
constexpr std::optional<Enum> ParseName(const EnumName<Enum> (&table)[N], std::string_view name) {
  for (const EnumName<Enum>& e : table)
    if (e.name == name) return e.value;
  return std::nullopt;
}

// Every name, in the table's order.
template <typename Enum, size_t N>
std::vector<std::string> NamesOf(const EnumName<Enum> (&table)[N]) {
  std::vector<std::string> names;
  names.reserve(N);
  for (const EnumName<Enum>& e : table) names.emplace_back(e.name);
  return names;
}

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_ENUM_NAMES_H_
