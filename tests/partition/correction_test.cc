#include "partition/correction.h"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

PartitionSpec P(std::string_view text) { return PartitionSpec::Parse(text); }

CorrectionReport Correct(std::string_view spec, const Mesh& mesh, std::vector<int64_t> shape,
                         CorrectionMode mode = CorrectionMode::kEformer, std::ostream* log = nullptr) {
  CorrectionOptions options;
  options.mode = mode;
  options.log = log != nullptr;
  options.log_stream = log;
  return CorrectSpec(P(spec), mesh, shape, options);
}

Mesh DpFsdpTp() { return Mesh::Iota({2, 4, 2}, {"dp", "fsdp", "tp"}); }

// Expected eformer specs below come from a Python re-implementation of eformer's get_corrected_named_sharding
// (constraints.py) run on the same inputs.
TEST(EformerCorrection, DropsWholeEntriesThatDoNotFit) {
  CorrectionReport r = Correct("P(('dp', 'fsdp', 'tp'), 'sp', 'tp')", DpFsdpTp(), {8, 1024, 6});
  EXPECT_EQ(r.corrected, P("P(None, None, 'tp')"));
  ASSERT_EQ(r.corrections.size(), 2u);
  EXPECT_EQ(r.corrections[0].dim, 0);
  EXPECT_EQ(r.corrections[0].reason, CorrectionReason::kNotDivisible);
  EXPECT_EQ(r.corrections[0].from, PartitionSpec::Entry::Axes({"dp", "fsdp", "tp"}));
  EXPECT_EQ(r.corrections[0].to, PartitionSpec::Entry::None());
  EXPECT_EQ(r.corrections[0].message,
            "Array dimension 0 (size 8) is not divisible by the total mesh size (16) for axis spec ('dp', 'fsdp', "
            "'tp') in P(('dp', 'fsdp', 'tp'), 'sp', 'tp'). Correcting to None.");
  EXPECT_EQ(r.corrections[1].reason, CorrectionReason::kUnknownAxis);
  EXPECT_EQ(r.corrections[1].message,
            "Axis name 'sp' in PartitionSpec P(('dp', 'fsdp', 'tp'), 'sp', 'tp') at index 1 not found in mesh axes "
            "{'dp', 'fsdp', 'tp'}. Correcting dimension 1 to None.");
  EXPECT_EQ(r.bytes_per_device, 8 * 1024 * 3 * 4);
}

TEST(EformerCorrection, TruncatesToTheRank) {
  CorrectionReport r = Correct("P('fsdp', 'tp', 'dp')", DpFsdpTp(), {6, 4});
  EXPECT_EQ(r.corrected, P("P(None, 'tp')"));
  ASSERT_EQ(r.corrections.size(), 2u);
  EXPECT_EQ(r.corrections[0].reason, CorrectionReason::kTruncated);
  EXPECT_EQ(r.corrections[0].dim, 2);
  EXPECT_FALSE(r.corrections[0].to.has_value());
  EXPECT_EQ(
      r.corrections[0].message,
      "PartitionSpec length (3) exceeds array rank (2). Truncating spec: P('fsdp', 'tp', 'dp') -> ('fsdp', 'tp')");
  EXPECT_EQ(r.corrections[1].dim, 0);
  EXPECT_EQ(r.corrections[1].message,
            "Array dimension 0 (size 6) is not divisible by the total mesh size (4) for axis spec fsdp in "
            "P('fsdp', 'tp', 'dp'). Correcting to None.");
}

TEST(EformerCorrection, AllNoneBecomesTheEmptySpec) {
  CorrectionReport r = Correct("P('dp')", DpFsdpTp(), {3});
  EXPECT_EQ(r.corrected, PartitionSpec());
  EXPECT_TRUE(r.collapsed_to_empty);
  EXPECT_EQ(Correct("P(None, None)", DpFsdpTp(), {2, 2}).corrected, PartitionSpec());
  EXPECT_EQ(Correct("P('dp')", DpFsdpTp(), {}).corrected, PartitionSpec());  // a scalar
  EXPECT_EQ(Correct("P()", DpFsdpTp(), {5}).corrected, PartitionSpec());
}

TEST(EformerCorrection, PadsAndKeepsSizeOneAxes) {
  Mesh mesh = Mesh::Iota({2, 1}, {"dp", "one"});
  CorrectionReport r = Correct("P(('dp', 'one'))", mesh, {4, 4});
  EXPECT_EQ(r.corrected, P("P(('dp', 'one'), None)"));
  EXPECT_TRUE(r.corrections.empty());
  EXPECT_EQ(Correct("P('one')", mesh, {3}).corrected, P("P('one')"));
}

TEST(EformerCorrection, TreatsUnconstrainedAsAnUnexpectedEntry) {
  CorrectionReport r = Correct("P(P.UNCONSTRAINED, 'tp')", DpFsdpTp(), {4, 4});
  EXPECT_EQ(r.corrected, P("P(None, 'tp')"));
  ASSERT_EQ(r.corrections.size(), 1u);
  EXPECT_EQ(r.corrections[0].reason, CorrectionReason::kUnexpectedEntry);
  EXPECT_EQ(r.corrections[0].message,
            "Unexpected element type in PartitionSpec at index 0: UNCONSTRAINED. Treating as None.");
}

TEST(EformerCorrection, LeavesDuplicatesForJaxToReject) {
  // eformer returns NamedSharding(mesh, P('dp', 'dp')), which JAX rejects.
  try {
    Correct("P('dp', 'dp')", DpFsdpTp(), {8, 8});
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDuplicateSpecError);
  }
  // A duplicate that the correction itself removes is fine.
  EXPECT_EQ(Correct("P('dp', 'dp')", DpFsdpTp(), {8, 3}).corrected, P("P('dp', None)"));
  EXPECT_EQ(Correct("P('dp', 'dp')", DpFsdpTp(), {8}).corrected, P("P('dp',)"));
}

TEST(EformerCorrection, LogsOnlyWhenAsked) {
  std::ostringstream log;
  Correct("P('x', 'tp')", DpFsdpTp(), {4, 4}, CorrectionMode::kEformer, &log);
  EXPECT_THAT(log.str(), HasSubstr("UserWarning: Axis name 'x' in PartitionSpec P('x', 'tp') at index 0"));
  std::ostringstream quiet;
  CorrectionOptions options;
  options.log = false;
  options.log_stream = &quiet;
  CorrectSpec(P("P('x', 'tp')"), DpFsdpTp(), std::vector<int64_t>{4, 4}, options);
  EXPECT_EQ(quiet.str(), "");
}

TEST(LogShardingMove, ParsesTheVariableAsEformerDoes) {
  for (const char* on : {"true", "yes", "1", "on"}) {
    setenv("LOG_SHARDING_MOVE", on, 1);
    EXPECT_TRUE(LogShardingMoveFromEnvironment()) << on;
  }
  for (const char* off : {"True", "TRUE", "0", "false", "y", ""}) {
    setenv("LOG_SHARDING_MOVE", off, 1);
    EXPECT_FALSE(LogShardingMoveFromEnvironment()) << off;
  }
  unsetenv("LOG_SHARDING_MOVE");
  EXPECT_FALSE(LogShardingMoveFromEnvironment());
}

TEST(EformerCorrection, EmptyMeshGivesTheEmptySpec) {
  CorrectionReport r = Correct("P('x')", Mesh(), {4});
  EXPECT_EQ(r.corrected, PartitionSpec());
  ASSERT_EQ(r.corrections.size(), 1u);
  EXPECT_EQ(r.corrections[0].reason, CorrectionReason::kEmptyMesh);
}

TEST(NoCorrection, ThrowsJaxsError) {
  EXPECT_THROW(Correct("P('x')", DpFsdpTp(), {4}, CorrectionMode::kNone), SpecError);
  EXPECT_EQ(Correct("P('dp')", DpFsdpTp(), {4}, CorrectionMode::kNone).bytes_per_device, 8);
}

TEST(GetCorrectedNamedSharding, BindsTheCorrectedSpec) {
  std::vector<int64_t> shape{6, 4};
  NamedSharding s = GetCorrectedNamedSharding(shape, P("P('fsdp', 'tp')"), DpFsdpTp());
  EXPECT_EQ(s.spec(), P("P(None, 'tp')"));
}

TEST(KeepMostCorrection, KeepsTheFittingPartOfATuple) {
  CorrectionReport r = Correct("P(('dp', 'fsdp', 'tp'), 'sp', 'tp')", DpFsdpTp(), {8, 1024, 6},
                               CorrectionMode::kKeepMost);
  EXPECT_EQ(r.corrected, P("P(('dp', 'fsdp'), None, 'tp')"));
  EXPECT_EQ(r.bytes_per_device, 1 * 1024 * 3 * 4);
  EXPECT_EQ(r.eformer_spec, P("P(None, None, 'tp')"));
  EXPECT_EQ(r.eformer_bytes_per_device, 8 * 1024 * 3 * 4);
  EXPECT_EQ(r.bytes_saved_vs_eformer, 86016);
  ASSERT_EQ(r.corrections.size(), 2u);
  EXPECT_EQ(r.corrections[0].to, PartitionSpec::Entry::Axes({"dp", "fsdp"}));
  EXPECT_EQ(r.corrections[0].dropped_axes, (std::vector<std::string>{"tp"}));
}

TEST(KeepMostCorrection, PicksTheLargestDividingSubsetPreferringPrefixes) {
  Mesh mesh = Mesh::Iota({2, 3, 2}, {"a", "b", "c"});
  // 12 % (2*3*2) == 0 keeps all; 6: a*b = 6 beats a*c = 4; 4: a*c = 4 (not a prefix) beats a = 2.
  EXPECT_EQ(Correct("P(('a', 'b', 'c'))", mesh, {12}, CorrectionMode::kKeepMost).corrected, P("P(('a', 'b', 'c'),)"));
  EXPECT_EQ(Correct("P(('a', 'b', 'c'))", mesh, {6}, CorrectionMode::kKeepMost).corrected, P("P(('a', 'b'),)"));
  EXPECT_EQ(Correct("P(('a', 'b', 'c'))", mesh, {4}, CorrectionMode::kKeepMost).corrected, P("P(('a', 'c'),)"));
  // 2: a and c tie; the prefix 'a' wins.
  EXPECT_EQ(Correct("P(('a', 'b', 'c'))", mesh, {2}, CorrectionMode::kKeepMost).corrected, P("P('a',)"));
  // Unknown axes are dropped, not the whole entry.
  EXPECT_EQ(Correct("P(('q', 'b'))", mesh, {3}, CorrectionMode::kKeepMost).corrected, P("P('b',)"));
}

TEST(KeepMostCorrection, DropsRepeatedAxesFromLaterDimensions) {
  CorrectionReport r = Correct("P('dp', ('dp', 'tp'))", DpFsdpTp(), {8, 8}, CorrectionMode::kKeepMost);
  EXPECT_EQ(r.corrected, P("P('dp', 'tp')"));
  ASSERT_EQ(r.corrections.size(), 1u);
  EXPECT_EQ(r.corrections[0].reason, CorrectionReason::kDuplicateAxis);
  EXPECT_EQ(r.corrections[0].dim, 1);
  EXPECT_FALSE(r.bytes_saved_vs_eformer.has_value());  // eformer's spec raises DuplicateSpecError
  EXPECT_EQ(Correct("P(('dp', 'dp'))", DpFsdpTp(), {8}, CorrectionMode::kKeepMost).corrected, P("P('dp',)"));
}

TEST(KeepMostCorrection, EntriesEformerKeepsWinTheirAxes) {
  // Dim 0 ('tp', 'dp') (4) does not divide 6; dim 1 'tp' fits and keeps tp, so dim 0 gets dp only.
  CorrectionReport r = Correct("P(('tp', 'dp'), 'tp')", DpFsdpTp(), {6, 4}, CorrectionMode::kKeepMost);
  EXPECT_EQ(r.corrected, P("P('dp', 'tp')"));
  EXPECT_EQ(r.eformer_spec, P("P(None, 'tp')"));
  EXPECT_EQ(r.bytes_saved_vs_eformer, 6 * 2 * 4 - 3 * 2 * 4);
  // Nothing left that divides: None, with eformer's reason.
  CorrectionReport none = Correct("P(('tp', 'fsdp'), 'tp')", DpFsdpTp(), {6, 4}, CorrectionMode::kKeepMost);
  EXPECT_EQ(none.corrected, P("P(None, 'tp')"));
  EXPECT_EQ(none.corrections[0].reason, CorrectionReason::kNotDivisible);
  EXPECT_EQ(none.bytes_saved_vs_eformer, 0);
}

TEST(ParseCorrectionMode, RoundTripsAndRejectsUnknownNames) {
  EXPECT_EQ(ParseCorrectionMode("keep-most"), CorrectionMode::kKeepMost);
  EXPECT_EQ(ParseCorrectionMode("eformer"), CorrectionMode::kEformer);
  EXPECT_EQ(ParseCorrectionMode("none"), CorrectionMode::kNone);
  try {
    ParseCorrectionMode("best");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("'best'"));
    EXPECT_THAT(e.message(), HasSubstr("keep-most"));
  }
  EXPECT_EQ(CorrectionReasonName(CorrectionReason::kNotDivisible), "not_divisible");
}

// Random meshes, shapes and arbitrary (possibly broken) specs.
TEST(Correction, RandomSpecsCorrectToValidSpecsAndKeepMostNeverShardsLess) {
  std::mt19937 rng(99);
  const std::vector<std::string> names{"a", "b", "c", "d", "zz"};  // "zz" is never in the mesh
  int eformer_valid = 0, improved = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int mesh_rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> mesh_shape;
    for (int i = 0; i < mesh_rank; ++i) mesh_shape.push_back(1 + static_cast<int64_t>(rng() % 4));
    Mesh mesh = Mesh::Iota(mesh_shape, std::vector<std::string>(names.begin(), names.begin() + mesh_rank));
    const int rank = static_cast<int>(rng() % 4);
    std::vector<int64_t> shape;
    for (int d = 0; d < rank; ++d) shape.push_back(1 + static_cast<int64_t>(rng() % 12));
    std::vector<PartitionSpec::Entry> entries(rng() % 5);
    for (auto& e : entries) {
      const int kind = static_cast<int>(rng() % 6);
      if (kind == 0) continue;  // None
      if (kind == 1) {
        e = PartitionSpec::Entry::Unconstrained();
        continue;
      }
      std::vector<std::string> axes(1 + rng() % 3);
      for (auto& a : axes) a = names[rng() % names.size()];
      e = PartitionSpec::Entry::Axes(axes);
    }
    PartitionSpec spec(entries);

    CorrectionOptions keep_most;
    keep_most.mode = CorrectionMode::kKeepMost;
    keep_most.log = false;
    CorrectionReport km = CorrectSpec(spec, mesh, shape, keep_most);
    ASSERT_TRUE(CheckSpec(km.corrected, mesh, shape).empty()) << spec.ToString() << " -> " << km.corrected.ToString();
    EXPECT_EQ(km.bytes_per_device, NamedSharding(mesh, km.corrected).Layout(shape).ShardBytes(4));
    EXPECT_TRUE(std::is_sorted(km.corrections.begin(), km.corrections.end(),
                               [](const Correction& x, const Correction& y) { return x.dim < y.dim; }));

    CorrectionOptions eformer;
    eformer.log = false;
    try {
      CorrectionReport ef = CorrectSpec(spec, mesh, shape, eformer);
      ++eformer_valid;
      EXPECT_TRUE(CheckSpec(ef.corrected, mesh, shape).empty()) << spec.ToString();
      EXPECT_EQ(km.eformer_spec, ef.corrected);
      ASSERT_TRUE(km.bytes_saved_vs_eformer.has_value());
      EXPECT_LE(km.bytes_per_device, ef.bytes_per_device) << spec.ToString();
      EXPECT_EQ(*km.bytes_saved_vs_eformer, ef.bytes_per_device - km.bytes_per_device);
      for (const auto& a : ef.corrected.FlatAxes()) {  // keep-most names every axis eformer names
        auto flat = km.corrected.FlatAxes();
        EXPECT_NE(std::find(flat.begin(), flat.end(), a), flat.end()) << spec.ToString();
      }
      if (km.bytes_per_device < ef.bytes_per_device) ++improved;
    } catch (const SpecError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDuplicateSpecError) << spec.ToString();
      EXPECT_FALSE(km.bytes_saved_vs_eformer.has_value());
    }
  }
  EXPECT_GT(eformer_valid, 500);  // the generator exercises both paths
  EXPECT_GT(improved, 50);
}

}  // namespace
}  // namespace spmdsim
