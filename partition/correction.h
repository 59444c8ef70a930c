// Auto-correction of a PartitionSpec that does not fit an array: eformer's behaviour, exactly, and a mode that keeps
// more sharding.
//
// CorrectionMode::kEformer reproduces eformer.escale.partition.constraints.get_corrected_named_sharding (and the
// spec that with_sharding_constraint applies, which runs the same steps):
//   1. an empty mesh gives P() (eformer warns and returns a replicated sharding); P() stays P();
//   2. the spec is padded with None to the rank, or truncated to it;
//   3. per dimension: None stays; an entry that is not None, a name or a tuple (P.UNCONSTRAINED) becomes None; an
//      entry with ANY axis missing from the mesh becomes None; an entry whose axis-size product does not divide
//      the dimension becomes None. Mesh axes of size 1 are kept. Tuples are all-or-nothing.
//   4. all None gives P();
//   5. the result is bound to the mesh: eformer does not remove repeated axes, so a spec that still names an axis
//      twice raises JAX's DuplicateSpecError there (and here: SpecError, kind "DuplicateSpecError").
// Every change is reported; eformer logs truncation, unknown axes, indivisibility and unexpected entries when the
// environment variable LOG_SHARDING_MOVE is exactly "true", "yes", "1" or "on" (read as eformer does, at each call
// here rather than at import).
//
// CorrectionMode::kKeepMost keeps the most sharding that still fits; the rule, exactly:
//   1-2 as above (truncation reported);
//   3a. every entry eformer keeps whole is kept, minus axes an EARLIER such entry already uses (repeats dropped);
//   3b. then, in dimension order, each entry eformer turns into None keeps the order-preserving subsequence of its
//       axes -- restricted to axes in the mesh, not yet used, first occurrence only -- whose size product divides
//       the dimension and is LARGEST; ties go to more axes (size-1 axes are kept, as eformer keeps them), then to
//       the lexicographically smallest index list (so a prefix of the tuple wins);
//   4. all None gives P().
// The result always validates, and names a superset of the axes eformer's result names, so it never shards less;
// the report gives the bytes per device of both and the saving.
//
// Example: Mesh {dp:2, fsdp:4, tp:2}, shape (8, 1024, 6), P(('dp', 'fsdp', 'tp'), 'sp', 'tp'), f32:
//   eformer:   P(None, None, 'tp')            -> dim 0 (8 % 16 != 0) and dim 1 ('sp' unknown) become None;
//              bytes per device 8*1024*3*4 = 98304
//   keep-most: P(('dp', 'fsdp'), None, 'tp')  -> dim 0 keeps dp*fsdp = 8 (tp is taken by dim 2);
//              bytes per device 1*1024*3*4 = 12288, saving 86016.
#ifndef SPMDSIM_PARTITION_CORRECTION_H_
#define SPMDSIM_PARTITION_CORRECTION_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/mesh.h"
#include "partition/named_sharding.h"
#include "partition/partition_spec.h"

namespace spmdsim {

enum class CorrectionMode {
  kNone,      // validate only: throw SpecError as JAX would
  kEformer,   // eformer's get_corrected_named_sharding
  kKeepMost,  // the most sharding that fits (see the file comment)
};
std::string_view CorrectionModeName(CorrectionMode mode);  // "none", "eformer", "keep-most"
// Inverse of CorrectionModeName; throws Error(kInvalidArgument) listing the valid names.
CorrectionMode ParseCorrectionMode(std::string_view name);

enum class CorrectionReason {
  kEmptyMesh,        // the mesh has no devices: the spec becomes P()
  kTruncated,        // the dimension is past the array's rank
  kUnexpectedEntry,  // P.UNCONSTRAINED (eformer: "Unexpected element type")
  kUnknownAxis,      // an axis is not in the mesh
  kNotDivisible,     // the axes' size product does not divide the dimension
  kDuplicateAxis,    // keep-most: an axis already used by an earlier dimension was dropped
};
std::string_view CorrectionReasonName(CorrectionReason reason);  // "truncated", "unknown_axis", ...

// One corrected dimension.
struct Correction {
  int dim = 0;
  PartitionSpec::Entry from;
  std::optional<PartitionSpec::Entry> to;  // nullopt when the dimension was removed (kTruncated)
  CorrectionReason reason = CorrectionReason::kNotDivisible;
  std::vector<std::string> dropped_axes;   // the axes no longer used at this dimension
  std::string message;                     // human text (eformer's warning wording where eformer has one)
};

struct CorrectionOptions {
  CorrectionMode mode = CorrectionMode::kEformer;
  // Bytes per element, for the bytes-per-device figures.
  int64_t element_bytes = 4;
  // Log each correction to `log_stream` (stderr when null); nullopt reads LOG_SHARDING_MOVE as eformer does.
  std::optional<bool> log;
  std::ostream* log_stream = nullptr;
};

struct CorrectionReport {
  CorrectionMode mode = CorrectionMode::kEformer;
  PartitionSpec original;
  PartitionSpec corrected;
  std::vector<Correction> corrections;
  bool collapsed_to_empty = false;  // an all-None result was written P()
  // Bytes one device holds under the corrected spec (0 for an empty mesh).
  int64_t bytes_per_device = 0;
  // kKeepMost: the same under eformer's spec, nullopt when eformer's spec raises DuplicateSpecError.
  std::optional<int64_t> eformer_bytes_per_device;
  std::optional<PartitionSpec> eformer_spec;
  // kKeepMost: eformer_bytes_per_device - bytes_per_device (>= 0) when eformer's spec is valid.
  std::optional<int64_t> bytes_saved_vs_eformer;
};

// Corrects `spec` for an array of `shape` on `mesh`. kNone throws SpecError for the first problem; kEformer throws
// SpecError (DuplicateSpecError) where eformer does; kKeepMost never throws for a spec that parsed.
CorrectionReport CorrectSpec(const PartitionSpec& spec, const Mesh& mesh, std::span<const int64_t> shape,
                             const CorrectionOptions& options = {});

// eformer: get_corrected_named_sharding(shape, partition_spec) with `mesh` as the context mesh.
// REQUIRES: mesh not empty (eformer returns a sharding on an empty mesh, which NamedSharding here refuses).
NamedSharding GetCorrectedNamedSharding(std::span<const int64_t> shape, const PartitionSpec& spec, const Mesh& mesh);

// Whether LOG_SHARDING_MOVE is set to one of eformer's true values ("true", "yes", "1", "on"; case-sensitive).
bool LogShardingMoveFromEnvironment();

// Bytes one device holds for an array of `shape` under `spec` (trailing dimensions whole, UNCONSTRAINED as None).
// REQUIRES: spec's axes in the mesh and dividing the shape.
int64_t BytesPerDevice(const PartitionSpec& spec, const Mesh& mesh, std::span<const int64_t> shape,
                       int64_t element_bytes);

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_CORRECTION_H_
