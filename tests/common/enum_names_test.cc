#include "common/enum_names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace spmdsim {
namespace {

using ::testing::ElementsAre;

enum class Colour { kRed, kGreen, kBlue };
constexpr EnumName<Colour> kColourNames[] = {{Colour::kRed, "red"}, {Colour::kGreen, "green"}};

TEST(EnumNames, NameOfAndParseNameReadOneTableBothWays) {
  EXPECT_EQ(NameOf(kColourNames, Colour::kGreen), "green");
  EXPECT_EQ(ParseName(kColourNames, "red"), Colour::kRed);
  static_assert(NameOf(kColourNames, Colour::kRed) == "red");  // usable in constant expressions
}

TEST(EnumNames, WhatTheTableLacksIsNotAName) {
  EXPECT_EQ(NameOf(kColourNames, Colour::kBlue), "?");
  EXPECT_EQ(ParseName(kColourNames, "blue"), std::nullopt);
  EXPECT_EQ(ParseName(kColourNames, "Red"), std::nullopt);  // exact
}

TEST(EnumNames, NamesOfListsTheNamesInTableOrder) { EXPECT_THAT(NamesOf(kColourNames), ElementsAre("red", "green")); }

}  // namespace
}  // namespace spmdsim
