// tests/collectives/inplace_plan_runs.h — one in-place alltoallv plan run
// several times with every byte checked, and the bounds its extra memory
// must keep (docs/alltoallv.md), shared by the in-place thread tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "collectives/alltoallv_data.h"
#include "collectives/world.h"
#include "datatype/reference.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives::testing {

// Bookkeeping beyond a: O(p), whatever the counts.
inline int64_t inPlaceBookkeepingBound(int size) { return 4096 + 1024 * int64_t{size}; }
// Inline blocks (up to 256 B per peer each way) come on top when a is smaller.
inline int64_t inPlaceInlineBound(int size) { return 2 * int64_t{size - 1} * 256; }
// The whole bound on an in-place plan's extra memory: a, bookkeeping, inline blocks.
inline int64_t inPlacePeakBound(const AlltoallvOptions& options, int size) {
  return options.inplaceBytes + inPlaceBookkeepingBound(size) + inPlaceInlineBound(size);
}

// Builds the plan over `buffer`, starts it `runs` times (fresh data each
// time, every byte checked) and returns its peak extra bytes (-1 on failure).
inline int64_t runInPlaceChecked(messaging::testing::RankEnv& env, Communicator& comm, InPlaceBuffer& buffer,
                                 const datatype::Datatype& type, const AlltoallvOptions& options, int runs,
                                 const std::string& where) {
  // The limited-memory algorithm itself (auto takes the shared segment where it fits).
  AlltoallvOptions limited = options;
  limited.algorithm = AlltoallvAlgorithm::kInPlaceLimited;
  auto plan = alltoallvInit(comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), datatype::Datatype(),
                            buffer.buffer(), buffer.recvcounts(), buffer.rdispls(), type, limited);
  EXPECT_TRUE(plan.isOk()) << where << ": " << plan.status().toString();
  if (!plan.isOk()) return -1;
  for (int run = 0; run < runs; ++run) {
    buffer.refill();
    env.barrier();  // every buffer is ready before anyone's run writes into it
    EXPECT_TRUE(plan->start().isOk()) << where;
    Status status = plan->wait(messaging::testing::soon());
    EXPECT_TRUE(status.isOk()) << where << " run " << run << ": " << status.toString();
    if (!status.isOk()) return -1;
    EXPECT_EQ(buffer.check(), "") << where << " run " << run;
    env.barrier();
  }
  return plan->peakExtraBytes();
}

// The in-place thread tests' element types: int32 and a strided vector.
inline std::vector<std::pair<std::string, Side>> inPlaceTestElements() {
  return {{"int32", sideOf(datatype::Datatype::of<int32_t>(), datatype::testing::refBasic(datatype::BasicKind::kInt32), 1)},
          {"vector", vectorSide(1)}};
}

// Runs `body(env, comm, spread, name, element, seed)` on `size` ranks for
// every count spread and element type (seed from `base`, the spread and
// the type); stops at the first failure.
template <typename Body>
void forEverySpreadAndElement(int size, const messaging::Options& messagingOptions, uint64_t base, Body body) {
  const auto types = inPlaceTestElements();
  messaging::testing::runRanks(size, messagingOptions, [&](messaging::testing::RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    for (Spread spread : kSpreads) {
      for (size_t t = 0; t < types.size(); ++t) {
        const uint64_t seed = base + static_cast<uint64_t>(size) * 23 + static_cast<uint64_t>(spread) * 5 + t;
        body(env, *comm, spread, types[t].first, types[t].second, seed);
        if (::testing::Test::HasFailure()) return;
      }
    }
  });
}

}  // namespace ibdt::collectives::testing
