// Tests of mesh/t5x_mesh.h.
//
// Two kinds of expectation:
//  - ports of t5x/partitioning_test.py (bounds_from_last_device, get_coords, default_mesh, LocalChunker);
//  - testdata/t5x_mesh.json: facts computed by running t5x's own get_mesh, default_mesh, get_gpu_mesh,
//    get_cpu_mesh and LocalChunker (google-research/t5x cc342d41, t5x/partitioning.py, with JAX's
//    Mesh.local_mesh and create_hybrid_device_mesh from jax-ml/jax) under /usr/bin/python3 with jax.devices()
//    / jax.local_devices() / jax.process_index() stubbed by fake devices numbered like our Topology presets.
//    The file also lists those fake devices, and the first test checks our topologies match them.
#include "mesh/t5x_mesh.h"

#include <fstream>
#include <map>
#include <random>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim::t5x {
namespace {

using ::nlohmann::json;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using Axes = std::vector<std::string>;

const json& TestData() {
  static const json data = [] {
    std::ifstream in(SPMDSIM_T5X_TESTDATA);
    if (!in) throw std::runtime_error("cannot open " SPMDSIM_T5X_TESTDATA);
    return json::parse(in);
  }();
  return data;
}

std::shared_ptr<const Topology> Topo(const std::string& text) {
  return std::make_shared<const Topology>(Topology::Parse(text));
}

// Runs `f` and returns the spmdsim::Error it throws; fails the test when it throws nothing.
template <typename F>
Error Catch(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an spmdsim::Error";
  return Error(ErrorCode::kInternal, "nothing thrown");
}

std::vector<int> Ids(const json& j) { return j.get<std::vector<int>>(); }
std::vector<int64_t> Shape(const json& j) { return j.get<std::vector<int64_t>>(); }

std::vector<ChunkMeshAxis> ChunkAxes(const json& j) {
  std::vector<ChunkMeshAxis> out;
  for (const json& a : j) {
    if (a.is_null()) {
      out.emplace_back(std::monostate{});
    } else {
      out.emplace_back(a.get<std::string>());
    }
  }
  return out;
}

// Compares t5x's error (type and message) with ours: same kind, t5x's wording at the start of ours.
void ExpectSameError(const json& expected, const Error& actual, const std::string& context) {
  EXPECT_EQ(ErrorKindName(actual.kind()), expected["error_type"].get<std::string>())
      << context << ": " << actual.what();
  EXPECT_THAT(actual.message(), StartsWith(expected["error_message"].get<std::string>())) << context;
}

// Checks a LocalChunker against t5x's facts for one host (see gen's chunker_facts).
void ExpectChunkerMatches(const Mesh& mesh, int host, const json& facts, const std::string& context) {
  const json& data = TestData();
  if (facts.contains("error_type")) {
    Error e = Catch([&] { LocalChunker(mesh, host); });
    ExpectSameError(facts, e, context);
    return;
  }
  LocalChunker chunker(mesh, host);
  EXPECT_EQ(chunker.local_mesh().shape(), Shape(facts["local_shape"])) << context;
  if (!facts["local_ids"].is_null()) {
    EXPECT_EQ(chunker.local_mesh().device_ids(), Ids(facts["local_ids"])) << context;
  }
  EXPECT_EQ(chunker.num_chunks(), Shape(facts["num_chunks"])) << context;
  EXPECT_EQ(chunker.chunk_ids(), Shape(facts["chunk_ids"])) << context;
  const json& queries = data["chunk_queries"];
  for (size_t q = 0; q < queries.size(); ++q) {
    LocalChunkInfo info =
        chunker.GetLocalChunkInfo(Shape(queries[q]["global_shape"]), ChunkAxes(queries[q]["mesh_axes"]));
    std::vector<int64_t> flat = {info.replica_id};
    for (const ChunkSlice& s : info.slice) {
      flat.push_back(s.start.value_or(-1));
      flat.push_back(s.stop.value_or(-1));
    }
    EXPECT_EQ(flat, Shape(facts["infos"][q])) << context << " query " << q;
  }
  const json& id_queries = data["id_queries"];
  for (size_t q = 0; q < id_queries.size(); ++q) {
    Axes axes = id_queries[q].get<Axes>();
    EXPECT_EQ(chunker.GetShardId(axes), facts["shard_ids"][q].get<int64_t>()) << context << " shard " << q;
    EXPECT_EQ(chunker.GetReplicaId(axes), facts["replica_ids"][q].get<int64_t>()) << context << " replica " << q;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The fake devices fed to t5x are our topologies' devices.

TEST(T5xTestData, DescribesTheDevicesOfOurTopologies) {
  for (const auto& [text, facts] : TestData()["topologies"].items()) {
    Topology topology = Topology::Parse(text);
    EXPECT_EQ(topology.device_kind(), facts["device_kind"].get<std::string>()) << text;
    ASSERT_EQ(topology.num_devices(), static_cast<int>(facts["devices"].size())) << text;
    for (const json& row : facts["devices"]) {
      const Device& d = topology.device(row[0].get<int>());
      EXPECT_EQ(d.process_index, row[1].get<int>()) << text << " device " << d.id;
      if (topology.platform() == Platform::kTpu) {
        EXPECT_THAT(d.coords, ElementsAre(row[2].get<int>(), row[3].get<int>(), row[4].get<int>())) << text;
        EXPECT_EQ(d.core_on_chip, row[5].get<int>()) << text << " device " << d.id;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Ports of t5x/partitioning_test.py.

TEST(BoundsFromLastDevice, IsTheLastTpuDevicesCoordinatesPlusOne) {
  // t5x: a mock device at (3, 3, 3) core 1 -> (4, 4, 4, 2).
  auto topology = Topo("tpu-v3:4x4");
  Device last;
  last.coords = {3, 3, 3};
  last.core_on_chip = 1;
  EXPECT_THAT(BoundsFromLastDevice(*topology, last), ElementsAre(4, 4, 4, 2));
  EXPECT_THAT(BoundsFromLastDevice(*topology, topology->devices().back()), ElementsAre(4, 4, 1, 2));
}

TEST(BoundsFromLastDevice, IsHostsByLocalDevicesOffTpu) {
  // t5x: process_count 1, local_device_count 4 -> (1, 4), whatever the device.
  auto cpu = Topo("cpu:4");
  EXPECT_THAT(BoundsFromLastDevice(*cpu, cpu->device(0)), ElementsAre(1, 4));
  auto gpu = Topo("gpu:2x8");
  EXPECT_THAT(BoundsFromLastDevice(*gpu, gpu->device(3)), ElementsAre(2, 8));
}

TEST(GetCoords, AppendsTheCoreOnTpuAndIsHostAndLocalIndexElsewhere) {
  // t5x: a TPU device at (1, 0, 1) core 1 -> (1, 0, 1, 1); a device of process 1 with id 9 when there are 8
  // local devices -> (1, 1).
  auto v3 = Topo("tpu-v3:2x2");
  EXPECT_THAT(GetCoords(*v3, v3->device(3)), ElementsAre(1, 0, 0, 1));
  auto v4 = Topo("tpu-v4:2x2x4");
  EXPECT_THAT(GetCoords(*v4, v4->device(5)), ElementsAre(1, 0, 1, 0));
  auto gpu = Topo("gpu:2x8");
  EXPECT_THAT(GetCoords(*gpu, gpu->device(9)), ElementsAre(1, 1));
}

TEST(DefaultMesh, OnTpuV3With4PartitionsIsData8Model4WithHostLocalRows) {
  // t5x test_default_mesh: TPU v3 4x4 (32 cores), default_mesh(4).
  auto topology = Topo("tpu-v3:4x4");
  Mesh mesh = DefaultMesh(4, std::nullopt, topology);
  EXPECT_EQ(mesh.axis_names(), (Axes{"data", "model"}));
  EXPECT_THAT(mesh.shape(), ElementsAre(8, 4));
  EXPECT_EQ(mesh.size(), 32);
  for (int host = 0; host < 4; ++host) {
    Mesh local = LocalMesh(mesh, host);
    EXPECT_EQ(local.axis_names(), (Axes{"data", "model"}));
    EXPECT_THAT(local.shape(), ElementsAre(2, 4));
  }
  // Host 0: chips (0,0), (1,0) then (0,1), (1,1), both cores of each.
  EXPECT_THAT(LocalMesh(mesh, 0).device_ids(), ElementsAre(0, 1, 2, 3, 8, 9, 10, 11));
}

TEST(LocalChunker, OnTpuV3With4PartitionsGivesEachHostOneDataChunk) {
  // t5x test_local_chunker.
  auto topology = Topo("tpu-v3:4x4");
  Mesh mesh = DefaultMesh(4, std::nullopt, topology);
  LocalChunker host0(mesh, 0);
  EXPECT_EQ(host0.num_chunks("data"), 4);
  EXPECT_EQ(host0.num_chunks("model"), 1);
  // The order in which hosts first appear down the 'data' axis.
  std::vector<int> host_order;
  for (int64_t row = 0; row < mesh.shape()[0]; ++row) {
    int process = topology->device(mesh.DeviceAt(row * mesh.shape()[1])).process_index;
    if (std::find(host_order.begin(), host_order.end(), process) == host_order.end()) host_order.push_back(process);
  }
  ASSERT_EQ(host_order.size(), 4u);
  for (int host = 0; host < 4; ++host) {
    LocalChunker chunker(mesh, host);
    int64_t expected = std::find(host_order.begin(), host_order.end(), host) - host_order.begin();
    EXPECT_EQ(chunker.chunk_id("data"), expected);
    EXPECT_EQ(chunker.chunk_id("model"), 0);
    LocalChunkInfo both = chunker.GetLocalChunkInfo({128, 16}, {"data", "model"});
    EXPECT_EQ(both.replica_id, 0);
    EXPECT_THAT(both.slice, ElementsAre(ChunkSlice{32 * expected, 32 * (expected + 1)}, ChunkSlice{0, 16}));
    LocalChunkInfo replicated = chunker.GetLocalChunkInfo({128, 16}, {std::monostate{}, "model"});
    EXPECT_EQ(replicated.replica_id, expected);
    EXPECT_THAT(replicated.slice, ElementsAre(ChunkSlice{}, ChunkSlice{0, 16}));
  }
  // The numbers printed in the header comment.
  LocalChunker host1(mesh, 1);
  EXPECT_EQ(host1.GetLocalChunkInfo({128, 16}, {"data", "model"}).ToString(),
            "LocalChunkInfo(slice=(slice(64, 96, None), slice(0, 16, None)), replica_id=0)");
  EXPECT_EQ(host1.GetShardId({"data"}), 2);
  EXPECT_EQ(host1.GetReplicaId({"data"}), 0);
  EXPECT_THAT(host1.local_mesh().device_ids(), ElementsAre(4, 5, 6, 7, 12, 13, 14, 15));
}

// ---------------------------------------------------------------------------------------------------------
// Against t5x run on the same devices.

TEST(GetMesh, MatchesT5xOnEveryRecordedTopologyAndSubmesh) {
  int checked = 0;
  for (const json& c : TestData()["get_mesh"]) {
    const std::string topology_text = c["topology"];
    HardwareMesh submesh = c["submesh"].get<HardwareMesh>();
    const bool tile = c["tile_by_host_if_needed"];
    const int host = c["host"];
    const std::string context = fmt::format("{} submesh {} tile {} host {}", topology_text, PyTuple(submesh),
                                            tile, host);
    auto topology = Topo(topology_text);
    if (c.contains("error_type")) {
      Error e = Catch([&] { GetMesh(submesh, topology, host, tile); });
      ExpectSameError(c, e, context);
      ++checked;
      continue;
    }
    Mesh mesh = GetMesh(submesh, topology, host, tile);
    EXPECT_EQ(mesh.axis_names(), (Axes{"data", "model"})) << context;
    EXPECT_EQ(mesh.shape(), Shape(c["shape"])) << context;
    EXPECT_EQ(mesh.device_ids(), Ids(c["ids"])) << context;
    EXPECT_EQ(mesh.topology(), topology.get());
    if (c.contains("chunker")) {
      for (int h = 0; h < static_cast<int>(c["chunker"].size()); ++h) {
        ExpectChunkerMatches(mesh, h, c["chunker"][h], context + fmt::format(" chunker host {}", h));
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

TEST(DefaultMesh, MatchesT5xTablesOnEveryRecordedTopology) {
  for (const json& c : TestData()["default_mesh"]) {
    const std::string topology_text = c["topology"];
    const int num_partitions = c["num_partitions"];
    std::optional<HardwareMesh> submesh;
    if (c.contains("submesh")) submesh = c["submesh"].get<HardwareMesh>();
    const std::string context = fmt::format("{} num_partitions {}", topology_text, num_partitions);
    auto topology = Topo(topology_text);
    if (c.contains("error_type")) {
      Error e = Catch([&] { DefaultMesh(num_partitions, submesh, topology); });
      ExpectSameError(c, e, context);
      continue;
    }
    Mesh mesh = DefaultMesh(num_partitions, submesh, topology);
    EXPECT_EQ(mesh.shape(), Shape(c["shape"])) << context;
    if (!c["ids"].is_null()) {
      EXPECT_EQ(mesh.device_ids(), Ids(c["ids"])) << context;
    }
    std::vector<int> first(mesh.device_ids().begin(),
                           mesh.device_ids().begin() + std::min<int64_t>(64, mesh.size()));
    EXPECT_EQ(first, Ids(c["first_ids"])) << context;
  }
}

TEST(LocalChunker, MatchesT5xForEveryHostOfTheDefaultTpuV3Mesh) {
  const json& c = TestData()["default_mesh_chunker"];
  Mesh mesh = DefaultMesh(c["num_partitions"], std::nullopt, Topo(c["topology"]));
  for (int h = 0; h < static_cast<int>(c["chunker"].size()); ++h) {
    ExpectChunkerMatches(mesh, h, c["chunker"][h], fmt::format("default mesh host {}", h));
  }
}

TEST(GetGpuMesh, MatchesT5xOnEveryRecordedTopology) {
  for (const json& c : TestData()["gpu_mesh"]) {
    const std::string topology_text = c["topology"];
    const int num_partitions = c["num_partitions"];
    const std::string context = fmt::format("{} num_partitions {}", topology_text, num_partitions);
    auto topology = Topo(topology_text);
    if (c.contains("error_type")) {
      Error e = Catch([&] { GetGpuMesh(num_partitions, topology); });
      ExpectSameError(c, e, context);
      continue;
    }
    Mesh mesh = GetGpuMesh(num_partitions, topology);
    EXPECT_EQ(mesh.axis_names(), (Axes{"data", "model"})) << context;
    EXPECT_EQ(mesh.shape(), Shape(c["shape"])) << context;
    EXPECT_EQ(mesh.device_ids(), Ids(c["ids"])) << context;
  }
}

TEST(GetCpuMesh, MatchesT5xWhereT5xFillsEveryCell) {
  for (const json& c : TestData()["cpu_mesh"]) {
    const std::string topology_text = c["topology"];
    std::vector<int> ids = Ids(c["ids"]);
    auto topology = Topo(topology_text);
    if (std::find(ids.begin(), ids.end(), -1) != ids.end()) {
      // t5x leaves None in the mesh here; we refuse and say why.
      Error e = Catch([&] { GetCpuMesh(topology); });
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << topology_text;
      EXPECT_THAT(e.message(), HasSubstr("both land on")) << topology_text;
      continue;
    }
    Mesh mesh = GetCpuMesh(topology);
    EXPECT_EQ(mesh.axis_names(), (Axes{"data", "model"}));
    EXPECT_EQ(mesh.shape(), Shape(c["shape"])) << topology_text;
    EXPECT_EQ(mesh.device_ids(), ids) << topology_text;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Documented examples and steps.

TEST(GetMesh, ReportsTheZMajorSwapAndHostTiling) {
  GetMeshSteps steps;
  GetMesh({2, 2, 1, 1}, Topo("tpu-v4:4x4x4"), 0, true, &steps);
  EXPECT_THAT(steps.global_hardware_mesh, ElementsAre(4, 4, 4, 1));
  EXPECT_THAT(steps.local_hardware_mesh, ElementsAre(2, 2, 1, 1));
  EXPECT_EQ(steps.z_major_swap, "");
  EXPECT_TRUE(steps.tiled_by_host);

  GetMesh({4, 1, 1, 1}, Topo("tpu-v4:4x4x4"), 0, true, &steps);
  EXPECT_EQ(steps.z_major_swap, "yz");
  EXPECT_THAT(steps.submesh_after_swap, ElementsAre(4, 1, 1, 1));
  EXPECT_FALSE(steps.tiled_by_host);

  GetMesh({1, 4, 1, 1}, Topo("tpu-v4:4x4x4"), 0, true, &steps);
  EXPECT_EQ(steps.z_major_swap, "xz");
  EXPECT_FALSE(steps.tiled_by_host);

  GetMesh({4, 1, 4, 1}, Topo("tpu-v4:4x4x4"), 0, true, &steps);
  EXPECT_EQ(steps.z_major_swap, "xz");
  EXPECT_THAT(steps.submesh_after_swap, ElementsAre(4, 1, 4, 1));

  GetMesh({2, 2, 1, 1}, Topo("tpu-v4:4x4x4"), 0, false, &steps);
  EXPECT_FALSE(steps.tiled_by_host);
}

TEST(GetMesh, OnGpuPutsTheModelAxisInsideHosts) {
  // gpu:2x8: hardware mesh (hosts, devices) = (2, 8); submesh (1, 4): model = 4 GPUs of one host.
  Mesh mesh = GetMesh({1, 4}, Topo("gpu:2x8"));
  EXPECT_THAT(mesh.shape(), ElementsAre(4, 4));
  EXPECT_THAT(mesh.device_ids(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

TEST(ChunkSlice, PrintsLikePython) {
  EXPECT_EQ(ChunkSlice{}.ToString(), "slice(None, None, None)");
  EXPECT_EQ((ChunkSlice{0, 32}).ToString(), "slice(0, 32, None)");
  LocalChunkInfo info{{ChunkSlice{}}, 3};
  EXPECT_EQ(info.ToString(), "LocalChunkInfo(slice=(slice(None, None, None),), replica_id=3)");
}

// ---------------------------------------------------------------------------------------------------------
// Errors.

TEST(GetMesh, RejectsASubmeshThatDoesNotDivideAndListsTheDivisors) {
  Error e = Catch([] { GetMesh({3, 1, 1, 1}, Topo("tpu-v3:4x4")); });
  EXPECT_EQ(e.kind(), ErrorKind::kAssertionError);
  EXPECT_THAT(e.message(), HasSubstr("global device mesh (4, 4, 1, 2)"));
  EXPECT_THAT(e.message(), HasSubstr("x in {1, 2, 4}, y in {1, 2, 4}, z in {1}, cores in {1, 2}"));
}

TEST(GetMesh, RejectsASubmeshOfTheWrongRankOrWithEmptyDimensions) {
  Error rank = Catch([] { GetMesh({2, 2}, Topo("tpu-v4:2x2x4")); });
  EXPECT_EQ(rank.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(rank.message(), HasSubstr("4 entries (x, y, z, cores)"));
  Error gpu_rank = Catch([] { GetMesh({1, 1, 1, 1}, Topo("gpu:2x8")); });
  EXPECT_THAT(gpu_rank.message(), HasSubstr("2 entries (hosts, devices per host)"));
  Error zero = Catch([] { GetMesh({0, 1, 1, 1}, Topo("tpu-v4:2x2x4")); });
  EXPECT_THAT(zero.message(), HasSubstr("x must be >= 1, got 0"));
}

TEST(GetMesh, RefusesZMajorSwapWithoutEveryCore) {
  Error e = Catch([] { GetMesh({4, 1, 1, 1}, Topo("tpu-v3:4x4")); });
  EXPECT_EQ(e.kind(), ErrorKind::kAssertionError);
  EXPECT_THAT(e.message(), StartsWith("(1, 2)"));
  EXPECT_THAT(e.message(), HasSubstr("cores must be 2"));
  // With both cores the same plane works.
  EXPECT_THAT(GetMesh({4, 1, 1, 2}, Topo("tpu-v3:4x4")).shape(), ElementsAre(4, 8));
}

TEST(GetMesh, HostTilingNeedsFactorsOrMultiplesOfTheHostBlock) {
  // tpu-v4:6x2x1 has hosts of 2x2 chips; a submesh 3 chips wide neither divides nor is a multiple of 2.
  Error e = Catch([] { GetMesh({3, 1, 1, 1}, Topo("tpu-v4:6x2x1")); });
  EXPECT_EQ(e.kind(), ErrorKind::kAssertionError);
  EXPECT_THAT(e.message(), HasSubstr("x = 3 against 2 per host"));
  EXPECT_THAT(e.message(), HasSubstr("valid x here: 1, 2, 6"));
  EXPECT_THAT(GetMesh({3, 1, 1, 1}, Topo("tpu-v4:6x2x1"), 0, false).shape(), ElementsAre(4, 3));
}

TEST(GetMesh, RejectsLocalBoundsThatDoNotDivideTheGlobalMesh) {
  // Host 1 of tpu-v4:6x2x1 holds x = 2..3: its bounds (4, 2, 1, 1) do not divide (6, 2, 1, 1).
  Error e = Catch([] { GetMesh({2, 1, 1, 1}, Topo("tpu-v4:6x2x1"), 1); });
  EXPECT_EQ(e.kind(), ErrorKind::kAssertionError);
  EXPECT_THAT(e.message(), HasSubstr("(4, 2, 1, 1) of host 1"));
}

TEST(GetMesh, RejectsAHostWithoutDevicesAndSeveralSlices) {
  Error host = Catch([] { GetMesh({1, 1, 1, 1}, Topo("tpu-v4:2x2x4"), 4); });
  EXPECT_EQ(host.code(), ErrorCode::kOutOfRange);
  EXPECT_THAT(host.message(), HasSubstr("processes 0..3"));
  auto slices = std::make_shared<const Topology>(Topology::Parse("tpu-v4:2x2x2", 2));
  Error e = Catch([&] { GetMesh({1, 1, 1, 1}, slices); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.message(), HasSubstr("2 slices"));
  Error none = Catch([] { GetMesh({1, 1, 1, 1}, nullptr); });
  EXPECT_EQ(none.code(), ErrorCode::kInvalidArgument);
}

TEST(DefaultSubmesh, FollowsT5xTables) {
  EXPECT_THAT(DefaultSubmesh(8, *Topo("tpu-v3:4x4")), ElementsAre(2, 2, 1, 2));
  EXPECT_THAT(DefaultSubmesh(16, *Topo("tpu-v2:4x4")), ElementsAre(4, 2, 1, 2));
  EXPECT_THAT(DefaultSubmesh(4, *Topo("tpu-v4:4x4x4")), ElementsAre(4, 1, 1, 1));
  EXPECT_THAT(DefaultSubmesh(4, *Topo("tpu-v4:2x2x4")), ElementsAre(2, 2, 1, 1));
  EXPECT_THAT(DefaultSubmesh(8, *Topo("tpu-v4:4x4x8")), ElementsAre(1, 1, 8, 1));
  EXPECT_THAT(DefaultSubmesh(16, *Topo("tpu-v4:2x2x16")), ElementsAre(1, 1, 16, 1));
  EXPECT_THAT(DefaultSubmesh(16, *Topo("tpu-v4:8x8x8")), ElementsAre(8, 2, 1, 1));
  EXPECT_THAT(DefaultSubmesh(16, *Topo("tpu-v4:4x4x4")), ElementsAre(4, 4, 1, 1));
  EXPECT_THAT(DefaultSubmesh(16, *Topo("tpu-v4:2x2x4")), ElementsAre(2, 2, 4, 1));
}

TEST(DefaultSubmesh, HasNoDefaultForOtherKindsOrCountsAndSaysWhichExist) {
  Error e = Catch([] { DefaultSubmesh(4, *Topo("tpu-v5e:4x4")); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_THAT(e.message(), HasSubstr("Device kind: TPU v5 lite"));
  EXPECT_THAT(e.message(), HasSubstr("Bounds: (4, 4, 1, 1)"));
  EXPECT_THAT(e.message(), HasSubstr("num_partitions 1, 2, 4, 8 or 16"));
  Error count = Catch([] { DefaultSubmesh(3, *Topo("tpu-v3:4x4")); });
  EXPECT_THAT(count.message(), HasSubstr("Num partitions: 3"));
}

TEST(DefaultMesh, UsesAGivenSubmeshWhateverTheCount) {
  auto topology = Topo("tpu-v3:4x4");
  EXPECT_EQ(DefaultMesh(7, HardwareMesh{1, 1, 1, 2}, topology), GetMesh({1, 1, 1, 2}, topology));
  // An empty submesh is "none", as in Python.
  EXPECT_EQ(DefaultMesh(4, HardwareMesh{}, topology), GetMesh({2, 1, 1, 2}, topology));
  EXPECT_EQ(DefaultMesh(4, std::nullopt, Topo("cpu:8")).shape(), (std::vector<int64_t>{1, 8}));
}

TEST(DefaultMesh, WithIciAndDcnShapesIsTheHybridMeshOverSlices) {
  // Values from mesh/mesh_utils.h's example (computed there by JAX's create_hybrid_device_mesh).
  auto topology = std::make_shared<const Topology>(Topology::Parse("tpu-v4:2x2x2", 2));
  Mesh mesh = DefaultMesh(1, HardwareMesh{2, 2, 2, 1}, topology, std::vector<int64_t>{1, 1, 8},
                          std::vector<int64_t>{2, 1, 1});
  EXPECT_EQ(mesh.axis_names(), (Axes{"replica", "data", "model"}));
  EXPECT_THAT(mesh.shape(), ElementsAre(2, 1, 8));
  EXPECT_THAT(mesh.device_ids(), ElementsAre(0, 4, 2, 6, 1, 5, 3, 7, 8, 12, 10, 14, 9, 13, 11, 15));
  // Only one of the two shapes: ignored, as in t5x (and a multi-slice get_mesh is refused).
  EXPECT_THROW(DefaultMesh(1, std::nullopt, topology, std::vector<int64_t>{1, 1, 8}), Error);
  Error rank = Catch([&] {
    DefaultMesh(1, std::nullopt, topology, std::vector<int64_t>{1, 8}, std::vector<int64_t>{2, 1});
  });
  EXPECT_THAT(rank.message(), HasSubstr("3 entries each"));
  Error granules = Catch([&] {
    DefaultMesh(1, std::nullopt, topology, std::vector<int64_t>{1, 1, 8}, std::vector<int64_t>{4, 1, 1});
  });
  EXPECT_EQ(granules.kind(), ErrorKind::kValueError);
}

TEST(GetGpuMesh, RejectsCountsThatAreNeitherFactorsNorMultiplesOfTheHost) {
  Error e = Catch([] { GetGpuMesh(3, Topo("gpu:2x8")); });
  EXPECT_EQ(e.kind(), ErrorKind::kAssertionError);
  EXPECT_THAT(e.message(), HasSubstr("local devices"));
  Error too_many = Catch([] { GetGpuMesh(32, Topo("gpu:2x8")); });
  EXPECT_EQ(too_many.kind(), ErrorKind::kValueError);
  Error zero = Catch([] { GetGpuMesh(0, Topo("gpu:2x8")); });
  EXPECT_EQ(zero.code(), ErrorCode::kInvalidArgument);
}

TEST(LocalMesh, RejectsHostsWhoseDevicesAreNotABoxAndHostsWithoutDevices) {
  // tpu-v4:4x4x4, submesh (2, 2, 4, 1) without host tiling: t5x records that host 0's devices are not a box.
  auto topology = Topo("tpu-v4:4x4x4");
  Mesh mesh = GetMesh({2, 2, 4, 1}, topology, 0, false);
  Error e = Catch([&] { LocalMesh(mesh, 0); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_THAT(e.message(), HasSubstr("contiguous subcube"));
  EXPECT_THAT(e.message(), HasSubstr("of process"));
  Error none = Catch([&] { LocalMesh(mesh, 16); });
  EXPECT_EQ(none.code(), ErrorCode::kOutOfRange);
  Error no_topology = Catch([] { LocalMesh(Mesh(DeviceArray({2}, {0, 1}), {"x"}), 0); });
  EXPECT_EQ(no_topology.code(), ErrorCode::kInvalidArgument);
}

TEST(LocalChunker, RejectsUnknownAxesAndTuplesOfAxes) {
  LocalChunker chunker(DefaultMesh(4, std::nullopt, Topo("tpu-v3:4x4")), 0);
  Error key = Catch([&] { chunker.GetLocalChunkInfo({8, 8}, {"batch", std::monostate{}}); });
  EXPECT_EQ(key.kind(), ErrorKind::kKeyError);
  EXPECT_THAT(key.message(), HasSubstr("('data', 'model')"));
  EXPECT_EQ(Catch([&] { chunker.GetShardId({"batch"}); }).kind(), ErrorKind::kKeyError);
  EXPECT_EQ(Catch([&] { chunker.num_chunks("batch"); }).kind(), ErrorKind::kKeyError);
  EXPECT_EQ(Catch([&] { chunker.chunk_id("batch"); }).kind(), ErrorKind::kKeyError);
  Error tuple = Catch([&] { chunker.GetLocalChunkInfo({8, 8}, {Axes{"data", "model"}, std::monostate{}}); });
  EXPECT_EQ(tuple.kind(), ErrorKind::kNotImplementedError);
  EXPECT_EQ(tuple.code(), ErrorCode::kUnimplemented);
  // A one-name tuple is still a tuple to t5x.
  EXPECT_EQ(Catch([&] { chunker.GetLocalChunkInfo({8}, {Axes{"data"}}); }).kind(), ErrorKind::kNotImplementedError);
  Error negative = Catch([&] { chunker.GetLocalChunkInfo({-8}, {"data"}); });
  EXPECT_EQ(negative.code(), ErrorCode::kInvalidArgument);
}

TEST(LocalChunker, TreatsEmptyNamesAsNoneAndZipsToTheShorterList) {
  LocalChunker chunker(DefaultMesh(4, std::nullopt, Topo("tpu-v3:4x4")), 1);
  LocalChunkInfo empty = chunker.GetLocalChunkInfo({128, 16}, {std::string(), Axes{}});
  EXPECT_THAT(empty.slice, ElementsAre(ChunkSlice{}, ChunkSlice{}));
  EXPECT_EQ(empty.replica_id, 2);
  LocalChunkInfo short_axes = chunker.GetLocalChunkInfo({128, 16, 4}, {"data"});
  EXPECT_THAT(short_axes.slice, ElementsAre(ChunkSlice{64, 96}, ChunkSlice{}, ChunkSlice{}));
  LocalChunkInfo long_axes = chunker.GetLocalChunkInfo({128}, {std::monostate{}, "model", "data"});
  EXPECT_THAT(long_axes.slice, ElementsAre(ChunkSlice{}));
  EXPECT_EQ(long_axes.replica_id, 2);
  // get_replica_id ignores names the mesh lacks, as t5x does.
  EXPECT_EQ(chunker.GetReplicaId({"batch"}), 2);
}

TEST(GetCpuMesh, RefusesTopologiesWhereTwoDevicesShareACell) {
  Error e = Catch([] { GetCpuMesh(Topo("tpu-v3:4x4")); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.message(), HasSubstr("devices 0 and 8 both land on (0, 0)"));
}

TEST(T5xMesh, EveryBuilderRejectsAMissingTopology) {
  EXPECT_EQ(Catch([] { GetCpuMesh(nullptr); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(Catch([] { GetGpuMesh(2, nullptr); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(Catch([] { DefaultMesh(2, std::nullopt, nullptr); }).code(), ErrorCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------------------
// Properties over random TPU topologies and submeshes.

TEST(GetMesh, EveryModelRowIsOneSubmeshShapedBoxAndHostsGetDistinctChunks) {
  std::mt19937 rng(20261122);
  const std::vector<std::string> topologies = {"tpu-v4:2x2x4", "tpu-v4:4x4x4", "tpu-v4:4x2x8", "tpu-v3:4x4",
                                               "tpu-v3:8x4",   "tpu-v2:4x2",   "tpu-v5e:8x4", "tpu-v5p:2x4x2",
                                               "tpu-v6e:4x8",  "tpu-v4:4x4x2"};
  int built = 0, chunked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto topology = Topo(topologies[rng() % topologies.size()]);
    HardwareMesh bounds = BoundsFromLastDevice(*topology, topology->devices().back());
    HardwareMesh submesh;
    for (int b : bounds) {
      std::vector<int> divisors;
      for (int d = 1; d <= b; ++d) {
        if (b % d == 0) divisors.push_back(d);
      }
      submesh.push_back(divisors[rng() % divisors.size()]);
    }
    const bool tile = rng() % 2 == 0;
    Mesh mesh;
    try {
      mesh = GetMesh(submesh, topology, 0, tile);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kAssertionError) << e.what();  // only the Z-major core rule can refuse these
      EXPECT_THAT(e.message(), HasSubstr("cores must be")) << e.what();
      continue;
    }
    ++built;
    const std::string context = fmt::format("{} {} tile {}", topology->ToString(), PyTuple(submesh), tile);
    // A permutation of all devices.
    std::vector<int> sorted = mesh.device_ids();
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < static_cast<int>(sorted.size()); ++i) ASSERT_EQ(sorted[i], i) << context;
    // Each row of 'model' covers a box of exactly the submesh's extent.
    const int64_t model = mesh.shape()[1];
    for (int64_t row = 0; row < mesh.shape()[0]; ++row) {
      HardwareMesh lo(4, 1 << 20), hi(4, -1);
      for (int64_t k = 0; k < model; ++k) {
        HardwareMesh c = GetCoords(*topology, topology->device(mesh.DeviceAt(row * model + k)));
        for (int d = 0; d < 4; ++d) {
          lo[d] = std::min(lo[d], c[d]);
          hi[d] = std::max(hi[d], c[d]);
        }
      }
      for (int d = 0; d < 4; ++d) ASSERT_EQ(hi[d] - lo[d] + 1, submesh[d]) << context << " row " << row;
    }
    // Where every host's devices form a box, the hosts hold distinct chunks that tile the mesh.
    std::set<std::vector<int64_t>> seen;
    bool all_boxes = true;
    for (int h = 0; h < topology->num_processes() && all_boxes; ++h) {
      try {
        LocalChunker chunker(mesh, h);
        EXPECT_EQ(chunker.local_mesh().size(), topology->devices_per_process()) << context;
        int64_t chunks = 1;
        for (int64_t n : chunker.num_chunks()) chunks *= n;
        EXPECT_EQ(chunks, topology->num_processes()) << context;
        EXPECT_TRUE(seen.insert(chunker.chunk_ids()).second) << context << " host " << h;
        EXPECT_EQ(chunker.GetShardId({"data", "model"}), chunker.chunk_ids()[0] * chunker.num_chunks()[1] +
                                                               chunker.chunk_ids()[1]);
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kValueError) << e.what();
        all_boxes = false;
      }
    }
    if (all_boxes) ++chunked;
  }
  EXPECT_GT(built, 150);
  EXPECT_GT(chunked, 50);
}

TEST(GetGpuMesh, KeepsModelInsideAHostUpToItsSizeThenSpansWholeHosts) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int hosts = 1 + static_cast<int>(rng() % 6), per_host = 1 << (rng() % 4);
    auto topology = std::make_shared<const Topology>(Topology::Gpu("gpu", hosts, per_host));
    std::vector<int> counts;
    for (int d = 1; d <= per_host; ++d) {
      if (per_host % d == 0) counts.push_back(d);
    }
    for (int k = 2; k <= hosts; ++k) {
      if (hosts % k == 0) counts.push_back(k * per_host);
    }
    const int num_partitions = counts[rng() % counts.size()];
    const std::string context = fmt::format("{} num_partitions {}", topology->ToString(), num_partitions);
    Mesh mesh = GetGpuMesh(num_partitions, topology);
    ASSERT_THAT(mesh.shape(), ElementsAre(topology->num_devices() / num_partitions, num_partitions)) << context;
    const int hosts_per_row = std::max(1, num_partitions / per_host);
    for (int64_t row = 0; row < mesh.shape()[0]; ++row) {
      std::set<int> row_hosts;
      for (int64_t k = 0; k < num_partitions; ++k) {
        row_hosts.insert(topology->device(mesh.DeviceAt(row * num_partitions + k)).process_index);
      }
      EXPECT_EQ(static_cast<int>(row_hosts.size()), hosts_per_row) << context << " row " << row;
    }
  }
}

}  // namespace
}  // namespace spmdsim::t5x
