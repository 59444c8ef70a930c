#include "partition/correction.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>

#include "common/strings.h"

namespace spmdsim {

using Entry = PartitionSpec::Entry;

std::string_view CorrectionModeName(CorrectionMode mode) {
  switch (mode) {
    case CorrectionMode::kNone: return "none";
    case CorrectionMode::kEformer: return "eformer";
    case CorrectionMode::kKeepMost: return "keep-most";
  }
  return "unknown";
}

CorrectionMode ParseCorrectionMode(std::string_view name) {
  for (CorrectionMode m : {CorrectionMode::kNone, CorrectionMode::kEformer, CorrectionMode::kKeepMost}) {
    if (name == CorrectionModeName(m)) return m;
  }
  Throw(ErrorCode::kInvalidArgument, "unknown correction mode '{}'; valid modes are none, eformer, keep-most", name);
}

std::string_view CorrectionReasonName(CorrectionReason reason) {
  switch (reason) {
    case CorrectionReason::kEmptyMesh: return "empty_mesh";
    case CorrectionReason::kTruncated: return "truncated";
    case CorrectionReason::kUnexpectedEntry: return "unexpected_entry";
    case CorrectionReason::kUnknownAxis: return "unknown_axis";
    case CorrectionReason::kNotDivisible: return "not_divisible";
    case CorrectionReason::kDuplicateAxis: return "duplicate_axis";
  }
  return "unknown";
}

bool LogShardingMoveFromEnvironment() {
  const char* value = std::getenv("LOG_SHARDING_MOVE");
  if (value == nullptr) return false;  // eformer's default is "false"
  const std::string_view v(value);
  return v == "true" || v == "yes" || v == "1" || v == "on";
}

int64_t BytesPerDevice(const PartitionSpec& spec, const Mesh& mesh, std::span<const int64_t> shape,
                       int64_t element_bytes) {
  int64_t bytes = element_bytes;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t n = shape[d];
    if (static_cast<int>(d) < spec.size()) n /= EntryPartitions(spec[static_cast<int>(d)], mesh);
    bytes *= n;
  }
  return bytes;
}

namespace {

// Python's str of a tuple of spec entries, as eformer prints spec_tuple[:ndim].
std::string PyEntryTuple(std::span<const Entry> entries) {
  std::vector<std::string> parts;
  for (const Entry& e : entries) parts.push_back(e.ToString());
  if (parts.size() == 1) return fmt::format("({},)", parts[0]);
  return fmt::format("({})", fmt::join(parts, ", "));
}

// f"{axis_spec}" for a name (no quotes) or a tuple (its repr).
std::string PyStr(const Entry& e) { return e.is_tuple() ? e.ToString() : (e.has_axes() ? e.axes()[0] : e.ToString()); }

std::string PySet(const std::vector<std::string>& names) {
  std::vector<std::string> sorted;
  for (const auto& n : names) sorted.push_back(PyRepr(n));
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty()) return "set()";
  return fmt::format("{{{}}}", fmt::join(sorted, ", "));
}

// eformer's verdict on one (padded, truncated) entry.
struct Verdict {
  bool keep = true;
  CorrectionReason reason = CorrectionReason::kNotDivisible;
  std::string message;
};

Verdict EformerVerdict(const Entry& entry, int dim, int64_t dim_size, const PartitionSpec& original,
                       const Mesh& mesh) {
  Verdict v;
  if (entry.is_none()) return v;
  if (entry.is_unconstrained()) {
    v.keep = false;
    v.reason = CorrectionReason::kUnexpectedEntry;
    v.message = fmt::format("Unexpected element type in PartitionSpec at index {}: {}. Treating as None.", dim,
                            entry.ToString());
    return v;
  }
  int64_t total = 1;
  for (const auto& a : entry.axes()) {
    if (!mesh.HasAxis(a)) {
      v.keep = false;
      v.reason = CorrectionReason::kUnknownAxis;
      v.message = fmt::format("Axis name '{}' in PartitionSpec {} at index {} not found in mesh axes {}. "
                              "Correcting dimension {} to None.",
                              a, original.ToString(), dim, PySet(mesh.axis_names()), dim);
      return v;
    }
    total *= mesh.AxisSize(a);
  }
  if (dim_size % total != 0) {
    v.keep = false;
    v.reason = CorrectionReason::kNotDivisible;
    v.message = fmt::format("Array dimension {} (size {}) is not divisible by the total mesh size ({}) for axis "
                            "spec {} in {}. Correcting to None.",
                            dim, dim_size, total, PyStr(entry), original.ToString());
  }
  return v;
}

// Largest-product subsequence of `axes` dividing `dim_size`; ties: more axes, then lexicographically smallest
// index list. Returns the chosen indices into `axes`.
std::vector<int> BestSubsequence(const std::vector<std::string>& axes, const Mesh& mesh, int64_t dim_size) {
  const int n = static_cast<int>(axes.size());
  SPMDSIM_CHECK(n <= 20, "too many axes in one entry: {}", n);
  std::vector<int> best;
  int64_t best_product = 1;
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    int64_t product = 1;
    std::vector<int> picked;
    for (int i = 0; i < n; ++i) {
      if (mask & (1u << i)) {
        product *= mesh.AxisSize(axes[i]);
        picked.push_back(i);
      }
    }
    if (dim_size % product != 0) continue;
    const bool better = product > best_product ||
                        (product == best_product &&
                         (picked.size() > best.size() || (picked.size() == best.size() && picked < best)));
    if (better) {
      best_product = product;
      best = std::move(picked);
    }
  }
  return best;
}

std::vector<std::string> Difference(const std::vector<std::string>& from, const std::vector<std::string>& kept) {
  std::vector<std::string> out;
  for (const auto& a : from) {
    if (std::find(kept.begin(), kept.end(), a) == kept.end()) out.push_back(a);
  }
  return out;
}

// Where corrections go: the report, and eformer's warning on the log stream when logging is on.
struct CorrectionLog {
  CorrectionReport* report;
  bool log;
  std::ostream* out;

  void Emit(Correction c, bool eformer_logs) {
    if (log && eformer_logs) *out << "spmdsim: UserWarning: " << c.message << "\n";
    report->corrections.push_back(std::move(c));
  }
};

// The spec's entries truncated to `rank` (each dropped entry a correction; eformer logs the truncation once) or
// padded with None.
std::vector<Entry> PadOrTruncate(const PartitionSpec& spec, int rank, CorrectionLog& log) {
  std::vector<Entry> entries = spec.entries();
  if (static_cast<int>(entries.size()) > rank) {
    const std::string message = fmt::format(
        "PartitionSpec length ({}) exceeds array rank ({}). Truncating spec: {} -> {}", entries.size(), rank,
        spec.ToString(), PyEntryTuple(std::span<const Entry>(entries).first(rank)));
    for (int d = rank; d < static_cast<int>(entries.size()); ++d) {
      Correction c;
      c.dim = d;
      c.from = entries[d];
      c.reason = CorrectionReason::kTruncated;
      c.dropped_axes = entries[d].axes();
      c.message = message;
      log.Emit(std::move(c), /*eformer_logs=*/d == rank);
    }
  }
  entries.resize(rank);  // truncate, or pad with None
  return entries;
}

// The spec of `entries`; all None collapses to P() (and sets *collapsed).
PartitionSpec Finish(std::vector<Entry> entries, bool* collapsed) {
  PartitionSpec s(std::move(entries));
  if (s.IsReplicatedSpec() && !s.empty()) {
    *collapsed = true;
    return PartitionSpec();
  }
  return s;
}

// Keep-most 3a: the entries eformer keeps, minus axes an earlier kept entry uses (added to `used`); the others
// empty.
std::vector<Entry> KeepUnusedAxes(const std::vector<Entry>& entries, const std::vector<Verdict>& verdicts,
                                  std::set<std::string>& used, CorrectionLog& log) {
  const int rank = static_cast<int>(entries.size());
  std::vector<Entry> kept(rank);
  for (int d = 0; d < rank; ++d) {
    if (!verdicts[d].keep || !entries[d].has_axes()) continue;
    std::vector<std::string> axes;
    for (const auto& a : entries[d].axes()) {
      if (used.insert(a).second) axes.push_back(a);
    }
    kept[d] = Entry::Axes(axes);
    if (kept[d] != entries[d]) {
      Correction c;
      c.dim = d;
      c.from = entries[d];
      c.to = kept[d];
      c.reason = CorrectionReason::kDuplicateAxis;
      c.dropped_axes = Difference(entries[d].axes(), axes);
      c.message = fmt::format("dimension {}: {} {} already used by an earlier dimension; keeping {}", d,
                              c.dropped_axes.size() == 1 ? "axis" : "axes", PyTuple(c.dropped_axes),
                              kept[d].ToString());
      log.Emit(std::move(c), true);
    }
  }
  return kept;
}

// Keep-most 3b: the entries eformer drops keep their best fitting subsequence of unused mesh axes (in `kept`).
void RefitDroppedEntries(const std::vector<Entry>& entries, const std::vector<Verdict>& verdicts, const Mesh& mesh,
                         std::span<const int64_t> shape, std::set<std::string>& used, std::vector<Entry>& kept,
                         CorrectionLog& log) {
  for (int d = 0; d < static_cast<int>(entries.size()); ++d) {
    if (verdicts[d].keep) continue;
    std::vector<std::string> candidates;
    for (const auto& a : entries[d].axes()) {
      if (mesh.HasAxis(a) && !used.contains(a) &&
          std::find(candidates.begin(), candidates.end(), a) == candidates.end()) {
        candidates.push_back(a);
      }
    }
    std::vector<std::string> chosen;
    for (int i : BestSubsequence(candidates, mesh, shape[d])) chosen.push_back(candidates[i]);
    for (const auto& a : chosen) used.insert(a);
    kept[d] = Entry::Axes(chosen);
    Correction c;
    c.dim = d;
    c.from = entries[d];
    c.to = kept[d];
    c.reason = verdicts[d].reason;
    c.dropped_axes = Difference(entries[d].axes(), chosen);
    if (chosen.empty()) {
      c.message = verdicts[d].message;
    } else {
      c.message = fmt::format("dimension {} (size {}): {} does not fit; keeping {} (dropped {})", d, shape[d],
                              entries[d].ToString(), kept[d].ToString(), PyTuple(c.dropped_axes));
    }
    log.Emit(std::move(c), true);
  }
}

// CorrectionMode::kEformer: every entry eformer rejects becomes None.
void CorrectLikeEformer(const std::vector<Entry>& entries, const std::vector<Verdict>& verdicts,
                        const std::vector<Entry>& eformer, const Mesh& mesh, std::span<const int64_t> shape,
                        const CorrectionOptions& options, CorrectionLog& log) {
  CorrectionReport& report = *log.report;
  for (int d = 0; d < static_cast<int>(entries.size()); ++d) {
    if (verdicts[d].keep) continue;
    Correction c;
    c.dim = d;
    c.from = entries[d];
    c.to = Entry::None();
    c.reason = verdicts[d].reason;
    c.dropped_axes = entries[d].axes();
    c.message = verdicts[d].message;
    log.Emit(std::move(c), true);
  }
  report.corrected = Finish(eformer, &report.collapsed_to_empty);
  ValidateSpec(report.corrected, mesh);  // eformer builds NamedSharding(mesh, spec): DuplicateSpecError here
  report.bytes_per_device = BytesPerDevice(report.corrected, mesh, shape, options.element_bytes);
}

// CorrectionMode::kKeepMost: keep what eformer keeps without repeating axes, refit what it drops, and compare
// with eformer's result.
void CorrectKeepingMost(const std::vector<Entry>& entries, const std::vector<Verdict>& verdicts,
                        const std::vector<Entry>& eformer, const Mesh& mesh, std::span<const int64_t> shape,
                        const CorrectionOptions& options, CorrectionLog& log) {
  CorrectionReport& report = *log.report;
  std::set<std::string> used;
  std::vector<Entry> kept = KeepUnusedAxes(entries, verdicts, used, log);
  RefitDroppedEntries(entries, verdicts, mesh, shape, used, kept, log);
  std::stable_sort(report.corrections.begin(), report.corrections.end(),
                   [](const Correction& a, const Correction& b) { return a.dim < b.dim; });
  report.corrected = Finish(kept, &report.collapsed_to_empty);
  SPMDSIM_CHECK(CheckSpec(report.corrected, mesh, shape).empty(), "keep-most produced an invalid spec {}",
                report.corrected.ToString());
  report.bytes_per_device = BytesPerDevice(report.corrected, mesh, shape, options.element_bytes);

  bool eformer_collapsed = false;
  PartitionSpec eformer_spec = Finish(eformer, &eformer_collapsed);
  report.eformer_spec = eformer_spec;
  if (CheckSpec(eformer_spec, mesh).empty()) {
    report.eformer_bytes_per_device = BytesPerDevice(eformer_spec, mesh, shape, options.element_bytes);
    report.bytes_saved_vs_eformer = *report.eformer_bytes_per_device - report.bytes_per_device;
  }
}

}  // namespace

CorrectionReport CorrectSpec(const PartitionSpec& spec, const Mesh& mesh, std::span<const int64_t> shape,
                             const CorrectionOptions& options) {
  CorrectionReport report;
  report.mode = options.mode;
  report.original = spec;
  const int rank = static_cast<int>(shape.size());

  if (options.mode == CorrectionMode::kNone) {
    ValidateSpec(spec, mesh, shape);
    report.corrected = spec;
    report.bytes_per_device = BytesPerDevice(spec, mesh, shape, options.element_bytes);
    return report;
  }
  CorrectionLog log{&report, options.log.value_or(LogShardingMoveFromEnvironment()),
                    options.log_stream != nullptr ? options.log_stream : &std::cerr};
  if (mesh.empty()) {
    if (!spec.empty()) {
      Correction c;
      c.dim = 0;
      c.reason = CorrectionReason::kEmptyMesh;
      c.message = "Active mesh is empty. Returning replicated NamedSharding.";
      c.from = spec[0];
      c.to = Entry::None();
      c.dropped_axes = spec.FlatAxes();
      log.Emit(std::move(c), /*eformer_logs=*/true);  // eformer warns here whatever LOG_SHARDING_MOVE says
    }
    report.corrected = PartitionSpec();
    return report;
  }
  if (spec.empty()) {
    report.corrected = PartitionSpec();
    report.bytes_per_device = BytesPerDevice(report.corrected, mesh, shape, options.element_bytes);
    if (options.mode == CorrectionMode::kKeepMost) {
      report.eformer_spec = report.corrected;
      report.eformer_bytes_per_device = report.bytes_per_device;
      report.bytes_saved_vs_eformer = 0;
    }
    return report;
  }

  const std::vector<Entry> entries = PadOrTruncate(spec, rank, log);
  std::vector<Verdict> verdicts(rank);
  for (int d = 0; d < rank; ++d) verdicts[d] = EformerVerdict(entries[d], d, shape[d], spec, mesh);
  std::vector<Entry> eformer = entries;  // eformer's result
  for (int d = 0; d < rank; ++d) {
    if (!verdicts[d].keep) eformer[d] = Entry::None();
  }
  if (options.mode == CorrectionMode::kEformer) {
    CorrectLikeEformer(entries, verdicts, eformer, mesh, shape, options, log);
  } else {
    CorrectKeepingMost(entries, verdicts, eformer, mesh, shape, options, log);
  }
  return report;
}

NamedSharding GetCorrectedNamedSharding(std::span<const int64_t> shape, const PartitionSpec& spec, const Mesh& mesh) {
  CorrectionOptions options;
  options.mode = CorrectionMode::kEformer;
  return NamedSharding(mesh, CorrectSpec(spec, mesh, shape, options).corrected);
}

}  // namespace spmdsim
