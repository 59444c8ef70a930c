#include "scenario/scenario_types.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace spmdsim {

std::string SourceLocation::ToString() const { return fmt::format("{}:{}:{}", file, line, column); }

std::string_view ArrayInitKindName(ArrayInit::Kind kind) {
  switch (kind) {
    case ArrayInit::Kind::kZeros: return "zeros";
    case ArrayInit::Kind::kOnes: return "ones";
    case ArrayInit::Kind::kIota: return "iota";
    case ArrayInit::Kind::kRandom: return "random";
    case ArrayInit::Kind::kNpy: return "npy";
  }
  return "?";
}

const ScenarioArray& Scenario::array(std::string_view name) const {
  std::vector<std::string> names;
  for (const ScenarioArray& a : arrays) {
    if (a.name == name) return a;
    names.push_back(a.name);
  }
  Throw(ErrorCode::kNotFound, "scenario has no array '{}'; its arrays are: {}", name, fmt::join(names, ", "));
}

}  // namespace spmdsim
