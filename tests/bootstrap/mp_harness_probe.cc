// A multi-process gtest that fails on rank 1 only: the launcher test checks
// that ibdt_add_mp_gtest's main() then stops every rank and names rank 1.
// (Not a ctest of its own: it is meant to fail.)
#include <gtest/gtest.h>

#include "support/mp_test.h"

TEST(MpHarness, FailsOnRankOneOnly) { EXPECT_NE(ibdt::test::mpStore().rank(), 1) << "deliberate failure"; }

// Never reached: the job stops after the failing test.
TEST(MpHarness, RunsAfterTheFailure) { std::printf("reached the next test\n"); }
