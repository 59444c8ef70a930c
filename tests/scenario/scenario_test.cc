// Tests of scenario/scenario.h (and internal/scenario_yaml.h, internal/scenario_workloads.h): the scenario
// format, its defaults, and its errors, which must name the file, line, column and key, what was found and what
// is valid.
#include "scenario/scenario.h"
#include "scenario/arrays.h"

#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/strings.h"
#include "partition/named_sharding.h"
#include "partition/partition_spec.h"
#include "scenario/internal/scenario_yaml.h"  // ParseByteSize, DidYouMean
#include "scenario/report.h"
#include "tests/scenario/parse_error.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kMinimal = R"y(topology: {preset: "cpu:8"}
mesh: {axes: {data: 2, model: 4}}
workloads:
  - {kind: collectives}
)y";

using ::spmdsim::testing_scenario::ErrorOf;

TEST(Scenario, ParsesTheMinimalFileWithDefaults) {
  Scenario s = ParseScenario(kMinimal, "dir/minimal.yaml");
  EXPECT_EQ(s.name, "minimal");
  EXPECT_EQ(s.topology.topology->num_devices(), 8);
  EXPECT_EQ(s.mesh.mesh.axis_names(), (std::vector<std::string>{"data", "model"}));
  EXPECT_EQ(s.mesh.mesh.shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(s.topology.efficiency.compute_efficiency, 1.0);
  ASSERT_EQ(s.workloads.size(), 1u);
  EXPECT_EQ(s.workloads[0].kind, WorkloadKind::kCollectives);
  EXPECT_EQ(s.workloads[0].name, "collectives");
  const auto& c = std::get<CollectivesConfig>(s.workloads[0].config);
  EXPECT_EQ(c.ops, std::vector<std::string>{"psum"});
  EXPECT_EQ(c.iterations, CollectivesConfig{}.iterations);
}

TEST(Scenario, KeepsMeshAxesInFileOrder) {
  Scenario s = ParseScenario(R"y(topology: {preset: "cpu:8"}
mesh: {axes: {z: 2, a: 2, m: 2}}
workloads: [{kind: collectives}]
)y", "t.yaml");
  EXPECT_EQ(s.mesh.mesh.axis_names(), (std::vector<std::string>{"z", "a", "m"}));
  Scenario t = ParseScenario(R"y(topology: {preset: "cpu:8"}
mesh: {axes: "x=4,y=2"}
workloads: [{kind: collectives}]
)y", "t.yaml");
  EXPECT_EQ(t.mesh.mesh.shape(), (std::vector<int64_t>{4, 2}));
}

TEST(Scenario, ConvertsBidirectionalBandwidthToOneWay) {
  Scenario s = ParseScenario(R"y(topology:
  preset: "tpu-v4:2x2x4"
  links:
    ici: {bandwidth_GBps: 90, direction: bidirectional, latency_us: 2}
    dcn: {bandwidth_GBps: 25, direction: one_way}
  wraparound: [false, false, true]
  hbm_GiB: 16
  peak_TFLOPs: {bf16: 100}
  efficiency: {compute: 0.5, memory: 0.25}
  stragglers: [{device: 3, speed: 0.5}]
mesh: {axes: {data: 4, model: 4}}
workloads: [{kind: collectives}]
)y", "t.yaml");
  const Topology& t = *s.topology.topology;
  EXPECT_DOUBLE_EQ(t.link(LinkClass::kIci).bandwidth_Bps, 45e9);
  EXPECT_DOUBLE_EQ(t.link(LinkClass::kIci).latency_s, 2e-6);
  EXPECT_THAT(t.link(LinkClass::kIci).source, HasSubstr("t.yaml:4:"));
  EXPECT_DOUBLE_EQ(t.link(LinkClass::kDcn).bandwidth_Bps, 25e9);
  EXPECT_EQ(t.wraparound(), (std::array<bool, 3>{false, false, true}));
  EXPECT_EQ(t.memory_bytes(), 16 * kGiB);
  EXPECT_DOUBLE_EQ(t.peak_flops().at(DType::kBF16), 100e12);
  EXPECT_EQ(s.topology.efficiency.compute_efficiency, 0.5);
  EXPECT_EQ(s.topology.efficiency.memory_efficiency, 0.25);
  EXPECT_EQ(s.topology.stragglers, (std::vector<std::pair<int, double>>{{3, 0.5}}));
}

TEST(Scenario, ReadsTheGpuNetworkAndTheForcedNcclAlgorithm) {
  Scenario s = ParseScenario(R"y(topology:
  preset: "dgx-a100:2"
  network: {nics_per_node: 4, nic_Gbps: 100, latency_us: 2, oversubscription: 2}
  nvlink_sharp: false
mesh: {axes: {g: 16}}
workloads: [{kind: collectives, ops: [all_reduce], algorithm: tree, protocol: ll128}]
)y", "t.yaml");
  const Topology& t = *s.topology.topology;
  EXPECT_EQ(t.network().nics_per_node, 4);
  EXPECT_DOUBLE_EQ(t.network().nic_Bps, 12.5e9);
  EXPECT_DOUBLE_EQ(t.network().latency_s, 2e-6);
  EXPECT_DOUBLE_EQ(t.link(LinkClass::kInfiniband).bandwidth_Bps, 12.5e9 / 2 / 2);
  EXPECT_FALSE(t.nvlink_sharp());
  const auto& c = std::get<CollectivesConfig>(s.workloads[0].config);
  EXPECT_EQ(c.algorithm, Algorithm::kTree);
  EXPECT_EQ(c.protocol, Protocol::kLl128);
  try {
    ParseScenario(R"y(topology: {preset: "tpu-v4:2x2x1", network: {nics_per_node: 2}}
mesh: {axes: {g: 4}}
workloads: [{kind: collectives}]
)y", "t.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("t.yaml:1"));
    EXPECT_THAT(e.what(), HasSubstr("GPU presets"));
  }
  try {
    ParseScenario(R"y(topology: {preset: "dgx-h100:1"}
mesh: {axes: {g: 8}}
workloads: [{kind: collectives, protocol: fast}]
)y", "t.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("valid values: auto, ll, ll128, simple"));
  }
}

TEST(Scenario, RequiresTheDirectionOfAGivenBandwidth) {
  EXPECT_THAT(ErrorOf(R"y(topology:
  preset: "tpu-v4:2x2x4"
  links: {ici: {bandwidth_GBps: 90}}
mesh: {axes: {d: 16}}
workloads: [{kind: collectives}]
)y"),
              HasSubstr("t.yaml:3:33: topology.links.ici.bandwidth_GBps: say whether the bandwidth is one_way or "
                        "bidirectional"));
}

TEST(Scenario, NamesFileLineColumnAndKeyOfAnUnknownKeyWithADidYouMean) {
  std::string e = ErrorOf(R"y(topology:
  preset: "cpu:8"
  slises: 2
mesh: {axes: {d: 8}}
workloads: [{kind: collectives}]
)y");
  EXPECT_THAT(e, HasSubstr("ScenarioError: t.yaml:3:3: topology.slises: unknown key 'slises', did you mean 'slices'?"));
  EXPECT_THAT(e, HasSubstr("valid keys here: preset, slices, links"));
}

TEST(Scenario, RejectsDuplicateKeys) {
  EXPECT_THAT(ErrorOf("topology: {preset: \"cpu:8\"}\ntopology: {preset: \"cpu:4\"}\nmesh: {axes: {d: 8}}\n"
                      "workloads: [{kind: collectives}]\n"),
              HasSubstr("t.yaml:2:1: topology: key 'topology' appears twice"));
}

TEST(Scenario, KeepsTheLibrarysErrorNestedInTheLocatedOne) {
  try {
    ParseScenario(R"y(topology: {preset: "cpu:8"}
mesh: {axes: {data: 2, model: 4}}
arrays:
  - {name: x, shape: [7, 16], spec: "P('data')"}
workloads:
  - {kind: collectives}
)y",
                  "t.yaml");
    FAIL() << "7 rows do not split over data=2";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("t.yaml:4:"));
    EXPECT_EQ(e.kind(), ErrorKind::kIndivisibleError);
    try {
      std::rethrow_if_nested(e);
      FAIL() << "the partition library's error is not nested";
    } catch (const SpecError& original) {
      EXPECT_EQ(original.first().reason, SpecProblemReason::kNotDivisible);
    }
  }
}

TEST(Scenario, ReportsYamlSyntaxErrorsWithTheirLine) {
  EXPECT_THAT(ErrorOf("topology: {preset: \"cpu:8\"\nmesh: [\n"), HasSubstr("t.yaml:"));
  EXPECT_THAT(ErrorOf("topology: {preset: \"cpu:8\"\nmesh: [\n"), HasSubstr("not valid YAML"));
}

// Before: yaml-cpp's words: "t.yaml:2:8: not valid YAML: illegal map value" for a tab, "end of map not found" for a
// dedent. After: a plain sentence at the place to fix.
TEST(Scenario, SaysPlainlyWhatIsWrongWithTabsAndIndentation) {
  EXPECT_EQ(ErrorOf("topology:\n\tpreset: \"cpu:8\"\n"),
            "ScenarioError: t.yaml:2:1: not valid YAML: a tab indents line 2; YAML indents with spaces only (replace "
            "the tab with spaces)");
  EXPECT_THAT(ErrorOf("topology:\n  preset: \"cpu:8\"\n \t slices: 2\n"),
              HasSubstr("t.yaml:3:2: not valid YAML: a tab"));
  EXPECT_EQ(ErrorOf("topology:\n    preset: \"cpu:8\"\n  slices: 2\nmesh: {axes: {data: 8}}\n"),
            "ScenarioError: t.yaml:3:3: not valid YAML: line 3 is indented 2 spaces, a depth that no key above it "
            "has: indent it 4 spaces (beside 'preset', line 2) or 0 spaces (beside 'topology', line 1)");
  EXPECT_THAT(ErrorOf("topology: {preset: \"cpu:8\"}\nmesh: {axes: {data: 8}}\nworkloads:\n  - kind: collectives\n"
                      "    ops: [psum]\n   sizes: [1KiB]\n"),
              HasSubstr("t.yaml:6:4: not valid YAML: line 6 is indented 3 spaces, a depth that no key above it has: "
                        "indent it 4 spaces (beside 'ops', line 5), 2 spaces (a new '- ' item, as on line 4) or 0 "
                        "spaces (beside 'workloads', line 3)"));
  EXPECT_THAT(ErrorOf("name: x\n  description: y\n"),
              HasSubstr("t.yaml:2:3: not valid YAML: line 2 is indented deeper than line 1, whose key 'name' already "
                        "has a value on its line; a key holds a value or nested keys, not both: indent line 2 as line "
                        "1 (0 spaces) to put it beside 'name'"));
  EXPECT_THAT(ErrorOf("name: x: y\n"), HasSubstr("line 1 holds a second 'key: value' after a key"));
  for (const std::string text : {"topology:\n\tpreset: \"cpu:8\"\n", "topology:\n    preset: \"cpu:8\"\n  slices: 2\n",
                                  "name: x\n  description: y\n"}) {
    EXPECT_THAT(ErrorOf(text), Not(HasSubstr("illegal"))) << text;
    EXPECT_THAT(ErrorOf(text), Not(HasSubstr("not found"))) << text;
  }
}

// Before: "Resource axis: modle of P('modle', None) is not found in mesh: ('data', 'model')." After: the same, with
// a did-you-mean.
TEST(Scenario, UnknownSpecAxesGetADidYouMean) {
  EXPECT_THAT(ErrorOf(kMinimal + "arrays:\n  - {name: x, shape: [8, 16], spec: \"P('modle', None)\"}\n"),
              HasSubstr("t.yaml:6:37: arrays[0].spec: Resource axis: modle of P('modle', None) is not found in mesh: "
                        "('data', 'model'). (did you mean 'model' for 'modle'?)"));
}

// A spec's string form is held to the list form's 16 entries.
TEST(Scenario, ASpecOfMoreThanSixteenEntriesIsRefusedInEitherForm) {
  std::string text = "P(";
  std::string list = "[";
  for (int i = 0; i < 17; ++i) {
    text += "None, ";
    list += "null, ";
  }
  text += ")";
  list += "]";
  EXPECT_THAT(ErrorOf(kMinimal + "arrays:\n  - {name: x, shape: [8, 16], spec: \"" + text + "\"}\n"),
              HasSubstr("arrays[0].spec: a spec of 17 entries; at most 16"));
  EXPECT_THAT(ErrorOf(kMinimal + "arrays:\n  - {name: x, shape: [8, 16], spec: " + list + "}\n"),
              HasSubstr("arrays[0].spec: a spec of 17 entries; at most 16"));
}

// A Cloud TPU accelerator type as the preset; the header spells out the chips.
TEST(Scenario, TakesACloudTpuAcceleratorTypeAsTheTopology) {
  const Scenario s = ParseScenario(
      "topology: {preset: v5p-64}\nmesh: {axes: {data: 32}}\nworkloads: [{kind: collectives}]\n", "t.yaml");
  EXPECT_EQ(s.topology.topology->ToString(), "tpu-v5p:2x4x4");
  EXPECT_THAT(HumanHeader(s, true),
              HasSubstr("topology tpu-v5p:2x4x4: 32 chips (Cloud TPU v5p-64 counts 64 TensorCores, 2 per chip), 32 "
                        "devices (TPU v5)"));
  EXPECT_THAT(ErrorOf("topology: {preset: v5p-60}\nmesh: {axes: {data: 30}}\nworkloads: [{kind: collectives}]\n"),
              HasSubstr("t.yaml:1:20: topology.preset: topology 'v5p-60': Cloud TPU v5p-N counts TensorCores"));
  EXPECT_THAT(ErrorOf(
                  "topology: {preset: \"tpu-v5:4x4x4\"}\nmesh: {axes: {data: 64}}\nworkloads: [{kind: collectives}]\n"),
              HasSubstr("(did you mean 'tpu-v5e' or 'tpu-v5p'?)"));
}

TEST(Scenario, RejectsASecondDocumentAtItsLine) {
  EXPECT_THAT(ErrorOf(kMinimal + "---\nname: other\n"),
              HasSubstr("t.yaml:5:1: a second YAML document starts here; a scenario file holds one document"));
  EXPECT_THAT(ErrorOf("--- # first\n" + kMinimal + "...\n---\n"), HasSubstr("t.yaml:7:1: a second YAML document"));
  EXPECT_EQ(ErrorOf("--- # one document with a start marker\n" + kMinimal), "");
}

// yaml-cpp 0.7 never returns on these (found by the fuzzer: it grew to 9 GB in 20 s on 102 bytes).
TEST(Scenario, RejectsADocumentThatStartsWithAFlowEntry) {
  EXPECT_THAT(ErrorOf(", b\n"), HasSubstr("t.yaml:1:1: ',' cannot start a line outside"));
  EXPECT_THAT(ErrorOf("# tpu\n    , fsdp: true\n      tensor_axes: [tensor]\n"),
              HasSubstr("t.yaml:2:5: ',' cannot start a line outside"));
  EXPECT_THAT(ErrorOf("      tensor_axes: [tensor]\n    , fsdp: true\n"), HasSubstr("t.yaml:2:5: ',' cannot start"));
  EXPECT_THAT(ErrorOf("%YAML 1.2\n--- , b\n"), HasSubstr("t.yaml:2:5: ',' cannot start"));
  // Commas inside values, flow collections over several lines and quoted text are not it.
  EXPECT_THAT(ErrorOf("a: x, , b\n"), Not(HasSubstr("cannot start")));
  EXPECT_THAT(ErrorOf(kMinimal + "description: \"a\n  , b\"\n"), Not(HasSubstr("cannot start")));
  EXPECT_EQ(ErrorOf(
                "topology: {preset: \"cpu:8\"\n  , efficiency: {compute: 1}}\nmesh: {axes: {data: 8}}\n"
                "workloads:\n  - {kind: collectives, ops: [all_reduce],\n     axes: [[data]]\n     , sizes: [8]}\n"),
            "");
}

TEST(Scenario, RejectsBytesThatAreNotUtf8AtTheirPosition) {
  EXPECT_THAT(ErrorOf(kMinimal + "name: \"caf\xe9\"\n"), HasSubstr("t.yaml:5:11: byte 0xe9 is not UTF-8"));
  EXPECT_THAT(ErrorOf("# caf\xc3\xa9\n" + kMinimal), Not(HasSubstr("UTF-8")));
}

TEST(Scenario, LocatesErrorsTheTopologyRaisesForAFileValue) {
  EXPECT_THAT(ErrorOf("topology: {preset: \"cpu:8\", hbm_GiB: 1.0e-12}\nmesh: {axes: {d: 8}}\n"
                      "workloads: [{kind: collectives}]\n"),
              HasSubstr("t.yaml:1:38: topology.hbm_GiB: device memory must be > 0 bytes, got 0"));
}

TEST(Scenario, ReportsMissingRequiredKeys) {
  EXPECT_THAT(ErrorOf("mesh: {axes: {d: 8}}\nworkloads: [{kind: collectives}]\n"),
              HasSubstr("topology: missing required key"));
  EXPECT_THAT(ErrorOf("topology: {preset: \"cpu:8\"}\nmesh: {axes: {d: 8}}\n"),
              HasSubstr("workloads: missing required key"));
  EXPECT_THAT(ErrorOf("topology: {preset: \"cpu:8\"}\nmesh: {axes: {d: 8}}\nworkloads: []\n"),
              HasSubstr("at least one workload"));
}

TEST(Scenario, ReportsWrongTypesWithWhatWasFound) {
  EXPECT_THAT(ErrorOf("topology: {preset: \"tpu-v4:2x2x4\", slices: many}\nmesh: {axes: {d: 16}}\n"
                      "workloads: [{kind: collectives}]\n"),
              HasSubstr("topology.slices: found 'many', expected an integer"));
  EXPECT_THAT(ErrorOf("topology: [1, 2]\nmesh: {axes: {d: 8}}\nworkloads: [{kind: collectives}]\n"),
              HasSubstr("t.yaml:1:11: topology: found a list, expected a mapping"));
}

TEST(Scenario, RethrowsLibraryErrorsWithTheLocation) {
  // Topology::Parse rejects the preset; the mesh does not fit the 8 devices.
  EXPECT_THAT(ErrorOf("topology: {preset: \"tpu-v9:2x2\"}\nmesh: {axes: {d: 4}}\nworkloads: [{kind: collectives}]\n"),
              HasSubstr("t.yaml:1:20: topology.preset:"));
  EXPECT_THAT(ErrorOf("topology: {preset: \"cpu:8\"}\nmesh: {axes: {d: 3}}\nworkloads: [{kind: collectives}]\n"),
              HasSubstr("t.yaml:2:14: mesh:"));
}

TEST(Scenario, BoundsTheDeviceCountBeforeBuildingATopology) {
  EXPECT_THAT(ErrorOf(
                  "topology: {preset: \"cpu:999999999\"}\nmesh: {axes: {d: 4}}\nworkloads: [{kind: collectives}]\n"),
              HasSubstr("more than 65536 devices"));
}

TEST(Scenario, BuildsHybridAndT5xMeshes) {
  Scenario h = ParseScenario(R"y(topology: {preset: "tpu-v5p:2x2x2", slices: 2}
mesh: {axes: {data: 1, model: 8}, dcn_axes: {data: 2, model: 1}}
workloads: [{kind: collectives, axes: [data]}]
)y", "t.yaml");
  EXPECT_EQ(h.mesh.builder, ScenarioMesh::Builder::kHybrid);
  EXPECT_EQ(h.mesh.mesh.shape(), (std::vector<int64_t>{2, 8}));
  // Row 1 is slice 1: device ids 8..15.
  for (int i = 8; i < 16; ++i) EXPECT_GE(h.mesh.mesh.device_ids()[i], 8);
  Scenario t = ParseScenario(R"y(topology: {preset: "cpu:8"}
mesh: {t5x: {num_partitions: 4}}
workloads: [{kind: collectives}]
)y", "t.yaml");
  EXPECT_EQ(t.mesh.mesh.axis_names(), (std::vector<std::string>{"data", "model"}));
  EXPECT_THAT(ErrorOf("topology: {preset: \"cpu:8\"}\nmesh: {t5x: {num_partitions: 4}, axes: {d: 8}}\n"
                      "workloads: [{kind: collectives}]\n"),
              HasSubstr("remove the other mesh keys"));
}

const std::string kArraysHead = R"y(topology: {preset: "cpu:8"}
mesh: {axes: {data: 2, model: 4}}
rules:
  logical_axis_rules: [[batch, data], [embed, null], [mlp, model]]
)y";

TEST(Scenario, ResolvesArraySpecsFromSpecsAndLogicalAxes) {
  Scenario s = ParseScenario(kArraysHead + R"y(arrays:
  - {name: x, shape: [8, 16], spec: "P('data', None)"}
  - {name: w, shape: "16x32", dtype: bfloat16, logical_axes: [embed, mlp], data: random, seed: 4}
  - {name: b, shape: [32], spec: [model], data: iota}
workloads: [{kind: collectives}]
)y", "t.yaml");
  EXPECT_EQ(s.array("x").spec.ToString(), "P('data', None)");
  EXPECT_EQ(s.array("w").spec.ToString(), "P(None, 'model')");
  EXPECT_EQ(s.array("w").dtype, DType::kBF16);
  EXPECT_EQ(s.array("w").init.kind, ArrayInit::Kind::kRandom);
  EXPECT_EQ(s.array("w").init.random.seed, 4u);
  EXPECT_EQ(s.array("b").spec.ToString(), "P('model',)");
  EXPECT_THROW(s.array("nope"), Error);
}

TEST(Scenario, RejectsASpecThatDoesNotDivideTheShape) {
  EXPECT_THAT(ErrorOf(kArraysHead + "arrays:\n  - {name: x, shape: [6, 16], spec: \"P(None, 'model')\"}\n"
                                    "  - {name: y, shape: [6, 16], spec: \"P('model', None)\"}\n"
                                    "workloads: [{kind: collectives}]\n"),
              HasSubstr("IndivisibleError: t.yaml:7:37: arrays[1].spec:"));
}

TEST(Scenario, MakesArraysReproduciblyAndAbstractly) {
  Scenario s = ParseScenario(kArraysHead + R"y(arrays:
  - {name: r, shape: [4, 4], data: random, seed: 5}
  - {name: u, shape: [1000], data: random, distribution: uniform, scale: 0.5, seed: 5}
  - {name: i, shape: [2, 3], dtype: int32, data: iota}
  - {name: o, shape: [3], data: ones}
workloads: [{kind: collectives}]
)y", "t.yaml");
  Array r1 = MakeScenarioArray(s.array("r"), false), r2 = MakeScenarioArray(s.array("r"), false);
  EXPECT_TRUE(r1.BitwiseEquals(r2));
  for (double v : MakeScenarioArray(s.array("u"), false).ToDoubles()) {
    EXPECT_GE(v, -0.5);
    EXPECT_LT(v, 0.5);
  }
  EXPECT_EQ(MakeScenarioArray(s.array("i"), false).ToDoubles(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(MakeScenarioArray(s.array("o"), false).ToDoubles(), (std::vector<double>{1, 1, 1}));
  Array a = MakeScenarioArray(s.array("r"), true);
  EXPECT_TRUE(a.is_abstract());
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{4, 4}));
}

// Each rank makes only its own blocks (docs/multiprocess.md): every block must be bitwise the same cut of the
// whole array, for every kind of data and dtype, including blocks that split the last dimension and chunks of
// the streamed values (65536 elements) that straddle blocks.
TEST(Scenario, MakesBlocksBitwiseEqualToTheWholeArrayCutAtTheSameRanges) {
  Scenario s = ParseScenario(kArraysHead + R"y(arrays:
  - {name: n, shape: [96, 1500], data: random, seed: 11, scale: 0.3}
  - {name: nb, shape: [96, 1500], dtype: bfloat16, data: random, seed: 2}
  - {name: u, shape: [96, 1500], dtype: float16, data: random, distribution: uniform, seed: 5}
  - {name: i, shape: [96, 1500], dtype: int32, data: iota}
  - {name: ib, shape: [96, 1500], dtype: bfloat16, data: iota}
  - {name: o, shape: [96, 1500], dtype: float64, data: ones}
  - {name: z, shape: [96, 1500], data: zeros}
workloads: [{kind: collectives}]
)y", "t.yaml");
  const std::vector<std::vector<IndexRange>> blocks = {
      {{0, 96}, {0, 1500}}, {{0, 24}, {0, 1500}}, {{72, 96}, {750, 1500}}, {{10, 11}, {3, 4}}, {{40, 90}, {100, 1400}}};
  for (const char* name : {"n", "nb", "u", "i", "ib", "o", "z"}) {
    const ScenarioArray& a = s.array(name);
    const Array whole = MakeScenarioArray(a, false);
    const std::vector<Array> made = MakeScenarioArrayBlocks(a, blocks);
    ASSERT_EQ(made.size(), blocks.size());
    for (size_t b = 0; b < blocks.size(); ++b) {
      std::vector<int64_t> shape;
      for (const IndexRange& r : blocks[b]) shape.push_back(r.size());
      std::vector<std::byte> cut(static_cast<size_t>(whole.nbytes() / whole.size() * NumElements(shape)));
      CopyBlockOut(static_cast<const std::byte*>(whole.raw_data()), whole.shape(), blocks[b],
                   static_cast<size_t>(DTypeSize(whole.dtype())), cut.data());
      ASSERT_EQ(made[b].shape(), shape) << name << " block " << b;
      ASSERT_EQ(made[b].dtype(), whole.dtype());
      EXPECT_EQ(std::memcmp(made[b].raw_data(), cut.data(), cut.size()), 0) << name << " block " << b;
    }
  }
}

TEST(Scenario, ReadsNpyDataRelativeToTheScenario) {
  std::string dir = ::testing::TempDir() + "scenario_npy_test";
  std::filesystem::create_directories(dir + "/data");
  std::vector<uint8_t> bytes(4 * 4);
  float values[4] = {1, 2, 3, 4};
  std::memcpy(bytes.data(), values, 16);
  WriteNpy(dir + "/data/x.npy", {DType::kF32, {2, 2}, bytes});
  Scenario s = ParseScenario(kArraysHead +
                                 "arrays:\n  - {name: x, data: data/x.npy}\nworkloads: [{kind: collectives}]\n",
                             dir + "/s.yaml");
  EXPECT_EQ(s.array("x").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(MakeScenarioArray(s.array("x"), false).ToDoubles(), (std::vector<double>{1, 2, 3, 4}));
  try {
    ParseScenario(kArraysHead + "arrays:\n  - {name: x, shape: [4], data: npy, file: data/x.npy}\n"
                                "workloads: [{kind: collectives}]\n",
                  dir + "/s.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("arrays[0].shape: shape (4,) differs from the shape (2, 2) stored in"));
  }
  EXPECT_THAT(ErrorOf(kArraysHead + "arrays:\n  - {name: x, data: missing.npy}\nworkloads: [{kind: collectives}]\n"),
              HasSubstr("cannot read .npy file"));
}

// .npy data: each block is read from the file (C order: only its bytes; Fortran order: the whole file, reordered).
TEST(Scenario, ReadsNpyBlocksBitwiseEqualToTheWholeArrayCutAtTheSameRanges) {
  const std::string dir = ::testing::TempDir() + "scenario_npy_blocks_test";
  std::filesystem::create_directories(dir);
  const int64_t rows = 40, cols = 30;
  std::vector<uint8_t> c_bytes(static_cast<size_t>(rows * cols * 4)), f_bytes(c_bytes.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const float v = static_cast<float>(i * 1000 + j) * 0.25f;
      std::memcpy(c_bytes.data() + (i * cols + j) * 4, &v, 4);
      std::memcpy(f_bytes.data() + (j * rows + i) * 4, &v, 4);
    }
  }
  WriteNpy(dir + "/c.npy", {DType::kF32, {rows, cols}, c_bytes});
  std::string fortran = SerializeNpy({DType::kF32, {rows, cols}, f_bytes});
  const std::string c_order_text = "'fortran_order': False";
  fortran.replace(fortran.find(c_order_text), c_order_text.size(), "'fortran_order': True ");
  std::ofstream(dir + "/f.npy", std::ios::binary) << fortran;
  Scenario s = ParseScenario(kArraysHead +
                                 "arrays:\n  - {name: c, data: c.npy}\n  - {name: f, data: f.npy}\n"
                                 "  - {name: b, dtype: bfloat16, data: c.npy}\nworkloads: [{kind: collectives}]\n",
                             dir + "/s.yaml");
  const std::vector<std::vector<IndexRange>> blocks = {{{0, 40}, {0, 30}}, {{10, 20}, {0, 30}}, {{5, 37}, {7, 8}},
                                                       {{39, 40}, {29, 30}}};
  for (const char* name : {"c", "f", "b"}) {
    const Array whole = MakeScenarioArray(s.array(name), false);
    const std::vector<Array> made = MakeScenarioArrayBlocks(s.array(name), blocks);
    for (size_t b = 0; b < blocks.size(); ++b) {
      std::vector<int64_t> shape;
      for (const IndexRange& r : blocks[b]) shape.push_back(r.size());
      std::vector<std::byte> cut(static_cast<size_t>(NumElements(shape) * DTypeSize(whole.dtype())));
      CopyBlockOut(static_cast<const std::byte*>(whole.raw_data()), whole.shape(), blocks[b],
                   static_cast<size_t>(DTypeSize(whole.dtype())), cut.data());
      ASSERT_EQ(made[b].shape(), shape) << name << " block " << b;
      EXPECT_EQ(std::memcmp(made[b].raw_data(), cut.data(), cut.size()), 0) << name << " block " << b;
    }
  }
  EXPECT_EQ(MakeScenarioArray(s.array("f"), false).ToDoubles(), MakeScenarioArray(s.array("c"), false).ToDoubles());
}

TEST(Scenario, RejectsArrayKeysThatDoNotApplyToItsData) {
  EXPECT_THAT(ErrorOf(kArraysHead + "arrays:\n  - {name: x, shape: [2], seed: 3}\nworkloads: [{kind: collectives}]\n"),
              HasSubstr("'seed' applies to data: random only (data is zeros)"));
  EXPECT_THAT(ErrorOf(kArraysHead +
                      "arrays:\n  - {name: x, shape: [2], data: randon}\nworkloads: [{kind: collectives}]\n"),
              HasSubstr("found 'randon', did you mean 'random'?"));
  EXPECT_THAT(ErrorOf(kArraysHead + "arrays:\n  - {name: x, shape: [2]}\n  - {name: x, shape: [2]}\n"
                                    "workloads: [{kind: collectives}]\n"),
              HasSubstr("array 'x' is defined twice"));
}

TEST(Scenario, MapsWorkloadFieldsOntoTheEngineConfigs) {
  Scenario s = ParseScenario(kArraysHead + R"y(workloads:
  - {kind: collectives, ops: [all_reduce, all_gather], axes: [model, [data, model]], sizes: [1KiB, "2 MiB", 4096],
     dtype: bfloat16, iterations: 3, warmup: 0, check: false}
  - {kind: collectives, sizes: {min: 1KiB, max: 16KiB, factor: 4}}
  - {kind: mlp, batch: 4, seq: 8, d_model: 32, d_ff: 64, activation: relu, sharding: rules, backward: false}
  - {kind: transformer_block, heads: 8, d_model: 64, sharding: {tensor_axes: [model], sequence_parallel: true}}
  - {kind: partition, params: [{name: a/kernel, shape: [8, 8], logical_axes: [embed, mlp]}], correction: keep-most}
)y", "t.yaml");
  ASSERT_EQ(s.workloads.size(), 5u);
  const auto& c = std::get<CollectivesConfig>(s.workloads[0].config);
  EXPECT_EQ(c.ops, (std::vector<std::string>{"all_reduce", "all_gather"}));
  EXPECT_EQ(c.axes, (std::vector<std::vector<std::string>>{{"model"}, {"data", "model"}}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{kKiB, 2 * kMiB, 4 * kKiB}));
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.iterations, 3);
  EXPECT_EQ(c.warmup, 0);
  EXPECT_FALSE(c.check);
  EXPECT_EQ(s.workloads[1].name, "collectives_2");
  EXPECT_EQ(std::get<CollectivesConfig>(s.workloads[1].config).sizes, (std::vector<int64_t>{1024, 4096, 16384}));
  const auto& m = std::get<MlpConfig>(s.workloads[2].config);
  EXPECT_EQ(m.activation, "relu");
  EXPECT_FALSE(m.backward);
  EXPECT_EQ(m.sharding.batch_axes, std::vector<std::string>{"data"});
  EXPECT_EQ(m.sharding.tensor_axes, std::vector<std::string>{"model"});
  const auto& t = std::get<TransformerBlockConfig>(s.workloads[3].config);
  EXPECT_EQ(t.heads, 8);
  EXPECT_TRUE(t.sharding.sequence_parallel);
  const auto& p = std::get<PartitionConfig>(s.workloads[4].config);
  EXPECT_EQ(p.correction, CorrectionMode::kKeepMost);
  EXPECT_EQ(p.logical_rules.size(), 3u);
  ASSERT_EQ(p.params.size(), 1u);
  EXPECT_TRUE(p.params[0].logical_axes.has_value());
}

TEST(Scenario, ChecksWorkloadReferencesAgainstTheMeshAndArrays) {
  EXPECT_THAT(ErrorOf(kArraysHead + "workloads: [{kind: collectives, axes: [modle]}]\n"),
              HasSubstr("mesh has no axis 'modle' (did you mean 'model'?)"));
  EXPECT_THAT(ErrorOf(kArraysHead + "workloads: [{kind: mlpp}]\n"), HasSubstr("found 'mlpp', did you mean 'mlp'?"));
  EXPECT_THAT(ErrorOf(kArraysHead + "workloads: [{kind: mlp, d_modle: 4}]\n"),
              HasSubstr("workloads[0].d_modle: unknown key 'd_modle', did you mean 'd_model'?"));
  EXPECT_THAT(ErrorOf(kArraysHead + "workloads: [{kind: transformer_block, heads: 3, d_model: 64}]\n"),
              HasSubstr("heads = 3 does not divide d_model = 64"));
  EXPECT_THAT(ErrorOf(kArraysHead + "workloads: [{kind: collectives, sizes: [1 PB]}]\n"), HasSubstr("bad size '1 PB'"));
  EXPECT_THAT(ErrorOf(kArraysHead + "workloads: [{kind: mlp, name: a}, {kind: mlp, name: a}]\n"),
              HasSubstr("two workloads are named 'a'"));
}

TEST(Scenario, ParsesShardMapProgramsAndChecksTheirNames) {
  std::string head = kArraysHead + "arrays:\n  - {name: x, shape: [8, 16], spec: \"P('data', None)\"}\n";
  Scenario s = ParseScenario(head + R"y(workloads:
  - kind: shard_map
    inputs: [x]
    steps:
      - {name: y, op: mul, args: [x], scalar: 2}
      - {name: z, op: psum, args: [y], axes: [model]}
    outputs: [{name: z, spec: [data, null]}]
)y", "t.yaml");
  const ScenarioWorkload& w = s.workloads[0];
  ASSERT_EQ(w.shard_map_inputs.size(), 1u);
  EXPECT_EQ(w.shard_map_inputs[0].spec.ToString(), "P('data', None)");
  const auto& c = std::get<ShardMapConfig>(w.config);
  ASSERT_EQ(c.steps.size(), 2u);
  EXPECT_EQ(c.steps[0].scalar, 2.0);
  EXPECT_EQ(c.steps[1].axes, std::vector<std::string>{"model"});
  EXPECT_EQ(c.outputs[0].spec.ToString(), "P('data', None)");
  EXPECT_THAT(ErrorOf(head + "workloads:\n  - {kind: shard_map, inputs: [x], steps: [{name: y, op: mul, args: [xx], "
                             "scalar: 2}], outputs: [{name: y, spec: []}]}\n"),
              HasSubstr("'xx' is not an input or an earlier step (did you mean 'x'?)"));
  EXPECT_THAT(ErrorOf(head + "workloads:\n  - {kind: shard_map, inputs: [q], steps: [{name: y, op: neg, args: [x]}], "
                             "outputs: [{name: y, spec: []}]}\n"),
              HasSubstr("no array named 'q'"));
  EXPECT_THAT(ErrorOf(head + "workloads:\n  - {kind: shard_map, inputs: [x], steps: [{name: y, op: psumm, args: [x]}], "
                             "outputs: [{name: y, spec: []}]}\n"),
              HasSubstr("did you mean 'psum'?"));
}

TEST(Scenario, LoadsEveryShippedScenario) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(SPMDSIM_SOURCE_DIR) + "/scenarios")) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    Scenario s = LoadScenario(entry.path().string());
    EXPECT_FALSE(s.workloads.empty());
    ++count;
  }
  EXPECT_GE(count, 8);
  Scenario pod = LoadScenario(std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/tpu-v4-pod-transformer.yaml");
  EXPECT_EQ(pod.mesh.mesh.size(), 4096);
}

TEST(ParseByteSize, AcceptsUnitsOfOneThousandAndOneThousandTwentyFour) {
  EXPECT_EQ(ParseByteSize("4096"), 4096);
  EXPECT_EQ(ParseByteSize("4KiB"), 4096);
  EXPECT_EQ(ParseByteSize("1 MiB"), kMiB);
  EXPECT_EQ(ParseByteSize("2GB"), 2000000000);
  EXPECT_EQ(ParseByteSize("1.5e6"), 1500000);
  EXPECT_THROW(ParseByteSize("1.5"), Error);
  EXPECT_THROW(ParseByteSize("-1"), Error);
  EXPECT_THROW(ParseByteSize("1 XB"), Error);
  EXPECT_THROW(ParseByteSize("1e30"), Error);
}

TEST(DidYouMean, SuggestsOnlyCloseNames) {
  EXPECT_EQ(DidYouMean("slises", {"preset", "slices"}), "slices");
  EXPECT_EQ(DidYouMean("MODEL", {"model", "data"}), "model");
  EXPECT_EQ(DidYouMean("zzz", {"preset", "slices"}), std::nullopt);
}

// A workload without `kind` is reported at its own line and column (a YAML null made by yaml-cpp for an absent
// key has no place in the file: the parser must not locate the error there).
TEST(Scenario, AWorkloadWithoutKindIsLocated) {
  const std::string head = "topology: {preset: \"cpu:8\"}\nmesh: {axes: {d: 8}}\nworkloads:\n";
  EXPECT_THAT(ErrorOf(head + "  - name: x\n"), HasSubstr("t.yaml:4:5: workloads[0].kind: missing required key"));
  EXPECT_THAT(ErrorOf(head + "  - {name: x}\n"), HasSubstr("t.yaml:4:5: workloads[0].kind: missing required key"));
  EXPECT_THAT(ErrorOf(head + "  - {}\n"), HasSubstr("t.yaml:4:5: workloads[0].kind: missing required key"));
}

}  // namespace
}  // namespace spmdsim
