// The HLO module spmdsim imports: what XLA's text (`compiled.as_text()`, `--xla_dump_to` files) holds, as a
// validated, immutable tree of computations and instructions (XLA: HloModule, HloComputation,
// HloInstruction).
//
// A Module owns its computations; a Computation owns its instructions in text order (for a scheduled module
// the order is XLA's schedule); an Instruction refers to its operands and to the computations it calls by
// pointer. Every instruction keeps where it was written (line and column) and its metadata op_name, for
// errors and reports.
//
// Example (the module `jax.jit(lambda x: x * 2)` compiles to, abridged):
//   HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}
//   ENTRY %main (x: f32[4]) -> f32[4] {
//     %x = f32[4]{0} parameter(0)
//     %c = f32[] constant(2)
//     %b = f32[4]{0} broadcast(%c), dimensions={}
//     ROOT %m = f32[4]{0} multiply(%x, %b)
//   }
//   module.entry()->root()->opcode() == Opcode::kMultiply;  root->operand(1)->attrs().dimensions.empty()
//
// The attributes that carry semantics are parsed into typed fields (Attributes below); any other attribute is
// kept as text. Parsing (hlo/parser.h) checks the syntax; hlo/verify.h checks every instruction's operands,
// attributes and shape against XLA's shape rules, so that the interpreter and the cost model can trust them.
//
// Thread safety: a Module is immutable once parsed and verified; any number of threads may read it.
#ifndef SPMDSIM_HLO_IR_H_
#define SPMDSIM_HLO_IR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hlo/opcode.h"
#include "hlo/shape.h"

namespace spmdsim::hlo {

class Computation;
class Module;

// Where something was written in the module's text: 1-based line and column (in bytes).
struct TextLocation {
  int line = 0;
  int column = 0;
};

// slice={[start:limit:stride], ...}
struct SliceDim {
  int64_t start = 0, limit = 0, stride = 1;
};

// padding=lo_hi[_interior]x... (pad); also a window's pad=lo_hi.
struct PadDim {
  int64_t low = 0, high = 0, interior = 0;
};

// window={size=2x2 stride=1x1 pad=0_0x0_0 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x0}; one per dimension.
struct WindowDim {
  int64_t size = 1, stride = 1, pad_low = 0, pad_high = 0, lhs_dilation = 1, rhs_dilation = 1;
  bool reversal = false;
};

// dot: lhs_batch_dims, lhs_contracting_dims, rhs_batch_dims, rhs_contracting_dims.
struct DotDims {
  std::vector<int64_t> lhs_batch, lhs_contracting, rhs_batch, rhs_contracting;
};

// convolution: dim_labels=b01f_01io->b01f (input batch, feature, spatial; kernel input and output feature,
// spatial; output batch, feature, spatial).
struct ConvDims {
  int64_t input_batch = 0, input_feature = 1;
  std::vector<int64_t> input_spatial;
  int64_t kernel_input_feature = 0, kernel_output_feature = 1;
  std::vector<int64_t> kernel_spatial;
  int64_t output_batch = 0, output_feature = 1;
  std::vector<int64_t> output_spatial;
};

// gather: offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim, slice_sizes,
// operand_batching_dims, start_indices_batching_dims.
struct GatherDims {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map, operand_batching_dims,
      start_indices_batching_dims, slice_sizes;
  int64_t index_vector_dim = 0;
};

// scatter: update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims, index_vector_dim,
// input_batching_dims, scatter_indices_batching_dims.
struct ScatterDims {
  std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
      input_batching_dims, scatter_indices_batching_dims;
  int64_t index_vector_dim = 0;
};

enum class ComparisonDirection : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };
// compare's type=: the default depends on the element type (floats: FLOAT; signed: SIGNED; ...).
enum class ComparisonType : uint8_t { kDefault, kFloat, kTotalOrder, kSigned, kUnsigned };

// sharding={...} (XLA's HloSharding, as printed):
//   {replicated}  {maximal device=3}  {manual}  {devices=[2,4]0,1,2,3,4,5,6,7}  {devices=[2,4]<=[8]}
//   {devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}  {devices=[2,1,4]<=[8] last_tile_dims={manual}}
//   {{replicated}, {devices=[2]0,1}}  (a tuple)
struct Sharding {
  enum class Kind : uint8_t { kReplicated, kMaximal, kManual, kTiled, kTuple, kUnknown };
  Kind kind = Kind::kReplicated;
  int64_t maximal_device = 0;
  // kTiled: the tile assignment's dimensions (data dimensions, then replicated / manual subgroup dimensions)
  // and its devices in row-major order of those dimensions.
  std::vector<int64_t> tile_dims;
  std::vector<int64_t> tile_devices;
  int subgroup_dims = 0;  // trailing tile dimensions that are replication or manual subgroups
  std::vector<Sharding> tuple;
  std::string ToString() const;
};

// output_to_operand_aliasing={{0}: (1, {})} (fusion, custom-call, async-start): the output at `output_index`
// shares the buffer of operand `operand_number` at `operand_index` (shape indices; {} is the whole value).
struct OutputOperandAlias {
  std::vector<int64_t> output_index;
  int64_t operand_number = 0;
  std::vector<int64_t> operand_index;
};

// The module header's input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }: the entry's
// output at `output_index` reuses the buffer of parameter `parameter_number` at `parameter_index` (a donated
// argument). must-alias: the runtime must alias them; may-alias: it may.
struct InputOutputAlias {
  std::vector<int64_t> output_index;
  int64_t parameter_number = 0;
  std::vector<int64_t> parameter_index;
  bool must_alias = false;
};

// One Python stack frame of the module's debug information (the FileNames, FunctionNames, FileLocations and
// StackFrames sections after the header), which metadata's stack_frame_id names.
//   FileLocations  3 {file_name_id=1 function_name_id=3 line=133 end_line=133 column=18 end_column=18}
//   StackFrames    3 {file_location_id=3 parent_frame_id=3}      (parent_frame_id is the parent's id + 1)
// -> frame 3: file "/work/step.py", function "step", line 133, column 18, parent frame 2.
struct StackFrame {
  std::string file;
  std::string function;
  int64_t line = 0, end_line = 0, column = 0, end_column = 0;
  int64_t parent_id = 0;  // the calling frame's id (1-based); 0 for the outermost frame
};

// Each group of a collective in order, each a list of ids (replica, partition or global device ids, as the
// instruction's mode says; XLA's CollectiveOpGroupMode). Empty: every id in one group.
using ReplicaGroups = std::vector<std::vector<int64_t>>;

// The typed attributes. Which fields an opcode uses is documented in hlo/verify.h; others keep their defaults.
struct Attributes {
  std::vector<int64_t> dimensions;          // dimensions={...}: broadcast, reduce, transpose, reverse,
                                            // concatenate, all-gather, reduce-scatter, all-to-all, sort
  std::vector<SliceDim> slice;              // slice
  std::vector<int64_t> dynamic_slice_sizes; // dynamic-slice
  std::vector<PadDim> padding;              // pad
  std::vector<WindowDim> window;            // reduce-window, select-and-scatter, convolution
  DotDims dot;                              // dot
  ConvDims conv;                            // convolution
  int64_t feature_group_count = 1, batch_group_count = 1;  // convolution
  GatherDims gather;                        // gather
  ScatterDims scatter;                      // scatter
  bool indices_are_sorted = false, unique_indices = false;  // gather, scatter
  ComparisonDirection direction = ComparisonDirection::kEq;  // compare
  ComparisonType comparison_type = ComparisonType::kDefault;
  int64_t index = 0;                        // get-tuple-element
  int64_t iota_dimension = 0;               // iota
  int64_t parameter_number = 0;             // parameter
  bool is_stable = false;                   // sort
  int64_t exponent_bits = 0, mantissa_bits = 0;  // reduce-precision
  std::string fusion_kind;                  // fusion: kLoop, kInput, kOutput, kCustom
  std::string custom_call_target;           // custom-call
  std::string rng_algorithm;                // rng-bit-generator: rng_default, rng_three_fry, rng_philox
  std::string rng_distribution;             // rng: rng_uniform, rng_normal
  // Collectives.
  bool has_replica_groups = false;
  ReplicaGroups replica_groups;
  std::optional<int64_t> channel_id;
  bool use_global_device_ids = false;
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;  // collective-permute
  std::optional<int64_t> split_dimension;   // all-to-all (array form)
  int64_t topk_k = 0;                       // topk: k
  bool topk_largest = true;                 // topk: largest
  // while: backend_config={"known_trip_count":{"n":"4"}, ...}; -1 when absent.
  int64_t known_trip_count = -1;
  std::optional<Sharding> sharding;
  // metadata={op_name="jit(f)/dot_general" stack_frame_id=3 scheduling_name="dot.1" ...} (space-separated items).
  std::string op_name;
  std::string op_type, source_file, scheduling_name, deduplicated_name;
  int64_t source_line = 0;
  int64_t stack_frame_id = 0;               // Module::stack_frame(id); 0: none
  // frontend_attributes={_xla_megascale_target="{1,2}x{0:15}",chain_id="0"}: key -> value (unquoted).
  std::map<std::string, std::string> frontend_attributes;
  // backend_config: the text as written (a JSON object, or a quoted string's value); what carries meaning is read
  // into the fields below (and known_trip_count above) when it is JSON.
  std::string backend_config;
  bool is_sync = false;                     // GPU collective_backend_config.is_sync
  bool is_pipelined = false;                // GPU collective_backend_config.is_pipelined
  std::string gpu_fusion_kind;              // GPU fusion_backend_config.kind: "__triton_nested_gemm_fusion",
                                            // "__triton", "__custom_fusion", "__cudnn$fmha", ...
  bool has_async_collective_fusion_config = false;  // TPU: an all-gather fused into an async collective fusion
  std::vector<OutputOperandAlias> output_to_operand_aliasing;  // fusion, custom-call, async-start
  std::optional<int64_t> cross_program_prefetch_index;        // copy-start (TPU cross-program prefetch)
  bool is_host_transfer = false;            // send, recv, send-done, recv-done
  std::vector<Shape> operand_layout_constraints;  // custom-call: {s32[1024]{0:T(1024)}, ...}
  bool custom_call_has_side_effect = false;
  std::string api_version;                  // custom-call: API_VERSION_ORIGINAL, API_VERSION_TYPED_FFI, ...
  // async-start (and the X-start shorthand): the thread the wrapped computation runs on ("sparsecore" on TPU7x).
  std::string async_execution_thread = "main";
  // Every attribute as written (name -> value text), including the typed ones.
  std::vector<std::pair<std::string, std::string>> raw;
};

// A constant's elements, row-major, each in its dtype's native size (pred: one byte 0/1; bf16/f16: the bits;
// c64/c128: real then imaginary part). `elided` when the text printed {...} (XLA elides large constants unless asked
// to print them), and for f8 constants, whose values are read but not kept (no f8 arithmetic: they run abstract).
struct Literal {
  std::vector<uint8_t> bytes;
  bool elided = false;
};

class Instruction {
 public:
  const std::string& name() const { return name_; }
  Opcode opcode() const { return opcode_; }
  const Shape& shape() const { return shape_; }
  int64_t operand_count() const { return static_cast<int64_t>(operands_.size()); }
  const Instruction* operand(int64_t i) const { return operands_[i]; }
  const std::vector<const Instruction*>& operands() const { return operands_; }
  // The instructions of its computation that use it, in schedule order, once per use (an instruction using it as
  // two operands is listed twice).
  const std::vector<const Instruction*>& users() const { return users_; }
  // The computations it calls, by role: to_apply (reduce, all-reduce, map, sort comparator, scatter, reduce-window,
  // select-and-scatter's scatter, call), calls (fusion, call, async-start), condition + body (while),
  // branch_computations or true + false (conditional), select (select-and-scatter). async-update and async-done
  // call their async-start's wrapped computation.
  const std::vector<const Computation*>& called() const { return called_; }
  const Computation* to_apply() const { return to_apply_; }
  const Computation* select() const { return select_; }
  const Attributes& attrs() const { return attrs_; }
  const Literal& literal() const { return literal_; }  // constant only
  // control-predecessors={%a, %b}: instructions of the same computation that must run before this one (ordering
  // only; no data flows).
  const std::vector<const Instruction*>& control_predecessors() const { return control_predecessors_; }
  TextLocation location() const { return location_; }
  // Index in its computation's instruction list (the schedule order).
  int32_t index() const { return index_; }
  const Computation* parent() const { return parent_; }
  bool is_root() const;
  // "file:line:col" of this instruction in its module's text.
  std::string Where() const;

 private:
  friend class Parser;
  friend class Computation;
  std::string name_;
  Opcode opcode_ = Opcode::kParameter;
  Shape shape_;
  std::vector<const Instruction*> operands_;
  std::vector<const Instruction*> users_;
  std::vector<const Computation*> called_;
  const Computation* to_apply_ = nullptr;
  const Computation* select_ = nullptr;
  Attributes attrs_;
  Literal literal_;
  std::vector<const Instruction*> control_predecessors_;
  TextLocation location_;
  int32_t index_ = 0;
  const Computation* parent_ = nullptr;
};

// The instruction an async-start, async-update or async-done wraps: the root of its wrapped computation
// (`reduce-scatter-start(...)` is read as an async-start wrapping a reduce-scatter, as XLA's parser reads it);
// nullptr for any other instruction.
// Example: for %rs = ((bf16[512]), bf16[64]) reduce-scatter-start(%x), dimensions={0}, to_apply=%add and its
//   %rsd = bf16[64] reduce-scatter-done(%rs): AsyncWrapped(*rs)->opcode() == AsyncWrapped(*rsd)->opcode() ==
//   Opcode::kReduceScatter, with dimensions {0} and to_apply %add.
const Instruction* AsyncWrapped(const Instruction& async_op);

class Computation {
 public:
  const std::string& name() const { return name_; }
  bool is_entry() const { return is_entry_; }
  // Instructions in text (schedule) order.
  int64_t instruction_count() const { return static_cast<int64_t>(instructions_.size()); }
  const Instruction* instruction(int64_t i) const { return instructions_[i].get(); }
  const Instruction* root() const { return root_; }
  int64_t parameter_count() const { return static_cast<int64_t>(parameters_.size()); }
  const Instruction* parameter(int64_t i) const { return parameters_[i]; }
  TextLocation location() const { return location_; }
  const Module* module() const { return module_; }
  // The computation's trailer `}, execution_thread="sparsecore"`: the thread it runs on ("main" by default).
  const std::string& execution_thread() const { return execution_thread_; }
  // Made by the parser for an async shorthand (`reduce-scatter-start(...)`, `call-start(...)`): parameters for the
  // start's operands and the wrapped instruction as root, named "<start>.async_wrapped". Not in the text: its
  // instructions are located at the start's and are not counted by Module::instruction_count().
  bool is_async_wrapped() const { return is_async_wrapped_; }

 private:
  friend class Parser;
  std::string name_;
  bool is_entry_ = false;
  bool is_async_wrapped_ = false;
  std::string execution_thread_ = "main";
  std::vector<std::unique_ptr<Instruction>> instructions_;
  std::vector<const Instruction*> parameters_;  // by parameter number
  const Instruction* root_ = nullptr;
  TextLocation location_;
  const Module* module_ = nullptr;
};

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }
  // The file name given to the parser (for messages): "model.after_optimizations.txt", "<text>".
  const std::string& file() const { return file_; }
  const Computation* entry() const { return entry_; }
  int64_t computation_count() const { return static_cast<int64_t>(computations_.size()); }
  const Computation* computation(int64_t i) const { return computations_[i].get(); }
  const Computation* FindComputation(std::string_view name) const;
  int64_t num_partitions() const { return num_partitions_; }
  int64_t replica_count() const { return replica_count_; }
  bool is_scheduled() const { return is_scheduled_; }
  // entry_computation_layout={(params...)->result}: the parameter and result shapes with layouts (empty when
  // the header has none; the entry's parameter instructions then say the same).
  const std::vector<Shape>& entry_parameter_layouts() const { return entry_parameter_layouts_; }
  const std::optional<Shape>& entry_result_layout() const { return entry_result_layout_; }
  // Header attributes as written (name -> value text).
  const std::vector<std::pair<std::string, std::string>>& header_attributes() const { return header_; }
  // input_output_alias={...}: the entry's outputs that reuse parameters' buffers (verified: both exist and have
  // the same array shape).
  const std::vector<InputOutputAlias>& input_output_aliases() const { return input_output_aliases_; }
  // The header's frontend_attributes={key="value", ...}: key -> value (a quoted value unquoted, a braced one as
  // written).
  const std::map<std::string, std::string, std::less<>>& frontend_attributes() const { return frontend_attributes_; }
  // The debug information's stack frames (ids 1..stack_frame_count()).
  int64_t stack_frame_count() const { return static_cast<int64_t>(stack_frames_.size()); }
  // Frame `id` (metadata's stack_frame_id), or nullptr for 0 or an id the module does not list.
  const StackFrame* stack_frame(int64_t id) const;
  // The Python source location of an instruction: its stack frame (follow parent_id for the callers), or nullptr.
  const StackFrame* SourceOf(const Instruction& ins) const { return stack_frame(ins.attrs().stack_frame_id); }
  // "file:line:col".
  std::string Where(TextLocation location) const;
  // Every instruction written in the text (not those of the computations an async shorthand makes).
  int64_t instruction_count() const;

 private:
  friend class Parser;
  std::string name_;
  std::string file_;
  std::vector<std::unique_ptr<Computation>> computations_;
  std::map<std::string, const Computation*, std::less<>> by_name_;
  const Computation* entry_ = nullptr;
  int64_t num_partitions_ = 1;
  int64_t replica_count_ = 1;
  bool is_scheduled_ = false;
  std::vector<Shape> entry_parameter_layouts_;
  std::optional<Shape> entry_result_layout_;
  std::vector<std::pair<std::string, std::string>> header_;
  std::vector<InputOutputAlias> input_output_aliases_;
  std::map<std::string, std::string, std::less<>> frontend_attributes_;
  std::vector<StackFrame> stack_frames_;
};

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_IR_H_
