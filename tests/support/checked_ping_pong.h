// tests/support/checked_ping_pong.h — blocking 8-byte round trips between
// ranks 0 and 1 of a thread-ranks job, every value checked.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "support/thread_ranks.h"

namespace ibdt::messaging::testing {

// Rank 0 sends then receives, rank 1 receives then replies; each value
// names its round trip and its sender. Call from ranks 0 and 1 only.
inline void checkedPingPong(RankEnv& env, int64_t roundTrips, int32_t tag) {
  const datatype::Datatype type = datatype::Datatype::of<int64_t>();
  const int other = 1 - env.rank;
  for (int64_t trip = 0; trip < roundTrips; ++trip) {
    int64_t value = trip * 7 + env.rank;
    int64_t echoed = -1;
    if (env.rank == 0) {
      ASSERT_TRUE(env.context.send(&value, 1, type, other, tag).isOk());
      ASSERT_TRUE(env.context.recv(&echoed, 1, type, other, tag).isOk());
    } else {
      ASSERT_TRUE(env.context.recv(&echoed, 1, type, other, tag).isOk());
      ASSERT_TRUE(env.context.send(&value, 1, type, other, tag).isOk());
    }
    ASSERT_EQ(echoed, trip * 7 + other) << "round trip " << trip;
  }
}

}  // namespace ibdt::messaging::testing
