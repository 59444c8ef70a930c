// PartitionAxis: eformer's table from semantic axes ('batch', 'head', 'kv_length', ...) to mesh axes, with
// generation-mode overrides and a process-wide registry of custom semantic axes
// (eformer: eformer/escale/partition/manager.py, PartitionAxis; constants from eformer/common_types.py).
//
// Fields and defaults (a default written as another field means that field's value after resolution):
//   data_parallel_axis 'dp', fully_sharded_data_parallel_axis 'fsdp', tensor_parallel_axis 'tp',
//   sequence_parallel_axis 'sp', expert_parallel_axis 'ep';
//   batch_axis (fsdp, dp); sequence_axis, query_sequence_axis, key_sequence_axis = sp; head_axis, kv_head_axis,
//   hidden_state_axis, mlp_intermediate_axis, vocab_axis = tp; expert_axis = ep; expert_gate_axis,
//   attention_dim_axis, attention_kv_dim_axis, bias_head_sequence_axis, bias_key_sequence_axis = None;
//   decode_batch_axis = batch_axis, decode_head_axis = head_axis, decode_kv_head_axis = kv_head_axis,
//   decode_key_sequence_axis = key_sequence_axis; decode_query_sequence_axis, decode_attention_dim_axis,
//   decode_attention_kv_dim_axis = None.
// Only fields left unset take their default; the defaults read the mesh-dimension fields as given.
//
// Resolution of one dimension (ResolveAxis):
//   None or '_'                      -> None
//   a semantic name (BATCH, ...)     -> its rule: a field name, read from this PartitionAxis
//   a composite (list of names)      -> each sub-name's rule, or the sub-name itself when it has none
//   in decode / insert mode          -> a registered generation rule if any, else the field's decode_* twin when
//                                       that twin is not None (so decode_* = None means "same as training")
//   rule values                      -> field names read one level; semantic names followed (cycles are errors);
//                                       anything else is a literal mesh axis
// Example (defaults): (BATCH, QUERY_LENGTH, HEAD, HEAD_DIM) in train mode -> P(('fsdp', 'dp'), 'sp', 'tp', None);
// with decode_query_sequence_axis='dp' in decode mode -> P(('fsdp', 'dp'), 'dp', 'tp', None).
//
// Deviations from eformer, each documented where it applies: a rule string matches a field only by the field's
// name (eformer's hasattr also matches method names such as 'register'); NOT_GIVEN cannot be passed, so the
// "was not resolved" / "still NOT_GIVEN" errors cannot occur; the registry lock is a reader-writer lock held for
// the whole of a resolution (eformer reads without it).
#ifndef SPMDSIM_PARTITION_PARTITION_AXIS_H_
#define SPMDSIM_PARTITION_PARTITION_AXIS_H_

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "partition/partition_spec.h"

namespace spmdsim {

// eformer's semantic axis tokens (eformer/common_types.py). They are the names resolve accepts.
namespace semantic {
inline constexpr std::string_view kEmpty = "_";
inline constexpr std::string_view kBatch = "__BATCH__";
inline constexpr std::string_view kLength = "__LENGTH__";
inline constexpr std::string_view kQueryLength = "__QUERY_LENGTH__";
inline constexpr std::string_view kKvLength = "__KV_LENGTH__";
inline constexpr std::string_view kEmbed = "__EMBED__";
inline constexpr std::string_view kHead = "__HEAD__";
inline constexpr std::string_view kKvHead = "__KV_HEAD__";
inline constexpr std::string_view kMlpIntermediate = "__MLP_INTERMEDIATE__";
inline constexpr std::string_view kVocab = "__VOCAB__";
inline constexpr std::string_view kExpert = "__EXPERT__";
inline constexpr std::string_view kExpertGate = "__EXPERT_GATE__";
inline constexpr std::string_view kHeadDim = "__HEAD_DIM__";
inline constexpr std::string_view kKvHeadDim = "__KV_HEAD_DIM__";
inline constexpr std::string_view kBiasHeadSeq = "__BIAS_HEAD_SEQ__";
inline constexpr std::string_view kBiasKvSeq = "__BIAS_KV_SEQ__";
inline constexpr std::string_view kDataParallel = "__DATA_PARALLEL__";                     // DP
inline constexpr std::string_view kFullyShardedDataParallel = "__FULLY_SHARDED_DATA_PARALLEL__";  // FSDP
inline constexpr std::string_view kTensorParallel = "__TENSOR_PARALLEL__";                 // TP
inline constexpr std::string_view kSequenceParallel = "__SEQUENCE_PARALLEL__";             // SP
inline constexpr std::string_view kExpertParallel = "__EXPERT_PARALLEL__";                 // EP
}  // namespace semantic

// The short names the CLI accepts, each with its token: batch -> __BATCH__, query_length -> __QUERY_LENGTH__,
// dp -> __DATA_PARALLEL__, ... (batch length query_length kv_length embed head kv_head mlp_intermediate vocab
// expert expert_gate head_dim kv_head_dim bias_head_seq bias_kv_seq dp fsdp tp sp ep).
const std::vector<std::pair<std::string_view, std::string_view>>& SemanticAxisShortNames();
// The token for a short name; any other text (a token, a registered name, '_') is returned unchanged.
std::string SemanticAxisFromShortName(std::string_view name);

// eformer's runtime modes. Decode and insert are the generation modes, which apply the decode_* overrides;
// prefill resolves as training does.
enum class RuntimeMode { kTrain, kPrefill, kDecode, kInsert };
// eformer's token: "__train__", "__prefill__", "__autoregressive__", "__insert__".
std::string_view RuntimeModeToken(RuntimeMode mode);
std::string_view RuntimeModeName(RuntimeMode mode);  // "train", "prefill", "decode", "insert"
// Accepts the name or the token; throws Error(kInvalidArgument) listing the valid modes.
RuntimeMode ParseRuntimeMode(std::string_view text);
bool IsGenerationMode(RuntimeMode mode);

// A field value or a registered rule: None, a name, or a tuple / list of rules (eformer keeps whichever the user
// gave; JAX turns both into a tuple). Immutable value.
class AxisRule {
 public:
  enum class Kind { kNone, kName, kTuple, kList };

  AxisRule() = default;  // None
  AxisRule(std::string name) : kind_(Kind::kName), name_(std::move(name)) {}  // NOLINT: implicit on purpose
  AxisRule(const char* name) : AxisRule(std::string(name)) {}                 // NOLINT
  AxisRule(std::string_view name) : AxisRule(std::string(name)) {}            // NOLINT
  static AxisRule None() { return AxisRule(); }
  static AxisRule Tuple(std::vector<AxisRule> items);
  static AxisRule List(std::vector<AxisRule> items);
  // CLI form: "none"/"None" -> None, "a+b" -> ('a', 'b'), anything else a name.
  static AxisRule Parse(std::string_view text);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_name() const { return kind_ == Kind::kName; }
  bool is_sequence() const { return kind_ == Kind::kTuple || kind_ == Kind::kList; }
  const std::string& name() const { return name_; }
  const std::vector<AxisRule>& items() const { return items_; }

  // The PartitionSpec entry JAX makes of it: '' and empty sequences become None, a one-item sequence its item, a
  // sequence holding a sequence is JAX's ValueError "A tuple inside PartitionSpec cannot contain a nested tuple.
  // Got partition: (('fsdp', 'dp'), 'tp') and the nested tuple: ('fsdp', 'dp')". A None inside a sequence
  // is an Error(kInvalidArgument) (JAX accepts it here and fails when the sharding is built).
  PartitionSpec::Entry ToEntry() const;

  // Python's repr: None, 'dp', ('fsdp', 'dp'), ['dp', 'dp'], ('x',).
  std::string ToString() const;
  bool operator==(const AxisRule& other) const = default;

 private:
  Kind kind_ = Kind::kNone;
  std::string name_;
  std::vector<AxisRule> items_;
};

// One dimension of ResolveAxis's input: None, a semantic name ('_' also means None) or a composite of names.
class SemanticAxis {
 public:
  SemanticAxis() = default;  // None
  SemanticAxis(std::string name) : name_(std::move(name)), is_name_(true) {}  // NOLINT: implicit on purpose
  SemanticAxis(const char* name) : SemanticAxis(std::string(name)) {}         // NOLINT
  SemanticAxis(std::string_view name) : SemanticAxis(std::string(name)) {}    // NOLINT
  static SemanticAxis Composite(std::vector<std::string> names);

  bool is_none() const { return !is_name_ && !is_composite_; }
  bool is_name() const { return is_name_; }
  bool is_composite() const { return is_composite_; }
  const std::string& name() const { return name_; }
  const std::vector<std::string>& names() const { return names_; }  // the composite's parts
  std::string ToString() const;  // None, '__BATCH__', ['__FULLY_SHARDED_DATA_PARALLEL__', '__SEQUENCE_PARALLEL__']
  bool operator==(const SemanticAxis& other) const = default;

 private:
  std::string name_;
  std::vector<std::string> names_;
  bool is_name_ = false;
  bool is_composite_ = false;
};
using SemanticAxes = std::vector<SemanticAxis>;

// CLI form: "batch,_,fsdp+sp" -> (BATCH, None, [FSDP, SP]); short names become tokens (SemanticAxisFromShortName),
// `_` and `None` are None. Throws Error(kInvalidArgument) for an empty item.
SemanticAxes ParseSemanticAxes(std::string_view text);

class PartitionAxis {
 public:
  // Every field, in eformer's declaration order.
  enum class Field {
    kDataParallelAxis,
    kFullyShardedDataParallelAxis,
    kTensorParallelAxis,
    kSequenceParallelAxis,
    kExpertParallelAxis,
    kBatchAxis,
    kSequenceAxis,
    kQuerySequenceAxis,
    kHeadAxis,
    kKvHeadAxis,
    kKeySequenceAxis,
    kHiddenStateAxis,
    kMlpIntermediateAxis,
    kVocabAxis,
    kExpertAxis,
    kExpertGateAxis,
    kAttentionDimAxis,
    kAttentionKvDimAxis,
    kBiasHeadSequenceAxis,
    kBiasKeySequenceAxis,
    kDecodeBatchAxis,
    kDecodeQuerySequenceAxis,
    kDecodeHeadAxis,
    kDecodeKvHeadAxis,
    kDecodeKeySequenceAxis,
    kDecodeAttentionDimAxis,
    kDecodeAttentionKvDimAxis,
  };
  static constexpr int kNumFields = 27;
  static std::string_view FieldName(Field field);  // "data_parallel_axis", ...
  static std::optional<Field> FindField(std::string_view name);

  // Every field at its default.
  PartitionAxis();
  // eformer's PartitionAxis(**overrides): (field name, value) pairs; the rest take their defaults. An unknown
  // field is Python's TypeError "PartitionAxis.__init__() got an unexpected keyword argument 'x'".
  explicit PartitionAxis(std::span<const std::pair<std::string, AxisRule>> overrides);
  PartitionAxis(std::initializer_list<std::pair<std::string, AxisRule>> overrides)
      : PartitionAxis(std::span<const std::pair<std::string, AxisRule>>(overrides.begin(), overrides.size())) {}

  const AxisRule& Get(Field field) const { return fields_[static_cast<int>(field)]; }
  // Throws Error(kNotFound) naming the valid fields.
  const AxisRule& Get(std::string_view field_name) const;

  // eformer `resolve_axis(axes, mode)`: one resolved rule per dimension (tuples / lists kept as eformer returns
  // them). Throws ValueError "Unknown semantic axis name: 'x'" and "Cyclic semantic axis registration detected
  // at 'x'." Thread-safe against concurrent Register / Unregister.
  std::vector<AxisRule> ResolveAxis(std::span<const SemanticAxis> axes, RuntimeMode mode) const;
  // eformer `resolve_spec`: ResolveAxis made into a PartitionSpec (AxisRule::ToEntry per dimension).
  PartitionSpec ResolveSpec(std::span<const SemanticAxis> axes, RuntimeMode mode) const;

  // "PartitionAxis(data_parallel_axis='dp', ..., decode_attention_kv_dim_axis=None)".
  std::string ToString() const;
  bool operator==(const PartitionAxis& other) const = default;

  // ---- The process-wide registry of custom semantic axes (eformer: PartitionAxis.register & co). ----
  // A rule may be a field name, a semantic name, a literal mesh axis, a tuple / list of those, or None. Without
  // `generation_axis_rule` (eformer: NOT_GIVEN), a rule naming a field with a decode_* twin gets that twin as its
  // generation rule (e.g. 'query_sequence_axis' -> 'decode_query_sequence_axis'); an explicit None makes decode
  // resolve to None. Registering an existing name (built-in or custom) without `override` is ValueError
  // "Semantic axis 'x' already exists. Use override=True to replace it."; an empty name (after stripping
  // whitespace) is ValueError "`semantic_axis` must be a non-empty string.". A custom rule shadows the built-in
  // of the same name until unregistered.
  static void Register(std::string_view semantic_axis, AxisRule axis_rule,
                       std::optional<AxisRule> generation_axis_rule = std::nullopt, bool override = false);
  // Removes a custom axis; a missing one is fine unless !missing_ok (KeyError "Semantic axis 'x' is not
  // registered."). Empty names are the same ValueError as Register's.
  static void Unregister(std::string_view semantic_axis, bool missing_ok = true);
  static void ClearRegisteredAxes();
  struct RegisteredAxis {
    std::string name;
    AxisRule axis_rule;
    std::optional<AxisRule> generation_axis_rule;  // nullopt: eformer's NOT_GIVEN
    bool operator==(const RegisteredAxis& other) const = default;
  };
  // A snapshot, in registration order.
  static std::vector<RegisteredAxis> GetRegisteredAxes();

 private:
  AxisRule ResolveRule(const AxisRule& rule, std::vector<std::string>* visited) const;

  std::array<AxisRule, kNumFields> fields_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_PARTITION_AXIS_H_
