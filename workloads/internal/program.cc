#include "workloads/internal/program.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numbers>

#include <fmt/format.h>

#include "common/error.h"
#include "common/host_memory.h"
#include "ops/ops.h"
#include "shardmap/shard_map.h"
#include "sim/array_builder.h"
#include "sim/multiprocess.h"
#include "sim/runtime_options.h"

namespace spmdsim {

namespace internal {
namespace {

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

Array Ppermute(const OpCall& c) {
  DeviceContext& d = c.d;
  const ProgramStep& s = c.s;
  const Axes axes(s.axes);
  PermutationPairs pairs(s.pairs.begin(), s.pairs.end());
  return d.Ppermute(c.x(), axes, pairs);
}

// A binary op: two arrays, or an array and the step's scalar.
template <Array (*kArrays)(const Array&, const Array&), Array (*kScalar)(const Array&, double)>
Array BinaryOp(const OpCall& c) {
  return c.args.size() == 2 ? kArrays(c.args[0], c.args[1]) : kScalar(c.args[0], *c.s.scalar);
}

// A reduction over the step's dims (all when empty).
template <Array (*kAll)(const Array&), Array (*kDims)(const Array&, const std::vector<int>&, bool)>
Array ReduceOp(const OpCall& c) {
  return c.s.dims.empty() ? kAll(c.x()) : kDims(c.x(), c.s.dims, c.s.keepdims);
}

template <Array (*kUnary)(const Array&)>
Array UnaryOp(const OpCall& c) {
  return kUnary(c.x());
}

// Every op, sorted by name (ProgramOpNames lists them in this order).
const std::vector<ProgramOpEntry>& OpTable() {
  using enum ProgramOp;
  static const std::vector<ProgramOpEntry> table = {
      {"abs", kAbs, 1, false, UnaryOp<Abs>},
      {"add", kAdd, kTwoOrScalar, false, BinaryOp<Add, Add>},
      {"all_gather", kAllGather, 1, true,
       [](const OpCall& c) { return c.d.AllGather(c.x(), Axes(c.s.axes), c.s.axis, c.s.tiled); }},
      {"all_to_all", kAllToAll, 1, true,
       [](const OpCall& c) {
         return c.d.AllToAll(c.x(), Axes(c.s.axes), c.s.split_axis, c.s.concat_axis, c.s.tiled);
       }},
      {"axis_index", kAxisIndex, 0, false, [](const OpCall& c) { return c.d.AxisIndexArray(Axes(c.s.axes)); }},
      {"broadcast_to", kBroadcastTo, 1, false, [](const OpCall& c) { return BroadcastTo(c.x(), c.s.shape); }},
      {"cast", kCast, 1, false, [](const OpCall& c) { return Cast(c.x(), c.s.dtype); }},
      {"concatenate", kConcatenate, kOneOrMore, false,
       [](const OpCall& c) { return Concatenate(c.all(), c.s.axis); }},
      {"div", kDiv, kTwoOrScalar, false, BinaryOp<Div, Div>},
      {"dot", kDot, 2, false, [](const OpCall& c) { return Dot(c.args[0], c.args[1]); }},
      {"einsum", kEinsum, kOneOrMore, false, [](const OpCall& c) { return Einsum(c.s.equation, c.all()); }},
      {"exp", kExp, 1, false, UnaryOp<Exp>},
      {"gelu", kGelu, 1, false, [](const OpCall& c) { return Gelu(c.x(), c.s.approximate); }},
      {"gelu_grad", kGeluGrad, 2, false, [](const OpCall& c) { return GeluGrad(c.args[0], c.args[1]); }},
      {"greater_equal", kGreaterEqual, kTwoOrScalar, false, BinaryOp<GreaterEqual, GreaterEqual>},
      {"log", kLog, 1, false, UnaryOp<Log>},
      {"log_softmax", kLogSoftmax, 1, false, [](const OpCall& c) { return LogSoftmax(c.x(), c.s.axis); }},
      {"matmul", kMatMul, 2, false, [](const OpCall& c) { return MatMul(c.args[0], c.args[1]); }},
      {"max", kMax, kTwoOrScalar, false, BinaryOp<Max, Max>},
      {"max_reduce", kMaxReduce, 1, false, ReduceOp<ReduceMax, ReduceMax>},
      {"mean", kMean, 1, false, ReduceOp<Mean, Mean>},
      {"min", kMin, kTwoOrScalar, false, BinaryOp<Min, Min>},
      {"min_reduce", kMinReduce, 1, false, ReduceOp<ReduceMin, ReduceMin>},
      {"mul", kMul, kTwoOrScalar, false, BinaryOp<Mul, Mul>},
      {"neg", kNeg, 1, false, UnaryOp<Neg>},
      {"pmax", kPmax, 1, true, [](const OpCall& c) { return c.d.Pmax(c.x(), Axes(c.s.axes)); }},
      {"pmean", kPmean, 1, true, [](const OpCall& c) { return c.d.Pmean(c.x(), Axes(c.s.axes)); }},
      {"pmin", kPmin, 1, true, [](const OpCall& c) { return c.d.Pmin(c.x(), Axes(c.s.axes)); }},
      {"pow", kPow, kTwoOrScalar, false, BinaryOp<Pow, Pow>},
      {"ppermute", kPpermute, 1, true, Ppermute},
      {"psum", kPsum, 1, true, [](const OpCall& c) { return c.d.Psum(c.x(), Axes(c.s.axes)); }},
      {"psum_scatter", kPsumScatter, 1, true,
       [](const OpCall& c) { return c.d.PsumScatter(c.x(), Axes(c.s.axes), c.s.axis, c.s.tiled); }},
      {"relu", kRelu, 1, false, UnaryOp<Relu>},
      {"relu_grad", kReluGrad, 2, false,
       [](const OpCall& c) { return Mul(c.args[1], Cast(Greater(c.args[0], 0.0), c.args[1].dtype())); }},
      {"reshape", kReshape, 1, false, [](const OpCall& c) { return Reshape(c.x(), c.s.shape); }},
      {"rsqrt", kRsqrt, 1, false, UnaryOp<Rsqrt>},
      {"sigmoid", kSigmoid, 1, false, UnaryOp<Sigmoid>},
      {"silu", kSilu, 1, false, UnaryOp<Silu>},
      {"slice", kSlice, 1, false, [](const OpCall& c) { return Slice(c.x(), c.s.start, c.s.limit, c.s.strides); }},
      {"softmax", kSoftmax, 1, false, [](const OpCall& c) { return Softmax(c.x(), c.s.axis); }},
      {"softmax_grad", kSoftmaxGrad, 2, false,
       [](const OpCall& c) {
         const Array& p = c.args[0];
         const Array& dp = c.args[1];
         return Mul(p, Sub(dp, Sum(Mul(dp, p), {c.s.axis}, true)));
       }},
      {"sqrt", kSqrt, 1, false, UnaryOp<Sqrt>},
      {"square", kSquare, 1, false, [](const OpCall& c) { return Mul(c.x(), c.x()); }},
      {"sub", kSub, kTwoOrScalar, false, BinaryOp<Sub, Sub>},
      {"sum", kSum, 1, false, ReduceOp<Sum, Sum>},
      {"tanh", kTanh, 1, false, UnaryOp<Tanh>},
      {"transpose", kTranspose, 1, false, [](const OpCall& c) { return Transpose(c.x(), c.s.dims); }},
  };
  static const bool sorted = std::is_sorted(table.begin(), table.end(), [](const auto& a, const auto& b) {
    return a.name < b.name;
  });
  SPMDSIM_CHECK(sorted, "the op table must be sorted by name");
  return table;
}

}  // namespace

const ProgramOpEntry* FindProgramOp(std::string_view name) {
  const std::vector<ProgramOpEntry>& table = OpTable();
  auto it = std::lower_bound(table.begin(), table.end(), name,
                             [](const ProgramOpEntry& e, std::string_view n) { return e.name < n; });
  return it != table.end() && it->name == name ? &*it : nullptr;
}

Array EvaluateStep(DeviceContext& device, const ProgramOpEntry& op, const ProgramStep& step,
                   std::span<const Array> args, CostRecorder* recorder) {
  return op.evaluate(OpCall{device, step, args, recorder});
}

}  // namespace internal

const std::vector<std::string>& ProgramOpNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const internal::ProgramOpEntry& e : internal::OpTable()) n.emplace_back(e.name);
    return n;
  }();
  return names;
}

namespace internal {

CheckedValue CompareArrays(const std::string& name, const Array& got, const Array& want, double rtol,
                           double atol, std::span<const int64_t> index_offset, double* worst_excess_out) {
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
  if (worst_excess_out != nullptr) *worst_excess_out = worst_excess;
  if (!g.empty()) {
    std::vector<int64_t> index(got.shape().size());
    size_t rest = worst_index;
    for (int k = static_cast<int>(index.size()) - 1; k >= 0; --k) {
      index[k] = static_cast<int64_t>(rest % static_cast<size_t>(got.shape()[k]));
      rest /= static_cast<size_t>(got.shape()[k]);
      if (static_cast<size_t>(k) < index_offset.size()) index[k] += index_offset[k];
    }
    c.worst = fmt::format("{}[{}]: got {}, want {}", name, fmt::join(index, ","), g[worst_index], w[worst_index]);
  }
  return c;
}

namespace {

struct CompiledProgram {
  std::vector<std::string> names;              // inputs, then step values
  std::vector<const ProgramOpEntry*> ops;      // per step: its op, resolved once
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
    const ProgramOpEntry* entry = FindProgramOp(s.op);
    if (entry == nullptr) {
      Throw(ErrorCode::kInvalidArgument, "{} '{}': step '{}' has unknown op '{}'; valid ops: {}", kind,
            config.name, s.name, s.op, fmt::join(ProgramOpNames(), ", "));
    }
    const int n = static_cast<int>(s.args.size());
    const int want = entry->arity;
    const bool ok = want >= 0   ? n == want
                    : want == kOneOrMore ? n >= 1
                                 : (n == 2 || (n == 1 && s.scalar.has_value()));
    if (!ok) {
      Throw(ErrorCode::kInvalidArgument, "{} '{}': step '{}' ({}) takes {} argument(s), got {}", kind, config.name,
            s.name, s.op,
            want >= 0 ? fmt::format("{}", want) : want == kOneOrMore ? "one or more" : "2 (or 1 and a scalar)", n);
    }
    // No axes is valid: as in JAX, psum, pmax, pmin, all_gather and psum_scatter return the value, pmean divides
    // it by 1, all_to_all and ppermute run over a group of one and axis_index is 0.
    if (entry->collective || entry->op == ProgramOp::kAxisIndex) {
      mesh.ValidateAxes(s.axes, fmt::format("axes of step '{}'", s.name));
    }
    if (entry->op == ProgramOp::kEinsum && s.equation.empty()) {
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
    p.ops.push_back(entry);
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
      values[blocks.size() + i] = EvaluateStep(d, *program.ops[i], s, args, recorder);
      if (recorder != nullptr) recorder->EndStep(d.position());
      args.clear();
      for (int v : program.release_after[i]) values[v] = Array();
    }
    std::vector<Array> outs;
    for (int o : program.outputs) outs.push_back(values[o]);
    return outs;
  };
}

// The program as the one-device reference runs it. The reference mesh has every axis of size 1, so each
// collective is over a group of one standing for the whole group: a ppermute's pairs, valid for the real group
// (the sharded run checked them), become that one device sending to itself.
ShardMapConfig ReferenceProgram(const ShardMapConfig& config) {
  ShardMapConfig ref = config;
  for (ProgramStep& s : ref.steps) {
    if (s.op == "ppermute" && !s.pairs.empty()) s.pairs = {{0, 0}};
  }
  return ref;
}

std::vector<std::string> ValueNames(const ShardMapConfig& config) {
  std::vector<std::string> names;
  for (const auto& o : config.outputs) names.push_back(o.name);
  return names;
}

// Runs `config` (compiled as `program`) on one device whose mesh has `axis_names`, each of size 1; returns its
// outputs.
std::vector<Array> RunOnOneDevice(const ShardMapConfig& config, const CompiledProgram& program,
                                  const std::vector<std::string>& axis_names, const std::vector<ShardMapArg>& args,
                                  const std::vector<InSpec>& in_specs) {
  Mesh one = Mesh::Iota(std::vector<int64_t>(axis_names.size(), 1), axis_names);
  RuntimeOptions one_options;
  one_options.num_threads = 1;
  one_options.device_memory_bytes = int64_t{1} << 50;  // the whole problem on one device: do not run out
  one_options.fiber_stack_bytes = kEigenFiberStackBytes;
  Runtime one_runtime(one, one_options);
  ShardMapOptions ref_options;
  ref_options.check_vma = false;
  ref_options.name = config.name + " (reference)";
  ref_options.runtime = &one_runtime;
  std::vector<PartitionSpec> ref_out_specs(config.outputs.size(), PartitionSpec());
  std::vector<int> step_ids(config.steps.size(), 0);
  ShardMapped ref = ShardMap(Interpreter(config, program, nullptr, step_ids), one, in_specs, ref_out_specs,
                             ref_options);
  return ref(args);
}

}  // namespace

// The whole input (for the one-device reference, or one process with make_blocks).
Array WholeInput(const ProgramInput& in) {
  if (!in.make_blocks || !in.value.is_abstract()) return in.value;
  std::vector<IndexRange> all;
  for (int64_t d : in.value.shape()) all.push_back({0, d});
  return in.make_blocks({all})[0];
}

std::vector<Array> RunProgramOnOneDevice(const ShardMapConfig& config, const std::vector<std::string>& axis_names) {
  Mesh one = Mesh::Iota(std::vector<int64_t>(axis_names.size(), 1), axis_names);
  const CompiledProgram program = Compile(config, one, "program");
  std::vector<ShardMapArg> args;
  std::vector<InSpec> in_specs;
  for (const ProgramInput& in : config.inputs) {
    args.emplace_back(WholeInput(in));
    in_specs.emplace_back(in.spec);
  }
  return RunOnOneDevice(config, program, axis_names, args, in_specs);
}

namespace {

bool AcrossRanks(const WorkloadContext& context) {
  return context.runtime.process_group != nullptr && context.runtime.process_group->size() > 1;
}

// The input as this rank's shards under its in_spec: made by make_blocks (only the distinct blocks of local
// devices) or cut from the global value; other ranks' positions hold abstract stand-ins.
ShardedArray LocalShards(const ProgramInput& in, const Mesh& mesh, const Runtime& runtime) {
  NamedSharding sharding(mesh, in.spec);
  const ShardingLayout layout = sharding.Layout(in.value.shape());
  std::map<int64_t, size_t> slot_of_shard;  // shard id -> index in `wanted`
  std::vector<std::vector<IndexRange>> wanted;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    const DeviceShard& d = layout.shards[p];
    if (runtime.is_local(p) && slot_of_shard.emplace(d.shard_id, wanted.size()).second) wanted.push_back(d.index);
  }
  std::vector<Array> made;
  if (in.make_blocks && in.value.is_abstract()) {
    made = in.make_blocks(wanted);
  } else {
    const size_t element = static_cast<size_t>(DTypeSize(in.value.dtype()));
    for (const auto& index : wanted) {
      std::vector<int64_t> shape;
      for (const IndexRange& r : index) shape.push_back(r.size());
      ArrayBuilder block(in.value.dtype(), shape);
      if (block.size() > 0)
        CopyBlockOut(static_cast<const std::byte*>(in.value.raw_data()), in.value.shape(), index, element,
                     static_cast<std::byte*>(block.mutable_data()));
      made.push_back(std::move(block).Freeze());
    }
  }
  std::vector<Array> shards(static_cast<size_t>(mesh.size()));
  for (int64_t p = 0; p < mesh.size(); ++p) {
    shards[p] = runtime.is_local(p) ? made[slot_of_shard.at(layout.shards[p].shard_id)]
                                    : Array::Abstract(layout.shard_shape, in.value.dtype());
  }
  return ShardedArray::FromShards(in.value.shape(), in.value.dtype(), sharding, std::move(shards));
}

// Rank 0 gets the global array (other ranks an invalid Array): every distinct block sent by the rank of its
// first holder. Every rank must call it.
Array GatherToRankZero(const ShardedArray& x, const Runtime& runtime) {
  const ShardingLayout& layout = x.layout();
  const int64_t n = runtime.num_devices();
  std::vector<std::vector<Array>> by_position(static_cast<size_t>(n));
  for (int64_t sid = 0; sid < layout.num_shards; ++sid) {
    const int64_t p = layout.positions_of_shard[sid][0];
    if (runtime.is_local(p)) by_position[p] = {x.shard(p)};
  }
  ShareArrays(runtime, by_position, ShareData::kRankZero);
  if (runtime.rank() != 0) return Array();
  ArrayBuilder global(x.dtype(), x.shape());
  const size_t element = static_cast<size_t>(DTypeSize(x.dtype()));
  for (int64_t sid = 0; sid < layout.num_shards && global.size() > 0; ++sid) {
    const int64_t p = layout.positions_of_shard[sid][0];
    const Array& block = by_position[p].at(0);
    if (block.size() == 0) continue;
    CopyBlockIn(static_cast<const std::byte*>(block.raw_data()), x.shape(), layout.shards[p].index, element,
                static_cast<std::byte*>(global.mutable_data()));
  }
  return std::move(global).Freeze();
}

// Keeps a sharded value for --dump: small ones whole on rank 0, larger ones as this rank's shards.
void KeepSharded(const std::string& name, const ShardedArray& x, const Runtime& runtime,
                 std::vector<std::pair<std::string, Array>>& whole,
                 std::vector<std::pair<std::string, ShardedArray>>& sharded) {
  if (ArrayBytes(x.shape(), DTypeSize(x.dtype())) > kGatherArrayBytes) {
    sharded.emplace_back(name, x);
    return;
  }
  Array global = GatherToRankZero(x, runtime);
  if (global.valid()) whole.emplace_back(name, std::move(global));
}

// One value's check as a record another rank can read: passed, errors and the worst element's excess in
// hexadecimal floats, then the worst element's text.
std::string SerializeCheck(const CheckedValue& c, double excess) {
  return fmt::format("{:d} {:a} {:a} {:a} {}", c.passed ? 1 : 0, c.max_abs_error, c.max_rel_error, excess, c.worst);
}

void ParseCheck(const std::string& record, CheckedValue& c, double& excess) {
  int passed = 1;
  int used = 0;
  char abs_text[64], rel_text[64], excess_text[64];
  SPMDSIM_CHECK(std::sscanf(record.c_str(), "%d %63s %63s %63s %n", &passed, abs_text, rel_text, excess_text,
                            &used) == 4,
                "bad check record '{}'", record);
  c.passed = passed != 0;
  c.max_abs_error = std::strtod(abs_text, nullptr);
  c.max_rel_error = std::strtod(rel_text, nullptr);
  excess = std::strtod(excess_text, nullptr);
  c.worst = record.substr(static_cast<size_t>(used));
}

// Across ranks: each rank compares the distinct blocks its devices hold with the same blocks of the reference
// `want`; the per-value results of every rank are merged (on every rank, so every rank exits alike).
std::vector<CheckedValue> CompareAcrossRanks(const ShardMapConfig& config, const std::vector<ShardedArray>& got,
                                             const std::vector<Array>& want, const Runtime& runtime) {
  const size_t num = got.size();
  std::string mine;
  for (size_t k = 0; k < num; ++k) {
    const ShardingLayout& layout = got[k].layout();
    CheckedValue merged;
    merged.name = config.outputs[k].name;
    double worst_excess = -INFINITY;
    if (got[k].shape() != want[k].shape()) {
      merged = CompareArrays(merged.name, Array::Abstract(got[k].shape(), got[k].dtype()), want[k], config.rtol,
                             config.atol);
      worst_excess = INFINITY;
    } else {
      for (int64_t sid = 0; sid < layout.num_shards; ++sid) {
        const int64_t p = layout.positions_of_shard[sid][0];
        if (!runtime.is_local(p)) continue;
        const std::vector<IndexRange>& index = layout.shards[p].index;
        ArrayBuilder block(want[k].dtype(), layout.shard_shape);
        if (block.size() > 0)
          CopyBlockOut(static_cast<const std::byte*>(want[k].raw_data()), want[k].shape(), index,
                       static_cast<size_t>(DTypeSize(want[k].dtype())), static_cast<std::byte*>(block.mutable_data()));
        std::vector<int64_t> offset;
        for (const IndexRange& r : index) offset.push_back(r.start);
        double excess = -INFINITY;
        CheckedValue c = CompareArrays(merged.name, got[k].shard(p), std::move(block).Freeze(), config.rtol,
                                       config.atol, offset, &excess);
        merged.passed = merged.passed && c.passed;
        merged.max_abs_error = std::max(merged.max_abs_error, c.max_abs_error);
        merged.max_rel_error = std::max(merged.max_rel_error, c.max_rel_error);
        if (excess > worst_excess) {
          worst_excess = excess;
          merged.worst = c.worst;
        }
      }
    }
    mine += SerializeCheck(merged, worst_excess);
    mine.push_back('\0');
  }
  const std::vector<std::string> all = runtime.options().process_group->AllGatherBytes(mine);
  std::vector<CheckedValue> out(num);
  std::vector<double> worst(num, -INFINITY);
  for (size_t k = 0; k < num; ++k) out[k].name = config.outputs[k].name;
  for (const std::string& records : all) {  // rank order: the first rank with the worst element wins ties
    size_t at = 0;
    for (size_t k = 0; k < num; ++k) {
      const size_t end = records.find('\0', at);
      SPMDSIM_CHECK(end != std::string::npos, "check record of {} values is short", num);
      CheckedValue c;
      double excess = -INFINITY;
      ParseCheck(records.substr(at, end - at), c, excess);
      at = end + 1;
      out[k].passed = out[k].passed && c.passed;
      out[k].max_abs_error = std::max(out[k].max_abs_error, c.max_abs_error);
      out[k].max_rel_error = std::max(out[k].max_rel_error, c.max_rel_error);
      if (excess > worst[k]) {
        worst[k] = excess;
        out[k].worst = c.worst;
      }
    }
  }
  return out;
}

// What a run gives back on this rank: the global outputs (one process, or every rank when the caller needs
// whole outputs), or this rank's blocks of them.
struct RunOutputs {
  std::vector<Array> global;
  std::vector<ShardedArray> local;
};

// Registers every step of the program with the recorder; their ids in step order.
std::vector<int> RecordSteps(const ShardMapConfig& config, const CompiledProgram& program,
                             internal::CostRecorder& recorder) {
  std::vector<int> step_ids;
  for (size_t i = 0; i < config.steps.size(); ++i) {
    const ProgramStep& s = config.steps[i];
    step_ids.push_back(recorder.AddStep(s.name, s.op, program.ops[i]->collective ? StepKind::kCollective
                                                                                 : StepKind::kCompute,
                                        s.axes));
  }
  return step_ids;
}

RuntimeOptions ProgramRuntimeOptions(const WorkloadContext& context, internal::CostRecorder* recorder) {
  RuntimeOptions runtime_options = context.runtime;
  runtime_options.fiber_stack_bytes = std::max(runtime_options.fiber_stack_bytes, kEigenFiberStackBytes);
  runtime_options.observer = recorder;
  runtime_options.op_cost_sink = recorder;
  return runtime_options;
}

// The program's arguments (abstract; this rank's blocks when `spread`; else whole) and their specs; every input's
// and output's layout goes to `result`.
void MakeArguments(const WorkloadContext& context, const ShardMapConfig& config, bool spread, const Runtime& runtime,
                   std::vector<ShardMapArg>* args, std::vector<InSpec>* in_specs, WorkloadResult* result) {
  for (const ProgramInput& in : config.inputs) {
    if (context.abstract) {
      args->emplace_back(in.value.is_abstract() ? in.value : Array::Abstract(in.value.shape(), in.value.dtype()));
    } else if (spread) {
      args->emplace_back(LocalShards(in, context.mesh, runtime));
    } else {
      args->emplace_back(WholeInput(in));
    }
    in_specs->emplace_back(in.spec);
    result->layouts.emplace_back(in.name, in.spec);
  }
  for (const ProgramOutput& out : config.outputs) result->layouts.emplace_back(out.name, out.spec);
}

// WorkloadContext::keep_arrays: the inputs and outputs into `result`, whole or as this rank's blocks.
void KeepArrays(const ShardMapConfig& config, const std::vector<ShardMapArg>& args, const RunOutputs& outputs,
                bool spread, bool local_outputs, const Runtime& runtime, WorkloadResult* result) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (spread) {
      KeepSharded(config.inputs[i].name, args[i].sharded(), runtime, result->inputs, result->sharded_inputs);
    } else {
      result->inputs.emplace_back(config.inputs[i].name, args[i].array());
    }
  }
  for (size_t i = 0; i < config.outputs.size(); ++i) {
    if (local_outputs) {
      KeepSharded(config.outputs[i].name, outputs.local[i], runtime, result->outputs, result->sharded_outputs);
    } else {
      result->outputs.emplace_back(config.outputs[i].name, outputs.global[i]);
    }
  }
}

// The numeric check: the outputs against the same program on one device.
void CheckAgainstOneDevice(const ShardMapConfig& config, const CompiledProgram& program, const Mesh& mesh,
                           const std::vector<ShardMapArg>& args, const std::vector<InSpec>& in_specs, bool spread,
                           bool local_outputs, const RunOutputs& outputs, const Runtime& runtime,
                           NumericCheck* check) {
  std::vector<Array> want;
  try {
    // The one-device reference runs on the whole arrays; across ranks every rank makes them (for this check
    // only) and compares its own blocks. A program too large for one process turns it off with `check: false`.
    std::vector<ShardMapArg> whole;
    for (size_t i = 0; i < config.inputs.size(); ++i)
      whole.emplace_back(spread ? WholeInput(config.inputs[i]) : args[i].array());
    want = RunOnOneDevice(ReferenceProgram(config), program, mesh.axis_names(), whole, in_specs);
  } catch (const Error& e) {
    // The sharded run accepted every step; a step the one-device mesh cannot express (an untiled psum_scatter or
    // all_to_all needs the dimension to equal the real group's size) leaves the check not performed.
    check->compared = fmt::format("the one-device reference cannot run this program: {}", e.message());
    return;
  }
  check->performed = true;
  check->compared = fmt::format("{} vs the same program on one device", fmt::join(ValueNames(config), ", "));
  std::vector<CheckedValue> values;
  if (local_outputs) {
    values = CompareAcrossRanks(config, outputs.local, want, runtime);
  } else {
    for (size_t i = 0; i < outputs.global.size(); ++i)
      values.push_back(CompareArrays(config.outputs[i].name, outputs.global[i], want[i], config.rtol, config.atol));
  }
  for (CheckedValue& c : values) {
    check->passed = check->passed && c.passed;
    check->max_abs_error = std::max(check->max_abs_error, c.max_abs_error);
    check->max_rel_error = std::max(check->max_rel_error, c.max_rel_error);
    check->values.push_back(std::move(c));
  }
}

}  // namespace

WorkloadResult RunProgram(const WorkloadContext& context, const ShardMapConfig& config, WorkloadKind kind,
                          bool whole_outputs) {
  const Mesh& mesh = context.mesh;
  const CompiledProgram program = Compile(config, mesh, std::string(WorkloadKindName(kind)));
  WorkloadResult result;
  result.name = config.name;
  result.kind = kind;
  result.abstract = context.abstract;
  // Across ranks with data: each rank holds only its devices' input blocks, and output blocks unless the caller
  // needs the whole outputs on every rank (docs/multiprocess.md).
  const bool spread = AcrossRanks(context) && !context.abstract;
  const bool local_outputs = spread && !whole_outputs;

  internal::CostRecorder recorder(context, mesh);
  const std::vector<int> step_ids = RecordSteps(config, program, recorder);
  Runtime runtime(mesh, ProgramRuntimeOptions(context, &recorder));

  std::vector<ShardMapArg> args;
  std::vector<InSpec> in_specs;
  MakeArguments(context, config, spread, runtime, &args, &in_specs, &result);
  std::vector<PartitionSpec> out_specs;
  for (const ProgramOutput& out : config.outputs) out_specs.push_back(out.spec);

  ShardMapOptions options;
  options.check_vma = config.check_vma;
  options.name = config.name;
  options.runtime = &runtime;
  if (local_outputs) options.share_outputs = ShareData::kShapesOnly;  // each rank keeps its own blocks
  ShardMapped f = ShardMap(Interpreter(config, program, &recorder, step_ids), mesh, in_specs, out_specs, options);

  RunOutputs outputs;
  {
    const double start = recorder.WallNow();
    if (local_outputs) {
      outputs.local = f.CallSharded(args);
    } else {
      outputs.global = f(args);
    }
    result.wall_seconds = recorder.WallNow() - start;
  }
  recorder.RethrowIfFailed();
  recorder.Finish(&result);

  result.memory = internal::MemoryOf(runtime, mesh);
  if (context.keep_arrays && !context.abstract) {
    KeepArrays(config, args, outputs, spread, local_outputs, runtime, &result);
  }
  result.check.rtol = config.rtol;
  result.check.atol = config.atol;
  if (context.abstract || !config.check) return result;
  CheckAgainstOneDevice(config, program, mesh, args, in_specs, spread, local_outputs, outputs, runtime,
                        &result.check);
  return result;
}

}  // namespace internal

Array WholeProgramInput(const ProgramInput& input) { return internal::WholeInput(input); }

WorkloadResult RunShardMapProgram(const WorkloadContext& context, const ShardMapConfig& config) {
  return internal::RunProgram(context, config, WorkloadKind::kShardMap);
}

}  // namespace spmdsim
