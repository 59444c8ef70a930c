#include "partition/partition_spec.h"

#include <optional>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error_context.h"

namespace spmdsim {
namespace {

using Entry = PartitionSpec::Entry;
using ::testing::HasSubstr;

std::string Repr(std::string_view text) { return PartitionSpec::Parse(text).ToString(); }

TEST(PartitionSpecParse, AcceptsTheFormsUsersPasteFromPython) {
  const PartitionSpec expected{Entry::Axis("dp"), Entry::None(), Entry::Axes({"fsdp", "tp"})};
  EXPECT_EQ(PartitionSpec::Parse("PartitionSpec('dp', None, ('fsdp','tp'))"), expected);
  EXPECT_EQ(PartitionSpec::Parse("P('dp', None, ('fsdp', 'tp'))"), expected);
  EXPECT_EQ(PartitionSpec::Parse("jax.sharding.PartitionSpec(\"dp\", None, (\"fsdp\", \"tp\"),)"), expected);
  EXPECT_EQ(PartitionSpec::Parse("  jax.P( 'dp' ,None,\n ( 'fsdp' , 'tp' , ) , )  "), expected);
  EXPECT_EQ(PartitionSpec::Parse("('dp', None, ('fsdp', 'tp'))"), expected);
  EXPECT_EQ(PartitionSpec::Parse("['dp', None, ['fsdp', 'tp']]"), expected);
  EXPECT_EQ(PartitionSpec::Parse("'dp', None, ('fsdp', 'tp')"), expected);
}

TEST(PartitionSpecParse, EmptyFormsAreTheEmptySpec) {
  EXPECT_EQ(PartitionSpec::Parse(""), PartitionSpec());
  EXPECT_EQ(PartitionSpec::Parse("   "), PartitionSpec());
  EXPECT_EQ(PartitionSpec::Parse("P()"), PartitionSpec());
  EXPECT_EQ(PartitionSpec::Parse("PartitionSpec( )"), PartitionSpec());
  EXPECT_EQ(PartitionSpec::Parse("()"), PartitionSpec());
  EXPECT_EQ(PartitionSpec::Parse("[]"), PartitionSpec());
}

TEST(PartitionSpecParse, BareTupleFollowsPythonSyntax) {
  // ('dp') is the string 'dp'; ('dp',) is a one-entry tuple; (('a','b'),) is one tuple entry.
  EXPECT_EQ(PartitionSpec::Parse("('dp')"), (PartitionSpec{Entry::Axis("dp")}));
  EXPECT_EQ(PartitionSpec::Parse("('dp',)"), (PartitionSpec{Entry::Axis("dp")}));
  EXPECT_EQ(PartitionSpec::Parse("(('a','b'),)"), (PartitionSpec{Entry::Axes({"a", "b"})}));
  EXPECT_EQ(PartitionSpec::Parse("('a','b'),"), (PartitionSpec{Entry::Axes({"a", "b"})}));
  EXPECT_EQ(PartitionSpec::Parse("'dp'"), (PartitionSpec{Entry::Axis("dp")}));
  EXPECT_EQ(PartitionSpec::Parse("None"), (PartitionSpec{Entry::None()}));
}

TEST(PartitionSpecParse, CanonicalisesEntriesAsJaxDoes) {
  // jaxlib/partition_spec.cc CanonicalizePartition: falsy -> None, one-element tuple -> element, list -> tuple.
  EXPECT_EQ(PartitionSpec::Parse("P(('x',))"), PartitionSpec::Parse("P('x')"));
  EXPECT_EQ(PartitionSpec::Parse("P(['x'])"), PartitionSpec::Parse("P('x')"));
  EXPECT_EQ(PartitionSpec::Parse("P((), '', [])"), PartitionSpec::Parse("P(None, None, None)"));
  EXPECT_EQ(PartitionSpec::Parse("P(['x', 'y'])"), PartitionSpec::Parse("P(('x', 'y'))"));
  EXPECT_EQ(Entry::Axes({"x"}), Entry::Axis("x"));
  EXPECT_EQ(Entry::Axes({}), Entry::None());
  EXPECT_EQ(Entry::Axis(""), Entry::None());
}

TEST(PartitionSpecParse, ReadsUnconstrained) {
  PartitionSpec spec = PartitionSpec::Parse("P(P.UNCONSTRAINED, 'x', PartitionSpec.UNCONSTRAINED)");
  ASSERT_EQ(spec.size(), 3);
  EXPECT_TRUE(spec[0].is_unconstrained());
  EXPECT_TRUE(spec[2].is_unconstrained());
  EXPECT_EQ(spec.ToString(), "P(UNCONSTRAINED, 'x', UNCONSTRAINED)");
}

TEST(PartitionSpecParse, HandlesEscapesAndQuotesInNames) {
  PartitionSpec spec = PartitionSpec::Parse(R"(P("it's", 'a\'b'))");
  EXPECT_EQ(spec[0].axes()[0], "it's");
  EXPECT_EQ(spec[1].axes()[0], "a'b");
  EXPECT_EQ(spec.ToString(), R"(P("it's", "a'b"))");
}

TEST(PartitionSpecParse, NestedTupleIsJaxsValueError) {
  try {
    PartitionSpec::Parse("P(('a', ('b', 'c')))");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValueError);
    EXPECT_EQ(e.message(),
              "A tuple inside PartitionSpec cannot contain a nested tuple. Got partition: ('a', ('b', 'c')) and the "
              "nested tuple: ('b', 'c')");
  }
}

int SyntaxColumn(std::string_view text) {
  try {
    PartitionSpec::Parse(text);
  } catch (const SpecSyntaxError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kSyntaxError);
    EXPECT_THAT(e.message(), HasSubstr(fmt::format("column {}", e.column())));
    return e.column();
  }
  ADD_FAILURE() << "no syntax error for " << text;
  return 0;
}

TEST(PartitionSpecParse, SyntaxErrorsNameTheColumn) {
  EXPECT_EQ(SyntaxColumn("P('dp' None)"), 8);      // missing comma
  EXPECT_EQ(SyntaxColumn("P('dp', dp)"), 9);       // unquoted name
  EXPECT_EQ(SyntaxColumn("P('dp'"), 7);            // unclosed call
  EXPECT_EQ(SyntaxColumn("P('dp)"), 3);            // unterminated string
  EXPECT_EQ(SyntaxColumn("P(('a', 'b')"), 13);     // unclosed call after a tuple
  EXPECT_EQ(SyntaxColumn("P(('a', 'b'), x)"), 15);
  EXPECT_EQ(SyntaxColumn("P('a') extra"), 8);
  EXPECT_EQ(SyntaxColumn("P(('a', None))"), 9);    // None inside a tuple
  EXPECT_EQ(SyntaxColumn("P(1)"), 3);
  EXPECT_EQ(SyntaxColumn("P(foo='x')"), 3);
  EXPECT_EQ(SyntaxColumn("'a' 'b'"), 5);
  EXPECT_EQ(SyntaxColumn("(('a', 'b')"), 12);
}

TEST(PartitionSpecParse, UnreducedIsNotSupported) {
  try {
    PartitionSpec::Parse("P('x', unreduced={'y'})");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_THAT(e.message(), HasSubstr("unreduced="));
  }
}

TEST(PartitionSpecRepr, MatchesJaxRepr) {
  // JAX prints repr(partitions)[1:-1], so one entry keeps the comma.
  EXPECT_EQ(Repr("P()"), "P()");
  EXPECT_EQ(Repr("P('x')"), "P('x',)");
  EXPECT_EQ(Repr("P(None)"), "P(None,)");
  EXPECT_EQ(Repr("P('x', None)"), "P('x', None)");
  EXPECT_EQ(Repr("P(('x', 'y'))"), "P(('x', 'y'),)");
  EXPECT_EQ(Repr("P(('x','y'), None, 'z')"), "P(('x', 'y'), None, 'z')");
}

TEST(PartitionSpecEquality, FollowsJaxInterning) {
  EXPECT_EQ(PartitionSpec::Parse("P(('x',))"), PartitionSpec::Parse("P('x')"));
  EXPECT_NE(PartitionSpec::Parse("P('x')"), PartitionSpec::Parse("P('x', None)"));
  EXPECT_NE(PartitionSpec::Parse("P(('x', 'y'))"), PartitionSpec::Parse("P(('y', 'x'))"));
  EXPECT_NE(PartitionSpec::Parse("P()"), PartitionSpec::Parse("P(None)"));
}

TEST(PartitionSpec, NormalizedPadsAndDropsUnconstrained) {
  PartitionSpec spec = PartitionSpec::Parse("P(P.UNCONSTRAINED, 'x')");
  EXPECT_EQ(spec.Normalized(3).ToString(), "P(None, 'x', None)");
  EXPECT_EQ(spec.FlatAxes(), (std::vector<std::string>{"x"}));
  EXPECT_FALSE(spec.IsReplicatedSpec());
  EXPECT_TRUE(PartitionSpec::Parse("P(None, P.UNCONSTRAINED)").IsReplicatedSpec());
}

TEST(PyRepr, QuotesAsPythonDoes) {
  EXPECT_EQ(PyRepr("dp"), "'dp'");
  EXPECT_EQ(PyRepr("it's"), "\"it's\"");
  EXPECT_EQ(PyRepr("a'\"b"), "'a\\'\"b'");
  EXPECT_EQ(PyRepr("a\\b"), "'a\\\\b'");
}

// ---------------------------------------------------------------------------------------------------------------
// Validation


std::optional<SpecError> CatchSpecError(const PartitionSpec& spec, const Mesh& mesh, std::vector<int64_t> shape) {
  try {
    ValidateSpec(spec, mesh, std::span<const int64_t>(shape));
  } catch (const SpecError& e) {
    return e;
  }
  return std::nullopt;
}

TEST(ValidateSpec, AcceptsAFittingSpec) {
  Mesh mesh = Mesh::Iota({2, 4, 2}, {"dp", "fsdp", "tp"});
  std::vector<int64_t> shape{8, 1024, 4096};
  EXPECT_NO_THROW(ValidateSpec(PartitionSpec::Parse("P('dp', None, ('fsdp','tp'))"), mesh,
                               std::span<const int64_t>(shape)));
  EXPECT_NO_THROW(ValidateSpec(PartitionSpec::Parse("P(('dp', 'fsdp'))"), mesh, std::span<const int64_t>(shape)));
  EXPECT_NO_THROW(ValidateSpec(PartitionSpec(), mesh, std::span<const int64_t>(shape)));
  EXPECT_TRUE(CheckSpec(PartitionSpec::Parse("P('tp', P.UNCONSTRAINED)"), mesh).empty());
}

TEST(ValidateSpec, DuplicateAxisIsDuplicateSpecError) {
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  std::optional<SpecError> e = CatchSpecError(PartitionSpec::Parse("P('y', ('x', 'y'), 'x')"), mesh, {8, 8, 8});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kDuplicateSpecError);
  EXPECT_EQ(e->message(),
            "A single NamedSharding spec specification can map every mesh axis to at most one positional dimension, "
            "but P('y', ('x', 'y'), 'x') has duplicate entries for `x`, `y`");
  ASSERT_EQ(e->problems().size(), 2u);
  EXPECT_EQ(e->problems()[0].dim, 1);
  EXPECT_EQ(e->problems()[0].axes, (std::vector<std::string>{"y"}));
  EXPECT_EQ(e->problems()[1].dim, 2);
  EXPECT_EQ(e->problems()[1].axes, (std::vector<std::string>{"x"}));
}

TEST(ValidateSpec, AxisRepeatedInsideOneTupleIsADuplicate) {
  Mesh mesh = Mesh::Iota({2}, {"x"});
  auto problems = CheckSpec(PartitionSpec::Parse("P(('x', 'x'))"), mesh);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].reason, SpecProblemReason::kDuplicateAxis);
  EXPECT_EQ(problems[0].dim, 0);
}

TEST(ValidateSpec, UnknownAxisIsValueError) {
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  std::optional<SpecError> e = CatchSpecError(PartitionSpec::Parse("P('x', ('y', 'tp'))"), mesh, {8, 8});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kValueError);
  EXPECT_EQ(e->message(), "Resource axis: tp of P('x', ('y', 'tp')) is not found in mesh: ('x', 'y').");
  EXPECT_EQ(e->first().reason, SpecProblemReason::kUnknownAxis);
  EXPECT_EQ(e->first().dim, 1);
  EXPECT_EQ(e->first().axes, (std::vector<std::string>{"tp"}));
}

// JAX's message has no suggestion and stays JAX's; the close mesh axes ride along for a did-you-mean.
TEST(ValidateSpec, UnknownAxisCarriesTheCloseMeshAxesForADidYouMean) {
  Mesh mesh = Mesh::Iota({4, 2}, {"data", "model"});
  std::optional<SpecError> e = CatchSpecError(PartitionSpec::Parse("P('modle', 'dta')"), mesh, {8, 8});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message(), "Resource axis: modle of P('modle', 'dta') is not found in mesh: ('data', 'model').");
  EXPECT_EQ(e->first().close_axes, (std::vector<std::string>{"model"}));
  EXPECT_EQ(UnknownAxisHint(e->problems()), " (did you mean 'model' for 'modle', 'data' for 'dta'?)");
  // Found through a context added on the way up, as the CLI and scenario files see it.
  try {
    try {
      throw *e;
    } catch (const Error& inner) {
      RethrowWithContext(inner, "--spec: " + inner.message());
    }
  } catch (const Error& outer) {
    EXPECT_EQ(UnknownAxisHint(outer), " (did you mean 'model' for 'modle', 'data' for 'dta'?)");
  }
  std::optional<SpecError> far = CatchSpecError(PartitionSpec::Parse("P('pipeline')"), mesh, {8});
  ASSERT_TRUE(far);
  EXPECT_EQ(UnknownAxisHint(far->problems()), "");
}

TEST(ValidateSpec, SpecLongerThanRankIsValueError) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  std::optional<SpecError> e = CatchSpecError(PartitionSpec::Parse("P('x', None)"), mesh, {8});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kValueError);
  EXPECT_EQ(e->message(),
            "Sharding NamedSharding(mesh=Mesh('x': 4, axis_types=(Auto,)), spec=P('x', None), memory_kind=device) is "
            "only valid for "
            "values of rank at least 2, but was applied to a value of rank 1.");
  EXPECT_EQ(e->first().dim, 1);
  std::optional<SpecError> scalar = CatchSpecError(PartitionSpec::Parse("P(None)"), mesh, {});
  ASSERT_TRUE(scalar);
  EXPECT_THAT(scalar->message(), HasSubstr("rank 0. For scalars the PartitionSpec should be P()"));
}

TEST(ValidateSpec, IndivisibleDimensionIsIndivisibleError) {
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  std::optional<SpecError> e = CatchSpecError(PartitionSpec::Parse("P(None, ('x', 'y'))"), mesh, {3, 12});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kIndivisibleError);
  EXPECT_EQ(e->message(),
            "Sharding NamedSharding(mesh=Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto)), spec=P(None, ('x', 'y')), "
            "memory_kind=device) implies "
            "that array axis 1 is partitioned 8 times, but the dimension size is 12 (full shape: (3, 12), "
            "per-dimension tiling factors: [1, 8] should evenly divide the shape)");
  EXPECT_EQ(e->first().dim, 1);
  EXPECT_EQ(e->first().dim_size, 12);
  EXPECT_EQ(e->first().partitions, 8);
  EXPECT_EQ(e->first().axes, (std::vector<std::string>{"x", "y"}));
}

TEST(CheckSpec, ReportsEveryProblemInJaxOrder) {
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  std::vector<int64_t> shape{6, 3, 5};
  auto problems = CheckSpec(PartitionSpec::Parse("P('x', 'y', 'q')"), mesh, std::span<const int64_t>(shape));
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_EQ(problems[0].reason, SpecProblemReason::kUnknownAxis);
  EXPECT_EQ(problems[1].reason, SpecProblemReason::kNotDivisible);
  EXPECT_EQ(problems[1].dim, 0);
  EXPECT_EQ(problems[2].reason, SpecProblemReason::kNotDivisible);
  EXPECT_EQ(problems[2].dim, 1);
  EXPECT_EQ(SpecProblemReasonName(problems[0].reason), "unknown_axis");
}

TEST(CheckSpec, RandomValidSpecsHaveNoProblemsAndBrokenOnesDo) {
  std::mt19937 rng(20240611);
  const std::vector<std::string> names{"a", "b", "c", "d"};
  for (int trial = 0; trial < 300; ++trial) {
    const int mesh_rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> mesh_shape;
    std::vector<std::string> axes(names.begin(), names.begin() + mesh_rank);
    for (int i = 0; i < mesh_rank; ++i) mesh_shape.push_back(1 << (rng() % 3));
    Mesh mesh = Mesh::Iota(mesh_shape, axes);
    // Assign each axis to a random dimension (or none), so the spec is duplicate-free and divisible by design.
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<std::vector<std::string>> per_dim(rank);
    for (const auto& a : axes) {
      int d = static_cast<int>(rng() % (rank + 1));
      if (d < rank) per_dim[d].push_back(a);
    }
    std::vector<int64_t> shape;
    std::vector<Entry> entries;
    for (int d = 0; d < rank; ++d) {
      int64_t p = 1;
      for (const auto& a : per_dim[d]) p *= mesh.AxisSize(a);
      shape.push_back(p * (1 + static_cast<int64_t>(rng() % 3)));
      entries.push_back(Entry::Axes(per_dim[d]));
    }
    PartitionSpec spec(entries);
    EXPECT_TRUE(CheckSpec(spec, mesh, std::span<const int64_t>(shape)).empty()) << spec.ToString();
    EXPECT_EQ(PartitionSpec::Parse(spec.ToString()), spec);  // repr round-trips through the parser
    // Breaking one sharded dimension by one element breaks divisibility exactly when its factor is > 1.
    for (int d = 0; d < rank; ++d) {
      int64_t p = EntryPartitions(spec[d], mesh);
      if (p == 1) continue;
      std::vector<int64_t> broken = shape;
      broken[d] += 1;
      auto problems = CheckSpec(spec, mesh, std::span<const int64_t>(broken));
      ASSERT_EQ(problems.size(), 1u);
      EXPECT_EQ(problems[0].dim, d);
      EXPECT_EQ(problems[0].partitions, p);
    }
  }
}

}  // namespace
}  // namespace spmdsim
