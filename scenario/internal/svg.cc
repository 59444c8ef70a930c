#include "scenario/internal/svg.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace spmdsim::svg {
namespace {

constexpr double kWidth = 1000;       // viewBox width
constexpr double kLeft = 180;         // plot area's left edge (labels to its left)
constexpr double kRight = 980;        // plot area's right edge
constexpr double kLegendRow = 18;

std::string Colour(const Legend& legend, const std::string& series) {
  for (const auto& [name, colour] : legend)
    if (name == series) return colour;
  return "#999";
}

// A class name from a series name ("exposed tensor" -> "s-exposed-tensor").
std::string SeriesClass(const std::string& series) {
  std::string out = "s-";
  for (char c : series) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return out;
}

std::string Text(double x, double y, std::string_view text, std::string_view anchor = "start",
                 std::string_view css = "") {
  return fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="{}"{}>{}</text>)", x, y, anchor,
                     css.empty() ? "" : fmt::format(R"( class="{}")", css), Escape(text));
}

// The legend as rows of swatches from y = top; `height` receives its height.
std::string LegendRows(const Legend& legend, double top, double* height) {
  std::string out = R"(<g class="legend">)";
  double x = kLeft, y = top;
  for (const auto& [name, colour] : legend) {
    const double w = 22 + 7.0 * static_cast<double>(name.size());
    if (x + w > kRight && x > kLeft) {
      x = kLeft;
      y += kLegendRow;
    }
    out += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="12" height="12" fill="{}"/>)", x, y, colour);
    out += Text(x + 16, y + 10, name);
    x += w;
  }
  *height = legend.empty() ? 0 : y - top + kLegendRow + 4;
  return out + "</g>";
}

// A horizontal axis at y for values [lo, hi] (scaled) on [kLeft, kRight], with grid lines up to `top`.
std::string XAxis(double lo, double hi, double y, double top, const std::string& unit) {
  std::string out = R"(<g class="axis x-axis">)";
  const double step = NiceStep(hi - lo, 8);
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) {
    const double x = kLeft + (v - lo) / (hi - lo) * (kRight - kLeft);
    out += fmt::format(R"(<line class="grid" x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}"/>)", x, top, y);
    out += Text(x, y + 14, fmt::format("{:g}", std::abs(v) < 1e-12 * step ? 0.0 : v), "middle");
  }
  out += Text(kRight, y + 30, unit, "end", "unit");
  return out + "</g>";
}

std::string Open(double height, const std::string& css_class) {
  return fmt::format(R"(<svg class="figure {}" viewBox="0 0 {:.0f} {:.0f}" width="100%" )"
                     R"(xmlns="http://www.w3.org/2000/svg" role="img">)",
                     css_class, kWidth, height);
}

// One stacked bar's segments from kLeft at row y.
std::string BarSegments(const Bar& bar, const Legend& legend, const BarOptions& o, double y, double px_per_unit) {
  std::string out;
  double x = kLeft, total = 0;
  for (const Segment& s : bar.segments) {
    const double w = s.value * o.scale * px_per_unit;
    total += s.value;
    if (w <= 0) continue;
    out += fmt::format(R"(<rect class="seg {}" x="{:.2f}" y="{:.1f}" width="{:.2f}" height="18" fill="{}">)",
                       SeriesClass(s.series), x, y, w, Colour(legend, s.series));
    out += fmt::format("<title>{}: {} {:.4g} {}</title></rect>", Escape(bar.label), Escape(s.series),
                       s.value * o.scale, Escape(o.unit));
    x += w;
  }
  out += Text(kLeft - 6, y + 13, bar.label, "end");
  out += Text(x + 4, y + 13, fmt::format("{:.4g} {}", total * o.scale, o.unit), "start", "value");
  return out;
}

}  // namespace

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

double NiceStep(double range, int ticks) {
  if (!(range > 0) || !std::isfinite(range) || ticks < 1) return 1;
  const double raw = range / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw * (1 - 1e-12)) return m * magnitude;
  return 10 * magnitude;
}

std::string StackedBars(const std::vector<Bar>& bars, const Legend& legend, const BarOptions& o) {
  double legend_height = 0;
  const std::string legend_svg = LegendRows(legend, 4, &legend_height);
  const double top = legend_height + 8, row = 26;
  const double bottom = top + row * static_cast<double>(bars.size());
  double max = o.limit;
  for (const Bar& b : bars) {
    double total = 0;
    for (const Segment& s : b.segments) total += s.value;
    max = std::max(max, total);
  }
  const double hi = std::max(max * o.scale * 1.12, 1e-30);
  const double px = (kRight - kLeft) / hi;
  std::string out = Open(bottom + 40, "bars " + o.css_class) + legend_svg;
  out += XAxis(0, hi, bottom, top - 4, o.unit);
  for (size_t i = 0; i < bars.size(); ++i)
    out += BarSegments(bars[i], legend, o, top + row * static_cast<double>(i), px);
  if (o.limit > 0) {
    const double x = kLeft + o.limit * o.scale * px;
    out += fmt::format(R"(<line class="limit" x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}"/>)", x, top - 4,
                       bottom);
    out += Text(x, top - 6, o.limit_label, "middle", "limit-label");
  }
  return out + "</svg>";
}

namespace {

// One lane's blocks: x from kLeft at `px` pixels per second, at least a pixel wide.
std::string LaneBlocks(const Lane& lane, const Legend& legend, double y, double height, double px) {
  std::string out;
  for (const Block& b : lane.blocks) {
    const double x = kLeft + b.start * px, w = std::max(1.0, (b.end - b.start) * px);
    const double h = height * std::clamp(b.fill, 0.0, 1.0);
    out += fmt::format(R"(<rect class="block {}" x="{:.2f}" y="{:.1f}" width="{:.2f}" height="{:.1f}" )"
                       R"(fill="{}"><title>{}</title></rect>)",
                       SeriesClass(b.series), x, y + height - h, w, h, Colour(legend, b.series), Escape(b.title));
  }
  return out;
}

// The time unit of an axis over [0, end] seconds: (name, seconds per unit).
std::pair<std::string, double> TimeUnit(double end) {
  if (end >= 1) return {"s", 1};
  if (end >= 1e-3) return {"ms", 1e-3};
  return {"us", 1e-6};
}

}  // namespace

std::string Timeline(const std::vector<LaneGroup>& groups, double end, const Legend& legend,
                     const std::string& css_class) {
  double legend_height = 0;
  const std::string legend_svg = LegendRows(legend, 4, &legend_height);
  constexpr double kLane = 13, kLaneGap = 2, kGroupGap = 12;
  const double px = (kRight - kLeft) / end, top = legend_height + 10;
  std::string labels, lanes;  // labels outside the zoomed, clipped plot
  double y = top;
  for (const LaneGroup& g : groups) {
    labels += Text(8, y + 10, g.label, "start", "group-label");
    y += 15;  // the group's label on its own row
    for (const Lane& lane : g.lanes) {
      labels += Text(kLeft - 6, y + 10, lane.label, "end", "lane-label");
      lanes += LaneBlocks(lane, legend, y, kLane, px);
      y += kLane + kLaneGap;
    }
    y += kGroupGap;
  }
  const auto [unit, per] = TimeUnit(end);
  std::string out = Open(y + 40, "timeline " + css_class) + legend_svg + labels;
  out += fmt::format(R"(<g class="time-axis" data-end="{:.9g}" data-unit="{}" data-per="{:g}" data-y="{:.1f}" )"
                     R"(data-top="{:.1f}" data-left="{:.0f}" data-right="{:.0f}">)",
                     end, unit, per, y, top - 4, kLeft, kRight);
  out += XAxis(0, end / per, y, top - 4, "time (" + unit + ")") + "</g>";
  out += fmt::format(R"(<clipPath id="clip-{0}"><rect x="{1:.0f}" y="0" width="{2:.0f}" height="{3:.0f}"/></clipPath>)",
                     css_class, kLeft, kRight - kLeft, y);
  out += fmt::format(R"svg(<g clip-path="url(#clip-{})"><g class="zoom">{}</g></g>)svg", css_class, lanes);
  return out + "</svg>";
}

namespace {

struct Range {
  double lo = 0, hi = 1;
};

// [lo, hi] of values padded to whole axis steps (lo >= 0).
Range AxisRange(double lo, double hi) {
  if (!(hi > lo)) hi = lo + std::max(1e-9, std::abs(lo) * 0.1);
  const double step = NiceStep(hi - lo, 6);
  return {std::max(0.0, std::floor(lo / step) * step - step), std::ceil(hi / step) * step + step};
}

std::string YAxis(Range r, double left, double top, double bottom, const std::string& label) {
  std::string out = R"(<g class="axis y-axis">)";
  const double step = NiceStep(r.hi - r.lo, 6);
  for (double v = std::ceil(r.lo / step) * step; v <= r.hi + 1e-9 * step; v += step) {
    const double y = bottom - (v - r.lo) / (r.hi - r.lo) * (bottom - top);
    out += fmt::format(R"(<line class="grid" x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}"/>)", left, y, kRight, y);
    out += Text(left - 6, y + 4, fmt::format("{:g}", v), "end");
  }
  out += fmt::format(R"svg(<text class="unit" transform="translate(16 {:.1f}) rotate(-90)" )svg"
                     R"svg(text-anchor="middle">{}</text>)svg",
                     (top + bottom) / 2, Escape(label));
  return out + "</g>";
}

// A rank label's box: its text starts at (x, y), the baseline, and is kRankDigit wide per digit and kRankHeight
// tall (the figures' 11 px bold digits, rounded up).
constexpr double kRankDigit = 7, kRankHeight = 12;

struct LabelBox {
  double x = 0, y = 0, width = 0;
};

bool Overlap(const LabelBox& a, const LabelBox& b) {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y - kRankHeight < b.y && b.y - kRankHeight < a.y;
}

// Where the label of a point at (px, py) goes: the first place around it (above right at three heights, above
// left at three, then below right and below left) inside the figure whose box meets no label placed before;
// nullopt when every place does (the label is left out: the point's tooltip and the table give its rank).
std::optional<LabelBox> PlaceLabel(double px, double py, double width, double height,
                                   const std::vector<LabelBox>& placed) {
  const double right = px + 6, left = px - 6 - width;
  const double above = py - 8, below = py + 8 + kRankHeight;  // baselines just clear of the dot
  const std::pair<double, double> places[] = {
      {right, above}, {right, above - kRankHeight}, {right, above - 2 * kRankHeight},
      {left, above},  {left, above - kRankHeight},  {left, above - 2 * kRankHeight},
      {right, below}, {left, below}};
  for (const auto& [x, y] : places) {
    const LabelBox box{x, y, width};
    if (x < 0 || x + width > kWidth || y - kRankHeight < 0 || y > height) continue;
    if (std::none_of(placed.begin(), placed.end(), [&](const LabelBox& p) { return Overlap(box, p); })) return box;
  }
  return std::nullopt;
}

// The rank labels of the marked points, placed in rank order so that the fastest keep the places next to them.
std::string RankLabels(std::vector<std::pair<int, std::pair<double, double>>> marked, double height) {
  std::sort(marked.begin(), marked.end());
  std::vector<LabelBox> placed;
  std::string out;
  for (const auto& [rank, at] : marked) {
    const std::string text = fmt::format("{}", rank + 1);
    const std::optional<LabelBox> box =
        PlaceLabel(at.first, at.second, kRankDigit * static_cast<double>(text.size()), height, placed);
    if (!box) continue;
    placed.push_back(*box);
    out += Text(box->x, box->y, text, "start", "rank");
  }
  return out;
}

}  // namespace

std::string Scatter(const std::vector<Point>& points, const ScatterOptions& o) {
  constexpr double kTop = 24, kBottom = 420, kPlotLeft = 90;
  double x_max = o.x_limit, y_lo = INFINITY, y_hi = 0;
  for (const Point& p : points) {
    x_max = std::max(x_max, p.x);
    y_lo = std::min(y_lo, p.y);
    y_hi = std::max(y_hi, p.y);
  }
  if (points.empty()) y_lo = 0;
  const Range xr{0, std::max(x_max * o.x_scale * 1.08, 1e-30)};
  const Range yr = AxisRange(y_lo * o.y_scale, y_hi * o.y_scale);
  auto sx = [&](double v) { return kPlotLeft + (v * o.x_scale - xr.lo) / (xr.hi - xr.lo) * (kRight - kPlotLeft); };
  auto sy = [&](double v) { return kBottom - (v * o.y_scale - yr.lo) / (yr.hi - yr.lo) * (kBottom - kTop); };
  std::string out = Open(kBottom + 44, "scatter") + YAxis(yr, kPlotLeft, kTop, kBottom, o.y_label);
  const double step = NiceStep(xr.hi, 8);
  for (double v = 0; v <= xr.hi + 1e-9 * step; v += step) {
    out += fmt::format(R"(<line class="grid" x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}"/>)",
                       kPlotLeft + v / xr.hi * (kRight - kPlotLeft), kTop, kBottom);
    out += Text(kPlotLeft + v / xr.hi * (kRight - kPlotLeft), kBottom + 14, fmt::format("{:g}", v), "middle");
  }
  out += Text(kRight, kBottom + 32, o.x_label, "end", "unit");
  if (o.x_limit > 0) {
    out += fmt::format(R"(<line class="limit" x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}"/>)",
                       sx(o.x_limit), kTop, kBottom);
    out += Text(sx(o.x_limit), kTop - 8, o.x_limit_label, "middle", "limit-label");
  }
  std::string marked;
  std::vector<std::pair<int, std::pair<double, double>>> ranks;  // (rank, where its point is drawn)
  for (const Point& p : points) {
    const bool mark = p.rank >= 0;
    std::string& to = mark ? marked : out;
    to += fmt::format(R"(<circle class="{}" cx="{:.1f}" cy="{:.1f}" r="{}"><title>{}</title></circle>)",
                      mark ? (p.rank == 0 ? "point winner best" : "point winner") : "point", sx(p.x), sy(p.y),
                      mark ? (p.rank == 0 ? 7 : 5) : 3, Escape(p.title));
    if (mark) ranks.push_back({p.rank, {sx(p.x), sy(p.y)}});
  }
  return out + marked + RankLabels(std::move(ranks), kBottom + 44) + "</svg>";
}

}  // namespace spmdsim::svg
