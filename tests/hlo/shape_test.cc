#include "hlo/shape.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "hlo/parser.h"

namespace spmdsim::hlo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ShapeError(const std::string& text) {
  try {
    ParseShape(text);
  } catch (const Error& e) {
    return e.message();
  }
  return "no error";
}

TEST(Shape, KeepsTheTilesMemorySpaceAndElementSizeOfATpuLayout) {
  const Shape s = ParseShape("bf16[4096,4096]{1,0:T(8,128)(2,1)S(1)}");
  EXPECT_THAT(s.minor_to_major, ElementsAre(1, 0));
  ASSERT_EQ(s.tiles.size(), 2u);
  EXPECT_THAT(s.tiles[0], ElementsAre(8, 128));
  EXPECT_THAT(s.tiles[1], ElementsAre(2, 1));
  EXPECT_EQ(s.memory_space, 1);
  EXPECT_EQ(s.element_size_in_bits, 0);
  EXPECT_EQ(ParseShape("s8[16]{0:E(4)}").element_size_in_bits, 4);
  const Shape flag = ParseShape("u32[]{:S(2)}");
  EXPECT_TRUE(flag.minor_to_major.empty());
  EXPECT_EQ(flag.memory_space, 2);
  EXPECT_THAT(ParseShape("s8[8388608]{0:T(1024)(128)(4,1)}").tiles,
              ElementsAre(ElementsAre(1024), ElementsAre(128), ElementsAre(4, 1)));
}

TEST(Shape, PrintsItsLayoutBackAsXlaDoes) {
  for (const char* text : {"bf16[4096,4096]{1,0:T(8,128)(2,1)S(1)}", "u32[]{:S(2)}", "s32[]{:T(128)S(6)}",
                           "bf16[1,64,8,64]{1,3,0,2:T(8,128)(2,1)S(3)}", "f32[2,3]{1,0}", "f32[2,3]",
                           "f32[8]{0:T(8)L(2)E(32)S(1)M(8)}", "f32[4,4]{1,0:T(2,*)}",
                           "(bf16[512]{0:T(512)(128)(2,1)S(1)}, u32[]{:S(2)}, token[])"}) {
    EXPECT_EQ(ParseShape(text).ToString(/*with_layout=*/true), text);
  }
  // Items are printed in XLA's order whatever the order they were written in.
  EXPECT_EQ(ParseShape("f32[8]{0:M(8)S(1)E(32)L(2)T(8)}").ToString(true), "f32[8]{0:T(8)L(2)E(32)S(1)M(8)}");
  EXPECT_EQ(ParseShape("bf16[2]{0:T(256)S(1)}").ToString(), "bf16[2]");
}

// XLA's tiled layout size: the first tile pads the minor-most dimensions (in minor_to_major order).
TEST(Shape, PhysicalByteSizeCountsTheFirstTilesPadding) {
  // Dimension 1 (minor) 200 -> 256, dimension 0: 3 -> 8: 8 x 256 x 2 bytes.
  EXPECT_EQ(ParseShape("bf16[3,200]{1,0:T(8,128)(2,1)}").PhysicalByteSize(), 4096);
  EXPECT_EQ(ParseShape("bf16[3,200]{1,0:T(8,128)(2,1)}").ByteSize(), 1200);
  // Column-major: dimension 0 is minor: 3 -> 128; 200 is a multiple of 8.
  EXPECT_EQ(ParseShape("bf16[3,200]{0,1:T(8,128)}").PhysicalByteSize(), 128 * 200 * 2);
  // A scalar under a tile of one dimension takes the whole tile.
  EXPECT_EQ(ParseShape("u32[]{:T(128)}").PhysicalByteSize(), 512);
  EXPECT_EQ(ParseShape("u32[]{:S(2)}").PhysicalByteSize(), 4);
  // A tile of more dimensions than the array pads a dimension of size 1 above it.
  EXPECT_EQ(ParseShape("f32[100]{0:T(8,128)}").PhysicalByteSize(), 8 * 128 * 4);
  // No tiles: ByteSize; E(n) packs n bits per element.
  EXPECT_EQ(ParseShape("f32[3,5]{1,0}").PhysicalByteSize(), 60);
  EXPECT_EQ(ParseShape("s8[3]{0:E(4)}").PhysicalByteSize(), 2);
  EXPECT_EQ(ParseShape("(f32[3]{0:T(8)}, u32[]{:T(128)}, token[])").PhysicalByteSize(), 32 + 512);
}

TEST(Shape, RefusesMalformedLayoutsAtTheirColumn) {
  EXPECT_THAT(ShapeError("f32[2,3]{1,0:T(8,"), HasSubstr("<shape>:1:9: unterminated layout"));
  EXPECT_THAT(ShapeError("f32[2]{0:S(x)}"), HasSubstr("<shape>:1:12: expected the memory space S(n) (an integer)"));
  EXPECT_THAT(ShapeError("f32[2]{0:T(0)}"), HasSubstr("<shape>:1:12: tile dimension 0 is outside 1.."));
  EXPECT_THAT(ShapeError("f32[2]{0:Q(1)}"), HasSubstr("<shape>:1:10: expected a layout item"));
  EXPECT_THAT(ShapeError("f32[2]{0:T(8)T(8)}"), HasSubstr("a layout has one T(...)"));
  EXPECT_THAT(ShapeError("f32[2,3]{1:T(8)}"), HasSubstr("layout has 1 dimensions; the shape has 2"));
}

}  // namespace
}  // namespace spmdsim::hlo
