// ShardMap: maps a per-device function over the blocks of its inputs on the virtual devices of a mesh (JAX:
// `jax.shard_map`, jax/_src/shard_map.py). docs/shardmap.md has the full semantics and the differences.
//
// Inputs are split by in_specs: dimension d with entry (a_1, ..., a_k) is cut into prod size(a_i) blocks, a_1
// major; a spec shorter than the rank leaves the trailing dimensions whole; mesh axes a spec does not name
// replicate, and a replicated block is ONE host buffer that every device holding it charges to itself
// (DeviceContext::Hold), never a copy. InSpec::PassThrough() hands an argument to every device unsplit.
// Outputs are concatenated along the axes each out_spec names; an axis an out_spec leaves out is a promise
// that the output is equal along it, and the block at index 0 of the omitted axes is kept.
//
// Replication check (check_vma, on by default), two parts:
//  - static, as JAX infers it: every Array carries the set of manual axes it may vary over
//    (Array::varying_axes()); inputs vary over their in_spec axes, collectives update the set (sim/
//    device_context.h), local ops take the union. An output whose mask holds an axis its out_spec omits is
//    JAX's ValueError "... out_specs which require replication which can't be statically inferred ...",
//    extended with two devices whose blocks differ (or a note that they happen to be equal);
//  - dynamic: the blocks along every omitted axis are compared; a difference the static rule missed (a value
//    computed from DeviceContext::position(), say) is a ValueError naming the output, the axis and two devices.
//
// Manual axes (ShardMapOptions::axis_names; default all): only they may appear in specs and collectives, and
// only they multiply instances. With auto axes (partial auto), one instance runs per combination of manual
// coordinates, on the device at index 0 of the auto axes; the devices along the auto axes hold that
// instance's blocks as replicas (ShardedArray outputs share its buffers). Inside f the mesh has only the
// manual axes, so a collective over an auto axis is JAX's NameError "Found an unbound axis name".
//
// Example: Mesh {i:4}, x = [3,1,4,1,5,9,2,6,5,3,5,8,9,7,1,2] (float32[16]):
//   auto f = ShardMap([](DeviceContext& d, const Array& b) { return d.Psum(b, "i"); },
//                     mesh, {P("i")}, {P()});
//   f(x)[0].ToDoubles() == {22, 20, 12, 17}                 (the notebook's psum: blocks of 4 summed)
//   ShardMap(..., {P("i")}, {P("i")}) with d.AllToAll(b, "i", 0, 0, true)
//       -> [3,5,5,9, 1,9,3,7, 4,2,5,1, 1,6,8,2]
//
// Thread safety: a ShardMapped may be called from one thread at a time (it runs on one Runtime, whose Run is
// not reentrant: calling a ShardMapped from inside f throws). f runs concurrently on the runtime's worker
// threads, once per instance, with the DeviceContext of its device (sim/device_context.h's contract).
#ifndef SPMDSIM_SHARDMAP_SHARD_MAP_H_
#define SPMDSIM_SHARDMAP_SHARD_MAP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "mesh/mesh.h"
#include "partition/named_sharding.h"
#include "partition/partition_spec.h"
#include "shardmap/sharded_array.h"
#include "sim/array.h"
#include "sim/device_context.h"
#include "sim/multiprocess.h"
#include "sim/runtime.h"

namespace spmdsim {

// One entry of in_specs: a PartitionSpec, or PassThrough (the argument goes to every device unsplit, as one
// shared buffer; it counts as invariant for the replication check, like JAX's P()).
class InSpec {
 public:
  InSpec(PartitionSpec spec) : spec_(std::move(spec)) {}  // NOLINT: implicit by design
  static InSpec PassThrough() { return InSpec(); }
  bool is_pass_through() const { return pass_through_; }
  const PartitionSpec& spec() const { return spec_; }  // P() for a pass-through argument
  std::string ToString() const { return pass_through_ ? "None" : spec_.ToString(); }

 private:
  InSpec() : pass_through_(true) {}
  bool pass_through_ = false;
  PartitionSpec spec_;
};

struct ShardMapOptions {
  // JAX: check_vma (formerly check_rep). Default true: the static and dynamic replication checks above. Off:
  // nothing is checked and the block at index 0 of an out_spec's omitted axes is returned.
  bool check_vma = true;
  // JAX: axis_names, the manual axes. Default empty: every mesh axis. Must be mesh axes.
  std::vector<std::string> axis_names;
  // The function's name in messages (JAX prints f.__name__). Default "f".
  std::string name = "f";
  // The runtime to run on (not owned; must outlive the ShardMapped). Its mesh must be the mesh (for partial
  // auto: the manual sub-mesh ShardMapped::instance_mesh()). Default nullptr: the ShardMapped makes its own on
  // first call with runtime_options and keeps it for later calls.
  Runtime* runtime = nullptr;
  RuntimeOptions runtime_options;
  // Several processes (RuntimeOptions::process_group): which ranks receive the output blocks of other ranks'
  // devices (sim/multiprocess.h). Default kEveryRank: every rank returns the whole outputs. kShapesOnly: each
  // rank keeps its own devices' blocks and abstract stand-ins for the others, so CallSharded returns this
  // rank's shards (the others abstract) and operator() an abstract global array; nothing is gathered.
  ShareData share_outputs = ShareData::kEveryRank;
};

// What f receives and returns: its blocks (in argument order) and one Array per out_spec.
using ShardFunction = std::function<std::vector<Array>(DeviceContext&, std::span<const Array>)>;

// An argument of a ShardMapped call: a global host Array or a ShardedArray.
class ShardMapArg {
 public:
  ShardMapArg(Array array) : value_(std::move(array)) {}          // NOLINT: implicit by design
  ShardMapArg(ShardedArray array) : value_(std::move(array)) {}   // NOLINT
  bool is_sharded() const { return std::holds_alternative<ShardedArray>(value_); }
  const Array& array() const { return std::get<Array>(value_); }
  const ShardedArray& sharded() const { return std::get<ShardedArray>(value_); }
  const std::vector<int64_t>& shape() const { return is_sharded() ? sharded().shape() : array().shape(); }
  DType dtype() const { return is_sharded() ? sharded().dtype() : array().dtype(); }
  std::string ShapeString() const { return spmdsim::ShapeString(dtype(), shape()); }

 private:
  std::variant<Array, ShardedArray> value_;
};

// What the last call did besides computing.
struct ShardMapCallStats {
  int64_t instances = 0;                      // devices f ran on
  std::vector<ReshardReport> input_reshards;  // per argument: bytes moved to reach its in_spec (ShardedArray
                                              // inputs whose sharding differed; empty reports otherwise)
};

// The function ShardMap returns (JAX: the wrapped function).
class ShardMapped {
 public:
  // Global arrays in, global (host) arrays out. Throws JAX's errors (see the file comment) or DeviceError when
  // f throws on a device.
  std::vector<Array> operator()(std::vector<ShardMapArg> args) const;
  template <typename... Args>
    requires(std::is_convertible_v<const Args&, ShardMapArg> && ...)
  std::vector<Array> operator()(const Args&... args) const {
    return (*this)(std::vector<ShardMapArg>{ShardMapArg(args)...});
  }
  // The same call returning ShardedArrays over the mesh with NamedSharding(mesh, out_spec): each device keeps
  // the block it computed (charged to it); devices along auto axes share their instance's block; with
  // check_vma off, replicas along omitted axes hold the block at index 0.
  std::vector<ShardedArray> CallSharded(std::vector<ShardMapArg> args) const;

  const Mesh& mesh() const;
  // The mesh f runs on: the mesh itself, or for partial auto its manual axes at auto index 0.
  const Mesh& instance_mesh() const;
  const std::vector<std::string>& manual_axes() const;  // mesh order
  const ShardMapCallStats& last_call_stats() const;
  Runtime& runtime() const;

 private:
  friend ShardMapped ShardMap(ShardFunction f, Mesh mesh, std::vector<InSpec> in_specs,
                              std::vector<PartitionSpec> out_specs, ShardMapOptions options);
  struct State;
  struct InputBlocks;
  struct Outputs;
  // One call: check the arguments, split them, run f on every instance, check the outputs and their
  // replication, and work out the global shapes (operator() and CallSharded assemble).
  Outputs Run(std::vector<ShardMapArg>& args) const;
  InputBlocks SplitInputs(std::vector<ShardMapArg>& args) const;
  std::vector<std::vector<Array>> RunInstances(InputBlocks& inputs) const;  // consumes inputs
  std::shared_ptr<State> state_;
};

// JAX: `jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, axis_names=..., check_vma=...)`.
// Checks the mesh, axis_names and the specs' axes now (JAX's ValueError wording); shapes when called.
ShardMapped ShardMap(ShardFunction f, Mesh mesh, std::vector<InSpec> in_specs, std::vector<PartitionSpec> out_specs,
                     ShardMapOptions options = {});

// Typed form: f(DeviceContext&, const Array&...) returning Array, std::tuple<Array...> or std::vector<Array>,
// with as many Array parameters as in_specs entries (up to 8).
// Example: ShardMap([](DeviceContext& d, const Array& a, const Array& b) { return std::tuple{a, d.Psum(b, "x")}; },
//                   mesh, {P("x"), P("x")}, {P("x"), P()});
namespace internal {
// TypeError: "f() takes 2 arrays but 1 were given".
[[noreturn]] void ThrowArityMismatch(size_t takes, size_t given);
template <size_t>
using ConstArrayRef = const Array&;
template <typename F, size_t... I>
constexpr bool InvocableWithArrays(std::index_sequence<I...>) {
  return std::is_invocable_v<F&, DeviceContext&, ConstArrayRef<I>...>;
}
template <typename F, size_t N = 0>
constexpr int ArrayArity() {
  if constexpr (N > 8) {
    return -1;
  } else if constexpr (InvocableWithArrays<F>(std::make_index_sequence<N>{})) {
    return static_cast<int>(N);
  } else {
    return ArrayArity<F, N + 1>();
  }
}
template <typename R>
std::vector<Array> ToArrayVector(R&& r) {
  using T = std::decay_t<R>;
  if constexpr (std::is_same_v<T, Array>) {
    return {std::forward<R>(r)};
  } else if constexpr (std::is_same_v<T, std::vector<Array>>) {
    return std::forward<R>(r);
  } else {
    return std::apply([](auto&&... a) { return std::vector<Array>{Array(a)...}; }, std::forward<R>(r));
  }
}
template <typename F, size_t... I>
ShardFunction AdaptTyped(F f, std::index_sequence<I...>) {
  return [f = std::move(f)](DeviceContext& d, std::span<const Array> blocks) mutable -> std::vector<Array> {
    if (blocks.size() != sizeof...(I)) ThrowArityMismatch(sizeof...(I), blocks.size());
    return ToArrayVector(f(d, blocks[I]...));
  };
}
}  // namespace internal

template <typename F>
  requires(!std::is_convertible_v<F, ShardFunction> && internal::ArrayArity<F>() >= 0)
ShardMapped ShardMap(F f, Mesh mesh, std::vector<InSpec> in_specs, std::vector<PartitionSpec> out_specs,
                     ShardMapOptions options = {}) {
  constexpr int kArity = internal::ArrayArity<F>();
  return ShardMap(internal::AdaptTyped(std::move(f), std::make_index_sequence<kArity>{}), std::move(mesh),
                  std::move(in_specs), std::move(out_specs), std::move(options));
}

}  // namespace spmdsim

#endif  // SPMDSIM_SHARDMAP_SHARD_MAP_H_
