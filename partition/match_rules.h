// Regex partition rules: the first rule whose pattern is found in a parameter's name gives its PartitionSpec
// (eformer: eformer/escale/partition/constraints.py, match_partition_rules and
// create_pattern_based_partition_spec).
//
// match_partition_rules(rules, params, min_size=0, strict=True), per parameter in order:
//   strict: a leaf that is not an array -> P(); a scalar -> P() (before any rule is tried, so scalars never fail);
//           else the first rule whose pattern re.search-es the name: P() when the array has fewer than
//           `min_size` elements, else the rule's spec cut to the array's rank (never padded);
//   not strict: the first matching rule's spec as is.
//   No rule matches: ValueError "Partition rule not found for param: <name>".
// eformer's `min_size` defaults to 0 (its docstring says MIN_SHARDING_SIZE); passing None reads the environment
// variable MIN_SHARDING_SIZE (default 16384). We read it at each call; eformer reads it once at import.
//
// Example: rules ((".*/kernel", P('fsdp', 'tp')), (".*", P())), min_size 16384:
//   "dense/kernel" (1024, 4096) -> P('fsdp', 'tp');  "dense/kernel" (64, 64) -> P() (4096 < 16384);
//   "norm/scale" (1024,) -> P();  "head/kernel" (8,) with min_size 0 -> P('fsdp',) (trimmed to rank 1).
//
// Patterns are Python `re` patterns translated to the ECMAScript grammar and run with Boost.Regex (perl syntax,
// ^ and $ at the ends of the text only). Where the two grammars agree the pattern is used as written; where
// Python means something the translation does not carry over, the pattern is rejected with
// Error(kInvalidArgument, kind "re.error") naming the construct rather than silently matching differently:
//   translated:  \A -> ^, \Z -> $, (?#comment) removed, a leading (?i) -> case-insensitive, {,n} -> {0,n},
//                a '{' that does not start a repeat -> a literal '{' (Python reads it so; ECMAScript would throw),
//                ']' first in a set -> a literal ']' (Python's []abc]).
//   rejected:    (?P<name>...) and (?P=name) named groups, (?<name>...), lookbehind (?<=...) (?<!...), atomic
//                groups (?>...), conditionals (?(1)...), inline flags other than a leading (?i), scoped flags
//                (?i:...), possessive quantifiers (a*+ a++ a?+ a{2}+), POSIX classes [[:alpha:]], and escapes
//                Python rejects or ECMAScript reads differently (\a \e \U \N{...} \c \k \q ...).
//   differences kept (documented, not detectable): Python's $ also matches before a final '\n'; \d \w \s and
//                case folding are Unicode in Python and ASCII here.
// Matching is bounded: where Python would backtrack for ever ((a+)+$ against "aaa...ab") or a search needs more
// memory than Boost.Regex allows, Search throws Error(kInvalidArgument) "the pattern '...' is too expensive to
// match against '...'" instead of hanging.
#ifndef SPMDSIM_PARTITION_MATCH_RULES_H_
#define SPMDSIM_PARTITION_MATCH_RULES_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "partition/partition_spec.h"

namespace spmdsim {

// A Python `re` pattern compiled for Boost.Regex (see the file comment). Immutable and cheap to copy (the
// compiled form is shared); Search is thread-safe.
class PyRegex {
 public:
  // Throws Error(kInvalidArgument, kind "re.error") naming the pattern, the column and the construct.
  explicit PyRegex(std::string pattern);
  // Python: re.search(pattern, text) is not None. Throws Error(kInvalidArgument) when the search exceeds
  // Boost.Regex's complexity or memory bound (see the file comment).
  bool Search(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }
  // The ECMAScript text handed to Boost.Regex.
  const std::string& translated() const { return translated_; }
  bool ignore_case() const { return ignore_case_; }

 private:
  std::string pattern_;
  std::string translated_;
  bool ignore_case_ = false;
  struct Compiled;  // boost::regex, kept out of this header
  std::shared_ptr<const Compiled> regex_;
};

// One rule: a pattern searched for in the parameter's name, and the spec it gives.
struct PartitionRule {
  std::string pattern;
  PartitionSpec spec;
};

// A parameter to match: its '/'-joined path (eformer's named_tree_map with sep="/") and its shape; no shape for a
// leaf that is not an array.
struct NamedParameter {
  std::string name;
  std::optional<std::vector<int64_t>> shape;
};

struct MatchOptions {
  // Arrays with fewer elements get P() (strict mode only). nullopt: MIN_SHARDING_SIZE from the environment.
  std::optional<int64_t> min_size = 0;
  bool strict = true;
  // Log replications and trims as eformer warns; nullopt reads LOG_SHARDING_MOVE. `log_stream` null: stderr.
  std::optional<bool> log;
  std::ostream* log_stream = nullptr;
};

// Why a parameter got its spec.
enum class MatchReason {
  kRule,        // the matching rule's spec, unchanged
  kTrimmed,     // the matching rule's spec, cut to the array's rank
  kBelowMinSize,  // a rule matched but the array is smaller than min_size: P()
  kScalar,      // rank 0: P()
  kNotAnArray,  // no shape: P()
};
std::string_view MatchReasonName(MatchReason reason);  // "rule", "trimmed", "below_min_size", "scalar", "not_an_array"

struct MatchedSpec {
  std::string name;
  PartitionSpec spec;
  MatchReason reason = MatchReason::kRule;
  std::optional<int> rule_index;  // the rule that matched, if one was tried and matched
};

// eformer's MIN_SHARDING_SIZE: the environment variable read as Python's int() would (surrounding whitespace,
// a sign and digit-separating underscores allowed), 16384 when unset. A bad value is ValueError
// "invalid literal for int() with base 10: 'abc'".
int64_t MinShardingSizeFromEnvironment();

// Rules compiled once, for matching many parameters.
class PartitionRules {
 public:
  // Compiles every pattern; throws the PyRegex error prefixed with the rule's index.
  explicit PartitionRules(std::vector<PartitionRule> rules);

  // The decision for one parameter; throws ValueError "Partition rule not found for param: <name>".
  MatchedSpec Match(std::string_view name, std::optional<std::span<const int64_t>> shape,
                    const MatchOptions& options = {}) const;
  // eformer `match_partition_rules(rules, tree, min_size, strict)` over named parameters, order kept.
  std::vector<MatchedSpec> MatchAll(std::span<const NamedParameter> params, const MatchOptions& options = {}) const;

  const std::vector<PartitionRule>& rules() const { return rules_; }

 private:
  std::vector<PartitionRule> rules_;
  std::vector<PyRegex> compiled_;
};

// One-call form: the spec for every parameter, in order.
std::vector<std::pair<std::string, PartitionSpec>> MatchPartitionRules(std::span<const PartitionRule> rules,
                                                                       std::span<const NamedParameter> params,
                                                                       const MatchOptions& options = {});

// eformer create_pattern_based_partition_spec's pattern language, exactly as eformer splits it:
//   "attention|mlp->data,hidden->model.data"  ->  ('attention', P('data')), ('mlp', P('data')),
//                                                 ('hidden', P('model', 'data'))
// Rules are separated by ',', a rule without '->' is ignored, patterns by '|' (so a '|' inside a group splits
// too), spec entries by '.' ('' is None: "data..model" is P('data', None, 'model')); nothing is trimmed. A rule with
// two '->' is Python's ValueError "too many values to unpack (expected 2)".
std::vector<PartitionRule> ParsePatternRules(std::string_view pattern);

// The function create_pattern_based_partition_spec returns: the first matching rule's spec, else `default_spec`
// (no error when nothing matches). Patterns compile here, not at the first call as in Python.
class PatternBasedPartitionSpec {
 public:
  explicit PatternBasedPartitionSpec(std::string_view pattern, PartitionSpec default_spec = PartitionSpec());
  const PartitionSpec& operator()(std::string_view name) const;
  const std::vector<PartitionRule>& rules() const { return rules_; }

 private:
  std::vector<PartitionRule> rules_;
  std::vector<PyRegex> compiled_;
  PartitionSpec default_spec_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_MATCH_RULES_H_
