// alltoallv with ranks as threads over the loopback fabric (fast, RC rules
// enforced): the direct and the in-place algorithm over count matrices from
// a seed (random with zeros, one huge peer, all to one, one to all, a few
// peers, all equal) for p in {1, 2, 3, 4, 5, 7, 8}, contiguous and derived
// types; every byte of every buffer checked against what its sender meant.
// The in-place runs go from one element of auxiliary memory to 100 % of the
// data and assert the peak extra memory; zero-copy Bruck runs as a
// persistent plan started twice. Then persistent plans, bad
// arguments, mismatched pairs and a dead rank (errors, never hangs).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <thread>

#include "collectives/alltoallv_data.h"
#include "collectives/inplace_plan_runs.h"
#include "collectives/plan_checks.h"
#include "collectives/world.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"
#include "support/scoped_env.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;
using testing::AlltoallvBuffers;
using testing::CountMatrix;
using testing::InPlaceBuffer;
using testing::Side;
using testing::Spread;

using testing::world;

// Bookkeeping beyond a: O(p), whatever the counts (docs/alltoallv.md).
using testing::inPlaceBookkeepingBound;

Status directExchange(Communicator& comm, AlltoallvBuffers& buffers, const Side& send, const Side& recv,
                      AlltoallvOptions options = {}) {
  return alltoallv(comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), send.type, buffers.recvbuf(),
                   buffers.recvcounts(), buffers.rdispls(), recv.type, options, soon());
}

Status inPlaceExchange(Communicator& comm, InPlaceBuffer& buffer, const Datatype& type, AlltoallvOptions options,
                       int64_t* peak = nullptr) {
  auto plan = alltoallvInit(comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), Datatype(), buffer.buffer(),
                            buffer.recvcounts(), buffer.rdispls(), type, options);
  if (!plan.isOk()) return plan.status();
  IBDT_RETURN_IF_ERROR(plan->start());
  Status status = plan->wait(soon());
  if (peak != nullptr) *peak = plan->peakExtraBytes();
  return status;
}

class AlltoallvThreads : public ::testing::TestWithParam<int> {};

// Element sides (count 1) of equal signature: bytes, strided -> dense, dense -> strided.
std::vector<std::pair<Side, Side>> typePairs() {
  Side strided = testing::vectorSide(1);
  Side dense = testing::denseSide(strided.type, 1);
  return {{testing::byteSide(1), testing::byteSide(1)}, {strided, dense}, {dense, strided}};
}

// Runs `body` on every count spread x type pair at this rank count (the
// seed differs per spread, pair and `salt`), with the problem's buffers.
void forEachProblem(RankEnv& env, int size, uint64_t salt,
                    const std::function<void(const std::string& where, const CountMatrix& counts, const Side& send,
                                             const Side& recv, AlltoallvBuffers& buffers, uint64_t seed)>& body) {
  const auto types = typePairs();
  for (Spread spread : testing::kSpreads) {
    for (size_t t = 0; t < types.size(); ++t) {
      const uint64_t seed = salt + static_cast<uint64_t>(size) * 17 + t;
      const CountMatrix counts = testing::countMatrix(spread, size, seed, t == 0 ? 3000 : 60);
      AlltoallvBuffers buffers(counts, types[t].first, types[t].second, env.rank, seed);
      const std::string where = std::string(testing::spreadName(spread)) + " types " + std::to_string(t);
      body(where, counts, types[t].first, types[t].second, buffers, seed);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Starts the persistent `plan` twice, every byte checked after each run.
void runTwiceChecked(RankEnv& env, Plan& plan, AlltoallvBuffers& buffers, const std::string& where) {
  for (int run = 0; run < 2; ++run) {
    buffers.clearReceive();
    env.barrier();
    ASSERT_TRUE(plan.start().isOk());
    Status status = plan.wait(soon());
    ASSERT_TRUE(status.isOk()) << where << " run " << run << ": " << status.toString();
    EXPECT_EQ(buffers.check(), "") << where << " run " << run;
    env.barrier();
  }
}

TEST_P(AlltoallvThreads, DirectEverySpreadAndType) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    forEachProblem(env, size, 1000, [&](const std::string& where, const CountMatrix&, const Side& send,
                                        const Side& recv, AlltoallvBuffers& buffers, uint64_t seed) {
      AlltoallvOptions options;
      options.algorithm = AlltoallvAlgorithm::kPairwise;  // auto takes the mailbox on one node (its own tests)
      options.throttle = static_cast<int64_t>(seed % 3 == 0 ? 0 : seed % 3 == 1 ? 1 : 8);
      Status status = directExchange(*comm, buffers, send, recv, options);
      ASSERT_TRUE(status.isOk()) << where << ": " << status.toString();
      EXPECT_EQ(buffers.check(), "") << where;
    });
  });
}

// Zero-copy Bruck over the same problems, as a persistent plan started
// twice; its intermediate buffer holds fewer than ⌊p/2⌋ + 1 blocks of the
// largest block any rank forwards (bounded here by the largest block sent).
TEST_P(AlltoallvThreads, BruckZeroCopyEverySpreadAndType) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    forEachProblem(env, size, 3000, [&](const std::string& where, const CountMatrix& counts, const Side& send,
                                        const Side& recv, AlltoallvBuffers& buffers, uint64_t) {
      AlltoallvOptions options;
      options.algorithm = AlltoallvAlgorithm::kBruckZeroCopy;
      auto plan = alltoallvInit(*comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), send.type,
                                buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), recv.type, options);
      ASSERT_TRUE(plan.isOk()) << where << ": " << plan.status().toString();
      EXPECT_EQ(plan->algorithm(), "bruck-zero-copy");
      int64_t largest = 0;
      for (const auto& row : counts) largest = std::max(largest, *std::max_element(row.begin(), row.end()));
      EXPECT_LE(plan->peakExtraBytes(), (size / 2 + 1) * largest * send.bytes()) << where;
      runTwiceChecked(env, *plan, buffers, where);
    });
  });
}

// The shared segment over the same problems (forced), as a persistent plan
// started twice; its extra memory is the rank's share: a line and two rows
// of its outgoing bytes.
TEST_P(AlltoallvThreads, SharedMemoryEverySpreadAndType) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    forEachProblem(env, size, 5000, [&](const std::string& where, const CountMatrix& counts, const Side& send,
                                        const Side& recv, AlltoallvBuffers& buffers, uint64_t) {
      AlltoallvOptions options;
      options.algorithm = AlltoallvAlgorithm::kSharedMemory;
      auto plan = alltoallvInit(*comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), send.type,
                                buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), recv.type, options);
      ASSERT_TRUE(plan.isOk()) << where << ": " << plan.status().toString();
      EXPECT_EQ(plan->algorithm(), "shared-memory");
      int64_t outgoing = 0;
      for (int peer = 0; peer < size; ++peer) {
        if (peer != env.rank) outgoing += counts[static_cast<size_t>(env.rank)][static_cast<size_t>(peer)];
      }
      EXPECT_LE(plan->peakExtraBytes(), 64 + 2 * (outgoing * send.bytes() + 63)) << where;
      runTwiceChecked(env, *plan, buffers, where);
    });
  });
}

// In place, auto takes the segment when every rank's share fits its
// auxiliary memory and the limited-memory algorithm when one does not.
TEST_P(AlltoallvThreads, InPlaceThroughTheSegmentWhereItFits) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    for (Spread spread : testing::kSpreads) {
      const uint64_t seed = 6000 + static_cast<uint64_t>(size) * 13 + static_cast<uint64_t>(spread);
      const CountMatrix counts = testing::countMatrix(spread, size, seed, 700);
      int64_t largestRow = 0;
      for (const auto& row : counts) largestRow = std::max(largestRow, 4 * std::accumulate(row.begin(), row.end(), int64_t{0}));
      const int64_t enough = 64 + 2 * (largestRow + 63);
      for (int64_t budget : {enough, enough / 4}) {
        InPlaceBuffer buffer(counts, 4, env.rank, seed);
        AlltoallvOptions options;
        options.inplaceBytes = std::max<int64_t>(4, budget);
        auto plan = alltoallvInit(*comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), Datatype(), buffer.buffer(),
                                  buffer.recvcounts(), buffer.rdispls(), Datatype::of<int32_t>(), options);
        const std::string where = std::string(testing::spreadName(spread)) + " budget " + std::to_string(budget);
        ASSERT_TRUE(plan.isOk()) << where << ": " << plan.status().toString();
        const bool segment = size > 1 && budget == enough;
        EXPECT_EQ(plan->algorithm(), segment ? "shared-memory" : "in-place") << where;
        for (int run = 0; run < 2; ++run) {
          buffer.refill();
          env.barrier();
          ASSERT_TRUE(plan->start().isOk());
          Status status = plan->wait(soon());
          ASSERT_TRUE(status.isOk()) << where << ": " << status.toString();
          EXPECT_EQ(buffer.check(), "") << where << " run " << run;
          env.barrier();
        }
        EXPECT_LE(plan->peakExtraBytes(), options.inplaceBytes + inPlaceBookkeepingBound(size)) << where;
      }
    }
  });
}

// Auxiliary memory from one element to 100 % of the incoming data, with
// the peak extra memory at most a plus O(p) bookkeeping.
TEST_P(AlltoallvThreads, InPlaceEverySpreadAndAuxiliarySize) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    const Datatype item = Datatype::of<int32_t>();
    for (Spread spread : testing::kSpreads) {
      const uint64_t seed = 2000 + static_cast<uint64_t>(size) * 13 + static_cast<uint64_t>(spread);
      const CountMatrix counts = testing::countMatrix(spread, size, seed, 700);
      for (int percent : {0, 1, 10, 100}) {  // 0: one element
        InPlaceBuffer buffer(counts, 4, env.rank, seed);
        // Every rank must pick the same a: from the largest receive total.
        const int64_t largest = testing::largestIncoming(counts, 4);
        AlltoallvOptions options;
        options.algorithm = AlltoallvAlgorithm::kInPlaceLimited;  // not the segment, which auto takes where it fits
        options.inplaceBytes = std::max<int64_t>(4, largest * percent / 100);
        options.inplaceBuffers = percent == 10 ? 3 : 0;
        int64_t peak = 0;
        Status status = inPlaceExchange(*comm, buffer, item, options, &peak);
        const std::string where = std::string(testing::spreadName(spread)) + " aux " + std::to_string(percent) + "%";
        ASSERT_TRUE(status.isOk()) << where << ": " << status.toString();
        EXPECT_EQ(buffer.check(), "") << where;
        EXPECT_LE(peak, options.inplaceBytes + inPlaceBookkeepingBound(size)) << where;
        EXPECT_GT(peak, 0) << where;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, AlltoallvThreads, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         [](const auto& ranks) { return "np" + std::to_string(ranks.param); });

// The same bound whatever the message sizes: 40 x larger blocks, the same a.
TEST(AlltoallvInPlace, PeakExtraMemoryDoesNotGrowWithTheMessages) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    for (int64_t scale : {500, 20000}) {
      const CountMatrix counts = testing::countMatrix(Spread::kRandom, 4, 77, scale);
      InPlaceBuffer buffer(counts, 8, env.rank, 77);
      AlltoallvOptions options;
      options.inplaceBytes = 4096;
      int64_t peak = 0;
      Status status = inPlaceExchange(*comm, buffer, Datatype::of<double>(), options, &peak);
      ASSERT_TRUE(status.isOk()) << status.toString();
      EXPECT_EQ(buffer.check(), "") << "scale " << scale;
      EXPECT_LE(peak, 4096 + inPlaceBookkeepingBound(4)) << "scale " << scale;
    }
  });
}

// A persistent plan of each algorithm started three times (once driven by
// test()), every byte checked each time.
TEST(AlltoallvPlans, StartedRepeatedly) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    const CountMatrix counts = testing::countMatrix(Spread::kRandom, 3, 5, 400);
    const Side bytes = testing::byteSide(1);
    AlltoallvBuffers buffers(counts, bytes, bytes, env.rank, 5);
    AlltoallvBuffers viaSegment(counts, bytes, bytes, env.rank, 6);
    InPlaceBuffer single(counts, 1, env.rank, 5), singleViaSegment(counts, 1, env.rank, 7);
    AlltoallvOptions small, pairwise, shared;
    small.inplaceBytes = 64;  // too little for the segment: auto runs the in-place algorithm
    pairwise.algorithm = AlltoallvAlgorithm::kPairwise;
    shared.algorithm = AlltoallvAlgorithm::kSharedMemory;
    auto direct = alltoallvInit(*comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), bytes.type,
                                buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), bytes.type, pairwise);
    auto inPlace = alltoallvInit(*comm, kInPlace, single.sendcounts(), single.sdispls(), Datatype(), single.buffer(),
                                 single.recvcounts(), single.rdispls(), bytes.type, small);
    auto segment = alltoallvInit(*comm, viaSegment.sendbuf(), viaSegment.sendcounts(), viaSegment.sdispls(),
                                 bytes.type, viaSegment.recvbuf(), viaSegment.recvcounts(), viaSegment.rdispls(),
                                 bytes.type, shared);
    // In place with the default 1 MiB: auto takes the segment (one node).
    auto inPlaceSegment = alltoallvInit(*comm, kInPlace, singleViaSegment.sendcounts(), singleViaSegment.sdispls(),
                                        Datatype(), singleViaSegment.buffer(), singleViaSegment.recvcounts(),
                                        singleViaSegment.rdispls(), bytes.type);
    for (auto* plan : {&direct, &inPlace, &segment, &inPlaceSegment}) {
      ASSERT_TRUE(plan->isOk()) << plan->status().toString();
    }
    EXPECT_EQ(direct->algorithm(), "pairwise");
    EXPECT_EQ(inPlace->algorithm(), "in-place");
    EXPECT_EQ(segment->algorithm(), "shared-memory");
    EXPECT_EQ(inPlaceSegment->algorithm(), "shared-memory");
    for (int run = 0; run < 3; ++run) {
      buffers.clearReceive();
      viaSegment.clearReceive();
      single.refill();
      singleViaSegment.refill();
      env.barrier();  // every buffer is ready before anyone's run writes into it
      for (Plan* plan : {&*direct, &*inPlace, &*segment, &*inPlaceSegment}) {
        ASSERT_TRUE(plan->start().isOk());
        if (run == 1) {
          bool done = false;
          for (auto deadline = soon(); !done && !deadline.expired();) {
            auto tested = plan->test();
            ASSERT_TRUE(tested.isOk()) << tested.status().toString();
            done = *tested;
          }
          ASSERT_TRUE(done);
        }
        Status status = plan->wait(soon());
        ASSERT_TRUE(status.isOk()) << plan->algorithm() << " run " << run << ": " << status.toString();
      }
      EXPECT_EQ(buffers.check(), "") << "run " << run;
      EXPECT_EQ(viaSegment.check(), "") << "run " << run;
      EXPECT_EQ(single.check(), "") << "run " << run;
      EXPECT_EQ(singleViaSegment.check(), "") << "run " << run;
      env.barrier();
    }
  });
}

// A shared-segment wait that gives up leaves the run resumable.
TEST(AlltoallvPlans, SharedMemoryTimedOutWaitResumes) {
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    const Side bytes = testing::byteSide(1);
    AlltoallvBuffers buffers(testing::countMatrix(Spread::kRandom, 2, 8, 100), bytes, bytes, env.rank, 8);
    AlltoallvOptions shared;
    shared.algorithm = AlltoallvAlgorithm::kSharedMemory;
    auto plan = alltoallvInit(*comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), bytes.type,
                              buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), bytes.type, shared);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    ASSERT_NO_FATAL_FAILURE(testing::checkTimedOutWaitResumes(env, *plan, "receive from rank 1"));
    EXPECT_EQ(buffers.check(), "");
  });
}

}  // namespace
}  // namespace ibdt::collectives
