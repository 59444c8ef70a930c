// Internals: what a device asks of a collective (CollectiveCall), JAX's shape rules, and the plan the
// runtime's workers execute to compute every device's result. Not for users.
//
// Thread safety: a CollectiveCall lives on its device's fiber stack and is written only by that device
// before it arrives at the barrier; afterwards it is read-only until the device is resumed. A Plan is built
// by one worker (the last to arrive) and executed by all workers on disjoint unit ranges between two
// barrier phases (sim/internal/worker.cc); the barriers order those accesses.
#ifndef SPMDSIM_SIM_INTERNAL_COLLECTIVES_H_
#define SPMDSIM_SIM_INTERNAL_COLLECTIVES_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/shape.h"
#include "mesh/mesh.h"
#include "sim/array.h"
#include "sim/device_context.h"
#include "sim/internal/buffer.h"
#include "sim/observer.h"

namespace spmdsim::internal {

using OpKind = CollectiveKind;  // sim/observer.h
inline std::string_view OpName(OpKind op) { return CollectiveName(op); }

inline constexpr int kMaxAxes = 15;

// Mesh axes of a call as indices into the mesh's axis names, in the call's order.
struct AxesKey {
  uint8_t count = 0;
  std::array<uint8_t, kMaxAxes> index{};
  bool operator==(const AxesKey& other) const {
    if (count != other.count) return false;
    for (int i = 0; i < count; ++i)
      if (index[i] != other.index[i]) return false;
    return true;
  }
  bool operator<(const AxesKey& other) const {
    if (count != other.count) return count < other.count;
    for (int i = 0; i < count; ++i)
      if (index[i] != other.index[i]) return index[i] < other.index[i];
    return false;
  }
};

// Validates axis names for `api` (JAX's NameError for an unknown one) and returns their key.
AxesKey MakeAxesKey(const Mesh& mesh, const Axes& axes, std::string_view api);
int64_t GroupSize(const Mesh& mesh, const AxesKey& key);
std::vector<std::string> AxesNames(const Mesh& mesh, const AxesKey& key);

// A result shape held inside the call, with room for kInline dimensions before it allocates: a call is made
// on every device for every collective. Reads as a span (NumElements) and converts to the std::vector an
// Array keeps.
class CallShape {
 public:
  static constexpr size_t kInline = 8;
  void assign(std::span<const int64_t> dims) {
    size_ = dims.size();
    if (size_ > kInline) {
      heap_.assign(dims.begin(), dims.end());
    } else {
      std::copy(dims.begin(), dims.end(), inline_.begin());
    }
  }
  void insert(size_t pos, int64_t value);  // before dimension pos
  void erase(size_t pos);
  size_t size() const { return size_; }
  int64_t* data() { return size_ > kInline ? heap_.data() : inline_.data(); }
  const int64_t* data() const { return size_ > kInline ? heap_.data() : inline_.data(); }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  operator std::vector<int64_t>() const { return {begin(), end()}; }  // NOLINT: implicit by design

 private:
  std::array<int64_t, kInline> inline_{};
  std::vector<int64_t> heap_;  // when size_ > kInline
  size_t size_ = 0;
};

struct CollectiveCall {
  OpKind op = OpKind::kBarrier;
  AxesKey axes;
  int64_t group_size = 1;
  bool tiled = false;
  int64_t p0 = 0;  // all_gather axis / psum_scatter dimension / all_to_all split axis (canonical)
  int64_t p1 = 0;  // all_to_all concat axis (canonical)
  const Array* input = nullptr;      // nullptr for a barrier
  // ppermute: the pairs with indices in [0, group_size) (-n..-1 counted from the end, as Python indexes). A view
  // of the caller's pairs when they are already in range (the usual case: nothing is copied), else of
  // perm_storage; so a call must not be copied
  // (it lives on its device's stack for the duration of the collective, as do the caller's pairs).
  std::span<const std::pair<int64_t, int64_t>> perm;
  PermutationPairs perm_storage;
  // Derived by ValidateCall: the result's dtype and shape.
  DType out_dtype = DType::kF32;
  CallShape out_shape;
};

// Checks parameters against the input as jax.lax does (its errors and wording) and fills out_dtype and
// out_shape. Throws Error on the device that calls it.
void ValidateCall(const Mesh& mesh, CollectiveCall& call, const Axes& axes, const PermutationPairs& raw_perm);
// Same op, axes, parameters, input shape, dtype and abstractness.
bool SameCall(const CollectiveCall& a, const CollectiveCall& b);
// "psum(float32[4], axes=('x',))", "all_gather(float32[4], axes=('x', 'y'), axis=0, tiled=False)".
std::string DescribeCall(const Mesh& mesh, const CollectiveCall& call);

// The groups of one tuple of axes, cached by the runtime.
struct GroupInfo {
  std::vector<std::vector<int64_t>> groups;  // Mesh::PositionGroups
  std::vector<int64_t> group_of;             // by position
  std::vector<int64_t> index_in_group;       // by position
};
GroupInfo MakeGroupInfo(const Mesh& mesh, const AxesKey& key);

// A reduction's left-to-right fold in pieces (several processes: a chain of ranks, each folding its run of the
// group's members into the running value it received, cross_rank.h). The running value has FoldDType:
// the input's dtype, except int32 for sums of bools. Folding members [0, a) and then [a, n) gives bitwise the
// one-process result (the same operations in the same order).
DType FoldDType(OpKind op, DType in_dtype);
// acc[i] = op(...op(acc[i], members[0][offset + i])..., members[n - 1][offset + i]) for i in [0, count), or,
// when !continue_acc, the fold of the members alone (acc[i] = members[0][...] op members[1][...] ...).
// REQUIRES: op a reduction (psum, pmean, pmax, pmin, psum_scatter); members[k] of in_dtype.
void FoldInto(OpKind op, DType in_dtype, const void* const* members, int64_t num_members, int64_t offset,
              int64_t count, void* acc, bool continue_acc);
// The result from the group's whole fold: pmean's division (into its result dtype), else a copy (none when
// acc == out). `acc` may equal `out` for every op whose result dtype is FoldDType.
void FinishFold(OpKind op, DType in_dtype, const void* acc, int64_t count, void* out, int64_t group_size);

// all_to_all's blocks (tiled or not): member k's block for receiver m is `shape` at k's input + m * src_step
// bytes (strides src_strides) and goes to m's output + k * dst_step bytes (strides dst_strides); strides in
// elements. Writes into the caller's vectors (kept to reuse their memory).
struct AllToAllGeometry {
  std::vector<int64_t> shape, src_strides, dst_strides;
  int64_t src_step = 0;
  int64_t dst_step = 0;
};
void MakeAllToAllGeometry(const CollectiveCall& call, AllToAllGeometry* geometry);

// What the workers compute for one collective. Units are disjoint pieces of work (e.g. a group and a range
// of elements); any partition of [0, num_units) among workers gives bitwise the same results.
class Plan {
 public:
  // `calls[p]` is position p's call (all SameCall); `inputs` their arrays.
  // Several processes (cross_rank.h): `local` (by position) marks the positions whose results this process
  // computes; calls[p] is nullptr for positions none of them reads, and `ref` is a full call (calls[0] may
  // hold only an input). Results of the other positions are not computed (ResultBuffer is null there).
  // `elsewhere` (by group, reductions only): groups whose local results the caller computes into
  // ResultBuffer (a chain across ranks); their buffers are allocated, no unit computes them.
  void Build(const Mesh& mesh, const GroupInfo& groups, const std::vector<const CollectiveCall*>& calls,
             const CollectiveCall* ref = nullptr, const std::vector<uint8_t>* local = nullptr,
             const std::vector<uint8_t>* elsewhere = nullptr);
  int64_t num_units() const { return num_units_; }
  int64_t bytes_written() const { return bytes_written_; }
  void Execute(int64_t unit_begin, int64_t unit_end) const;
  // The result buffer of `position` (nullptr for abstract arrays).
  const std::shared_ptr<Buffer>& ResultBuffer(int64_t position) const;
  void Clear();

 private:
  void ExecuteUnit(int64_t unit) const;

  OpKind op_ = OpKind::kBarrier;
  const GroupInfo* groups_ = nullptr;
  const CollectiveCall* ref_ = nullptr;
  DType in_dtype_ = DType::kF32;
  int64_t in_elements_ = 0;
  int64_t out_elements_ = 0;
  bool abstract_ = false;
  bool per_group_output_ = true;  // psum/pmean/pmax/pmin/all_gather: one buffer per group
  std::vector<const void*> inputs_;  // by position
  std::vector<const void*> group_inputs_;  // [group * n + k]: the input of the group's member k (not ppermute)
  // all_gather, psum_scatter: the input (all_gather: the output) viewed as [outer_, n, inner_] around the axis.
  int64_t outer_ = 1;
  int64_t inner_ = 1;
  // Short rows (all_gather: output rows under 256 B; psum_scatter: blocks under 64 B): a unit is a range of
  // rows_per_unit_ outer rows of one group, for every member (all_gather) or every receiver (psum_scatter).
  // 0: a unit is one member's rows (all_gather) or one receiver's output (psum_scatter).
  int64_t rows_per_unit_ = 0;
  // all_to_all: member k's block for receiver m is copy_ from k's input + m * src_step_ to m's output +
  // k * dst_step_ (bytes).
  BlockCopy copy_;
  int64_t src_step_ = 0;
  int64_t dst_step_ = 0;
  AllToAllGeometry scratch_geometry_;  // Build's, kept to reuse its memory
  std::vector<std::shared_ptr<Buffer>> outputs_;  // by group or by position
  std::vector<int64_t> result_source_;  // ppermute: source position or -1
  std::shared_ptr<Buffer> zeros_;
  int64_t num_units_ = 0;
  int64_t units_per_target_ = 1;  // reductions: element chunks per group
  std::vector<int64_t> active_targets_;  // several processes: the targets computed here (empty: all)
  int64_t bytes_written_ = 0;
};

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_COLLECTIVES_H_
