// Prints the model workload's validation table (Markdown; docs/model-validation.md) and exits 1 when a row
// drifts past its tolerance.
//   build/dev/bench/model/model_validation
#include <cstdio>

#include "model/validation.h"

int main() {
  const std::vector<spmdsim::ModelValidationRow> rows = spmdsim::ComputeModelValidationRows();
  std::fputs(spmdsim::FormatModelValidationTable(rows).c_str(), stdout);
  std::fputs("\n", stdout);
  std::fputs(spmdsim::FormatLayerValidationTable(spmdsim::ComputeLayerValidationRows()).c_str(), stdout);
  std::fputs("\n", stdout);
  std::fputs(spmdsim::FormatCalibrationHoldoutTable(spmdsim::ComputeCalibrationHoldoutRows()).c_str(), stdout);
  int failures = 0;
  for (const auto& row : rows) {
    if (row.enforced && !row.within()) ++failures;
  }
  if (failures > 0) std::fprintf(stderr, "%d row(s) drift past their tolerance\n", failures);
  return failures > 0 ? 1 : 0;
}
