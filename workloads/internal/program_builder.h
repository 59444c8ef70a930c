// ProgramBuilder: appends the named steps of a Megatron-style layer to a shard_map program (ShardMapConfig), with
// the collectives its LayerSharding asks for. Shared by the mlp / transformer_block engines (layers.cc) and the
// model workload's data run (model_program.cc).
//
// Example: ProgramBuilder b(&program, sharding);
//   std::string h = b.Einsum("fwd/h", "bsd,df->bsf", {b.GatherSeq("fwd/x", "x"), b.GatherWeight("w1", 0)});
//   std::string y = b.ReduceTensor("fwd/out", h);   // psum over tensor_axes (psum_scatter on seq with SP)
//
// Thread safety: a builder is used by one thread; it writes only its program.
#ifndef SPMDSIM_WORKLOADS_ENGINES_PROGRAM_BUILDER_H_
#define SPMDSIM_WORKLOADS_ENGINES_PROGRAM_BUILDER_H_

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/host_memory.h"
#include "ops/random.h"
#include "common/strings.h"
#include "workloads/workloads.h"

namespace spmdsim::internal {

inline PartitionSpec::Entry EntryOf(const std::vector<std::string>& axes) {
  if (axes.empty()) return PartitionSpec::Entry::None();
  if (axes.size() == 1) return PartitionSpec::Entry::Axis(axes[0]);
  return PartitionSpec::Entry::Axes(axes);
}

// Appends steps to a program with a name prefix; returns value names.
class ProgramBuilder {
 public:
  ProgramBuilder(ShardMapConfig* program, const LayerSharding& sharding)
      : p_(program), sh_(sharding), sp_(sharding.sequence_parallel && !sharding.tensor_axes.empty()) {}

  std::string Step(ProgramStep s) {
    std::string name = s.name;
    p_->steps.push_back(std::move(s));
    return name;
  }
  std::string Einsum(const std::string& name, const std::string& eq, std::vector<std::string> args) {
    ProgramStep s;
    s.name = name;
    s.op = "einsum";
    s.equation = eq;
    s.args = std::move(args);
    return Step(std::move(s));
  }
  std::string Op(const std::string& name, const std::string& op, std::vector<std::string> args,
                 std::optional<double> scalar = std::nullopt, int axis = 0) {
    ProgramStep s;
    s.name = name;
    s.op = op;
    s.args = std::move(args);
    s.scalar = scalar;
    s.axis = axis;
    return Step(std::move(s));
  }
  // A step of `op` over `args` (collectives: over `axes`), its other fields at their defaults.
  static ProgramStep Named(const std::string& name, const std::string& op, std::vector<std::string> args,
                           std::vector<std::string> axes = {}) {
    ProgramStep s;
    s.name = name;
    s.op = op;
    s.args = std::move(args);
    s.axes = std::move(axes);
    return s;
  }
  std::string Add(const std::string& name, const std::string& a, const std::string& b) {
    return Op(name, "add", {a, b});
  }
  std::string Mul(const std::string& name, const std::string& a, const std::string& b) {
    return Op(name, "mul", {a, b});
  }
  std::string Cast(const std::string& name, const std::string& x) {
    ProgramStep s = Named(name, "cast", {x});
    s.dtype = DType::kF32;
    return Step(std::move(s));
  }
  // A reduction (`op`: sum, mean, max_reduce) over `dims`.
  std::string Reduce(const std::string& name, const std::string& op, const std::string& x, std::vector<int> dims,
                     bool keepdims) {
    ProgramStep s = Named(name, op, {x});
    s.dims = std::move(dims);
    s.keepdims = keepdims;
    return Step(std::move(s));
  }
  std::string Psum(const std::string& name, const std::string& x, const std::vector<std::string>& axes) {
    return Step(Named(name, "psum", {x}, axes));
  }
  std::string Collective(const std::string& name, const std::string& op, const std::string& arg,
                         const std::vector<std::string>& axes, int axis = 0) {
    ProgramStep s;
    s.name = name;
    s.op = op;
    s.args = {arg};
    s.axes = axes;
    s.axis = axis;
    s.tiled = true;
    return Step(std::move(s));
  }
  // FSDP: the whole weight from its shards along `dim`.
  std::string GatherWeight(const std::string& w, int dim) {
    if (sh_.fsdp_axes.empty()) return w;
    return Collective("fwd/" + w + "_all_gather", "all_gather", w, sh_.fsdp_axes, dim);
  }
  // Sequence parallel: the whole sequence before a block.
  std::string GatherSeq(const std::string& prefix, const std::string& x) {
    if (!sp_) return x;
    return Collective(prefix + "_all_gather", "all_gather", x, sh_.tensor_axes, 1);
  }
  // The block's partial sums over tensor_axes: psum, or psum_scatter on seq with sequence parallelism.
  std::string ReduceTensor(const std::string& name, const std::string& partial) {
    if (sh_.tensor_axes.empty()) return Op(name, "mul", {partial}, 1.0);
    return sp_ ? Collective(name, "psum_scatter", partial, sh_.tensor_axes, 1)
               : Collective(name, "psum", partial, sh_.tensor_axes);
  }
  // A weight gradient computed from this device's batch: psum_scatter over FSDP axes, psum over the other batch
  // axes.
  std::string ReduceWeightGrad(const std::string& name, const std::string& local, int fsdp_dim) {
    std::string v = local;
    std::vector<std::string> rest;
    for (const std::string& a : sh_.batch_axes) {
      if (std::find(sh_.fsdp_axes.begin(), sh_.fsdp_axes.end(), a) == sh_.fsdp_axes.end()) rest.push_back(a);
    }
    if (!sh_.fsdp_axes.empty()) {
      v = Collective(rest.empty() ? name : name + "_psum_scatter", "psum_scatter", v, sh_.fsdp_axes, fsdp_dim);
    }
    if (!rest.empty()) v = Collective(name, "psum", v, rest);
    if (v == local) v = Op(name, "mul", {local}, 1.0);
    return v;
  }
  bool sequence_parallel() const { return sp_; }

 private:
  ShardMapConfig* p_;
  const LayerSharding& sh_;
  bool sp_;
};

// An input of N(0, scale) values (RandomArray), made when the engine needs it: whole in one process, only the
// rank's blocks across ranks (ProgramInput::make_blocks). Abstract in abstract mode.
inline void AddInput(ShardMapConfig* p, const std::string& name, std::vector<int64_t> shape, DType dtype, uint64_t seed,
              double scale, PartitionSpec spec, bool abstract) {
  ProgramInput in{name, Array::Abstract(shape, dtype), std::move(spec)};
  if (!abstract) {
    in.make_blocks = [name, shape, dtype, seed, scale](const std::vector<std::vector<IndexRange>>& blocks) {
      int64_t bytes = 0;
      for (const auto& index : blocks) {
        std::vector<int64_t> block;
        for (const IndexRange& r : index) block.push_back(r.size());
        bytes += ArrayBytes(block, DTypeSize(dtype));
      }
      CheckFitsHostMemory(fmt::format("input '{}' ({} {})", name, DTypeName(dtype), PyTuple(shape)), bytes);
      return RandomArrayBlocks(shape, dtype, seed, scale, blocks);
    };
  }
  p->inputs.push_back(std::move(in));
}

}  // namespace spmdsim::internal

#endif  // SPMDSIM_WORKLOADS_ENGINES_PROGRAM_BUILDER_H_
