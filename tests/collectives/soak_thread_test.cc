// Soak: ranks as threads over the loopback fabric run a random mix of
// point-to-point messages of random derived types, alltoall, alltoallv and
// barrier for a given time, every received byte checked against what its
// sender meant (issue 17). Every rank draws the same sequence from one seed
// per round, so they agree on each round's operation without talking.
// SOAK_SECONDS sets the time per rank count (default 20: about a minute
// for 2, 4 and 8 ranks in CI). The kill mode runs short jobs of the same mix
// in which one rank, chosen by the seed, dies after a random round: every
// survivor must end with an error (never a hang or a timeout), and every
// operation that did succeed must have delivered every byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "datatype/reference.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using datatype::testing::TypeGenerator;
using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;

constexpr uint64_t kSeed = 0x50a4;
constexpr int kTag = 11;

std::chrono::seconds soakTime() {
  const char* value = std::getenv("SOAK_SECONDS");
  int seconds = value != nullptr ? std::atoi(value) : 20;
  return std::chrono::seconds(seconds > 0 ? seconds : 20);
}

// What rank `from` means byte `index` of its round-`round` data for `to` to be.
uint8_t meant(int from, int to, uint64_t round, int64_t index) {
  uint64_t x = (uint64_t(from) * 131 + uint64_t(to) * 7 + round * 977 + uint64_t(index) * 2654435761u) >> 3;
  return static_cast<uint8_t>(x ^ (x >> 11));
}

// A message of `count` x a random type from every rank to rank + shift,
// received with the same type (the signatures must match): each byte the
// type map names must arrive where the sender had it, and no other byte of
// the receive buffer (guards around it included) may change.
// Returns the library's error, if any; bytes are checked only on success.
Status pointToPoint(messaging::Context& context, int rank, int size, uint64_t round, TypeGenerator& gen) {
  constexpr int64_t kGuard = 16;
  auto random = gen.make(3, 512);
  EXPECT_TRUE(random.type.commit().isOk()) << random.description;
  int64_t count = gen.uniform(1, 3);
  int shift = static_cast<int>(gen.uniform(1, size - 1));
  std::vector<int64_t> offsets = datatype::testing::refByteOffsets(random.ref, count);
  int64_t low = 0, high = 0;
  for (int64_t o : offsets) low = std::min(low, o), high = std::max(high, o + 1);
  auto memoryFor = [&](int from, int to) {
    std::vector<uint8_t> memory(static_cast<size_t>(high - low));
    for (int64_t i = 0; i < high - low; ++i) memory[static_cast<size_t>(i)] = meant(from, to, round, i);
    return memory;
  };
  int to = (rank + shift) % size, from = (rank - shift + size) % size;
  std::vector<uint8_t> out = memoryFor(rank, to);
  std::vector<uint8_t> in(static_cast<size_t>(high - low + 2 * kGuard), 0xEE);
  IBDT_ASSIGN_OR_RETURN(messaging::Request recv, context.irecv(in.data() + kGuard - low, count, random.type, from, kTag));
  IBDT_ASSIGN_OR_RETURN(messaging::Request send, context.isend(out.data() - low, count, random.type, to, kTag));
  Status sent = context.wait(send, nullptr, soon());
  messaging::RecvInfo info;
  Status received = context.wait(recv, &info, soon());
  IBDT_RETURN_IF_ERROR(sent);
  IBDT_RETURN_IF_ERROR(received);
  EXPECT_EQ(info.bytes, static_cast<int64_t>(offsets.size())) << random.description;
  std::vector<uint8_t> theirs = memoryFor(from, rank);
  std::vector<uint8_t> expected(in.size(), 0xEE);
  for (int64_t o : offsets) expected[static_cast<size_t>(kGuard + o - low)] = theirs[static_cast<size_t>(o - low)];
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == expected[i]) continue;
    ADD_FAILURE() << "round " << round << ", buffer byte " << i << " from rank " << from << " of " << random.description;
    break;
  }
  return Status::ok();
}

// alltoallv with random counts (0 included); alltoall when `regular`.
Status allToAll(Communicator& comm, int rank, int size, uint64_t round, TypeGenerator& gen, bool regular) {
  std::vector<std::vector<int64_t>> counts(static_cast<size_t>(size), std::vector<int64_t>(static_cast<size_t>(size)));
  int64_t block = gen.uniform(0, 3000);
  for (auto& row : counts) {
    for (auto& c : row) c = regular ? block : gen.small(2000);
  }
  auto layout = [&](bool sending) {
    std::vector<int64_t> n(static_cast<size_t>(size)), displ(static_cast<size_t>(size));
    int64_t at = 0;
    for (int p = 0; p < size; ++p) {
      n[size_t(p)] = sending ? counts[size_t(rank)][size_t(p)] : counts[size_t(p)][size_t(rank)];
      displ[size_t(p)] = at;
      at += n[size_t(p)];
    }
    return std::make_tuple(n, displ, at);
  };
  auto [sendCounts, sendDispls, sendTotal] = layout(true);
  auto [recvCounts, recvDispls, recvTotal] = layout(false);
  std::vector<uint8_t> out(static_cast<size_t>(sendTotal)), in(static_cast<size_t>(recvTotal) + 16, 0xEE);
  for (int p = 0; p < size; ++p) {
    for (int64_t j = 0; j < sendCounts[size_t(p)]; ++j)
      out[size_t(sendDispls[size_t(p)] + j)] = meant(rank, p, round, j);
  }
  Datatype bytes = Datatype::of<uint8_t>();
  Status status = regular ? alltoall(comm, out.data(), block, bytes, in.data(), block, bytes, {}, soon())
                          : alltoallv(comm, out.data(), sendCounts, sendDispls, bytes, in.data(), recvCounts,
                                      recvDispls, bytes, {}, soon());
  IBDT_RETURN_IF_ERROR(status);
  for (int p = 0; p < size; ++p) {
    for (int64_t j = 0; j < recvCounts[size_t(p)]; ++j) {
      if (in[size_t(recvDispls[size_t(p)] + j)] == meant(p, rank, round, j)) continue;
      ADD_FAILURE() << "round " << round << (regular ? " alltoall" : " alltoallv") << ", byte " << j << " from rank " << p;
      return Status::ok();
    }
  }
  for (size_t i = size_t(recvTotal); i < in.size(); ++i) EXPECT_EQ(in[i], 0xEE) << "written past the message";
  return Status::ok();
}

// One round of the mix, the same operation on every rank (from the seed).
Status soakRound(messaging::Context& context, Communicator& comm, int rank, int size, uint64_t round,
                 uint64_t seed) {
  TypeGenerator gen(seed + round);
  switch (gen.uniform(0, 3)) {
    case 0:
      return size > 1 ? pointToPoint(context, rank, size, round, gen) : Status::ok();
    case 1:
      return allToAll(comm, rank, size, round, gen, true);
    case 2:
      return allToAll(comm, rank, size, round, gen, false);
    default:
      return barrier(comm, soon());
  }
}

class Soak : public ::testing::TestWithParam<int> {};

TEST_P(Soak, RandomMixDeliversEveryByte) {
  const int size = GetParam();
  const auto until = std::chrono::steady_clock::now() + soakTime();
  std::vector<uint64_t> rounds(static_cast<size_t>(size));
  runRanks(size, messaging::testing::smallOptions(), [&](RankEnv& env) {
    auto comm = Communicator::create(env.context);
    ASSERT_TRUE(comm.isOk()) << comm.status().toString();
    for (uint64_t round = 0;; ++round) {
      // Every rank stops at the same round: rank 0 decides, the others follow.
      int64_t go = env.rank == 0 && std::chrono::steady_clock::now() < until ? 1 : 0;
      ASSERT_TRUE(broadcast(**comm, &go, 1, 0, soon()).isOk());
      if (go == 0) break;
      Status status = soakRound(env.context, **comm, env.rank, size, round, kSeed);
      ASSERT_TRUE(status.isOk()) << "round " << round << ": " << status.toString();
      if (::testing::Test::HasFailure()) return;
      rounds[size_t(env.rank)] = round + 1;
    }
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
    messaging::testing::Ranks ranks = messaging::testing::createRanks(size, messaging::testing::smallOptions());
    std::vector<Status> ended(static_cast<size_t>(size));
    std::vector<std::thread> threads;
    for (int rank = 0; rank < size; ++rank) {
      threads.emplace_back([&, rank] {
        auto& context = ranks.contexts[static_cast<size_t>(rank)];
        auto comm = Communicator::create(*context);
        ASSERT_TRUE(comm.isOk()) << comm.status().toString();
        Status status;
        for (uint64_t round = 0; status.isOk() && round < 1000; ++round) {
          if (rank == victim && round == diesAfter) break;
          status = soakRound(*context, **comm, rank, size, round, seed);
        }
        ended[static_cast<size_t>(rank)] = status;
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
