#include "partition/named_sharding.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::vector<std::pair<int64_t, int64_t>>> Ranges(const ShardingLayout& layout) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> out;
  for (const auto& s : layout.shards) {
    std::vector<std::pair<int64_t, int64_t>> r;
    for (const auto& i : s.index) r.emplace_back(i.start, i.stop);
    out.push_back(r);
  }
  return out;
}
std::vector<int64_t> ReplicaIds(const ShardingLayout& layout) {
  std::vector<int64_t> out;
  for (const auto& s : layout.shards) out.push_back(s.replica_id);
  return out;
}

// Reference: JAX's own path, named_sharding_to_xla_hlo_sharding (iota tile: arange(N).reshape(mesh).transpose(perm)
// .reshape(dims)) followed by op_sharding_to_numpy_indices (blocks in row-major order, num_replicas devices each).
// An independent route to devices_indices_map; checked against values computed by /tmp's numpy re-implementation.
std::vector<std::vector<std::pair<int64_t, int64_t>>> ReferenceIndices(const Mesh& mesh, const PartitionSpec& spec,
                                                                       const std::vector<int64_t>& shape) {
  const int rank = static_cast<int>(shape.size());
  std::vector<int> perm;
  std::vector<int64_t> dims(rank, 1);
  std::vector<bool> used(mesh.rank(), false);
  for (int d = 0; d < spec.size(); ++d) {
    for (const auto& a : spec[d].axes()) {
      int ax = mesh.AxisIndex(a);
      if (mesh.shape()[ax] == 1) continue;
      perm.push_back(ax);
      used[ax] = true;
      dims[d] *= mesh.shape()[ax];
    }
  }
  int64_t replicas = 1;
  for (int ax = 0; ax < mesh.rank(); ++ax) {
    if (!used[ax]) {
      perm.push_back(ax);
      replicas *= mesh.shape()[ax];
    }
  }
  DeviceArray iota(mesh.shape(), [&] {
    std::vector<int> ids(mesh.size());
    std::iota(ids.begin(), ids.end(), 0);
    return ids;
  }());
  const std::vector<int> order = iota.Transpose(perm).ids();  // tile assignment, flattened
  std::vector<std::vector<std::pair<int64_t, int64_t>>> out(mesh.size());
  std::vector<int64_t> block(rank, 0);
  size_t next = 0;
  const int64_t blocks = NumElements(dims);
  for (int64_t b = 0; b < blocks; ++b) {
    std::vector<std::pair<int64_t, int64_t>> idx;
    for (int d = 0; d < rank; ++d) {
      int64_t n = shape[d] / dims[d];
      idx.emplace_back(block[d] * n, (block[d] + 1) * n);
    }
    for (int64_t r = 0; r < replicas; ++r) out[order[next++]] = idx;
    for (int d = rank - 1; d >= 0; --d) {
      if (++block[d] < dims[d]) break;
      block[d] = 0;
    }
  }
  return out;
}

TEST(NamedSharding, MatchesJaxIotaTileExample) {
  // The example in JAX's named_sharding_to_xla_hlo_sharding comment; expected values from the numpy
  // re-implementation of that function and op_sharding_to_numpy_indices.
  Mesh mesh = Mesh::Iota({2, 2, 2, 2}, {"a", "b", "c", "d"});
  NamedSharding sharding(mesh, PartitionSpec::Parse("P(None, ('d', 'b'), 'c')"));
  std::vector<int64_t> shape{8, 4, 2, 2};
  ShardingLayout layout = sharding.Layout(shape);
  EXPECT_EQ(layout.shard_shape, (std::vector<int64_t>{8, 1, 1, 2}));
  EXPECT_EQ(layout.tiling, (std::vector<int64_t>{1, 4, 2, 1}));
  EXPECT_EQ(layout.num_shards, 8);
  EXPECT_EQ(layout.num_replicas, 2);
  const std::vector<int64_t> dim1_start{0, 2, 0, 2, 1, 3, 1, 3, 0, 2, 0, 2, 1, 3, 1, 3};
  const std::vector<int64_t> dim2_start{0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1};
  for (int p = 0; p < 16; ++p) {
    EXPECT_EQ(layout.shards[p].index[1].start, dim1_start[p]) << p;
    EXPECT_EQ(layout.shards[p].index[2].start, dim2_start[p]) << p;
    EXPECT_EQ(layout.shards[p].index[0], (IndexRange{0, 8}));
  }
  EXPECT_EQ(ReplicaIds(layout), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(Ranges(layout), ReferenceIndices(mesh, sharding.spec(), shape));
}

TEST(NamedSharding, TupleOrderIsMajorToMinor) {
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  std::vector<int64_t> shape{8};
  ShardingLayout xy = NamedSharding(mesh, PartitionSpec::Parse("P(('x', 'y'))")).Layout(shape);
  ShardingLayout yx = NamedSharding(mesh, PartitionSpec::Parse("P(('y', 'x'))")).Layout(shape);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      EXPECT_EQ(xy.shards[2 * i + j].index[0].start, 2 * i + j);  // JAX: tests/shard_map_test.py
      EXPECT_EQ(yx.shards[2 * i + j].index[0].start, 4 * j + i);
    }
  }
}

TEST(NamedSharding, ReplicaIdsCountInMeshFlatOrder) {
  // Mesh x:2, y:3, z:2 with P('z', None, 'x') on (4, 3, 6): numpy re-implementation of device_replica_id_map gives
  // [0,0,1,1,2,2,0,0,1,1,2,2] (y is replicated).
  Mesh mesh = Mesh::Iota({2, 3, 2}, {"x", "y", "z"});
  NamedSharding sharding(mesh, PartitionSpec::Parse("P('z', None, 'x')"));
  std::vector<int64_t> shape{4, 3, 6};
  ShardingLayout layout = sharding.Layout(shape);
  EXPECT_EQ(ReplicaIds(layout), (std::vector<int64_t>{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(layout.shards[7].index, (std::vector<IndexRange>{{2, 4}, {0, 3}, {3, 6}}));
  EXPECT_THAT(layout.DevicesOfShard(layout.shards[7].shard_id), ElementsAre(7, 9, 11));
  EXPECT_EQ(sharding.ReplicatedAxes(), (std::vector<std::string>{"y"}));
}

TEST(NamedSharding, UsesTheMeshDeviceIdsAndTheirHosts) {
  // tpu-v4:2x2x4: 16 chips, hosts of 2x2x1 chips -> 4 hosts of 4 devices. Mesh over a permuted id order.
  auto topology = std::make_shared<const Topology>(Topology::Parse("tpu-v4:2x2x4"));
  std::vector<int> ids(16);
  std::iota(ids.begin(), ids.end(), 0);
  std::reverse(ids.begin(), ids.end());
  Mesh mesh(DeviceArray({4, 4}, ids), {"data", "model"}, topology);
  NamedSharding sharding(mesh, PartitionSpec::Parse("P('data')"));
  std::vector<int64_t> shape{8, 2};
  ShardingLayout layout = sharding.Layout(shape);
  EXPECT_EQ(layout.shards[0].device, 15);
  EXPECT_EQ(layout.shards[0].process_index, topology->device(15).process_index);
  EXPECT_EQ(layout.ShardOfDevice(15).position, 0);
  EXPECT_EQ(layout.ShardOfDevice(0).index[0], (IndexRange{6, 8}));
  auto by_process = layout.ShardsByProcess();
  ASSERT_EQ(static_cast<int>(by_process.size()), topology->num_processes());
  for (const auto& host : by_process) {
    EXPECT_EQ(host.size(), 4u);
    for (const DeviceShard* s : host) EXPECT_EQ(s->process_index, host[0]->process_index);
  }
  EXPECT_THROW(layout.ShardOfDevice(99), Error);
}

TEST(NamedSharding, ShardShapeAndReplication) {
  Mesh mesh = Mesh::Iota({2, 4, 2}, {"dp", "fsdp", "tp"});
  NamedSharding sharding(mesh, PartitionSpec::Parse("P(('dp','fsdp'), None, 'tp')"));
  std::vector<int64_t> shape{8, 1024, 4096};
  EXPECT_EQ(sharding.ShardShape(shape), (std::vector<int64_t>{1, 1024, 2048}));
  EXPECT_FALSE(sharding.is_fully_replicated());
  EXPECT_TRUE(NamedSharding(mesh, PartitionSpec()).is_fully_replicated());
  EXPECT_TRUE(NamedSharding(Mesh::Iota({1, 4}, {"a", "b"}), PartitionSpec::Parse("P('a')")).is_fully_replicated());
  EXPECT_TRUE(NamedSharding(Mesh::Iota({1}, {"a"}), PartitionSpec::Parse("P('a')")).is_fully_replicated());
  EXPECT_EQ(sharding.Layout(shape).ShardBytes(4), 1 * 1024 * 2048 * 4);
  EXPECT_EQ(sharding.ToString(),
            "NamedSharding(mesh=Mesh('dp': 2, 'fsdp': 4, 'tp': 2, axis_types=(Auto, Auto, Auto)), "
            "spec=P(('dp', 'fsdp'), None, 'tp'), memory_kind=device)");
}

TEST(NamedSharding, ConstructorChecksAsJaxDoes) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  try {
    NamedSharding(mesh, PartitionSpec::Parse("P('x', 'x')"));
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDuplicateSpecError);
  }
  try {
    NamedSharding(mesh, PartitionSpec::Parse("P('y')"));
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.message(), "Resource axis: y of P('y',) is not found in mesh: ('x',).");
  }
  // An empty mesh takes only P(): JAX's NamedSharding(Mesh(), P()), what eformer returns without a mesh.
  const NamedSharding replicated{Mesh(), PartitionSpec()};
  EXPECT_TRUE(replicated.is_fully_replicated());
  EXPECT_EQ(replicated.num_devices(), 0);
  EXPECT_THROW(NamedSharding(Mesh(), PartitionSpec::Parse("P(None)")), Error);
  EXPECT_THROW(NamedSharding(Mesh(), PartitionSpec::Parse("P('x')")), Error);
}

TEST(NamedSharding, ShapeErrorsAreJaxs) {
  NamedSharding sharding(Mesh::Iota({4}, {"x"}), PartitionSpec::Parse("P('x', None)"));
  std::vector<int64_t> too_small{8};
  std::vector<int64_t> indivisible{6, 2};
  // JAX 0.10.2: an entry past the rank that splits nothing is ignored; one that splits is an IndexError.
  EXPECT_EQ(sharding.ShardShape(too_small), (std::vector<int64_t>{2}));
  try {
    NamedSharding(Mesh::Iota({4}, {"x"}), PartitionSpec::Parse("P(None, 'x')")).ShardShape(too_small);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndexError);
    EXPECT_THAT(e.message(), HasSubstr("splits dimension 1 4 ways, but the array has rank 1"));
  }
  try {
    sharding.Layout(indivisible);
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndivisibleError);
    EXPECT_THAT(e.message(), HasSubstr("array axis 0 is partitioned 4 times, but the dimension size is 6"));
  }
}

TEST(IndexToString, PrintsJaxSlices) {
  std::vector<int64_t> shape{8, 4};
  std::vector<IndexRange> index{{2, 4}, {0, 4}};
  EXPECT_EQ(IndexToString(index, shape), "(slice(2, 4, None), slice(None, None, None))");
  std::vector<int64_t> one{8};
  std::vector<IndexRange> i1{{0, 4}};
  EXPECT_EQ(IndexToString(i1, one), "(slice(0, 4, None),)");
}

TEST(CopyBlock, CopiesAStridedBlockAndBack) {
  // 3 x 4 x 5 array of int16 holding 0..59; block [1,3) x [0,4) x [2,4) is rows of (x*20 + y*5 + z).
  std::vector<int16_t> global(60);
  std::iota(global.begin(), global.end(), 0);
  std::vector<int64_t> shape{3, 4, 5};
  std::vector<IndexRange> index{{1, 3}, {0, 4}, {2, 4}};
  std::vector<int16_t> block(2 * 4 * 2);
  CopyBlockOut(reinterpret_cast<const std::byte*>(global.data()), shape, index, 2,
               reinterpret_cast<std::byte*>(block.data()));
  std::vector<int16_t> expected;
  for (int x = 1; x < 3; ++x)
    for (int y = 0; y < 4; ++y)
      for (int z = 2; z < 4; ++z) expected.push_back(static_cast<int16_t>(x * 20 + y * 5 + z));
  EXPECT_EQ(block, expected);
  std::vector<int16_t> back(60, -1);
  CopyBlockIn(reinterpret_cast<const std::byte*>(block.data()), shape, index, 2,
              reinterpret_cast<std::byte*>(back.data()));
  for (int i = 0; i < 60; ++i) {
    const int x = i / 20, z = i % 5;
    const bool inside = x >= 1 && z >= 2 && z < 4;
    EXPECT_EQ(back[i], inside ? i : -1) << i;
  }
}

TEST(CopyBlock, HandlesScalarsAndEmptyBlocks) {
  std::vector<int64_t> scalar_shape;
  double value = 2.5, out = 0;
  CopyBlockOut(reinterpret_cast<const std::byte*>(&value), scalar_shape, {}, sizeof(double),
               reinterpret_cast<std::byte*>(&out));
  EXPECT_EQ(out, 2.5);
  std::vector<int64_t> empty_shape{0, 4};
  std::vector<IndexRange> empty{{0, 0}, {0, 4}};
  CopyBlockOut(nullptr, empty_shape, empty, 4, nullptr);  // nothing to copy, nothing touched
}

TEST(ScatterGather, RoundTripsAndReplicasMatch) {
  Mesh mesh = Mesh::Iota({2, 2, 2}, {"x", "y", "z"});
  NamedSharding sharding(mesh, PartitionSpec::Parse("P('y', ('z',))"));
  std::vector<int64_t> shape{4, 6};
  ShardingLayout layout = sharding.Layout(shape);
  std::vector<float> global(24);
  std::iota(global.begin(), global.end(), 0.0f);
  auto shards = Scatter(layout, global);
  ASSERT_EQ(shards.size(), 8u);
  EXPECT_EQ(shards[0], (std::vector<float>{0, 1, 2, 6, 7, 8}));     // rows [0,2), cols [0,3)
  EXPECT_EQ(shards[3], (std::vector<float>{15, 16, 17, 21, 22, 23}));  // y=1, z=1
  EXPECT_EQ(shards[4], shards[0]);                                   // x is replicated
  EXPECT_EQ(Gather(layout, shards), global);
}

TEST(ScatterGather, GatherReportsEveryDisagreeingReplica) {
  Mesh mesh = Mesh::Iota({4}, {"x"});
  NamedSharding sharding(mesh, PartitionSpec());
  std::vector<int64_t> shape{3};
  ShardingLayout layout = sharding.Layout(shape);
  auto shards = Scatter(layout, std::vector<int32_t>{1, 2, 3});
  shards[1][0] = 9;
  shards[3][2] = 9;
  try {
    Gather(layout, shards);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("device(s) 1, 3 differ from device 0 (replica 0)"));
  }
  EXPECT_EQ(Gather(layout, shards, {.check_replicas = false}), (std::vector<int32_t>{1, 2, 3}));
}

TEST(ScatterGather, RejectsWrongSizes) {
  ShardingLayout layout = NamedSharding(Mesh::Iota({2}, {"x"}), PartitionSpec::Parse("P('x')")).Layout(
      std::vector<int64_t>{4});
  EXPECT_THROW(Scatter(layout, std::vector<int>{1, 2, 3}), Error);
  EXPECT_THROW(Gather(layout, std::vector<std::vector<int>>{{1, 2}}), Error);
  EXPECT_THROW(Gather(layout, std::vector<std::vector<int>>{{1, 2}, {3}}), Error);
}

// Random meshes (ids shuffled), shapes and duplicate-free divisible specs.
TEST(NamedSharding, RandomLayoutsMatchJaxTileAssignmentTileTheArrayAndRoundTrip) {
  std::mt19937 rng(7);
  const std::vector<std::string> names{"a", "b", "c", "d"};
  for (int trial = 0; trial < 200; ++trial) {
    const int mesh_rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> mesh_shape;
    for (int i = 0; i < mesh_rank; ++i) mesh_shape.push_back(1 + static_cast<int64_t>(rng() % 3));
    std::vector<std::string> axes(names.begin(), names.begin() + mesh_rank);
    std::vector<int> ids(NumElements(mesh_shape));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    Mesh mesh(DeviceArray(mesh_shape, ids), axes);
    std::vector<std::string> shuffled = axes;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const int rank = static_cast<int>(rng() % 4);
    std::vector<std::vector<std::string>> per_dim(rank);
    for (const auto& a : shuffled) {
      const int d = static_cast<int>(rng() % (rank + 1));
      if (d < rank) per_dim[d].push_back(a);
    }
    std::vector<PartitionSpec::Entry> entries;
    std::vector<int64_t> shape;
    for (int d = 0; d < rank; ++d) {
      entries.push_back(PartitionSpec::Entry::Axes(per_dim[d]));
      shape.push_back(EntryPartitions(entries.back(), mesh) * (1 + static_cast<int64_t>(rng() % 3)));
    }
    entries.resize(rng() % (rank + 1));  // a shorter spec leaves trailing dimensions whole
    PartitionSpec spec(entries);
    NamedSharding sharding(mesh, spec);
    ShardingLayout layout = sharding.Layout(shape);
    ASSERT_EQ(Ranges(layout), ReferenceIndices(mesh, spec, shape)) << spec.ToString();

    // Every element is covered exactly num_replicas times, once per replica id.
    const int64_t n = NumElements(shape);
    std::vector<int64_t> cover(n * layout.num_replicas, 0);
    const std::vector<int64_t> strides = RowMajorStrides(shape);
    for (const auto& s : layout.shards) {
      std::vector<int64_t> at(rank);
      for (int d = 0; d < rank; ++d) at[d] = s.index[d].start;
      const int64_t count = NumElements(layout.shard_shape);
      for (int64_t k = 0; k < count; ++k) {
        int64_t flat = 0;
        for (int d = 0; d < rank; ++d) flat += at[d] * strides[d];
        ++cover[s.replica_id * n + flat];
        for (int d = rank - 1; d >= 0; --d) {
          if (++at[d] < s.index[d].stop) break;
          at[d] = s.index[d].start;
        }
      }
    }
    EXPECT_TRUE(std::all_of(cover.begin(), cover.end(), [](int64_t c) { return c == 1; })) << spec.ToString();

    std::vector<int32_t> global(n);
    for (auto& v : global) v = static_cast<int32_t>(rng());
    EXPECT_EQ(Gather(layout, Scatter(layout, global)), global) << spec.ToString();
  }
}

}  // namespace
}  // namespace spmdsim
