#include "shardmap/shard_map.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "common/error.h"
#include "common/strings.h"
#include "sim/internal/buffer.h"
#include "sim/memory.h"

namespace spmdsim {

using internal::ArrayAccess;

namespace internal {
void ThrowArityMismatch(size_t takes, size_t given) {
  ThrowKind(ErrorCode::kInvalidArgument, "TypeError", "f() takes {} arrays but {} were given", takes, given);
}
}  // namespace internal

namespace {

// "frozenset({'x', 'y'})" (mesh order; Python's order depends on hashing).
std::string FrozenSet(const std::vector<std::string>& names) {
  if (names.empty()) return "frozenset()";
  std::vector<std::string> quoted;
  for (const auto& n : names) quoted.push_back(PyRepr(n));
  return fmt::format("frozenset({{{}}})", fmt::join(quoted, ", "));
}

std::string MeshText(const Mesh& mesh) {
  return fmt::format("The mesh given has shape {} with corresponding axis names {}.", PyTuple(mesh.shape()),
                     PyTuple(mesh.axis_names()));
}

// Mesh axes named by a spec.
std::vector<std::string> SpecAxes(const PartitionSpec& spec) { return spec.FlatAxes(); }

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Bits of `names` over the axes of `mesh`.
uint64_t MaskOf(const Mesh& mesh, const std::vector<std::string>& names) {
  uint64_t mask = 0;
  for (const auto& n : names) mask |= uint64_t{1} << mesh.AxisIndex(n);
  return mask;
}

std::vector<std::string> NamesOf(const Mesh& mesh, uint64_t mask) {
  std::vector<std::string> out;
  for (int i = 0; i < mesh.rank(); ++i)
    if (mask & (uint64_t{1} << i)) out.push_back(mesh.axis_names()[i]);
  return out;
}

std::string DeviceText(const Mesh& mesh, int64_t position) {
  std::vector<int64_t> coords = mesh.CoordsOfPosition(position);
  std::vector<std::string> parts;
  for (int i = 0; i < mesh.rank(); ++i) parts.push_back(fmt::format("{}={}", mesh.axis_names()[i], coords[i]));
  return fmt::format("device {} ({})", mesh.DeviceAt(position), fmt::join(parts, ", "));
}

// The first element where two equally shaped arrays differ, for messages.
std::string FirstDifference(const Array& a, const Array& b) {
  std::vector<double> x = a.ToDoubles(), y = b.ToDoubles();
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(x[i] == y[i]) && !(x[i] != x[i] && y[i] != y[i])) {
      return fmt::format("first at flat element {}: {} vs {}", i, x[i], y[i]);
    }
  }
  return "in their bits";
}

bool SameBlock(const Array& a, const Array& b) {
  return a.SharesBufferWith(b) || a.is_abstract() || b.is_abstract() || a.BitwiseEquals(b);
}

Array NewArray(DType dtype, std::vector<int64_t> shape, bool abstract) {
  return ArrayAccess::Allocate(dtype, std::move(shape), internal::CurrentDeviceMemory(), false, abstract);
}

}  // namespace

struct ShardMapped::State {
  ShardFunction f;
  Mesh mesh;
  Mesh instance_mesh;
  std::vector<InSpec> in_specs;
  std::vector<PartitionSpec> out_specs;
  ShardMapOptions options;
  std::vector<std::string> manual_axes;   // mesh order
  std::vector<int64_t> full_of_instance;  // instance position -> mesh position (auto coords 0)
  std::vector<int64_t> instance_of_full;  // mesh position -> instance position
  std::shared_ptr<Runtime> own_runtime;
  ShardMapCallStats stats;
};

struct ShardMapped::Outputs {
  std::vector<std::vector<Array>> blocks;  // [instance position][output]
  std::vector<std::vector<int64_t>> global_shapes;
};

const Mesh& ShardMapped::mesh() const { return state_->mesh; }
const Mesh& ShardMapped::instance_mesh() const { return state_->instance_mesh; }
const std::vector<std::string>& ShardMapped::manual_axes() const { return state_->manual_axes; }
const ShardMapCallStats& ShardMapped::last_call_stats() const { return state_->stats; }

Runtime& ShardMapped::runtime() const {
  State& s = *state_;
  if (s.options.runtime != nullptr) return *s.options.runtime;
  if (s.own_runtime == nullptr) s.own_runtime = std::make_shared<Runtime>(s.instance_mesh, s.options.runtime_options);
  return *s.own_runtime;
}

ShardMapped ShardMap(ShardFunction f, Mesh mesh, std::vector<InSpec> in_specs, std::vector<PartitionSpec> out_specs,
                     ShardMapOptions options) {
  if (!f) ThrowKind(ErrorCode::kInvalidArgument, "TypeError", "shard_map requires a callable for its first argument");
  if (mesh.empty()) {
    ThrowKind(ErrorCode::kInvalidArgument, "ValueError", "shard_map requires a non-empty mesh. Got {}",
              mesh.ToString());
  }
  // axis_names: a subset of the mesh's axes; empty means all.
  std::vector<std::string> manual;
  for (const auto& name : options.axis_names) {
    if (!mesh.HasAxis(name)) {
      ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
                "jax.shard_map requires axis_names={} to be a subset of mesh.axis_names={}",
                FrozenSet(options.axis_names), FrozenSet(mesh.axis_names()));
    }
  }
  for (const auto& name : mesh.axis_names())
    if (options.axis_names.empty() || Contains(options.axis_names, name)) manual.push_back(name);

  // Specs may name manual axes only (JAX's _check_specs), then no axis twice (NamedSharding's DuplicateSpecError).
  auto check_specs = [&](std::string_view prefix, const std::vector<PartitionSpec>& specs,
                         const std::vector<bool>& skip) {
    std::vector<std::string> msgs;
    for (size_t k = 0; k < specs.size(); ++k) {
      if (skip[k]) continue;
      for (const auto& name : SpecAxes(specs[k]))
        if (!Contains(manual, name)) msgs.push_back(fmt::format("  {}_specs[{}] refers to {}", prefix, k, PyRepr(name)));
    }
    if (!msgs.empty()) {
      ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
                "shard_map {}_specs argument must refer to an axis marked as manual ({}), but:\n\n{}\n\nCheck the "
                "{}_specs values passed to shard_map.",
                prefix, FrozenSet(manual), fmt::join(msgs, "\n\n"), prefix);
    }
    for (size_t k = 0; k < specs.size(); ++k) {
      if (skip[k]) continue;
      for (const SpecProblem& p : CheckSpec(specs[k], mesh)) {
        if (p.reason == SpecProblemReason::kDuplicateAxis) throw SpecError({p});
      }
    }
  };
  std::vector<PartitionSpec> in_plain;
  std::vector<bool> in_skip;
  for (const InSpec& s : in_specs) {
    in_plain.push_back(s.spec());
    in_skip.push_back(s.is_pass_through());
  }
  check_specs("in", in_plain, in_skip);
  check_specs("out", out_specs, std::vector<bool>(out_specs.size(), false));

  auto state = std::make_shared<ShardMapped::State>();
  state->f = std::move(f);
  state->mesh = mesh;
  state->in_specs = std::move(in_specs);
  state->out_specs = std::move(out_specs);
  state->options = std::move(options);
  state->manual_axes = manual;
  if (static_cast<int>(manual.size()) == mesh.rank()) {
    state->instance_mesh = mesh;
    state->full_of_instance.resize(mesh.size());
    state->instance_of_full.resize(mesh.size());
    for (int64_t p = 0; p < mesh.size(); ++p) state->full_of_instance[p] = state->instance_of_full[p] = p;
  } else {
    // Partial auto: the manual axes at auto index 0.
    std::vector<int> manual_dims;
    std::vector<int64_t> shape;
    for (const auto& name : manual) {
      manual_dims.push_back(mesh.AxisIndex(name));
      shape.push_back(mesh.AxisSize(name));
    }
    int64_t count = 1;
    for (int64_t s : shape) count *= s;
    std::vector<int> ids(count);
    state->full_of_instance.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      std::vector<int64_t> full(mesh.rank(), 0);
      int64_t rest = i;
      for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
        full[manual_dims[k]] = rest % shape[k];
        rest /= shape[k];
      }
      state->full_of_instance[i] = mesh.PositionOf(full);
      ids[i] = mesh.DeviceAt(state->full_of_instance[i]);
    }
    state->instance_mesh = Mesh(DeviceArray(shape, ids), manual, mesh.shared_topology());
    state->instance_of_full.resize(mesh.size());
    for (int64_t p = 0; p < mesh.size(); ++p) {
      std::vector<int64_t> coords = mesh.CoordsOfPosition(p), sub;
      for (int dim : manual_dims) sub.push_back(coords[dim]);
      state->instance_of_full[p] = state->instance_mesh.PositionOf(sub);
    }
  }
  if (state->options.runtime != nullptr && !(state->options.runtime->mesh() == state->instance_mesh)) {
    Throw(ErrorCode::kInvalidArgument,
          "ShardMapOptions::runtime runs on {} but this shard_map runs on {} (the mesh, or its manual axes for "
          "partial auto)",
          state->options.runtime->mesh().ToString(), state->instance_mesh.ToString());
  }
  ShardMapped out;
  out.state_ = std::move(state);
  return out;
}

ShardMapped::Outputs ShardMapped::Run(std::vector<ShardMapArg>& args) const {
  State& s = *state_;
  const Mesh& mesh = s.mesh;
  const Mesh& imesh = s.instance_mesh;
  const std::string& name = s.options.name;
  const size_t num_args = args.size();
  if (s.in_specs.size() != num_args) {
    ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
              "pytree structure error: different lengths of tuple at key path\n    shard_map in_specs\nAt that key "
              "path, the prefix pytree shard_map in_specs has a subtree of type tuple of length {}, but the full "
              "pytree has a subtree of the same type but of length {}.",
              s.in_specs.size(), num_args);
  }
  // Rank, then divisibility (JAX's _check_specs_vs_args), over every argument.
  {
    std::vector<std::string> msgs;
    bool scalar = false;
    for (size_t k = 0; k < num_args; ++k) {
      const InSpec& spec = s.in_specs[k];
      if (spec.is_pass_through()) continue;
      const int rank = static_cast<int>(args[k].shape().size());
      if (spec.spec().size() > rank) {
        msgs.push_back(fmt::format("* in_specs[{}] is {} which has length {}, but the passed args[{}] has shape {}, "
                                   "which has rank {} (and {} < {})",
                                   k, spec.ToString(), spec.spec().size(), k, args[k].ShapeString(), rank, rank,
                                   spec.spec().size()));
        scalar = scalar || rank == 0;
      }
    }
    if (!msgs.empty()) {
      if (msgs.size() == 1) msgs[0] = msgs[0].substr(2);
      std::string msg = fmt::format(
          "shard_map applied to the function '{}' was given an in_specs entry which is too long to be compatible "
          "with the corresponding input value from the function:\n\n{}\n\nEntries in in_specs must be of length no "
          "greater than the number of axes in the corresponding input value.\n\nEither revise the spec to be "
          "shorter, or modify '{}' so that its inputs have sufficient rank.",
          name, fmt::join(msgs, "\n\n"), name);
      if (scalar) {
        msg += "\n\nFor scalar values (rank 0), consider using an in_specs entry of `P()`, where `P = "
               "jax.sharding.PartitionSpec`.";
      }
      throw Error(ErrorCode::kInvalidArgument, msg, "ValueError");
    }
    for (size_t k = 0; k < num_args; ++k) {
      const InSpec& spec = s.in_specs[k];
      if (spec.is_pass_through()) continue;
      for (int d = 0; d < spec.spec().size(); ++d) {
        const PartitionSpec::Entry& e = spec.spec()[d];
        if (!e.has_axes()) continue;
        const int64_t sz = mesh.AxesSize(e.axes());
        const int64_t dim = args[k].shape()[d];
        if (dim % sz == 0) continue;
        std::string axis = e.axes().size() > 1 ? fmt::format("axes {}", PyTuple(e.axes()))
                                               : fmt::format("axis {}", PyRepr(e.axes()[0]));
        msgs.push_back(fmt::format("* the passed args[{}] of shape {} corresponds to in_specs[{}] of value {}, which "
                                   "maps array axis {} (of size {}) to mesh {} (of {}size {}), but {} does not "
                                   "evenly divide {}",
                                   k, args[k].ShapeString(), k, spec.ToString(), d, dim, axis,
                                   e.axes().size() > 1 ? "total " : "", sz, sz, dim));
      }
    }
    if (!msgs.empty()) {
      if (msgs.size() == 1) msgs[0] = msgs[0].substr(2);
      ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
                "shard_map applied to the function '{}' was given argument arrays with axis sizes that are not evenly "
                "divisible by the corresponding mesh axis sizes:\n\n{}\n\n{}\n\nArray arguments' axis sizes must be "
                "evenly divisible by the mesh axis or axes indicated by the corresponding elements of the argument's "
                "in_specs entry. Consider checking that in_specs are correct, and if so consider changing the mesh "
                "axis sizes or else padding the input and adapting '{}' appropriately.",
                name, MeshText(mesh), fmt::join(msgs, "\n\n"), name);
    }
  }

  // Per argument, the block of every instance (host arrays shared by replicas) and its varying axes.
  const int64_t n = imesh.size();
  s.stats = ShardMapCallStats{};
  s.stats.instances = n;
  s.stats.input_reshards.resize(num_args);
  std::vector<std::vector<Array>> blocks(num_args, std::vector<Array>(n));
  std::vector<uint64_t> masks(num_args, 0);
  for (size_t k = 0; k < num_args; ++k) {
    const InSpec& spec = s.in_specs[k];
    ShardMapArg& arg = args[k];
    if (spec.is_pass_through()) {
      Array whole = arg.is_sharded() ? arg.sharded().Gather() : arg.array();
      for (int64_t i = 0; i < n; ++i) blocks[k][i] = whole;
      continue;
    }
    masks[k] = MaskOf(imesh, SpecAxes(spec.spec()));
    if (arg.is_sharded()) {
      NamedSharding want(mesh, spec.spec());
      ShardedArray x = Reshard(arg.sharded(), want, &s.stats.input_reshards[k]);
      for (int64_t i = 0; i < n; ++i) blocks[k][i] = x.shard(s.full_of_instance[i]);
    } else {
      if (!arg.array().valid()) Throw(ErrorCode::kInvalidArgument, "args[{}] is an empty Array handle", k);
      ShardedArray x = ShardedArray::DevicePut(arg.array(), NamedSharding(imesh, spec.spec()));
      for (int64_t i = 0; i < n; ++i) blocks[k][i] = x.shard(i);
    }
  }

  Outputs out;
  out.blocks.assign(n, {});
  runtime().Run([&](DeviceContext& d) {
    const int64_t i = d.position();
    std::vector<Array> held(num_args);
    for (size_t k = 0; k < num_args; ++k) held[k] = d.Hold(blocks[k][i]).WithVaryingAxes(masks[k]);
    out.blocks[i] = s.f(d, std::span<const Array>(held));
  });
  blocks.clear();

  // Output structure, shapes and dtypes.
  const size_t num_out = s.out_specs.size();
  for (int64_t i = 0; i < n; ++i) {
    if (out.blocks[i].size() != num_out) {
      ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
                "pytree structure error: different lengths of tuple at key path\n    shard_map out_specs\nAt that "
                "key path, the prefix pytree shard_map out_specs has a subtree of type tuple of length {}, but the "
                "full pytree has a subtree of the same type but of length {}.",
                num_out, out.blocks[i].size());
    }
    for (size_t k = 0; k < num_out; ++k) {
      const Array& a = out.blocks[i][k];
      if (!a.valid()) Throw(ErrorCode::kInvalidArgument, "{} returned an empty Array handle as output {} on {}", name, k,
                            DeviceText(imesh, i));
      const Array& first = out.blocks[0][k];
      if (a.dtype() != first.dtype() || a.shape() != first.shape()) {
        Throw(ErrorCode::kInvalidArgument,
              "{} returned output {} as {} on {} but as {} on {}: every device must return the same shapes and dtypes",
              name, k, first.ShapeString(), DeviceText(imesh, 0), a.ShapeString(), DeviceText(imesh, i));
      }
    }
  }
  {
    std::vector<std::string> msgs;
    bool scalar = false;
    for (size_t k = 0; k < num_out; ++k) {
      const Array& a = out.blocks[0][k];
      if (s.out_specs[k].size() > a.rank()) {
        msgs.push_back(fmt::format("* out_specs[{}] is {} which has length {}, but {}(*args)[{}] has shape {}, which "
                                   "has rank {} (and {} < {})",
                                   k, s.out_specs[k].ToString(), s.out_specs[k].size(), name, k, a.ShapeString(),
                                   a.rank(), a.rank(), s.out_specs[k].size()));
        scalar = scalar || a.rank() == 0;
      }
    }
    if (!msgs.empty()) {
      if (msgs.size() == 1) msgs[0] = msgs[0].substr(2);
      std::string msg = fmt::format(
          "shard_map applied to the function '{}' was given an out_specs entry which is too long to be compatible "
          "with the corresponding output value from the function:\n\n{}\n\nEntries in out_specs must be of length "
          "no greater than the number of axes in the corresponding output value.\n\nEither revise the spec to be "
          "shorter, or modify '{}' so that its outputs have sufficient rank.",
          name, fmt::join(msgs, "\n\n"), name);
      if (scalar) {
        msg += "\n\nFor scalar values (rank 0), consider using an out_specs entry of `P()`, where `P = "
               "jax.sharding.PartitionSpec`. In particular, for rank 0 outputs which are not constant over the mesh, "
               "add at least one (singleton) axis to them so that they can be concatenated using out_specs.";
      }
      throw Error(ErrorCode::kInvalidArgument, msg, "ValueError");
    }
  }

  // Replication check.
  if (s.options.check_vma) {
    std::vector<std::string> static_msgs;
    std::vector<std::string> evidence;
    for (size_t k = 0; k < num_out; ++k) {
      const PartitionSpec& spec = s.out_specs[k];
      const std::vector<std::string> named = SpecAxes(spec);
      std::vector<std::string> omitted_manual;
      for (const auto& a : imesh.axis_names())
        if (!Contains(named, a)) omitted_manual.push_back(a);
      uint64_t varying = 0;
      for (int64_t i = 0; i < n; ++i) varying |= out.blocks[i][k].varying_axes();
      const uint64_t bad = varying & MaskOf(imesh, omitted_manual);
      // Dynamic: the first device whose block differs from the one at index 0 of an omitted axis.
      std::optional<std::tuple<std::string, int64_t, int64_t>> differ;
      for (int64_t i = 0; i < n && !differ; ++i) {
        std::vector<int64_t> coords = imesh.CoordsOfPosition(i);
        for (const auto& a : omitted_manual) {
          const int dim = imesh.AxisIndex(a);
          if (coords[dim] == 0) continue;
          std::vector<int64_t> base = coords;
          base[dim] = 0;
          const int64_t j = imesh.PositionOf(base);
          if (!SameBlock(out.blocks[j][k], out.blocks[i][k])) {
            differ = std::make_tuple(a, j, i);
            break;
          }
        }
      }
      std::string differ_text;
      if (differ) {
        const auto& [axis, j, i] = *differ;
        differ_text = fmt::format("the blocks of {} and {} differ along mesh axis {} ({})", DeviceText(imesh, j),
                                  DeviceText(imesh, i), PyRepr(axis),
                                  FirstDifference(out.blocks[j][k], out.blocks[i][k]));
      }
      if (bad != 0) {
        std::vector<std::string> unmentioned;  // over the whole mesh, as JAX counts them
        for (const auto& a : mesh.axis_names())
          if (!Contains(named, a)) unmentioned.push_back(a);
        std::vector<std::string> need, got = NamesOf(imesh, varying), diff;
        for (const auto& a : mesh.axis_names()) {
          if (Contains(named, a)) need.push_back(a);
          if (Contains(unmentioned, a) && Contains(got, a)) diff.push_back(a);
        }
        if (unmentioned.size() > 1) {
          static_msgs.push_back(fmt::format(
              "* out_specs[{}] is {} which implies that the corresponding output value is only varying across mesh "
              "axes {{{}}} and not {{{}}}, but it was inferred to be possibly varying over {{{}}}",
              k, spec.ToString(), fmt::join(need, ","), fmt::join(diff, ","), fmt::join(got, ",")));
        } else {
          static_msgs.push_back(fmt::format(
              "* out_specs[{}] is {} which implies that the corresponding output value is replicated across mesh "
              "axis {}, but could not infer replication over any axes",
              k, spec.ToString(), PyRepr(unmentioned[0])));
        }
        evidence.push_back(differ ? fmt::format("out_specs[{}]: {}.", k, differ_text)
                                  : fmt::format("out_specs[{}]: the blocks happen to be equal along {} in this call.",
                                                k, fmt::join(NamesOf(imesh, bad), ", ")));
      } else if (differ && static_msgs.empty()) {
        ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
                  "shard_map applied to the function '{}' returned for out_specs[{}] = {} a value that is not "
                  "replicated across mesh axis {} although the out_specs entry requires it and it was inferred to "
                  "be: {}. (A value computed from the device's position rather than through collectives escapes "
                  "the static check; pass check_vma=false to keep the block at index 0 of the omitted axes.)",
                  name, k, spec.ToString(), PyRepr(std::get<0>(*differ)), differ_text);
      }
    }
    if (!static_msgs.empty()) {
      if (static_msgs.size() == 1) static_msgs[0] = static_msgs[0].substr(2);
      ThrowKind(ErrorCode::kInvalidArgument, "ValueError",
                "shard_map applied to the function '{}' was given out_specs which require replication which can't be "
                "statically inferred given the mesh:\n\n{}\n\n{}\n\nCheck if these output values are meant to be "
                "replicated over those mesh axes. If not, consider revising the corresponding out_specs entries. If "
                "so, consider disabling the check by passing the check_vma=False argument to `jax.shard_map`.\n\n"
                "spmdsim compared the blocks: {}",
                name, MeshText(mesh), fmt::join(static_msgs, "\n\n"), fmt::join(evidence, " "));
    }
  }

  // Global shapes.
  out.global_shapes.resize(num_out);
  for (size_t k = 0; k < num_out; ++k) {
    std::vector<int64_t> shape = out.blocks[0][k].shape();
    const PartitionSpec& spec = s.out_specs[k];
    for (int d = 0; d < spec.size(); ++d)
      if (spec[d].has_axes()) shape[d] *= imesh.AxesSize(spec[d].axes());
    out.global_shapes[k] = std::move(shape);
  }
  return out;
}

std::vector<Array> ShardMapped::operator()(std::vector<ShardMapArg> args) const {
  Outputs outs = Run(args);
  const Mesh& imesh = state_->instance_mesh;
  std::vector<Array> result;
  for (size_t k = 0; k < state_->out_specs.size(); ++k) {
    const std::vector<int64_t>& shape = outs.global_shapes[k];
    const Array& first = outs.blocks[0][k];
    ShardingLayout layout = NamedSharding(imesh, state_->out_specs[k]).Layout(shape);
    bool abstract = false;
    for (const auto& b : outs.blocks) abstract = abstract || b[k].is_abstract();
    Array global = NewArray(first.dtype(), shape, abstract);
    if (!abstract && global.size() > 0) {
      std::byte* dst = static_cast<std::byte*>(ArrayAccess::mutable_data(global));
      for (int64_t sid = 0; sid < layout.num_shards; ++sid) {
        const int64_t p = layout.positions_of_shard[sid][0];
        const Array& block = outs.blocks[p][k];
        if (block.size() == 0) continue;
        CopyBlockIn(static_cast<const std::byte*>(block.raw_data()), shape, layout.shards[p].index,
                    static_cast<size_t>(DTypeSize(block.dtype())), dst);
      }
    }
    result.push_back(std::move(global));
  }
  return result;
}

std::vector<ShardedArray> ShardMapped::CallSharded(std::vector<ShardMapArg> args) const {
  Outputs outs = Run(args);
  const State& s = *state_;
  std::vector<ShardedArray> result;
  for (size_t k = 0; k < s.out_specs.size(); ++k) {
    const std::vector<int64_t>& shape = outs.global_shapes[k];
    ShardingLayout ilayout = NamedSharding(s.instance_mesh, s.out_specs[k]).Layout(shape);
    std::vector<Array> shards(s.mesh.size());
    for (int64_t p = 0; p < s.mesh.size(); ++p) {
      int64_t i = s.instance_of_full[p];
      if (!s.options.check_vma) i = ilayout.positions_of_shard[ilayout.shards[i].shard_id][0];
      shards[p] = outs.blocks[i][k];
    }
    result.push_back(ShardedArray::FromShards(shape, outs.blocks[0][k].dtype(), NamedSharding(s.mesh, s.out_specs[k]),
                                              std::move(shards)));
  }
  return result;
}

}  // namespace spmdsim
