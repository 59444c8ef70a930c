#include "scenario/report.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/strings.h"
#include "model/validation_band.h"
#include "partition/correction.h"

namespace spmdsim {
namespace {

std::string Num(double v, double scale) {
  double x = v / scale;
  if (x == 0) return "0";
  if (std::fabs(x) >= 1e5 || std::fabs(x) < 1e-3) return fmt::format("{:.3e}", x);
  return fmt::format("{:.3f}", x);
}

// A plain text table: left-aligned first column, right-aligned others.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string ToString() const {
    std::vector<size_t> width(header_.size(), 0);
    auto measure = [&](const std::vector<std::string>& row) {
      for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
    };
    measure(header_);
    for (const auto& row : rows_) measure(row);
    std::string out;
    auto line = [&](const std::vector<std::string>& row) {
      std::string text;
      for (size_t i = 0; i < width.size(); ++i) {
        std::string cell = i < row.size() ? row[i] : "";
        if (i == 0) text += fmt::format("{:<{}}", cell, width[i]);
        else text += fmt::format("  {:>{}}", cell, width[i]);
      }
      while (!text.empty() && text.back() == ' ') text.pop_back();
      out += text + "\n";
    };
    line(header_);
    for (const auto& row : rows_) line(row);
    return out;
  }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

std::string AxesText(const std::vector<std::string>& axes) {
  return axes.empty() ? std::string("-") : fmt::format("{}", fmt::join(axes, ","));
}

// A long op_name scope keeps its first component (the jitted function) and as many of its last ones as fit, the
// middle elided (as XLA's profiler shows deep scopes):
//   "jit(step)/transpose(jvp())/while/body/closed_call/checkpoint/bsd,dnh->bsnh"
//   -> "jit(step)/.../while/body/closed_call/checkpoint/bsd,dnh->bsnh".
}  // namespace

std::string ShortStepName(const std::string& name, size_t columns) {
  if (name.size() <= columns) return name;
  const size_t first_end = name.find('/');
  if (first_end == std::string::npos) return name.substr(0, columns - 3) + "...";  // no scope to keep
  const std::string head = name.substr(0, first_end) + "/...";
  std::string tail;
  for (size_t at = name.size(); at > first_end;) {
    const size_t slash = name.rfind('/', at - 1);
    const std::string part = name.substr(slash + 1, at - slash - 1);
    if (head.size() + tail.size() + part.size() + 1 > columns) break;
    tail = "/" + part + tail;
    at = slash;
  }
  return tail.empty() ? name.substr(0, columns - 3) + "..." : head + tail;
}

namespace {

std::string StepsTable(const WorkloadResult& r) {
  double max_time = 0, max_bytes = 0;
  std::set<std::string> axes, links;
  for (const StepResult& s : r.steps) {
    max_time = std::max({max_time, s.predicted_seconds, s.compute_seconds, s.communication_seconds});
    for (const auto& [axis, t] : s.communication_seconds_by_axis) {
      axes.insert(axis);
      max_time = std::max(max_time, t);
    }
    for (const auto& [link, b] : s.bytes_by_link) {
      links.insert(link);
      max_bytes = std::max(max_bytes, b);
    }
  }
  max_time = std::max(max_time, r.totals.predicted_seconds);
  for (const auto& [link, b] : r.totals.bytes_by_link) {
    links.insert(link);
    max_bytes = std::max(max_bytes, b);
  }
  for (const auto& [axis, t] : r.totals.communication_seconds_by_axis) axes.insert(axis);
  Unit tu = TimeUnitFor(max_time);
  Unit bu = ByteUnitFor(max_bytes);
  std::vector<std::string> header = {"step", "kind", "op", "axes", fmt::format("predicted [{}]", tu.name),
                                     fmt::format("compute [{}]", tu.name), fmt::format("comm [{}]", tu.name)};
  for (const std::string& a : axes) header.push_back(fmt::format("comm {} [{}]", a, tu.name));
  for (const std::string& l : links) header.push_back(fmt::format("{} sent [{}/device]", l, bu.name));
  header.push_back("flops [GFLOP]");
  header.push_back("count");
  Table table(header);
  auto row_of = [&](const std::string& name, const std::string& kind, const std::string& op, const std::string& ax,
                    double predicted, double compute, double comm, const std::map<std::string, double>& by_axis,
                    const std::map<std::string, double>& by_link, double flops, const std::string& count) {
    std::vector<std::string> row = {ShortStepName(name), kind, op, ax, Num(predicted, tu.scale), Num(compute, tu.scale),
                                    Num(comm, tu.scale)};
    for (const std::string& a : axes) {
      auto it = by_axis.find(a);
      row.push_back(it == by_axis.end() ? "-" : Num(it->second, tu.scale));
    }
    for (const std::string& l : links) {
      auto it = by_link.find(l);
      row.push_back(it == by_link.end() ? "-" : Num(it->second, bu.scale));
    }
    row.push_back(Num(flops, 1e9));
    row.push_back(count);
    table.Add(std::move(row));
  };
  for (const StepResult& s : r.steps)
    row_of(s.name, std::string(StepKindName(s.kind)), s.op, AxesText(s.axes), s.predicted_seconds, s.compute_seconds,
           s.communication_seconds, s.communication_seconds_by_axis, s.bytes_by_link, s.flops,
           fmt::format("{}", s.count));
  row_of("TOTAL", "", "", "", r.totals.predicted_seconds, r.totals.compute_seconds, r.totals.communication_seconds,
         r.totals.communication_seconds_by_axis, r.totals.bytes_by_link, r.totals.flops, "");
  return table.ToString();
}

std::string SweepTable(const WorkloadResult& r) {
  double max_time = 0;
  for (const SweepRow& row : r.sweep) max_time = std::max({max_time, row.predicted_seconds, row.measured_seconds});
  Unit tu = TimeUnitFor(max_time);
  Table table({"op", "axes", "n", "size [B]", "count [elements]", "dtype", fmt::format("predicted [{}]", tu.name),
               "algbw [GB/s]", "busbw [GB/s]", fmt::format("measured [{}]", tu.name), "meas algbw [GB/s]",
               "meas busbw [GB/s]", "algorithm", "protocol", "check"});
  for (const SweepRow& row : r.sweep) {
    table.Add({row.op, AxesText(row.axes), fmt::format("{}", row.group_size), fmt::format("{}", row.bytes),
               fmt::format("{}", row.count), std::string(DTypeName(row.dtype)), Num(row.predicted_seconds, tu.scale),
               fmt::format("{:.2f}", row.predicted_algbw / 1e9), fmt::format("{:.2f}", row.predicted_busbw / 1e9),
               r.abstract ? "-" : Num(row.measured_seconds, tu.scale),
               r.abstract ? "-" : fmt::format("{:.3f}", row.measured_algbw / 1e9),
               r.abstract ? "-" : fmt::format("{:.3f}", row.measured_busbw / 1e9), row.algorithm,
               row.protocol.empty() ? "-" : row.protocol,
               r.abstract ? "-" : (row.check_passed ? "ok" : fmt::format("FAIL ({:.3g})", row.max_abs_error))});
  }
  return table.ToString();
}

std::string PartitionTable(const PartitionResult& p) {
  double max_bytes = 0;
  for (const PartitionParamResult& q : p.params) max_bytes = std::max<double>(max_bytes, q.global_bytes);
  Unit bu = ByteUnitFor(max_bytes);
  Table table({"param", "shape", "dtype", "source", "requested spec", "spec", fmt::format("global [{}]", bu.name),
               fmt::format("per device [{}]", bu.name), "replication [devices]", "corrections"});
  for (const PartitionParamResult& q : p.params) {
    std::vector<std::string> corrections;
    for (const Correction& c : q.corrections)
      corrections.push_back(fmt::format("dim {}: {}", c.dim, CorrectionReasonName(c.reason)));
    table.Add({q.name, PyTuple(q.shape), std::string(DTypeName(q.dtype)), q.source, q.requested.ToString(),
               q.spec.ToString(), Num(static_cast<double>(q.global_bytes), bu.scale),
               Num(static_cast<double>(q.bytes_per_device), bu.scale), fmt::format("{}", q.replication),
               corrections.empty() ? "-" : fmt::format("{}", fmt::join(corrections, "; "))});
  }
  std::string out = table.ToString();
  const MemoryAnalysis& a = p.analysis;
  out += fmt::format("parameter bytes per device: max {} on device {}, min {} on device {}, capacity {}: {}\n",
                     HumanBytes(a.max_bytes), a.max_device,
                     HumanBytes(a.min_bytes), a.min_device,
                     a.capacity_bytes > 0 ? HumanBytes(a.capacity_bytes) : "unknown",
                     a.fits() ? "fits" : fmt::format("{} devices over capacity", a.devices_over_capacity.size()));
  return out;
}

// The model workload's analytic accounting: parameters, FLOPs, the pipeline bubble and memory per stage.
std::string ModelReport(const ModelAccounting& a) {
  const ParallelDegrees& d = a.degrees;
  std::string out = "analytic accounting (formulas)\n";
  out += fmt::format("parallel degrees: data {}, tensor {}, context {}, pipeline {}, expert {}; {} micro-batches "
                     "per step per data rank; pipeline bubble {:.4g} of compute\n",
                     d.data, d.tensor, d.context, d.pipeline, d.expert, d.micro_batches, a.bubble_fraction);
  out += fmt::format("parameters: {:.4g} total, {:.4g} active per token (embedding {:.4g}, output {:.4g})\n",
                     a.params.total, a.params.active, a.params.embedding, a.params.output);
  out += fmt::format("FLOPs per step: model {:.4g} (forward {:.4g}, backward {:.4g}), recompute {:.4g}, hardware "
                     "{:.4g}; {:.4g} tokens per step\n",
                     a.flops.model, a.flops.forward, a.flops.backward, a.flops.recompute, a.flops.hardware,
                     a.tokens_per_step);
  double max_bytes = a.peak_bytes;
  Unit bu = ByteUnitFor(max_bytes);
  Table table({"stage", "layers", "in-flight chunks", fmt::format("params [{}]", bu.name),
               fmt::format("grads [{}]", bu.name), fmt::format("optimizer [{}]", bu.name),
               fmt::format("activations [{}]", bu.name), fmt::format("comm buffers [{}]", bu.name),
               fmt::format("total [{}]", bu.name)});
  for (const StageMemory& s : a.stages) {
    const DeviceMemory& m = s.memory;
    table.Add({fmt::format("{}", s.stage), fmt::format("{}", s.layers), fmt::format("{}", s.in_flight),
               Num(m.parameters, bu.scale), Num(m.gradients, bu.scale), Num(m.optimizer, bu.scale),
               Num(m.activations, bu.scale), Num(m.communication, bu.scale), Num(m.total(), bu.scale)});
  }
  out += "memory per device, by pipeline stage:\n" + table.ToString();
  out += fmt::format("peak memory per device: {} on stage {}, capacity {}: {}\n",
                     HumanBytes(static_cast<int64_t>(a.peak_bytes)), a.peak_stage,
                     HumanBytes(static_cast<int64_t>(a.capacity_bytes)),
                     a.fits() ? "fits" : "RESOURCE_EXHAUSTED (does not fit)");
  return out;
}

// How MFU is counted and what bounds it: "FLOPs: model 1.23e+18 (causal attention counted as half, ...),
// executed 1.4e+18; compute priced at the device's documented sustained matmul rate, 71.6% of the peak".
std::string SustainedRateLine(const ModelStepTimes& t) {
  return fmt::format(
      "FLOPs: model {:.4g} (causal attention counted as half, as MaxText and Megatron-LM count it; MFU divides "
      "these), executed {:.4g}; compute at {}\n",
      t.model_flops, t.hardware_flops,
      t.sustained_measured
          ? fmt::format("the device's documented sustained matmul rate, {:.1f}% of the peak (MFU cannot exceed it)",
                        100 * t.sustained_fraction)
          : !t.sustained_borrowed_from.empty()
              ? fmt::format("{:.1f}% of the peak, {}'s measured matmul rate (borrowed: none is published for this "
                            "device, the prediction may be fast)", 100 * t.sustained_fraction,
                            t.sustained_borrowed_from)
              : fmt::format("{:.1f}% of the datasheet peak (no measured matmul rate is documented for this device: "
                            "the prediction is an upper bound)", 100 * t.sustained_fraction));
}

// The simulated training step: time, throughput, where the time went.
std::string ModelStepReport(const ModelStepTimes& t) {
  std::string out = fmt::format(
      "training step (simulated, {} device program{}, {} ops): {} per step ({}), {:.4g} tokens/s, MFU {:.1f}%\n",
      t.simulated_devices, t.simulated_devices == 1 ? "" : "s", t.timeline_ops, FormatSeconds(t.step_seconds),
      ValidationBandText(t.validation), t.tokens_per_second, 100 * t.mfu);
  if (!t.stack.empty()) out += fmt::format("software stack: {} ({})\n", t.stack, t.stack_reason);
  out += fmt::format("on the last device to finish: compute {}, exposed communication {}, hidden communication {}, "
                     "pipeline bubble {}\n",
                     FormatSeconds(t.compute_seconds), FormatSeconds(t.exposed_comm_seconds),
                     FormatSeconds(t.hidden_comm_seconds), FormatSeconds(t.bubble_seconds));
  std::string phases, kinds;
  for (const auto& [phase, seconds] : t.compute_by_phase)
    if (seconds > 0) phases += fmt::format("{}{} {}", phases.empty() ? "" : ", ", phase, FormatSeconds(seconds));
  for (const auto& [kind, seconds] : t.comm_by_kind)
    if (seconds > 0)
      kinds += fmt::format("{}{} {} ({} exposed)", kinds.empty() ? "" : ", ", kind, FormatSeconds(seconds),
                           FormatSeconds(t.exposed_by_kind.at(kind)));
  out += fmt::format("compute by phase: {}\ncommunication by kind: {}\n", phases, kinds.empty() ? "none" : kinds);
  // With uneven stages (or a head, MTP modules) the stages differ: the busiest shows where the time goes.
  const ModelStageTimes* busiest = nullptr;
  for (const ModelStageTimes& s : t.stages)
    if (busiest == nullptr ||
        s.compute_seconds + s.exposed_comm_seconds > busiest->compute_seconds + busiest->exposed_comm_seconds)
      busiest = &s;
  if (busiest != nullptr && t.stages.size() > 1) {
    out += fmt::format("busiest pipeline stage {}: compute {}, exposed communication {}, pipeline wait {}\n",
                       busiest->stage, FormatSeconds(busiest->compute_seconds),
                       FormatSeconds(busiest->exposed_comm_seconds), FormatSeconds(busiest->bubble_seconds));
  }
  out += SustainedRateLine(t);
  for (const std::string& w : t.warnings) out += fmt::format("WARNING: {}\n", w);
  return out;
}

nlohmann::json StagesJson(const ModelStepTimes& t) {
  nlohmann::json stages = nlohmann::json::array();
  for (const ModelStageTimes& s : t.stages)
    stages.push_back({{"stage", s.stage}, {"end_seconds", s.end}, {"compute_seconds", s.compute_seconds},
                      {"exposed_comm_seconds", s.exposed_comm_seconds}, {"bubble_seconds", s.bubble_seconds},
                      {"exposed_by_kind", s.exposed_by_kind}});
  return stages;
}

nlohmann::json ModelStepJson(const ModelStepTimes& t) {
  return {{"step_seconds", t.step_seconds}, {"compute_seconds", t.compute_seconds},
          {"exposed_comm_seconds", t.exposed_comm_seconds}, {"hidden_comm_seconds", t.hidden_comm_seconds},
          {"bubble_seconds", t.bubble_seconds}, {"model_flops", t.model_flops},
          {"tokens_per_second", t.tokens_per_second}, {"mfu", t.mfu}, {"comm_slowdown", t.comm_slowdown},
          {"compute_by_phase", t.compute_by_phase}, {"comm_by_kind", t.comm_by_kind},
          {"exposed_by_kind", t.exposed_by_kind}, {"simulated_devices", t.simulated_devices},
          {"timeline_ops", t.timeline_ops}, {"stages", StagesJson(t)}, {"hardware_flops", t.hardware_flops},
          {"sustained_fraction", t.sustained_fraction}, {"sustained_measured", t.sustained_measured},
          {"sustained_borrowed_from", t.sustained_borrowed_from},
          {"warnings", t.warnings}, {"stack", t.stack}, {"stack_reason", t.stack_reason},
          {"validation", ValidationBandJson(t.validation)}};
}

nlohmann::json ModelJson(const ModelAccounting& a) {
  const ParallelDegrees& d = a.degrees;
  nlohmann::json stages = nlohmann::json::array();
  for (const StageMemory& s : a.stages) {
    const DeviceMemory& m = s.memory;
    stages.push_back({{"stage", s.stage}, {"layers", s.layers}, {"in_flight_chunks", s.in_flight},
                      {"parameters_bytes", m.parameters}, {"gradients_bytes", m.gradients},
                      {"optimizer_bytes", m.optimizer}, {"activations_bytes", m.activations},
                      {"communication_bytes", m.communication}, {"total_bytes", m.total()}});
  }
  return {{"analytic", true},
          {"degrees", {{"data", d.data}, {"tensor", d.tensor}, {"context", d.context}, {"pipeline", d.pipeline},
                       {"expert", d.expert}, {"expert_tensor", d.expert_tensor}, {"expert_data", d.expert_data},
                       {"micro_batches", d.micro_batches}}},
          {"params", {{"total", a.params.total}, {"active", a.params.active}, {"embedding", a.params.embedding},
                      {"output", a.params.output}, {"per_dense_layer", a.params.per_dense_layer},
                      {"per_moe_layer", a.params.per_moe_layer}, {"mtp", a.params.mtp}}},
          {"flops", {{"forward", a.flops.forward}, {"backward", a.flops.backward}, {"recompute", a.flops.recompute},
                     {"model", a.flops.model}, {"hardware", a.flops.hardware}}},
          {"tokens_per_step", a.tokens_per_step},
          {"activation_bytes_per_layer", a.activation_bytes_per_layer},
          {"bubble_fraction", a.bubble_fraction},
          {"stages", stages},
          {"peak_stage", a.peak_stage},
          {"peak_bytes", a.peak_bytes},
          {"capacity_bytes", a.capacity_bytes},
          {"fits", a.fits()}};
}

nlohmann::json MapJson(const std::map<std::string, double>& m);

nlohmann::json StepJson(const StepResult& s) {
  return {{"name", s.name},
          {"kind", std::string(StepKindName(s.kind))},
          {"op", s.op},
          {"axes", s.axes},
          {"count", s.count},
          {"predicted_seconds", s.predicted_seconds},
          {"compute_seconds", s.compute_seconds},
          {"communication_seconds", s.communication_seconds},
          {"communication_seconds_by_axis", MapJson(s.communication_seconds_by_axis)},
          {"bytes_by_link", MapJson(s.bytes_by_link)},
          {"algorithm", s.algorithm}, {"protocol", s.protocol},
          {"message_bytes", s.message_bytes},
          {"group_size", s.group_size},
          {"flops", s.flops},
          {"memory_bytes", s.memory_bytes},
          {"wall_seconds", s.wall_seconds}};
}

// The hlo workload's breakdown by instruction class, its memory by XLA's terms and its notes.
std::string HloReport(const WorkloadResult& r) {
  const HloSummary& h = *r.hlo;
  WorkloadResult by_class;
  by_class.steps = h.by_class;
  by_class.totals = r.totals;
  std::string out = fmt::format("by instruction class:\n{}", StepsTable(by_class));
  out += fmt::format("module {} ({} instructions, compiled for {}) on {} devices ({} simulated: every device runs "
                     "the same program), {} instructions executed; communication exposed {}, hidden under compute {}\n",
                     h.module, h.instructions, h.compiled_for, h.devices, h.simulated_devices,
                     h.executed_ops == INT64_MAX ? std::string("more than 9.2e18") : std::to_string(h.executed_ops),
                     FormatSeconds(h.exposed_comm_seconds),
                     FormatSeconds(h.hidden_comm_seconds));
  out += fmt::format("memory per device (buffer liveness): arguments {}, outputs {}{}, temporaries {} (peak at {})\n",
                     HumanBytes(h.argument_bytes), HumanBytes(h.output_bytes),
                     h.alias_bytes > 0
                         ? fmt::format(" ({} written into donated arguments)", HumanBytes(h.alias_bytes))
                         : "",
                     HumanBytes(h.temp_bytes), h.peak_at.empty() ? "-" : h.peak_at);
  if (h.hfu > 0) {
    std::string line = fmt::format("utilization: HFU {:.1f}% (dots and convolutions, {:.3g} FLOP per device at {:.4g} "
                                   "TFLOP/s)", 100 * h.hfu, h.contraction_flops, h.contraction_peak_flops / 1e12);
    if (h.mfu > 0) line += fmt::format(", MFU {:.1f}%", 100 * h.mfu);
    if (h.tokens_per_second > 0) line += fmt::format(", {:.4g} tokens/s", h.tokens_per_second);
    out += line + "\n";
  }
  if (!h.measured_peak_bytes.empty()) {
    out += fmt::format("host memory the simulator held per device: max {}\n",
                       HumanBytes(*std::max_element(h.measured_peak_bytes.begin(), h.measured_peak_bytes.end())));
  }
  for (const std::string& note : h.notes) out += fmt::format("note: {}\n", note);
  return out;
}

nlohmann::json HloJson(const HloSummary& h) {
  nlohmann::json by_class = nlohmann::json::array();
  for (const StepResult& s : h.by_class) by_class.push_back(StepJson(s));
  return {{"module", h.module}, {"instructions", h.instructions}, {"compiled_for", h.compiled_for},
          {"devices", h.devices}, {"simulated_devices", h.simulated_devices},
          {"executed_ops", h.executed_ops}, {"exposed_comm_seconds", h.exposed_comm_seconds},
          {"hidden_comm_seconds", h.hidden_comm_seconds}, {"by_class", by_class},
          {"argument_bytes", h.argument_bytes}, {"output_bytes", h.output_bytes}, {"temp_bytes", h.temp_bytes},
          {"alias_bytes", h.alias_bytes},
          {"peak_bytes", h.argument_bytes + h.output_bytes + h.temp_bytes - h.alias_bytes}, {"peak_at", h.peak_at},
          {"measured_peak_bytes", h.measured_peak_bytes}, {"contraction_flops", h.contraction_flops},
          {"contraction_peak_flops", h.contraction_peak_flops}, {"hfu", h.hfu}, {"mfu", h.mfu},
          {"tokens_per_second", h.tokens_per_second}, {"notes", h.notes}};
}

std::string CheckLine(const NumericCheck& c, bool abstract) {
  if (!c.performed) {
    if (abstract) return "check: not performed (--abstract: no data)\n";
    return c.compared.empty() ? "check: not performed\n" : fmt::format("check: not performed ({})\n", c.compared);
  }
  std::string out = fmt::format("check: {} (max abs error {:.3g}, max rel error {:.3g}; rtol {:.3g}, atol {:.3g}){}\n",
                                c.passed ? "PASSED" : "FAILED", c.max_abs_error, c.max_rel_error, c.rtol, c.atol,
                                c.compared.empty() ? "" : "; " + c.compared);
  for (const CheckedValue& v : c.values)
    if (!v.passed)
      out += fmt::format("  {}: FAILED, max abs error {:.3g}, worst {}\n", v.name, v.max_abs_error, v.worst);
  return out;
}

nlohmann::json MapJson(const std::map<std::string, double>& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

}  // namespace

// model_step.validation (docs/model.md, "Error bands"): the class, its published rows and their signed gaps (null
// when no published run is of the class), and the text the report prints.
nlohmann::json ValidationBandJson(const ValidationBand& b) {
  const auto gap = [&](double g) { return b.validated() ? nlohmann::json(g) : nlohmann::json(nullptr); };
  return {{"class", b.class_key}, {"rows", b.rows}, {"enforced_rows", b.enforced_rows}, {"min_gap", gap(b.min_gap)},
          {"max_gap", gap(b.max_gap)}, {"mean_gap", gap(b.mean_gap)}, {"source", kValidationBandSource},
          {"text", ValidationBandText(b)}};
}

std::string HumanHeader(const Scenario& s, bool abstract) {
  const Topology& t = *s.topology.topology;
  std::string out = fmt::format("scenario {} ({})\n", s.name, s.path);
  if (!s.description.empty()) out += fmt::format("  {}\n", s.description);
  // TPUs: the chip count spelled out (a Cloud TPU accelerator type counts TensorCores on v4 / v5p).
  const std::string chips = t.platform() == Platform::kTpu ? t.ChipCountText() + ", " : "";
  out += fmt::format("topology {}: {}{} devices ({}), {} host{}, {} per device\n", t.ToString(), chips,
                     t.num_devices(), t.device_kind(), t.num_processes(), t.num_processes() == 1 ? "" : "s",
                     HumanBytes(t.memory_bytes()));
  std::vector<std::string> axes;
  for (int i = 0; i < s.mesh.mesh.rank(); ++i)
    axes.push_back(fmt::format("'{}': {}", s.mesh.mesh.axis_names()[i], s.mesh.mesh.shape()[i]));
  out += fmt::format("mesh Mesh({}) via {}\n", fmt::join(axes, ", "), s.mesh.description);
  if (!s.topology.stragglers.empty()) {
    std::vector<std::string> parts;
    for (const auto& [id, f] : s.topology.stragglers) parts.push_back(fmt::format("device {} at {}x", id, f));
    out += fmt::format("stragglers: {}\n", fmt::join(parts, ", "));
  }
  if (abstract) out += "mode: abstract (shapes and dtypes only; no arithmetic, no numeric checks)\n";
  return out;
}

std::string DefaultsNote(const std::vector<std::string>& defaults) {
  if (defaults.empty()) return "";
  return fmt::format("note: defaults applied (not in the file): {}\n", fmt::join(defaults, ", "));
}

std::string HumanReport(const Scenario& s, const WorkloadResult& r) {
  std::string out = fmt::format("\n== workload {} ({}) ==\n", r.name, WorkloadKindName(r.kind));
  for (const ScenarioWorkload& w : s.workloads)
    if (w.name == r.name) out += DefaultsNote(w.model_defaults);
  if (!r.sweep.empty()) out += SweepTable(r);
  if (r.partition) out += PartitionTable(*r.partition);
  if (!r.steps.empty() && r.sweep.empty()) out += StepsTable(r);
  if (r.model) out += ModelReport(*r.model);
  if (r.model_step) out += ModelStepReport(*r.model_step);
  if (r.hlo) out += HloReport(r);
  if (r.kind != WorkloadKind::kPartition && !r.model) {
    const MemoryResult& m = r.memory;
    out +=
        fmt::format("predicted time {} (compute {}, communication {}, waiting for stragglers {}); simulator wall {}\n",
                    FormatSeconds(r.totals.predicted_seconds), FormatSeconds(r.totals.compute_seconds),
                    FormatSeconds(r.totals.communication_seconds), FormatSeconds(r.totals.wait_seconds),
                    FormatSeconds(r.wall_seconds));
    out += fmt::format("peak memory per device: max {} on device {}, min {} on device {}, capacity {}: {}\n",
                       HumanBytes(m.peak_bytes_max), m.max_device,
                       HumanBytes(m.peak_bytes_min), m.min_device,
                       HumanBytes(m.capacity_bytes), m.fits() ? "fits" : "DOES NOT FIT");
  }
  out += CheckLine(r.check, r.abstract);
  return out;
}

bool AllChecksPassed(const std::vector<WorkloadResult>& results) {
  for (const WorkloadResult& r : results)
    if (r.check.performed && !r.check.passed) return false;
  return true;
}

std::string HumanSummary(const std::vector<WorkloadResult>& results, double wall_seconds) {
  int passed = 0, failed = 0, skipped = 0;
  double predicted = 0;
  for (const WorkloadResult& r : results) {
    if (!r.check.performed) ++skipped;
    else if (r.check.passed) ++passed;
    else ++failed;
    predicted += r.totals.predicted_seconds;
  }
  return fmt::format("\n{} workloads: {} checks passed, {} failed, {} not performed; predicted {} in all; wall {}\n",
                     results.size(), passed, failed, skipped, FormatSeconds(predicted), FormatSeconds(wall_seconds));
}

nlohmann::json WorkloadJson(const WorkloadResult& r) {
  nlohmann::json w;
  w["name"] = r.name;
  w["kind"] = std::string(WorkloadKindName(r.kind));
  w["abstract"] = r.abstract;
  w["wall_seconds"] = r.wall_seconds;
  w["totals"] = {{"predicted_seconds", r.totals.predicted_seconds},
                 {"compute_seconds", r.totals.compute_seconds},
                 {"communication_seconds", r.totals.communication_seconds},
                 {"wait_seconds", r.totals.wait_seconds},
                 {"communication_seconds_by_axis", MapJson(r.totals.communication_seconds_by_axis)},
                 {"bytes_by_link", MapJson(r.totals.bytes_by_link)},
                 {"flops", r.totals.flops}};
  nlohmann::json steps = nlohmann::json::array();
  for (const StepResult& s : r.steps) steps.push_back(StepJson(s));
  w["steps"] = steps;
  const MemoryResult& m = r.memory;
  w["memory"] = {{"peak_bytes_max", m.peak_bytes_max}, {"max_device", m.max_device},
                 {"peak_bytes_min", m.peak_bytes_min}, {"min_device", m.min_device},
                 {"capacity_bytes", m.capacity_bytes}, {"fits", m.fits()},
                 {"peak_bytes_per_position", m.peak_bytes_per_position}};
  nlohmann::json values = nlohmann::json::array();
  for (const CheckedValue& v : r.check.values)
    values.push_back({{"name", v.name}, {"passed", v.passed}, {"max_abs_error", v.max_abs_error},
                      {"max_rel_error", v.max_rel_error}, {"worst", v.worst}});
  w["check"] = {{"performed", r.check.performed}, {"passed", r.check.passed},
                {"max_abs_error", r.check.max_abs_error}, {"max_rel_error", r.check.max_rel_error},
                {"rtol", r.check.rtol}, {"atol", r.check.atol}, {"compared", r.check.compared}, {"values", values}};
  if (!r.sweep.empty()) {
    nlohmann::json sweep = nlohmann::json::array();
    for (const SweepRow& row : r.sweep)
      sweep.push_back({{"op", row.op}, {"axes", row.axes}, {"group_size", row.group_size}, {"bytes", row.bytes},
                       {"count", row.count}, {"dtype", DTypeName(row.dtype)}, {"iterations", row.iterations},
                       {"predicted_seconds", row.predicted_seconds}, {"predicted_algbw", row.predicted_algbw},
                       {"predicted_busbw", row.predicted_busbw}, {"measured_seconds", row.measured_seconds},
                       {"measured_algbw", row.measured_algbw}, {"measured_busbw", row.measured_busbw},
                       {"algorithm", row.algorithm}, {"protocol", row.protocol},
                       {"check_passed", row.check_passed},
                       {"max_abs_error", row.max_abs_error}});
    w["sweep"] = sweep;
  }
  if (r.partition) {
    nlohmann::json params = nlohmann::json::array();
    for (const PartitionParamResult& q : r.partition->params) {
      nlohmann::json corrections = nlohmann::json::array();
      for (const Correction& c : q.corrections)
        corrections.push_back({{"dim", c.dim}, {"from", c.from.ToString()},
                               {"to", c.to ? nlohmann::json(c.to->ToString()) : nlohmann::json(nullptr)},
                               {"reason", std::string(CorrectionReasonName(c.reason))}});
      params.push_back({{"name", q.name}, {"shape", q.shape}, {"dtype", DTypeName(q.dtype)}, {"source", q.source},
                        {"requested_spec", q.requested.ToString()}, {"spec", q.spec.ToString()},
                        {"corrections", corrections}, {"global_bytes", q.global_bytes},
                        {"bytes_per_device", q.bytes_per_device}, {"replication", q.replication}});
    }
    const MemoryAnalysis& a = r.partition->analysis;
    w["partition"] = {{"params", params},
                      {"max_bytes_per_device", a.max_bytes}, {"max_device", a.max_device},
                      {"min_bytes_per_device", a.min_bytes}, {"min_device", a.min_device},
                      {"bytes_per_position", a.bytes_per_position}, {"bytes_per_process", a.bytes_per_process},
                      {"capacity_bytes", a.capacity_bytes}, {"devices_over_capacity", a.devices_over_capacity},
                      {"largest", r.partition->largest}, {"smallest", r.partition->smallest}};
  }
  if (r.model) w["model"] = ModelJson(*r.model);
  if (r.model_step) w["model_step"] = ModelStepJson(*r.model_step);
  if (r.hlo) w["hlo"] = HloJson(*r.hlo);
  nlohmann::json layouts = nlohmann::json::object();
  for (const auto& [name, spec] : r.layouts) layouts[name] = spec.ToString();
  w["layouts"] = layouts;
  return w;
}

nlohmann::json JsonReport(const Scenario& s, const std::vector<WorkloadResult>& results, bool abstract,
                          double wall_seconds, ExitCode exit_code) {
  const Topology& t = *s.topology.topology;
  nlohmann::json stragglers = nlohmann::json::array();
  for (const auto& [id, f] : s.topology.stragglers) stragglers.push_back({{"device", id}, {"speed", f}});
  nlohmann::json j;
  j["spmdsim_version"] = "0.1.0";
  j["scenario"] = {{"path", s.path}, {"name", s.name}, {"description", s.description}};
  j["topology"] = {{"name", t.ToString()},
                   {"platform", std::string(PlatformName(t.platform()))},
                   {"device_kind", t.device_kind()},
                   {"accelerator_type", t.accelerator_type()},
                   {"num_chips", t.num_chips()},
                   {"chips", t.ChipCountText()},
                   {"num_devices", t.num_devices()},
                   {"num_processes", t.num_processes()},
                   {"num_slices", t.num_slices()},
                   {"memory_bytes", t.memory_bytes()},
                   {"compute_efficiency", s.topology.efficiency.compute_efficiency},
                   {"memory_efficiency", s.topology.efficiency.memory_efficiency},
                   {"stragglers", stragglers}};
  j["mesh"] = {{"axis_names", s.mesh.mesh.axis_names()}, {"shape", s.mesh.mesh.shape()},
               {"device_ids", s.mesh.mesh.device_ids()}, {"built_by", s.mesh.description}};
  j["abstract"] = abstract;
  j["wall_seconds"] = wall_seconds;
  nlohmann::json workloads = nlohmann::json::array();
  for (const WorkloadResult& r : results) workloads.push_back(WorkloadJson(r));
  j["workloads"] = workloads;
  j["all_checks_passed"] = AllChecksPassed(results);
  j["exit_code"] = ToInt(exit_code);
  return j;
}

}  // namespace spmdsim
