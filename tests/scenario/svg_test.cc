// The inline SVG figures of the HTML reports (scenario/internal/svg.h): escaping, axis steps, bars, and the scatter
// plot's rank labels.
#include "scenario/internal/svg.h"

#include <cstdint>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace spmdsim::svg {
namespace {

using ::testing::HasSubstr;

int64_t Count(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST(Svg, EscapesMarkupAndRoundsAxisSteps) {
  EXPECT_EQ(Escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  EXPECT_DOUBLE_EQ(NiceStep(10, 5), 2);
  EXPECT_DOUBLE_EQ(NiceStep(0.07, 8), 0.01);
  EXPECT_DOUBLE_EQ(NiceStep(74.5, 8), 10);
  EXPECT_DOUBLE_EQ(NiceStep(0, 8), 1);
}

TEST(Svg, StackedBarsDrawTheLimitAndOneRectPerNonZeroSegment) {
  const std::string bars = StackedBars({{"stage 0", {{"a", 1}, {"b", 0}, {"c", 2}}}, {"stage 1", {{"a", 4}}}},
                                       {{"a", "#111"}, {"b", "#222"}, {"c", "#333"}},
                                       {.unit = "GiB", .limit = 5, .limit_label = "capacity 5 GiB"});
  EXPECT_EQ(Count(bars, "<rect class=\"seg"), 3);
  EXPECT_EQ(Count(bars, "class=\"limit\""), 1);
  EXPECT_THAT(bars, HasSubstr("capacity 5 GiB"));
  EXPECT_THAT(bars, HasSubstr("<title>stage 0: c 2 GiB</title>"));
}

}  // namespace
}  // namespace spmdsim::svg
