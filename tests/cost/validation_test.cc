#include "cost/validation.h"

#include <cmath>
#include <fstream>
#include <regex>
#include <iostream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

// Issue 12's rule, on every row: within 10% for messages of 64 MiB and more, within 20% below.
TEST(Validation, EveryRowIsWithinTheIssuesToleranceForItsSize) {
  const std::vector<ValidationRow> rows = ComputeValidationRows();
  std::cout << FormatValidationTable(rows);  // the gap of every row, as the doc shows
  ASSERT_FALSE(rows.empty());
  for (const ValidationRow& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_GT(row.reference, 0);
    EXPECT_TRUE(std::isfinite(row.predicted));
    EXPECT_GE(row.message_bytes, 8) << "every row names the size of its message";
    const double tolerance = row.message_bytes >= 64.0 * kMiB ? 0.10 : 0.20;
    EXPECT_EQ(row.tolerance(), tolerance);
    EXPECT_LE(std::fabs(row.gap()), tolerance)
        << "reference " << row.reference << " " << row.unit << " (" << row.source << "), predicted "
        << row.predicted << ", gap " << 100 * row.gap() << "%";
  }
}

// The rule-of-thumb comparisons are not validation rows, but they must still be what their note explains.
TEST(Validation, TheRuleOfThumbOnAFourChipAxisDropsThreeQuarters) {
  const std::vector<ValidationRow> rows = ComputeRuleOfThumbComparisons();
  ASSERT_EQ(rows.size(), 1u);
  // (p-1)/p V/W at p = 4, plus ceil(3/2) = 2 hops of 1 us: 0.75 of the rule within 0.1%.
  EXPECT_NEAR(rows[0].predicted / rows[0].reference, 0.75, 1e-3);
  EXPECT_FALSE(rows[0].source.empty());
  EXPECT_FALSE(rows[0].note.empty());
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
  for (const ValidationRow& row : ComputeRuleOfThumbComparisons()) EXPECT_THAT(text.str(), HasSubstr(row.name));
}

// Issue 34's bar: every enforced all-reduce row on one NVLink node from 1 MiB up is within 15%.
TEST(Validation, NvlinkAllReduceRowsFromOneMebibyteAreWithinFifteenPercent) {
  int checked = 0;
  for (const ValidationRow& row : ComputeValidationRows()) {
    // "8xA100 all-reduce ...", "8xH100 ...", "5xH100 ...", "8xH200 ...": one node of NVLink GPUs.
    const bool nvlink_all_reduce = std::regex_search(row.name, std::regex("^[0-9]xH[12]00 all-reduce|^8xA100 "
                                                                          "all-reduce"));
    if (!nvlink_all_reduce || row.message_bytes < 1024.0 * 1024) continue;
    SCOPED_TRACE(row.name);
    EXPECT_LE(std::fabs(row.gap()), 0.15);
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

// Open rows are printed with their reason and are never counted as validation rows.
TEST(Validation, OpenRowsStateWhyAndAreInTheDocument) {
  std::ifstream in(std::string(SPMDSIM_SOURCE_DIR) + "/docs/cost-model-validation.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<ValidationRow> open = ComputeOpenRows();
  EXPECT_FALSE(open.empty());
  for (const ValidationRow& row : open) {
    SCOPED_TRACE(row.name);
    EXPECT_THAT(row.note, HasSubstr("open (issue 34)"));
    for (const ValidationRow& enforced : ComputeValidationRows()) EXPECT_NE(enforced.name, row.name);
  }
  EXPECT_THAT(text.str(), HasSubstr(FormatOpenTable(open))) << "regenerate: build/dev/bench/cost/cost_validation";
}

TEST(Validation, TheDocumentHoldsTheCurrentTable) {
  std::ifstream in(std::string(SPMDSIM_SOURCE_DIR) + "/docs/cost-model-validation.md");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr(FormatValidationTable(ComputeValidationRows())))
      << "regenerate the table: build/dev/bench/cost/cost_validation";
  EXPECT_THAT(text.str(), HasSubstr(FormatRuleOfThumbTable(ComputeRuleOfThumbComparisons())))
      << "regenerate the rule-of-thumb table: build/dev/bench/cost/cost_validation";
}

TEST(Validation, LargeMessagesGetTenPercentAndSmallOnesTwenty) {
  EXPECT_EQ(ToleranceForBytes(64.0 * kMiB), kValidationTolerance);
  EXPECT_EQ(ToleranceForBytes(16.0 * kMiB), kSmallMessageTolerance);
  int large = 0, small = 0;
  for (const ValidationRow& row : ComputeValidationRows()) {
    if (row.tolerance() == kValidationTolerance) ++large;
    if (row.tolerance() == kSmallMessageTolerance) ++small;
  }
  EXPECT_GT(large, 0);
  EXPECT_GT(small, 0);
}

TEST(Validation, TableMarksRowsOutsideTheTolerance) {
  const double big = kLargeMessageBytes, small = kMiB;
  ValidationRow inside{"a", "ms", 10, "s", 10.5, big, "n"};
  ValidationRow failing{"c", "ms", 10, "s", 8, big, "n"};
  ValidationRow small_inside{"d", "us", 10, "s", 11.5, small, "n"};
  ValidationRow small_failing{"e", "us", 10, "s", 12.5, small, "n"};
  std::string table = FormatValidationTable({inside, failing, small_inside, small_failing});
  EXPECT_THAT(table, HasSubstr("| a | 10 ms | 10.5 ms | +5.0% | 10%, within |"));
  EXPECT_THAT(table, HasSubstr("| c | 10 ms | 8 ms | -20.0% | 10%, FAILS |"));
  EXPECT_THAT(table, HasSubstr("| d | 10 us | 11.5 us | +15.0% | 20%, within |"));
  EXPECT_THAT(table, HasSubstr("| e | 10 us | 12.5 us | +25.0% | 20%, FAILS |"));
}

}  // namespace
}  // namespace spmdsim
