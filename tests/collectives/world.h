// tests/collectives/world.h — the communicator of every rank of a thread-rank
// test, or nullptr (with a test failure naming why) when it cannot be made.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives::testing {

inline std::unique_ptr<Communicator> world(messaging::Context& context) {
  auto comm = Communicator::create(context);
  EXPECT_TRUE(comm.isOk()) << comm.status().toString();
  return comm.isOk() ? std::move(*comm) : nullptr;
}

inline std::unique_ptr<Communicator> world(messaging::testing::RankEnv& env) { return world(env.context); }

}  // namespace ibdt::collectives::testing
