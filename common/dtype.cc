#include "common/dtype.h"

#include <array>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;        // numpy
  std::string_view short_name;  // JAX
  int64_t size;
};

// In the enum's order (checked by static_asserts below).
constexpr std::array<DTypeInfo, 17> kInfo = {{
    {DType::kF32, "float32", "f32", 4},
    {DType::kF64, "float64", "f64", 8},
    {DType::kBF16, "bfloat16", "bf16", 2},
    {DType::kF16, "float16", "f16", 2},
    {DType::kI32, "int32", "i32", 4},
    {DType::kI64, "int64", "i64", 8},
    {DType::kBool, "bool", "bool", 1},
    {DType::kI8, "int8", "i8", 1},
    {DType::kU8, "uint8", "u8", 1},
    {DType::kI16, "int16", "i16", 2},
    {DType::kU16, "uint16", "u16", 2},
    {DType::kU32, "uint32", "u32", 4},
    {DType::kU64, "uint64", "u64", 8},
    {DType::kF8E4M3FN, "float8_e4m3fn", "f8_e4m3fn", 1},
    {DType::kF8E5M2, "float8_e5m2", "f8_e5m2", 1},
    {DType::kC64, "complex64", "c64", 8},
    {DType::kC128, "complex128", "c128", 16},
}};
static_assert(kInfo[static_cast<int>(DType::kBool)].dtype == DType::kBool);
static_assert(kInfo.back().dtype == DType::kC128);

constexpr std::array<DType, 17> kAll = {DType::kF32, DType::kF64,  DType::kBF16, DType::kF16,      DType::kI32,
                                        DType::kI64, DType::kBool, DType::kI8,   DType::kU8,       DType::kI16,
                                        DType::kU16, DType::kU32,  DType::kU64,  DType::kF8E4M3FN, DType::kF8E5M2,
                                        DType::kC64, DType::kC128};
constexpr int kNumArrayDTypes = 7;  // kF32 .. kBool

const DTypeInfo& Info(DType dtype) { return kInfo[static_cast<size_t>(dtype)]; }

}  // namespace

std::span<const DType> AllDTypes() { return kAll; }
std::span<const DType> ArrayDTypes() { return std::span<const DType>(kAll).first(kNumArrayDTypes); }

std::string_view DTypeName(DType dtype) { return Info(dtype).name; }
std::string_view DTypeShortName(DType dtype) { return Info(dtype).short_name; }
int64_t DTypeSize(DType dtype) { return Info(dtype).size; }

std::string ValidDTypeNames(std::span<const DType> dtypes) {
  std::vector<std::string> names;
  for (DType d : dtypes) {
    names.push_back(DTypeName(d) == DTypeShortName(d) ? std::string(DTypeName(d))
                                                      : fmt::format("{} ({})", DTypeShortName(d), DTypeName(d)));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

DType ParseDType(std::string_view name) {
  const std::string_view text = Trim(name);
  for (const DTypeInfo& info : kInfo) {
    if (text == info.name || text == info.short_name) return info.dtype;
  }
  if (text == "f8e4m3") return DType::kF8E4M3FN;
  if (text == "f8e5m2") return DType::kF8E5M2;
  Throw(ErrorCode::kInvalidArgument, "unknown dtype '{}'; valid dtypes are {}", name, ValidDTypeNames(kAll));
}

DType ParseArrayDType(std::string_view name) {
  DType dtype = DType::kF32;
  try {
    dtype = ParseDType(name);
  } catch (const Error&) {
    Throw(ErrorCode::kInvalidArgument, "unknown dtype '{}'; valid dtypes are {}", name, ValidDTypeNames(ArrayDTypes()));
  }
  if (!IsArrayDType(dtype)) {
    Throw(ErrorCode::kInvalidArgument, "{} is not an array dtype; array dtypes are {}", Trim(name),
          ValidDTypeNames(ArrayDTypes()));
  }
  return dtype;
}

bool IsFloating(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF64:
    case DType::kBF16:
    case DType::kF16:
    case DType::kF8E4M3FN:
    case DType::kF8E5M2:
      return true;
    default:
      return false;
  }
}

bool IsInteger(DType dtype) {
  switch (dtype) {
    case DType::kI32:
    case DType::kI64:
    case DType::kI8:
    case DType::kU8:
    case DType::kI16:
    case DType::kU16:
    case DType::kU32:
    case DType::kU64:
      return true;
    default:
      return false;
  }
}

bool IsArrayDType(DType dtype) { return static_cast<int>(dtype) < kNumArrayDTypes; }

}  // namespace spmdsim
