// PartitionSpec: how each dimension of an array is split over the axes of a mesh (JAX: jax.sharding.PartitionSpec,
// alias jax.P; jax/_src/partition_spec.py and jaxlib/partition_spec.cc).
//
// One entry per array dimension, each
//   - None            the dimension is not split (replicated over every mesh axis not named elsewhere),
//   - 'x'             split over mesh axis x,
//   - ('x', 'y')      split over x and y together, x MAJOR: block index = idx[x] * size(y) + idx[y],
//   - UNCONSTRAINED   (P.UNCONSTRAINED) the compiler may choose; counts as None for layouts and memory.
// A spec shorter than the array's rank leaves the trailing dimensions whole.
//
// Entries are canonicalised as JAX does at construction: an empty tuple, an empty list or '' becomes None, a
// one-element tuple becomes its element (P(('x',)) == P('x')), a list becomes a tuple, and a tuple that holds a
// tuple is a ValueError. Equality is JAX's (interned objects): the same canonical entries in the same number,
// so P('x') != P('x', None).
//
// Example:
//   PartitionSpec spec = PartitionSpec::Parse("PartitionSpec('dp', None, ('fsdp','tp'))");
//   spec.ToString()     == "P('dp', None, ('fsdp', 'tp'))"
//   on Mesh {dp:2, fsdp:4, tp:2} and shape (8, 1024, 4096): blocks of (4, 1024, 512), 16 devices, no replicas.
//
// Deviations from JAX (documented, each an error here where JAX would accept and later fail or do something
// spmdsim does not model): axis names are strings; None inside a tuple entry is rejected at parse time (JAX
// rejects it when the NamedSharding is built); `unreduced=` / `reduced=` are not supported (they need Explicit
// mesh axes, which spmdsim's meshes do not have).
#ifndef SPMDSIM_PARTITION_PARTITION_SPEC_H_
#define SPMDSIM_PARTITION_PARTITION_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/strings.h"  // PyRepr
#include "mesh/mesh.h"

namespace spmdsim {

class PartitionSpec {
 public:
  // One dimension's entry. Immutable value; built by the named factories.
  class Entry {
   public:
    enum class Kind { kNone, kAxes, kUnconstrained };

    Entry() = default;  // None
    static Entry None() { return Entry(); }
    static Entry Unconstrained();
    static Entry Axis(std::string name);  // '' becomes None, as JAX's canonicalisation does
    // ('x', 'y'): a one-name tuple becomes that name and an empty one None.
    static Entry Axes(std::vector<std::string> names);

    Kind kind() const { return kind_; }
    bool is_none() const { return kind_ == Kind::kNone; }
    bool is_unconstrained() const { return kind_ == Kind::kUnconstrained; }
    // Shards the dimension (names at least one axis).
    bool has_axes() const { return kind_ == Kind::kAxes; }
    bool is_tuple() const { return axes_.size() > 1; }
    // The mesh axes, major to minor (empty for None and UNCONSTRAINED).
    const std::vector<std::string>& axes() const { return axes_; }

    // JAX's repr: None, 'x', ('x', 'y'), UNCONSTRAINED.
    std::string ToString() const;
    bool operator==(const Entry& other) const = default;

   private:
    Kind kind_ = Kind::kNone;
    std::vector<std::string> axes_;
  };

  PartitionSpec() = default;  // P(): every dimension whole
  explicit PartitionSpec(std::vector<Entry> entries) : entries_(std::move(entries)) {}
  PartitionSpec(std::initializer_list<Entry> entries) : entries_(entries) {}

  // Parses what users paste from Python:
  //   PartitionSpec('dp', None, ('fsdp', 'tp'))   P("dp", None)   jax.sharding.PartitionSpec()   P(P.UNCONSTRAINED)
  //   ('dp', None)    ['dp', None]    'dp', None    ("dp",)    (empty text or "()" is P())
  // Single or double quotes, trailing commas, any whitespace; a bare parenthesised name ('dp') is that name, as in
  // Python. Throws SpecSyntaxError naming the column; a nested tuple throws JAX's ValueError.
  static PartitionSpec Parse(std::string_view text);

  const std::vector<Entry>& entries() const { return entries_; }  // JAX: spec.partitions
  int size() const { return static_cast<int>(entries_.size()); }   // JAX: len(spec)
  bool empty() const { return entries_.empty(); }
  const Entry& operator[](int dim) const { return entries_[dim]; }

  // Every mesh axis named, in order of appearance (duplicates kept). JAX: flatten_spec minus None.
  std::vector<std::string> FlatAxes() const;
  // The spec padded with None to `rank` entries and UNCONSTRAINED read as None (JAX:
  // _normalized_spec_for_aval). REQUIRES: rank >= size().
  PartitionSpec Normalized(int rank) const;
  // No entry shards anything.
  bool IsReplicatedSpec() const;

  // JAX's repr: P(), P('x',), P('x', None), P(('x', 'y'), None).
  std::string ToString() const;
  bool operator==(const PartitionSpec& other) const = default;

 private:
  std::vector<Entry> entries_;
};

// P(...): a PartitionSpec written as in Python. Each argument is a mesh axis name, kNone, or a braced tuple of
// names (major to minor). Example: P("z", {"x", "y"}) == P('z', ('x', 'y')); P("x", kNone) == P('x', None);
// P() replicates everything.
inline constexpr std::nullptr_t kNone = nullptr;

class SpecArg {
 public:
  SpecArg() : absent_(true) {}                                                   // an unused trailing slot
  SpecArg(std::nullptr_t) {}                                                     // NOLINT: None
  SpecArg(const char* name) : entry_(PartitionSpec::Entry::Axis(name)) {}       // NOLINT
  SpecArg(std::string name) : entry_(PartitionSpec::Entry::Axis(std::move(name))) {}  // NOLINT
  SpecArg(std::initializer_list<const char*> names)                              // NOLINT: ('x', 'y')
      : entry_(PartitionSpec::Entry::Axes(std::vector<std::string>(names.begin(), names.end()))) {}
  bool absent() const { return absent_; }
  const PartitionSpec::Entry& entry() const { return entry_; }

 private:
  bool absent_ = false;
  PartitionSpec::Entry entry_;
};

PartitionSpec P(SpecArg a = {}, SpecArg b = {}, SpecArg c = {}, SpecArg d = {}, SpecArg e = {}, SpecArg f = {},
                SpecArg g = {}, SpecArg h = {});

// A parse error: kind "SyntaxError", with the 1-based column of the offending character.
class SpecSyntaxError : public Error {
 public:
  SpecSyntaxError(std::string message, int column)
      : Error(ErrorCode::kInvalidArgument, std::move(message), ErrorKind::kSyntaxError), column_(column) {}
  int column() const { return column_; }

 private:
  int column_;
};

// Why a spec does not fit a mesh and a shape. Ordered as JAX checks them.
enum class SpecProblemReason {
  kDuplicateAxis,  // an axis named twice (DuplicateSpecError)
  kUnknownAxis,    // an axis not in the mesh (ValueError "Resource axis: ...")
  kTooLong,        // more entries than the array has dimensions (ValueError "... only valid for values of rank ...")
  kNotDivisible,   // a dimension not divisible by the product of its axes' sizes (IndivisibleError)
};
std::string_view SpecProblemReasonName(SpecProblemReason reason);  // "duplicate_axis", "unknown_axis", ...

// One problem, with what correction code needs to repair it and JAX's exception name and message.
struct SpecProblem {
  SpecProblemReason reason = SpecProblemReason::kUnknownAxis;
  int dim = -1;                    // the dimension at fault (for kTooLong: the first dimension past the rank)
  std::vector<std::string> axes;   // the axes at fault (the duplicated / unknown axis; the entry's axes)
  int64_t dim_size = 0;            // kNotDivisible: the dimension's size
  int64_t partitions = 0;          // kNotDivisible: product of the entry's axis sizes
  ErrorKind kind = ErrorKind::kValueError;  // kDuplicateSpecError, kValueError or kIndivisibleError
  std::string message;             // JAX's wording
  // kUnknownAxis: the mesh axes close to the unknown one (CloseMatches, common/user_text.h), for a did-you-mean
  // that JAX's message lacks (kept apart so that `message` stays JAX's).
  std::vector<std::string> close_axes = {};
};

// The error Validate throws: the first problem, with every problem found attached.
class SpecError : public Error {
 public:
  explicit SpecError(std::vector<SpecProblem> problems);
  const std::vector<SpecProblem>& problems() const { return problems_; }
  const SpecProblem& first() const { return problems_.front(); }

 private:
  std::vector<SpecProblem> problems_;
};

// JAX's str of NamedSharding(mesh, spec):
//   "NamedSharding(mesh=Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto)), spec=P('x',), memory_kind=device)".
std::string JaxNamedShardingString(const Mesh& mesh, const PartitionSpec& spec);

// Every problem of `spec` on `mesh` (and on an array of `shape` when given), without throwing, in JAX's order:
// duplicates (one per repeated use, all carrying JAX's one message), unknown axes (one per use), too long,
// then divisibility (one per dimension; only when the spec is not too long and the dimension's axes are known).
std::vector<SpecProblem> CheckSpec(const PartitionSpec& spec, const Mesh& mesh,
                                   std::optional<std::span<const int64_t>> shape = std::nullopt);
// Throws SpecError for the first problem CheckSpec finds (its kind and message are JAX's).
void ValidateSpec(const PartitionSpec& spec, const Mesh& mesh,
                  std::optional<std::span<const int64_t>> shape = std::nullopt);

// A did-you-mean for the unknown mesh axes among `problems` (JAX's message has none, and ours keeps JAX's text):
// " (did you mean 'model' for 'modle'?)"; "" when no unknown axis has close mesh axes (SpecProblem::close_axes).
std::string UnknownAxisHint(const std::vector<SpecProblem>& problems);
// The same for the SpecError that `error` is or holds nested (common/error_context.h), "" when there is none.
// The CLI and scenario files append it to the message; Python adds it as a note (PEP 678), so that str(error)
// stays JAX's.
std::string UnknownAxisHint(const std::exception& error);

// Product of the mesh sizes of the entry's axes (1 for None / UNCONSTRAINED). REQUIRES: axes in the mesh.
int64_t EntryPartitions(const PartitionSpec::Entry& entry, const Mesh& mesh);

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_PARTITION_SPEC_H_
