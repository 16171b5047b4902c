#include "base/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "base/log.h"

#include "support/scoped_env.h"

using ibdt::test::ScopedEnv;

namespace ibdt::config {
namespace {

TEST(Config, DefaultsComeFromTheTable) {
  ::unsetenv("IBDT_STATS");
  auto value = getBool("IBDT_STATS");
  ASSERT_TRUE(value.isOk());
  EXPECT_FALSE(*value);
  EXPECT_NE(findKnob("IBDT_LOG"), nullptr);
}

TEST(Config, UndeclaredKnobIsABug) {
  auto value = getString("IBDT_NO_SUCH_KNOB");
  ASSERT_FALSE(value.isOk());
  EXPECT_EQ(value.status().code(), Code::kInternal);
}

TEST(Config, BadValueIsAClearError) {
  ScopedEnv env("IBDT_STATS", "maybe");
  auto value = getBool("IBDT_STATS");
  ASSERT_FALSE(value.isOk());
  EXPECT_EQ(value.status().code(), Code::kInvalidArgument);
  EXPECT_NE(value.status().message().find("IBDT_STATS='maybe'"), std::string_view::npos);
}

TEST(Config, Choices) {
  ScopedEnv env("IBDT_LOG", "DEBUG");
  auto level = getChoice("IBDT_LOG", {"error", "warn", "info", "debug", "trace"});
  ASSERT_TRUE(level.isOk());
  EXPECT_EQ(*level, 3);
  ScopedEnv bad("IBDT_LOG", "loud");
  auto wrong = getChoice("IBDT_LOG", {"error", "warn"});
  ASSERT_FALSE(wrong.isOk());
  EXPECT_NE(wrong.status().message().find("one of error, warn"), std::string_view::npos);
}

TEST(Config, Sizes) {
  EXPECT_EQ(*parseSize("4096"), 4096u);
  EXPECT_EQ(*parseSize("64K"), 65536u);
  EXPECT_EQ(*parseSize("16m"), 16u << 20);
  EXPECT_EQ(*parseSize("1GiB"), 1ull << 30);
  EXPECT_EQ(parseSize("12Q").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parseSize("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parseSize("-1").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parseSize("17179869184G").status().code(), Code::kOverflow);
}

TEST(Config, UnknownVariablesAreReported) {
  ScopedEnv env("IBDT_TYPO_KNOB", "1");
  EXPECT_NE(unknownVariables().find("IBDT_TYPO_KNOB"), std::string::npos);
}

TEST(Config, UnknownVariablesGetTheNearestKnobSuggested) {
  ScopedEnv typo("IBDT_REG_CACHE_MAX_BYTE", "1G");
  ScopedEnv stranger("IBDT_SOMETHING_ELSE_ENTIRELY", "1");
  std::string text = unknownVariablesWithSuggestions();
  EXPECT_NE(text.find("IBDT_REG_CACHE_MAX_BYTE (did you mean IBDT_REG_CACHE_MAX_BYTES?)"), std::string::npos) << text;
  EXPECT_NE(text.find("IBDT_SOMETHING_ELSE_ENTIRELY"), std::string::npos) << text;
  EXPECT_EQ(text.find("IBDT_SOMETHING_ELSE_ENTIRELY ("), std::string::npos) << text;  // nothing near: no guess
}

}  // namespace
}  // namespace ibdt::config
