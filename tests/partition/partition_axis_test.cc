#include "partition/partition_axis.h"

#include <atomic>
#include <random>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/util/catch_error.h"

// Expected values come from eformer's tests (tests/escale/test_partition_axis.py, test_partition_manager_api.py)
// where they exist; the others were computed with /tmp/pr/eflogic.py, a pure-python copy of eformer's
// PartitionAxis.__post_init__ / resolve_axis / _resolve_axis_rule / register (no jax), plus JAX's
// canonicalize_partition from jaxlib/partition_spec.cc.

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
namespace sem = semantic;
using Field = PartitionAxis::Field;

PartitionSpec P(std::string_view text) { return PartitionSpec::Parse(text); }
SemanticAxis Comp(std::initializer_list<std::string_view> names) {
  std::vector<std::string> v(names.begin(), names.end());
  return SemanticAxis::Composite(std::move(v));
}
AxisRule T(std::vector<AxisRule> items) { return AxisRule::Tuple(std::move(items)); }
AxisRule L(std::vector<AxisRule> items) { return AxisRule::List(std::move(items)); }

// Every test starts and ends with an empty registry (eformer's _clear_custom_registry fixture).
class PartitionAxisTest : public ::testing::Test {
 protected:
  void SetUp() override { PartitionAxis::ClearRegisteredAxes(); }
  void TearDown() override { PartitionAxis::ClearRegisteredAxes(); }
};

TEST(RuntimeMode, ParsesNamesAndTokens) {
  EXPECT_EQ(ParseRuntimeMode("train"), RuntimeMode::kTrain);
  EXPECT_EQ(ParseRuntimeMode("__autoregressive__"), RuntimeMode::kDecode);
  EXPECT_EQ(ParseRuntimeMode("decode"), RuntimeMode::kDecode);
  EXPECT_EQ(ParseRuntimeMode("prefill"), RuntimeMode::kPrefill);
  EXPECT_EQ(ParseRuntimeMode("__insert__"), RuntimeMode::kInsert);
  EXPECT_EQ(RuntimeModeToken(RuntimeMode::kPrefill), "__prefill__");
  EXPECT_TRUE(IsGenerationMode(RuntimeMode::kInsert));
  EXPECT_FALSE(IsGenerationMode(RuntimeMode::kPrefill));
  Error e = CatchError([] { ParseRuntimeMode("generate"); });
  EXPECT_THAT(e.what(), HasSubstr("'generate'"));
  EXPECT_THAT(e.what(), HasSubstr("train, prefill, decode, insert"));
}

TEST(AxisRule, ParsesAndPrintsLikePython) {
  EXPECT_EQ(AxisRule::Parse("none"), AxisRule::None());
  EXPECT_EQ(AxisRule::Parse("dp"), AxisRule("dp"));
  EXPECT_EQ(AxisRule::Parse("fsdp+dp"), T({"fsdp", "dp"}));
  EXPECT_EQ(T({"fsdp", "dp"}).ToString(), "('fsdp', 'dp')");
  EXPECT_EQ(T({"x"}).ToString(), "('x',)");
  EXPECT_EQ(L({"dp", "dp"}).ToString(), "['dp', 'dp']");
  EXPECT_EQ(T({AxisRule::None(), T({"a", "b"})}).ToString(), "(None, ('a', 'b'))");
  EXPECT_THAT(CatchError([] { AxisRule::Parse("a++b"); }).what(), HasSubstr("'a++b'"));
}

TEST(AxisRule, ToEntryCanonicalisesAsJax) {
  EXPECT_EQ(AxisRule::None().ToEntry(), PartitionSpec::Entry::None());
  EXPECT_EQ(AxisRule("").ToEntry(), PartitionSpec::Entry::None());
  EXPECT_EQ(T({}).ToEntry(), PartitionSpec::Entry::None());
  EXPECT_EQ(L({"x"}).ToEntry(), PartitionSpec::Entry::Axis("x"));
  EXPECT_EQ(T({AxisRule::None()}).ToEntry(), PartitionSpec::Entry::None());
  EXPECT_EQ(L({"a", "b"}).ToEntry(), PartitionSpec::Entry::Axes({"a", "b"}));
}

TEST(AxisRule, NestedTupleIsJaxsValueError) {
  Error e = CatchError([] { T({T({"fsdp", "dp"}), "tp"}).ToEntry(); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(),
            "A tuple inside PartitionSpec cannot contain a nested tuple. Got partition: (('fsdp', 'dp'), 'tp') and "
            "the nested tuple: ('fsdp', 'dp')");
  // A one-item sequence holding a tuple is still nested (JAX checks before unwrapping).
  EXPECT_THAT(CatchError([] { L({T({"a", "b"})}).ToEntry(); }).message(), HasSubstr("Got partition: [('a', 'b')]"));
}

TEST(AxisRule, NoneInsideATupleIsRejected) {
  Error e = CatchError([] { T({"fsdp", AxisRule::None()}).ToEntry(); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("('fsdp', None)"));
}

TEST(SemanticAxes, ParseTranslatesShortNames) {
  SemanticAxes axes = ParseSemanticAxes("batch,_,fsdp+sp,__CUSTOM__,None,head_dim");
  ASSERT_EQ(axes.size(), 6u);
  EXPECT_EQ(axes[0], SemanticAxis(sem::kBatch));
  EXPECT_TRUE(axes[1].is_none());
  EXPECT_EQ(axes[2], Comp({sem::kFullyShardedDataParallel, sem::kSequenceParallel}));
  EXPECT_EQ(axes[3], SemanticAxis("__CUSTOM__"));
  EXPECT_TRUE(axes[4].is_none());
  EXPECT_EQ(axes[5], SemanticAxis(sem::kHeadDim));
  EXPECT_EQ(axes[2].ToString(), "['__FULLY_SHARDED_DATA_PARALLEL__', '__SEQUENCE_PARALLEL__']");
  EXPECT_EQ(SemanticAxisShortNames().size(), 20u);
  EXPECT_THAT(CatchError([] { ParseSemanticAxes("batch,,embed"); }).what(), HasSubstr("empty item"));
  EXPECT_THAT(CatchError([] { ParseSemanticAxes("fsdp+"); }).what(), HasSubstr("'fsdp+'"));
}

TEST_F(PartitionAxisTest, DefaultsMatchEformer) {
  PartitionAxis paxis;
  EXPECT_EQ(paxis.ToString(),
            "PartitionAxis(data_parallel_axis='dp', fully_sharded_data_parallel_axis='fsdp', "
            "tensor_parallel_axis='tp', sequence_parallel_axis='sp', expert_parallel_axis='ep', "
            "batch_axis=('fsdp', 'dp'), sequence_axis='sp', query_sequence_axis='sp', head_axis='tp', "
            "kv_head_axis='tp', key_sequence_axis='sp', hidden_state_axis='tp', mlp_intermediate_axis='tp', "
            "vocab_axis='tp', expert_axis='ep', expert_gate_axis=None, attention_dim_axis=None, "
            "attention_kv_dim_axis=None, bias_head_sequence_axis=None, bias_key_sequence_axis=None, "
            "decode_batch_axis=('fsdp', 'dp'), decode_query_sequence_axis=None, decode_head_axis='tp', "
            "decode_kv_head_axis='tp', decode_key_sequence_axis='sp', decode_attention_dim_axis=None, "
            "decode_attention_kv_dim_axis=None)");
}

TEST_F(PartitionAxisTest, DefaultsFollowTheMeshDimensionFieldsAndDecodeFollowsResolvedFields) {
  PartitionAxis paxis({{"tensor_parallel_axis", "model"}, {"batch_axis", "fsdp"}, {"head_axis", "x"}});
  EXPECT_EQ(paxis.Get(Field::kHiddenStateAxis), AxisRule("model"));
  EXPECT_EQ(paxis.Get(Field::kKvHeadAxis), AxisRule("model"));
  EXPECT_EQ(paxis.Get(Field::kDecodeBatchAxis), AxisRule("fsdp"));
  EXPECT_EQ(paxis.Get(Field::kDecodeHeadAxis), AxisRule("x"));
  EXPECT_EQ(paxis.Get("decode_kv_head_axis"), AxisRule("model"));
  // A tuple-valued mesh field goes into batch_axis as is (a nested tuple; computed with eflogic.py).
  PartitionAxis nested({{"data_parallel_axis", T({"dp1", "dp2"})}});
  EXPECT_EQ(nested.Get(Field::kBatchAxis), T({"fsdp", T({"dp1", "dp2"})}));
}

TEST_F(PartitionAxisTest, UnknownOrRepeatedFieldIsATypeError) {
  Error e = CatchError([] { PartitionAxis({{"dp_axis", "x"}}); });
  EXPECT_EQ(e.kind(), ErrorKind::kTypeError);
  EXPECT_THAT(e.message(), HasSubstr("unexpected keyword argument 'dp_axis'"));
  EXPECT_THAT(e.message(), HasSubstr("data_parallel_axis"));
  EXPECT_THAT(CatchError([] { PartitionAxis({{"head_axis", "x"}, {"head_axis", "y"}}); }).message(),
              HasSubstr("multiple values for keyword argument 'head_axis'"));
  EXPECT_EQ(CatchError([] { PartitionAxis().Get("nope"); }).code(), ErrorCode::kNotFound);
}

TEST_F(PartitionAxisTest, FieldNamesRoundTrip) {
  for (int i = 0; i < PartitionAxis::kNumFields; ++i) {
    auto field = static_cast<Field>(i);
    EXPECT_EQ(PartitionAxis::FindField(PartitionAxis::FieldName(field)), field);
  }
  EXPECT_FALSE(PartitionAxis::FindField("register").has_value());
}

// eformer's test_resolve_spec_returns_partition_spec and test_resolve_axis_treats_none_and_empty_symbol_as_unsharded.
TEST_F(PartitionAxisTest, ResolvesBatchAndUnshardedDimensions) {
  PartitionAxis paxis;
  SemanticAxes batch = {sem::kBatch};
  EXPECT_EQ(paxis.ResolveSpec(batch, RuntimeMode::kTrain), P("P(('fsdp', 'dp'))"));
  SemanticAxes unsharded = {SemanticAxis(), "_"};
  EXPECT_EQ(paxis.ResolveAxis(unsharded, RuntimeMode::kTrain), (std::vector<AxisRule>{{}, {}}));
}

TEST_F(PartitionAxisTest, ResolvesEverySemanticAxisInEveryModeWithDefaults) {
  SemanticAxes all = ParseSemanticAxes(
      "batch,length,query_length,kv_length,embed,head,kv_head,mlp_intermediate,vocab,expert,expert_gate,head_dim,"
      "kv_head_dim,bias_head_seq,bias_kv_seq,dp,fsdp,tp,sp,ep,_");
  PartitionSpec expected = P(
      "P(('fsdp', 'dp'), 'sp', 'sp', 'sp', 'tp', 'tp', 'tp', 'tp', 'tp', 'ep', None, None, None, None, None, 'dp', "
      "'fsdp', 'tp', 'sp', 'ep', None)");
  // With the defaults every decode_* field equals its training twin or is None, so all modes agree.
  for (RuntimeMode mode : {RuntimeMode::kTrain, RuntimeMode::kPrefill, RuntimeMode::kDecode, RuntimeMode::kInsert}) {
    EXPECT_EQ(PartitionAxis().ResolveSpec(all, mode), expected) << RuntimeModeName(mode);
  }
}

TEST_F(PartitionAxisTest, DecodeOverridesApplyOnlyInGenerationModesAndOnlyWhenNotNone) {
  PartitionAxis paxis({{"decode_batch_axis", "dp"},
                       {"decode_query_sequence_axis", "dp"},
                       {"decode_head_axis", AxisRule::None()},
                       {"decode_attention_dim_axis", "tp"},
                       {"batch_axis", "fsdp"},
                       {"decode_kv_head_axis", T({"tp", "sp"})}});
  SemanticAxes axes = ParseSemanticAxes("batch,length,query_length,kv_length,head,kv_head,head_dim,kv_head_dim");
  EXPECT_EQ(paxis.ResolveSpec(axes, RuntimeMode::kTrain), P("P('fsdp', 'sp', 'sp', 'sp', 'tp', 'tp', None, None)"));
  EXPECT_EQ(paxis.ResolveSpec(axes, RuntimeMode::kPrefill), P("P('fsdp', 'sp', 'sp', 'sp', 'tp', 'tp', None, None)"));
  // decode_head_axis=None means "no override": head stays 'tp'.
  PartitionSpec decode = P("P('dp', 'sp', 'dp', 'sp', 'tp', ('tp', 'sp'), 'tp', None)");
  EXPECT_EQ(paxis.ResolveSpec(axes, RuntimeMode::kDecode), decode);
  EXPECT_EQ(paxis.ResolveSpec(axes, RuntimeMode::kInsert), decode);
}

TEST_F(PartitionAxisTest, AttentionPresetsInDecodeMode) {
  PartitionAxis paxis({{"decode_kv_head_axis", "dp"},
                       {"decode_attention_kv_dim_axis", "sp"},
                       {"decode_batch_axis", AxisRule::None()},
                       {"decode_key_sequence_axis", T({"ep", "fsdp"})}});
  SemanticAxes kv = ParseSemanticAxes("batch,kv_length,kv_head,kv_head_dim");
  EXPECT_EQ(paxis.ResolveSpec(kv, RuntimeMode::kTrain), P("P(('fsdp', 'dp'), 'sp', 'tp', None)"));
  EXPECT_EQ(paxis.ResolveSpec(kv, RuntimeMode::kDecode), P("P(('fsdp', 'dp'), ('ep', 'fsdp'), 'dp', 'sp')"));
}

TEST_F(PartitionAxisTest, CompositesMapEachPartAndKeepUnknownPartsLiterally) {
  PartitionAxis paxis;
  SemanticAxes column = {Comp({sem::kFullyShardedDataParallel, sem::kSequenceParallel}), sem::kTensorParallel};
  EXPECT_EQ(paxis.ResolveSpec(column, RuntimeMode::kTrain), P("P(('fsdp', 'sp'), 'tp')"));
  // '_' has no rule, so inside a composite it is a literal; a field name is read.
  SemanticAxes literal = {Comp({"_", "tp", "head_axis"})};
  EXPECT_EQ(paxis.ResolveAxis(literal, RuntimeMode::kTrain), (std::vector<AxisRule>{L({"_", "tp", "tp"})}));
}

TEST_F(PartitionAxisTest, CompositeInDecodeModeUsesEachPartsOverride) {
  PartitionAxis paxis({{"decode_query_sequence_axis", "dp"}, {"decode_head_axis", "ep"}});
  SemanticAxes q_head = {Comp({sem::kQueryLength, sem::kHead})};
  EXPECT_EQ(paxis.ResolveAxis(q_head, RuntimeMode::kTrain), (std::vector<AxisRule>{L({"sp", "tp"})}));
  EXPECT_EQ(paxis.ResolveAxis(q_head, RuntimeMode::kDecode), (std::vector<AxisRule>{L({"dp", "ep"})}));
  SemanticAxes kv_fsdp = {Comp({sem::kKvLength, sem::kFullyShardedDataParallel})};
  EXPECT_EQ(paxis.ResolveAxis(kv_fsdp, RuntimeMode::kDecode), (std::vector<AxisRule>{L({"sp", "fsdp"})}));
}

TEST_F(PartitionAxisTest, CompositeHoldingBatchIsANestedTupleError) {
  PartitionAxis paxis;
  SemanticAxes axes = {Comp({sem::kBatch, sem::kTensorParallel})};
  EXPECT_EQ(paxis.ResolveAxis(axes, RuntimeMode::kTrain), (std::vector<AxisRule>{L({T({"fsdp", "dp"}), "tp"})}));
  Error e = CatchError([&] { paxis.ResolveSpec(axes, RuntimeMode::kTrain); });
  EXPECT_EQ(e.message(),
            "A tuple inside PartitionSpec cannot contain a nested tuple. Got partition: [('fsdp', 'dp'), 'tp'] and "
            "the nested tuple: ('fsdp', 'dp')");
}

// eformer's test_resolve_axis_raises_for_unknown_semantic_axis.
TEST_F(PartitionAxisTest, UnknownSemanticAxisIsAValueError) {
  for (const char* name : {"__UNKNOWN_SEMANTIC__", "batch", "head_axis"}) {
    SemanticAxes axes = {name};
    Error e = CatchError([&] { PartitionAxis().ResolveAxis(axes, RuntimeMode::kTrain); });
    EXPECT_EQ(e.kind(), ErrorKind::kValueError);
    EXPECT_EQ(e.message(), fmt::format("Unknown semantic axis name: '{}'", name));
  }
}

// eformer's test_register_custom_semantic_axis_is_global.
TEST_F(PartitionAxisTest, RegisteredAxisIsVisibleToEveryInstance) {
  PartitionAxis::Register("__TEST_CUSTOM_AXIS__", "expert_parallel_axis");
  SemanticAxes axes = {"__TEST_CUSTOM_AXIS__"};
  PartitionAxis a;
  PartitionAxis b({{"expert_parallel_axis", "experts"}});
  EXPECT_EQ(a.ResolveAxis(axes, RuntimeMode::kTrain)[0], AxisRule("ep"));
  EXPECT_EQ(b.ResolveAxis(axes, RuntimeMode::kTrain)[0], AxisRule("experts"));
  PartitionAxis::Unregister("__TEST_CUSTOM_AXIS__");
  EXPECT_THROW(a.ResolveAxis(axes, RuntimeMode::kTrain), Error);
}

// eformer's test_register_requires_override_for_existing_semantics and the override tests.
TEST_F(PartitionAxisTest, RegisteringAnExistingNameNeedsOverride) {
  Error builtin = CatchError([] { PartitionAxis::Register(sem::kDataParallel, "expert_parallel_axis"); });
  EXPECT_EQ(builtin.kind(), ErrorKind::kValueError);
  EXPECT_EQ(builtin.message(),
            "Semantic axis '__DATA_PARALLEL__' already exists. Use override=True to replace it.");
  EXPECT_THROW(PartitionAxis::Register("_", "x"), Error);
  PartitionAxis::Register("__A__", "head_axis");
  EXPECT_EQ(CatchError([] { PartitionAxis::Register("__A__", "x"); }).message(),
            "Semantic axis '__A__' already exists. Use override=True to replace it.");
  PartitionAxis::Register("__A__", "expert_axis", std::nullopt, /*override=*/true);
  SemanticAxes axes = {"__A__"};
  EXPECT_EQ(PartitionAxis().ResolveAxis(axes, RuntimeMode::kTrain)[0], AxisRule("ep"));
}

TEST_F(PartitionAxisTest, OverridingABuiltinShadowsItUntilUnregistered) {
  PartitionAxis::Register(sem::kDataParallel, "expert_parallel_axis", std::nullopt, true);
  PartitionAxis::Register(sem::kBatch, "expert_parallel_axis", std::nullopt, true);
  SemanticAxes axes = {sem::kDataParallel, sem::kBatch};
  EXPECT_EQ(PartitionAxis().ResolveSpec(axes, RuntimeMode::kTrain), P("P('ep', 'ep')"));
  // No decode twin for expert_parallel_axis, so decode agrees.
  EXPECT_EQ(PartitionAxis().ResolveSpec(axes, RuntimeMode::kDecode), P("P('ep', 'ep')"));
  PartitionAxis::Unregister(sem::kDataParallel, /*missing_ok=*/false);
  PartitionAxis::Unregister(sem::kBatch, /*missing_ok=*/false);
  EXPECT_EQ(PartitionAxis().ResolveSpec(axes, RuntimeMode::kDecode), P("P('dp', ('fsdp', 'dp'))"));
}

// eformer's test_register_infers_generation_mapping..., _uses_explicit_generation_mapping...,
// _nonstandard_axis_has_not_given_generation_mapping, test_clear_registered_axes_removes_custom_mappings.
TEST_F(PartitionAxisTest, RegistrySnapshotShowsInferredAndExplicitGenerationRules) {
  PartitionAxis::Register("__CUSTOM_QUERY_AXIS__", "query_sequence_axis");
  PartitionAxis::Register("__CUSTOM_AXIS_EXPLICIT_GEN__", "query_sequence_axis", AxisRule("decode_head_axis"));
  PartitionAxis::Register("  __CUSTOM_MESH_LITERAL__ ", "tp");
  auto registered = PartitionAxis::GetRegisteredAxes();
  ASSERT_EQ(registered.size(), 3u);
  EXPECT_EQ(registered[0], (PartitionAxis::RegisteredAxis{"__CUSTOM_QUERY_AXIS__", "query_sequence_axis",
                                                          AxisRule("decode_query_sequence_axis")}));
  EXPECT_EQ(registered[1], (PartitionAxis::RegisteredAxis{"__CUSTOM_AXIS_EXPLICIT_GEN__", "query_sequence_axis",
                                                          AxisRule("decode_head_axis")}));
  EXPECT_EQ(registered[2], (PartitionAxis::RegisteredAxis{"__CUSTOM_MESH_LITERAL__", "tp", std::nullopt}));
  // Re-registering keeps the position and drops an inferred generation rule that no longer applies.
  PartitionAxis::Register("__CUSTOM_QUERY_AXIS__", "tp", std::nullopt, true);
  registered = PartitionAxis::GetRegisteredAxes();
  EXPECT_EQ(registered[0], (PartitionAxis::RegisteredAxis{"__CUSTOM_QUERY_AXIS__", "tp", std::nullopt}));
  PartitionAxis::ClearRegisteredAxes();
  EXPECT_TRUE(PartitionAxis::GetRegisteredAxes().empty());
}

TEST_F(PartitionAxisTest, EmptyNamesAndMissingUnregisterAreErrors) {
  EXPECT_EQ(CatchError([] { PartitionAxis::Register("", "head_axis"); }).message(),
            "`semantic_axis` must be a non-empty string.");
  EXPECT_EQ(CatchError([] { PartitionAxis::Unregister(" "); }).kind(), ErrorKind::kValueError);
  Error missing = CatchError([] { PartitionAxis::Unregister("__DOES_NOT_EXIST__", /*missing_ok=*/false); });
  EXPECT_EQ(missing.kind(), ErrorKind::kKeyError);
  EXPECT_EQ(missing.message(), "Semantic axis '__DOES_NOT_EXIST__' is not registered.");
  PartitionAxis::Unregister("__DOES_NOT_EXIST__");  // missing_ok by default
}

// eformer's test_custom_generation_rule_changes_output_in_generation_mode, and more computed with eflogic.py.
TEST_F(PartitionAxisTest, CustomGenerationRulesApplyInDecode) {
  PartitionAxis::Register("__CUSTOM_GEN_SWITCH__", "query_sequence_axis", AxisRule("decode_query_sequence_axis"));
  PartitionAxis paxis({{"decode_query_sequence_axis", "dp"}});
  SemanticAxes axes = {"__CUSTOM_GEN_SWITCH__"};
  EXPECT_EQ(paxis.ResolveAxis(axes, RuntimeMode::kTrain)[0], AxisRule("sp"));
  EXPECT_EQ(paxis.ResolveAxis(axes, RuntimeMode::kDecode)[0], AxisRule("dp"));

  PartitionAxis::Register("__A__", "head_axis");
  PartitionAxis::Register("__B__", "query_sequence_axis", AxisRule("decode_head_axis"));
  PartitionAxis::Register("__C__", "tp");
  PartitionAxis::Register("__G__", "head_axis", AxisRule::None());  // explicit None: decode unsharded
  PartitionAxis with_head({{"decode_head_axis", "dp"}});
  SemanticAxes abc = {"__A__", "__B__", "__C__", "__G__"};
  EXPECT_EQ(with_head.ResolveSpec(abc, RuntimeMode::kTrain), P("P('tp', 'sp', 'tp', 'tp')"));
  EXPECT_EQ(with_head.ResolveSpec(abc, RuntimeMode::kDecode), P("P('dp', 'dp', 'tp', None)"));
  SemanticAxes composite = {Comp({"__A__", "__C__", "__G__"})};
  EXPECT_EQ(with_head.ResolveAxis(composite, RuntimeMode::kDecode),
            (std::vector<AxisRule>{L({"dp", "tp", AxisRule::None()})}));
}

TEST_F(PartitionAxisTest, RuleOfNoneCountsAsUnknown) {
  PartitionAxis::Register("__N__", AxisRule::None());
  SemanticAxes axes = {"__N__"};
  EXPECT_EQ(CatchError([&] { PartitionAxis().ResolveAxis(axes, RuntimeMode::kTrain); }).message(),
            "Unknown semantic axis name: '__N__'");
}

// eformer's test_true_cycle_in_custom_aliases_raises (messages computed with eflogic.py).
TEST_F(PartitionAxisTest, CyclesAreDetectedWhereTheyClose) {
  PartitionAxis::Register("__X__", "__Y__");
  PartitionAxis::Register("__Y__", "__X__");
  PartitionAxis::Register("__Z__", L({"__X__", "tp"}));
  PartitionAxis::Register("__S__", "__S__");
  auto message = [](const char* name) {
    SemanticAxes axes = {name};
    return CatchError([&] { PartitionAxis().ResolveAxis(axes, RuntimeMode::kTrain); }).message();
  };
  EXPECT_EQ(message("__X__"), "Cyclic semantic axis registration detected at '__Y__'.");
  EXPECT_EQ(message("__Y__"), "Cyclic semantic axis registration detected at '__X__'.");
  EXPECT_EQ(message("__Z__"), "Cyclic semantic axis registration detected at '__X__'.");
  EXPECT_EQ(message("__S__"), "Cyclic semantic axis registration detected at '__S__'.");
}

// eformer's test_nested_alias_with_repeated_semantics_does_not_false_cycle.
TEST_F(PartitionAxisTest, RepeatedSemanticsInOneRuleAreNotACycle) {
  PartitionAxis::Register("__TEST_NESTED_ALIAS_B__", L({sem::kDataParallel, sem::kDataParallel}));
  PartitionAxis::Register("__TEST_NESTED_ALIAS_A__", "__TEST_NESTED_ALIAS_B__");
  SemanticAxes axes = {"__TEST_NESTED_ALIAS_A__"};
  EXPECT_EQ(PartitionAxis().ResolveAxis(axes, RuntimeMode::kTrain), (std::vector<AxisRule>{L({"dp", "dp"})}));
  PartitionAxis::Register("__T__", T({sem::kHead, "__TEST_NESTED_ALIAS_B__"}));
  SemanticAxes tuple_axes = {"__T__"};
  EXPECT_EQ(PartitionAxis().ResolveAxis(tuple_axes, RuntimeMode::kTrain),
            (std::vector<AxisRule>{T({"tp", L({"dp", "dp"})})}));
}

// Property: with random registrations (possibly cyclic) resolution either returns, or throws one of eformer's
// ValueErrors -- never anything else -- and gives the same answer twice.
TEST_F(PartitionAxisTest, RandomRegistriesResolveDeterministicallyOrFailCleanly) {
  std::mt19937 rng(424242);
  const std::vector<std::string> names = {"__R0__", "__R1__", "__R2__", "__R3__"};
  const std::vector<AxisRule> targets = {"head_axis", "tp", sem::kBatch, "__R0__", "__R1__", "__R2__", "__R3__",
                                         "query_sequence_axis"};
  for (int trial = 0; trial < 200; ++trial) {
    PartitionAxis::ClearRegisteredAxes();
    for (const std::string& name : names) {
      if (rng() % 4 == 0) continue;
      AxisRule rule = rng() % 3 == 0 ? L({targets[rng() % targets.size()], targets[rng() % targets.size()]})
                                     : targets[rng() % targets.size()];
      PartitionAxis::Register(name, rule);
    }
    for (const std::string& name : names) {
      SemanticAxes axes = {name};
      for (RuntimeMode mode : {RuntimeMode::kTrain, RuntimeMode::kDecode}) {
        try {
          auto first = PartitionAxis().ResolveAxis(axes, mode);
          EXPECT_EQ(first, PartitionAxis().ResolveAxis(axes, mode));
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::kValueError) << e.what();
        }
      }
    }
  }
}

TEST_F(PartitionAxisTest, ConcurrentRegistrationAndResolutionAreSafe) {
  std::atomic<bool> stop = false;
  std::thread writer([&] {
    for (int i = 0; i < 2000; ++i) {
      PartitionAxis::Register("__CONCURRENT__", i % 2 == 0 ? "head_axis" : "vocab_axis", std::nullopt, true);
    }
    stop = true;
  });
  PartitionAxis paxis({{"vocab_axis", "v"}});
  SemanticAxes axes = {sem::kBatch, "__CONCURRENT__"};
  PartitionAxis::Register("__CONCURRENT__", "head_axis", std::nullopt, true);
  int resolved = 0;
  do {
    PartitionSpec spec = paxis.ResolveSpec(axes, RuntimeMode::kTrain);
    EXPECT_TRUE(spec == P("P(('fsdp', 'dp'), 'tp')") || spec == P("P(('fsdp', 'dp'), 'v')")) << spec.ToString();
    ++resolved;
  } while (!stop);
  writer.join();
  EXPECT_GT(resolved, 0);
}

}  // namespace
}  // namespace spmdsim
