// DType: the element types of arrays, named as numpy and JAX name them (XLA: primitive_util.h).
//
// Every module passes dtypes as DType; text appears only at the edges (YAML, JSON, CLI flags, printing).
// Two spellings of each dtype are read and written:
//   numpy name (DTypeName)       float32  bfloat16  int8  float8_e4m3fn  complex64  bool
//   JAX short name (DTypeShortName, as in "f32[8,128]")  f32  bf16  i8  f8_e4m3fn  c64  bool
// ParseDType accepts both, plus the aliases "f8e4m3" and "f8e5m2" (accepted by `spmdsim analyze` before).
//
// The simulator computes with the first seven (IsArrayDType: float32, float64, bfloat16, float16, int32, int64,
// bool); the others have a size, for memory analysis and peak-FLOP tables, but no arithmetic.
//
// Example:
//   ParseDType("bf16") == DType::kBF16;  ParseDType("bfloat16") == DType::kBF16;
//   DTypeName(DType::kBF16) == "bfloat16";  DTypeShortName(DType::kBF16) == "bf16";  DTypeSize(DType::kBF16) == 2
//   ParseDType("bf61")   // throws Error(kInvalidArgument): "unknown dtype 'bf61'; valid dtypes are ..."
//
// Thread safety: every function is pure and may be called from any thread.
#ifndef SPMDSIM_COMMON_DTYPE_H_
#define SPMDSIM_COMMON_DTYPE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace spmdsim {

enum class DType : uint8_t {
  // Array dtypes: the simulator stores and computes with these.
  kF32, kF64, kBF16, kF16, kI32, kI64, kBool,
  // Sized only (memory analysis, peak-FLOP tables).
  kI8, kU8, kI16, kU16, kU32, kU64, kF8E4M3FN, kF8E5M2, kC64, kC128,
};

// Every dtype, in the enum's order.
std::span<const DType> AllDTypes();

// numpy's name: "float32", "float64", "bfloat16", "float16", "int32", "int64", "bool", "int8", "uint8", "int16",
// "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "complex64", "complex128".
std::string_view DTypeName(DType dtype);
// JAX's short name (jax._src.core._short_dtype_name): "f32", "f64", "bf16", "f16", "i32", "i64", "bool", "i8",
// "u8", "i16", "u16", "u32", "u64", "f8_e4m3fn", "f8_e5m2", "c64", "c128".
std::string_view DTypeShortName(DType dtype);

// A numpy name, a JAX short name or an alias ("f8e4m3", "f8e5m2"); surrounding blanks ignored.
// Throws Error(kInvalidArgument) naming the text and listing every valid name.
DType ParseDType(std::string_view name);
// ParseDType, then one of the array dtypes; throws Error(kInvalidArgument) naming the text and listing the array
// dtypes otherwise (e.g. for "int8": "int8 is not an array dtype; array dtypes are f32 (float32), ...").
DType ParseArrayDType(std::string_view name);
// The list ParseDType's error gives: "f32 (float32), f64 (float64), ..." for the dtypes in `dtypes`.
std::string ValidDTypeNames(std::span<const DType> dtypes);

int64_t DTypeSize(DType dtype);  // bytes per element (numpy itemsize): float32 4, bfloat16 2, bool 1, complex128 16
bool IsFloating(DType dtype);    // real floating point: float32/64, bfloat16, float16, float8_*
bool IsInteger(DType dtype);     // signed and unsigned integers (not bool)
bool IsArrayDType(DType dtype);  // one of the seven the simulator computes with (see the file comment)

// The seven array dtypes, in the enum's order.
std::span<const DType> ArrayDTypes();

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_DTYPE_H_
