#include "partition/partition_spec.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <map>
#include <memory>
#include <set>

#include <fmt/ranges.h>

#include "common/strings.h"
#include "common/user_text.h"

namespace spmdsim {

// ---------------------------------------------------------------------------------------------------------------
// Entry and PartitionSpec

PartitionSpec::Entry PartitionSpec::Entry::Unconstrained() {
  Entry e;
  e.kind_ = Kind::kUnconstrained;
  return e;
}

PartitionSpec::Entry PartitionSpec::Entry::Axis(std::string name) {
  Entry e;
  if (name.empty()) return e;  // '' is falsy: None
  e.kind_ = Kind::kAxes;
  e.axes_.push_back(std::move(name));
  return e;
}

PartitionSpec::Entry PartitionSpec::Entry::Axes(std::vector<std::string> names) {
  Entry e;
  if (names.empty()) return e;  // () is falsy: None
  e.kind_ = Kind::kAxes;
  e.axes_ = std::move(names);
  return e;
}

std::string PartitionSpec::Entry::ToString() const {
  switch (kind_) {
    case Kind::kNone: return "None";
    case Kind::kUnconstrained: return "UNCONSTRAINED";
    case Kind::kAxes: break;
  }
  if (axes_.size() == 1) return PyRepr(axes_[0]);
  std::vector<std::string> parts;
  for (const auto& a : axes_) parts.push_back(PyRepr(a));
  return fmt::format("({})", fmt::join(parts, ", "));
}

std::vector<std::string> PartitionSpec::FlatAxes() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.insert(out.end(), e.axes().begin(), e.axes().end());
  return out;
}

PartitionSpec PartitionSpec::Normalized(int rank) const {
  SPMDSIM_CHECK(rank >= size(), "rank {} < spec length {}", rank, size());
  std::vector<Entry> out;
  out.reserve(rank);
  for (const Entry& e : entries_) out.push_back(e.is_unconstrained() ? Entry::None() : e);
  out.resize(rank);
  return PartitionSpec(std::move(out));
}

bool PartitionSpec::IsReplicatedSpec() const {
  return std::none_of(entries_.begin(), entries_.end(), [](const Entry& e) { return e.has_axes(); });
}

std::string PartitionSpec::ToString() const {
  // JAX prints repr(tuple)[1:-1]: a one-entry spec keeps the tuple's trailing comma.
  std::vector<std::string> parts;
  parts.reserve(entries_.size());
  for (const Entry& e : entries_) parts.push_back(e.ToString());
  if (parts.size() == 1) return fmt::format("P({},)", parts[0]);
  return fmt::format("P({})", fmt::join(parts, ", "));
}

// ---------------------------------------------------------------------------------------------------------------
// Parsing

namespace {

// A Python value as far as a pasted spec needs: None, a string, a tuple or list, P.UNCONSTRAINED.
struct PyValue {
  enum class Kind { kNone, kString, kTuple, kList, kUnconstrained } kind = Kind::kNone;
  std::string text;
  std::vector<PyValue> items;
  int column = 0;

  bool IsSequence() const { return kind == Kind::kTuple || kind == Kind::kList; }
  // Python's str() of the value (the form JAX's nested-tuple message prints).
  std::string Repr() const {
    switch (kind) {
      case Kind::kNone: return "None";
      case Kind::kString: return PyRepr(text);
      case Kind::kUnconstrained: return "UNCONSTRAINED";
      case Kind::kTuple:
      case Kind::kList: break;
    }
    std::vector<std::string> parts;
    for (const auto& i : items) parts.push_back(i.Repr());
    if (kind == Kind::kList) return fmt::format("[{}]", fmt::join(parts, ", "));
    if (parts.size() == 1) return fmt::format("({},)", parts[0]);
    return fmt::format("({})", fmt::join(parts, ", "));
  }
};

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

bool EndsWithName(std::string_view ident, std::string_view name) {
  if (ident == name) return true;
  return ident.size() > name.size() && ident.ends_with(name) && ident[ident.size() - name.size() - 1] == '.';
}
bool IsSpecConstructor(std::string_view ident) {
  return EndsWithName(ident, "P") || EndsWithName(ident, "PartitionSpec");
}
bool IsUnconstrainedName(std::string_view ident) { return EndsWithName(ident, "UNCONSTRAINED"); }

class SpecParser {
 public:
  explicit SpecParser(std::string_view text) : text_(text) {}

  PartitionSpec Parse() {
    SkipSpace();
    if (AtEnd()) return PartitionSpec();
    std::vector<PyValue> entries;
    const size_t start = pos_;
    if (IsIdentStart(Peek())) {
      std::string ident = ReadIdent();
      SkipSpace();
      if (IsSpecConstructor(ident) && !AtEnd() && Peek() == '(') {
        ++pos_;
        entries = ParseItems(')', /*allow_keywords=*/true);
        Expect(')', "')' to close the PartitionSpec");
        SkipSpace();
        if (!AtEnd()) Fail("unexpected text after the closing ')'");
        return Canonicalize(entries);
      }
      pos_ = start;  // None, UNCONSTRAINED: a bare list of entries
    }
    entries = ParseItems('\0', /*allow_keywords=*/false);
    if (!AtEnd()) Fail("expected ',' between entries");
    // A single bare tuple or list, e.g. ('dp', None), lists the entries (P(*value)); a trailing comma after it
    // makes it one entry, as Python's tuple syntax does.
    if (entries.size() == 1 && entries[0].IsSequence() && !trailing_comma_) {
      std::vector<PyValue> inner = std::move(entries[0].items);
      return Canonicalize(inner);
    }
    return Canonicalize(entries);
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  int Column() const { return static_cast<int>(pos_) + 1; }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  [[noreturn]] void FailAt(int column, std::string_view what) const {
    std::string shown = AtEnd() && static_cast<size_t>(column) > text_.size()
                            ? "end of text"
                            : fmt::format("'{}'", text_[column - 1]);
    throw SpecSyntaxError(fmt::format("cannot parse PartitionSpec {}: column {}: {} (found {})", PyRepr(text_),
                                      column, what, shown),
                          column);
  }
  [[noreturn]] void Fail(std::string_view what) const { FailAt(Column(), what); }

  void Expect(char c, std::string_view what) {
    SkipSpace();
    if (Peek() != c) Fail(fmt::format("expected {}", what));
    ++pos_;
  }

  std::string ReadIdent() {
    size_t b = pos_;
    while (!AtEnd() && IsIdentChar(text_[pos_])) ++pos_;
    return std::string(text_.substr(b, pos_ - b));
  }

  // Comma-separated values up to `close` ('\0' = end of text). Sets trailing_comma_ for the last list read.
  std::vector<PyValue> ParseItems(char close, bool allow_keywords) {
    std::vector<PyValue> items;
    trailing_comma_ = false;
    while (true) {
      SkipSpace();
      if ((close == '\0' && AtEnd()) || (close != '\0' && Peek() == close)) break;
      if (allow_keywords && IsIdentStart(Peek())) {
        size_t save = pos_;
        int col = Column();
        std::string ident = ReadIdent();
        SkipSpace();
        if (Peek() == '=') {
          if (ident == "unreduced" || ident == "reduced" || ident == "unreduced_kind") {
            throw Error(ErrorCode::kUnimplemented,
                        fmt::format("cannot parse PartitionSpec {}: column {}: `{}=` is not supported by spmdsim "
                                    "(unreduced/reduced axes need Explicit mesh axes); remove it",
                                    PyRepr(text_), col, ident),
                        ErrorKind::kNotImplementedError);
          }
          FailAt(col, fmt::format("PartitionSpec takes no keyword argument '{}'", ident));
        }
        pos_ = save;
      }
      items.push_back(ParseValue(/*depth=*/0));
      SkipSpace();
      trailing_comma_ = false;
      if (Peek() == ',') {
        ++pos_;
        trailing_comma_ = true;
        continue;
      }
      break;
    }
    if (close != '\0') {
      SkipSpace();
      if (Peek() != close) Fail(fmt::format("expected ',' or '{}' after an entry", close));
    }
    return items;
  }

  PyValue ParseValue(int depth) {
    SkipSpace();
    PyValue v;
    v.column = Column();
    if (depth > 16) Fail("entries nested too deeply");
    const char c = Peek();
    if (c == '\'' || c == '"') {
      v.kind = PyValue::Kind::kString;
      v.text = ReadString();
      return v;
    }
    if (c == '(' || c == '[') {
      const char close = c == '(' ? ')' : ']';
      ++pos_;
      std::vector<PyValue> items;
      bool saw_comma = false;
      while (true) {
        SkipSpace();
        if (Peek() == close) break;
        if (AtEnd()) Fail(fmt::format("expected '{}' to close the {} opened at column {}", close,
                                      c == '(' ? "tuple" : "list", v.column));
        items.push_back(ParseValue(depth + 1));
        SkipSpace();
        if (Peek() == ',') {
          ++pos_;
          saw_comma = true;
          continue;
        }
        if (Peek() != close) Fail(fmt::format("expected ',' or '{}' after an entry", close));
      }
      ++pos_;
      if (c == '(' && items.size() == 1 && !saw_comma) return items[0];  // ('dp') is just 'dp'
      v.kind = c == '(' ? PyValue::Kind::kTuple : PyValue::Kind::kList;
      v.items = std::move(items);
      return v;
    }
    if (IsIdentStart(c)) {
      std::string ident = ReadIdent();
      if (ident == "None") return v;
      if (IsUnconstrainedName(ident)) {
        v.kind = PyValue::Kind::kUnconstrained;
        return v;
      }
      FailAt(v.column, fmt::format("'{}' is not an entry: use None, a quoted axis name such as '{}', a tuple of "
                                   "names, or P.UNCONSTRAINED",
                                   ident, ident));
    }
    if (AtEnd()) Fail("expected an entry");
    Fail("expected None, a quoted axis name, a tuple of names, or P.UNCONSTRAINED");
  }

  std::string ReadString() {
    const char quote = text_[pos_];
    const int open_column = Column();
    ++pos_;
    std::string out;
    while (true) {
      if (AtEnd()) FailAt(open_column, "unterminated string");
      char ch = text_[pos_++];
      if (ch == quote) break;
      if (ch == '\\') {
        if (AtEnd()) FailAt(open_column, "unterminated string");
        char esc = text_[pos_++];
        switch (esc) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          default: out += esc; break;  // \\ \' \" and anything else literally
        }
        continue;
      }
      out += ch;
    }
    return out;
  }

  // JAX's canonicalize_partition over each argument.
  PartitionSpec Canonicalize(const std::vector<PyValue>& values) const {
    std::vector<PartitionSpec::Entry> entries;
    entries.reserve(values.size());
    for (const PyValue& v : values) {
      switch (v.kind) {
        case PyValue::Kind::kNone: entries.push_back(PartitionSpec::Entry::None()); break;
        case PyValue::Kind::kUnconstrained: entries.push_back(PartitionSpec::Entry::Unconstrained()); break;
        case PyValue::Kind::kString: entries.push_back(PartitionSpec::Entry::Axis(v.text)); break;
        case PyValue::Kind::kTuple:
        case PyValue::Kind::kList: {
          for (const PyValue& item : v.items) {
            if (item.IsSequence()) {
              throw Error(ErrorCode::kInvalidArgument,
                          fmt::format("A tuple inside PartitionSpec cannot contain a nested tuple. Got partition: "
                                      "{} and the nested tuple: {}",
                                      v.Repr(), item.Repr()),
                          ErrorKind::kValueError);
            }
          }
          std::vector<std::string> names;
          for (const PyValue& item : v.items) {
            if (item.kind != PyValue::Kind::kString || item.text.empty()) {
              FailAt(item.column, fmt::format("a tuple entry holds mesh axis names only, not {} (write None for "
                                              "the whole dimension instead)",
                                              item.Repr()));
            }
            names.push_back(item.text);
          }
          entries.push_back(PartitionSpec::Entry::Axes(std::move(names)));
          break;
        }
      }
    }
    return PartitionSpec(std::move(entries));
  }

  std::string_view text_;
  size_t pos_ = 0;
  bool trailing_comma_ = false;
};

}  // namespace

PartitionSpec PartitionSpec::Parse(std::string_view text) { return SpecParser(text).Parse(); }

PartitionSpec P(SpecArg a, SpecArg b, SpecArg c, SpecArg d, SpecArg e, SpecArg f, SpecArg g, SpecArg h) {
  std::vector<PartitionSpec::Entry> entries;
  for (const SpecArg* arg : {&a, &b, &c, &d, &e, &f, &g, &h}) {
    if (arg->absent()) break;
    entries.push_back(arg->entry());
  }
  return PartitionSpec(std::move(entries));
}

// ---------------------------------------------------------------------------------------------------------------
// Validation

std::string_view SpecProblemReasonName(SpecProblemReason reason) {
  switch (reason) {
    case SpecProblemReason::kDuplicateAxis: return "duplicate_axis";
    case SpecProblemReason::kUnknownAxis: return "unknown_axis";
    case SpecProblemReason::kTooLong: return "too_long";
    case SpecProblemReason::kNotDivisible: return "not_divisible";
  }
  return "unknown";
}

SpecError::SpecError(std::vector<SpecProblem> problems)
    : Error(ErrorCode::kInvalidArgument, problems.front().message, problems.front().kind),
      problems_(std::move(problems)) {}

std::string JaxNamedShardingString(const Mesh& mesh, const PartitionSpec& spec) {
  std::string mesh_str;
  if (mesh.empty()) {
    mesh_str = "Mesh()";
  } else {
    std::vector<std::string> sizes;
    std::vector<std::string> types;
    for (int i = 0; i < mesh.rank(); ++i) {
      sizes.push_back(fmt::format("{}: {}", PyRepr(mesh.axis_names()[i]), mesh.shape()[i]));
      types.push_back(std::string(AxisTypeName(mesh.axis_types()[i])));
    }
    const std::string type_tuple =
        types.size() == 1 ? fmt::format("({},)", types[0]) : fmt::format("({})", fmt::join(types, ", "));
    mesh_str = fmt::format("Mesh({}, axis_types={})", fmt::join(sizes, ", "), type_tuple);
  }
  return fmt::format("NamedSharding(mesh={}, spec={}, memory_kind=device)", mesh_str, spec.ToString());
}

int64_t EntryPartitions(const PartitionSpec::Entry& entry, const Mesh& mesh) {
  int64_t p = 1;
  for (const auto& a : entry.axes()) p *= mesh.AxisSize(a);
  return p;
}

namespace {

// Duplicates (JAX: _check_unique_resources): one message listing every axis used more than once, on each repeat.
void AddDuplicateAxisProblems(const PartitionSpec& spec, std::vector<SpecProblem>* problems) {
  std::map<std::string, int> counts;
  std::vector<std::string> order;
  for (const auto& a : spec.FlatAxes()) {
    if (counts[a]++ == 0) order.push_back(a);
  }
  std::vector<std::string> multiple;
  for (const auto& a : order) {
    if (counts[a] > 1) multiple.push_back(a);
  }
  if (multiple.empty()) return;
  std::vector<std::string> shown;
  for (const auto& a : multiple) shown.push_back(fmt::format("`{}`", a));
  std::sort(shown.begin(), shown.end());  // JAX: mesh_lib.show_axes sorts
  const std::string message = fmt::format(
      "A single NamedSharding spec specification can map every mesh axis to at most one positional dimension, "
      "but {} has duplicate entries for {}",
      Abbreviate(spec.ToString()), JoinFirst(shown));
  std::set<std::string> seen;
  for (int d = 0; d < spec.size(); ++d) {
    for (const auto& a : spec[d].axes()) {
      if (!seen.insert(a).second) {
        problems->push_back({SpecProblemReason::kDuplicateAxis, d, {a}, 0, 0, ErrorKind::kDuplicateSpecError, message});
      }
    }
  }
}

// Unknown axes (JAX: _check_mesh_resource_axis).
void AddUnknownAxisProblems(const PartitionSpec& spec, const Mesh& mesh, std::vector<SpecProblem>* problems) {
  std::vector<std::string> mesh_axes;
  for (const auto& a : mesh.axis_names()) mesh_axes.push_back(a);
  for (int d = 0; d < spec.size(); ++d) {
    for (const auto& a : spec[d].axes()) {
      if (!mesh.HasAxis(a)) {
        problems->push_back({SpecProblemReason::kUnknownAxis, d, {a}, 0, 0, ErrorKind::kValueError,
                             fmt::format("Resource axis: {} of {} is not found in mesh: {}.", a,
                                         Abbreviate(spec.ToString()), Abbreviate(PyTuple(mesh_axes))),
                             CloseMatches(a, mesh.axis_names())});
      }
    }
  }
}

// Rank (JAX: NamedSharding.check_compatible_aval): false, with the problem added, when the spec is too long.
bool CheckRank(const PartitionSpec& spec, const Mesh& mesh, int rank, std::vector<SpecProblem>* problems) {
  if (spec.size() <= rank) return true;
  problems->push_back(
      {SpecProblemReason::kTooLong, rank, {}, 0, 0, ErrorKind::kValueError,
       fmt::format("Sharding {} is only valid for values of rank at least {}, but was applied to a value of rank "
                   "{}.{}",
                   Abbreviate(JaxNamedShardingString(mesh, spec)), spec.size(), rank,
                   rank == 0 ? " For scalars the PartitionSpec should be P()" : "")});
  return false;
}

// Divisibility (JAX: Sharding.shard_shape -> IndivisibleError), with the per-dimension tiling factors.
// REQUIRES: spec.size() <= shape.size().
void AddDivisibilityProblems(const PartitionSpec& spec, const Mesh& mesh, std::span<const int64_t> shape,
                             std::vector<SpecProblem>* problems) {
  const int rank = static_cast<int>(shape.size());
  std::vector<int64_t> factors(rank, 1);
  std::vector<bool> known(rank, true);
  for (int d = 0; d < spec.size(); ++d) {
    for (const auto& a : spec[d].axes()) {
      if (mesh.HasAxis(a)) {
        factors[d] *= mesh.AxisSize(a);
      } else {
        known[d] = false;
      }
    }
  }
  const std::vector<int64_t> shape_vec(shape.begin(), shape.end());
  for (int d = 0; d < spec.size(); ++d) {
    if (!known[d] || shape[d] % factors[d] == 0) continue;
    problems->push_back(
        {SpecProblemReason::kNotDivisible, d, spec[d].axes(), shape[d], factors[d], ErrorKind::kIndivisibleError,
         fmt::format("Sharding {} implies that array axis {} is partitioned {} times, but the dimension size is {} "
                     "(full shape: {}, per-dimension tiling factors: [{}] should evenly divide the shape)",
                     Abbreviate(JaxNamedShardingString(mesh, spec)), d, factors[d], shape[d], PyTuple(shape_vec),
                     fmt::join(factors, ", "))});
  }
}

}  // namespace

std::vector<SpecProblem> CheckSpec(const PartitionSpec& spec, const Mesh& mesh,
                                   std::optional<std::span<const int64_t>> shape) {
  std::vector<SpecProblem> problems;
  AddDuplicateAxisProblems(spec, &problems);
  AddUnknownAxisProblems(spec, mesh, &problems);
  if (shape && CheckRank(spec, mesh, static_cast<int>(shape->size()), &problems)) {
    AddDivisibilityProblems(spec, mesh, *shape, &problems);
  }
  return problems;
}

void ValidateSpec(const PartitionSpec& spec, const Mesh& mesh, std::optional<std::span<const int64_t>> shape) {
  std::vector<SpecProblem> problems = CheckSpec(spec, mesh, shape);
  if (!problems.empty()) throw SpecError(std::move(problems));
}

std::string UnknownAxisHint(const std::vector<SpecProblem>& problems) {
  std::vector<std::string> parts;
  for (const SpecProblem& p : problems) {
    if (p.reason != SpecProblemReason::kUnknownAxis || p.close_axes.empty() || p.axes.empty()) continue;
    const std::string part = fmt::format("{} for {}", QuotedAlternatives(p.close_axes), QuoteForError(p.axes.front()));
    if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
  }
  if (parts.empty()) return "";
  return fmt::format(" (did you mean {}?)", fmt::join(parts, ", "));
}

std::string UnknownAxisHint(const std::exception& error) {
  if (const auto* spec = dynamic_cast<const SpecError*>(&error)) return UnknownAxisHint(spec->problems());
  try {
    std::rethrow_if_nested(error);
  } catch (const std::exception& nested) {
    return UnknownAxisHint(nested);
  } catch (...) {
  }
  return "";
}

}  // namespace spmdsim
