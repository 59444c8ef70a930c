#include "scenario/internal/scenario_yaml.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <exception>
#include <cstdlib>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error_context.h"
#include "common/shape.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "partition/partition_spec.h"
#include "scenario/yaml_text.h"

namespace spmdsim {
namespace {

std::string Quoted(std::string_view text) { return QuoteForError(text); }

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Scalar:
      return Quoted(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
  }
  return "?";
}

std::optional<double> ToDouble(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(begin, &end);
  if (end != begin + text.size() || errno == ERANGE || !std::isfinite(value)) return std::nullopt;
  // strtod also reads hex floats and "inf"/"nan": only plain decimal forms are numbers here.
  for (char c : text)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return std::nullopt;
  return value;
}

}  // namespace

YAML::Node LoadSingleYamlDocument(std::string_view text, const std::string& file, std::string_view what,
                                  ErrorKind kind) {
  scenario::CheckYamlText(text, file, what, kind);
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) ThrowKind(ErrorCode::kInvalidArgument, kind, "{}: not valid YAML: {}", file, e.msg);
    // yaml-cpp's jargon ("illegal map value", "end of map not found") said plainly for the common slips.
    const scenario::YamlSyntaxError plain =
        scenario::ExplainYamlSyntaxError(text, {e.mark.line + 1, e.mark.column + 1}, e.msg);
    ThrowKind(ErrorCode::kInvalidArgument, kind, "{}:{}:{}: not valid YAML: {}", file, plain.position.line,
              plain.position.column, plain.message);
  }
  if (documents.size() > 1) {  // a document started by "..." and content, without a "---"
    const int line = documents[1].Mark().is_null() ? 1 : documents[1].Mark().line + 1;
    ThrowKind(ErrorCode::kInvalidArgument, kind,
              "{}:{}:1: a second YAML document starts here; {} holds one document (remove the '---' and what "
              "follows, or put it in its own file)",
              file, line, what);
  }
  return documents.empty() ? YAML::Node() : documents[0];
}

int64_t ParseByteSize(std::string_view text) {
  std::string_view t = Trim(text);
  size_t split = 0;
  while (split < t.size() && (std::isdigit(static_cast<unsigned char>(t[split])) || t[split] == '.' ||
                              t[split] == 'e' || t[split] == 'E' || t[split] == '+' || t[split] == '-')) {
    // An 'e' followed by something other than a digit or sign starts no exponent ("1e" is bad anyway).
    ++split;
  }
  std::string number(t.substr(0, split));
  std::string unit(Trim(t.substr(split)));
  std::optional<double> value = ToDouble(number);
  static const std::vector<std::pair<std::string, double>> kUnits = {
      {"", 1},      {"B", 1},           {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1024.0},    {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}};
  double scale = -1;
  for (const auto& [name, factor] : kUnits)
    if (unit == name) scale = factor;
  if (!value || scale < 0 || *value < 0)
    Throw(ErrorCode::kInvalidArgument,
          "bad size {}: expected a non-negative number with an optional unit B, KB, MB, GB, TB (powers of 1000) or "
          "KiB, MiB, GiB, TiB, K, M, G (powers of 1024), e.g. 4KiB, 1MiB, 2.5e6",
          Quoted(text));
  double bytes = *value * scale;
  if (bytes > 9.0e18 || bytes != std::floor(bytes))
    Throw(ErrorCode::kInvalidArgument, "bad size {}: {} bytes is not a whole number of bytes below 9e18",
          Quoted(text), bytes);
  return static_cast<int64_t>(bytes);
}

SourceLocation YamlContext::Location(const YAML::Node& node) const {
  SourceLocation location{file_, 0, 0};
  if (node.IsDefined()) {
    YAML::Mark mark = node.Mark();
    if (!mark.is_null()) {
      location.line = mark.line + 1;
      location.column = mark.column + 1;
    }
  }
  return location;
}

void YamlContext::Fail(const YAML::Node& node, std::string_view key, std::string_view message) const {
  SourceLocation location = Location(node);
  std::string where = location.line > 0 ? location.ToString() : file_;
  throw LocatedError(ErrorCode::kInvalidArgument,
                     fmt::format("{}: {}: {}", where, key.empty() ? "(top level)" : key, message), kind_);
}

void YamlContext::Rethrow(const YAML::Node& node, std::string_view key, const Error& error) const {
  SourceLocation location = Location(node);
  std::string where = location.line > 0 ? location.ToString() : file_;
  const ErrorKind kind = error.kind() == ErrorKind::kNone ? kind_ : error.kind();
  // A spec's unknown mesh axis gets its did-you-mean here (JAX's message, kept as the error's, has none).
  std::string hint = UnknownAxisHint(error);
  if (error.message().find(hint) != std::string::npos) hint.clear();  // added on an inner level already
  std::throw_with_nested(
      LocatedError(error.code(), fmt::format("{}: {}: {}{}", where, key, error.message(), hint), kind));
}

std::string YamlContext::String(const YAML::Node& node, std::string_view key) const {
  if (!node.IsScalar()) Fail(node, key, fmt::format("found {}, expected a string", Describe(node)));
  return node.Scalar();
}

double YamlContext::Number(const YAML::Node& node, std::string_view key) const {
  if (!node.IsScalar()) Fail(node, key, fmt::format("found {}, expected a number", Describe(node)));
  std::optional<double> value = ToDouble(node.Scalar());
  if (!value) Fail(node, key, fmt::format("found {}, expected a finite number (e.g. 1.5, 4.5e10)", Describe(node)));
  return *value;
}

double YamlContext::NumberIn(const YAML::Node& node, std::string_view key, double lo, double hi) const {
  double value = Number(node, key);
  if (!(value > lo && value <= hi))
    Fail(node, key, fmt::format("found {}, expected a number in ({}, {}]", value, lo, hi));
  return value;
}

int64_t YamlContext::Int(const YAML::Node& node, std::string_view key) const {
  if (!node.IsScalar()) Fail(node, key, fmt::format("found {}, expected an integer", Describe(node)));
  const std::string& text = node.Scalar();
  std::optional<double> value = ToDouble(text);
  bool plain = !text.empty() && text.find_first_not_of("+-0123456789") == std::string::npos;
  if (plain) {
    try {
      return ParseInt(text, key);
    } catch (const Error&) {
      Fail(node, key, fmt::format("found {}, expected an integer that fits in 64 bits", Describe(node)));
    }
  }
  if (!value || *value != std::floor(*value) || std::fabs(*value) > 9.0e18)
    Fail(node, key, fmt::format("found {}, expected an integer", Describe(node)));
  return static_cast<int64_t>(*value);
}

bool YamlContext::Bool(const YAML::Node& node, std::string_view key) const {
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "true" || s == "True" || s == "TRUE" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "False" || s == "FALSE" || s == "no" || s == "off") return false;
  }
  Fail(node, key, fmt::format("found {}, expected true or false", Describe(node)));
}

int64_t YamlContext::Bytes(const YAML::Node& node, std::string_view key) const {
  if (!node.IsScalar()) Fail(node, key, fmt::format("found {}, expected a size such as 4096 or 1MiB", Describe(node)));
  try {
    return ParseByteSize(node.Scalar());
  } catch (const Error& e) {
    Rethrow(node, key, e);
  }
}

void YamlContext::RequireSequence(const YAML::Node& node, std::string_view key) const {
  if (!node.IsSequence()) Fail(node, key, fmt::format("found {}, expected a list", Describe(node)));
}

std::vector<int64_t> YamlContext::IntList(const YAML::Node& node, std::string_view key) const {
  if (node.IsScalar()) {
    // "2x2x4" is accepted where a list of sizes is expected.
    try {
      return ParseDims(node.Scalar(), key);
    } catch (const Error&) {
      Fail(node, key, fmt::format("found {}, expected a list of integers such as [2, 2, 4] or \"2x2x4\"",
                                  Describe(node)));
    }
  }
  RequireSequence(node, key);
  std::vector<int64_t> out;
  for (size_t i = 0; i < node.size(); ++i) out.push_back(Int(node[i], fmt::format("{}[{}]", key, i)));
  return out;
}

std::vector<std::string> YamlContext::StringList(const YAML::Node& node, std::string_view key) const {
  if (node.IsScalar()) return {node.Scalar()};
  RequireSequence(node, key);
  std::vector<std::string> out;
  for (size_t i = 0; i < node.size(); ++i) out.push_back(String(node[i], fmt::format("{}[{}]", key, i)));
  return out;
}

std::string YamlContext::Choice(const YAML::Node& node, std::string_view key,
                                const std::vector<std::string>& choices) const {
  std::string value = String(node, key);
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) return value;
  std::optional<std::string> guess = DidYouMean(value, choices);
  Fail(node, key,
       fmt::format("found {}{}; valid values: {}", Quoted(value),
                   guess ? fmt::format(", did you mean '{}'?", *guess) : std::string(), fmt::join(choices, ", ")));
}

DType YamlContext::ArrayDType(const YAML::Node& node, std::string_view key) const {
  const std::string value = String(node, key);
  try {
    return ParseArrayDType(value);
  } catch (const Error& e) {
    Fail(node, key, e.message());
  }
}

YamlMap::YamlMap(const YamlContext& ctx, const YAML::Node& node, std::string path, std::vector<std::string> valid_keys,
                 bool null_ok, std::string_view valid_keys_text)
    : ctx_(ctx), node_(node), path_(std::move(path)) {
  if (null_ok && (!node.IsDefined() || node.IsNull())) return;
  if (!node.IsMap())
    ctx.Fail(node, path_,
             fmt::format("found {}, expected a mapping with keys {}", Describe(node), fmt::join(valid_keys, ", ")));
  std::set<std::string> seen;
  for (YAML::const_iterator it = node.begin(); it != node.end(); ++it) {
    // Copies: `it->` yields a temporary proxy, so a reference to its members would dangle.
    YAML::Node key = it->first;
    YAML::Node value = it->second;
    if (!key.IsScalar()) ctx.Fail(key, path_, fmt::format("found {} as a key, expected a plain name", Describe(key)));
    const std::string& name = key.Scalar();
    std::string full = path_.empty() ? name : path_ + "." + name;
    if (std::find(valid_keys.begin(), valid_keys.end(), name) == valid_keys.end()) {
      std::optional<std::string> guess = DidYouMean(name, valid_keys);
      ctx.Fail(key, full,
               fmt::format("unknown key {}{}; valid keys here: {}", Quoted(name),
                           guess ? fmt::format(", did you mean '{}'?", *guess) : std::string(),
                           valid_keys_text.empty() ? fmt::format("{}", fmt::join(valid_keys, ", "))
                                                   : std::string(valid_keys_text)));
    }
    if (!seen.insert(name).second) ctx.Fail(key, full, fmt::format("key '{}' appears twice", name));
    keys_.push_back(name);
    values_.push_back(value);
  }
}

bool YamlMap::Has(std::string_view key) const {
  return std::find(keys_.begin(), keys_.end(), key) != keys_.end();
}

YAML::Node YamlMap::Get(std::string_view key) const {
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return values_[i];
  return YAML::Node(YAML::NodeType::Undefined);
}

YAML::Node YamlMap::Need(std::string_view key) const {
  if (!Has(key)) ctx_.Fail(node_, path_.empty() ? std::string(key) : Key(key), "missing required key");
  return Get(key);
}

std::string YamlMap::Key(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

std::string YamlMap::String(std::string_view key, std::string fallback) const {
  return Has(key) ? ctx_.String(Get(key), Key(key)) : fallback;
}
double YamlMap::Number(std::string_view key, double fallback) const {
  return Has(key) ? ctx_.Number(Get(key), Key(key)) : fallback;
}
int64_t YamlMap::Int(std::string_view key, int64_t fallback) const {
  return Has(key) ? ctx_.Int(Get(key), Key(key)) : fallback;
}
bool YamlMap::Bool(std::string_view key, bool fallback) const {
  return Has(key) ? ctx_.Bool(Get(key), Key(key)) : fallback;
}

}  // namespace spmdsim
