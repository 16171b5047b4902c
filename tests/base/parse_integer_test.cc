#include "base/parse_integer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace ibdt {
namespace {

TEST(ParseInteger, TakesTheWholeTextOrNothing) {
  EXPECT_EQ(parseInteger<int>("42"), 42);
  EXPECT_EQ(parseInteger<int>("-7"), -7);
  EXPECT_EQ(parseInteger<int>("007"), 7);
  EXPECT_EQ(parseInteger<int>(""), std::nullopt);
  EXPECT_EQ(parseInteger<int>("4 "), std::nullopt);
  EXPECT_EQ(parseInteger<int>(" 4"), std::nullopt);
  EXPECT_EQ(parseInteger<int>("4k"), std::nullopt);
  EXPECT_EQ(parseInteger<int>("+4"), std::nullopt);
  EXPECT_EQ(parseInteger<int>("0x10"), std::nullopt);
}

TEST(ParseInteger, RefusesWhatTheTypeCannotHold) {
  EXPECT_EQ(parseInteger<int>("2147483647"), std::numeric_limits<int>::max());
  EXPECT_EQ(parseInteger<int>("2147483648"), std::nullopt);
  EXPECT_EQ(parseInteger<size_t>("-1"), std::nullopt);
  EXPECT_EQ(parseInteger<int64_t>("99999999999999999999"), std::nullopt);
  EXPECT_EQ(parseInteger<uint8_t>("256"), std::nullopt);
}

TEST(ParseCanonicalPositive, OneSpellingPerValueBelowTheLimit) {
  EXPECT_EQ(parseCanonicalPositive("4", 10), 4);
  EXPECT_EQ(parseCanonicalPositive("9", 10), 9);
  EXPECT_EQ(parseCanonicalPositive("10", 10), std::nullopt);
  EXPECT_EQ(parseCanonicalPositive("04", 10), std::nullopt);
  EXPECT_EQ(parseCanonicalPositive("0", 10), std::nullopt);
  EXPECT_EQ(parseCanonicalPositive("-4", 10), std::nullopt);
  EXPECT_EQ(parseCanonicalPositive("", 10), std::nullopt);
  EXPECT_EQ(parseCanonicalPositive("4x", 10), std::nullopt);
  EXPECT_EQ(parseCanonicalPositive("99999999999999999999", std::numeric_limits<int64_t>::max()), std::nullopt);
}

}  // namespace
}  // namespace ibdt
