#include "hlo/sharding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/error.h"
#include "hlo/parser.h"

namespace spmdsim::hlo {
namespace {

using ::testing::ElementsAre;

Sharding ShardingOf(const std::string& text) {
  auto m = ParseModule(
      "HloModule m\nENTRY %e (x: f32[4,8]) -> f32[4,8] {\n  ROOT %x = f32[4,8] parameter(0), sharding=" + text +
      "\n}\n");
  return *m->entry()->root()->attrs().sharding;
}

TEST(Sharding, GivesEachDeviceItsTileAndReplicatesSubgroups) {
  const Sharding s = ShardingOf("{devices=[2,4]<=[8]}");
  const Block b = BlockOf(s, {4, 8}, 5);  // tile (1, 1)
  EXPECT_THAT(b.begin, ElementsAre(2, 2));
  EXPECT_THAT(b.end, ElementsAre(4, 4));
  // [4,1,2] over iota [2,4] transposed: devices 0,4,1,5,2,6,3,7; the last dimension replicates.
  const Sharding r = ShardingOf("{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  EXPECT_THAT(BlockOf(r, {8, 3}, 1).begin, ElementsAre(2, 0));
  EXPECT_THAT(BlockOf(r, {8, 3}, 5).begin, ElementsAre(2, 0));  // same tile as device 1
  EXPECT_THAT(GlobalDims(s, {2, 2}), ElementsAre(4, 8));
  EXPECT_THAT(BlockOf(ShardingOf("{replicated}"), {4, 8}, 3).end, ElementsAre(4, 8));
  EXPECT_THROW(BlockOf(s, {4, 8}, 9), Error);
}

TEST(Sharding, CutsAndReassemblesAGlobalArrayWithUnevenBlocksPadded) {
  const Sharding s = ShardingOf("{devices=[1,3]0,1,2}");
  ValueBuilder g(DType::kI32, {2, 7});
  for (int i = 0; i < 14; ++i) g.data<int32_t>()[i] = i;
  const Value global = std::move(g).Finish();
  std::vector<Value> parts;
  for (int d = 0; d < 3; ++d) parts.push_back(ShardOf(global, s, d, {2, 3}));
  std::vector<int32_t> last(6);
  std::memcpy(last.data(), parts[2].raw(), 24);
  EXPECT_THAT(last, ElementsAre(6, 0, 0, 13, 0, 0));  // columns 6..6, padded to 3 with zeros
  std::vector<const Value*> ptrs{&parts[0], &parts[1], &parts[2]};
  const Value back = Assemble(ptrs, s, {2, 7});
  EXPECT_EQ(std::memcmp(back.raw(), global.raw(), 56), 0);
}

}  // namespace
}  // namespace spmdsim::hlo
