// Prints the cost model's validation table (Markdown) and exits 1 when an enforced row drifts past its tolerance
// (10% for messages >= 64 MiB and bandwidth rules, 20% below).
//   build/dev/bench/cost/cost_validation
#include <cmath>
#include <cstdio>

#include "cost/validation.h"

int main() {
  const std::vector<spmdsim::ValidationRow> rows = spmdsim::ComputeValidationRows();
  std::fputs(spmdsim::FormatValidationTable(rows).c_str(), stdout);
  int failures = 0;
  for (const auto& row : rows) {
    if (row.enforced && !row.within()) ++failures;
  }
  if (failures > 0) std::fprintf(stderr, "%d enforced row(s) drift past their tolerance\n", failures);
  return failures > 0 ? 1 : 0;
}
