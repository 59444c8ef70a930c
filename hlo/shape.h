// HloShape: the shape of an HLO value as XLA's text prints it: an array (element type, dimensions, layout), a
// tuple of shapes, or a token.
//
//   f32[2,3]{1,0}          float32 array, row-major layout (minor_to_major {1, 0}: dimension 1 varies fastest)
//   bf16[4,8]{0,1}         column-major: element (i, j) sits at j * 4 + i in memory
//   pred[]                 a boolean scalar (layout {} or none)
//   (f32[2], s32[])        a tuple of two arrays
//   token[]                a token (ordering only; no data)
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
  std::vector<Shape> tuple;              // tuples only

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
  // The layout as minor_to_major with the default filled in.
  std::vector<int64_t> MinorToMajor() const;
  // Whether the layout is the default row-major one (always true for rank <= 1).
  bool HasDefaultLayout() const;
  // Same kind, dtype and dimensions (tuples: element-wise); layouts ignored.
  bool Compatible(const Shape& other) const;
  // "f32[2,3]", "(f32[2], s32[])" without layouts; with_layout adds "{1,0}" where one was given.
  std::string ToString(bool with_layout = false) const;
};

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_SHAPE_H_
