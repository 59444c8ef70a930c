// Predict: the time one step of an HLO module takes on a topology, instruction by instruction, and its memory.
//
// The module runs on a mesh with one position per logical device (replica x partition; position i is logical
// device i, its device id the physical device the device assignment gives it, hlo/executor.h). Every device runs
// the same program (SPMD), so one device is simulated (as the model workload does, docs/model.md "Reduced
// simulation"), with every collective charged its slowest group's time: each member of a group then starts and
// ends it together, and the simulated device is any device.
//
// Per instruction, in schedule order (called computations inlined: while bodies times their trip count,
// conditionals their costliest branch, calls their callee):
//   local ops     ComputeModel (cost/compute_model.h) on hlo/cost.h's FLOPs, bytes and contraction dims: dots
//                 and fusions around one dot through the matmul tile model, everything else the roofline;
//                 divided by the slowest device's speed factor (stragglers);
//   collectives   CollectiveModel::CostOfGroup on the positions of each group XLA's replica groups name
//                 (hlo/groups.h), the slowest group; message size S as nccl-tests' (the per-device buffer of an
//                 all-reduce, the output of an all-gather, the input of a reduce-scatter or all-to-all, the
//                 bytes sent by a collective-permute, whose pairs are priced as groups of two);
//   async pairs   a collective's -start puts it on the device's communication stream (when the stream is free),
//                 its -done makes the compute stream wait for its end; compute between them overlaps it. Compute
//                 progresses at (1 - comm_slowdown) while communication is in flight (GPUs: NCCL's SMs; the
//                 model workload's default, docs/model.md).
// Types: on TPUs and GPUs (PredictOptions::narrow_types) values XLA CPU widened from bf16 / f16 to f32 are priced
// in their narrow type, as those compilers keep them (hlo/cost.h, "Narrow types"): bytes of local ops, collectives'
// message sizes, dots' peak. Memory stays the module's buffers (what XLA CPU's memory_analysis reports).
// Trip counts: PredictOptions::trip_counts (measured in a run with data), else XLA's known_trip_count, else the
// loop's condition `i < constant` with i starting at a constant; otherwise 1, with a note.
//
// Thread safety: pure; Predict may run concurrently on different modules.
#ifndef SPMDSIM_HLO_PREDICT_H_
#define SPMDSIM_HLO_PREDICT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost/collective_model.h"
#include "cost/roofline.h"
#include "hlo/ir.h"
#include "hlo/memory.h"
#include "hlo/support.h"
#include "mesh/mesh.h"

namespace spmdsim::hlo {

struct PredictOptions {
  RooflineOptions roofline{};        // compute / HBM efficiency (fractions of peak)
  CollectiveOptions collectives{};   // forced algorithm, link efficiencies, NVLS
  double speed_factor = 1.0;         // the slowest device's speed (stragglers): every op's compute divides by it
  double comm_slowdown = -1;         // < 0: the device's default (GPU: min(0.5, 16 / SMs); else 0)
  std::map<const Instruction*, int64_t> trip_counts{};  // measured while-loop trip counts
  // Run every synchronous collective as XLA's async collective conversion and latency-hiding scheduler would on a
  // TPU or GPU: started where the module has it, waited for at its first use (the end of its computation when
  // nothing uses it there). Modules XLA compiles for CPU have only synchronous collectives; false prices the
  // module as compiled.
  bool overlap_collectives = false;
  bool record_events = true;         // keep one OpEvent per executed instruction (traces)
  // Price values XLA CPU widened from bf16 / f16 in their narrow type (above); unset: on TPUs and GPUs for a module
  // XLA CPU compiled (or one that does not tell, hlo/compiled_for.h), never on CPUs or for a TPU / GPU module.
  std::optional<bool> narrow_types{};
};

// Where an event ran: the compute stream or one of the asynchronous queues (hlo/internal/streams.h).
enum class Stream : uint8_t { kCompute, kCollectives, kNetwork, kCopies };
std::string_view StreamName(Stream stream);  // "compute", "collectives", "network", "copies"

// One executed instruction on the simulated device (times in seconds on its clocks).
struct OpEvent {
  const Instruction* instruction = nullptr;
  double start = 0, end = 0;
  bool collective = false;     // a collective (Stream::kCollectives)
  Stream stream = Stream::kCompute;
  double exposed = 0;          // asynchronous work: how long the compute stream waited for it
  double bytes = 0;            // local ops: HBM bytes read + written; collectives: S; transfers: bytes moved
  std::string axes;            // collectives: the mesh axes its groups vary over ("data,model"), else ""
};

// Totals of the instructions of one class or one op_name scope.
struct OpGroup {
  std::string name;
  std::string op;               // the class that took the most time in the group
  int64_t count = 0;            // executed instructions
  double compute_seconds = 0;   // local ops' time on the compute stream
  double comm_seconds = 0;      // collectives' time on the communication stream
  double exposed_comm_seconds = 0;
  double flops = 0;
  double bytes = 0;             // read + written by local ops
  std::map<LinkClass, double> bytes_sent;  // collectives, per device, by link class
  double message_bytes = 0;     // collectives: sum of S
  int64_t group_size = 1;       // collectives: the largest group
  std::string algorithm;        // collectives: the last one's algorithm
  std::string axes;             // collectives: the mesh axes their groups vary over ("data", "data,model"), else ""
  std::map<std::string, double> comm_seconds_by_axis;  // collectives: their time split over the mesh axes
};

struct Prediction {
  double step_seconds = 0;            // when the simulated device's compute and communication streams end
  double compute_seconds = 0;         // compute stream busy
  double comm_seconds = 0;            // communication stream busy
  double exposed_comm_seconds = 0;    // compute stream waiting for collectives
  double copy_seconds = 0;            // copies and offloaded work (prefetches, async slices) on their queue
  double network_seconds = 0;         // host and DCN transfers (send / recv) on their queue
  double exposed_transfer_seconds = 0;  // compute stream waiting for copies and transfers
  // Collectives' time by the mesh axes of the prediction's mesh their groups vary over (the stage split of the
  // collective model: "data": 1.2e-3); empty on a one-axis mesh named "devices".
  std::map<std::string, double> comm_seconds_by_axis;
  double flops = 0;                   // per device
  // Of which dots and convolutions (the matrix units' work), and the element type that did most of it.
  double contraction_flops = 0;
  DType contraction_dtype = DType::kBF16;
  double comm_slowdown = 0;
  int64_t executed_ops = 0;           // instructions executed (loop iterations counted; saturates at INT64_MAX)
  std::vector<OpEvent> events;        // when PredictOptions::record_events
  std::vector<OpGroup> by_class;      // sorted by time, longest first
  std::vector<OpGroup> by_scope;      // in order of first execution
  MemoryEstimate memory;
  std::vector<std::string> notes;     // assumptions made (unknown trip counts, ...)
};

// REQUIRES: mesh.size() == the module's devices, with a topology. Throws Error(kFailedPrecondition) for a mesh
// without a topology, Error(kInvalidArgument) for a mesh of another size. The memory is the module's own estimate
// (SupportedModule::memory).
Prediction Predict(const SupportedModule& module, const Mesh& mesh, const PredictOptions& options = {});

// The trip count of a while loop from the module alone (known_trip_count, else the `i < constant` pattern);
// -1 when unknown.
int64_t StaticTripCount(const Instruction& loop);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_PREDICT_H_
