// Soak: ranks as threads over the loopback fabric run a random mix of
// point-to-point messages of random derived types, alltoall, alltoallv and
// barrier for a given time, every received byte checked against what its
// sender meant (issue 17). Every rank draws the same sequence from one seed
// per round, so they agree on each round's operation without talking.
// SOAK_SECONDS sets the time per rank count (default 20: about a minute
// for 2, 4 and 8 ranks in CI). The kill mode runs short jobs of the same mix
// in which one rank, chosen by the seed, dies after a random round: every
// survivor must end with an error (never a hang or a timeout), and every
// operation that did succeed must have delivered every byte. The rounds
// are tests/support/soak_round.h, shared with `ibdt-bench soak` (the same
// over forked processes and shm, SIGKILL for the kill mode).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "datatype/reference.h"
#include "ibdt/collectives.h"
#include "support/soak_round.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using datatype::testing::TypeGenerator;
using messaging::testing::RankEnv;
using messaging::testing::runRanks;

constexpr uint64_t kSeed = 0x50a4;
constexpr std::chrono::seconds kRoundBound(60);  // a hang fails the test instead of stalling the suite

std::chrono::seconds soakTime() {
  const char* value = std::getenv("SOAK_SECONDS");
  int seconds = value != nullptr ? std::atoi(value) : 20;
  return std::chrono::seconds(seconds > 0 ? seconds : 20);
}

class Soak : public ::testing::TestWithParam<int> {};

TEST_P(Soak, RandomMixDeliversEveryByte) {
  const int size = GetParam();
  const auto until = std::chrono::steady_clock::now() + soakTime();
  std::vector<uint64_t> rounds(static_cast<size_t>(size));
  runRanks(size, testing::soakOptions(), [&](RankEnv& env) {
    auto comm = Communicator::create(env.context);
    ASSERT_TRUE(comm.isOk()) << comm.status().toString();
    testing::SoakTally tally = testing::soakUntil(env.context, **comm, until, kSeed, kRoundBound);
    EXPECT_TRUE(tally.status.isOk()) << "round " << tally.rounds << ": " << tally.status.toString();
    EXPECT_EQ(tally.wrong, "");
    rounds[size_t(env.rank)] = tally.rounds;
  });
  RecordProperty("rounds", std::to_string(rounds[0]));
  std::printf("soak: %d ranks, %llu rounds\n", size, static_cast<unsigned long long>(rounds[0]));
  EXPECT_GT(rounds[0], 0u);
}

// Kill mode: jobs of `size` ranks in which the victim (from the seed) drops
// its Context after a random round, as a killed process would. A survivor
// that sees an error drops its Context too (an MPI code would abort), so
// the failure spreads; every survivor must end with an error that is not a
// timeout, within the waits' bound.
TEST_P(Soak, RandomKillEndsEveryRankWithAnErrorNotAHang) {
  const int size = GetParam();
  const auto until = std::chrono::steady_clock::now() + soakTime() / 4;
  int jobs = 0;
  for (uint64_t job = 0; job == 0 || std::chrono::steady_clock::now() < until; ++job, ++jobs) {
    const uint64_t seed = kSeed * 31 + job * 1000003;
    TypeGenerator pick(seed);
    const int victim = static_cast<int>(pick.uniform(0, size - 1));
    const uint64_t diesAfter = static_cast<uint64_t>(pick.uniform(0, 12));
    messaging::testing::Ranks ranks = messaging::testing::createRanks(size, testing::soakOptions());
    std::vector<Status> ended(static_cast<size_t>(size));
    std::vector<std::thread> threads;
    for (int rank = 0; rank < size; ++rank) {
      threads.emplace_back([&, rank] {
        auto& context = ranks.contexts[static_cast<size_t>(rank)];
        auto comm = Communicator::create(*context);
        ASSERT_TRUE(comm.isOk()) << comm.status().toString();
        // The victim stops after its rounds; the others go on until they notice.
        testing::SoakTally tally =
            testing::soakUntilFailure(*context, **comm, rank == victim ? diesAfter : 1000, seed, kRoundBound);
        EXPECT_EQ(tally.wrong, "") << "job " << job << ", rank " << rank;
        ended[static_cast<size_t>(rank)] = tally.status;
        comm->reset();
        // Killed, or gave up after its error (an MPI code would abort).
        messaging::testing::killLoopbackDomain(*ranks.domains[static_cast<size_t>(rank)]);
        context.reset();
      });
    }
    for (auto& thread : threads) thread.join();
    for (int rank = 0; rank < size; ++rank) {
      if (rank == victim) continue;
      const Status& status = ended[static_cast<size_t>(rank)];
      EXPECT_FALSE(status.isOk()) << "job " << job << ": rank " << rank << " never noticed rank " << victim
                                  << " died after round " << diesAfter;
      EXPECT_NE(status.code(), Code::kTimeout) << "job " << job << ": rank " << rank << ": " << status.toString();
    }
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("soak kill: %d ranks, %d jobs\n", size, jobs);
}

INSTANTIATE_TEST_SUITE_P(Ranks, Soak, ::testing::Values(2, 4, 8));

}  // namespace
}  // namespace ibdt::collectives
