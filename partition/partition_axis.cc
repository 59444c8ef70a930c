#include "partition/partition_axis.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/error.h"
#include "common/strings.h"
#include "common/thread_annotations.h"

namespace spmdsim {
namespace {

using Field = PartitionAxis::Field;

constexpr std::array<std::string_view, PartitionAxis::kNumFields> kFieldNames = {
    "data_parallel_axis",
    "fully_sharded_data_parallel_axis",
    "tensor_parallel_axis",
    "sequence_parallel_axis",
    "expert_parallel_axis",
    "batch_axis",
    "sequence_axis",
    "query_sequence_axis",
    "head_axis",
    "kv_head_axis",
    "key_sequence_axis",
    "hidden_state_axis",
    "mlp_intermediate_axis",
    "vocab_axis",
    "expert_axis",
    "expert_gate_axis",
    "attention_dim_axis",
    "attention_kv_dim_axis",
    "bias_head_sequence_axis",
    "bias_key_sequence_axis",
    "decode_batch_axis",
    "decode_query_sequence_axis",
    "decode_head_axis",
    "decode_kv_head_axis",
    "decode_key_sequence_axis",
    "decode_attention_dim_axis",
    "decode_attention_kv_dim_axis",
};

// eformer PartitionAxis._SEMANTIC_MAP: token -> field name ('_' maps to None, i.e. "no rule").
struct BuiltinSemantic {
  std::string_view token;
  std::string_view field;  // empty: None
};
constexpr std::array<BuiltinSemantic, 21> kBuiltinSemantics = {{
    {semantic::kBatch, "batch_axis"},
    {semantic::kLength, "sequence_axis"},
    {semantic::kQueryLength, "query_sequence_axis"},
    {semantic::kKvLength, "key_sequence_axis"},
    {semantic::kEmbed, "hidden_state_axis"},
    {semantic::kHead, "head_axis"},
    {semantic::kKvHead, "kv_head_axis"},
    {semantic::kMlpIntermediate, "mlp_intermediate_axis"},
    {semantic::kVocab, "vocab_axis"},
    {semantic::kExpert, "expert_axis"},
    {semantic::kExpertGate, "expert_gate_axis"},
    {semantic::kHeadDim, "attention_dim_axis"},
    {semantic::kKvHeadDim, "attention_kv_dim_axis"},
    {semantic::kBiasHeadSeq, "bias_head_sequence_axis"},
    {semantic::kBiasKvSeq, "bias_key_sequence_axis"},
    {semantic::kEmpty, ""},
    {semantic::kDataParallel, "data_parallel_axis"},
    {semantic::kFullyShardedDataParallel, "fully_sharded_data_parallel_axis"},
    {semantic::kTensorParallel, "tensor_parallel_axis"},
    {semantic::kSequenceParallel, "sequence_parallel_axis"},
    {semantic::kExpertParallel, "expert_parallel_axis"},
}};

// eformer PartitionAxis._STANDARD_TO_GENERATION_ATTR_MAP.
constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kGenerationTwins = {{
    {"batch_axis", "decode_batch_axis"},
    {"query_sequence_axis", "decode_query_sequence_axis"},
    {"key_sequence_axis", "decode_key_sequence_axis"},
    {"head_axis", "decode_head_axis"},
    {"kv_head_axis", "decode_kv_head_axis"},
    {"attention_dim_axis", "decode_attention_dim_axis"},
    {"attention_kv_dim_axis", "decode_attention_kv_dim_axis"},
}};

std::string_view GenerationTwin(std::string_view field) {
  for (const auto& [standard, decode] : kGenerationTwins) {
    if (standard == field) return decode;
  }
  return {};
}

// The registry (eformer: _REGISTERED_SEMANTIC_MAP / _REGISTERED_GENERATION_MAP under _REGISTRY_LOCK).
struct Registry {
  SharedMutex mutex;
  // Registration order, as a Python dict keeps it.
  std::vector<std::pair<std::string, AxisRule>> semantic SPMDSIM_GUARDED_BY(mutex);
  std::vector<std::pair<std::string, AxisRule>> generation SPMDSIM_GUARDED_BY(mutex);
};
Registry& GetRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

template <typename Map>
auto FindIn(Map& map, std::string_view name) {
  return std::find_if(map.begin(), map.end(), [&](const auto& entry) { return entry.first == name; });
}

// eformer _lookup_semantic_mapping: the custom rule, else the built-in field name, else None.
AxisRule LookupSemantic(const Registry& registry, std::string_view name) SPMDSIM_REQUIRES_SHARED(registry.mutex) {
  if (auto it = FindIn(registry.semantic, name); it != registry.semantic.end()) return it->second;
  for (const BuiltinSemantic& builtin : kBuiltinSemantics) {
    if (builtin.token == name) return builtin.field.empty() ? AxisRule::None() : AxisRule(builtin.field);
  }
  return AxisRule::None();
}

// eformer _lookup_generation_mapping; nullopt is NOT_GIVEN.
std::optional<AxisRule> LookupGeneration(const Registry& registry, std::string_view name)
    SPMDSIM_REQUIRES_SHARED(registry.mutex) {
  if (auto it = FindIn(registry.generation, name); it != registry.generation.end()) return it->second;
  return std::nullopt;
}

bool IsBuiltinSemantic(std::string_view name) {
  return std::any_of(kBuiltinSemantics.begin(), kBuiltinSemantics.end(),
                     [&](const BuiltinSemantic& b) { return b.token == name; });
}

std::string StrippedName(std::string_view semantic_axis) {
  std::string name(Trim(semantic_axis));
  if (name.empty())
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "`semantic_axis` must be a non-empty string.");
  return name;
}

std::string SequenceRepr(const std::vector<std::string>& parts, bool list) {
  if (list) return fmt::format("[{}]", fmt::join(parts, ", "));
  if (parts.size() == 1) return fmt::format("({},)", parts[0]);
  return fmt::format("({})", fmt::join(parts, ", "));
}

}  // namespace

const std::vector<std::pair<std::string_view, std::string_view>>& SemanticAxisShortNames() {
  static const std::vector<std::pair<std::string_view, std::string_view>> names = {
      {"batch", semantic::kBatch},
      {"length", semantic::kLength},
      {"query_length", semantic::kQueryLength},
      {"kv_length", semantic::kKvLength},
      {"embed", semantic::kEmbed},
      {"head", semantic::kHead},
      {"kv_head", semantic::kKvHead},
      {"mlp_intermediate", semantic::kMlpIntermediate},
      {"vocab", semantic::kVocab},
      {"expert", semantic::kExpert},
      {"expert_gate", semantic::kExpertGate},
      {"head_dim", semantic::kHeadDim},
      {"kv_head_dim", semantic::kKvHeadDim},
      {"bias_head_seq", semantic::kBiasHeadSeq},
      {"bias_kv_seq", semantic::kBiasKvSeq},
      {"dp", semantic::kDataParallel},
      {"fsdp", semantic::kFullyShardedDataParallel},
      {"tp", semantic::kTensorParallel},
      {"sp", semantic::kSequenceParallel},
      {"ep", semantic::kExpertParallel},
  };
  return names;
}

std::string SemanticAxisFromShortName(std::string_view name) {
  for (const auto& [short_name, token] : SemanticAxisShortNames()) {
    if (short_name == name) return std::string(token);
  }
  return std::string(name);
}

std::string_view RuntimeModeToken(RuntimeMode mode) {
  switch (mode) {
    case RuntimeMode::kTrain: return "__train__";
    case RuntimeMode::kPrefill: return "__prefill__";
    case RuntimeMode::kDecode: return "__autoregressive__";
    case RuntimeMode::kInsert: return "__insert__";
  }
  return "";
}

std::string_view RuntimeModeName(RuntimeMode mode) {
  switch (mode) {
    case RuntimeMode::kTrain: return "train";
    case RuntimeMode::kPrefill: return "prefill";
    case RuntimeMode::kDecode: return "decode";
    case RuntimeMode::kInsert: return "insert";
  }
  return "";
}

RuntimeMode ParseRuntimeMode(std::string_view text) {
  for (RuntimeMode mode : {RuntimeMode::kTrain, RuntimeMode::kPrefill, RuntimeMode::kDecode, RuntimeMode::kInsert}) {
    if (text == RuntimeModeName(mode) || text == RuntimeModeToken(mode)) return mode;
  }
  Throw(ErrorCode::kInvalidArgument, "unknown mode '{}'; valid modes are train, prefill, decode, insert", text);
}

bool IsGenerationMode(RuntimeMode mode) { return mode == RuntimeMode::kDecode || mode == RuntimeMode::kInsert; }

// ---- AxisRule ----

AxisRule AxisRule::Tuple(std::vector<AxisRule> items) {
  AxisRule rule;
  rule.kind_ = Kind::kTuple;
  rule.items_ = std::move(items);
  return rule;
}

AxisRule AxisRule::List(std::vector<AxisRule> items) {
  AxisRule rule = Tuple(std::move(items));
  rule.kind_ = Kind::kList;
  return rule;
}

AxisRule AxisRule::Parse(std::string_view text) {
  text = Trim(text);
  if (text == "none" || text == "None") return None();
  if (text.find('+') == std::string_view::npos) return AxisRule(text);
  std::vector<AxisRule> items;
  for (const std::string& part : Split(text, '+')) {
    std::string_view name = Trim(part);
    if (name.empty()) Throw(ErrorCode::kInvalidArgument, "axis rule '{}': empty name in a+b", text);
    items.emplace_back(name);
  }
  return Tuple(std::move(items));
}

PartitionSpec::Entry AxisRule::ToEntry() const {
  switch (kind_) {
    case Kind::kNone: return PartitionSpec::Entry::None();
    case Kind::kName: return PartitionSpec::Entry::Axis(name_);
    case Kind::kTuple:
    case Kind::kList: break;
  }
  if (items_.empty()) return PartitionSpec::Entry::None();
  for (const AxisRule& item : items_) {
    if (item.is_sequence()) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "A tuple inside PartitionSpec cannot contain a nested tuple. Got partition: {} and the nested "
                "tuple: {}",
                ToString(), item.ToString());
    }
  }
  if (items_.size() == 1) return items_[0].ToEntry();
  std::vector<std::string> names;
  for (const AxisRule& item : items_) {
    if (item.is_none()) {
      Throw(ErrorCode::kInvalidArgument,
            "axis rule {} holds None inside a tuple; a tuple entry must name mesh axes only", ToString());
    }
    names.push_back(item.name_);
  }
  return PartitionSpec::Entry::Axes(std::move(names));
}

std::string AxisRule::ToString() const {
  switch (kind_) {
    case Kind::kNone: return "None";
    case Kind::kName: return PyRepr(name_);
    case Kind::kTuple:
    case Kind::kList: break;
  }
  std::vector<std::string> parts;
  for (const AxisRule& item : items_) parts.push_back(item.ToString());
  return SequenceRepr(parts, kind_ == Kind::kList);
}

// ---- SemanticAxis ----

SemanticAxis SemanticAxis::Composite(std::vector<std::string> names) {
  SemanticAxis axis;
  axis.names_ = std::move(names);
  axis.is_composite_ = true;
  return axis;
}

std::string SemanticAxis::ToString() const {
  if (is_name_) return PyRepr(name_);
  if (!is_composite_) return "None";
  std::vector<std::string> parts;
  for (const auto& n : names_) parts.push_back(PyRepr(n));
  return SequenceRepr(parts, /*list=*/true);
}

SemanticAxes ParseSemanticAxes(std::string_view text) {
  SemanticAxes axes;
  if (Trim(text).empty()) return axes;
  for (const std::string& raw : Split(text, ',')) {
    std::string_view item = Trim(raw);
    if (item.empty()) {
      Throw(ErrorCode::kInvalidArgument, "semantic axes '{}': empty item (use _ for an unsharded dimension)", text);
    }
    if (item == "_" || item == "None") {
      axes.emplace_back();
    } else if (item.find('+') != std::string_view::npos) {
      std::vector<std::string> names;
      for (const std::string& part : Split(item, '+')) {
        std::string_view name = Trim(part);
        if (name.empty()) Throw(ErrorCode::kInvalidArgument, "semantic axes '{}': empty name in '{}'", text, item);
        names.push_back(SemanticAxisFromShortName(name));
      }
      axes.push_back(SemanticAxis::Composite(std::move(names)));
    } else {
      axes.emplace_back(SemanticAxisFromShortName(item));
    }
  }
  return axes;
}

// ---- PartitionAxis ----

std::string_view PartitionAxis::FieldName(Field field) { return kFieldNames[static_cast<int>(field)]; }

std::optional<PartitionAxis::Field> PartitionAxis::FindField(std::string_view name) {
  for (int i = 0; i < kNumFields; ++i) {
    if (kFieldNames[i] == name) return static_cast<Field>(i);
  }
  return std::nullopt;
}

PartitionAxis::PartitionAxis() : PartitionAxis(std::span<const std::pair<std::string, AxisRule>>()) {}

PartitionAxis::PartitionAxis(std::span<const std::pair<std::string, AxisRule>> overrides) {
  // nullopt marks eformer's NOT_GIVEN defaults; the mesh-dimension names and the None defaults are plain values.
  std::array<std::optional<AxisRule>, kNumFields> given;
  given[static_cast<int>(Field::kDataParallelAxis)] = AxisRule("dp");
  given[static_cast<int>(Field::kFullyShardedDataParallelAxis)] = AxisRule("fsdp");
  given[static_cast<int>(Field::kTensorParallelAxis)] = AxisRule("tp");
  given[static_cast<int>(Field::kSequenceParallelAxis)] = AxisRule("sp");
  given[static_cast<int>(Field::kExpertParallelAxis)] = AxisRule("ep");
  for (Field none_default : {Field::kExpertGateAxis, Field::kAttentionDimAxis, Field::kAttentionKvDimAxis,
                             Field::kBiasHeadSequenceAxis, Field::kBiasKeySequenceAxis,
                             Field::kDecodeQuerySequenceAxis, Field::kDecodeAttentionDimAxis,
                             Field::kDecodeAttentionKvDimAxis}) {
    given[static_cast<int>(none_default)] = AxisRule::None();
  }
  std::vector<std::string_view> seen;
  for (const auto& [name, value] : overrides) {
    std::optional<Field> field = FindField(name);
    if (!field.has_value()) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
                "PartitionAxis.__init__() got an unexpected keyword argument '{}'; fields are {}", name,
                fmt::join(kFieldNames, ", "));
    }
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError,
                "PartitionAxis.__init__() got multiple values for keyword argument '{}'", name);
    }
    seen.push_back(name);
    given[static_cast<int>(*field)] = value;
  }

  // eformer PartitionAxis.__post_init__, in its order.
  auto value = [&](Field f) -> const AxisRule& { return *given[static_cast<int>(f)]; };
  auto resolve = [&](Field f, const AxisRule& default_value) {
    if (!given[static_cast<int>(f)].has_value()) given[static_cast<int>(f)] = default_value;
  };
  resolve(Field::kBatchAxis,
          AxisRule::Tuple({value(Field::kFullyShardedDataParallelAxis), value(Field::kDataParallelAxis)}));
  resolve(Field::kSequenceAxis, value(Field::kSequenceParallelAxis));
  resolve(Field::kQuerySequenceAxis, value(Field::kSequenceParallelAxis));
  resolve(Field::kHeadAxis, value(Field::kTensorParallelAxis));
  resolve(Field::kKvHeadAxis, value(Field::kTensorParallelAxis));
  resolve(Field::kKeySequenceAxis, value(Field::kSequenceParallelAxis));
  resolve(Field::kHiddenStateAxis, value(Field::kTensorParallelAxis));
  resolve(Field::kMlpIntermediateAxis, value(Field::kTensorParallelAxis));
  resolve(Field::kVocabAxis, value(Field::kTensorParallelAxis));
  resolve(Field::kExpertAxis, value(Field::kExpertParallelAxis));
  resolve(Field::kDecodeBatchAxis, value(Field::kBatchAxis));
  resolve(Field::kDecodeHeadAxis, value(Field::kHeadAxis));
  resolve(Field::kDecodeKvHeadAxis, value(Field::kKvHeadAxis));
  resolve(Field::kDecodeKeySequenceAxis, value(Field::kKeySequenceAxis));
  for (int i = 0; i < kNumFields; ++i) {
    SPMDSIM_CHECK(given[i].has_value(), "field {} left unresolved", kFieldNames[i]);
    fields_[i] = std::move(*given[i]);
  }
}

const AxisRule& PartitionAxis::Get(std::string_view field_name) const {
  std::optional<Field> field = FindField(field_name);
  if (!field.has_value()) {
    Throw(ErrorCode::kNotFound, "PartitionAxis has no field '{}'; fields are {}", field_name,
          fmt::join(kFieldNames, ", "));
  }
  return Get(*field);
}

AxisRule PartitionAxis::ResolveRule(const AxisRule& rule, std::vector<std::string>* visited) const {
  if (rule.is_sequence()) {
    std::vector<AxisRule> items;
    items.reserve(rule.items().size());
    for (const AxisRule& item : rule.items()) {
      if (visited == nullptr) {
        items.push_back(ResolveRule(item, nullptr));
      } else {
        std::vector<std::string> copy = *visited;  // siblings do not see each other's path
        items.push_back(ResolveRule(item, &copy));
      }
    }
    return rule.kind() == AxisRule::Kind::kList ? AxisRule::List(std::move(items)) : AxisRule::Tuple(std::move(items));
  }
  if (!rule.is_name()) return rule;
  if (std::optional<Field> field = FindField(rule.name()); field.has_value()) return Get(*field);
  Registry& registry = GetRegistry();
  registry.mutex.AssertReaderHeld();  // ResolveAxis holds it (a member cannot name a lock private to this file)
  AxisRule mapped = LookupSemantic(registry, rule.name());
  if (mapped.is_none()) return rule;  // a literal mesh axis
  std::vector<std::string> path = visited == nullptr ? std::vector<std::string>() : *visited;
  if (std::find(path.begin(), path.end(), rule.name()) != path.end()) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Cyclic semantic axis registration detected at '{}'.", rule.name());
  }
  path.push_back(rule.name());
  return ResolveRule(mapped, &path);
}

std::vector<AxisRule> PartitionAxis::ResolveAxis(std::span<const SemanticAxis> axes, RuntimeMode mode) const {
  Registry& registry = GetRegistry();
  ReaderMutexLock lock(registry.mutex);
  // The decode_* twin of a standard rule naming a field, when that twin is set to something other than None.
  auto generation_twin = [this](const AxisRule& standard) -> std::optional<AxisRule> {
    if (!standard.is_name()) return std::nullopt;
    std::string_view twin = GenerationTwin(standard.name());
    if (twin.empty() || Get(twin).is_none()) return std::nullopt;
    return AxisRule(twin);
  };
  std::vector<AxisRule> resolved;
  resolved.reserve(axes.size());
  for (const SemanticAxis& axis : axes) {
    if (axis.is_none() || (axis.is_name() && axis.name() == semantic::kEmpty)) {
      resolved.push_back(AxisRule::None());
      continue;
    }
    AxisRule standard;
    if (axis.is_composite()) {
      std::vector<AxisRule> parts;
      for (const std::string& sub : axis.names()) {
        AxisRule mapped = LookupSemantic(registry, sub);
        parts.push_back(mapped.is_none() ? AxisRule(sub) : std::move(mapped));
      }
      standard = AxisRule::List(std::move(parts));
    } else {
      standard = LookupSemantic(registry, axis.name());
      if (standard.is_none()) {
        ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "Unknown semantic axis name: '{}'", axis.name());
      }
    }
    AxisRule target = standard;
    if (IsGenerationMode(mode)) {
      if (axis.is_composite()) {
        std::vector<AxisRule> parts;
        bool changed = false;
        for (size_t i = 0; i < axis.names().size(); ++i) {
          const AxisRule& sub_standard = standard.items()[i];
          std::optional<AxisRule> sub_target = LookupGeneration(registry, axis.names()[i]);
          if (!sub_target.has_value()) sub_target = generation_twin(sub_standard);
          changed = changed || sub_target.has_value();
          parts.push_back(sub_target.value_or(sub_standard));
        }
        if (changed) target = AxisRule::List(std::move(parts));
      } else if (std::optional<AxisRule> custom = LookupGeneration(registry, axis.name()); custom.has_value()) {
        target = *custom;
      } else if (std::optional<AxisRule> twin = generation_twin(standard); twin.has_value()) {
        target = *twin;
      }
    }
    resolved.push_back(ResolveRule(target, nullptr));
  }
  return resolved;
}

PartitionSpec PartitionAxis::ResolveSpec(std::span<const SemanticAxis> axes, RuntimeMode mode) const {
  std::vector<PartitionSpec::Entry> entries;
  for (const AxisRule& rule : ResolveAxis(axes, mode)) entries.push_back(rule.ToEntry());
  return PartitionSpec(std::move(entries));
}

std::string PartitionAxis::ToString() const {
  std::vector<std::string> parts;
  for (int i = 0; i < kNumFields; ++i) parts.push_back(fmt::format("{}={}", kFieldNames[i], fields_[i].ToString()));
  return fmt::format("PartitionAxis({})", fmt::join(parts, ", "));
}

void PartitionAxis::Register(std::string_view semantic_axis, AxisRule axis_rule,
                             std::optional<AxisRule> generation_axis_rule, bool override) {
  std::string name = StrippedName(semantic_axis);
  Registry& registry = GetRegistry();
  WriterMutexLock lock(registry.mutex);
  auto existing = FindIn(registry.semantic, name);
  if (!override && (IsBuiltinSemantic(name) || existing != registry.semantic.end())) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
              "Semantic axis '{}' already exists. Use override=True to replace it.", name);
  }
  if (!generation_axis_rule.has_value() && axis_rule.is_name()) {
    std::string_view twin = GenerationTwin(axis_rule.name());
    if (!twin.empty()) generation_axis_rule = AxisRule(twin);
  }
  if (existing != registry.semantic.end()) {
    existing->second = std::move(axis_rule);
  } else {
    registry.semantic.emplace_back(name, std::move(axis_rule));
  }
  auto generation = FindIn(registry.generation, name);
  if (generation != registry.generation.end()) registry.generation.erase(generation);
  if (generation_axis_rule.has_value()) registry.generation.emplace_back(name, std::move(*generation_axis_rule));
}

void PartitionAxis::Unregister(std::string_view semantic_axis, bool missing_ok) {
  std::string name = StrippedName(semantic_axis);
  Registry& registry = GetRegistry();
  WriterMutexLock lock(registry.mutex);
  bool removed = false;
  if (auto it = FindIn(registry.semantic, name); it != registry.semantic.end()) {
    registry.semantic.erase(it);
    removed = true;
  }
  if (auto it = FindIn(registry.generation, name); it != registry.generation.end()) {
    registry.generation.erase(it);
    removed = true;
  }
  if (!removed && !missing_ok) {
    ThrowKind(ErrorCode::kNotFound, ErrorKind::kKeyError, "Semantic axis '{}' is not registered.", name);
  }
}

void PartitionAxis::ClearRegisteredAxes() {
  Registry& registry = GetRegistry();
  WriterMutexLock lock(registry.mutex);
  registry.semantic.clear();
  registry.generation.clear();
}

std::vector<PartitionAxis::RegisteredAxis> PartitionAxis::GetRegisteredAxes() {
  Registry& registry = GetRegistry();
  ReaderMutexLock lock(registry.mutex);
  std::vector<RegisteredAxis> out;
  for (const auto& [name, rule] : registry.semantic) {
    out.push_back({name, rule, LookupGeneration(registry, name)});
  }
  return out;
}

}  // namespace spmdsim
