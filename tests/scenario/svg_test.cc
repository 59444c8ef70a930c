// The inline SVG figures of the HTML reports (scenario/internal/svg.h): escaping, axis steps, bars, and the scatter
// plot's rank labels, which must not overlap.
#include "scenario/internal/svg.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"

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

// The rank labels of a scatter's marked points (<text ... class="rank">N</text>): rank -> (x, y) of the baseline's
// start.
std::map<int, std::pair<double, double>> RankLabels(const std::string& svg) {
  static const std::regex kLabel(
      R"re(<text x="([-0-9.]+)" y="([-0-9.]+)" text-anchor="start" class="rank">(\d+)</text>)re");
  std::map<int, std::pair<double, double>> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kLabel); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[3])] = {std::stod((*it)[1]), std::stod((*it)[2])};
  return out;
}

// No two labels' boxes (7 px per digit wide, 12 px tall: the figures' 11 px digits) overlap.
void ExpectApart(const std::map<int, std::pair<double, double>>& labels) {
  for (const auto& [a, pa] : labels) {
    for (const auto& [b, pb] : labels) {
      if (a >= b) continue;
      const double wa = 7.0 * std::to_string(a).size(), wb = 7.0 * std::to_string(b).size();
      const bool apart_x = pa.first + wa <= pb.first || pb.first + wb <= pa.first;
      const bool apart_y = std::abs(pa.second - pb.second) >= 12;
      EXPECT_TRUE(apart_x || apart_y) << "labels " << a << " at (" << pa.first << ", " << pa.second << ") and " << b
                                      << " at (" << pb.first << ", " << pb.second << ") overlap";
    }
  }
}

// Ten marked points on one spot (equal step and memory: a plan's exact ties) get labels that do not overlap; the
// fastest keep theirs, a label with no free place left is dropped (the point's tooltip still names its rank).
TEST(Svg, ScatterRankLabelsDoNotOverlap) {
  std::vector<Point> points;
  for (int rank = 0; rank < 10; ++rank) points.push_back({40e9, 1.08, "tie", rank});
  points.push_back({20e9, 1.09, "near", 10});
  const std::string svg = Scatter(points, {.x_scale = 1.0 / kGiB});
  const std::map<int, std::pair<double, double>> labels = RankLabels(svg);
  ExpectApart(labels);
  EXPECT_TRUE(labels.count(1));  // the fastest is always labelled
  EXPECT_TRUE(labels.count(2));
  EXPECT_TRUE(labels.count(11));  // a point elsewhere keeps its label
  EXPECT_LT(labels.size(), 11u);  // some of the ten on one spot are left out ...
  EXPECT_EQ(Count(svg, "<title>tie</title>"), 10);  // ... but every point is drawn, with its tooltip
  // Points far apart each keep the label next to them (above right).
  const std::string spread = Scatter({{10e9, 1.0, "a", 0}, {30e9, 2.0, "b", 1}, {50e9, 3.0, "c", 2}},
                                     {.x_scale = 1.0 / kGiB});
  EXPECT_EQ(RankLabels(spread).size(), 3u);
}

}  // namespace
}  // namespace spmdsim::svg
