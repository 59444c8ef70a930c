// HloShape: the shape of an HLO value as XLA's text prints it: an array (element type, dimensions, layout), a
// tuple of shapes, or a token.
//
//   f32[2,3]{1,0}          float32 array, row-major layout (minor_to_major {1, 0}: dimension 1 varies fastest)
//   bf16[4,8]{0,1}         column-major: element (i, j) sits at j * 4 + i in memory
//   pred[]                 a boolean scalar (layout {} or none)
//   (f32[2], s32[])        a tuple of two arrays
//   token[]                a token (ordering only; no data)
//   bf16[4096,4096]{1,0:T(8,128)(2,1)S(1)}   a TPU layout: tiles 8x128 then 2x1, in memory space 1 (VMEM)
//   u32[]{:S(2)}           a scalar in memory space 2 (TPU sync flags); no minor_to_major, a layout all the same
//
// Element types use the shared vocabulary (common/dtype.h): pred is DType::kBool, s8..s64 kI8..kI64, u8..u64
// kU8..kU64, f16/bf16/f32/f64, f8e4m3fn, f8e5m2, c64, c128. Layouts matter for one op only (bitcast reinterprets
// memory); every other op is defined on the logical shape.
//
// Thread safety: a shape is a value; const members may be called concurrently.
#ifndef SPMDSIM_HLO_SHAPE_H_
#define SPMDSIM_HLO_SHAPE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"

namespace spmdsim::hlo {

// The HLO name of a dtype: "f32", "bf16", "pred", "s32", "u8", "f8e4m3fn", "c64".
std::string_view HloTypeName(DType dtype);
// The dtype of an HLO element type name, or false when the name is not one spmdsim knows.
bool ParseHloType(std::string_view name, DType* dtype);
// Every HLO element type name spmdsim reads, for error messages: "pred, s8, s16, ...".
std::string HloTypeNames();
bool IsUnsigned(DType dtype);  // u8, u16, u32, u64
bool IsSigned(DType dtype);    // s8 .. s64
bool IsComplex(DType dtype);   // c64, c128

struct Shape {
  enum class Kind : uint8_t { kArray, kTuple, kToken };

  Kind kind = Kind::kArray;
  DType dtype = DType::kF32;             // arrays only
  std::vector<int64_t> dims;             // arrays only
  // Layout as minor_to_major (XLA): the first entry is the fastest-varying dimension. Empty: no layout printed
  // (the default, row-major: {rank-1, ..., 1, 0}).
  std::vector<int64_t> minor_to_major;
  // The layout after its ':' (arrays only), in XLA's order T(...) E(n) S(n):
  //   tiles: T(8,128)(2,1) -> {{8,128},{2,1}}: the first tile pads the minor dimensions, the next ones tile the
  //   first (XLA's tiled layout); a '*' dimension (XLA's combined dimension) is kCombinedTileDimension.
  std::vector<std::vector<int64_t>> tiles;
  int64_t element_size_in_bits = 0;      // E(n): packed elements (s4 in 4 bits); 0: the element type's own size
  int64_t memory_space = 0;              // S(n): 0 the default (HBM); TPU: 1 VMEM, 2 sync flags, 3..7 others
  // Any other layout item as written, in the text's order: L(n) (tail padding), #(s32) (index type), *(s64)
  // (pointer type), SC(...) (split configs), P(shape) (physical shape), M(n) (dynamic metadata bytes), D(...)
  // (dimension level types).
  std::vector<std::string> other_layout;
  std::vector<Shape> tuple;              // tuples only

  // A tile dimension written '*' (XLA's Tile::kCombineDimension).
  static constexpr int64_t kCombinedTileDimension = -1;

  static Shape Array(DType dtype, std::vector<int64_t> dims);
  static Shape Tuple(std::vector<Shape> elements);
  static Shape Token();

  bool IsArray() const { return kind == Kind::kArray; }
  bool IsTuple() const { return kind == Kind::kTuple; }
  bool IsToken() const { return kind == Kind::kToken; }
  int rank() const { return static_cast<int>(dims.size()); }
  // Elements of an array (1 for a scalar); 0 for a tuple or a token.
  int64_t NumElements() const;
  // Bytes of an array's elements; for a tuple, the sum over its leaves; 0 for a token.
  int64_t ByteSize() const;
  // Bytes the array takes in memory with its layout (XLA's ShapeUtil::ByteSizeOf of a tiled layout): the first
  // tile pads the minor-most dimensions in minor_to_major order up to a multiple of the tile (a tile of more
  // dimensions than the array pads dimensions of size 1 above it), and E(n) packs n bits per element. Equal to
  // ByteSize() without tiles and element size; for a tuple, the sum over its leaves; 0 for a token.
  // Example: bf16[3,200]{1,0:T(8,128)(2,1)}: dimension 1 (minor) 200 -> 256, dimension 0 3 -> 8, so
  //   8 x 256 x 2 = 4096 bytes (ByteSize() is 3 x 200 x 2 = 1200);  u32[]{:T(128)} is 128 x 4 = 512 bytes;
  //   bf16[3,200]{0,1:T(8,128)}: dimension 0 is minor: 3 -> 128, 200 -> 200 (8 divides it): 51200 bytes.
  int64_t PhysicalByteSize() const;
  // The layout as minor_to_major with the default filled in.
  std::vector<int64_t> MinorToMajor() const;
  // Whether the layout is the default row-major one (always true for rank <= 1). Tiles and memory spaces are not
  // looked at.
  bool HasDefaultLayout() const;
  // Whether anything after the layout's ':' was given (tiles, E, S or another item).
  bool HasLayoutItems() const;
  // Same kind, dtype and dimensions (tuples: element-wise); layouts ignored.
  bool Compatible(const Shape& other) const;
  // The same, but any two floating-point element types match (XLA's ShapeUtil::CompatibleIgnoringFpPrecision:
  // bf16[4] and f32[4] do; s32[4] and f32[4] do not).
  bool CompatibleIgnoringFpPrecision(const Shape& other) const;
  // "f32[2,3]", "(f32[2], s32[])" without layouts; with_layout adds the layout where one was given, as XLA
  // prints it: "{1,0}", "{1,0:T(8,128)(2,1)S(1)}", "{:S(2)}" (a scalar).
  std::string ToString(bool with_layout = false) const;
};

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_SHAPE_H_
