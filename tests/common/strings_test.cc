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

TEST(PyRepr, QuotesLikePython) {
  EXPECT_EQ(PyRepr("dp"), "'dp'");
  EXPECT_EQ(PyRepr("it's"), "\"it's\"");
  EXPECT_EQ(PyRepr("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(PyRepr("a\\b\n"), "'a\\\\b\\n'");
  EXPECT_EQ(PyTuple(std::vector<std::string>{"it's"}), "(\"it's\",)");
}

TEST(PyTuple, PrintsSpansOfDimensions) {
  const int64_t dims[] = {8, 128};
  EXPECT_EQ(PyTuple(std::span<const int64_t>(dims)), "(8, 128)");
  EXPECT_EQ(PyTuple(std::span<const int64_t>(dims, 1)), "(8,)");
}

TEST(HumanBytes, WritesBytesAsXlaDoesInItsMessages) {
  EXPECT_EQ(HumanBytes(0), "0B");
  EXPECT_EQ(HumanBytes(12), "12B");
  EXPECT_EQ(HumanBytes(1023), "1023B");
  EXPECT_EQ(HumanBytes(1024), "1.00KiB");
  EXPECT_EQ(HumanBytes(1536), "1.50KiB");
  EXPECT_EQ(HumanBytes(4210688), "4.02MiB");
  EXPECT_EQ(HumanBytes(32 * kGiB), "32.00GiB");
  EXPECT_EQ(HumanBytes(3 * kTiB), "3.00TiB");
  EXPECT_EQ(HumanBytes(4096 * 1024 * kTiB), "4096.00PiB");
  EXPECT_EQ(HumanBytes(-2048), "-2.00KiB");
}

TEST(FormatSeconds, ThreeDigitsInTheUnitTheValueReaches) {
  EXPECT_EQ(FormatSeconds(1.5e-6), "1.5 us");
  EXPECT_EQ(FormatSeconds(0.012345), "12.3 ms");
  EXPECT_EQ(FormatSeconds(2.054), "2.05 s");
  EXPECT_EQ(FormatSeconds(0), "0 us");
  EXPECT_EQ(FormatSeconds(4e-10), "0.4 ns");
  EXPECT_EQ(FormatSeconds(-0.002), "-2 ms");
}

TEST(FormatSeconds, AsWrittenKeepsEveryDigitInMillisecondsOrMicroseconds) {
  EXPECT_EQ(FormatSeconds(1e-6, SecondsStyle::kAsWritten), "1 us");
  EXPECT_EQ(FormatSeconds(1e-7, SecondsStyle::kAsWritten), "0.1 us");
  EXPECT_EQ(FormatSeconds(1.2345e-5, SecondsStyle::kAsWritten), "12.345 us");
  EXPECT_EQ(FormatSeconds(2e-3, SecondsStyle::kAsWritten), "2 ms");
  EXPECT_EQ(FormatSeconds(1.5, SecondsStyle::kAsWritten), "1500 ms");
}

TEST(Units, ColumnsTakeTheLargestUnitTheirLargestValueReaches) {
  EXPECT_EQ(TimeUnitFor(3).name, "s");
  EXPECT_EQ(TimeUnitFor(3e-4).name, "us");
  EXPECT_EQ(TimeUnitFor(0).name, "us");
  EXPECT_EQ(TimeUnitFor(1e-7).scale, 1e-9);
  EXPECT_EQ(ByteUnitFor(3.0 * kGiB).name, "GiB");
  EXPECT_EQ(ByteUnitFor(1000).name, "B");
  EXPECT_EQ(ByteUnitFor(2 * kKiB).scale, 1024);
}

TEST(ParseNamedSizes, KeepsOrderAndRejectsRepeats) {
  EXPECT_THAT(ParseNamedSizes("data=4, model=2", "--mesh"), ElementsAre(Pair("data", 4), Pair("model", 2)));
  EXPECT_THROW(ParseNamedSizes("a=2,a=2", "--mesh"), Error);
  EXPECT_THROW(ParseNamedSizes("a2", "--mesh"), Error);
  EXPECT_THROW(ParseNamedSizes("a=-1", "--mesh"), Error);
}

TEST(Error, CarriesCodeKindAndMessage) {
  Error e(ErrorCode::kNotFound, "mesh has no axis 'q'", ErrorKind::kValueError);
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_STREQ(e.what(), "ValueError: mesh has no axis 'q'");
  EXPECT_EQ(Error(ErrorCode::kInternal, "x").what(), std::string("INTERNAL: x"));
}

}  // namespace
}  // namespace spmdsim
