// Runs the built `spmdsim` binary (`spmdsim mesh ...`) and checks exit codes, stdout and stderr.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mesh/mesh_utils.h"
#include "tests/cli/run_spmdsim.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

using ::spmdsim::testing_cli::CommandResult;
CommandResult Spmdsim(const std::string& args) { return ::spmdsim::testing_cli::RunSpmdsim(args); }

int Lines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

TEST(MeshCommand, JsonMatchesCreateDeviceMeshOnSeveralPresets) {
  struct Case {
    std::string topology, mesh;
    std::vector<int64_t> shape;
  };
  const Case cases[] = {{"tpu-v4:2x2x4", "data=4,model=4", {4, 4}},
                        {"tpu-v3:4x4", "data=4,model=8", {4, 8}},
                        {"tpu-v5e:4x4", "x=16", {16}},
                        {"tpu-v5p:2x2x2", "x=2,y=2,z=2", {2, 2, 2}},
                        {"dgx-h100:2", "dp=2,tp=8", {2, 8}},
                        {"gpu:2x8", "a=4,b=4", {4, 4}},
                        {"cpu:8", "a=2,b=4", {2, 4}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.topology + " " + c.mesh);
    CommandResult run = Spmdsim("mesh --topology " + c.topology + " --mesh " + c.mesh + " --json");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.err, "");
    EXPECT_EQ(Lines(run.out), 1);  // exactly one object
    auto j = nlohmann::json::parse(run.out);
    Topology t = Topology::Parse(c.topology);
    DeviceArray expected = CreateDeviceMesh(c.shape, t);
    EXPECT_EQ(j["shape"].get<std::vector<int64_t>>(), c.shape);
    EXPECT_EQ(j["device_ids"].get<std::vector<int>>(), expected.ids());
    ASSERT_EQ(j["devices"].size(), expected.ids().size());
    const auto& first = j["devices"][1];
    const Device& d = t.device(expected.ids()[1]);
    EXPECT_EQ(first["id"].get<int>(), d.id);
    EXPECT_EQ(first["process_index"].get<int>(), d.process_index);
    EXPECT_EQ((first["chip_coords"].get<std::array<int, 3>>()), d.coords);
    EXPECT_EQ(j["topology"]["num_devices"].get<int>(), t.num_devices());
    EXPECT_EQ(j["topology"]["device_kind"].get<std::string>(), t.device_kind());
    EXPECT_GT(j["topology"]["links"].size(), 0u);
  }
}

TEST(MeshCommand, HybridJsonMatchesCreateHybridDeviceMesh) {
  CommandResult run = Spmdsim(
      "mesh --topology tpu-v4:2x2x2 --slices 2 --mesh data=1,model=8 --dcn data=2,model=1 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  Topology t = Topology::Parse("tpu-v4:2x2x2", 2);
  EXPECT_EQ(j["axis_names"], nlohmann::json({"data", "model"}));
  EXPECT_EQ(j["device_ids"].get<std::vector<int>>(), CreateHybridDeviceMesh({1, 8}, {2, 1}, t).ids());
  EXPECT_EQ(j["devices"][8]["slice_index"].get<int>(), 1);
  EXPECT_EQ(j["devices"][8]["coords"], nlohmann::json({1, 0}));
  EXPECT_EQ(j["topology"]["num_slices"].get<int>(), 2);
}

TEST(MeshCommand, WithoutMeshUsesOneAxisOverAllDevices) {
  auto j = nlohmann::json::parse(Spmdsim("mesh --topology tpu-v4:2x2x2 --json").out);
  EXPECT_EQ(j["axis_names"], nlohmann::json({"devices"}));
  EXPECT_EQ(j["device_ids"].get<std::vector<int>>(), CreateDeviceMesh({8}, Topology::Parse("tpu-v4:2x2x2")).ids());
  // Several slices: slices major.
  auto k = nlohmann::json::parse(Spmdsim("mesh --topology tpu-v5e:2x2 --slices 2 --json").out);
  EXPECT_EQ(k["shape"], nlohmann::json({8}));
  EXPECT_EQ(k["devices"][3]["slice_index"].get<int>(), 0);
  EXPECT_EQ(k["devices"][4]["slice_index"].get<int>(), 1);
}

TEST(MeshCommand, FlagsReachTheLibrary) {
  CommandResult split = Spmdsim("mesh --topology tpu-v4:4x4x4 --mesh a=2,b=32 --allow-split-physical-axes --json");
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_EQ(nlohmann::json::parse(split.out)["device_ids"].get<std::vector<int>>(),
            CreateDeviceMesh({2, 32}, Topology::Parse("tpu-v4:4x4x4"), std::nullopt,
                             {.allow_split_physical_axes = true})
                .ids());
  CommandResult contiguous = Spmdsim("mesh --topology tpu-v4:4x4x4 --mesh a=16,b=4 --contiguous-submeshes --json");
  ASSERT_EQ(contiguous.exit_code, 0) << contiguous.err;
  EXPECT_EQ(nlohmann::json::parse(contiguous.out)["device_ids"].get<std::vector<int>>(),
            CreateDeviceMesh({16, 4}, Topology::Parse("tpu-v4:4x4x4"), std::nullopt, {.contiguous_submeshes = true})
                .ids());
  CommandResult granules = Spmdsim("mesh --topology tpu-v4:4x4x4 --mesh x=4 --dcn x=16 --process-is-granule --json");
  ASSERT_EQ(granules.exit_code, 0) << granules.err;
  EXPECT_EQ(nlohmann::json::parse(granules.out)["device_ids"].get<std::vector<int>>(),
            CreateHybridDeviceMesh({4}, {16}, Topology::Parse("tpu-v4:4x4x4"), std::nullopt,
                                   {.process_is_granule = true})
                .ids());
}

TEST(MeshCommand, HumanOutputShowsTopologyGridAndDeviceTable) {
  CommandResult run = Spmdsim("mesh --topology tpu-v4:2x2x2 --mesh x=2,y=2,z=2");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("topology: tpu-v4:2x2x2"));
  EXPECT_THAT(run.out, HasSubstr("45 GB/s one-way"));
  EXPECT_THAT(run.out, HasSubstr("[x=1]"));  // a rank-3 mesh prints 2-D slices labelled by x
  EXPECT_THAT(run.out, HasSubstr("mesh coords"));
  EXPECT_THAT(run.out, HasSubstr("(1, 1, 1)"));
}

TEST(MeshCommand, LargeMeshesAreSummarisedUnlessFull) {
  CommandResult brief = Spmdsim("mesh --topology tpu-v4:8x8x16 --mesh a=64,b=16");
  ASSERT_EQ(brief.exit_code, 0) << brief.err;
  EXPECT_THAT(brief.out, HasSubstr("--full prints all"));
  CommandResult full = Spmdsim("mesh --topology tpu-v4:8x8x16 --mesh a=64,b=16 --full");
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_GT(Lines(full.out), 1024 + 64);
  EXPECT_LT(Lines(brief.out), 100);
}

// Bad input: non-zero exit, nothing on stdout, one line on stderr naming the problem.
TEST(MeshCommand, BadInputExitsNonZeroWithOneLineNamingTheProblem) {
  struct Case {
    std::string args, must_mention;
  };
  const Case cases[] = {
      {"mesh --topology tpu-v9:2x2", "tpu-v9"},
      {"mesh --topology tpu-v4:2x2x4 --mesh a=4,b", "--mesh"},
      {"mesh --topology tpu-v4:2x2x4 --mesh a=4,b=3",
       "Number of devices 16 must equal the product of mesh_shape (4, 3)"},
      {"mesh --topology tpu-v4:4x4x4 --mesh a=2,b=32", "--allow-split-physical-axes"},
      {"mesh --topology tpu-v4:2x2x2 --slices 2 --mesh a=1,b=8 --dcn b=1,a=2", "('b', 'a')"},
      {"mesh --topology tpu-v4:2x2x2 --slices 2 --mesh a=4 --dcn a=3", "Number of slices 2"},
      {"mesh --topology cpu:8 --dcn a=2", "--dcn needs --mesh"},
      {"mesh --topology cpu:8 --mesh a=8 --process-is-granule", "--process-is-granule"},
      {"mesh --topology tpu-v4:2x2x2 --slices 2 --mesh a=2,b=4 --dcn a=2,b=1 --contiguous-submeshes",
       "--contiguous-submeshes"},
      {"mesh --topology tpu-v4:4x8x8 --mesh a=128,b=2 --contiguous-submeshes", "Available mesh_shapes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    CommandResult run = Spmdsim(c.args);
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(Lines(run.err), 1) << run.err;
    EXPECT_THAT(run.err, StartsWith("spmdsim mesh: "));
    EXPECT_THAT(run.err, HasSubstr(c.must_mention));
  }
}

TEST(MeshCommand, MissingTopologyIsAUsageError) {
  CommandResult run = Spmdsim("mesh --mesh a=4");
  EXPECT_EQ(run.exit_code, 2);  // usage errors exit 2 (cli/commands.h)
  EXPECT_THAT(run.err, HasSubstr("--topology"));
}

TEST(MeshCommand, UnknownFlagIsAUsageErrorAndHelpSucceeds) {
  EXPECT_EQ(Spmdsim("mesh --topology cpu:8 --no-such-flag").exit_code, 2);
  EXPECT_EQ(Spmdsim("mesh --help").exit_code, 0);
}

TEST(MeshCommand, TopologyCanBeAScenarioFileWithItsMesh) {
  const std::string scenario = std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/cpu8-quick.yaml";
  CommandResult run = Spmdsim("mesh --json --topology " + scenario);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["axis_names"], nlohmann::json({"data", "model"}));
  EXPECT_EQ(j["shape"], nlohmann::json({2, 4}));
  // --mesh overrides the scenario's mesh but keeps its topology.
  CommandResult flat = Spmdsim("mesh --json --mesh all=8 --topology " + scenario);
  ASSERT_EQ(flat.exit_code, 0) << flat.err;
  EXPECT_EQ(nlohmann::json::parse(flat.out)["shape"], nlohmann::json({8}));
  // A missing scenario file is named in the error.
  CommandResult missing = Spmdsim("mesh --topology no/such/file.yaml");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("no/such/file.yaml"));
}

}  // namespace
}  // namespace spmdsim
