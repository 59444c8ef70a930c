#include "partition/logical_axis_rules.h"

#include <random>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/util/catch_error.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using E = PartitionSpec::Entry;

PartitionSpec P(std::string_view text) { return PartitionSpec::Parse(text); }
LogicalAxes Names(std::string_view text) { return ParseLogicalAxes(text); }
LogicalAxisRules Rules(std::string_view text) { return ParseLogicalAxisRules(text); }

// Flax tests/linen/partitioning_test.py constants.
const LogicalAxisRules kAxisRules1 = {{"foo", E::Axis("data")}, {"bar", E::Axis("model")}, {"baz", E::None()}};
const LogicalAxisRules kAxisRules2 = {{"foo", E::Axis("model")}, {"bar", E::None()}, {"baz", E::Axis("data")}};

TEST(LogicalAxis, PrintsAsPythonRepr) {
  EXPECT_EQ(LogicalAxesToString(Names("batch,_,UNCONSTRAINED")), "('batch', None, UNCONSTRAINED)");
  EXPECT_EQ(LogicalAxesToString(Names("batch")), "('batch',)");
  EXPECT_EQ(LogicalAxesToString(Names("")), "()");
  EXPECT_EQ(Names("None")[0], LogicalAxis::None());
}

TEST(LogicalAxis, ParseRejectsAnEmptyName) {
  Error e = CatchError([] { Names("batch,,embed"); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("'batch,,embed'"));
}

TEST(LogicalAxisRules, ParsesNoneTuplesCommentsAndRepeats) {
  LogicalAxisRules rules = Rules("batch=data,embed=,mlp=model\njoined=data+model  # 2-D\nembed=none,x=UNCONSTRAINED,");
  LogicalAxisRules expected = {{"batch", E::Axis("data")},      {"embed", E::None()},
                               {"mlp", E::Axis("model")},       {"joined", E::Axes({"data", "model"})},
                               {"embed", E::None()},            {"x", E::Unconstrained()}};
  EXPECT_EQ(rules, expected);
  EXPECT_EQ(LogicalAxisRulesToString(rules),
            "(('batch', 'data'), ('embed', None), ('mlp', 'model'), ('joined', ('data', 'model')), "
            "('embed', None), ('x', UNCONSTRAINED))");
  EXPECT_EQ(LogicalAxisRulesToString(Rules("a=x")), "(('a', 'x'),)");
}

TEST(LogicalAxisRules, ParseNamesTheBadItem) {
  EXPECT_THAT(CatchError([] { Rules("batch=data,embed"); }).what(), HasSubstr("'embed'"));
  EXPECT_THAT(CatchError([] { Rules("=data"); }).what(), HasSubstr("empty logical axis name"));
  EXPECT_THAT(CatchError([] { Rules("joined=data+"); }).what(), HasSubstr("'joined=data+'"));
}

// Flax's docstring example.
TEST(LogicalToMeshAxes, FollowsPriorityAndUsesEachMeshAxisOnce) {
  LogicalAxisRules rules = Rules("batch=X,features=X,heads=Y,batch=Z");
  EXPECT_EQ(LogicalToMeshAxes(Names("batch,length,heads,features"), rules), P("P('X', None, 'Y', None)"));
}

// Flax test_logical_to_mesh_axes.
TEST(LogicalToMeshAxes, MatchesFlaxDirectAssignmentAndRepeatedNoneAndUnconstrained) {
  EXPECT_EQ(LogicalToMeshAxes(Names("foo,bar"), kAxisRules1), P("P('data', 'model')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("foo,UNCONSTRAINED,UNCONSTRAINED,_,_"), kAxisRules1),
            P("P('data', P.UNCONSTRAINED, P.UNCONSTRAINED, None, None)"));
}

TEST(LogicalToMeshAxes, RulesMappingToNoneOrUnconstrainedAssignThem) {
  LogicalAxisRules rules = {
      {"foo", E::None()}, {"bad", E::None()}, {"bar", E::Unconstrained()}, {"baz", E::Unconstrained()}};
  EXPECT_EQ(LogicalToMeshAxes(Names("foo,bad,bar,baz"), rules),
            P("P(None, None, P.UNCONSTRAINED, P.UNCONSTRAINED)"));
}

TEST(LogicalToMeshAxes, DuplicateLogicalNamesAreAValueError) {
  Error e = CatchError([] { LogicalToMeshAxes(Names("foo,foo,baz"), kAxisRules1); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(), "Unsupported: Dimensions ('foo',) occur more than once in array names.");
  // Value computed with /tmp/pr/flaxlogic.py (a pure-python copy of Flax's _logical_to_mesh_axes).
  EXPECT_EQ(CatchError([] { LogicalToMeshAxes(Names("a,b,a,b,c"), {}); }).message(),
            "Unsupported: Dimensions ('a', 'b') occur more than once in array names.");
}

// Flax test_logical_to_mesh_axes_priorities.
TEST(LogicalToMeshAxes, PriorityDependsOnRuleOrderNotDimensionOrder) {
  LogicalAxisRules rules = Rules("foo=model,bar=model,baz=data");
  EXPECT_EQ(LogicalToMeshAxes(Names("foo,bar,baz"), rules), P("P('model', None, 'data')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("bar,foo,baz"), rules), P("P(None, 'model', 'data')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("baz,bar,foo"), rules), P("P('data', None, 'model')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("baz,bar,foo,unassigned"), rules), P("P('data', None, 'model', None)"));
}

// Flax test_logical_to_mesh_axes_cases, one line per parameterised case.
TEST(LogicalToMeshAxes, MatchesFlaxParameterisedCases) {
  EXPECT_EQ(LogicalToMeshAxes(Names("a,b"), Rules("a=model+data,b=data")), P("P(('model', 'data'), None)"));
  EXPECT_EQ(LogicalToMeshAxes(Names("a,b"), Rules("a=model+replica,b=data")), P("P(('model', 'replica'), 'data')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("a,b"), Rules("a=model+replica,b=data+model")),
            P("P(('model', 'replica'), None)"));
  EXPECT_EQ(LogicalToMeshAxes(Names("a,b,c"), Rules("a=model+replica,b=model")),
            P("P(('model', 'replica'), None, None)"));
  EXPECT_EQ(LogicalToMeshAxes(Names("a,b,c"), {}), P("P(None, None, None)"));
  EXPECT_EQ(LogicalToMeshAxes(Names("a,b"), Rules("a=,a=model")), P("P(None, None)"));
  EXPECT_EQ(LogicalToMeshAxes(Names("baz,bar,foo"), Rules("baz=data,bar=,foo=model,foo=data")),
            P("P('data', None, 'model')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("baz,UNCONSTRAINED,foo"), Rules("baz=data,foo=model+emb")),
            P("P('data', P.UNCONSTRAINED, ('model', 'emb'))"));
}

TEST(LogicalToMeshAxes, EmptyNamesGiveAnEmptySpec) {
  EXPECT_EQ(LogicalToMeshAxes(Names(""), kAxisRules1), PartitionSpec());
}

// Property: over random rule lists and names, every named dimension gets either None or the value of one of its
// own rules, no mesh axis is used twice, and the first rule of a name whose axes are free at that point wins.
TEST(LogicalToMeshAxes, RandomRulesNeverReuseAMeshAxis) {
  std::mt19937 rng(20260522);
  const std::vector<std::string> logical = {"a", "b", "c", "d", "e"};
  const std::vector<std::string> mesh = {"x", "y", "z", "w"};
  for (int trial = 0; trial < 500; ++trial) {
    LogicalAxisRules rules;
    int n_rules = static_cast<int>(rng() % 8);
    for (int r = 0; r < n_rules; ++r) {
      std::vector<std::string> axes;
      int n_axes = static_cast<int>(rng() % 3);
      for (int k = 0; k < n_axes; ++k) {
        const std::string& a = mesh[rng() % mesh.size()];
        if (std::find(axes.begin(), axes.end(), a) == axes.end()) axes.push_back(a);
      }
      rules.push_back({logical[rng() % logical.size()], E::Axes(axes)});
    }
    LogicalAxes names;
    std::vector<std::string> pool = logical;
    std::shuffle(pool.begin(), pool.end(), rng);
    int rank = static_cast<int>(rng() % 5);
    for (int d = 0; d < rank; ++d) names.push_back(rng() % 5 == 0 ? LogicalAxis::None() : LogicalAxis(pool[d]));
    PartitionSpec spec = LogicalToMeshAxes(names, rules);
    ASSERT_EQ(spec.size(), rank);
    std::multiset<std::string> used;
    for (int d = 0; d < rank; ++d) {
      for (const auto& a : spec[d].axes()) used.insert(a);
      if (!names[d].is_name()) {
        EXPECT_TRUE(spec[d].is_none());
        continue;
      }
      bool from_own_rule = spec[d].is_none();
      for (const auto& rule : rules) from_own_rule |= rule.logical_name == names[d].name() && rule.mesh_axes == spec[d];
      EXPECT_TRUE(from_own_rule) << LogicalAxisRulesToString(rules) << " " << spec.ToString();
    }
    for (const auto& a : used) EXPECT_EQ(used.count(a), 1u) << LogicalAxisRulesToString(rules) << spec.ToString();
  }
}

TEST(LogicalToMesh, MapsEveryLeafAndKeepsLeavesWithoutNames) {
  std::vector<std::pair<std::string, std::optional<LogicalAxes>>> tree = {
      {"params/dense/kernel", Names("embed,mlp")}, {"params/step", std::nullopt}, {"params/bias", Names("mlp")}};
  auto out = LogicalToMesh(tree, StandardLogicalAxisRules());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].first, "params/dense/kernel");
  EXPECT_EQ(out[0].second, P("P(None, 'model')"));
  EXPECT_FALSE(out[1].second.has_value());
  EXPECT_EQ(out[2].second, P("P('model')"));
}

// Flax test_with_sharding_constraint and test_with_sharding_constraint_fallback.
TEST(LogicalConstraintSpec, AppliesNothingWithoutRulesOrNames) {
  SetLogicalAxisRules({});
  EXPECT_FALSE(LogicalConstraintSpec(Names("foo,bar")).has_value());
  ScopedLogicalAxisRules scoped(kAxisRules1);
  EXPECT_FALSE(LogicalConstraintSpec(std::nullopt).has_value());
  EXPECT_EQ(LogicalConstraintSpec(Names("foo,bar")), P("P('data', 'model')"));
  EXPECT_EQ(LogicalConstraintSpec(Names("foo,UNCONSTRAINED")), P("P('data', P.UNCONSTRAINED)"));
}

TEST(LogicalConstraintSpec, FallbacksForAnUnmatchedName) {
  ScopedLogicalAxisRules scoped(kAxisRules1);
  EXPECT_EQ(LogicalConstraintSpec(Names("foo,not_recognized")), P("P('data', None)"));
  EXPECT_EQ(LogicalConstraintSpec(Names("foo,not_recognized"), RulesFallback::kAxisIsUnsharded),
            P("P('data', None)"));
  Error e = CatchError([] { LogicalConstraintSpec(Names("foo,not_recognized"), RulesFallback::kRaiseError); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(), "Axis names ('foo', 'not_recognized') did not match a rule");
  EXPECT_FALSE(LogicalConstraintSpec(Names("foo,not_recognized"), RulesFallback::kNoConstraint).has_value());
  // A name whose rule maps to None is matched, so no fallback applies.
  EXPECT_EQ(LogicalConstraintSpec(Names("baz,foo"), RulesFallback::kRaiseError), P("P(None, 'data')"));
  // Explicit rules win over the context's.
  EXPECT_EQ(LogicalConstraintSpec(Names("foo"), RulesFallback::kRaiseError, &kAxisRules2), P("P('model')"));
}

// Flax test_axis_rules and test_axis_rules_context.
TEST(ContextRules, SetGetAndNestedScopesRestore) {
  EXPECT_TRUE(GetLogicalAxisRules().empty());
  SetLogicalAxisRules(kAxisRules1);
  EXPECT_EQ(GetLogicalAxisRules(), kAxisRules1);
  {
    ScopedLogicalAxisRules outer(kAxisRules2);
    EXPECT_EQ(GetLogicalAxisRules(), kAxisRules2);
    EXPECT_EQ(LogicalToMeshAxes(Names("foo,bar")), P("P('model', None)"));
    {
      ScopedLogicalAxisRules inner(kAxisRules1);
      EXPECT_EQ(LogicalToMeshAxes(Names("foo,bar")), P("P('data', 'model')"));
    }
    EXPECT_EQ(GetLogicalAxisRules(), kAxisRules2);
  }
  EXPECT_EQ(GetLogicalAxisRules(), kAxisRules1);
  SetLogicalAxisRules({});
}

TEST(ContextRules, AreLocalToEachThread) {
  ScopedLogicalAxisRules scoped(kAxisRules1);
  bool other_thread_saw_none = false;
  std::thread t([&] {
    other_thread_saw_none = GetLogicalAxisRules().empty();
    ScopedLogicalAxisRules mine(kAxisRules2);
  });
  t.join();
  EXPECT_TRUE(other_thread_saw_none);
  EXPECT_EQ(GetLogicalAxisRules(), kAxisRules1);
}

TEST(CompositeRules, ReturnsTheNonEmptySideUnchanged) {
  LogicalAxisRules with_repeat = Rules("a=x,a=y");
  EXPECT_EQ(CompositeRules(with_repeat, {}), with_repeat);
  EXPECT_EQ(CompositeRules({}, with_repeat), with_repeat);
  EXPECT_TRUE(CompositeRules({}, {}).empty());
}

// Values computed with /tmp/pr/flaxlogic.py (a pure-python copy of flax.core.spmd.composite_rules).
TEST(CompositeRules, MergesLikeADict) {
  EXPECT_EQ(CompositeRules(Rules("a=x,b=y,a=z"), Rules("c=")), Rules("a=z,b=y,c="));
  EXPECT_EQ(CompositeRules(Rules("a=x,b=y"), Rules("c=,b=y")), Rules("a=x,b=y,c="));
}

TEST(CompositeRules, ConflictIsAValueErrorNamingBothValues) {
  Error e = CatchError([] { CompositeRules(Rules("a=x,b=y+z"), Rules("b=w")); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(), "Inconsistent logical axis annotations for b: ('y', 'z') vs w");
  EXPECT_EQ(CatchError([] { CompositeRules(Rules("a="), Rules("a=w")); }).message(),
            "Inconsistent logical axis annotations for a: None vs w");
  // rule2 is checked against itself too: its second 'c' disagrees with its first.
  EXPECT_EQ(CatchError([] { CompositeRules(Rules("a=x"), Rules("c=x,c=y")); }).message(),
            "Inconsistent logical axis annotations for c: x vs y");
}

TEST(StandardLogicalAxisRules, HasT5xDefaultRules) {
  EXPECT_EQ(StandardLogicalAxisRules(),
            Rules("batch=data,vocab=model,embed=,mlp=model,heads=model,kv=,joined_kv=model,relpos_buckets=,"
                  "abspos_buckets=,length=,layers=,stack=,mlp_activations="));
  EXPECT_EQ(StandardLogicalAxisRules(2, 1),
            Rules("batch=data,vocab=model,mlp=model,heads=model,kv=,joined_kv=model,embed=model,relpos_buckets=,"
                  "abspos_buckets=,length=,layers=,stack=,mlp_activations="));
  EXPECT_EQ(StandardLogicalAxisRules(1, 2),
            Rules("batch=data,vocab=model,mlp=model,heads=model,kv=,joined_kv=model,embed=data,relpos_buckets=,"
                  "abspos_buckets=,length=,layers=,stack=,mlp_activations="));
  EXPECT_EQ(StandardLogicalAxisRules(2, 2),
            Rules("batch=data,vocab=model,mlp=model,heads=model,kv=,joined_kv=model,embed=model,embed=data,"
                  "relpos_buckets=,abspos_buckets=,length=,layers=,stack=,mlp_activations="));
}

// T5X test_standard_logical_axis_rules: additional rules come after the defaults, unchanged.
TEST(StandardLogicalAxisRules, AppendsAdditionalRules) {
  LogicalAxisRules custom = Rules("my-new-axis=data,another-axis=,another-one=model");
  for (int a : {1, 2}) {
    for (int p : {1, 2}) {
      LogicalAxisRules defaults = StandardLogicalAxisRules(a, p);
      LogicalAxisRules with_custom = StandardLogicalAxisRules(a, p, custom);
      ASSERT_EQ(with_custom.size(), defaults.size() + custom.size());
      EXPECT_TRUE(std::equal(defaults.begin(), defaults.end(), with_custom.begin()));
      EXPECT_TRUE(std::equal(custom.begin(), custom.end(), with_custom.begin() + defaults.size()));
    }
  }
}

TEST(StandardLogicalAxisRules, RejectsUnsupportedDims) {
  Error e = CatchError([] { StandardLogicalAxisRules(3, 1); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(), "`activation_partitioning_dims` = 3 `parameter_partitioning_dims` = 1 is not supported.");
  EXPECT_EQ(CatchError([] { StandardLogicalAxisRules(1, 0); }).message(),
            "`activation_partitioning_dims` = 1 `parameter_partitioning_dims` = 0 is not supported.");
}

// Values computed with /tmp/pr/flaxlogic.py (Flax's resolution over T5X's rule sets).
TEST(StandardLogicalAxisRules, ResolveAsT5xDoes) {
  EXPECT_EQ(LogicalToMeshAxes(Names("batch,length,embed"), StandardLogicalAxisRules(1, 1)),
            P("P('data', None, None)"));
  EXPECT_EQ(LogicalToMeshAxes(Names("batch,length,embed"), StandardLogicalAxisRules(2, 1)),
            P("P('data', None, 'model')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("embed,mlp"), StandardLogicalAxisRules(1, 2)), P("P('data', 'model')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("embed,mlp"), StandardLogicalAxisRules(2, 2)), P("P('data', 'model')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("vocab,embed"), StandardLogicalAxisRules(2, 2)), P("P('model', 'data')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("embed,mlp,heads,vocab"), StandardLogicalAxisRules(2, 2)),
            P("P('data', None, None, 'model')"));
  EXPECT_EQ(LogicalToMeshAxes(Names("batch,length,heads,kv"), StandardLogicalAxisRules()),
            P("P('data', None, 'model', None)"));
  EXPECT_EQ(LogicalToMeshAxes(Names("relpos_buckets,layers,stack,mlp_activations,abspos_buckets,length"),
                              StandardLogicalAxisRules(2, 2)),
            P("P(None, None, None, None, None, None)"));
}

TEST(MultisliceLogicalAxisRules, SplitsBatchOverReplicaAndData) {
  LogicalAxisRules rules = MultisliceLogicalAxisRules(StandardLogicalAxisRules(1, 2));
  EXPECT_EQ(rules[0], (LogicalAxisRule{"batch", E::Axes({"replica", "data"})}));
  EXPECT_EQ(LogicalToMeshAxes(Names("batch,length,heads,kv"), rules), P("P(('replica', 'data'), None, 'model', None)"));
  // 'embed' -> 'data' is now blocked by batch's use of 'data'.
  EXPECT_EQ(LogicalToMeshAxes(Names("batch,embed,mlp"), rules), P("P(('replica', 'data'), None, 'model')"));
  EXPECT_EQ(MultisliceLogicalAxisRules(Rules("batch=,batch=x,y=z")),
            Rules("batch=replica+data,batch=replica+data,y=z"));
}

}  // namespace
}  // namespace spmdsim
