// The checked alltoallv (collectives/checked_alltoallv.h) with ranks as
// threads: plans built and reused independently per rank on one pinned tag
// pair up; only changed pairs are checked; a pair changed on one rank only
// fails on both ranks of the pair within the deadline instead of hanging.
// Every received int and the gap after each block are checked.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "collectives/checked_alltoallv.h"
#include "collectives/world.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;

constexpr int32_t kDataTag = Communicator::kFirstReservedPlanTag;
constexpr int32_t kCheckTag = Communicator::kFirstReservedPlanTag + 15;

int32_t valueOf(int from, int to, int64_t i, int salt) { return from * 1000003 + to * 7919 + static_cast<int32_t>(i) + salt; }

// Ints `from` sends `to`, and what one rank runs with them.
struct Call {
  std::vector<int64_t> sc, sd, rc, rd;
  std::vector<int32_t> send, recv;
};

Call callOf(int rank, int size, int64_t (*sent)(int, int), int64_t (*expected)(int, int)) {
  Call c;
  int64_t sendAt = 0, recvAt = 0;
  for (int peer = 0; peer < size; ++peer) {
    c.sc.push_back(sent(rank, peer));
    c.sd.push_back(sendAt);
    sendAt += c.sc.back() + 1;
    c.rc.push_back(expected(peer, rank));
    c.rd.push_back(recvAt);
    recvAt += c.rc.back() + 1;  // one int of gap after each block
  }
  c.send.resize(static_cast<size_t>(sendAt));
  c.recv.resize(static_cast<size_t>(recvAt));
  return c;
}

int64_t baseInts(int from, int to) { return (from + 2 * to) % 4 * 3 + (from == to ? 1 : 0); }
int64_t moreToOne(int from, int to) { return baseInts(from, to) + (from == 0 && to == 1 ? 2 : 0); }
int64_t pairGrown(int from, int to) { return baseInts(from, to) + (from + to == 1 ? 3 : 0); }  // 0-1 both ways

// A plan whose first run is the caller's call number `call`.
Result<Plan> build(Communicator& comm, std::shared_ptr<PairCheckHistory> history, Call& c, int64_t call) {
  comm.pinPlanTag(kDataTag);
  const datatype::Datatype i32 = datatype::Datatype::of<int32_t>();
  auto plan = checkedAlltoallvInit(comm, kCheckTag, call, std::move(history), c.send.data(), c.sc, c.sd, i32,
                                   c.recv.data(), c.rc, c.rd, i32, 8);
  comm.unpinPlanTag();
  return plan;
}

// One run with new data; checks the blocks from every peer `checkFrom` accepts.
Status runAndCheck(Plan& plan, Call& c, int rank, int salt, bool (*checkFrom)(int rank, int from)) {
  const int size = static_cast<int>(c.sc.size());
  for (int to = 0; to < size; ++to)
    for (int64_t i = 0; i < c.sc[static_cast<size_t>(to)]; ++i)
      c.send[static_cast<size_t>(c.sd[static_cast<size_t>(to)] + i)] = valueOf(rank, to, i, salt);
  std::fill(c.recv.begin(), c.recv.end(), -1);
  Status status = plan.start();
  if (status.isOk()) status = plan.wait(soon());
  for (int from = 0; from < size; ++from) {
    if (!checkFrom(rank, from)) continue;
    const auto at = static_cast<size_t>(c.rd[static_cast<size_t>(from)]);
    const auto count = static_cast<size_t>(c.rc[static_cast<size_t>(from)]);
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(c.recv[at + i], valueOf(from, rank, static_cast<int64_t>(i), salt));
    EXPECT_EQ(c.recv[at + count], -1) << "gap after rank " << from;
  }
  return status;
}

bool everyPeer(int, int) { return true; }
bool outsideThePair(int rank, int from) { return rank > 1 || from > 1; }

TEST(CheckedAlltoallv, RanksReuseOrRebuildIndependently) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = testing::world(env);
    ASSERT_NE(comm, nullptr);
    auto history = std::make_shared<PairCheckHistory>();
    Call kept = callOf(env.rank, 3, baseInts, baseInts);
    auto plan = build(*comm, history, kept, 1);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_GT(plan->peakExtraBytes(), 0);  // the first plan checks every pair
    for (int salt = 0; salt < 3; ++salt) EXPECT_TRUE(runAndCheck(*plan, kept, env.rank, salt, everyPeer).isOk());
    // Rank 0 builds a new plan on new buffers (no pair changed: no check),
    // the others start their plans again.
    Call moved = callOf(env.rank, 3, baseInts, baseInts);
    Result<Plan> fresh = env.rank == 0 ? build(*comm, history, moved, 4) : Result<Plan>(Plan());
    ASSERT_TRUE(fresh.isOk());
    if (env.rank == 0) {
      EXPECT_EQ(fresh->peakExtraBytes(), 0);
    }
    Status status = env.rank == 0 ? runAndCheck(*fresh, moved, 0, 7, everyPeer)
                                  : runAndCheck(*plan, kept, env.rank, 7, everyPeer);
    EXPECT_TRUE(status.isOk()) << status.toString();
  });
}

TEST(CheckedAlltoallv, PairChangedOnOneRankFailsOnBothNotHangs) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = testing::world(env);
    ASSERT_NE(comm, nullptr);
    auto history = std::make_shared<PairCheckHistory>();
    Call good = callOf(env.rank, 3, baseInts, baseInts);
    auto plan = build(*comm, history, good, 1);
    ASSERT_TRUE(plan.isOk());
    ASSERT_TRUE(runAndCheck(*plan, good, env.rank, 0, everyPeer).isOk());
    // Rank 0 sends rank 1 two more ints; rank 1 (and 2) start their plans again.
    Call bad = callOf(env.rank, 3, moreToOne, baseInts);
    Result<Plan> changed = env.rank == 0 ? build(*comm, history, bad, 2) : Result<Plan>(Plan());
    ASSERT_TRUE(changed.isOk());
    const Status status = env.rank == 0 ? runAndCheck(*changed, bad, 0, 1, outsideThePair)
                                        : runAndCheck(*plan, good, env.rank, 1, outsideThePair);
    if (env.rank == 0) {
      EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.toString();
      EXPECT_NE(status.toString().find("rank 1 did not check"), std::string::npos) << status.toString();
    } else if (env.rank == 1) {
      EXPECT_EQ(status.code(), Code::kTruncated) << status.toString();
    } else {
      EXPECT_TRUE(status.isOk()) << status.toString();
    }
  });
}

// After a one-sided change, rank 0's check message of that call stays
// queued at rank 1 (which did not check). Rank 0 going back needs no check
// (rank 1 would not answer); when both later change the pair and check,
// rank 1 must drop the stale message and take the current one.
TEST(CheckedAlltoallv, StaleCheckOfAnErroneousCallIsDropped) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = testing::world(env);
    ASSERT_NE(comm, nullptr);
    auto history = std::make_shared<PairCheckHistory>();
    Call good = callOf(env.rank, 3, baseInts, baseInts);
    auto plan = build(*comm, history, good, 1);
    ASSERT_TRUE(plan.isOk());
    ASSERT_TRUE(runAndCheck(*plan, good, env.rank, 0, everyPeer).isOk());
    Call bad = callOf(env.rank, 3, moreToOne, baseInts);  // call 2: rank 0 alone changes
    Result<Plan> changed = env.rank == 0 ? build(*comm, history, bad, 2) : Result<Plan>(Plan());
    ASSERT_TRUE(changed.isOk());
    const Status failed = env.rank == 0 ? runAndCheck(*changed, bad, 0, 1, outsideThePair)
                                        : runAndCheck(*plan, good, env.rank, 1, outsideThePair);
    EXPECT_EQ(failed.isOk(), env.rank > 1) << failed.toString();
    // Call 3: rank 0 goes back to the counts rank 1 never left (a new plan:
    // it needs no check, rank 1 would not answer one); the others repeat.
    Call back = callOf(env.rank, 3, baseInts, baseInts);
    Result<Plan> again = env.rank == 0 ? build(*comm, history, back, 3) : Result<Plan>(Plan());
    ASSERT_TRUE(again.isOk());
    const Status backStatus = env.rank == 0 ? runAndCheck(*again, back, 0, 2, everyPeer)
                                            : runAndCheck(*plan, good, env.rank, 2, everyPeer);
    EXPECT_TRUE(backStatus.isOk()) << backStatus.toString();
    // Call 4: ranks 0 and 1 both change their pair (both check it), rank 2 repeats.
    Call grown = callOf(env.rank, 3, pairGrown, pairGrown);
    Result<Plan> next = env.rank < 2 ? build(*comm, history, grown, 4) : Result<Plan>(Plan());
    ASSERT_TRUE(next.isOk());
    const Status status = env.rank < 2 ? runAndCheck(*next, grown, env.rank, 3, everyPeer)
                                       : runAndCheck(*plan, good, env.rank, 3, everyPeer);
    EXPECT_TRUE(status.isOk()) << status.toString();
  });
}

}  // namespace
}  // namespace ibdt::collectives
