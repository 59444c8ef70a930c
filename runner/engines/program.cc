#include "runner/engines/program.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numbers>
#include <set>

#include <fmt/format.h>

#include "common/error.h"
#include "ops/ops.h"
#include "shardmap/shard_map.h"

namespace spmdsim {

namespace {

const std::set<std::string, std::less<>>& CollectiveOps() {
  static const std::set<std::string, std::less<>> ops = {"psum",         "pmean",      "pmax",    "pmin",
                                                         "all_gather",   "psum_scatter", "all_to_all",
                                                         "ppermute"};
  return ops;
}

// Ops and how many array arguments they take (-1: one or more).
const std::map<std::string, int, std::less<>>& OpArity() {
  static const std::map<std::string, int, std::less<>> ops = {
      {"psum", 1},         {"pmean", 1},        {"pmax", 1},          {"pmin", 1},        {"all_gather", 1},
      {"psum_scatter", 1}, {"all_to_all", 1},   {"ppermute", 1},      {"axis_index", 0},  {"add", -2},
      {"sub", -2},         {"mul", -2},         {"div", -2},          {"max", -2},        {"min", -2},
      {"pow", -2},         {"neg", 1},          {"abs", 1},           {"exp", 1},         {"log", 1},
      {"sqrt", 1},         {"rsqrt", 1},        {"tanh", 1},          {"sigmoid", 1},     {"relu", 1},
      {"gelu", 1},         {"silu", 1},         {"square", 1},        {"cast", 1},        {"einsum", -1},
      {"matmul", 2},       {"dot", 2},          {"sum", 1},           {"mean", 1},        {"max_reduce", 1},
      {"min_reduce", 1},   {"softmax", 1},      {"log_softmax", 1},   {"reshape", 1},     {"transpose", 1},
      {"slice", 1},        {"concatenate", -1}, {"broadcast_to", 1},  {"gelu_grad", 2},   {"relu_grad", 2},
      {"softmax_grad", 2}};
  return ops;
}

Array Binary(std::string_view op, const Array& a, const Array& b) {
  if (op == "add") return Add(a, b);
  if (op == "sub") return Sub(a, b);
  if (op == "mul") return Mul(a, b);
  if (op == "div") return Div(a, b);
  if (op == "max") return Max(a, b);
  if (op == "min") return Min(a, b);
  return Pow(a, b);
}

Array BinaryScalar(std::string_view op, const Array& a, double b) {
  if (op == "add") return Add(a, b);
  if (op == "sub") return Sub(a, b);
  if (op == "mul") return Mul(a, b);
  if (op == "div") return Div(a, b);
  if (op == "max") return Max(a, b);
  if (op == "min") return Min(a, b);
  return Pow(a, b);
}

// d/dx of jax.nn.gelu(x, approximate=True), times dy:
//   0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2),  t = tanh(c (x + k x^3)), c = sqrt(2/pi), k = 0.044715.
Array GeluGrad(const Array& x, const Array& dy) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  const double k = 0.044715;
  Array x2 = Mul(x, x);
  Array t = Tanh(Mul(Mul(x, Add(Mul(x2, k), 1.0)), c));
  Array left = Mul(Add(t, 1.0), 0.5);
  Array right = Mul(Mul(Mul(x, Sub(1.0, Mul(t, t))), Add(Mul(x2, 3 * k), 1.0)), 0.5 * c);
  return Mul(dy, Add(left, right));
}


}  // namespace

const std::vector<std::string>& ProgramOpNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, arity] : OpArity()) n.push_back(name);
    return n;
  }();
  return names;
}

namespace internal {

bool IsCollectiveOp(std::string_view op) { return CollectiveOps().count(op) > 0; }

Array EvaluateStep(DeviceContext& d, const ProgramStep& s, std::span<const Array> args, CostRecorder* recorder) {
  const std::string_view op = s.op;
  const Axes axes(s.axes);
  if (op == "psum") return d.Psum(args[0], axes);
  if (op == "pmean") return d.Pmean(args[0], axes);
  if (op == "pmax") return d.Pmax(args[0], axes);
  if (op == "pmin") return d.Pmin(args[0], axes);
  if (op == "all_gather") return d.AllGather(args[0], axes, s.axis, s.tiled);
  if (op == "psum_scatter") return d.PsumScatter(args[0], axes, s.axis, s.tiled);
  if (op == "all_to_all") return d.AllToAll(args[0], axes, s.split_axis, s.concat_axis, s.tiled);
  if (op == "ppermute") {
    PermutationPairs pairs(s.pairs.begin(), s.pairs.end());
    return d.Ppermute(args[0], axes, pairs);
  }
  if (op == "axis_index") return d.AxisIndexArray(axes);
  if (op == "add" || op == "sub" || op == "mul" || op == "div" || op == "max" || op == "min" || op == "pow") {
    return args.size() == 2 ? Binary(op, args[0], args[1]) : BinaryScalar(op, args[0], *s.scalar);
  }
  const Array& x = args.empty() ? Array() : args[0];
  if (op == "neg") return Neg(x);
  if (op == "abs") return Abs(x);
  if (op == "exp") return Exp(x);
  if (op == "log") return Log(x);
  if (op == "sqrt") return Sqrt(x);
  if (op == "rsqrt") return Rsqrt(x);
  if (op == "tanh") return Tanh(x);
  if (op == "sigmoid") return Sigmoid(x);
  if (op == "relu") return Relu(x);
  if (op == "gelu") return Gelu(x, s.approximate);
  if (op == "silu") return Silu(x);
  if (op == "square") return Mul(x, x);
  if (op == "cast") return Cast(x, s.dtype);
  if (op == "einsum") return Einsum(s.equation, std::vector<Array>(args.begin(), args.end()));
  if (op == "matmul") return MatMul(args[0], args[1]);
  if (op == "dot") return Dot(args[0], args[1]);
  if (op == "sum") return s.dims.empty() ? Sum(x) : Sum(x, s.dims, s.keepdims);
  if (op == "mean") return s.dims.empty() ? Mean(x) : Mean(x, s.dims, s.keepdims);
  if (op == "max_reduce") return s.dims.empty() ? ReduceMax(x) : ReduceMax(x, s.dims, s.keepdims);
  if (op == "min_reduce") return s.dims.empty() ? ReduceMin(x) : ReduceMin(x, s.dims, s.keepdims);
  if (op == "softmax") return Softmax(x, s.axis);
  if (op == "log_softmax") return LogSoftmax(x, s.axis);
  if (op == "reshape") return Reshape(x, s.shape);
  if (op == "transpose") return Transpose(x, s.dims);
  if (op == "slice") return Slice(x, s.start, s.limit, s.strides);
  if (op == "concatenate") return Concatenate(std::vector<Array>(args.begin(), args.end()), s.axis);
  if (op == "broadcast_to") return BroadcastTo(x, s.shape);
  if (op == "gelu_grad") return GeluGrad(args[0], args[1]);
  if (op == "relu_grad") return Mul(args[1], Cast(Greater(args[0], 0.0), args[1].dtype()));
  if (op == "softmax_grad") {
    const Array& p = args[0];
    const Array& dp = args[1];
    return Mul(p, Sub(dp, Sum(Mul(dp, p), {s.axis}, true)));
  }
  Throw(ErrorCode::kInvalidArgument, "step '{}': unknown op '{}'", s.name, s.op);
}

CheckedValue CompareArrays(const std::string& name, const Array& got, const Array& want, double rtol,
                           double atol) {
  CheckedValue c;
  c.name = name;
  if (got.shape() != want.shape()) {
    c.passed = false;
    c.max_abs_error = c.max_rel_error = INFINITY;
    c.worst = fmt::format("{}: shape {} differs from the reference's {}", name, got.ShapeString(),
                          want.ShapeString());
    return c;
  }
  const std::vector<double> g = got.ToDoubles();
  const std::vector<double> w = want.ToDoubles();
  double worst_excess = -INFINITY;
  size_t worst_index = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::abs(g[i] - w[i]);
    const bool nan_mismatch = std::isnan(g[i]) != std::isnan(w[i]);
    const double e = nan_mismatch ? INFINITY : (std::isnan(err) ? 0.0 : err);
    c.max_abs_error = std::max(c.max_abs_error, e);
    if (w[i] != 0) c.max_rel_error = std::max(c.max_rel_error, e / std::abs(w[i]));
    const double excess = e - (atol + rtol * std::abs(w[i]));
    if (excess > worst_excess) {
      worst_excess = excess;
      worst_index = i;
    }
  }
  c.passed = g.empty() || worst_excess <= 0;
  if (!g.empty()) {
    std::vector<int64_t> index(got.shape().size());
    size_t rest = worst_index;
    for (int k = static_cast<int>(index.size()) - 1; k >= 0; --k) {
      index[k] = static_cast<int64_t>(rest % static_cast<size_t>(got.shape()[k]));
      rest /= static_cast<size_t>(got.shape()[k]);
    }
    c.worst = fmt::format("{}[{}]: got {}, want {}", name, fmt::join(index, ","), g[worst_index], w[worst_index]);
  }
  return c;
}

namespace {

struct CompiledProgram {
  std::vector<std::string> names;              // inputs, then step values
  std::vector<std::vector<int>> step_args;     // per step: value indices
  std::vector<int> outputs;                    // value indices
  std::vector<std::vector<int>> release_after; // per step: values whose last use it is (not outputs)
};

CompiledProgram Compile(const ShardMapConfig& config, const Mesh& mesh, const std::string& kind) {
  CompiledProgram p;
  std::map<std::string, int, std::less<>> index;
  auto define = [&](const std::string& name, const std::string& what) {
    if (name.empty()) Throw(ErrorCode::kInvalidArgument, "{} '{}': {} has no name", kind, config.name, what);
    if (!index.emplace(name, static_cast<int>(p.names.size())).second) {
      Throw(ErrorCode::kInvalidArgument, "{} '{}': value '{}' is defined twice ({})", kind, config.name, name,
            what);
    }
    p.names.push_back(name);
  };
  for (const ProgramInput& in : config.inputs) {
    define(in.name, "an input");
    if (!in.value.valid()) {
      Throw(ErrorCode::kInvalidArgument, "{} '{}': input '{}' has no array", kind, config.name, in.name);
    }
  }
  const int num_inputs = static_cast<int>(p.names.size());
  std::vector<int> last_use(static_cast<size_t>(num_inputs + config.steps.size()), -1);
  for (size_t i = 0; i < config.steps.size(); ++i) {
    const ProgramStep& s = config.steps[i];
    auto arity = OpArity().find(s.op);
    if (arity == OpArity().end()) {
      Throw(ErrorCode::kInvalidArgument, "{} '{}': step '{}' has unknown op '{}'; valid ops: {}", kind,
            config.name, s.name, s.op, fmt::join(ProgramOpNames(), ", "));
    }
    const int n = static_cast<int>(s.args.size());
    const int want = arity->second;
    const bool ok = want >= 0   ? n == want
                    : want == -1 ? n >= 1
                                 : (n == 2 || (n == 1 && s.scalar.has_value()));
    if (!ok) {
      Throw(ErrorCode::kInvalidArgument, "{} '{}': step '{}' ({}) takes {} argument(s), got {}", kind, config.name,
            s.name, s.op,
            want >= 0 ? fmt::format("{}", want) : want == -1 ? "one or more" : "2 (or 1 and a scalar)", n);
    }
    if (IsCollectiveOp(s.op) || s.op == "axis_index") {
      if (s.axes.empty() && s.op != "axis_index") {
        Throw(ErrorCode::kInvalidArgument, "{} '{}': step '{}' ({}) needs axes; mesh axes are ({})", kind,
              config.name, s.name, s.op, fmt::join(mesh.axis_names(), ", "));
      }
      mesh.ValidateAxes(s.axes, fmt::format("axes of step '{}'", s.name));
    }
    if (s.op == "einsum" && s.equation.empty()) {
      Throw(ErrorCode::kInvalidArgument, "{} '{}': step '{}' (einsum) needs an equation", kind, config.name,
            s.name);
    }
    std::vector<int> args;
    for (const std::string& a : s.args) {
      auto it = index.find(a);
      if (it == index.end()) {
        std::vector<std::string> known(p.names.begin(), p.names.end());
        Throw(ErrorCode::kNotFound, "{} '{}': step '{}' uses '{}', which is not an input or an earlier step; "
              "defined so far: {}", kind, config.name, s.name, a, fmt::join(known, ", "));
      }
      args.push_back(it->second);
      last_use[it->second] = static_cast<int>(i);
    }
    p.step_args.push_back(std::move(args));
    define(s.name, fmt::format("step {}", i));
  }
  if (config.outputs.empty()) {
    Throw(ErrorCode::kInvalidArgument, "{} '{}' has no outputs", kind, config.name);
  }
  for (const ProgramOutput& out : config.outputs) {
    auto it = index.find(out.name);
    if (it == index.end()) {
      Throw(ErrorCode::kNotFound, "{} '{}': output '{}' is not a value of the program; values: {}", kind,
            config.name, out.name, fmt::join(p.names, ", "));
    }
    p.outputs.push_back(it->second);
    last_use[it->second] = static_cast<int>(config.steps.size());  // never released
  }
  p.release_after.resize(config.steps.size());
  for (size_t v = 0; v < last_use.size(); ++v) {
    if (last_use[v] >= 0 && last_use[v] < static_cast<int>(config.steps.size())) {
      p.release_after[last_use[v]].push_back(static_cast<int>(v));
    }
  }
  return p;
}

ShardFunction Interpreter(const ShardMapConfig& config, const CompiledProgram& program, CostRecorder* recorder,
                          std::vector<int> step_ids) {
  return [&config, &program, recorder, step_ids = std::move(step_ids)](
             DeviceContext& d, std::span<const Array> blocks) -> std::vector<Array> {
    std::vector<Array> values(program.names.size());
    std::copy(blocks.begin(), blocks.end(), values.begin());
    for (size_t i = 0; i < config.steps.size(); ++i) {
      const ProgramStep& s = config.steps[i];
      std::vector<Array> args;
      args.reserve(program.step_args[i].size());
      for (int a : program.step_args[i]) args.push_back(values[a]);
      if (recorder != nullptr) recorder->BeginStep(d.position(), step_ids[i], args.empty() ? DType::kF32
                                                                                            : args[0].dtype());
      values[blocks.size() + i] = EvaluateStep(d, s, args, recorder);
      if (recorder != nullptr) recorder->EndStep(d.position());
      args.clear();
      for (int v : program.release_after[i]) values[v] = Array();
    }
    std::vector<Array> outs;
    for (int o : program.outputs) outs.push_back(values[o]);
    return outs;
  };
}

std::vector<std::string> ValueNames(const ShardMapConfig& config) {
  std::vector<std::string> names;
  for (const auto& o : config.outputs) names.push_back(o.name);
  return names;
}

}  // namespace

WorkloadResult RunProgram(const WorkloadContext& context, const ShardMapConfig& config, const std::string& kind) {
  const Mesh& mesh = context.mesh;
  const CompiledProgram program = Compile(config, mesh, kind);
  WorkloadResult result;
  result.name = config.name;
  result.kind = kind;
  result.abstract = context.abstract;

  std::vector<ShardMapArg> args;
  std::vector<InSpec> in_specs;
  std::vector<Array> inputs;
  for (const ProgramInput& in : config.inputs) {
    Array v = context.abstract && !in.value.is_abstract() ? Array::Abstract(in.value.shape(), in.value.dtype())
                                                          : in.value;
    inputs.push_back(v);
    args.emplace_back(v);
    in_specs.emplace_back(in.spec);
    result.layouts.emplace_back(in.name, in.spec);
  }
  std::vector<PartitionSpec> out_specs;
  for (const ProgramOutput& out : config.outputs) {
    out_specs.push_back(out.spec);
    result.layouts.emplace_back(out.name, out.spec);
  }

  internal::CostRecorder recorder(context, mesh);
  std::vector<int> step_ids;
  for (const ProgramStep& s : config.steps) {
    step_ids.push_back(recorder.AddStep(s.name, s.op, IsCollectiveOp(s.op) ? StepKind::kCollective
                                                                           : StepKind::kCompute,
                                        s.axes));
  }
  RuntimeOptions runtime_options = context.runtime;
  // Eigen's GEMM keeps its blocking buffers on the stack (up to EIGEN_STACK_ALLOCATION_LIMIT, 128 KiB): a
  // [128,256] x [256,128] matmul overflows the runtime's default 256 KiB fiber stack. Only touched pages are
  // resident, so a larger reservation costs address space, not memory.
  runtime_options.fiber_stack_bytes = std::max<size_t>(runtime_options.fiber_stack_bytes, kMinFiberStackBytes);
  runtime_options.observer = &recorder;
  runtime_options.op_cost_sink = &recorder;
  Runtime runtime(mesh, runtime_options);
  ShardMapOptions options;
  options.check_vma = config.check_vma;
  options.name = config.name;
  options.runtime = &runtime;
  ShardMapped f = ShardMap(Interpreter(config, program, &recorder, step_ids), mesh, in_specs, out_specs, options);

  std::vector<Array> outputs;
  {
    const double start = recorder.WallNow();
    outputs = f(args);
    result.wall_seconds = recorder.WallNow() - start;
  }
  recorder.RethrowIfFailed();
  recorder.Finish(&result);

  result.memory = internal::MemoryOf(runtime, mesh);

  if (context.keep_arrays && !context.abstract) {
    for (size_t i = 0; i < inputs.size(); ++i) result.inputs.emplace_back(config.inputs[i].name, inputs[i]);
    for (size_t i = 0; i < outputs.size(); ++i) result.outputs.emplace_back(config.outputs[i].name, outputs[i]);
  }

  NumericCheck& check = result.check;
  check.rtol = config.rtol;
  check.atol = config.atol;
  if (context.abstract || !config.check) return result;
  // The reference: the same program on one device whose mesh has the same axis names, each of size 1.
  Mesh one = Mesh::Iota(std::vector<int64_t>(mesh.axis_names().size(), 1), mesh.axis_names());
  RuntimeOptions one_options;
  one_options.num_threads = 1;
  one_options.device_memory_bytes = int64_t{1} << 50;  // the whole problem on one device: do not run out
  Runtime one_runtime(one, one_options);
  ShardMapOptions ref_options;
  ref_options.check_vma = false;
  ref_options.name = config.name + " (reference)";
  ref_options.runtime = &one_runtime;
  std::vector<PartitionSpec> ref_out_specs(config.outputs.size(), PartitionSpec());
  ShardMapped ref = ShardMap(Interpreter(config, program, nullptr, step_ids), one, in_specs, ref_out_specs,
                             ref_options);
  std::vector<Array> want = ref(args);
  check.performed = true;
  check.compared = fmt::format("{} vs the same program on one device", fmt::join(ValueNames(config), ", "));
  for (size_t i = 0; i < outputs.size(); ++i) {
    CheckedValue c = CompareArrays(config.outputs[i].name, outputs[i], want[i], config.rtol, config.atol);
    check.passed = check.passed && c.passed;
    check.max_abs_error = std::max(check.max_abs_error, c.max_abs_error);
    check.max_rel_error = std::max(check.max_rel_error, c.max_rel_error);
    check.values.push_back(std::move(c));
  }
  return result;
}

}  // namespace internal

WorkloadResult RunShardMapProgram(const WorkloadContext& context, const ShardMapConfig& config) {
  return internal::RunProgram(context, config, "shard_map");
}

}  // namespace spmdsim
