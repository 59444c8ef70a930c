// Logical axis rules: name the dimensions of an array by what they mean ('batch', 'embed', 'mlp') and turn those
// names into mesh axes with a priority-ordered rule list (Flax: flax/linen/spmd.py and flax/core/spmd.py; T5X:
// standard_logical_axis_rules in t5x/partitioning.py).
//
// Resolution (Flax `logical_to_mesh_axes`): rules are tried in order; a rule (name, mesh_axes) assigns mesh_axes
// to the dimension called `name` when that dimension has no assignment yet AND none of mesh_axes is already used
// by another dimension. Dimensions no rule assigns are None. A name used for two dimensions is an error; None and
// UNCONSTRAINED dimensions may repeat and pass through unchanged. A rule mapping to None or UNCONSTRAINED still
// counts as an assignment (it stops later rules for that name).
//
// Example (Flax's docstring):
//   rules = (('batch', 'X'), ('features', 'X'), ('heads', 'Y'), ('batch', 'Z'))
//   LogicalToMeshAxes(('batch', 'length', 'heads', 'features'), rules) == P('X', None, 'Y', None)
//   'features' loses 'X' to 'batch' (used), 'length' has no rule, the second 'batch' rule is never needed.
// T5X's default rules with 2-D activation and 2-D parameter sharding, names ('embed', 'mlp'): 'mlp' takes 'model'
// first (its rule comes earlier), so 'embed' falls through to its second rule: P('data', 'model').
#ifndef SPMDSIM_PARTITION_LOGICAL_AXIS_RULES_H_
#define SPMDSIM_PARTITION_LOGICAL_AXIS_RULES_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "partition/partition_spec.h"

namespace spmdsim {

// One array dimension's logical name: a name, None (an unnamed dimension, never sharded by rules) or
// UNCONSTRAINED (Flax passes it through as P.UNCONSTRAINED).
class LogicalAxis {
 public:
  enum class Kind { kNone, kName, kUnconstrained };

  LogicalAxis() = default;  // None
  LogicalAxis(std::string name) : kind_(Kind::kName), name_(std::move(name)) {}  // NOLINT: implicit on purpose
  LogicalAxis(const char* name) : LogicalAxis(std::string(name)) {}              // NOLINT
  static LogicalAxis None() { return LogicalAxis(); }
  static LogicalAxis Unconstrained();

  Kind kind() const { return kind_; }
  bool is_name() const { return kind_ == Kind::kName; }
  const std::string& name() const { return name_; }  // empty unless is_name()

  // Python's repr: 'batch', None, UNCONSTRAINED.
  std::string ToString() const;
  bool operator==(const LogicalAxis& other) const = default;

 private:
  Kind kind_ = Kind::kNone;
  std::string name_;
};
using LogicalAxes = std::vector<LogicalAxis>;

// Python's repr of the tuple: ('batch', None, 'embed'), ('batch',), ().
std::string LogicalAxesToString(std::span<const LogicalAxis> axes);
// "batch,_,embed" -> ('batch', None, 'embed'). `_` (or `None`) is an unnamed dimension, `UNCONSTRAINED` is
// P.UNCONSTRAINED; the empty text is (). Throws Error(kInvalidArgument) for an empty item.
LogicalAxes ParseLogicalAxes(std::string_view text);

// One rule: dimensions called `logical_name` go to `mesh_axes` (None, 'x', ('x', 'y') or UNCONSTRAINED).
struct LogicalAxisRule {
  std::string logical_name;
  PartitionSpec::Entry mesh_axes;
  bool operator==(const LogicalAxisRule& other) const = default;
};
// In priority order (Flax: LogicalRules, a sequence of (name, mesh axes) pairs).
using LogicalAxisRules = std::vector<LogicalAxisRule>;

// Python's repr: (('batch', 'data'), ('embed', None)).
std::string LogicalAxisRulesToString(std::span<const LogicalAxisRule> rules);
// "batch=data,embed=,mlp=model,joined=data+model" (commas or newlines between rules, `#` starts a comment that
// runs to the end of the line): `name=` and `name=none` map to None, `a+b` to the tuple ('a', 'b'),
// `name=UNCONSTRAINED` to P.UNCONSTRAINED. The same name may appear twice (a lower-priority fallback).
// Throws Error(kInvalidArgument) naming the offending item.
LogicalAxisRules ParseLogicalAxisRules(std::string_view text);

// Flax `logical_to_mesh_axes(array_dim_names, rules)`: the PartitionSpec for an array whose dimensions carry
// `names`, one entry per name. Throws ValueError "Unsupported: Dimensions ('foo',) occur more than once in
// array names." when a name (not None / UNCONSTRAINED) repeats.
PartitionSpec LogicalToMeshAxes(std::span<const LogicalAxis> names, std::span<const LogicalAxisRule> rules);
// Same with this thread's current rules (GetLogicalAxisRules()).
PartitionSpec LogicalToMeshAxes(std::span<const LogicalAxis> names);

// Flax `logical_to_mesh` over named leaves: each (path, names) becomes (path, spec); a leaf without names (None
// in Flax) stays without a spec. Order kept.
std::vector<std::pair<std::string, std::optional<PartitionSpec>>> LogicalToMesh(
    std::span<const std::pair<std::string, std::optional<LogicalAxes>>> tree, std::span<const LogicalAxisRule> rules);

// What a logical constraint does when some named dimension matches no rule (Flax: nn.RulesFallback).
enum class RulesFallback {
  kAxisIsUnsharded,  // the dimension is None (the default)
  kRaiseError,       // ValueError "Axis names ('foo', 'bar') did not match a rule"
  kNoConstraint,     // no constraint is applied at all
};
// Flax `with_logical_constraint` minus the array: the spec the constraint would apply, or nullopt when none is
// applied (no rules in effect, `names` absent, or kNoConstraint with an unmatched name). `rules` nullptr means
// this thread's current rules.
std::optional<PartitionSpec> LogicalConstraintSpec(const std::optional<LogicalAxes>& names,
                                                   RulesFallback fallback = RulesFallback::kAxisIsUnsharded,
                                                   const LogicalAxisRules* rules = nullptr);

// Flax `composite_rules(rule1, rule2)`: rule1 with rule2 added. Like Flax this goes through a dict: a name that
// appears twice in rule1 keeps its first position and its last value; rule2's new names are appended; a name in
// both with different values throws ValueError "Inconsistent logical axis annotations for b: data vs model".
LogicalAxisRules CompositeRules(std::span<const LogicalAxisRule> rule1, std::span<const LogicalAxisRule> rule2);

// Context-local rules (Flax: nn.set_logical_axis_rules / nn.get_logical_axis_rules / nn.logical_axis_rules, which
// keep them in a threading.local). Each thread starts with no rules; they are not inherited by new threads.
const LogicalAxisRules& GetLogicalAxisRules();
void SetLogicalAxisRules(LogicalAxisRules rules);

// RAII form of Flax's `with nn.logical_axis_rules(rules):` (alias partitioning.axis_rules): installs `rules` for
// this thread and restores the previous ones on destruction; guards nest like a stack.
// REQUIRES: destroyed on the thread that created it, in reverse order of creation.
class ScopedLogicalAxisRules {
 public:
  explicit ScopedLogicalAxisRules(LogicalAxisRules rules);
  ~ScopedLogicalAxisRules();
  ScopedLogicalAxisRules(const ScopedLogicalAxisRules&) = delete;
  ScopedLogicalAxisRules& operator=(const ScopedLogicalAxisRules&) = delete;

 private:
  LogicalAxisRules previous_;
};

// T5X `standard_logical_axis_rules(activation_partitioning_dims, parameter_partitioning_dims, additional_rules)`:
// the 1-D / 2-D rule sets, then the replicated names (relpos_buckets, abspos_buckets, length, layers, stack,
// mlp_activations -> None), then `additional_rules`. Dims other than 1 or 2 throw T5X's ValueError
// "`activation_partitioning_dims` = 3 `parameter_partitioning_dims` = 1 is not supported."
LogicalAxisRules StandardLogicalAxisRules(int activation_partitioning_dims = 1, int parameter_partitioning_dims = 1,
                                          std::span<const LogicalAxisRule> additional_rules = {});

// T5X PjitPartitioner's rewrite for multi-slice meshes (ici_mesh_shape and dcn_mesh_shape both given): every
// rule for 'batch' maps to ('replica', 'data') instead; the others are unchanged.
LogicalAxisRules MultisliceLogicalAxisRules(std::span<const LogicalAxisRule> rules);

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_LOGICAL_AXIS_RULES_H_
