// Inline SVG figures for the HTML reports (scenario/html_report.h): stacked bars, a timeline of lanes and a scatter
// plot, each returned as one <svg> element (class "figure") that needs no script, style sheet or font from the
// network. Every mark carries a <title> (the browser's tooltip) and a class naming what it shows.
//
// Example: svg::StackedBars({{"stage 0", {{"parameters", 2e9}, {"activations", 5e9}}}}, legend,
//                           {.unit = "GiB", .scale = 1.0 / kGiB, .limit = 80e9, .limit_label = "capacity"})
//          -> <svg class="figure bars" ...><rect class="seg" fill="#4e79a7" ...><title>stage 0 parameters ...
// Thread safety: free functions over values.
#ifndef SPMDSIM_SCENARIO_INTERNAL_SVG_H_
#define SPMDSIM_SCENARIO_INTERNAL_SVG_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spmdsim::svg {

// Text made safe for XML content and attribute values.
std::string Escape(std::string_view text);

// The series of a figure: name -> colour (CSS), in legend order.
using Legend = std::vector<std::pair<std::string, std::string>>;

// A rounded axis step: 1, 2 or 5 x 10^k, giving about `ticks` ticks over [0, range].
double NiceStep(double range, int ticks);

struct Segment {
  std::string series{};  // a name of the Legend
  double value = 0;
};
struct Bar {
  std::string label{};
  std::vector<Segment> segments{};  // stacked left to right
};
struct BarOptions {
  std::string unit{};         // axis unit after scaling ("GiB", "ms")
  double scale = 1;           // values are multiplied by it for the axis
  double limit = 0;           // > 0: a dashed line there (unscaled), e.g. the device memory
  std::string limit_label{};  // its label ("capacity 80 GiB")
  std::string css_class{};    // added to the <svg>'s class
};
// Horizontal stacked bars, one row per Bar, with the legend above and the axis below.
std::string StackedBars(const std::vector<Bar>& bars, const Legend& legend, const BarOptions& options);

// A timeline: groups (one per device) of lanes (one per stream), each lane a list of blocks.
struct Block {
  double start = 0, end = 0;  // seconds
  std::string series{};       // a name of the Legend (colour and class)
  std::string title{};        // tooltip
  double fill = 1;            // the fraction of the lane's height it fills (from the bottom)
};
struct Lane {
  std::string label{};          // "compute", "collectives 0"
  std::vector<Block> blocks{};  // in time order
};
struct LaneGroup {
  std::string label{};  // "stage 0 (device 0)"
  std::vector<Lane> lanes{};
};
// REQUIRES: end > 0. Blocks narrower than a pixel still draw one pixel wide.
std::string Timeline(const std::vector<LaneGroup>& groups, double end, const Legend& legend,
                     const std::string& css_class);

struct Point {
  double x = 0, y = 0;
  std::string title{};
  int rank = -1;  // >= 0: a marked point (drawn on top, labelled rank + 1; rank 0 the largest)
};
struct ScatterOptions {
  std::string x_label{}, y_label{};  // axis titles with units
  double x_scale = 1, y_scale = 1;
  double x_limit = 0;            // > 0: a dashed vertical line there (unscaled)
  std::string x_limit_label{};
};
// Marked points' labels never overlap: in rank order each takes the first free place around its point (above
// right at three heights, above left, below), and one with no free place is left out (its point is still drawn,
// its tooltip and the page's table give its rank). Ties, drawn on one spot, keep the fastest ranks' labels.
std::string Scatter(const std::vector<Point>& points, const ScatterOptions& options);

}  // namespace spmdsim::svg

#endif  // SPMDSIM_SCENARIO_INTERNAL_SVG_H_
