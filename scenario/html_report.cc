#include "scenario/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "common/strings.h"
#include "model/validation_band.h"
#include "scenario/internal/svg.h"
#include "scenario/report.h"
#include "scenario/trace.h"

namespace spmdsim {
namespace {

using svg::Escape;

constexpr size_t kMaxTraceDevices = 32;  // devices drawn in a non-model workload's timeline
constexpr size_t kMaxMemoryRows = 32;

// Colours (Tableau 10): compute phases, then what the compute stream waits for, then communication kinds.
const svg::Legend& StepLegend() {
  static const svg::Legend legend = {
      {"forward", "#4e79a7"},  {"backward", "#f28e2b"}, {"recompute", "#edc948"}, {"head", "#76b7b2"},
      {"optimizer", "#59a14f"}, {"exposed", "#e15759"}, {"bubble", "#bab0ac"},   {"host wait", "#79706e"},
      {"tensor", "#b07aa1"},    {"data", "#ff9da7"},     {"pipeline", "#9c755f"}, {"context", "#86bcb6"},
      {"expert", "#d37295"}};
  return legend;
}

const char* kStyle = R"CSS(
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 1200px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin: 20px 0 4px; } code { background: #f4f4f4; padding: 1px 4px; }
table.summary td, table.summary th { padding: 2px 12px 2px 0; text-align: left; }
table.ranked { border-collapse: collapse; }
table.ranked td, table.ranked th { padding: 2px 10px; border-bottom: 1px solid #eee; }
svg.figure { display: block; margin: 4px 0 8px; background: #fff; }
svg text { font: 11px system-ui, sans-serif; fill: #333; } svg text.unit { fill: #666; }
svg text.group-label { font-weight: 600; } svg .grid { stroke: #e8e8e8; }
svg .limit { stroke: #d62728; stroke-dasharray: 5 3; stroke-width: 1.5; } svg text.limit-label { fill: #d62728; }
svg .block { stroke: #fff; stroke-width: 0.3; } svg.timeline { cursor: ew-resize; }
svg .point { fill: #9aa9c2; fill-opacity: 0.6; } svg .winner { fill: #f28e2b; stroke: #333; }
svg .best { fill: #e15759; } svg text.rank { font-weight: 600; } p.warning { color: #d62728; font-weight: 600; }
.note { color: #666; font-size: 13px; }
)CSS";

// Zoom on timelines (Ctrl + wheel or a pinch: zoom around the pointer, so that the wheel alone still scrolls the
// page; double-click: reset) with the time axis redrawn, then the markers a headless browser reads.
const char* kScript = R"JS(
window.addEventListener('error', function (e) {
  var d = document.getElementById('report-error') || document.createElement('div');
  d.id = 'report-error'; d.textContent = String(e.message); document.body.appendChild(d);
});
(function () {
  var NS = 'http://www.w3.org/2000/svg';
  function niceStep(range, ticks) {
    var raw = range / ticks, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * mag >= raw) return steps[i] * mag;
    return 10 * mag;
  }
  function drawAxis(axis, lo, hi) {
    var d = axis.dataset, left = +d.left, right = +d.right, y = +d.y, top = +d.top, per = +d.per;
    while (axis.firstChild) axis.removeChild(axis.firstChild);
    var a = lo / per, b = hi / per, step = niceStep(b - a, 8);
    for (var v = Math.ceil(a / step) * step; v <= b + 1e-9 * step; v += step) {
      var x = left + (v - a) / (b - a) * (right - left);
      var line = document.createElementNS(NS, 'line');
      line.setAttribute('class', 'grid'); line.setAttribute('x1', x); line.setAttribute('x2', x);
      line.setAttribute('y1', top); line.setAttribute('y2', y); axis.appendChild(line);
      var t = document.createElementNS(NS, 'text');
      t.setAttribute('x', x); t.setAttribute('y', y + 14); t.setAttribute('text-anchor', 'middle');
      t.textContent = +v.toPrecision(6); axis.appendChild(t);
    }
    var u = document.createElementNS(NS, 'text');
    u.setAttribute('x', right); u.setAttribute('y', y + 30); u.setAttribute('text-anchor', 'end');
    u.setAttribute('class', 'unit'); u.textContent = 'time (' + d.unit + ')'; axis.appendChild(u);
  }
  document.querySelectorAll('svg.timeline').forEach(function (svg) {
    var axis = svg.querySelector('g.time-axis'), zoom = svg.querySelector('g.zoom');
    var left = +axis.dataset.left, right = +axis.dataset.right, end = +axis.dataset.end;
    var lo = 0, hi = end;
    function apply() {
      var k = end / (hi - lo), shift = left - left * k - (lo / end) * (right - left) * k;
      zoom.setAttribute('transform', 'matrix(' + k + ' 0 0 1 ' + shift + ' 0)');
      drawAxis(axis, lo, hi);
    }
    svg.addEventListener('wheel', function (e) {
      if (!e.ctrlKey) return;
      e.preventDefault();
      var box = svg.getBoundingClientRect(), vx = (e.clientX - box.left) / box.width * svg.viewBox.baseVal.width;
      var t = lo + Math.min(1, Math.max(0, (vx - left) / (right - left))) * (hi - lo);
      var f = e.deltaY < 0 ? 0.8 : 1.25, span = Math.min(end, Math.max(end * 1e-6, (hi - lo) * f));
      lo = Math.max(0, Math.min(end - span, t - (t - lo) * span / (hi - lo))); hi = lo + span; apply();
    }, { passive: false });
    svg.addEventListener('dblclick', function () { lo = 0; hi = end; apply(); });
  });
  var ready = document.createElement('div');
  ready.id = 'report-ready';
  ready.dataset.figures = document.querySelectorAll('svg.figure').length;
  var first = document.querySelector('svg.timeline');
  if (location.hash === '#self-test' && first) {  // one Ctrl + wheel step on the first timeline, for the tests
    var box = first.getBoundingClientRect();
    first.dispatchEvent(new WheelEvent('wheel', { deltaY: -100, ctrlKey: true, bubbles: true, cancelable: true,
                                                  clientX: box.left + box.width / 2, clientY: box.top + 20 }));
    ready.dataset.zoom = first.querySelector('g.zoom').getAttribute('transform');
  }
  document.body.appendChild(ready);
})();
)JS";

std::string Page(const std::string& title, const std::string& body) {
  return fmt::format("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n"
                     "<style>{}</style>\n</head>\n<body>\n{}\n<script>{}</script>\n</body>\n</html>\n",
                     Escape(title), kStyle, body, kScript);
}

std::string SummaryTable(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string out = R"(<table class="summary">)";
  for (const auto& [key, value] : rows)
    out += fmt::format("<tr><th>{}</th><td>{}</td></tr>", Escape(key), Escape(value));
  return out + "</table>";
}

// --- the model step timeline ---

// The legend series of an event: its phase for compute, its kind for communication, else exposed / bubble / host
// wait.
std::string SeriesOf(const StepEvent& e) {
  const bool by_category = e.kind == StepEvent::Kind::kCompute || e.kind == StepEvent::Kind::kCommunication;
  return std::string(by_category ? e.category : StepEventKindName(e.kind));
}

// A lane drawn at a resolution of `pixel` seconds: each column of the lane takes the series that was busy
// longest in it, and runs of columns with the same look become one block whose tooltip names its first and last
// event and the time of each series. Full height: a column busy less than a quarter of its time stays empty.
// Fractional: its height is the busy fraction in eighths (for waits, which come in many short slivers). So a
// lane has at most (its length / pixel) blocks however many ops it ran, and what is drawn is what each pixel
// holds.
class LaneRaster {
 public:
  LaneRaster(const std::vector<const StepEvent*>& events, double pixel, double end)
      : events_(events), pixel_(pixel), columns_(static_cast<size_t>(std::ceil(end / pixel)) + 1) {
    for (size_t i = 0; i < events.size(); ++i) Spread(i);
  }

  std::vector<svg::Block> Blocks(bool fractional) const {
    std::vector<svg::Block> blocks;
    for (size_t c = 0; c < columns_.size();) {
      const auto look = Look(c, fractional);
      size_t d = c;
      while (d + 1 < columns_.size() && Look(d + 1, fractional) == look) ++d;
      if (look.second > 0) {
        blocks.push_back(ToBlock(c, d, look.first));
        blocks.back().fill = look.second;
      }
      c = d + 1;
    }
    return blocks;
  }

 private:
  struct Column {
    std::map<std::string, double> busy;
    size_t first = SIZE_MAX, last = 0;  // the events touching it
  };

  void Spread(size_t i) {
    const StepEvent& e = *events_[i];
    const std::string series = SeriesOf(e);
    for (auto c = static_cast<size_t>(e.start / pixel_); c < columns_.size() && c * pixel_ < e.end; ++c) {
      const double overlap = std::min(e.end, (c + 1) * pixel_) - std::max(e.start, c * pixel_);
      if (overlap <= 0) continue;
      columns_[c].busy[series] += overlap;
      columns_[c].first = std::min(columns_[c].first, i);
      columns_[c].last = std::max(columns_[c].last, i);
    }
  }

  // (the series busy longest, the height to draw: 0 none, 1 full).
  std::pair<std::string, double> Look(size_t c, bool fractional) const {
    const auto& busy = columns_[c].busy;
    double total = 0;
    for (const auto& [series, seconds] : busy) total += seconds;
    const double fill = fractional ? std::round(std::min(1.0, total / pixel_) * 8) / 8 : (total < pixel_ / 4 ? 0 : 1);
    if (fill == 0) return {"", 0};
    return {std::max_element(busy.begin(), busy.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
                ->first,
            fill};
  }

  svg::Block ToBlock(size_t from, size_t to, const std::string& series) const {
    std::map<std::string, double> busy;
    size_t first = SIZE_MAX, last = 0;
    for (size_t c = from; c <= to; ++c) {
      for (const auto& [name, seconds] : columns_[c].busy) busy[name] += seconds;
      first = std::min(first, columns_[c].first);
      last = std::max(last, columns_[c].last);
    }
    const StepEvent& a = *events_[first];
    const StepEvent& b = *events_[last];
    std::string title = StepEventName(a);
    if (a.micro_batch >= 0) title = fmt::format("mb {}: {}", a.micro_batch, title);
    if (last > first)
      title += fmt::format(" ... mb {}: {} ({} events)", b.micro_batch, StepEventName(b), last - first + 1);
    for (const auto& [name, seconds] : busy) title += fmt::format("; {} {}", name, FormatSeconds(seconds));
    return {std::max(a.start, from * pixel_), std::min(b.end, (to + 1) * pixel_), series, title};
  }

  const std::vector<const StepEvent*>& events_;
  double pixel_;
  std::vector<Column> columns_;
};

// A device's lanes: its compute stream's ops, what the compute stream waited for (exposed communication,
// bubble), and each communication stream it used; all but the first with heights the busy fraction.
svg::LaneGroup DeviceLanes(const StepDeviceSchedule& d, double pixel, double end) {
  std::map<std::string, std::vector<const StepEvent*>> lanes;
  for (const StepEvent& e : d.events) {
    const bool wait = e.kind == StepEvent::Kind::kExposed || e.kind == StepEvent::Kind::kBubble ||
                      e.kind == StepEvent::Kind::kHostWait;
    lanes[wait ? "compute waits" : std::string(StepStreamName(e.stream))].push_back(&e);
  }
  svg::LaneGroup group{fmt::format("stage {} (device {})", d.stage, d.device_id), {}};
  for (const char* name : {"compute", "compute waits", "collectives 0", "collectives 1", "sends"}) {
    auto it = lanes.find(name);
    if (it == lanes.end() && std::string_view(name) != "compute") continue;
    std::vector<svg::Block> blocks;
    if (it != lanes.end()) blocks = LaneRaster(it->second, pixel, end).Blocks(std::string_view(name) != "compute");
    group.lanes.push_back({name, std::move(blocks)});
  }
  return group;
}

std::string StepTimelineFigure(const StepSchedule& schedule, const std::string& id) {
  double end = 0;
  for (const StepDeviceSchedule& d : schedule.devices) end = std::max(end, d.end_seconds);
  if (!(end > 0)) return R"(<p class="note">The step takes no time.</p>)";
  std::vector<svg::LaneGroup> groups;
  for (const StepDeviceSchedule& d : schedule.devices) groups.push_back(DeviceLanes(d, end / 1600, end));
  std::string note;
  if (schedule.micro_batches_shown < schedule.micro_batches) {
    note = fmt::format(R"(<p class="note">Showing the simulated run of {} of the step's {} micro-batches: the step )"
                       R"(time extends it by the line through two simulated runs (docs/model.md).</p>)",
                       schedule.micro_batches_shown, schedule.micro_batches);
  }
  return note + svg::Timeline(groups, end, StepLegend(), id) +
         R"(<p class="note">One row group per simulated device (one per pipeline stage); hover a block for its )"
         R"(ops, Ctrl + wheel (or pinch) to zoom, double-click to reset. Each pixel shows what took most of its )"
         R"(time; the lane )"
         R"(<em>compute waits</em> shows how much of it the compute stream waited, for a collective (red: exposed )"
         R"(communication), a pipeline receive (grey: bubble) or the host to launch its kernels (eager stacks), )"
         R"(and a communication lane how much of it the )"
         R"(stream was busy. Every op is in the <code>--trace</code> )"
         R"(file (open it in ui.perfetto.dev).</p>)";
}

// --- memory and communication ---

std::string ModelMemoryFigure(const ModelAccounting& a, int64_t devices) {
  const svg::Legend legend = {{"parameters", "#4e79a7"}, {"gradients", "#f28e2b"}, {"optimizer", "#59a14f"},
                              {"activations", "#e15759"}, {"communication", "#b07aa1"}};
  const int64_t per_stage = std::max<int64_t>(1, devices / std::max<int64_t>(1, a.degrees.pipeline));
  std::vector<svg::Bar> bars;
  for (const StageMemory& s : a.stages) {
    const DeviceMemory& m = s.memory;
    bars.push_back({fmt::format("stage {} ({} devices)", s.stage, per_stage),
                    {{"parameters", m.parameters}, {"gradients", m.gradients}, {"optimizer", m.optimizer},
                     {"activations", m.activations}, {"communication", m.communication}}});
  }
  return svg::StackedBars(bars, legend,
                          {.unit = "GiB", .scale = 1.0 / kGiB, .limit = a.capacity_bytes,
                           .limit_label = fmt::format("capacity {:.4g} GiB", a.capacity_bytes / kGiB),
                           .css_class = "memory"});
}

std::string CommunicationFigure(const ModelStepTimes& t) {
  const svg::Legend legend = {{"hidden under compute", "#8cd17d"}, {"exposed", "#e15759"}};
  std::vector<svg::Bar> bars;
  for (const auto& [kind, seconds] : t.comm_by_kind) {
    if (seconds <= 0) continue;
    const double exposed = t.exposed_by_kind.count(kind) ? t.exposed_by_kind.at(kind) : 0;
    bars.push_back({kind, {{"hidden under compute", std::max(0.0, seconds - exposed)}, {"exposed", exposed}}});
  }
  if (bars.empty()) return R"(<p class="note">No communication.</p>)";
  return svg::StackedBars(bars, legend, {.unit = "ms", .scale = 1e3, .css_class = "communication"});
}

std::string ModelSection(const std::string& id, const ModelAccounting& a, const ModelStepTimes& t,
                         int64_t devices) {
  std::vector<std::pair<std::string, std::string>> rows = {
      {"step time", fmt::format("{} ({})", FormatSeconds(t.step_seconds), ValidationBandText(t.validation))},
      {"MFU", fmt::format("{:.1f}% (causal attention counted as half; compute priced at {:.1f}% of the peak)",
                          100 * t.mfu, 100 * t.sustained_fraction)},
      {"tokens per second", fmt::format("{:.4g}", t.tokens_per_second)},
      {"software stack", fmt::format("{} ({})", t.stack, t.stack_reason)},
      {"compute (last stage to finish)", FormatSeconds(t.compute_seconds)},
      {"exposed communication", FormatSeconds(t.exposed_comm_seconds)},
      {"hidden communication", FormatSeconds(t.hidden_comm_seconds)},
      {"pipeline bubble", FormatSeconds(t.bubble_seconds)}};
  if (t.host_wait_seconds > 0)
    rows.emplace_back("waiting for the host (kernel launches)", FormatSeconds(t.host_wait_seconds));
  rows.emplace_back("peak memory per device", fmt::format("{} of {}", HumanBytes(static_cast<int64_t>(a.peak_bytes)),
                                                          HumanBytes(static_cast<int64_t>(a.capacity_bytes))));
  std::string out = SummaryTable(rows);
  for (const std::string& w : t.warnings) out += fmt::format(R"(<p class="warning">WARNING: {}</p>)", Escape(w));
  out += "<h3>Step timeline per stage</h3>";
  out += t.schedule != nullptr ? StepTimelineFigure(*t.schedule, id)
                               : std::string(R"(<p class="note">No schedule was recorded.</p>)");
  out += "<h3>Memory per device by category</h3>" + ModelMemoryFigure(a, devices);
  out += "<h3>Communication by kind</h3>" + CommunicationFigure(t);
  return out;
}

// --- other workloads ---

std::string TraceTimelineFigure(const WorkloadResult& r, const std::string& id) {
  std::map<int64_t, svg::Lane> lanes;  // mesh position -> its steps
  double end = 0;
  for (const TraceEvent& e : r.trace) {
    if (lanes.size() >= kMaxTraceDevices && !lanes.count(e.position)) continue;
    svg::Lane& lane = lanes[e.position];
    lane.label = fmt::format("device {}", e.device_id);
    const std::string series = e.kind == StepKind::kCollective ? "tensor" : "forward";
    lane.blocks.push_back(
        {e.sim_start, e.sim_end, series, fmt::format("{}: {}", e.name, FormatSeconds(e.sim_end - e.sim_start))});
    end = std::max(end, e.sim_end);
  }
  if (lanes.empty() || !(end > 0)) return R"(<p class="note">No steps on the simulated clock.</p>)";
  svg::LaneGroup group{"devices", {}};
  for (auto& [position, lane] : lanes) {
    std::sort(lane.blocks.begin(), lane.blocks.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
    group.lanes.push_back(std::move(lane));
  }
  const svg::Legend legend = {{"forward", "#4e79a7"}, {"tensor", "#b07aa1"}};
  std::string out = svg::Timeline({group}, end, legend, id);
  out += R"(<p class="note">Blue: local compute; purple: collectives (waiting for late arrivals included).)";
  if (lanes.size() >= kMaxTraceDevices) out += fmt::format(" The first {} devices.", kMaxTraceDevices);
  return out + "</p>";
}

// Runs of mesh positions with the same peak bytes, the largest kMaxMemoryRows.
std::string DeviceMemoryFigure(const MemoryResult& m) {
  std::vector<std::tuple<int64_t, size_t, size_t>> runs;  // bytes, first, last position
  const auto& per = m.peak_bytes_per_position;
  for (size_t i = 0; i < per.size();) {
    size_t j = i;
    while (j + 1 < per.size() && per[j + 1] == per[i]) ++j;
    runs.emplace_back(per[i], i, j);
    i = j + 1;
  }
  if (runs.empty()) return R"(<p class="note">No memory recorded.</p>)";
  std::stable_sort(runs.begin(), runs.end(),
                   [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
  if (runs.size() > kMaxMemoryRows) runs.resize(kMaxMemoryRows);
  std::vector<svg::Bar> bars;
  for (const auto& [bytes, first, last] : runs) {
    const std::string label = first == last ? fmt::format("position {}", first)
                                            : fmt::format("positions {}-{}", first, last);
    bars.push_back({label, {{"peak", static_cast<double>(bytes)}}});
  }
  const auto capacity = static_cast<double>(m.capacity_bytes);
  return svg::StackedBars(bars, {{"peak", "#4e79a7"}},
                          {.unit = "GiB", .scale = 1.0 / kGiB, .limit = capacity,
                           .limit_label = fmt::format("capacity {:.4g} GiB", capacity / kGiB), .css_class = "memory"});
}

std::string AxisCommunicationFigure(const WorkloadTotals& t) {
  std::vector<svg::Bar> bars;
  for (const auto& [axis, seconds] : t.communication_seconds_by_axis)
    if (seconds > 0) bars.push_back({axis, {{"communication", seconds}}});
  if (bars.empty()) return R"(<p class="note">No communication.</p>)";
  return svg::StackedBars(bars, {{"communication", "#b07aa1"}},
                          {.unit = "ms", .scale = 1e3, .css_class = "communication"});
}

// --- an hlo workload: the simulated device's streams, its scopes, exposed and hidden communication ---

// The colour series of an instruction's class on its stream.
std::string StreamSeries(const TraceEvent& e) {
  if (e.stream == "compute") return e.category.find("dot") != std::string::npos ||
                                            e.category.find("convolution") != std::string::npos
                                        ? "matmuls"
                                        : "other compute";
  if (e.stream == "collectives") return "collectives";
  return "transfers and copies";
}

const svg::Legend& StreamLegend() {
  static const svg::Legend legend = {{"matmuls", "#4e79a7"},
                                     {"other compute", "#a0cbe8"},
                                     {"collectives", "#b07aa1"},
                                     {"transfers and copies", "#f28e2b"}};
  return legend;
}

std::string StreamTimelineFigure(const WorkloadResult& r, const std::string& id) {
  std::map<std::string, svg::Lane> lanes;
  double end = 0;
  for (const TraceEvent& e : r.trace) {
    if (e.stream.empty() || !(e.sim_end > e.sim_start)) continue;
    svg::Lane& lane = lanes[e.stream];
    lane.label = e.stream;
    std::string title = fmt::format("{} {}: {}", e.name, e.scope, FormatSeconds(e.sim_end - e.sim_start));
    if (e.exposed_seconds > 0) title += fmt::format(", exposed {}", FormatSeconds(e.exposed_seconds));
    lane.blocks.push_back({e.sim_start, e.sim_end, StreamSeries(e), title});
    end = std::max(end, e.sim_end);
  }
  if (lanes.empty() || !(end > 0)) {
    return R"(<p class="note">No events were recorded (run with --trace or --html to record them).</p>)";
  }
  svg::LaneGroup group{"simulated device", {}};
  for (const char* stream : {"compute", "collectives", "network", "copies"}) {
    if (auto it = lanes.find(stream); it != lanes.end()) group.lanes.push_back(std::move(it->second));
  }
  return svg::Timeline({group}, end, StreamLegend(), id) +
         R"(<p class="note">One device is simulated: every device runs the same program. Collectives, transfers )"
         R"(and copies run on their queues from their start to their done; the compute stream waits at a done )"
         R"(for what is not finished (exposed).</p>)";
}

// The most expensive op_name scopes: their compute, and their collectives' time exposed and hidden.
std::string ScopeFigure(const WorkloadResult& r) {
  std::vector<const StepResult*> steps;
  for (const StepResult& s : r.steps) steps.push_back(&s);
  auto total = [](const StepResult* s) { return s->compute_seconds + s->communication_seconds; };
  std::stable_sort(steps.begin(), steps.end(), [&](auto* a, auto* b) { return total(a) > total(b); });
  if (steps.size() > 12) steps.resize(12);
  std::vector<svg::Bar> bars;
  for (const StepResult* s : steps) {
    const double exposed = std::max(0.0, s->predicted_seconds - s->compute_seconds);
    bars.push_back({ShortStepName(s->name, 28),
                    {{"compute", s->compute_seconds},
                     {"exposed communication", exposed},
                     {"hidden communication", std::max(0.0, s->communication_seconds - exposed)}}});
  }
  if (bars.empty()) return R"(<p class="note">No steps.</p>)";
  const svg::Legend legend = {{"compute", "#4e79a7"}, {"exposed communication", "#e15759"},
                              {"hidden communication", "#8cd17d"}};
  return svg::StackedBars(bars, legend, {.unit = "ms", .scale = 1e3, .css_class = "scopes"});
}

std::string CollectiveClassFigure(const HloSummary& h) {
  std::vector<svg::Bar> bars;
  for (const StepResult& c : h.by_class) {
    if (c.communication_seconds <= 0) continue;
    const double exposed = std::max(0.0, c.predicted_seconds - c.compute_seconds);
    bars.push_back({c.name, {{"hidden under compute", std::max(0.0, c.communication_seconds - exposed)},
                             {"exposed", exposed}}});
  }
  if (bars.empty()) return R"(<p class="note">No communication.</p>)";
  return svg::StackedBars(bars, {{"hidden under compute", "#8cd17d"}, {"exposed", "#e15759"}},
                          {.unit = "ms", .scale = 1e3, .css_class = "communication"});
}

std::string HloSection(const std::string& id, const WorkloadResult& r) {
  const HloSummary& h = *r.hlo;
  std::vector<std::pair<std::string, std::string>> rows = {
      {"module", fmt::format("{} ({} instructions, compiled for {}), {} devices", h.module, h.instructions,
                             h.compiled_for, h.devices)},
      {"step time", FormatSeconds(r.totals.predicted_seconds)},
      {"compute", FormatSeconds(r.totals.compute_seconds)},
      {"communication", fmt::format("{} ({} exposed, {} hidden under compute)",
                                    FormatSeconds(r.totals.communication_seconds),
                                    FormatSeconds(h.exposed_comm_seconds), FormatSeconds(h.hidden_comm_seconds))}};
  if (h.hfu > 0) {
    std::string u = fmt::format("HFU {:.1f}%", 100 * h.hfu);
    if (h.mfu > 0) u += fmt::format(", MFU {:.1f}%", 100 * h.mfu);
    if (h.tokens_per_second > 0) u += fmt::format(", {:.4g} tokens/s", h.tokens_per_second);
    rows.emplace_back("utilization", u);
  }
  rows.emplace_back("memory per device", fmt::format("{} (arguments {}, outputs {}, temporaries {}, aliased {})",
                                                     HumanBytes(h.argument_bytes + h.output_bytes + h.temp_bytes -
                                                                h.alias_bytes),
                                                     HumanBytes(h.argument_bytes), HumanBytes(h.output_bytes),
                                                     HumanBytes(h.temp_bytes), HumanBytes(h.alias_bytes)));
  std::string out = SummaryTable(rows);
  for (const std::string& note : h.notes) out += fmt::format(R"(<p class="note">{}</p>)", Escape(note));
  out += "<h3>Streams of the simulated device</h3>" + StreamTimelineFigure(r, id);
  out += "<h3>Time by op_name scope (the 12 longest)</h3>" + ScopeFigure(r);
  out += "<h3>Communication by collective: hidden and exposed</h3>" + CollectiveClassFigure(h);
  out += "<h3>Communication by mesh axis</h3>" + AxisCommunicationFigure(r.totals);
  return out;
}

std::string WorkloadSection(const Scenario& s, const WorkloadResult& r, size_t index) {
  const std::string id = fmt::format("w{}", index);
  std::string out = fmt::format("<h2>{} <small>({})</small></h2>", Escape(r.name), WorkloadKindName(r.kind));
  if (r.model && r.model_step) return out + ModelSection(id, *r.model, *r.model_step, s.mesh.mesh.size());
  if (r.hlo) return out + HloSection(id, r);
  out += SummaryTable({{"predicted time", FormatSeconds(r.totals.predicted_seconds)},
                       {"compute", FormatSeconds(r.totals.compute_seconds)},
                       {"communication", FormatSeconds(r.totals.communication_seconds)},
                       {"waiting for late arrivals", FormatSeconds(r.totals.wait_seconds)}});
  out += "<h3>Steps per device (simulated clock)</h3>" + TraceTimelineFigure(r, id);
  out += "<h3>Peak memory per device</h3>" + DeviceMemoryFigure(r.memory);
  out += "<h3>Communication by mesh axis</h3>" + AxisCommunicationFigure(r.totals);
  return out;
}

// --- plan ---

// The memory a configuration may use: the capacity less the plan's headroom (--memory-headroom); the summary
// table gives the capacity.
std::string MemoryLimitLabel(const PlanResult& plan) {
  const double capacity = plan.capacity_bytes;
  if (!(plan.memory_headroom > 0)) return fmt::format("capacity {:.4g} GiB", capacity / kGiB);
  return fmt::format("limit {:.4g} GiB ({:g}% kept free)", capacity * (1 - plan.memory_headroom) / kGiB,
                     100 * plan.memory_headroom);
}

std::string PlanScatterFigure(const PlanResult& plan) {
  std::vector<svg::Point> points;
  for (const PlanPoint& p : plan.points)
    points.push_back({p.peak_bytes, p.step_seconds,
                      fmt::format("{}: {}, {:.4g} GiB", p.description, FormatSeconds(p.step_seconds),
                                  p.peak_bytes / kGiB)});
  for (size_t k = 0; k < plan.best.size(); ++k) {
    const PlanEntry& e = plan.best[k];
    points.push_back({e.peak_bytes(), e.step.step_seconds,
                      fmt::format("#{} {}: {}, MFU {:.1f}%", k + 1, e.Describe(), FormatSeconds(e.step.step_seconds),
                                  100 * e.step.mfu),
                      static_cast<int>(k)});
  }
  return svg::Scatter(points, {.x_label = "peak memory per device (GiB)", .y_label = "step time (s)",
                               .x_scale = 1.0 / kGiB, .x_limit = plan.capacity_bytes * (1 - plan.memory_headroom),
                               .x_limit_label = MemoryLimitLabel(plan)});
}

std::string RankedTable(const PlanResult& plan) {
  std::string out = R"(<table class="ranked"><tr><th>#</th><th>configuration</th><th>step</th><th>MFU</th>)"
                    R"(<th>memory per device</th><th>error band</th></tr>)";
  for (size_t k = 0; k < plan.best.size(); ++k) {
    const PlanEntry& e = plan.best[k];
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}%</td><td>{}</td><td>{}</td></tr>", k + 1,
                       Escape(e.Describe()), FormatSeconds(e.step.step_seconds), 100 * e.step.mfu,
                       HumanBytes(static_cast<int64_t>(e.peak_bytes())), Escape(ValidationBandText(e.step.validation)));
  }
  return out + "</table>";
}

}  // namespace

std::string RunHtmlReport(const Scenario& s, const std::vector<WorkloadResult>& results, const std::string& command) {
  std::string body = fmt::format("<h1>{}</h1><p>{}</p>", Escape(s.name), Escape(s.description));
  body += SummaryTable({{"topology", s.topology.topology->ToString()},
                        {"mesh", s.mesh.mesh.ToString()},
                        {"command", command}});
  body += R"(<p class="note">Times are predicted on the topology by spmdsim's cost model (docs/cost-model.md, )"
          R"(docs/model.md).</p>)";
  for (size_t i = 0; i < results.size(); ++i) body += WorkloadSection(s, results[i], i);
  return Page("spmdsim run: " + s.name, body);
}

std::string PlanHtmlReport(const ScenarioPlan& scenario_plan, const std::string& command) {
  const PlanResult& plan = scenario_plan.result;
  const std::string& model_name = scenario_plan.model.name;
  const std::string topology = scenario_plan.topology ? scenario_plan.topology->ToString() : "";
  std::string body = fmt::format("<h1>plan: {} on {}</h1>", Escape(model_name), Escape(topology));
  body += SummaryTable({{"command", command},
                        {"devices", plan.topology.empty() ? fmt::format("{}", plan.devices) : plan.topology},
                        {"memory", fmt::format("at most {} of the {} per device ({:g}% kept free)",
                                               HumanBytes(static_cast<int64_t>(plan.capacity_bytes *
                                                                               (1 - plan.memory_headroom))),
                                               HumanBytes(static_cast<int64_t>(plan.capacity_bytes)),
                                               100 * plan.memory_headroom)},
                        {"configurations", fmt::format("{} enumerated, {} evaluated, {} over memory, {} invalid",
                                                       plan.enumerated, plan.evaluated, plan.over_memory,
                                                       plan.invalid)}});
  body += "<h2>Step time vs memory of every evaluated configuration</h2>" + PlanScatterFigure(plan);
  body += R"(<p class="note">Each dot is a configuration that fits within the memory limit and was predicted; )"
          R"(the fastest are marked and numbered (1 in red; a number that would cover another is left out, as )"
          R"(where ties share one spot). Hover a dot for its configuration and rank.</p>)";
  body += "<h2>The fastest configurations</h2>" + RankedTable(plan);
  if (scenario_plan.best_schedule != nullptr && !plan.best.empty()) {
    body += fmt::format("<h2>#1: {}</h2>", Escape(plan.best.front().Describe()));
    body += ModelSection("best", plan.best.front().accounting, *scenario_plan.best_schedule, plan.devices);
  }
  return Page("spmdsim plan: " + model_name, body);
}

}  // namespace spmdsim
