// Test helper: the message ParseScenario throws for a scenario text, or "" when it parses.
#ifndef SPMDSIM_TESTS_SCENARIO_PARSE_ERROR_H_
#define SPMDSIM_TESTS_SCENARIO_PARSE_ERROR_H_

#include <string>

#include "common/error.h"
#include "scenario/scenario.h"

namespace spmdsim::testing_scenario {

// The file is named "t.yaml" in every located message.
inline std::string ErrorOf(const std::string& text) {
  try {
    ParseScenario(text, "t.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace spmdsim::testing_scenario

#endif  // SPMDSIM_TESTS_SCENARIO_PARSE_ERROR_H_
