// tests/collectives/plan_checks.h — checks every collective Plan must pass,
// whatever its algorithm.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>

#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives::testing {

// A wait that gives up leaves the run active and resumable: with two ranks,
// rank 1 starts `plan` only after rank 0's wait timed out (its message
// cannot have arrived; the timeout must mention `named`), and the next wait
// of each rank completes the run.
inline void checkTimedOutWaitResumes(messaging::testing::RankEnv& env, Plan& plan, std::string_view named) {
  if (env.rank == 0) {
    ASSERT_TRUE(plan.start().isOk());
    Status late = plan.wait(Deadline::after(std::chrono::milliseconds(20)));
    EXPECT_EQ(late.code(), Code::kTimeout) << late.toString();
    EXPECT_NE(late.toString().find(named), std::string::npos) << late.toString();
    EXPECT_TRUE(plan.active());
  }
  env.barrier();
  if (env.rank == 1) {
    ASSERT_TRUE(plan.start().isOk());
  }
  Status status = plan.wait(messaging::testing::soon());
  ASSERT_TRUE(status.isOk()) << status.toString();
  EXPECT_FALSE(plan.active());
}

// Completes a started `plan` by a loop of test() (yielding) or by wait(),
// within the tests' deadline.
inline Status finishPlan(Plan& plan, bool byTest) {
  const Deadline deadline = messaging::testing::soon();
  if (!byTest) return plan.wait(deadline);
  for (;;) {
    IBDT_ASSIGN_OR_RETURN(bool done, plan.test());
    if (done) return plan.wait();
    if (deadline.expired()) return makeError(Code::kTimeout, "test loop");
    std::this_thread::yield();
  }
}

}  // namespace ibdt::collectives::testing
