#include "common/file.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/util/catch_error.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "file_test_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(ReadFileBounded, ReadsARegularFileWhole) {
  std::string path = WriteTemp("ok.txt", std::string("a\0b\n", 4));
  EXPECT_EQ(ReadFileBounded(path, 4, "test file"), std::string("a\0b\n", 4));
}

TEST(ReadFileBounded, RefusesADeviceInsteadOfReadingForever) {
  Error e = CatchError([] { ReadFileBounded("/dev/zero", kMaxTextFileBytes, "scenario file"); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message(), "cannot read scenario file '/dev/zero': it is a device; give the path of a regular file");
}

TEST(ReadFileBounded, RefusesADirectory) {
  Error e = CatchError([] { ReadFileBounded(::testing::TempDir(), kMaxTextFileBytes, "--rules-file"); });
  EXPECT_THAT(e.message(), HasSubstr("it is a directory"));
}

TEST(ReadFileBounded, RefusesAFileOverTheLimitSayingBothSizes) {
  std::string path = WriteTemp("big.txt", std::string(11, 'x'));
  Error e = CatchError([&] { ReadFileBounded(path, 10, "scenario file"); });
  EXPECT_THAT(e.message(), HasSubstr("it is 11 bytes, more than the limit of 10 bytes"));
}

TEST(ReadFileBounded, SaysWhenTheFileDoesNotExist) {
  Error e = CatchError([] { ReadFileBounded("/nonexistent/x.yaml", 10, "scenario file"); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_EQ(e.message(), "cannot read scenario file '/nonexistent/x.yaml': no such file");
}

}  // namespace
}  // namespace spmdsim
