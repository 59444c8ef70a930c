#include "common/dtype.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(DType (*parse)(std::string_view), std::string_view text) {
  try {
    parse(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.message();
  }
  return "no error";
}

TEST(ParseDType, ReadsNumpyNamesAndJaxShortNames) {
  for (DType d : AllDTypes()) {
    EXPECT_EQ(ParseDType(DTypeName(d)), d) << DTypeName(d);
    EXPECT_EQ(ParseDType(DTypeShortName(d)), d) << DTypeShortName(d);
  }
  EXPECT_EQ(ParseDType("bf16"), DType::kBF16);
  EXPECT_EQ(ParseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(ParseDType(" f32 "), DType::kF32);
  EXPECT_EQ(ParseDType("int8"), DType::kI8);  // scenario peak_TFLOPs key
  EXPECT_EQ(ParseDType("i8"), DType::kI8);    // spmdsim shard --dtype
}

TEST(ParseDType, KeepsTheOldFloat8Aliases) {
  EXPECT_EQ(ParseDType("f8e4m3"), DType::kF8E4M3FN);
  EXPECT_EQ(ParseDType("f8e5m2"), DType::kF8E5M2);
  EXPECT_EQ(DTypeShortName(DType::kF8E4M3FN), "f8_e4m3fn");
}

TEST(ParseDType, ListsEveryValidNameOnError) {
  const std::string message = ErrorOf(ParseDType, "bf61");
  EXPECT_THAT(message, HasSubstr("unknown dtype 'bf61'; valid dtypes are f32 (float32), f64 (float64), bf16 "
                                 "(bfloat16), f16 (float16), i32 (int32), i64 (int64), bool, i8 (int8)"));
  EXPECT_THAT(message, HasSubstr("c128 (complex128)"));
}

TEST(ParseArrayDType, AcceptsAnySpellingOfTheSevenArrayDTypes) {
  EXPECT_EQ(ParseArrayDType("float32"), DType::kF32);
  EXPECT_EQ(ParseArrayDType("bf16"), DType::kBF16);
  EXPECT_THAT(ErrorOf(ParseArrayDType, "int8"),
              HasSubstr("int8 is not an array dtype; array dtypes are f32 (float32), f64 (float64), bf16 (bfloat16), "
                        "f16 (float16), i32 (int32), i64 (int64), bool"));
  EXPECT_THAT(ErrorOf(ParseArrayDType, "float8"), HasSubstr("unknown dtype 'float8'; valid dtypes are f32 (float32)"));
}

TEST(DTypeSize, IsNumpysItemsize) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kBool), 1);
  EXPECT_EQ(DTypeSize(DType::kU64), 8);
  EXPECT_EQ(DTypeSize(DType::kF8E5M2), 1);
  EXPECT_EQ(DTypeSize(DType::kC64), 8);
  EXPECT_EQ(DTypeSize(DType::kC128), 16);
}

TEST(DTypeKinds, SeparateFloatsIntegersAndArrayDTypes) {
  EXPECT_TRUE(IsFloating(DType::kBF16));
  EXPECT_TRUE(IsFloating(DType::kF8E4M3FN));
  EXPECT_FALSE(IsFloating(DType::kC64));
  EXPECT_FALSE(IsFloating(DType::kI32));
  EXPECT_TRUE(IsInteger(DType::kU8));
  EXPECT_FALSE(IsInteger(DType::kBool));
  EXPECT_EQ(ArrayDTypes().size(), 7u);
  for (DType d : ArrayDTypes()) EXPECT_TRUE(IsArrayDType(d));
  EXPECT_FALSE(IsArrayDType(DType::kI8));
}

}  // namespace
}  // namespace spmdsim
