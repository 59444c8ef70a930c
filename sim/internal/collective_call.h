// Internals of sim/device_context.h: what a device asks of a collective (CollectiveCall), the checks of the call
// and JAX's shape rules (ValidateCall), and how calls are compared and described in errors. The first of a
// collective's three jobs; the plan of its results is sim/internal/plan.h, their computation
// sim/internal/execute.h. Not for users.
//
// Thread safety: a CollectiveCall lives on its device's fiber stack and is written only by that device
// before it arrives at the barrier; afterwards it is read-only until the device is resumed (the leader worker
// reads it). Every function here is reentrant.
#ifndef SPMDSIM_SIM_INTERNAL_COLLECTIVE_CALL_H_
#define SPMDSIM_SIM_INTERNAL_COLLECTIVE_CALL_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mesh/mesh.h"
#include "sim/array.h"
#include "sim/axes.h"
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
// The call every device makes at a Barrier: one shared object, so comparing two barrier calls is comparing
// two pointers and a waiting device keeps nothing on its stack.
extern const CollectiveCall kBarrierCall;
// How JAX prints axis_name in messages: a single name bare, several as a tuple ("x", "('x', 'y')").
std::string AxesText(const Axes& axes);
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

// The groups of a call's axes as the runtime's observer sees them, with the call's sizes: `names` holds the
// axes' names the event points to (it must outlive the event); `groups` null for a barrier.
CollectiveEvent MakeEvent(const Mesh& mesh, const CollectiveCall& call, const GroupInfo* groups, uint64_t sequence,
                          std::vector<std::string>* names);

// "0-3, 5, 7-8"
std::string PositionRanges(const std::vector<int64_t>& positions);
// "positions 0-2 (device ids 4, 5, 6)"; device ids are listed only when they are not the positions.
std::string DescribeDevices(const Mesh& mesh, const std::vector<int64_t>& positions);

}  // namespace spmdsim::internal

#endif  // SPMDSIM_SIM_INTERNAL_COLLECTIVE_CALL_H_
