#include "partition/match_rules.h"

#include <cstdlib>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/util/catch_error.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

PartitionSpec P(std::string_view text) { return PartitionSpec::Parse(text); }

// Names the table below is searched in (the last holds a newline on purpose).
const std::vector<std::string> kNames = {
    "model/layers/0/self_attn/q_proj/kernel", "model/embed_tokens/embedding", "lm_head/kernel", "model/norm/scale",
    "model/layers/10/mlp/gate_proj/kernel", "Attention/Kernel", "a{b}", "x]y", "bias_1", "w.kernel", "ab\nc"};

// Pattern -> one character per name in kNames: '1' when Python's re.search(pattern, name) finds a match.
// Computed by running CPython 3's `re` module (/usr/bin/python3) over these exact strings.
TEST(PyRegex, AgreesWithPythonReSearch) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {R"re(q_proj/kernel)re", "10000000000"},
      {R"re((q|k|v)_proj/kernel$)re", "10000000000"},
      {R"re(^model/layers/\d+/mlp/.*kernel)re", "00001000000"},
      {R"re(\Amodel)re", "11011000000"},
      {R"re(kernel\Z)re", "10101000010"},
      {R"re(layers/[0-9]{2}/)re", "00001000000"},
      {R"re(layers/[0-9]{,1}/)re", "10000000000"},
      {R"re(a{b})re", "00000010000"},
      {R"re([]x]y)re", "00000001000"},
      {R"re((?i)attention/kernel)re", "00000100000"},
      {R"re((?#c)norm)re", "00010000000"},
      {R"re((?:gate|up)_proj)re", "00001000000"},
      {R"re(self_attn(?=/q))re", "10000000000"},
      {R"re(kernel(?!/))re", "10101000010"},
      {R"re(_\d\b)re", "00000000100"},
      {R"re(\.kernel)re", "00000000010"},
      {R"re(w.kernel)re", "00000000010"},
      {R"re(emb\w+)re", "01000000000"},
      {R"re(^(?!.*norm).*scale)re", "00000000000"},
      {R"re(([a-z]+)_\1)re", "00000000000"},
      {R"re(\w+_\d)re", "00000000100"},
      {R"re({)re", "00000010000"},
      {R"re(x{1,})re", "00000001000"},
      {R"re(a{,3}b)re", "01000010101"},
      {R"re([^/]+$)re", "11111111111"},
      {R"re(c$)re", "00000000001"},
      {R"re(b$)re", "00000000000"},
      {R"re(\_1)re", "00000000100"},
      {R"re([\]]y)re", "00000001000"},
      {R"re(a{})re", "00000000000"},
      {R"re(\x7bb)re", "00000010000"},
      {R"re(x{,})re", "11111111111"},
      {R"re((a|)_1)re", "00000000100"},
      {R"re([a\-z])re", "10111010101"},
      {R"re(^$|kernel)re", "10101000010"},
  };
  for (const auto& [pattern, expected] : table) {
    PyRegex regex(pattern);
    for (size_t n = 0; n < kNames.size(); ++n) {
      EXPECT_EQ(regex.Search(kNames[n]), expected[n] == '1')
          << "pattern " << pattern << " (as " << regex.translated() << ") on " << kNames[n];
    }
  }
}

TEST(PyRegex, TranslatesPythonOnlySpellings) {
  EXPECT_EQ(PyRegex(R"(\Amodel\Z)").translated(), "^model$");
  EXPECT_EQ(PyRegex("(?#why)norm").translated(), "norm");
  EXPECT_EQ(PyRegex("a{,3}b{2}c{1,}d{,}").translated(), "a{0,3}b{2}c{1,}d{0,}");
  EXPECT_EQ(PyRegex("a{x}").translated(), R"(a\{x\})");
  EXPECT_EQ(PyRegex("[]a]").translated(), R"([\]a])");
  EXPECT_EQ(PyRegex(R"(\_\a)").translated(), R"(_\x07)");
  PyRegex icase("(?i)KERNEL");
  EXPECT_TRUE(icase.ignore_case());
  EXPECT_EQ(icase.translated(), "KERNEL");
  EXPECT_TRUE(icase.Search("dense/kernel"));
}

TEST(PyRegex, RejectsPythonOnlyConstructsNamingThem) {
  const std::vector<std::pair<std::string, std::string>> rejected = {
      {"(?P<layer>\\d+)/kernel", "named groups (?P<name>"},
      {"(a)(?P=x)", "named groups"},
      {"(?<name>a)", "named groups (?<name>"},
      {"(?<=attn)/kernel", "lookbehind"},
      {"(?<!attn)/kernel", "lookbehind"},
      {"(?>a+)b", "atomic groups"},
      {"(a)?(?(1)b|c)", "conditional groups"},
      {"(?x) a b", "inline flags (?x)"},
      {"(?im)a", "inline flags (?im)"},
      {"(?i:a)b", "scoped inline flags"},
      {"a(?i)b", "leading (?i)"},
      {"a*+", "possessive"},
      {"a++", "possessive"},
      {"a?+", "possessive"},
      {"a{2}+", "possessive"},
      {"[[:alpha:]]", "POSIX classes"},
      {R"(\e)", "bad escape \\e"},
      {R"(\U0001F600)", "bad escape \\U"},
      {R"(\N{DASH})", "bad escape \\N"},
      {R"(\cA)", "bad escape \\c"},
      {R"(\k<a>)", "bad escape \\k"},
      {R"(\012)", "octal escapes"},
      {R"([\A])", "bad escape \\A"},
      {"abc\\", "end of pattern"},
      {"[abc", "unterminated character set"},
      {"*a", "nothing to repeat"},
      {"a**", "multiple repeat"},
      {"a{3,2}", "min repeat greater than max repeat"},
      {"(?#open", "unterminated comment"},
      {R"(\x4)", "incomplete escape \\x"},
  };
  for (const auto& [text, what] : rejected) {
    const std::string& pattern = text;  // lambdas capture variables, not structured bindings (clang < 16)
    Error e = CatchError([&] { PyRegex regex(pattern); });
    EXPECT_EQ(e.kind(), ErrorKind::kReError) << pattern;
    EXPECT_THAT(e.message(), HasSubstr(what)) << pattern;
    EXPECT_THAT(e.message(), HasSubstr(PyRepr(pattern))) << pattern;
  }
}

TEST(PyRegex, ReportsStdRegexErrorsAsReErrors) {
  Error e = CatchError([] { PyRegex regex("(ab"); });
  EXPECT_EQ(e.kind(), ErrorKind::kReError);
  EXPECT_THAT(e.message(), HasSubstr("'(ab'"));
}

TEST(PyRegex, ReportsCatastrophicBacktrackingInsteadOfHanging) {
  PyRegex regex("(a+)+$");
  const std::string name = std::string(40, 'a') + "b";
  Error e = CatchError([&] { regex.Search(name); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.message(), HasSubstr("the pattern '(a+)+$' is too expensive to match against 'aaaa"));
  EXPECT_TRUE(regex.Search("aaaa"));
}

TEST(PyRegex, SearchesVeryLongNamesWithoutOverflowingTheStack) {
  const std::string name = std::string(1 << 20, 'x') + "/kernel";
  EXPECT_TRUE(PyRegex(".*kernel$").Search(name));
  EXPECT_TRUE(PyRegex("(x|y)*/kernel").Search(std::string(5000, 'x') + "/kernel"));
  EXPECT_FALSE(PyRegex("^[^/]*$").Search(name));
}

TEST(PyRegex, DotMatchesEverythingButNewlineAsInPython) {
  EXPECT_TRUE(PyRegex("a.b").Search("a\rb"));
  EXPECT_TRUE(PyRegex("a.b").Search("a\fb"));
  EXPECT_FALSE(PyRegex("a.b").Search("a\nb"));
  EXPECT_TRUE(PyRegex("[.]").Search("."));
  EXPECT_FALSE(PyRegex("[.]").Search("x"));
}

TEST(PyRegex, UnicodeEscapesMatchTheUtf8OfTheName) {
  EXPECT_TRUE(PyRegex("\\u0041").Search("A"));
  EXPECT_TRUE(PyRegex("caf\\u00e9$").Search("caf\xc3\xa9"));
  EXPECT_TRUE(PyRegex("\\u20ac+").Search("\xe2\x82\xac\xe2\x82\xac"));
}

// Documented difference: Python's $ also matches just before a final newline; ours does not.
TEST(PyRegex, DollarDoesNotMatchBeforeAFinalNewline) {
  EXPECT_FALSE(PyRegex("kernel$").Search("kernel\n"));  // Python: True
  EXPECT_TRUE(PyRegex("kernel$").Search("kernel"));
}

// A Llama-like parameter set. Expected values computed with /tmp/pr (a pure-python copy of eformer's
// match_partition_rules over the same names and shapes, using Python's re and numpy.prod).
class MatchPartitionRulesTest : public ::testing::Test {
 protected:
  std::vector<PartitionRule> rules_ = {
      {"embed_tokens/embedding", P("P('tp', 'fsdp')")}, {"(q|k|v)_proj/kernel", P("P('fsdp', 'tp')")},
      {"o_proj/kernel", P("P('tp', 'fsdp')")},          {"mlp/.*/kernel", P("P('fsdp', 'tp')")},
      {"norm/scale", P("P(None)")},                     {"lm_head/kernel", P("P('fsdp', 'tp', 'sp')")},
      {".*bias", P("P('tp')")}};
  std::vector<NamedParameter> params_ = {
      {"model/embed_tokens/embedding", std::vector<int64_t>{32000, 4096}},
      {"model/layers/0/self_attn/q_proj/kernel", std::vector<int64_t>{4096, 4096}},
      {"model/layers/0/self_attn/o_proj/kernel", std::vector<int64_t>{4096, 4096}},
      {"model/layers/0/mlp/up_proj/kernel", std::vector<int64_t>{4096, 11008}},
      {"model/layers/0/input_norm/scale", std::vector<int64_t>{4096}},
      {"lm_head/kernel", std::vector<int64_t>{4096, 32000}},
      {"model/layers/0/self_attn/q_proj/bias", std::vector<int64_t>{4096}},
      {"step", std::vector<int64_t>{}},
      {"rng", std::nullopt},
      {"model/layers/0/mlp/gate_proj/kernel", std::vector<int64_t>{64, 64}},
      {"head/bias", std::vector<int64_t>{8}}};
};

TEST_F(MatchPartitionRulesTest, FirstMatchWinsScalarsAndNonArraysReplicatedSpecsTrimmed) {
  auto out = MatchPartitionRules(rules_, params_);  // eformer's default min_size=0
  std::vector<std::pair<std::string, PartitionSpec>> expected = {
      {"model/embed_tokens/embedding", P("P('tp', 'fsdp')")},
      {"model/layers/0/self_attn/q_proj/kernel", P("P('fsdp', 'tp')")},
      {"model/layers/0/self_attn/o_proj/kernel", P("P('tp', 'fsdp')")},
      {"model/layers/0/mlp/up_proj/kernel", P("P('fsdp', 'tp')")},
      {"model/layers/0/input_norm/scale", P("P(None)")},
      {"lm_head/kernel", P("P('fsdp', 'tp')")},
      {"model/layers/0/self_attn/q_proj/bias", P("P('tp')")},
      {"step", P("P()")},
      {"rng", P("P()")},
      {"model/layers/0/mlp/gate_proj/kernel", P("P('fsdp', 'tp')")},
      {"head/bias", P("P('tp')")}};
  EXPECT_EQ(out, expected);
}

TEST_F(MatchPartitionRulesTest, ReportsWhyEachParameterGotItsSpec) {
  PartitionRules compiled(rules_);
  auto out = compiled.MatchAll(params_);
  EXPECT_EQ(out[0].reason, MatchReason::kRule);
  EXPECT_EQ(out[0].rule_index, 0);
  EXPECT_EQ(out[5].reason, MatchReason::kTrimmed);
  EXPECT_EQ(out[5].rule_index, 5);
  EXPECT_EQ(out[7].reason, MatchReason::kScalar);
  EXPECT_FALSE(out[7].rule_index.has_value());
  EXPECT_EQ(out[8].reason, MatchReason::kNotAnArray);
  EXPECT_EQ(MatchReasonName(MatchReason::kBelowMinSize), "below_min_size");
}

TEST_F(MatchPartitionRulesTest, SmallArraysAreReplicatedOnlyAfterARuleMatches) {
  MatchOptions options;
  options.min_size = 5000;
  auto out = PartitionRules(rules_).MatchAll(params_, options);
  EXPECT_EQ(out[4].spec, PartitionSpec());  // 4096 < 5000
  EXPECT_EQ(out[4].reason, MatchReason::kBelowMinSize);
  EXPECT_EQ(out[9].spec, PartitionSpec());  // 64*64
  EXPECT_EQ(out[1].spec, P("P('fsdp', 'tp')"));
  // An array too small to shard still needs a rule.
  std::vector<NamedParameter> unmatched = {{"unmatched/thing", std::vector<int64_t>{1}}};
  EXPECT_EQ(CatchError([&] { PartitionRules(rules_).MatchAll(unmatched, options); }).message(),
            "Partition rule not found for param: unmatched/thing");
}

TEST_F(MatchPartitionRulesTest, MinSizeNoneReadsTheEnvironment) {
  MatchOptions options;
  options.min_size = std::nullopt;
  ::unsetenv("MIN_SHARDING_SIZE");
  auto out = PartitionRules(rules_).MatchAll(params_, options);  // default 16384
  EXPECT_EQ(out[4].spec, PartitionSpec());
  EXPECT_EQ(out[9].spec, PartitionSpec());
  EXPECT_EQ(out[1].spec, P("P('fsdp', 'tp')"));
  ::setenv("MIN_SHARDING_SIZE", " 1_000 ", 1);
  EXPECT_EQ(MinShardingSizeFromEnvironment(), 1000);
  out = PartitionRules(rules_).MatchAll(params_, options);
  EXPECT_EQ(out[4].spec, P("P(None)"));
  EXPECT_EQ(out[9].spec, P("P('fsdp', 'tp')"));
  ::setenv("MIN_SHARDING_SIZE", "16k", 1);
  Error e = CatchError([&] { PartitionRules(rules_).MatchAll(params_, options); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_THAT(e.message(), HasSubstr("invalid literal for int() with base 10: '16k'"));
  for (const char* bad : {"", "1__0", "_1", "1_", "+"}) {
    ::setenv("MIN_SHARDING_SIZE", bad, 1);
    EXPECT_THROW(MinShardingSizeFromEnvironment(), Error) << bad;
  }
  ::setenv("MIN_SHARDING_SIZE", "-5", 1);
  EXPECT_EQ(MinShardingSizeFromEnvironment(), -5);
  ::unsetenv("MIN_SHARDING_SIZE");
  EXPECT_EQ(MinShardingSizeFromEnvironment(), 16384);
}

TEST_F(MatchPartitionRulesTest, UnmatchedParameterIsAValueErrorNamingIt) {
  params_.push_back({"unmatched/thing", std::vector<int64_t>{1}});
  Error e = CatchError([&] { MatchPartitionRules(rules_, params_); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_EQ(e.message(), "Partition rule not found for param: unmatched/thing");
  // Scalars never reach the rules in strict mode.
  std::vector<NamedParameter> scalar = {{"unmatched/thing", std::vector<int64_t>{}}};
  EXPECT_EQ(MatchPartitionRules(rules_, scalar)[0].second, PartitionSpec());
}

TEST_F(MatchPartitionRulesTest, NonStrictUsesTheFirstMatchAsIs) {
  MatchOptions options;
  options.strict = false;
  std::vector<NamedParameter> params = {{"lm_head/kernel", std::vector<int64_t>{4096, 32000}}};
  EXPECT_EQ(MatchPartitionRules(rules_, params, options)[0].second, P("P('fsdp', 'tp', 'sp')"));
  std::vector<NamedParameter> scalar = {{"step", std::vector<int64_t>{}}};
  EXPECT_EQ(CatchError([&] { MatchPartitionRules(rules_, scalar, options); }).message(),
            "Partition rule not found for param: step");
}

// eformer's docstring example: with strict matching the int leaves have no shape, so both get P() (the
// docstring's P('model', None) for the weight holds only with strict=False).
TEST(MatchPartitionRules, EformerDocstringExample) {
  std::vector<PartitionRule> rules = {{".*weight", P("P('model', None)")}};
  std::vector<NamedParameter> tree = {{"layer/weight", std::nullopt}, {"layer/bias", std::nullopt}};
  auto strict = MatchPartitionRules(rules, tree);
  EXPECT_EQ(strict[0].second, PartitionSpec());
  EXPECT_EQ(strict[1].second, PartitionSpec());
  MatchOptions loose;
  loose.strict = false;
  EXPECT_EQ(PartitionRules(rules).Match("layer/weight", std::nullopt, loose).spec, P("P('model', None)"));
  EXPECT_THROW(PartitionRules(rules).Match("layer/bias", std::nullopt, loose), Error);
}

TEST(MatchPartitionRules, LogsReplicationAndTrimmingWhenAsked) {
  std::vector<PartitionRule> rules = {{"kernel", P("P('x', 'y', 'z')")}};
  std::ostringstream log;
  MatchOptions options;
  options.log = true;
  options.log_stream = &log;
  options.min_size = 100;
  std::vector<int64_t> small = {4, 4};
  std::vector<int64_t> big = {64, 64};
  PartitionRules compiled(rules);
  EXPECT_EQ(compiled.Match("a/kernel", small, options).spec, PartitionSpec());
  EXPECT_EQ(compiled.Match("b/kernel", big, options).spec, P("P('x', 'y')"));
  EXPECT_THAT(log.str(), HasSubstr("a/kernel has 16 elements (< min_size 100)"));
  EXPECT_THAT(log.str(), HasSubstr("b/kernel has rank 2: spec P('x', 'y', 'z') trimmed to P('x', 'y')"));
  std::ostringstream quiet;
  options.log = false;
  options.log_stream = &quiet;
  compiled.Match("b/kernel", big, options);
  EXPECT_TRUE(quiet.str().empty());
}

TEST(PartitionRules, BadPatternNamesTheRule) {
  std::vector<PartitionRule> rules = {{"ok", PartitionSpec()}, {"(?P<x>a)", PartitionSpec()}};
  Error e = CatchError([&] { PartitionRules compiled(rules); });
  EXPECT_EQ(e.kind(), ErrorKind::kReError);
  EXPECT_THAT(e.message(), HasSubstr("partition rule 1"));
}

// eformer create_pattern_based_partition_spec's splitting, traced by hand from its source.
TEST(ParsePatternRules, SplitsLikeEformer) {
  auto rules = ParsePatternRules("attention|mlp->data,hidden->model.data,ignored,emb->data..model, x->");
  ASSERT_EQ(rules.size(), 5u);
  EXPECT_EQ(rules[0].pattern, "attention");
  EXPECT_EQ(rules[0].spec, P("P('data')"));
  EXPECT_EQ(rules[1].pattern, "mlp");
  EXPECT_EQ(rules[1].spec, P("P('data')"));
  EXPECT_EQ(rules[2].pattern, "hidden");
  EXPECT_EQ(rules[2].spec, P("P('model', 'data')"));
  EXPECT_EQ(rules[3].spec, P("P('data', None, 'model')"));
  EXPECT_EQ(rules[4].pattern, " x");  // nothing is trimmed
  EXPECT_EQ(rules[4].spec, P("P(None)"));
  Error e = CatchError([] { ParsePatternRules("a->b->c"); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_THAT(e.message(), HasSubstr("too many values to unpack (expected 2)"));
}

TEST(PatternBasedPartitionSpec, FirstMatchElseDefault) {
  PatternBasedPartitionSpec fn("attention|mlp->data,hidden->model");
  EXPECT_EQ(fn("layer/attention/q"), P("P('data')"));
  EXPECT_EQ(fn("layer/mlp/hidden"), P("P('data')"));  // 'mlp' comes first
  EXPECT_EQ(fn("layer/hidden"), P("P('model')"));
  EXPECT_EQ(fn("layer/norm"), PartitionSpec());
  PatternBasedPartitionSpec with_default("x->a", P("P(None, 'b')"));
  EXPECT_EQ(with_default("y"), P("P(None, 'b')"));
  EXPECT_THROW(PatternBasedPartitionSpec("(?P<n>x)->a"), Error);
}

}  // namespace
}  // namespace spmdsim
