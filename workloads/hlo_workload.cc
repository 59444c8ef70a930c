#include "workloads/hlo_workload.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/host_memory.h"
#include "common/shape.h"
#include "cost/link_model.h"
#include "hlo/compiled_for.h"
#include "hlo/cost.h"
#include "hlo/executor.h"
#include "hlo/predict.h"
#include "hlo/sharding.h"
#include "hlo/support.h"
#include "ops/random.h"
#include "workloads/internal/program.h"

namespace spmdsim {
namespace {

using hlo::Module;
using hlo::Value;

// The mesh the module runs on: position i is logical device i, its id the device assignment's. Without a device
// assignment it is the context mesh itself (JAX assigns a program jitted over a mesh its devices in row-major
// order), so that collectives are attributed to its axes; with one, the mesh given as `mesh_shape`/`mesh_axes`
// over the assigned ids when they are set, else one axis "devices".
Mesh ModuleMesh(const WorkloadContext& context, const HloConfig& config, const hlo::SupportedModule& m) {
  const int64_t n = m.device_count();
  std::vector<int> ids = config.device_assignment;
  if (ids.empty()) ids = context.mesh.devices().ids();
  m.CheckDeviceCount(static_cast<int64_t>(ids.size()),
                     config.device_assignment.empty() ? "the mesh" : "device_assignment",
                     fmt::format("give a mesh of {} devices or a device_assignment of {} ids", n, n));
  if (config.device_assignment.empty()) return context.mesh;
  if (!config.mesh_axes.empty()) {
    std::vector<int64_t> shape;
    std::vector<std::string> names;
    for (const auto& [name, size] : config.mesh_axes) names.push_back(name), shape.push_back(size);
    if (NumElements(shape) == n) return Mesh(DeviceArray(shape, ids), names, context.mesh.shared_topology());
  }
  return Mesh(DeviceArray({n}, ids), {"devices"}, context.mesh.shared_topology());
}


// The global value of parameter `p` (host memory).
Value GlobalInput(const HloInput& in, const hlo::Instruction& p, const hlo::Sharding& sharding) {
  const hlo::Shape& s = p.shape();
  const std::vector<int64_t> global = hlo::GlobalDims(sharding, s.dims);
  const int64_t n = NumElements(global);
  std::vector<double> values(static_cast<size_t>(n), 0.0);
  switch (in.kind) {
    case HloInput::Kind::kZeros: break;
    case HloInput::Kind::kOnes: std::fill(values.begin(), values.end(), 1.0); break;
    case HloInput::Kind::kIota:
      for (int64_t i = 0; i < n; ++i) values[i] = static_cast<double>(i);
      break;
    case HloInput::Kind::kRandom:
      RandomValues(n, RandomFill{.seed = in.seed, .scale = in.scale}, [&](int64_t first, std::span<const double> c) {
        std::copy(c.begin(), c.end(), values.begin() + first);
        return true;
      });
      break;
    case HloInput::Kind::kData: {
      if (in.shape != global) {
        Throw(ErrorCode::kInvalidArgument,
              "input {} of %{} is [{}]; the parameter's global shape is [{}] ({} on each device{})",
              p.attrs().parameter_number, p.parent()->name(), fmt::join(in.shape, ","), fmt::join(global, ","),
              s.ToString(), sharding.kind == hlo::Sharding::Kind::kTiled ? ", " + sharding.ToString() : "");
      }
      if (in.dtype == s.dtype) {
        hlo::ValueBuilder b(s.dtype, global);
        std::memcpy(b.raw(), in.bytes.data(),
                    std::min<size_t>(in.bytes.size(), static_cast<size_t>(b.size() * DTypeSize(s.dtype))));
        return std::move(b).Finish();
      }
      hlo::ValueBuilder raw(in.dtype, global);
      std::memcpy(raw.raw(), in.bytes.data(),
                  std::min<size_t>(in.bytes.size(), static_cast<size_t>(raw.size() * DTypeSize(in.dtype))));
      const std::vector<double> converted = hlo::ValueToDoubles(std::move(raw).Finish());
      return hlo::ValueFromDoubles(s.dtype, global, converted);
    }
  }
  return hlo::ValueFromDoubles(s.dtype, global, values);
}

// Per device, the entry's arguments: given, or cut from the global inputs.
struct Arguments {
  std::vector<Value> globals;                 // per parameter (scenario inputs)
  std::vector<hlo::Sharding> shardings;       // per parameter
  const std::vector<std::vector<Value>>* given = nullptr;

  std::vector<Value> Of(const Module& m, int64_t position) const {
    std::vector<Value> out;
    const hlo::Computation& entry = *m.entry();
    for (int64_t i = 0; i < entry.parameter_count(); ++i) {
      if (given != nullptr) {
        out.push_back((*given)[position][i]);
      } else {
        out.push_back(hlo::ShardOf(globals[i], shardings[i], position, entry.parameter(i)->shape().dims));
      }
    }
    return out;
  }
};

Arguments MakeArguments(const HloConfig& config, const hlo::SupportedModule& supported) {
  Arguments a;
  const Module& m = supported.module();
  const hlo::Computation& entry = *m.entry();
  if (!config.device_arguments.empty()) {
    supported.CheckDeviceCount(static_cast<int64_t>(config.device_arguments.size()),
                               "the list of per-device arguments");
    a.given = &config.device_arguments;
    return a;
  }
  if (!config.inputs.empty() && static_cast<int64_t>(config.inputs.size()) != entry.parameter_count()) {
    Throw(ErrorCode::kInvalidArgument, "{} inputs; %{} has {} parameters", config.inputs.size(), entry.name(),
          entry.parameter_count());
  }
  for (int64_t i = 0; i < entry.parameter_count(); ++i) {
    const hlo::Instruction& p = *entry.parameter(i);
    if (!p.shape().IsArray())
      Throw(ErrorCode::kUnimplemented, "{}: tuple-shaped entry parameters are not supported", p.Where());
    a.shardings.push_back(hlo::ElementSharding(p.attrs().sharding, 0, 1));
    HloInput in;
    in.seed = static_cast<uint64_t>(i);
    a.globals.push_back(GlobalInput(config.inputs.empty() ? in : config.inputs[i], p, a.shardings.back()));
  }
  return a;
}

// The entry's outputs as global arrays (a tuple result gives one per element).
std::vector<Value> GlobalOutputs(const Module& m, const std::vector<hlo::DeviceRun>& runs) {
  const hlo::Instruction& root = *m.entry()->root();
  const bool tuple = root.shape().IsTuple();
  const int64_t count = tuple ? static_cast<int64_t>(root.shape().tuple.size()) : 1;
  std::vector<Value> out;
  for (int64_t k = 0; k < count; ++k) {
    const hlo::Sharding sharding = hlo::ElementSharding(root.attrs().sharding, k, count);
    std::vector<const Value*> parts;
    for (const hlo::DeviceRun& r : runs) parts.push_back(tuple ? &r.output.element(static_cast<size_t>(k)) : &r.output);
    if (!parts[0]->is_array()) continue;
    out.push_back(hlo::Assemble(parts, sharding, hlo::GlobalDims(sharding, parts[0]->dims())));
  }
  return out;
}

// An hlo Value as a spmdsim Array of the nearest array dtype (for --dump and checks).
Array AsArray(const Value& v) {
  if (IsArrayDType(v.dtype())) return v.storage();
  const std::vector<double> d = hlo::ValueToDoubles(v);
  const DType t = IsFloating(v.dtype()) ? DType::kF32 : (v.dtype() == DType::kU64 ? DType::kI64 : DType::kI64);
  return hlo::ValueFromDoubles(t, v.dims(), d).storage();
}

StepResult ToStep(const hlo::OpGroup& g) {
  StepResult s;
  s.name = g.name;
  s.op = g.op;
  s.kind = g.comm_seconds > g.compute_seconds ? StepKind::kCollective : StepKind::kCompute;
  s.count = g.count;
  s.compute_seconds = g.compute_seconds;
  s.communication_seconds = g.comm_seconds;
  s.predicted_seconds = g.compute_seconds + g.exposed_comm_seconds;
  s.flops = g.flops;
  s.memory_bytes = g.bytes;
  s.message_bytes = g.message_bytes;
  s.group_size = g.group_size;
  s.algorithm = g.algorithm;
  for (const auto& [link, bytes] : g.bytes_sent) s.bytes_by_link[std::string(LinkClassName(link))] += bytes;
  s.communication_seconds_by_axis = g.comm_seconds_by_axis;
  for (size_t at = 0; !g.axes.empty() && at != std::string::npos;) {
    const size_t comma = g.axes.find(',', at);
    s.axes.push_back(g.axes.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    at = comma == std::string::npos ? comma : comma + 1;
  }
  return s;
}

// HFU, MFU and tokens per second of the predicted step (HloSummary's fields).
void FillUtilization(const hlo::Prediction& p, const HloConfig& config, const Mesh& mesh, HloSummary* h) {
  h->contraction_flops = p.contraction_flops;
  const auto& peaks = mesh.topology()->peak_flops();
  auto peak = peaks.find(p.contraction_dtype);
  if (peak == peaks.end()) peak = peaks.find(DType::kBF16);
  if (peak == peaks.end() || p.step_seconds <= 0) return;
  h->contraction_peak_flops = peak->second;
  h->hfu = p.contraction_flops / (p.step_seconds * peak->second);
  if (config.model_flops_per_step > 0) {
    h->mfu = config.model_flops_per_step / static_cast<double>(mesh.size()) / (p.step_seconds * peak->second);
  }
  if (config.tokens_per_step > 0) h->tokens_per_second = config.tokens_per_step / p.step_seconds;
}

void FillPrediction(const hlo::Prediction& p, const Mesh& mesh, const WorkloadContext& context, WorkloadResult* r) {
  for (const hlo::OpGroup& g : p.by_scope) r->steps.push_back(ToStep(g));
  r->totals.predicted_seconds = p.step_seconds;
  r->totals.compute_seconds = p.compute_seconds;
  r->totals.communication_seconds = p.comm_seconds;
  r->totals.flops = p.flops;
  r->totals.communication_seconds_by_axis = p.comm_seconds_by_axis;
  for (const StepResult& s : r->steps) {
    for (const auto& [link, bytes] : s.bytes_by_link) r->totals.bytes_by_link[link] += bytes;
  }
  HloSummary& h = *r->hlo;
  h.executed_ops = p.executed_ops;
  h.exposed_comm_seconds = p.exposed_comm_seconds;
  h.hidden_comm_seconds = std::max(0.0, p.comm_seconds - p.exposed_comm_seconds);
  for (const hlo::OpGroup& g : p.by_class) h.by_class.push_back(ToStep(g));
  h.argument_bytes = p.memory.argument_bytes;
  h.output_bytes = p.memory.output_bytes;
  h.temp_bytes = p.memory.temp_bytes;
  h.alias_bytes = p.memory.alias_bytes;
  h.peak_at = p.memory.peak_at;
  h.notes = p.notes;
  MemoryResult& m = r->memory;
  m.capacity_bytes = mesh.topology()->memory_bytes();
  m.peak_bytes_per_position.assign(static_cast<size_t>(mesh.size()), p.memory.peak_bytes());
  m.peak_bytes_max = m.peak_bytes_min = p.memory.peak_bytes();
  m.max_device = m.min_device = mesh.devices().ids()[0];
  if (context.record_trace) {
    for (const hlo::OpEvent& e : p.events) {
      TraceEvent t;
      t.device_id = mesh.devices().ids()[0];
      t.category = hlo::InstructionClass(*e.instruction);
      t.name = fmt::format("%{} ({})", e.instruction->name(), t.category);
      t.kind = e.stream == hlo::Stream::kCompute ? StepKind::kCompute : StepKind::kCollective;
      t.sim_start = e.start;
      t.sim_end = e.end;
      t.stream = std::string(hlo::StreamName(e.stream));
      t.scope = hlo::ScopeOf(*e.instruction);
      t.bytes = e.bytes;
      t.axes = e.axes;
      t.exposed_seconds = e.exposed;
      r->trace.push_back(std::move(t));
    }
  }
}

void CheckOutputs(const HloConfig& config, const Module& m, const std::vector<Value>& outputs, WorkloadResult* r) {
  NumericCheck& c = r->check;
  c.rtol = config.rtol;
  c.atol = config.atol;
  if (config.expected.empty()) {
    c.compared = "no expected outputs given";
    return;
  }
  c.performed = true;
  std::vector<std::string> names;
  for (const HloExpected& e : config.expected) {
    if (e.output < 0 || e.output >= static_cast<int64_t>(outputs.size())) {
      Throw(ErrorCode::kInvalidArgument, "expected output {}: the module has {} outputs", e.output, outputs.size());
    }
    if (outputs[e.output].dims() != e.shape) {
      const bool sharded = m.entry()->root()->attrs().sharding.has_value();
      Throw(ErrorCode::kInvalidArgument,
            "expected output {} is [{}]; the module's output {} is [{}]{}", e.output, fmt::join(e.shape, ","),
            e.output, fmt::join(outputs[e.output].dims(), ","),
            sharded ? "" : " (its ROOT carries no sharding, as in modules XLA compiled: the output is taken as "
                           "replicated, device 0's block; give that block as the expected value)");
    }
    hlo::ValueBuilder want(e.dtype, e.shape);
    std::memcpy(want.raw(), e.bytes.data(),
                std::min<size_t>(e.bytes.size(), static_cast<size_t>(want.size() * DTypeSize(e.dtype))));
    const std::string name = fmt::format("output {}", e.output);
    CheckedValue v = internal::CompareArrays(name, AsArray(outputs[e.output]), AsArray(std::move(want).Finish()),
                                             config.rtol, config.atol);
    c.passed = c.passed && v.passed;
    c.max_abs_error = std::max(c.max_abs_error, v.max_abs_error);
    c.max_rel_error = std::max(c.max_rel_error, v.max_rel_error);
    c.values.push_back(std::move(v));
    names.push_back(name);
  }
  c.compared = fmt::format("{} vs the expected values", fmt::join(names, ", "));
}

// Every device's peak together, the global inputs and outputs: refused before anything is allocated.
void CheckHostMemory(const HloConfig& config, const hlo::SupportedModule& m) {
  const int64_t n = m.device_count();
  const int64_t peak = m.memory().peak_bytes();
  int64_t bytes = peak * n;
  for (int64_t i = 0; i < m.module().entry()->parameter_count(); ++i) {
    const hlo::Instruction& p = *m.module().entry()->parameter(i);
    bytes += p.shape().ByteSize() * (p.attrs().sharding.has_value() ? 1 : n);
  }
  CheckFitsHostMemory(fmt::format("hlo workload '{}' ({} devices of {} at the peak, with the global inputs)",
                                  config.name, n, HumanBytes(peak)),
                      bytes);
}

}  // namespace

WorkloadResult RunHlo(const WorkloadContext& context, const HloConfig& config,
                      std::vector<hlo::Value>* device_outputs) {
  if (config.module == nullptr) Throw(ErrorCode::kInvalidArgument, "hlo workload '{}' has no module", config.name);
  if (context.mesh.topology() == nullptr)
    Throw(ErrorCode::kFailedPrecondition, "the hlo workload needs a mesh with a topology");
  const auto t0 = std::chrono::steady_clock::now();
  const hlo::SupportedModule supported = hlo::SupportedModule::Check(
      config.module, context.abstract ? hlo::SupportedModule::Use::kAbstract : hlo::SupportedModule::Use::kWithData);
  const Module& m = supported.module();
  const Mesh mesh = ModuleMesh(context, config, supported);
  hlo::PredictOptions options;
  options.roofline = context.cost.roofline;
  options.collectives = context.cost.collectives;
  for (const auto& [id, factor] : context.cost.speed_factors)
    options.speed_factor = std::min(options.speed_factor, factor);
  options.record_events = context.record_trace;
  options.overlap_collectives = config.overlap_collectives;
  options.narrow_types = config.narrow_types;
  WorkloadResult r;
  r.name = config.name;
  r.kind = WorkloadKind::kHlo;
  r.abstract = context.abstract;
  r.hlo = HloSummary{};
  r.hlo->module = m.name();
  r.hlo->devices = supported.device_count();
  r.hlo->instructions = m.instruction_count();
  r.hlo->compiled_for = std::string(hlo::CompiledForName(hlo::CompiledForOf(m)));
  if (!context.abstract) {
    CheckHostMemory(config, supported);
    const Arguments args = MakeArguments(config, supported);
    hlo::ExecuteOptions exec;
    exec.interpreter.max_while_iterations = config.max_while_iterations;
    exec.interpreter.max_while_seconds = config.max_while_seconds;
    exec.runtime = context.runtime;
    exec.runtime.observer = nullptr;
    exec.runtime.op_cost_sink = nullptr;
    // The memory verdict is the estimate's; the interpreter's own copies must not fail a run that fits.
    exec.runtime.device_memory_bytes = std::max<int64_t>(mesh.topology()->memory_bytes(), HostPhysicalMemoryBytes());
    std::vector<hlo::DeviceRun> runs = hlo::Execute(supported, mesh, [&](int64_t p) { return args.Of(m, p); }, exec);
    for (const hlo::DeviceRun& run : runs) r.hlo->measured_peak_bytes.push_back(run.memory.peak_bytes);
    const std::vector<Value> outputs = GlobalOutputs(m, runs);
    CheckOutputs(config, m, outputs, &r);
    if (context.keep_arrays) {
      for (size_t k = 0; k < outputs.size(); ++k)
        r.outputs.emplace_back(fmt::format("output_{}", k), AsArray(outputs[k]));
    }
    if (device_outputs != nullptr) {
      for (hlo::DeviceRun& run : runs) device_outputs->push_back(std::move(run.output));
    }
  } else {
    r.check.compared = "not performed (abstract)";
  }
  const hlo::Prediction prediction = hlo::Predict(supported, mesh, options);
  FillPrediction(prediction, mesh, context, &r);
  FillUtilization(prediction, config, mesh, &*r.hlo);
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace spmdsim
