#include "shardmap/shard_map.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "common/error.h"
#include "common/strings.h"
#include "sim/array_builder.h"
#include "sim/multiprocess.h"

namespace spmdsim {

namespace internal {
void ThrowArityMismatch(size_t takes, size_t given) {
  ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError, "f() takes {} arrays but {} were given", takes, given);
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

// JAX writes these messages over several lines (paragraphs and list items separated by blank lines); spmdsim
// keeps JAX's words on one line, as the CLI prints one line per error: items joined by "; ", paragraphs by a
// space, and JAX's "* " bullets dropped.
std::string JoinItems(const std::vector<std::string>& items) { return fmt::format("{}", fmt::join(items, "; ")); }

// Specs name manual axes only (JAX's _check_specs), then no axis twice (NamedSharding's DuplicateSpecError).
// Entries with skip[k] (pass-through inputs) are not specs.
void CheckSpecAxes(std::string_view prefix, const std::vector<PartitionSpec>& specs, const std::vector<bool>& skip,
                   const std::vector<std::string>& manual, const Mesh& mesh) {
  std::vector<std::string> msgs;
  for (size_t k = 0; k < specs.size(); ++k) {
    if (skip[k]) continue;
    for (const auto& name : SpecAxes(specs[k]))
      if (!Contains(manual, name)) msgs.push_back(fmt::format("{}_specs[{}] refers to {}", prefix, k, PyRepr(name)));
  }
  if (!msgs.empty()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "shard_map {}_specs argument must refer to an axis marked as manual ({}), but: {}. Check the {}_specs "
              "values passed to shard_map.",
              prefix, FrozenSet(manual), JoinItems(msgs), prefix);
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    if (skip[k]) continue;
    for (const SpecProblem& p : CheckSpec(specs[k], mesh)) {
      if (p.reason == SpecProblemReason::kDuplicateAxis) throw SpecError({p});
    }
  }
}

// JAX's pytree error when the number of specs differs from the number of values.
[[noreturn]] void ThrowSpecCount(std::string_view prefix, size_t specs, size_t values) {
  ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
            "pytree structure error: different lengths of tuple at key path shard_map {}_specs. At that key path, "
            "the prefix pytree shard_map {}_specs has a subtree of type tuple of length {}, but the full pytree has "
            "a subtree of the same type but of length {}.",
            prefix, prefix, specs, values);
}

// JAX's _spec_rank_error: `items` name each spec longer than its value's rank; `scalar` when one value is rank 0.
[[noreturn]] void ThrowSpecRank(std::string_view prefix, const std::string& name, const std::vector<std::string>& items,
                                bool scalar) {
  std::string msg = fmt::format(
      "shard_map applied to the function '{}' was given an {}_specs entry which is too long to be compatible with "
      "the corresponding {}put value from the function: {}. Entries in {}_specs must be of length no greater than "
      "the number of axes in the corresponding {}put value. Either revise the spec to be shorter, or modify '{}' so "
      "that its {}puts have sufficient rank.",
      name, prefix, prefix, JoinItems(items), prefix, prefix, name, prefix);
  if (scalar) {
    msg += fmt::format(" For scalar values (rank 0), consider using an {}_specs entry of `P()`, where `P = "
                       "jax.sharding.PartitionSpec`.",
                       prefix);
    if (prefix == "out") {
      msg += " In particular, for rank 0 outputs which are not constant over the mesh, add at least one (singleton) "
             "axis to them so that they can be concatenated using out_specs.";
    }
  }
  throw Error(ErrorCode::kInvalidArgument, msg, ErrorKind::kValueError);
}

// Arguments against in_specs (JAX's _check_specs_vs_args): the count, then every rank, then every divisibility.
void CheckArgs(const std::vector<InSpec>& in_specs, const std::vector<ShardMapArg>& args, const Mesh& mesh,
               const std::string& name) {
  if (in_specs.size() != args.size()) ThrowSpecCount("in", in_specs.size(), args.size());
  std::vector<std::string> msgs;
  bool scalar = false;
  for (size_t k = 0; k < args.size(); ++k) {
    const InSpec& spec = in_specs[k];
    if (spec.is_pass_through()) continue;
    const int rank = static_cast<int>(args[k].shape().size());
    if (spec.spec().size() > rank) {
      msgs.push_back(fmt::format("in_specs[{}] is {} which has length {}, but the passed args[{}] has shape {}, "
                                 "which has rank {} (and {} < {})",
                                 k, spec.ToString(), spec.spec().size(), k, args[k].ShapeString(), rank, rank,
                                 spec.spec().size()));
      scalar = scalar || rank == 0;
    }
  }
  if (!msgs.empty()) ThrowSpecRank("in", name, msgs, scalar);
  for (size_t k = 0; k < args.size(); ++k) {
    const InSpec& spec = in_specs[k];
    if (spec.is_pass_through()) continue;
    for (int d = 0; d < spec.spec().size(); ++d) {
      const PartitionSpec::Entry& e = spec.spec()[d];
      if (!e.has_axes()) continue;
      const int64_t sz = mesh.AxesSize(e.axes());
      const int64_t dim = args[k].shape()[d];
      if (dim % sz == 0) continue;
      std::string axis = e.axes().size() > 1 ? fmt::format("axes {}", PyTuple(e.axes()))
                                             : fmt::format("axis {}", PyRepr(e.axes()[0]));
      msgs.push_back(fmt::format("the passed args[{}] of shape {} corresponds to in_specs[{}] of value {}, which maps "
                                 "array axis {} (of size {}) to mesh {} (of {}size {}), but {} does not evenly "
                                 "divide {}",
                                 k, args[k].ShapeString(), k, spec.ToString(), d, dim, axis,
                                 e.axes().size() > 1 ? "total " : "", sz, sz, dim));
    }
  }
  if (!msgs.empty()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "shard_map applied to the function '{}' was given argument arrays with axis sizes that are not evenly "
              "divisible by the corresponding mesh axis sizes: {} {}. Array arguments' axis sizes must be evenly "
              "divisible by the mesh axis or axes indicated by the corresponding elements of the argument's in_specs "
              "entry. Consider checking that in_specs are correct, and if so consider changing the mesh axis sizes or "
              "else padding the input and adapting '{}' appropriately.",
              name, MeshText(mesh), JoinItems(msgs), name);
  }
}

using Blocks = std::vector<std::vector<Array>>;  // [instance position][output]

// Every instance returned one valid Array per out_spec, all with the same shapes and dtypes, and no out_spec is
// longer than its output's rank (JAX's pytree and _spec_rank_error checks).
void CheckOutputs(const Blocks& blocks, const std::vector<PartitionSpec>& out_specs, const Mesh& imesh,
                  const std::string& name) {
  const size_t num_out = out_specs.size();
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].size() != num_out) ThrowSpecCount("out", num_out, blocks[i].size());
    for (size_t k = 0; k < num_out; ++k) {
      const Array& a = blocks[i][k];
      if (!a.valid()) {
        Throw(ErrorCode::kInvalidArgument, "{} returned an empty Array handle as output {} on {}", name, k,
              DeviceText(imesh, static_cast<int64_t>(i)));
      }
      const Array& first = blocks[0][k];
      if (a.dtype() != first.dtype() || a.shape() != first.shape()) {
        Throw(ErrorCode::kInvalidArgument,
              "{} returned output {} as {} on {} but as {} on {}: every device must return the same shapes and dtypes",
              name, k, first.ShapeString(), DeviceText(imesh, 0), a.ShapeString(),
              DeviceText(imesh, static_cast<int64_t>(i)));
      }
    }
  }
  std::vector<std::string> msgs;
  bool scalar = false;
  for (size_t k = 0; k < num_out; ++k) {
    const Array& a = blocks[0][k];
    if (out_specs[k].size() > a.rank()) {
      msgs.push_back(fmt::format("out_specs[{}] is {} which has length {}, but {}(*args)[{}] has shape {}, which has "
                                 "rank {} (and {} < {})",
                                 k, out_specs[k].ToString(), out_specs[k].size(), name, k, a.ShapeString(), a.rank(),
                                 a.rank(), out_specs[k].size()));
      scalar = scalar || a.rank() == 0;
    }
  }
  if (!msgs.empty()) ThrowSpecRank("out", name, msgs, scalar);
}

// Two devices whose blocks of one output differ along an axis its out_spec omits.
struct BlockDifference {
  std::string axis;
  int64_t base = 0;   // the device at index 0 of `axis`
  int64_t other = 0;  // the device whose block differs from base's
  std::string text;   // "the blocks of device 0 (x=0) and device 1 (x=1) differ along mesh axis 'x' (...)"
};

// The first device (in mesh order) whose block of output k differs from the block at index 0 of an omitted axis.
// Across ranks without shared outputs, `digests` ([instance][output], every rank's blocks) replaces the bytes.
using Digests = std::vector<std::vector<uint64_t>>;

std::optional<BlockDifference> FindDifference(const Blocks& blocks, size_t k, const Mesh& imesh,
                                              const std::vector<std::string>& omitted, const Digests* digests) {
  for (int64_t i = 0; i < imesh.size(); ++i) {
    const std::vector<int64_t> coords = imesh.CoordsOfPosition(i);
    for (const auto& a : omitted) {
      const int dim = imesh.AxisIndex(a);
      if (coords[dim] == 0) continue;
      std::vector<int64_t> base = coords;
      base[dim] = 0;
      const int64_t j = imesh.PositionOf(base);
      if (digests != nullptr) {
        if ((*digests)[j][k] == (*digests)[i][k]) continue;
        return BlockDifference{a, j, i,
                               fmt::format("the blocks of {} and {} differ along mesh axis {} (compared by digest: "
                                           "the ranks holding them keep their blocks)",
                                           DeviceText(imesh, j), DeviceText(imesh, i), PyRepr(a))};
      }
      if (SameBlock(blocks[j][k], blocks[i][k])) continue;
      return BlockDifference{a, j, i,
                             fmt::format("the blocks of {} and {} differ along mesh axis {} ({})", DeviceText(imesh, j),
                                         DeviceText(imesh, i), PyRepr(a), FirstDifference(blocks[j][k], blocks[i][k]))};
    }
  }
  return std::nullopt;
}

// JAX's _inout_vma_error item for out_specs[k] = spec, whose value may vary over `varying` (instance mesh bits).
std::string StaticReplicationItem(size_t k, const PartitionSpec& spec, const Mesh& mesh, const Mesh& imesh,
                                  uint64_t varying) {
  const std::vector<std::string> named = SpecAxes(spec);
  std::vector<std::string> unmentioned;  // over the whole mesh, as JAX counts them
  for (const auto& a : mesh.axis_names())
    if (!Contains(named, a)) unmentioned.push_back(a);
  if (unmentioned.size() == 1) {
    return fmt::format("out_specs[{}] is {} which implies that the corresponding output value is replicated across "
                       "mesh axis {}, but could not infer replication over any axes",
                       k, spec.ToString(), PyRepr(unmentioned[0]));
  }
  std::vector<std::string> need, got = NamesOf(imesh, varying), diff;
  for (const auto& a : mesh.axis_names()) {
    if (Contains(named, a)) need.push_back(a);
    if (Contains(unmentioned, a) && Contains(got, a)) diff.push_back(a);
  }
  return fmt::format("out_specs[{}] is {} which implies that the corresponding output value is only varying across "
                     "mesh axes {{{}}} and not {{{}}}, but it was inferred to be possibly varying over {{{}}}",
                     k, spec.ToString(), fmt::join(need, ","), fmt::join(diff, ","), fmt::join(got, ","));
}

// check_vma: the static rule (JAX's), with the blocks compared as evidence, then the dynamic comparison of the
// blocks along every omitted axis (docs/shardmap.md).
void CheckReplication(const Blocks& blocks, const std::vector<PartitionSpec>& out_specs, const Mesh& mesh,
                      const Mesh& imesh, const std::string& name, const Digests* digests) {
  std::vector<std::string> static_msgs;
  std::vector<std::string> evidence;
  for (size_t k = 0; k < out_specs.size(); ++k) {
    const PartitionSpec& spec = out_specs[k];
    const std::vector<std::string> named = SpecAxes(spec);
    std::vector<std::string> omitted;
    for (const auto& a : imesh.axis_names())
      if (!Contains(named, a)) omitted.push_back(a);
    uint64_t varying = 0;
    for (const auto& instance : blocks) varying |= instance[k].varying_axes();
    const uint64_t bad = varying & MaskOf(imesh, omitted);
    const std::optional<BlockDifference> differ = FindDifference(blocks, k, imesh, omitted, digests);
    if (bad != 0) {
      static_msgs.push_back(StaticReplicationItem(k, spec, mesh, imesh, varying));
      evidence.push_back(differ ? fmt::format("out_specs[{}]: {}.", k, differ->text)
                                : fmt::format("out_specs[{}]: the blocks happen to be equal along {} in this call.", k,
                                              fmt::join(NamesOf(imesh, bad), ", ")));
    } else if (differ && static_msgs.empty()) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "shard_map applied to the function '{}' returned for out_specs[{}] = {} a value that is not "
                "replicated across mesh axis {} although the out_specs entry requires it and it was inferred to "
                "be: {}. (A value computed from the device's position rather than through collectives escapes "
                "the static check; pass check_vma=false to keep the block at index 0 of the omitted axes.)",
                name, k, spec.ToString(), PyRepr(differ->axis), differ->text);
    }
  }
  if (!static_msgs.empty()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "shard_map applied to the function '{}' was given out_specs which require replication which can't be "
              "statically inferred given the mesh: {} {}. Check if these output values are meant to be replicated "
              "over those mesh axes. If not, consider revising the corresponding out_specs entries. If so, consider "
              "disabling the check by passing the check_vma=False argument to `jax.shard_map`. spmdsim compared the "
              "blocks: {}",
              name, MeshText(mesh), JoinItems(static_msgs), fmt::join(evidence, " "));
  }
}

// FNV-1a over an array's dtype, shape and bytes (abstract arrays: dtype and shape).
uint64_t Digest(const Array& a) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* data, size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  };
  const int64_t dtype = static_cast<int64_t>(a.dtype());
  mix(&dtype, sizeof(dtype));
  for (int64_t d : a.shape()) mix(&d, sizeof(d));
  if (!a.is_abstract() && a.nbytes() > 0) mix(a.raw_data(), static_cast<size_t>(a.nbytes()));
  return h;
}

// Across ranks whose outputs stay with their owners: every block's digest, from the rank that holds it (every
// rank must call this), so that every rank reaches the same replication verdict.
Digests DigestsOfEveryRank(const Blocks& blocks, const Runtime& runtime) {
  const size_t num_out = blocks.empty() ? 0 : blocks[0].size();
  std::string mine;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (!runtime.is_local(static_cast<int64_t>(i))) continue;
    for (const Array& a : blocks[i]) {
      const uint64_t h = Digest(a);
      mine.append(reinterpret_cast<const char*>(&h), sizeof(h));
    }
  }
  const std::vector<std::string> all = runtime.options().process_group->AllGatherBytes(mine);
  Digests digests(blocks.size(), std::vector<uint64_t>(num_out));
  std::vector<size_t> at(all.size(), 0);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int r = runtime.owner(static_cast<int64_t>(i));
    for (size_t k = 0; k < num_out; ++k) {
      SPMDSIM_CHECK(at[r] + sizeof(uint64_t) <= all[r].size(), "rank {} sent too few digests", r);
      std::memcpy(&digests[i][k], all[r].data() + at[r], sizeof(uint64_t));
      at[r] += sizeof(uint64_t);
    }
  }
  return digests;
}

// The global shape of every output: dimension d of the blocks times the size of the axes out_specs[k][d] names.
std::vector<std::vector<int64_t>> GlobalShapes(const Blocks& blocks, const std::vector<PartitionSpec>& out_specs,
                                               const Mesh& imesh) {
  std::vector<std::vector<int64_t>> shapes(out_specs.size());
  for (size_t k = 0; k < out_specs.size(); ++k) {
    std::vector<int64_t> shape = blocks[0][k].shape();
    const PartitionSpec& spec = out_specs[k];
    for (int d = 0; d < spec.size(); ++d)
      if (spec[d].has_axes()) shape[d] *= imesh.AxesSize(spec[d].axes());
    shapes[k] = std::move(shape);
  }
  return shapes;
}

// A spec's sharding over one mesh, made (and validated) once per ShardMap, and the layout of the last global shape
// it laid out: a call with the shapes of the previous one makes no layout (docs/shardmap.md, "Cost of a call").
class SpecSharding {
 public:
  SpecSharding(const Mesh& mesh, const PartitionSpec& spec)
      : sharding_(std::make_shared<const NamedSharding>(mesh, spec)) {}
  const std::shared_ptr<const NamedSharding>& sharding() const { return sharding_; }
  // The layout of `shape` (checked against the sharding when new: SpecError).
  const std::shared_ptr<const ShardingLayout>& Layout(std::span<const int64_t> shape) {
    if (layout_ == nullptr || !std::ranges::equal(layout_->global_shape, shape)) {
      layout_ = std::make_shared<const ShardingLayout>(sharding_->Layout(shape));
    }
    return layout_;
  }

 private:
  std::shared_ptr<const NamedSharding> sharding_;
  std::shared_ptr<const ShardingLayout> layout_;
};

// Each spec's SpecSharding over the mesh and over the instance mesh (the same object when they are one mesh);
// none for a pass-through argument.
struct SpecShardings {
  std::vector<std::shared_ptr<SpecSharding>> full, instance;
};

SpecShardings MakeShardings(const std::vector<PartitionSpec>& specs, const std::vector<bool>& skip, const Mesh& mesh,
                            const Mesh& imesh) {
  SpecShardings out;
  for (size_t k = 0; k < specs.size(); ++k) {
    if (skip[k]) {
      out.full.push_back(nullptr);
      out.instance.push_back(nullptr);
      continue;
    }
    out.full.push_back(std::make_shared<SpecSharding>(mesh, specs[k]));
    out.instance.push_back(imesh == mesh ? out.full.back() : std::make_shared<SpecSharding>(imesh, specs[k]));
  }
  return out;
}

// The mesh f runs on and how its positions map to the mesh's: the mesh itself, or for partial auto its manual
// axes at auto index 0.
struct Instances {
  Mesh mesh;
  std::vector<int64_t> full_of_instance;  // instance position -> mesh position (auto coords 0)
  std::vector<int64_t> instance_of_full;  // mesh position -> instance position
};
Instances PlaceInstances(const Mesh& mesh, const std::vector<std::string>& manual) {
  Instances state;
  if (static_cast<int>(manual.size()) == mesh.rank()) {
    state.mesh = mesh;
    state.full_of_instance.resize(mesh.size());
    state.instance_of_full.resize(mesh.size());
    for (int64_t p = 0; p < mesh.size(); ++p) state.full_of_instance[p] = state.instance_of_full[p] = p;
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
    state.full_of_instance.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      std::vector<int64_t> full(mesh.rank(), 0);
      int64_t rest = i;
      for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
        full[manual_dims[k]] = rest % shape[k];
        rest /= shape[k];
      }
      state.full_of_instance[i] = mesh.PositionOf(full);
      ids[i] = mesh.DeviceAt(state.full_of_instance[i]);
    }
    state.mesh = Mesh(DeviceArray(shape, ids), manual, mesh.shared_topology());
    state.instance_of_full.resize(mesh.size());
    for (int64_t p = 0; p < mesh.size(); ++p) {
      std::vector<int64_t> coords = mesh.CoordsOfPosition(p), sub;
      for (int dim : manual_dims) sub.push_back(coords[dim]);
      state.instance_of_full[p] = state.mesh.PositionOf(sub);
    }
  }
  return state;
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
  // Made once, when the ShardMap is: the specs' shardings (with their last layouts) and the axes each argument
  // varies over (its in_spec's).
  SpecShardings in_shardings, out_shardings;
  std::vector<uint64_t> in_masks;
};

// Per argument, the block of every instance (host arrays shared by replicas) and the axes it varies over.
struct ShardMapped::InputBlocks {
  std::vector<std::vector<Array>> blocks;  // [argument][instance position]
  std::vector<uint64_t> masks;             // [argument]
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
  if (!f)
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
              "shard_map requires a callable for its first argument");
  if (mesh.empty()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "shard_map requires a non-empty mesh. Got {}",
              mesh.ToString());
  }
  // axis_names: a subset of the mesh's axes; empty means all.
  std::vector<std::string> manual;
  for (const auto& name : options.axis_names) {
    if (!mesh.HasAxis(name)) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "jax.shard_map requires axis_names={} to be a subset of mesh.axis_names={}",
                FrozenSet(options.axis_names), FrozenSet(mesh.axis_names()));
    }
  }
  for (const auto& name : mesh.axis_names())
    if (options.axis_names.empty() || Contains(options.axis_names, name)) manual.push_back(name);

  std::vector<PartitionSpec> in_plain;
  std::vector<bool> in_skip;
  for (const InSpec& s : in_specs) {
    in_plain.push_back(s.spec());
    in_skip.push_back(s.is_pass_through());
  }
  CheckSpecAxes("in", in_plain, in_skip, manual, mesh);
  CheckSpecAxes("out", out_specs, std::vector<bool>(out_specs.size(), false), manual, mesh);

  auto state = std::make_shared<ShardMapped::State>();
  state->f = std::move(f);
  state->mesh = mesh;
  state->in_specs = std::move(in_specs);
  state->out_specs = std::move(out_specs);
  state->options = std::move(options);
  state->manual_axes = manual;
  Instances instances = PlaceInstances(mesh, manual);
  state->instance_mesh = std::move(instances.mesh);
  state->full_of_instance = std::move(instances.full_of_instance);
  state->instance_of_full = std::move(instances.instance_of_full);
  if (state->options.runtime != nullptr && !(state->options.runtime->mesh() == state->instance_mesh)) {
    Throw(ErrorCode::kInvalidArgument,
          "ShardMapOptions::runtime runs on {} but this shard_map runs on {} (the mesh, or its manual axes for "
          "partial auto)",
          state->options.runtime->mesh().ToString(), state->instance_mesh.ToString());
  }
  state->in_shardings = MakeShardings(in_plain, in_skip, state->mesh, state->instance_mesh);
  state->out_shardings = MakeShardings(state->out_specs, std::vector<bool>(state->out_specs.size(), false), state->mesh,
                                       state->instance_mesh);
  for (const InSpec& spec : state->in_specs) {
    state->in_masks.push_back(spec.is_pass_through() ? 0 : MaskOf(state->instance_mesh, SpecAxes(spec.spec())));
  }
  ShardMapped out;
  out.state_ = std::move(state);
  return out;
}

ShardMapped::Outputs ShardMapped::Run(std::vector<ShardMapArg>& args) const {
  State& s = *state_;
  CheckArgs(s.in_specs, args, s.mesh, s.options.name);
  InputBlocks inputs = SplitInputs(args);
  Outputs out;
  out.blocks = RunInstances(inputs);
  CheckOutputs(out.blocks, s.out_specs, s.instance_mesh, s.options.name);
  if (s.options.check_vma) {
    // Across ranks whose outputs stay with their owners, blocks on other ranks are compared by digest.
    const Runtime& rt = runtime();
    const bool by_digest = s.options.share_outputs != ShareData::kEveryRank && rt.options().process_group != nullptr &&
                           rt.options().process_group->size() > 1;
    const Digests digests = by_digest ? DigestsOfEveryRank(out.blocks, rt) : Digests{};
    CheckReplication(out.blocks, s.out_specs, s.mesh, s.instance_mesh, s.options.name,
                     by_digest ? &digests : nullptr);
  }
  out.global_shapes = GlobalShapes(out.blocks, s.out_specs, s.instance_mesh);
  return out;
}

ShardMapped::InputBlocks ShardMapped::SplitInputs(std::vector<ShardMapArg>& args) const {
  State& s = *state_;
  const Mesh& imesh = s.instance_mesh;
  const size_t num_args = args.size();
  const int64_t n = imesh.size();
  s.stats = ShardMapCallStats{};
  s.stats.instances = n;
  s.stats.input_reshards.resize(num_args);
  InputBlocks in;
  in.blocks.assign(num_args, std::vector<Array>(n));
  in.masks.assign(num_args, 0);
  for (size_t k = 0; k < num_args; ++k) {
    const InSpec& spec = s.in_specs[k];
    ShardMapArg& arg = args[k];
    if (spec.is_pass_through()) {
      Array whole = arg.is_sharded() ? arg.sharded().Gather() : arg.array();
      for (int64_t i = 0; i < n; ++i) in.blocks[k][i] = whole;
      continue;
    }
    in.masks[k] = s.in_masks[k];
    // CheckArgs has checked the shape against the spec: the layouts cannot fail here.
    if (arg.is_sharded()) {
      SpecSharding& want = *s.in_shardings.full[k];
      ShardedArray x = Reshard(arg.sharded(), want.sharding(), want.Layout(arg.shape()), &s.stats.input_reshards[k]);
      for (int64_t i = 0; i < n; ++i) in.blocks[k][i] = x.shard(s.full_of_instance[i]);
    } else {
      if (!arg.array().valid()) Throw(ErrorCode::kInvalidArgument, "args[{}] is an empty Array handle", k);
      SpecSharding& want = *s.in_shardings.instance[k];
      ShardedArray x = ShardedArray::DevicePut(arg.array(), want.sharding(), want.Layout(arg.shape()));
      for (int64_t i = 0; i < n; ++i) in.blocks[k][i] = x.shard(i);
    }
  }
  return in;
}

std::vector<std::vector<Array>> ShardMapped::RunInstances(InputBlocks& inputs) const {
  const State& s = *state_;
  const size_t num_args = inputs.blocks.size();
  std::vector<std::vector<Array>> blocks(s.instance_mesh.size());
  runtime().Run([&](DeviceContext& d) {
    const int64_t i = d.position();
    std::vector<Array> held(num_args);
    for (size_t k = 0; k < num_args; ++k) held[k] = d.Hold(inputs.blocks[k][i]).WithVaryingAxes(inputs.masks[k]);
    blocks[i] = s.f(d, std::span<const Array>(held));
  });
  ShareArrays(runtime(), blocks, s.options.share_outputs);  // several processes: the other ranks' blocks
  inputs = InputBlocks{};  // the host copies of the blocks are no longer needed
  return blocks;
}

std::vector<Array> ShardMapped::operator()(std::vector<ShardMapArg> args) const {
  Outputs outs = Run(args);
  std::vector<Array> result;
  for (size_t k = 0; k < state_->out_specs.size(); ++k) {
    const std::vector<int64_t>& shape = outs.global_shapes[k];
    const Array& first = outs.blocks[0][k];
    const ShardingLayout& layout = *state_->out_shardings.instance[k]->Layout(shape);
    bool abstract = false;
    for (const auto& b : outs.blocks) abstract = abstract || b[k].is_abstract();
    ArrayBuilder global(first.dtype(), shape, {.abstract = abstract});
    if (!abstract && global.size() > 0) {
      std::byte* dst = static_cast<std::byte*>(global.mutable_data());
      for (int64_t sid = 0; sid < layout.num_shards; ++sid) {
        const int64_t p = layout.positions_of_shard[sid][0];
        const Array& block = outs.blocks[p][k];
        if (block.size() == 0) continue;
        CopyBlockIn(static_cast<const std::byte*>(block.raw_data()), shape, layout.shards[p].index,
                    static_cast<size_t>(DTypeSize(block.dtype())), dst);
      }
    }
    result.push_back(std::move(global).Freeze());
  }
  return result;
}

std::vector<ShardedArray> ShardMapped::CallSharded(std::vector<ShardMapArg> args) const {
  Outputs outs = Run(args);
  State& s = *state_;
  std::vector<ShardedArray> result;
  for (size_t k = 0; k < s.out_specs.size(); ++k) {
    const std::vector<int64_t>& shape = outs.global_shapes[k];
    const ShardingLayout& ilayout = *s.out_shardings.instance[k]->Layout(shape);
    std::vector<Array> shards(s.mesh.size());
    for (int64_t p = 0; p < s.mesh.size(); ++p) {
      int64_t i = s.instance_of_full[p];
      if (!s.options.check_vma) i = ilayout.positions_of_shard[ilayout.shards[i].shard_id][0];
      shards[p] = outs.blocks[i][k];
    }
    SpecSharding& full = *s.out_shardings.full[k];
    result.push_back(ShardedArray::FromShards(outs.blocks[0][k].dtype(), full.sharding(), full.Layout(shape),
                                              std::move(shards)));
  }
  return result;
}

}  // namespace spmdsim
