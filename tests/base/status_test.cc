#include "ibdt/status.h"

#include <gtest/gtest.h>

namespace ibdt {
namespace {

Result<int> half(int value) {
  if (value % 2 != 0) return makeError(Code::kInvalidArgument, "half: ", value, " is odd");
  return value / 2;
}

Result<int> quarter(int value) {
  IBDT_ASSIGN_OR_RETURN(int h, half(value));
  IBDT_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

Status checkEven(int value) {
  IBDT_RETURN_IF_ERROR(half(value).status());
  return Status::ok();
}

TEST(Status, OkIsCheapAndEmpty) {
  Status ok;
  EXPECT_TRUE(ok.isOk());
  EXPECT_FALSE(ok.isError());
  EXPECT_EQ(ok.toString(), "ok");
}

TEST(Status, BackPressureIsNotAnError) {
  EXPECT_FALSE(Status(Code::kAgain, "").isError());
  EXPECT_FALSE(Status(Code::kInProgress, "").isError());
  EXPECT_TRUE(Status(Code::kTimeout, "").isError());
}

TEST(Status, MessageAndContext) {
  Status status = makeError(Code::kPeerFailed, "rank ", 3, " exited with code ", 1);
  status.withContext("barrier");
  EXPECT_EQ(status.toString(), "peer-failed: barrier: rank 3 exited with code 1");
  Status copy = status;
  EXPECT_EQ(copy.toString(), status.toString());
}

TEST(Result, PropagatesValuesAndErrors) {
  auto good = quarter(12);
  ASSERT_TRUE(good.isOk());
  EXPECT_EQ(*good, 3);
  auto bad = quarter(6);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "half: 3 is odd");
  EXPECT_TRUE(checkEven(4).isOk());
  EXPECT_EQ(checkEven(5).code(), Code::kInvalidArgument);
}

TEST(Result, OkStatusIsRejected) {
  Result<int> result{Status::ok()};
  EXPECT_FALSE(result.isOk());
  EXPECT_EQ(result.status().code(), Code::kInternal);
}

TEST(Status, EveryCodeHasAName) {
  for (int c = 0; c <= static_cast<int>(Code::kInternal); ++c) {
    EXPECT_NE(codeName(static_cast<Code>(c)), "unknown") << c;
  }
}

}  // namespace
}  // namespace ibdt
