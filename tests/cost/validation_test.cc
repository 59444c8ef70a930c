#include "cost/validation.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

TEST(Validation, EveryEnforcedRowIsWithinItsTolerance) {
  const std::vector<ValidationRow> rows = ComputeValidationRows();
  std::cout << FormatValidationTable(rows);  // the gap of every row, as the doc shows
  ASSERT_FALSE(rows.empty());
  for (const ValidationRow& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_GT(row.reference, 0);
    EXPECT_TRUE(std::isfinite(row.predicted));
    if (row.enforced) {
      EXPECT_LE(row.tolerance, kSmallMessageTolerance);
      EXPECT_LE(std::fabs(row.gap()), row.tolerance)
          << "reference " << row.reference << " " << row.unit << " (" << row.source << "), predicted "
          << row.predicted << ", gap " << 100 * row.gap() << "%";
    }
  }
}

TEST(Validation, EveryRowStatesItsSourceAndMethod) {
  for (const ValidationRow& row : ComputeValidationRows()) {
    SCOPED_TRACE(row.name);
    EXPECT_FALSE(row.source.empty());
    EXPECT_FALSE(row.note.empty());
    EXPECT_FALSE(row.unit.empty());
  }
}

TEST(Validation, TheDocumentListsEveryRow) {
  std::ifstream in(std::string(SPMDSIM_SOURCE_DIR) + "/docs/cost-model-validation.md");
  ASSERT_TRUE(in.good()) << "docs/cost-model-validation.md is missing";
  std::stringstream text;
  text << in.rdbuf();
  for (const ValidationRow& row : ComputeValidationRows()) EXPECT_THAT(text.str(), HasSubstr(row.name));
}

TEST(Validation, TheDocumentHoldsTheCurrentTable) {
  std::ifstream in(std::string(SPMDSIM_SOURCE_DIR) + "/docs/cost-model-validation.md");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr(FormatValidationTable(ComputeValidationRows())))
      << "regenerate the table: build/dev/bench/cost/cost_validation";
}

TEST(Validation, LargeMessagesGetTenPercentAndSmallOnesTwenty) {
  EXPECT_EQ(ToleranceForBytes(64.0 * 1024 * 1024), kValidationTolerance);
  EXPECT_EQ(ToleranceForBytes(16.0 * 1024 * 1024), kSmallMessageTolerance);
  int large = 0, small = 0;
  for (const ValidationRow& row : ComputeValidationRows()) {
    if (row.tolerance == kValidationTolerance) ++large;
    if (row.tolerance == kSmallMessageTolerance) ++small;
  }
  EXPECT_GT(large, 0);
  EXPECT_GT(small, 0);
}

TEST(Validation, TableMarksRowsOutsideTheTolerance) {
  ValidationRow inside{"a", "ms", 10, "s", 10.5, true, "n"};
  ValidationRow outside{"b", "ms", 10, "s", 12, false, "n"};
  ValidationRow failing{"c", "ms", 10, "s", 8, true, "n"};
  ValidationRow small{"d", "us", 10, "s", 11.5, true, "n", kSmallMessageTolerance};
  std::string table = FormatValidationTable({inside, outside, failing, small});
  EXPECT_THAT(table, HasSubstr("| a | 10 ms | 10.5 ms | +5.0% | yes (10%), within |"));
  EXPECT_THAT(table, HasSubstr("| b | 10 ms | 12 ms | +20.0% | no (outside) |"));
  EXPECT_THAT(table, HasSubstr("| c | 10 ms | 8 ms | -20.0% | yes (10%), FAILS |"));
  EXPECT_THAT(table, HasSubstr("| d | 10 us | 11.5 us | +15.0% | yes (20%), within |"));
}

}  // namespace
}  // namespace spmdsim
