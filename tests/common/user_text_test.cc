#include "common/user_text.h"

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/util/catch_error.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

TEST(QuoteForError, QuotesShortTextAsIsAndEscapesControlBytes) {
  EXPECT_EQ(QuoteForError("tpu-v4:2x2"), "'tpu-v4:2x2'");
  EXPECT_EQ(QuoteForError("a\nb\xff"), "'a\\x0ab\\xff'");
}

TEST(QuoteForError, CutsLongTextAfter80Characters) {
  std::string quoted = QuoteForError(std::string(100000, 'a'));
  EXPECT_EQ(quoted, "'" + std::string(80, 'a') + "'... (100000 chars)");
}

TEST(JoinFirst, ListsAtMostFiveThenTheCount) {
  EXPECT_EQ(JoinFirst({"a", "b"}), "a, b");
  EXPECT_EQ(JoinFirst({"a", "b", "c", "d", "e", "f", "g"}), "a, b, c, d, e, ... (7 in all)");
}

TEST(FindInvalidUtf8, FindsTheFirstBadByteAsPythonDecodeDoes) {
  EXPECT_EQ(FindInvalidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("caf\xe9"), 3u);          // Latin-1
  EXPECT_EQ(FindInvalidUtf8("a\xc0\xaf"), 1u);        // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("a\xed\xa0\x80"), 1u);    // a surrogate
  EXPECT_EQ(FindInvalidUtf8("a\xf4\x90\x80\x80"), 1u);  // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("ab\xe2\x82"), 2u);       // truncated
}

TEST(OneLine, JoinsLinesWithSemicolonsKeepingTheWords) {
  EXPECT_EQ(OneLine("No default mesh: specify it explicitly. \nPlatform: tpu\nBounds: (2, 2, 2, 1)"),
            "No default mesh: specify it explicitly. Platform: tpu; Bounds: (2, 2, 2, 1)");
  EXPECT_EQ(OneLine("errors:\n  a\n  b"), "errors: a; b");
  EXPECT_EQ(OneLine("one line"), "one line");
  EXPECT_EQ(OneLine("trailing\n\n"), "trailing");
  EXPECT_EQ(OneLine("a\r\n  b"), "a; b");
}

TEST(ErrorLine, IsOneLineOfBoundedLength) {
  EXPECT_EQ(ErrorLine("a\nb"), "a; b");
  const std::string line = ErrorLine(std::string(100000, 'x'));
  EXPECT_EQ(line, std::string(kMaxErrorLineChars, 'x') + "... (100000 chars)");
}

TEST(PositionOf, CountsLinesAndColumnsFromOne) {
  EXPECT_EQ(PositionOf("ab\ncd", 4).line, 2);
  EXPECT_EQ(PositionOf("ab\ncd", 4).column, 2);
  EXPECT_EQ(PositionOf("ab", 0).column, 1);
}

TEST(ParseIntIn, RefusesWhatWouldWrapNamingTheFieldAndTheRange) {
  EXPECT_EQ(ParseIntIn(" 42 ", "x", 1, 100), 42);
  Error e = CatchError([] { ParseIntIn("4294967297", "--submesh entry", 1, std::numeric_limits<int>::max()); });
  EXPECT_EQ(e.message(),
            "--submesh entry: '4294967297' is out of range; expected a positive integer (at most 2147483647)");
  e = CatchError([] { ParseIntIn("99999999999999999999", "f", 0, 10); });
  EXPECT_EQ(e.message(), "f: '99999999999999999999' is out of range; expected an integer from 0 to 10");
  e = CatchError([] { ParseIntIn("1.5", "f", 0, std::numeric_limits<int64_t>::max()); });
  EXPECT_EQ(e.message(), "f: '1.5' is not an integer; expected a non-negative integer");
}

TEST(DidYouMean, PicksTheClosestNameWhenItIsALikelyTypo) {
  EXPECT_EQ(DidYouMean("slises", {"preset", "slices"}), "slices");
  EXPECT_EQ(DidYouMean("MODEL", {"model", "data"}), "model");
  EXPECT_EQ(DidYouMean("zzz", {"preset", "slices"}), std::nullopt);
  EXPECT_EQ(DidYouMean("x", {"y"}), std::nullopt);  // one letter: every name is "close"; none is offered
}

TEST(CloseMatches, OffersEveryNameAnAbbreviationStartsOrEveryNearestOne) {
  const std::vector<std::string> presets = {"tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "dgx-h100"};
  EXPECT_EQ(CloseMatches("tpu-v5", presets), (std::vector<std::string>{"tpu-v5e", "tpu-v5p"}));
  EXPECT_EQ(CloseMatches("tpu-v6", presets), (std::vector<std::string>{"tpu-v6e"}));
  EXPECT_EQ(CloseMatches("dgx-h10", presets), (std::vector<std::string>{"dgx-h100"}));
  EXPECT_EQ(CloseMatches("modle", {"data", "model"}), (std::vector<std::string>{"model"}));
  EXPECT_TRUE(CloseMatches("pipeline", {"data", "model"}).empty());
  // Many equally close names: none is offered (a hostile mesh of a thousand axes gets a short message).
  std::vector<std::string> many;
  for (int i = 0; i < 1000; ++i) many.push_back("axis" + std::to_string(i));
  EXPECT_TRUE(CloseMatches("axis_x", many).empty());
  EXPECT_EQ(CloseMatches("axis99", many).size(), 0u);  // axis990..axis999 all start with it: 10, too many
  EXPECT_EQ(CloseMatches("axis9999", many), (std::vector<std::string>{"axis999"}));
}

TEST(DidYouMeanSuffix, NamesOneOrSeveralInQuotes) {
  EXPECT_EQ(DidYouMeanSuffix("tpu-v5", {"tpu-v5e", "tpu-v5p"}), " (did you mean 'tpu-v5e' or 'tpu-v5p'?)");
  EXPECT_EQ(DidYouMeanSuffix("tensr", {"data", "tensor"}), " (did you mean 'tensor'?)");
  EXPECT_EQ(DidYouMeanSuffix("qqqq", {"data", "tensor"}), "");
}

}  // namespace
}  // namespace spmdsim
