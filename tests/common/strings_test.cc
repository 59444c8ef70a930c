#include "common/strings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(PyTuple, PrintsLikePython) {
  EXPECT_EQ(PyTuple(std::vector<int64_t>{}), "()");
  EXPECT_EQ(PyTuple(std::vector<int64_t>{4}), "(4,)");
  EXPECT_EQ(PyTuple(std::vector<int64_t>{2, 2}), "(2, 2)");
  EXPECT_EQ(PyTuple(std::vector<std::string>{"x"}), "('x',)");
  EXPECT_EQ(PyTuple(std::vector<std::string>{"x", "y"}), "('x', 'y')");
}

TEST(ParseDims, ReadsDimensionStrings) {
  EXPECT_THAT(ParseDims("2x2x4", "t"), ElementsAre(2, 2, 4));
  EXPECT_THAT(ParseDims("8", "t"), ElementsAre(8));
}

TEST(ParseDims, RejectsMalformedDimensionsNamingTheField) {
  try {
    ParseDims("2xax4", "topology 'tpu-v4:2xax4'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("topology 'tpu-v4:2xax4'"));
  }
  EXPECT_THROW(ParseDims("2x0", "t"), Error);
  EXPECT_THROW(ParseDims("", "t"), Error);
}

TEST(ParseNamedSizes, KeepsOrderAndRejectsRepeats) {
  EXPECT_THAT(ParseNamedSizes("data=4, model=2", "--mesh"), ElementsAre(Pair("data", 4), Pair("model", 2)));
  EXPECT_THROW(ParseNamedSizes("a=2,a=2", "--mesh"), Error);
  EXPECT_THROW(ParseNamedSizes("a2", "--mesh"), Error);
  EXPECT_THROW(ParseNamedSizes("a=-1", "--mesh"), Error);
}

TEST(Error, CarriesCodeKindAndMessage) {
  Error e(ErrorCode::kNotFound, "mesh has no axis 'q'", "ValueError");
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_EQ(e.kind(), "ValueError");
  EXPECT_STREQ(e.what(), "ValueError: mesh has no axis 'q'");
  EXPECT_EQ(Error(ErrorCode::kInternal, "x").what(), std::string("INTERNAL: x"));
}

}  // namespace
}  // namespace spmdsim
