// DeviceContext: what the function passed to Runtime::Run sees on one virtual device: its place in the mesh,
// its memory, and the collectives of jax.lax over named mesh axes.
//
// Groups: a collective over axes (a_1, ..., a_k) runs independently in each group of devices that differ
// only in those axes' coordinates, and orders the group by the in-group index
//     sum_j coord[a_j] * prod_{m>j} size(a_m)          (the first name is MAJOR; mesh/mesh.h PositionGroups)
// Example: Mesh {x:4, y:2}, every device holding x = [position] as float32[1]:
//   Psum(x, "y")          -> positions 2i and 2i+1 both get [4i+1]       (groups [0,1], [2,3], ...)
//   Psum(x, "x")          -> [12] on even positions, [16] on odd ones      (groups [0,2,4,6], [1,3,5,7])
//   AllGather(x, {"y","x"}) -> [0,2,4,6,1,3,5,7] on every device  (y major)
//   AxisIndex({"x","y"}) == position;  AxisIndex({"y","x"}) on position 3 (x=1, y=1) == 1*4 + 1 == 5
//
// SPMD contract: every device of the mesh must call the same collectives in the same order, with the same
// axes, parameters, input shape and dtype (as every device runs one traced program in JAX). A device that
// calls something else, returns early, or never arrives makes Runtime::Run throw (sim/runtime.h).
// Results are exactly jax.lax's: shapes, dtypes (psum of bool is int32; pmean divides truly, so integers
// become floating; psum of an integer stays an integer, wrapping on overflow), values, and errors (with JAX's
// wording and exception name in Error::kind()). Reductions add the group's members in in-group order, so
// results are bitwise identical whatever the number of worker threads.
//
// Thread safety: a DeviceContext belongs to its device: call it only from the function Run started for that
// device (it is not thread-safe and must not be handed to another device or thread). position(), device_id(),
// coords(), mesh() are immutable and may be read anywhere.
// Memory ordering: everything a device wrote before it enters a collective (or Barrier) happens before
// every device of the mesh returns from that collective.
// Do not call collectives inside a catch block (the device's stack is switched away from while it waits, and
// C++'s per-thread record of exceptions being handled would be shared with other devices).
#ifndef SPMDSIM_SIM_DEVICE_CONTEXT_H_
#define SPMDSIM_SIM_DEVICE_CONTEXT_H_

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mesh/mesh.h"
#include "sim/array.h"
#include "sim/axes.h"
#include "sim/memory.h"

namespace spmdsim {

struct RuntimeOptions;  // sim/runtime_options.h

namespace internal {
struct RuntimeCore;
struct DeviceSlot;
}  // namespace internal

class DeviceContext {
 public:
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int64_t position() const { return position_; }  // row-major index in the mesh
  int device_id() const { return device_id_; }
  const std::vector<int64_t>& coords() const { return coords_; }  // one per mesh axis
  const Mesh& mesh() const { return *mesh_; }
  int64_t num_devices() const { return mesh().size(); }
  // The options of the Runtime this device belongs to (its observer, op cost sink, ...; sim/runtime_options.h).
  const RuntimeOptions& runtime_options() const { return *options_; }

  // jax.lax.axis_index: the in-group index along `axes` (first name major). Unknown axis: Error(kNotFound,
  // kind "NameError") "Found an unbound axis name: z. To fix this, please call axis_index under
  // `jax.shard_map`."
  int32_t AxisIndex(const Axes& axes) const;
  // axis_index as an int32 scalar Array that varies over `axes` (varying_axes() == AxesMask(axes)), as
  // JAX types it inside shard_map.
  Array AxisIndexArray(const Axes& axes) const;
  // The varying-axes bitmask of `axes` (bit i for mesh axis i; sim/array.h). Unknown axis: as AxisIndex.
  uint64_t AxesMask(const Axes& axes) const;
  // jax.lax.axis_size (== psum(1, axes)): product of the axes' sizes.
  int64_t AxisSize(const Axes& axes) const;

  // Varying axes of the results (JAX's vma rules, jax/_src/lax/parallel.py): Psum/Pmean/Pmax/Pmin clear
  // the axes' bits; AllGather, PsumScatter, AllToAll and Ppermute set them (JAX first pvary's the input
  // over the axes). Over no axes (as JAX): Psum, Pmax, Pmin, AllGather and PsumScatter return x itself;
  // Pmean, AllToAll and Ppermute run over a group of one (Pmean divides by 1, so integers become floating).
  // All-reduces; shape unchanged. Psum of bool gives int32; Pmean of int32/bool gives float32, of int64
  // float64; Pmax/Pmin propagate NaN.
  Array Psum(const Array& x, const Axes& axes);
  Array Pmean(const Array& x, const Axes& axes);
  Array Pmax(const Array& x, const Axes& axes);
  Array Pmin(const Array& x, const Axes& axes);
  // jax.lax.all_gather: untiled stacks the group's values along a new dimension of size N at `axis`
  // (-rank-1 <= axis <= rank); tiled concatenates them along `axis` (-rank <= axis < rank).
  // Example: group of 2 holding [1,2] and [3,4]: untiled axis 0 -> [[1,2],[3,4]]; tiled -> [1,2,3,4].
  Array AllGather(const Array& x, const Axes& axes, int axis = 0, bool tiled = false);
  // jax.lax.psum_scatter: in-group index k gets block k of the sum along scatter_dimension. Untiled needs
  // shape[d] == N and removes d; tiled needs N | shape[d] and keeps d with size shape[d] / N.
  // Example (JAX docstring): 4 devices holding rows of arange(16).reshape(4,4): untiled -> 24, 28, 32, 36.
  Array PsumScatter(const Array& x, const Axes& axes, int scatter_dimension = 0, bool tiled = false);
  // jax.lax.all_to_all: in-group index m receives chunk m (along split_axis) of every member k,
  // concatenated along concat_axis in k order. Untiled needs shape[split_axis] == N; the output drops
  // split_axis and has N at concat_axis. Tiled: split dimension / N, concat dimension * N.
  Array AllToAll(const Array& x, const Axes& axes, int split_axis, int concat_axis, bool tiled = false);
  // jax.lax.ppermute: in-group index dst receives src's value for each (src, dst) pair; a device nobody sends
  // to receives zeros. Errors, in JAX's order (kInvalidArgument, with JAX's exception name as kind): sources
  // or destinations repeated modulo N, ValueError "ppermute sources and destinations must be unique, got
  // ((0, 1), (0, 2))."; axes whose group is not in mesh order (axes of size > 1 in another order than the
  // mesh's), RuntimeError "Make sure that the axis_name passed to jax.lax.ppermute is in the same order ...";
  // an index outside -N..N-1, IndexError "tuple index out of range (...)" (-N..-1 count from the end).
  Array Ppermute(const Array& x, const Axes& axes, const PermutationPairs& perm);
  // Every device of the mesh waits until all have arrived.
  void Barrier();

  // This device's memory (sim/memory.h).
  MemoryStats memory_stats() const;
  // The same buffer, charged to this device (how an input replicated on many devices is stored once).
  Array Hold(const Array& x) const;

 private:
  friend struct internal::RuntimeCore;  // makes every device's context, in its slot (sim/internal/core.cc)
  DeviceContext(const Mesh* mesh, const RuntimeOptions* options, internal::DeviceSlot* slot,
                internal::DeviceMemory* memory, int64_t position, int device_id, std::vector<int64_t> coords)
      : mesh_(mesh),
        options_(options),
        slot_(slot),
        memory_(memory),
        position_(position),
        device_id_(device_id),
        coords_(std::move(coords)) {}

  const Mesh* mesh_;
  const RuntimeOptions* options_;
  internal::DeviceSlot* slot_;
  internal::DeviceMemory* memory_;
  int64_t position_;
  int device_id_;
  std::vector<int64_t> coords_;
};

// The DeviceContext of the virtual device whose code runs on this thread right now, or nullptr outside a
// device function (a host thread, the thread that calls Runtime::Run, a thread a device started). New arrays
// are charged to this device (sim/array.h); ops/ charge their cost to its Runtime's op cost sink.
// The pointer is valid while the device function runs; use it only on this thread (as the context itself).
// Example: inside runtime.Run([&](DeviceContext& d) { ... }), CurrentDevice() == &d; after Run, nullptr.
DeviceContext* CurrentDevice();

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_DEVICE_CONTEXT_H_
