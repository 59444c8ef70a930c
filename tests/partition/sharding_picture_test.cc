#include "partition/sharding_picture.h"

#include <algorithm>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"
#include "mesh/mesh.h"
#include "partition/named_sharding.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ShardingLayout Layout(std::vector<int64_t> mesh_shape, std::vector<std::string> names, std::string_view spec,
                      std::vector<int64_t> shape) {
  return NamedSharding(Mesh::Iota(mesh_shape, names), PartitionSpec::Parse(spec)).Layout(shape);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The device ids of every cell drawn, in drawing order ("0-2,5" -> 0 1 2 5); "..." cells are skipped.
std::vector<std::vector<int>> CellsOf(const std::string& picture) {
  std::vector<std::vector<int>> cells;
  for (const std::string& line : Lines(picture)) {
    const size_t bar = line.find('|');
    if (bar == std::string::npos) continue;
    std::vector<std::string> parts = Split(std::string_view(line).substr(bar + 1), '|');
    for (const std::string& raw : parts) {
      std::string_view text = Trim(raw);
      if (text.empty() || text == "...") continue;
      std::vector<int> ids;
      for (const std::string& item : Split(text, ',')) {
        const size_t dash = item.find('-');
        if (dash == std::string::npos) {
          ids.push_back(static_cast<int>(ParseInt(item, "id")));
        } else {
          const int lo = static_cast<int>(ParseInt(item.substr(0, dash), "id"));
          const int hi = static_cast<int>(ParseInt(item.substr(dash + 1), "id"));
          for (int i = lo; i <= hi; ++i) ids.push_back(i);
        }
      }
      cells.push_back(ids);
    }
  }
  return cells;
}

TEST(DeviceIdsLabel, WritesRunsOfThreeOrMoreAsRanges) {
  EXPECT_EQ(DeviceIdsLabel({0, 1, 2, 3, 8, 9}), "0-3,8,9");
  EXPECT_EQ(DeviceIdsLabel({5, 1, 0}), "0,1,5");
  EXPECT_EQ(DeviceIdsLabel({7}), "7");
  EXPECT_EQ(DeviceIdsLabel({}), "");
  EXPECT_EQ(DeviceIdsLabel({0, 2, 4, 5, 6, 7, 9}), "0,2,4-7,9");
}

TEST(ShardingPicture, DrawsRankTwoAsJaxDoesRowsByColumns) {
  // Mesh {x:2, y:2}, P('x', 'y') on (4, 8): device 2i + j holds rows [2i, 2i+2), columns [4j, 4j+4).
  const std::string picture = ShardingPicture(Layout({2, 2}, {"x", "y"}, "P('x', 'y')", {4, 8}));
  EXPECT_EQ(picture,
            "rows: dim 0 (2 blocks), columns: dim 1 (2 blocks)\n"
            "cells: the devices holding each block\n"
            "      0:4   4:8\n"
            "    +-----+-----+\n"
            "0:2 | 0   | 1   |\n"
            "    +-----+-----+\n"
            "2:4 | 2   | 3   |\n"
            "    +-----+-----+\n");
}

TEST(ShardingPicture, ListsEveryReplicaOfABlockInOneCell) {
  // P('y') on (4, 8): rows split over y, so devices 0 and 2 (y = 0) hold rows 0:2.
  const std::string picture = ShardingPicture(Layout({2, 2}, {"x", "y"}, "P('y')", {4, 8}));
  EXPECT_EQ(CellsOf(picture), (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_THAT(picture, HasSubstr("0:2 | 0,2 |"));
  EXPECT_THAT(picture, HasSubstr("rows: dim 0 (2 blocks), columns: dim 1 (1 block)"));
}

TEST(ShardingPicture, DrawsRankOneAsOneRowAndAScalarAsOneCell) {
  const std::string row = ShardingPicture(Layout({4}, {"x"}, "P('x')", {8}));
  EXPECT_EQ(row,
            "columns: dim 0 (4 blocks)\n"
            "cells: the devices holding each block\n"
            "  0:2   2:4   4:6   6:8\n"
            "+-----+-----+-----+-----+\n"
            "| 0   | 1   | 2   | 3   |\n"
            "+-----+-----+-----+-----+\n");
  const std::string scalar = ShardingPicture(Layout({2, 2}, {"x", "y"}, "P()", {}));
  EXPECT_THAT(scalar, HasSubstr("scalar: one block"));
  EXPECT_EQ(CellsOf(scalar), (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
}

TEST(ShardingPicture, DrawsOneGridPerBlockOfTheLeadingShardedDimensions) {
  // Rank 4, P('a', None, 'b', 'c') on a {a:2, b:2, c:2} mesh: grid over dims 2 and 3, one grid per block of dim 0.
  const std::string picture =
      ShardingPicture(Layout({2, 2, 2}, {"a", "b", "c"}, "P('a', None, 'b', 'c')", {4, 3, 4, 4}));
  EXPECT_THAT(picture, HasSubstr("rows: dim 2 (2 blocks), columns: dim 3 (2 blocks); one grid per block of dim 0 "
                                 "(2 grids)"));
  EXPECT_THAT(picture, HasSubstr("grid 1 of 2: dim 0 = 0:2\n"));
  EXPECT_THAT(picture, HasSubstr("grid 2 of 2: dim 0 = 2:4\n"));
  EXPECT_EQ(CellsOf(picture), (std::vector<std::vector<int>>{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
}

TEST(ShardingPicture, PicksTheShardedDimensionsForTheGridWhenTheLastAreWhole) {
  // Rank 3, P('x', 'y', None): the grid is dims 0 and 1, not the last two.
  const std::string picture = ShardingPicture(Layout({2, 2}, {"x", "y"}, "P('x', 'y', None)", {2, 4, 16}));
  EXPECT_THAT(picture, HasSubstr("rows: dim 0 (2 blocks), columns: dim 1 (2 blocks)\n"));
  EXPECT_THAT(picture, Not(HasSubstr("grid 1")));
  // Only dim 1 sharded: the grid is dims 1 and 2 (the last unsharded dimension fills in).
  const std::string one = ShardingPicture(Layout({4}, {"x"}, "P(None, 'x', None)", {2, 4, 16}));
  EXPECT_THAT(one, HasSubstr("rows: dim 1 (4 blocks), columns: dim 2 (1 block)\n"));
  // Only the last dim sharded: dims 1 and 2.
  const std::string last = ShardingPicture(Layout({4}, {"x"}, "P(None, None, 'x')", {2, 4, 16}));
  EXPECT_THAT(last, HasSubstr("rows: dim 1 (1 block), columns: dim 2 (4 blocks)\n"));
}

TEST(ShardingPicture, FoldsColumnsThatDoNotFitAndSaysHowMany) {
  ShardingPictureOptions options;
  options.max_width = 40;
  const std::string picture = ShardingPicture(Layout({64}, {"x"}, "P('x')", {1024}), options);
  for (const std::string& line : Lines(picture)) {
    if (line.find('|') != std::string::npos || line.find('+') == 0) {
      EXPECT_LE(line.size(), 40u) << line;
    }
  }
  EXPECT_THAT(picture, HasSubstr("| ... |"));
  const std::vector<std::vector<int>> cells = CellsOf(picture);
  ASSERT_FALSE(cells.empty());
  EXPECT_THAT(picture, HasSubstr(std::to_string(64 - cells.size()) + " more columns of blocks (of 64) do not fit in "
                                 "40 characters"));
}

TEST(ShardingPicture, CutsRowsAndGridsAndSaysHowMany) {
  ShardingPictureOptions options;
  options.max_rows = 3;
  options.max_grids = 2;
  // {a:4, b:8, c:2}: dims 1 (b, 8 blocks) and 2 (c) form the grid; dim 0 (a) gives 4 grids.
  const std::string picture =
      ShardingPicture(Layout({4, 8, 2}, {"a", "b", "c"}, "P('a', 'b', 'c')", {4, 8, 2}), options);
  EXPECT_THAT(picture, HasSubstr("... 5 more rows of blocks (of 8)"));
  EXPECT_THAT(picture, HasSubstr("... 2 more grids (of 4)"));
  EXPECT_EQ(CellsOf(picture).size(), 2u * 3u * 2u);
}

TEST(ShardingPicture, ShortensLongCellLabelsToTheFirstIdsAndTheCount) {
  // 64 devices; P('y') with y the minor axis of size 2: each block is held by 32 devices with a stride of 2.
  ShardingPictureOptions options;
  options.max_width = 60;
  const std::string picture = ShardingPicture(Layout({32, 2}, {"x", "y"}, "P('y')", {4}), options);
  EXPECT_THAT(picture, HasSubstr("0,2,4,"));
  EXPECT_THAT(picture, HasSubstr(",... (32)"));
  for (const std::string& line : Lines(picture)) EXPECT_LE(line.size(), 60u) << line;
}

// Property: over random meshes, shapes and specs of rank 0 to 4, when nothing is folded every device appears in
// exactly one cell, and that cell's block is the one the layout gives the device; no line is wider than the width.
TEST(ShardingPicture, EveryDeviceAppearsOnceWhenNothingIsFolded) {
  std::mt19937 rng(20260601);
  const std::vector<std::string> names = {"a", "b", "c"};
  for (int trial = 0; trial < 300; ++trial) {
    const int mesh_rank = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> mesh_shape;
    std::vector<std::string> mesh_names;
    for (int i = 0; i < mesh_rank; ++i) {
      mesh_shape.push_back(1 + static_cast<int64_t>(rng() % 3));
      mesh_names.push_back(names[i]);
    }
    const int rank = static_cast<int>(rng() % 5);
    std::vector<int64_t> shape(rank, 1);
    std::vector<PartitionSpec::Entry> entries(rank);
    std::vector<std::string> free = mesh_names;
    std::shuffle(free.begin(), free.end(), rng);
    for (int d = 0; d < rank; ++d) {
      shape[d] = 1 + static_cast<int64_t>(rng() % 3);
      if (!free.empty() && rng() % 2 == 0) {
        const std::string axis = free.back();
        free.pop_back();
        entries[d] = PartitionSpec::Entry::Axis(axis);
        shape[d] *= mesh_shape[std::find(mesh_names.begin(), mesh_names.end(), axis) - mesh_names.begin()];
      }
    }
    const ShardingLayout layout = NamedSharding(Mesh::Iota(mesh_shape, mesh_names), PartitionSpec(entries))
                                      .Layout(shape);
    ShardingPictureOptions options;
    options.max_width = 200;
    options.max_rows = 100;
    options.max_grids = 100;
    const std::string picture = ShardingPicture(layout, options);
    for (const std::string& line : Lines(picture)) ASSERT_LE(line.size(), 200u) << line;
    const std::vector<std::vector<int>> cells = CellsOf(picture);
    ASSERT_EQ(static_cast<int64_t>(cells.size()), layout.num_shards) << picture;
    std::vector<int> seen;
    for (const auto& cell : cells) {
      for (int id : cell) {
        seen.push_back(id);
        // Every device of a cell holds the same block as the cell's first device.
        EXPECT_EQ(layout.ShardOfDevice(id).shard_id, layout.ShardOfDevice(cell[0]).shard_id) << picture;
      }
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int> all(layout.shards.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    EXPECT_EQ(seen, all) << picture;
  }
}

}  // namespace
}  // namespace spmdsim
