// Workload engines of the scenario runner (`spmdsim run`): each runs a workload FOR REAL on the simulator's
// Runtime (or, in abstract mode, on shapes and dtypes only) and predicts its time on the mesh's topology with
// the cost model (docs/workloads.md; docs/cost-model.md for the formulas).
//
// How a prediction is made: the engine gives the Runtime a RuntimeObserver and an op cost sink
// (RuntimeOptions::observer, ::op_cost_sink). Every local op a device runs is charged to that device's simulated clock
// by the ComputeModel (cost/compute_model.h: per-op roofline with matmul tile/wave quantisation; divided by the
// device's speed factor); every
// collective is costed per group by CollectiveModel and advances each group to its latest arrival plus the
// group's modelled time (SimClocks). Steps are named by the workload; everything a device does while a step is
// current is charged to that step.
//
// Engines (one Run* function each; all take a WorkloadContext and return a WorkloadResult):
//   RunCollectives       nccl-tests-like sweep of ops x axes x message sizes (CollectivesConfig)
//   RunShardMapProgram   a program of named steps over named values, checked against the same program on one
//                        device (ShardMapConfig, ProgramStep)
//   RunMlp               Megatron MLP forward (+ backward) under data / FSDP / tensor / sequence parallelism
//   RunTransformerBlock  Megatron attention + MLP block, forward (+ backward)
//   RunPartition         parameter shapes and rules -> specs and per-device memory (no Runtime run)
//   RunModel             a decoder-only LM training step: analytic accounting (parameters, FLOPs, memory per
//                        device by category) and the predicted step time (PredictModelStep; model/model.h);
//                        not abstract, also run with data and checked against one device.
//
// Example (8 CPU devices, tensor-parallel MLP, checked and costed):
//   auto topo = std::make_shared<const Topology>(Topology::Parse("cpu:8"));
//   WorkloadContext ctx{.mesh = MakeDeviceMesh(topo, {{"data", 2}, {"model", 4}})};
//   MlpConfig mlp{.batch = 4, .seq = 8, .d_model = 16, .d_ff = 32};
//   mlp.sharding.batch_axes = {"data"};  mlp.sharding.tensor_axes = {"model"};
//   WorkloadResult r = RunMlp(ctx, mlp);
//   r.check.passed == true;  r.steps[...] names "fwd/h", "fwd/act", "fwd/out_partial", "fwd/out" (the psum), ...;
//   r.totals.predicted_seconds
//
// Errors: bad configuration (an unknown op, axis or value name, a shape that does not divide) throws
// spmdsim::Error naming the workload, the step and what would be valid. A failed numeric check is NOT an error:
// it is reported in WorkloadResult::check.
// Thread safety: each Run* call creates its own Runtime, observer and op cost sink; the engines keep no
// process-wide hook, so several may run at once on different threads.
#ifndef SPMDSIM_WORKLOADS_WORKLOADS_H_
#define SPMDSIM_WORKLOADS_WORKLOADS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/enum_names.h"
#include "common/strings.h"
#include "cost/collective_model.h"
#include "cost/roofline.h"
#include "mesh/mesh.h"
#include "partition/correction.h"
#include "partition/logical_axis_rules.h"
#include "partition/match_rules.h"
#include "partition/memory_analysis.h"
#include "partition/named_sharding.h"
#include "partition/partition_spec.h"
#include "sim/array.h"
#include "shardmap/sharded_array.h"
#include "sim/runtime.h"
#include "model/model.h"

namespace spmdsim {

// ---------------------------------------------------------------------------------------------------------------
// Context shared by every workload of a scenario.

struct CostOptions {
  // Compute and HBM efficiency of local ops (fractions of peak, in (0, 1]; default 1).
  RooflineOptions roofline;
  // Collective options: forced algorithm (default kAuto), composition, per-link-class efficiency (default
  // NVLink 0.8), NVLS. See cost/collective_model.h.
  CollectiveOptions collectives;
  // Stragglers: device id -> speed factor (> 0; 0.5 = half speed). Devices not listed run at 1.
  std::map<int, double> speed_factors;
  // The model workload's predicted step: a calibration profile's figures (model/step.h StepCalibration;
  // default: none, the documented figures).
  StepCalibration model_calibration;
};

struct WorkloadContext {
  // The mesh, WITH a topology (the cost model needs one; Error(kFailedPrecondition) otherwise).
  Mesh mesh;
  // Runtime options: num_threads (0 = hardware concurrency), timeouts, device memory. The observer field is
  // ignored (the engine installs its own).
  RuntimeOptions runtime;
  // Shapes and dtypes only: no arithmetic, no numeric check; cost model and memory accounting as a real run.
  bool abstract = false;
  CostOptions cost;
  // Record trace events (WorkloadResult::trace), one per device per step; for a model workload the simulated
  // step's schedule instead (ModelStepTimes::schedule: every op of one device per pipeline stage). Off by
  // default: on a 4096-device mesh they are ~devices x steps events.
  bool record_trace = false;
  // Keep the workload's global inputs and outputs in WorkloadResult::inputs/outputs (for --dump). Real runs only.
  bool keep_arrays = false;
};

// The engines, one per `kind:` of a scenario's workload, and their names: the one list the scenario reader
// accepts, the reports print and the results carry.
enum class WorkloadKind { kCollectives, kShardMap, kMlp, kTransformerBlock, kPartition, kModel, kHlo };
inline constexpr EnumName<WorkloadKind> kWorkloadKindNames[] = {
    {WorkloadKind::kCollectives, "collectives"}, {WorkloadKind::kShardMap, "shard_map"},
    {WorkloadKind::kMlp, "mlp"},                 {WorkloadKind::kTransformerBlock, "transformer_block"},
    {WorkloadKind::kPartition, "partition"},     {WorkloadKind::kModel, "model"},
    {WorkloadKind::kHlo, "hlo"}};
inline std::string_view WorkloadKindName(WorkloadKind kind) { return NameOf(kWorkloadKindNames, kind); }

// ---------------------------------------------------------------------------------------------------------------
// Results (common to every workload kind). Units are in the field comments; seconds are SIMULATED (predicted on
// the topology) unless the name says wall.

enum class StepKind { kCompute, kCollective };
std::string_view StepKindName(StepKind kind);  // "compute", "collective"

struct StepResult {
  std::string name;        // the step's name ("fwd/h", "psum 1MiB over (model)", a program value name)
  StepKind kind = StepKind::kCompute;  // kCollective when the step ran a collective
  std::string op;          // the op ("einsum", "psum", "all_gather", ...)
  std::vector<std::string> axes;  // mesh axes of the collective (empty for compute)
  int64_t count = 1;       // times the step ran (collective sweeps: iterations, warmup excluded)
  // Predicted seconds of the step (one run of it): the longest any device spent in it, waiting at a
  // collective for late arrivals included.
  double predicted_seconds = 0;
  double compute_seconds = 0;        // seconds: roofline time of its local ops, slowest device (speed factor applied)
  double communication_seconds = 0;  // seconds: modelled collective time, slowest group
  // seconds: communication time split over the mesh axes the collective's stages vary along (sums to
  // communication_seconds up to on-chip stages).
  std::map<std::string, double> communication_seconds_by_axis;
  // bytes SENT by one device of the slowest group, per link class name ("ici", "nvlink", "infiniband", "dcn",
  // "host_memory"), forwarded bytes included.
  std::map<std::string, double> bytes_by_link;
  std::string algorithm;   // collective algorithm chosen ("ring", "nvls", "torus[concurrent](...)"), empty for compute
  std::string protocol;    // NCCL protocol of a GPU collective ("ll", "ll128", "simple"); empty otherwise
  double message_bytes = 0;  // bytes: nccl-tests' S of the collective (cost/collective_model.h), 0 for compute
  int64_t group_size = 1;    // devices per collective group (1 for compute)
  double flops = 0;          // floating-point operations of the step, slowest device
  double memory_bytes = 0;   // bytes read + written by its local ops, slowest device
  double wall_seconds = 0;   // wall seconds the simulator spent in the step (max over devices; all runs)
};

struct WorkloadTotals {
  // seconds: the makespan (latest simulated clock at the end of the workload; for a sweep: the sum over rows of
  // one iteration's time).
  double predicted_seconds = 0;
  double compute_seconds = 0;         // seconds: sum of the steps' compute_seconds x count
  double communication_seconds = 0;   // seconds: sum of the steps' communication_seconds x count
  double wait_seconds = 0;            // seconds: the most any device waited at collectives for late arrivals
  std::map<std::string, double> communication_seconds_by_axis;  // seconds, summed over steps
  std::map<std::string, double> bytes_by_link;  // bytes sent per device (slowest group), summed over steps
  double flops = 0;                   // operations, summed over steps (slowest device per step)
};

struct MemoryResult {
  int64_t peak_bytes_max = 0;         // bytes: the highest per-device peak during the workload
  int max_device = 0;                 // device id with that peak (first in mesh order)
  int64_t peak_bytes_min = 0;         // bytes: the lowest per-device peak
  int min_device = 0;
  int64_t capacity_bytes = 0;         // bytes: each device's memory
  std::vector<int64_t> peak_bytes_per_position;  // bytes, per mesh position
  bool fits() const { return peak_bytes_max <= capacity_bytes; }
};

struct CheckedValue {
  std::string name;           // the output compared
  bool passed = true;
  double max_abs_error = 0;   // max |got - want| over its elements (same units as the values)
  double max_rel_error = 0;   // max |got - want| / |want| over elements with want != 0
  std::string worst;          // "y[1,3,0]: got 1.25, want 1.5" (the element furthest outside the tolerance)
};

struct NumericCheck {
  bool performed = false;     // false in abstract mode and for workloads without a check (partition)
  bool passed = true;         // every value within |got - want| <= atol + rtol * |want| (numpy.isclose)
  double max_abs_error = 0;   // over every value compared
  double max_rel_error = 0;
  double rtol = 0, atol = 0;  // the tolerance used (dimensionless / value units)
  std::string compared;       // what was compared against what ("y, dx vs the program on one device")
  std::vector<CheckedValue> values;
};

// One device's part in one step, for a Chrome/Perfetto trace (one track per device).
struct TraceEvent {
  int64_t position = 0;       // mesh position
  int device_id = 0;
  std::string name;           // the step's name
  StepKind kind = StepKind::kCompute;
  double sim_start = 0, sim_end = 0;    // seconds on the device's simulated clock
  double wall_start = 0, wall_end = 0;  // wall seconds since the workload started
  // The hlo workload's events (one per executed instruction of the simulated device) also say on which of the
  // device's streams they ran ("compute", "collectives", "network", "copies"; "" for other workloads), their class
  // ("fusion (dot)", "collective all-gather", ...), op_name scope, bytes (local ops: HBM bytes; collectives: S),
  // the mesh axes of a collective, and how long the compute stream waited for it (exposed).
  std::string stream;
  std::string category;
  std::string scope;
  double bytes = 0;
  std::string axes;
  double exposed_seconds = 0;
};

// One row of a collectives sweep (nccl-tests' output line).
struct SweepRow {
  std::string op;                  // JAX name: "psum", "all_gather", "psum_scatter", "all_to_all", "ppermute"
  std::vector<std::string> axes;
  int64_t group_size = 1;          // devices per group
  int64_t bytes = 0;               // bytes: nccl-tests' S (see CollectivesConfig::sizes)
  int64_t count = 0;               // elements per device of the INPUT buffer
  DType dtype = DType::kF32;
  int iterations = 0;              // timed iterations (warmup excluded)
  double predicted_seconds = 0;    // seconds per iteration on the topology (slowest group)
  double predicted_algbw = 0;      // bytes/s: S / predicted_seconds
  double predicted_busbw = 0;      // bytes/s: algbw x nccl-tests' factor
  double measured_seconds = 0;     // WALL seconds per iteration in the simulator (this machine's shared memory)
  double measured_algbw = 0;       // bytes/s: S / measured_seconds
  double measured_busbw = 0;       // bytes/s
  std::string algorithm;           // the collective algorithm of the prediction
  std::string protocol;            // its NCCL protocol (GPU: "ll", "ll128", "simple"); empty on TPU / CPU
  bool check_passed = true;        // the results equal the reference (always true when not checked)
  double max_abs_error = 0;        // max |got - want| of the check
};

// The partition workload's analysis.
struct PartitionParamResult {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  std::string source;                  // "spec", "logical", "regex rule <i> (<pattern>)", "default"
  PartitionSpec requested;             // the spec the rules/annotation gave
  PartitionSpec spec;                  // after correction (== requested when nothing was corrected)
  std::vector<Correction> corrections;
  int64_t global_bytes = 0;            // bytes
  int64_t bytes_per_device = 0;        // bytes
  int64_t replication = 1;             // devices holding each block
};

struct PartitionResult {
  std::vector<PartitionParamResult> params;
  MemoryAnalysis analysis;             // partition/memory_analysis.h (bytes per device / host, max/min, capacity)
  std::string largest, smallest;       // parameter names with the most / fewest bytes per device
};

// The hlo workload's totals by instruction class, its memory estimate and notes (workloads/hlo_workload.h).
struct HloSummary {
  std::string module;                  // the module's name
  int64_t instructions = 0;            // instructions in the module's computations (every one read)
  std::string compiled_for;            // the compiler that made it: "cpu", "tpu", "gpu", "unknown" (hlo/compiled_for.h)
  int64_t devices = 0;                 // logical devices it runs on (replica_count x num_partitions)
  int64_t simulated_devices = 1;       // devices simulated for the prediction (docs/hlo.md)
  int64_t executed_ops = 0;            // instructions executed on the simulated device (loops unrolled)
  double exposed_comm_seconds = 0;     // seconds the compute stream waited for collectives
  double hidden_comm_seconds = 0;      // collectives' time overlapped by compute
  std::vector<StepResult> by_class;    // one row per instruction class ("dot", "fusion", "collective all-reduce", ...)
  // Bytes per device in XLA's memory_analysis terms; the peak is arguments + outputs + temporaries - aliased (the
  // outputs written into donated arguments).
  int64_t argument_bytes = 0, output_bytes = 0, temp_bytes = 0, alias_bytes = 0;
  std::string peak_at;                 // the instruction where the temporaries peak
  std::vector<int64_t> measured_peak_bytes;  // runs with data: each logical device's peak in the simulator
  // Utilization. HFU: the dots' and convolutions' FLOPs per device over the step at the device's peak for their
  // element type (contraction_peak_flops); MFU (when HloConfig::model_flops_per_step is given): the model's FLOPs
  // per device over the step at that peak; tokens per second (when tokens_per_step is given). 0: not known.
  double contraction_flops = 0;
  double contraction_peak_flops = 0;
  double hfu = 0, mfu = 0, tokens_per_second = 0;
  std::vector<std::string> notes;      // assumptions (unknown trip counts, extrapolated loops)
};

// Several processes: kept arrays (WorkloadContext::keep_arrays) up to this many bytes are gathered whole to
// rank 0; larger ones are written shard by shard by their owners (`spmdsim run --dump`, docs/multiprocess.md).
inline constexpr int64_t kGatherArrayBytes = 16 * kMiB;

struct WorkloadResult {
  std::string name;                    // the workload's name (from its config)
  WorkloadKind kind = WorkloadKind::kShardMap;  // the engine (WorkloadKindName: "shard_map", ...)
  bool abstract = false;
  std::vector<StepResult> steps;       // in execution order
  WorkloadTotals totals;
  double wall_seconds = 0;             // wall seconds of the whole workload in the simulator (reference run excluded)
  MemoryResult memory;
  NumericCheck check;
  std::vector<TraceEvent> trace;       // when WorkloadContext::record_trace
  std::vector<SweepRow> sweep;         // collectives only
  std::optional<PartitionResult> partition;  // partition only
  std::optional<ModelAccounting> model;      // model only: the analytic accounting (model/model.h)
  std::optional<ModelStepTimes> model_step;  // model only: the simulated training step (model/model.h)
  std::optional<HloSummary> hlo;             // hlo only (workloads/hlo_workload.h)
  // Global (unsharded) arrays, when WorkloadContext::keep_arrays and not abstract (for --dump). Across ranks
  // (shard_map, mlp, transformer_block): arrays of at most kGatherArrayBytes are gathered to rank 0 and appear
  // there only; larger ones stay on their owners, in sharded_inputs / sharded_outputs.
  std::vector<std::pair<std::string, Array>> inputs;
  std::vector<std::pair<std::string, Array>> outputs;
  // Across ranks, kept arrays over kGatherArrayBytes: this rank's devices' shards (other shards abstract).
  std::vector<std::pair<std::string, ShardedArray>> sharded_inputs;
  std::vector<std::pair<std::string, ShardedArray>> sharded_outputs;
  // Mesh layout of every named value: name -> spec (mlp / transformer_block / shard_map inputs and outputs).
  std::vector<std::pair<std::string, PartitionSpec>> layouts;
};

// ---------------------------------------------------------------------------------------------------------------
// 1. collectives: an nccl-tests-like sweep.

struct CollectivesConfig {
  std::string name = "collectives";
  // JAX names (psum, all_gather, psum_scatter, all_to_all, ppermute; also pmean, pmax, pmin) or nccl-tests
  // names (all_reduce, reduce_scatter, alltoall, sendrecv).
  std::vector<std::string> ops = {"psum"};
  // Each entry is one group of mesh axes to run over (e.g. {{"model"}, {"data", "model"}}). Empty: each mesh
  // axis on its own.
  std::vector<std::vector<std::string>> axes;
  // Message sizes S in bytes, nccl-tests' convention per op (cost/collective_model.h):
  //   psum: the per-device buffer; all_gather: the per-device OUTPUT (n x input); psum_scatter: the per-device
  //   INPUT (n x output); all_to_all: the per-device send buffer; ppermute: bytes each device sends.
  // Each size is rounded DOWN to a multiple of n x element size (at least n elements); the row reports the
  // bytes actually used.
  std::vector<int64_t> sizes = {kMiB};
  DType dtype = DType::kF32;
  int iterations = 5;          // timed iterations per row
  int warmup = 1;              // untimed iterations per row (not charged to the clocks either)
  bool check = true;           // compare every result with the host reference
  int ppermute_shift = 1;      // ppermute sends in-group index i to (i + shift) mod n
  // Forced algorithm and NCCL protocol for this sweep (NCCL_ALGO / NCCL_PROTO); kAuto keeps the scenario's.
  Algorithm algorithm = Algorithm::kAuto;
  Protocol protocol = Protocol::kAuto;
};

// The sizes nccl-tests' -b min -e max -f factor sweeps: min, min*factor, ... <= max.
// REQUIRES: 0 < min <= max, factor >= 2 (Error(kInvalidArgument) otherwise).
std::vector<int64_t> SweepSizes(int64_t min_bytes, int64_t max_bytes, int64_t factor = 2);

WorkloadResult RunCollectives(const WorkloadContext& context, const CollectivesConfig& config);

// ---------------------------------------------------------------------------------------------------------------
// 2. shard_map: a program of named steps over named values.
//
// A step defines ONE new value `name` from `args` (earlier values or inputs) by `op`. It maps one-to-one to a
// YAML mapping: {name: h, op: einsum, args: [x, w1], equation: "bd,df->bf"}, {name: y, op: psum, args: [h2],
// axes: [model]}. Ops and the fields they read:
//   collectives   psum pmean pmax pmin (axes); all_gather (axes, axis, tiled); psum_scatter (axes, axis =
//                 scatter dimension, tiled); all_to_all (axes, split_axis, concat_axis, tiled); ppermute (axes,
//                 pairs); axis_index (axes; no args: an int32 scalar)
//   binary        add sub mul div max min pow, greater_equal (bool) (2 args; or 1 arg and `scalar`)
//   unary         neg abs exp log sqrt rsqrt tanh sigmoid relu gelu (approximate) silu square
//                 cast (dtype)
//   linalg        einsum (equation, >= 1 args), matmul, dot
//   reductions    sum mean max_reduce min_reduce (dims, keepdims; empty dims: all), softmax log_softmax (axis)
//   shape         reshape (shape), transpose (dims = permutation), slice (start, limit, strides),
//                 concatenate (axis), broadcast_to (shape)
//   gradients     gelu_grad (args [x, dy]: dy * gelu'(x)), softmax_grad (args [p, dp] with p = softmax(...,
//                 axis): p * (dp - sum(dp * p, axis))), relu_grad (args [x, dy])
struct ProgramStep {
  std::string name{};                  // the value it defines (unique within the program)
  std::string op{};
  std::vector<std::string> args{};     // names of earlier values / inputs
  std::vector<std::string> axes{};     // mesh axes (collectives)
  std::string equation{};              // einsum
  int axis = 0;                      // all_gather axis, psum_scatter dimension, softmax / concatenate axis
  int split_axis = 0, concat_axis = 0;  // all_to_all
  bool tiled = false;                // all_gather / psum_scatter / all_to_all
  std::vector<std::pair<int64_t, int64_t>> pairs{};  // ppermute (source, destination) in-group indices
  std::vector<int> dims{};             // reductions: axes; transpose: permutation
  bool keepdims = false;
  std::vector<int64_t> shape{};        // reshape / broadcast_to
  std::vector<int64_t> start{}, limit{}, strides{};  // slice
  std::optional<double> scalar{};      // binary op with a scalar right operand
  bool approximate = true;           // gelu / gelu_grad: tanh approximation (JAX's default)
  DType dtype = DType::kF32;         // cast
};

struct ProgramInput {
  std::string name{};
  Array value{};                       // the GLOBAL array (abstract allowed; made abstract in abstract mode);
                                       // with make_blocks it may be abstract: then only its shape and dtype count
  PartitionSpec spec{};                // in_spec
  // Optional, used when `value` is abstract: makes blocks of the global array (index ranges per dimension),
  // bitwise the same cut of the whole array. Across ranks (a process_group of several ranks) the engine makes
  // only the blocks of this rank's devices, and the whole array only for the one-device reference check; in one
  // process the whole array. Example: MakeScenarioArrayBlocks (scenario/arrays.h).
  std::function<std::vector<Array>(const std::vector<std::vector<IndexRange>>& blocks)> make_blocks{};
};

// The input's whole array: `value`, or made by make_blocks when `value` is abstract.
Array WholeProgramInput(const ProgramInput& input);

struct ProgramOutput {
  std::string name{};                  // a value of the program
  PartitionSpec spec{};                // out_spec
};

struct ShardMapConfig {
  std::string name = "shard_map";
  std::vector<ProgramInput> inputs;
  std::vector<ProgramStep> steps;
  std::vector<ProgramOutput> outputs;
  bool check_vma = true;             // shard_map's replication check (shardmap/shard_map.h)
  bool check = true;                 // compare with the program run on one device
  double rtol = 1e-5, atol = 1e-6;   // numpy.isclose tolerance of the check
};

// The ops ProgramStep accepts, sorted.
const std::vector<std::string>& ProgramOpNames();

WorkloadResult RunShardMapProgram(const WorkloadContext& context, const ShardMapConfig& config);

// ---------------------------------------------------------------------------------------------------------------
// 3. mlp and transformer_block: Megatron-style layers.

// Which mesh axes play which role (every list may be empty).
//   batch_axes   activations' batch dimension is split over them (data parallel; FSDP usually adds its axes
//                here too); weight gradients are summed over them.
//   fsdp_axes    weights' d_model dimension is split over them (ZeRO-3 / FSDP): all_gather before use,
//                psum_scatter of the gradient.
//   tensor_axes  Megatron tensor parallelism: d_ff and heads split; one psum (or, with sequence_parallel, an
//                all_gather before and a psum_scatter after) per block in each direction.
//   sequence_parallel  activations entering / leaving a block are split on seq over tensor_axes (Korthikanti et
//                al. 2022, "Reducing Activation Recomputation in Large Transformer Models").
struct LayerSharding {
  std::vector<std::string> batch_axes{};
  std::vector<std::string> fsdp_axes{};
  std::vector<std::string> tensor_axes{};
  bool sequence_parallel = false;

  // From logical axis rules (T5X / Flax names): batch -> batch_axes, embed -> fsdp_axes, mlp (or heads) ->
  // tensor_axes, length (or seq) mapped to the tensor axes -> sequence_parallel. Unmapped names: unsplit.
  static LayerSharding FromLogicalRules(const LogicalAxisRules& rules);
  std::string ToString() const;  // "batch=(data) fsdp=() tensor=(model) sp=false"
};

struct MlpConfig {
  std::string name = "mlp";
  int64_t batch = 8, seq = 16, d_model = 64, d_ff = 256;
  DType dtype = DType::kF32;
  std::string activation = "gelu";   // "gelu" or "relu"
  bool backward = true;              // also the gradients w.r.t. x, w1, w2 (loss = sum(y * dy), dy random)
  LayerSharding sharding{};
  uint64_t seed = 0;
  double rtol = 1e-4, atol = 1e-5;   // check tolerance (float32 default; use ~2e-2 for bfloat16)
  bool check = true;
};

struct TransformerBlockConfig {
  std::string name = "transformer_block";
  int64_t batch = 4, seq = 16, d_model = 64, d_ff = 256, heads = 4;  // head dim = d_model / heads
  DType dtype = DType::kF32;
  bool backward = true;
  LayerSharding sharding{};
  uint64_t seed = 0;
  double rtol = 1e-4, atol = 1e-5;
  bool check = true;
};

// The program each layer runs (for inspection, docs and tests): inputs with their specs, steps, outputs. Its
// random inputs are made when the program runs (ProgramInput::make_blocks, `value` abstract): WholeProgramInput
// gives one whole.
ShardMapConfig MlpProgram(const MlpConfig& config, const Mesh& mesh, bool abstract);
ShardMapConfig TransformerBlockProgram(const TransformerBlockConfig& config, const Mesh& mesh, bool abstract);

WorkloadResult RunMlp(const WorkloadContext& context, const MlpConfig& config);
WorkloadResult RunTransformerBlock(const WorkloadContext& context, const TransformerBlockConfig& config);

// ---------------------------------------------------------------------------------------------------------------
// 4. partition: parameter shapes and rules -> specs and memory.

struct PartitionParam {
  std::string name{};                        // '/'-joined path ("decoder/layers_0/mlp/wi/kernel")
  std::vector<int64_t> shape{};
  DType dtype = DType::kF32;
  std::optional<PartitionSpec> spec{};       // explicit spec (highest priority)
  std::optional<LogicalAxes> logical_axes{}; // logical names, mapped by `logical_rules`
};

struct PartitionConfig {
  std::string name = "partition";
  std::vector<PartitionParam> params;
  LogicalAxisRules logical_rules;          // for params with logical_axes
  std::vector<PartitionRule> regex_rules;  // for params with neither (first match wins; no match: P())
  CorrectionMode correction = CorrectionMode::kEformer;  // how specs that do not fit are repaired
};

WorkloadResult RunPartition(const WorkloadContext& context, const PartitionConfig& config);

// ---------------------------------------------------------------------------------------------------------------
// 5. model: a decoder-only transformer LM (model/model.h). Fills WorkloadResult::model (the analytic
// accounting), ::memory (per position: its pipeline stage's total), ::model_step and ::totals (PredictModelStep);
// `steps` stay empty. Not abstract: the training step also runs with data on the Runtime (float32; docs/model.md,
// "Running with data") and ::check compares its loss and every weight gradient with the same model on one
// device; wall_seconds is that run's. REQUIRES: model.mesh() is context.mesh. For a data run throws
// Error(kUnimplemented) (KV heads or vocab not split evenly over tensor ranks, MoE layers that differ between pipeline
// stages) or Error(kResourceExhausted) (too large), both suggesting --abstract.

WorkloadResult RunModel(const WorkloadContext& context, const ValidatedModel& model);

}  // namespace spmdsim

#endif  // SPMDSIM_WORKLOADS_WORKLOADS_H_
