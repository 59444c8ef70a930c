// Internal: reading YAML for scenario files with errors that point into the file: every value is read through a
// YamlContext that knows the file, and every mapping through a YamlMap that rejects unknown and duplicate keys
// (with a did-you-mean) and names the key path in messages.
//
// Example: for the file
//   topology:
//     preset: "tpu-v4:2x2x4"
//     slises: 2
// YamlMap(ctx, root["topology"], "topology", {"preset", "slices", ...}) throws
//   "a.yaml:3:3: topology.slises: unknown key 'slises'; did you mean 'slices'? valid keys: preset, slices, ..."
#ifndef SPMDSIM_SCENARIO_INTERNAL_SCENARIO_YAML_H_
#define SPMDSIM_SCENARIO_INTERNAL_SCENARIO_YAML_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/dtype.h"
#include "common/error.h"
#include "common/user_text.h"  // DidYouMean
#include "scenario/scenario_types.h"

namespace spmdsim {

// Sizes with units: "4096", "4KiB", "1 MiB", "2GB", "1.5e6" -> bytes. Throws Error(kInvalidArgument) naming
// the valid suffixes (B, KB, MB, GB, KiB, MiB, GiB).
int64_t ParseByteSize(std::string_view text);

// The one YAML document in `text` (a null node for an empty text). Throws Error(kInvalidArgument, `kind`) with
// "<file>:<line>:<col>" when the text is not UTF-8, not YAML, or holds a second document; `what` names the kind
// of file in messages ("a scenario file").
YAML::Node LoadSingleYamlDocument(std::string_view text, const std::string& file,
                                  std::string_view what = "a scenario file",
                                  ErrorKind kind = ErrorKind::kScenarioError);

// An error that already names its place in the file (what YamlContext::Fail and Rethrow throw): a parser that
// hands a value to a library and locates the library's errors lets these pass unchanged
// (`catch (const LocatedError&) { throw; }` before `catch (const Error&)`).
class LocatedError : public Error {
 public:
  using Error::Error;
};

class YamlContext {
 public:
  // `kind`: the kind of the errors it throws (a scenario's ScenarioError; an arrays file's ValueError).
  explicit YamlContext(std::string file, ErrorKind kind = ErrorKind::kScenarioError)
      : file_(std::move(file)), kind_(kind) {}
  const std::string& file() const { return file_; }

  SourceLocation Location(const YAML::Node& node) const;
  // Throws Error(kInvalidArgument, the context's kind): "<file>:<line>:<col>: <key>: <message>".
  [[noreturn]] void Fail(const YAML::Node& node, std::string_view key, std::string_view message) const;
  // Rethrows a library error about the value at `node` with the location and key in front (the original nested:
  // common/error_context.h), keeping its kind (the context's when it has none). REQUIRES: called in the handler
  // that caught `error`.
  [[noreturn]] void Rethrow(const YAML::Node& node, std::string_view key, const Error& error) const;

  // Scalars. `what` describes the valid values in messages ("a positive integer").
  std::string String(const YAML::Node& node, std::string_view key) const;
  double Number(const YAML::Node& node, std::string_view key) const;  // finite
  int64_t Int(const YAML::Node& node, std::string_view key) const;
  bool Bool(const YAML::Node& node, std::string_view key) const;
  int64_t Bytes(const YAML::Node& node, std::string_view key) const;  // ParseByteSize or an integer
  std::vector<int64_t> IntList(const YAML::Node& node, std::string_view key) const;
  std::vector<std::string> StringList(const YAML::Node& node, std::string_view key) const;  // or one string
  // A positive number in (lo, hi].
  double NumberIn(const YAML::Node& node, std::string_view key, double lo, double hi) const;
  // One of `choices`; otherwise an error listing them (with a did-you-mean).
  std::string Choice(const YAML::Node& node, std::string_view key, const std::vector<std::string>& choices) const;
  // An array dtype in any spelling ParseArrayDType reads (common/dtype.h: "float32", "f32", "bf16", ...).
  DType ArrayDType(const YAML::Node& node, std::string_view key) const;

  void RequireSequence(const YAML::Node& node, std::string_view key) const;

 private:
  std::string file_;
  ErrorKind kind_;
};

// A mapping whose keys are checked against a fixed list.
class YamlMap {
 public:
  // REQUIRES: nothing; throws when `node` is not a mapping (a null node counts as an empty mapping when
  // `null_ok`), when a key is not a plain scalar, repeated, or not in `valid_keys`. The error for an unknown key
  // lists `valid_keys`, or `valid_keys_text` when given (a long list written shorter, e.g. by key family).
  YamlMap(const YamlContext& ctx, const YAML::Node& node, std::string path, std::vector<std::string> valid_keys,
          bool null_ok = false, std::string_view valid_keys_text = {});

  bool Has(std::string_view key) const;
  YAML::Node Get(std::string_view key) const;   // an undefined node when absent
  YAML::Node Need(std::string_view key) const;  // throws "missing required key" when absent
  std::string Key(std::string_view key) const;  // "<path>.<key>"
  const YAML::Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  const YamlContext& ctx() const { return ctx_; }
  // Keys in file order.
  const std::vector<std::string>& keys() const { return keys_; }

  std::string String(std::string_view key, std::string fallback) const;
  double Number(std::string_view key, double fallback) const;
  int64_t Int(std::string_view key, int64_t fallback) const;
  bool Bool(std::string_view key, bool fallback) const;

 private:
  const YamlContext& ctx_;
  YAML::Node node_;
  std::string path_;
  std::vector<std::string> keys_;
  std::vector<YAML::Node> values_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_INTERNAL_SCENARIO_YAML_H_
