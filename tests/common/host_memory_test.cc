#include "common/host_memory.h"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/util/catch_error.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

TEST(HostMemory, ReportsSomeAvailableMemory) { EXPECT_GT(HostMemoryAvailableBytes(), 0); }

TEST(HostMemory, ArrayBytesSaysWhenTheProductOverflows) {
  EXPECT_EQ(ArrayBytes(std::vector<int64_t>{2, 3}, 4), 24);
  EXPECT_EQ(ArrayBytes(std::vector<int64_t>{}, 8), 8);
  EXPECT_EQ(ArrayBytes(std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40}, 4), -1);
}

TEST(HostMemory, RefusesMoreThanTheHostHasNamingWhatAsked) {
  CheckFitsHostMemory("a small array", 1024);
  Error e = CatchError([] { CheckFitsHostMemory("array 'x' (float32 (1048576, 1048576, 1024))", int64_t{1} << 62); });
  EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(e.message(), HasSubstr("array 'x' (float32 (1048576, 1048576, 1024)) needs 4611686018427387904 bytes"));
  EXPECT_THAT(e.message(), HasSubstr("of host memory; this host has"));
  e = CatchError([] { CheckFitsHostMemory("y", -1); });
  EXPECT_THAT(e.message(), HasSubstr("y needs more than 2^63 bytes"));
}

}  // namespace
}  // namespace spmdsim
