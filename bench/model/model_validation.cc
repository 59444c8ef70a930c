// Prints the model workload's validation table (Markdown; docs/model-validation.md) and exits 1 when a row
// drifts past its tolerance. With --bands, prints instead the error band of each class of rows (hardware x stack x
// parallelism) as the C++ initializer rows that model/validation_bands.inc holds.
//   build/dev/bench/model/model_validation
//   build/dev/bench/model/model_validation --bands > model/validation_bands.inc
#include <cmath>
#include <cstdio>
#include <string_view>

#include "model/validation.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--bands") {
    std::fputs(spmdsim::FormatValidationBandsInc(spmdsim::ComputeModelValidationBands()).c_str(), stdout);
    return 0;
  }
  const std::vector<spmdsim::ModelValidationRow> rows = spmdsim::ComputeModelValidationRows();
  std::fputs(spmdsim::FormatModelValidationTable(rows).c_str(), stdout);
  std::fprintf(stdout, "\n%s\n", spmdsim::ModelValidationSummary(rows).c_str());
  std::fputs("\n", stdout);
  std::fputs(spmdsim::FormatLayerValidationTable(spmdsim::ComputeLayerValidationRows()).c_str(), stdout);
  std::fputs("\n", stdout);
  std::fputs(spmdsim::FormatCalibrationHoldoutTable(spmdsim::ComputeCalibrationHoldoutRows()).c_str(), stdout);
  std::fputs("\n", stdout);
  std::fputs(spmdsim::OneDeviceLayerPredictions().c_str(), stdout);
  std::fputs("\n", stdout);
  std::fputs(spmdsim::MechanismAblationTable().c_str(), stdout);
  const std::vector<spmdsim::ModelValidationRow> unseen = spmdsim::ComputeUnseenCheckRows();
  std::fprintf(stdout, "\n%s\n%s\n", spmdsim::FormatModelValidationTable(unseen).c_str(),
               spmdsim::ModelValidationSummary(unseen).c_str());
  std::fprintf(stdout, "\n%s", spmdsim::FormatMemoryValidationTable(spmdsim::ComputeMemoryValidationRows()).c_str());
  std::vector<spmdsim::ModelValidationRow> all = rows;
  all.insert(all.end(), unseen.begin(), unseen.end());
  std::fprintf(stdout, "\n%s\n%s\n", spmdsim::FormatMemoryFitTable(all).c_str(),
               spmdsim::MemoryFitSummary(all).c_str());
  int failures = 0;
  for (const auto& row : rows) {
    if (row.enforced && !row.within()) ++failures;
  }
  if (failures > 0) std::fprintf(stderr, "%d row(s) drift past their tolerance\n", failures);
  std::fflush(stdout);
  const bool biased = std::fabs(spmdsim::EnforcedMeanSignedGap(rows)) > spmdsim::kModelValidationMeanGap;
  if (biased) {
    std::fprintf(stderr, "the enforced rows' mean signed gap is past +-%.0f%%\n",
                 100 * spmdsim::kModelValidationMeanGap);
  } else if (std::fabs(spmdsim::MeanSignedGap(rows)) > spmdsim::kModelValidationMeanGap) {
    std::fprintf(stderr, "note: with the rows not enforced, the mean signed gap is past +-%.0f%% "
                 "(docs/model-validation.md)\n", 100 * spmdsim::kModelValidationMeanGap);
  }
  return failures > 0 || biased ? 1 : 0;
}
