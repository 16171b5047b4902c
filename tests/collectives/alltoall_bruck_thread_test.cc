// The Bruck alltoall family (docs/alltoall-bruck.md) and the shared-memory
// alltoall (docs/alltoall-shared-memory.md) with ranks as threads
// over the loopback fabric: every algorithm x p in {1,2,3,4,5,7,8} x block
// sizes {0,1,4,13,64,1000,80000} bytes x contiguous and derived types (send
// and receive types differ, signatures equal), every byte of every receive
// buffer checked (gaps and guards included); persistent plans started many
// times with new data each run; a mismatched peer fails every rank.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "collectives/alltoall_data.h"
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
using testing::AlltoallBuffers;
using testing::Side;

struct Algorithm {
  AlltoallAlgorithm algorithm;
  int64_t radix;
  const char* name;
};
const Algorithm kAlgorithms[] = {
    {AlltoallAlgorithm::kBruckBasic, 4, "bruck-basic"},
    {AlltoallAlgorithm::kBruckModified, 4, "bruck-modified"},
    {AlltoallAlgorithm::kBruckZeroCopy, 4, "bruck-zero-copy"},
    {AlltoallAlgorithm::kBruckRadix, 3, "bruck-radix-3"},
    {AlltoallAlgorithm::kBruckRadix, 4, "bruck-radix-4"},
    {AlltoallAlgorithm::kBruckRadix, 8, "bruck-radix-8"},  // r >= p for most p: one round of p - 1 messages
    // Not a Bruck form, but the same matrix applies: every rank packs its
    // blocks into a shared segment and copies its column out.
    {AlltoallAlgorithm::kSharedMemory, 4, "shared-memory"},
};

AlltoallOptions optionsOf(const Algorithm& algorithm) {
  AlltoallOptions options;
  options.algorithm = algorithm.algorithm;
  options.radix = algorithm.radix;
  return options;
}

using testing::world;

// Blocks of `bytes` bytes as pieces of 8 bytes (1 when 8 does not divide
// `bytes`; few large pieces keep the big cases fast).
int64_t pieceOf(int64_t bytes) { return bytes % 8 == 0 ? 8 : 1; }

// `bytes` per block as pieces with `gap` bytes after each (0: contiguous),
// one element per piece.
Side spacedBytes(int64_t bytes, int64_t gap) {
  const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
  if (gap == 0) return testing::byteSide(bytes);
  const int64_t piece = pieceOf(bytes);
  auto run = Datatype::contiguous(piece, byte);
  auto spaced = run.isOk() ? Datatype::resized(*run, 0, piece + gap) : run;
  if (!spaced.isOk() || !spaced->commit().isOk()) throw std::runtime_error("spaced pieces failed");
  Side side{*spaced, bytes / piece, {}};
  for (int64_t k = 0; k < bytes; ++k) side.offsets.push_back(k / piece * (piece + gap) + k % piece);
  return side;
}

// One block of `bytes` bytes as one vector of pieces, a piece-sized gap
// after each: a derived send type other than the receive type.
Side gappedVector(int64_t bytes) {
  const int64_t piece = pieceOf(bytes);
  auto type = Datatype::vector(bytes / piece, piece, 2 * piece, Datatype::basic(datatype::BasicKind::kByte));
  if (!type.isOk() || !type->commit().isOk()) throw std::runtime_error("vector of bytes failed");
  Side side{*type, 1, {}};
  for (int64_t k = 0; k < bytes; ++k) side.offsets.push_back(k / piece * 2 * piece + k % piece);
  return side;
}

void exchangeAndCheck(RankEnv& env, Communicator& comm, const Algorithm& algorithm, const Side& send,
                      const Side& recv) {
  AlltoallBuffers buffers(send, recv, comm.size(), comm.rank());
  auto plan = alltoallInit(comm, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), recv.count, recv.type,
                           optionsOf(algorithm));
  ASSERT_TRUE(plan.isOk()) << "rank " << env.rank << ": " << plan.status().toString();
  EXPECT_EQ(plan->algorithm(), algorithm.name);
  ASSERT_TRUE(plan->start().isOk());
  Status status = plan->wait(messaging::testing::soon());
  ASSERT_TRUE(status.isOk()) << "rank " << env.rank << ": " << status.toString();
  EXPECT_EQ(buffers.check(), "") << send.bytes() << " bytes per block";
}

// The same with kInPlace: the receive buffer starts with this rank's send
// blocks (in the receive layout) and ends with the received ones.
void exchangeInPlaceAndCheck(RankEnv& env, Communicator& comm, const AlltoallOptions& options, const Side& side,
                             std::string_view name) {
  AlltoallBuffers buffers(side, side, comm.size(), comm.rank());
  buffers.loadInPlace();
  auto plan = alltoallInit(comm, kInPlace, 0, Datatype(), buffers.recvbuf(), side.count, side.type, options);
  ASSERT_TRUE(plan.isOk()) << "rank " << env.rank << ": " << plan.status().toString();
  EXPECT_EQ(plan->algorithm(), name);
  for (int run = 0; run < 2; ++run) {  // a persistent in-place plan reloads its buffer
    if (run > 0) {
      env.barrier();  // every peer is done reading this rank's buffer
      buffers.refill(run);
      buffers.loadInPlace();
      env.barrier();
    }
    ASSERT_TRUE(plan->start().isOk());
    Status status = plan->wait(messaging::testing::soon());
    ASSERT_TRUE(status.isOk()) << "rank " << env.rank << ": " << status.toString();
    EXPECT_EQ(buffers.check(), "") << "in place, " << side.bytes() << " bytes per block, run " << run;
  }
}

class BruckMatrix : public ::testing::TestWithParam<std::tuple<Algorithm, int>> {};

TEST_P(BruckMatrix, EveryBlockSizeContiguousAndDerived) {
  const Algorithm algorithm = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  runRanks(ranks, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    for (int64_t bytes : {0, 1, 4, 13, 64, 1000, 80000}) {
      exchangeAndCheck(env, *comm, algorithm, spacedBytes(bytes, 0), spacedBytes(bytes, 0));
      exchangeAndCheck(env, *comm, algorithm, gappedVector(bytes), spacedBytes(bytes, 3));
      exchangeInPlaceAndCheck(env, *comm, optionsOf(algorithm), spacedBytes(bytes, 0), algorithm.name);
      exchangeInPlaceAndCheck(env, *comm, optionsOf(algorithm), spacedBytes(bytes, 3), algorithm.name);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(All, BruckMatrix,
                         ::testing::Combine(::testing::ValuesIn(kAlgorithms),
                                            ::testing::Values(1, 2, 3, 4, 5, 7, 8)),
                         [](const auto& param) {
                           std::string name = std::get<0>(param.param).name;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name + "_np" + std::to_string(std::get<1>(param.param));
                         });

// Zero-copy parks blocks in transit in receive blocks whose own block
// arrives later and in intermediate slots reused between rounds: at 13 ranks
// fewer than ⌊13/2⌋ = 6 intermediate blocks (the paper allocates 13).
TEST(BruckZeroCopyThreads, FewerThanHalfPIntermediateBlocksAtThirteenRanks) {
  const Algorithm zeroCopy = kAlgorithms[2];
  runRanks(13, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    {
      std::vector<uint8_t> send(13 * 64), recv(13 * 64);
      const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
      auto plan = alltoallInit(*comm, send.data(), 64, byte, recv.data(), 64, byte, optionsOf(zeroCopy));
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      EXPECT_GT(plan->peakExtraBytes(), 0);
      EXPECT_LT(plan->peakExtraBytes(), 6 * 64);
    }
    for (int64_t bytes : {1, 64}) {
      exchangeAndCheck(env, *comm, zeroCopy, gappedVector(bytes), spacedBytes(bytes, 3));
      exchangeInPlaceAndCheck(env, *comm, optionsOf(zeroCopy), spacedBytes(bytes, 0), zeroCopy.name);
    }
  });
}

// Pairwise in place pairs ranks per round through one staging block per
// round in flight: every throttle, every p, derived layouts too.
TEST(PairwiseInPlaceThreads, EveryThrottleAndSize) {
  for (int ranks : {1, 2, 3, 5, 8}) {
    runRanks(ranks, {}, [&](RankEnv& env) {
      auto comm = world(env);
      ASSERT_NE(comm, nullptr);
      for (int64_t throttle : {1, 0}) {
        AlltoallOptions options;
        options.algorithm = AlltoallAlgorithm::kPairwise;
        options.throttle = throttle;
        for (int64_t bytes : {0, 13, 80000}) {
          if (ranks == 8 && bytes > 13) continue;  // 80 KB blocks up to 5 ranks: 8 threads take a minute under ASan
          exchangeInPlaceAndCheck(env, *comm, options, spacedBytes(bytes, 0), "pairwise");
          exchangeInPlaceAndCheck(env, *comm, options, spacedBytes(bytes, 3), "pairwise");
        }
      }
    });
  }
}

TEST(AlltoallInPlace, SendbufEqualToRecvbufIsRefused) {
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    std::vector<uint8_t> buffer(8, 7);
    const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
    auto plan = alltoallInit(*comm, buffer.data(), 4, byte, buffer.data(), 4, byte);
    ASSERT_FALSE(plan.isOk());
    EXPECT_NE(plan.status().toString().find("kInPlace"), std::string::npos) << plan.status().toString();
    EXPECT_EQ(buffer, std::vector<uint8_t>(8, 7));
  });
}

// A persistent plan of int32 vectors (received dense) started six times,
// each run with new send data, driven by test() on odd runs.
TEST(BruckThreadsPlan, PersistentRunsWithChangingData) {
  for (const Algorithm& algorithm : kAlgorithms) {
    SCOPED_TRACE(algorithm.name);
    runRanks(5, {}, [&](RankEnv& env) {
      auto comm = world(env);
      ASSERT_NE(comm, nullptr);
      Side send = testing::vectorSide(3), recv = testing::denseSide(send.type, 3);
      AlltoallBuffers buffers(send, recv, comm->size(), comm->rank());
      auto plan = alltoallInit(*comm, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), recv.count,
                               recv.type, optionsOf(algorithm));
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      EXPECT_EQ(plan->wait().code(), Code::kState);  // not started
      for (int run = 0; run < 6; ++run) {
        buffers.refill(run);
        buffers.clearReceive();
        ASSERT_TRUE(plan->start().isOk());
        EXPECT_EQ(plan->start().code(), Code::kState);  // still active
        for (auto deadline = messaging::testing::soon(); run % 2 == 1 && !deadline.expired();) {
          auto tested = plan->test();
          ASSERT_TRUE(tested.isOk()) << tested.status().toString();
          if (*tested) break;
        }
        Status status = plan->wait(messaging::testing::soon());
        ASSERT_TRUE(status.isOk()) << status.toString();
        EXPECT_EQ(buffers.check(), "") << "run " << run;
        env.barrier();  // nobody refills while a peer's run still reads its buffer
      }
    });
  }
}

TEST(BruckThreadsPlan, TimedOutWaitResumes) {
  for (const Algorithm& algorithm : kAlgorithms) {
    runRanks(2, {}, [&](RankEnv& env) {
      auto comm = world(env);
      ASSERT_NE(comm, nullptr);
      Side side = spacedBytes(100, 0);
      AlltoallBuffers buffers(side, side, 2, env.rank);
      auto plan = alltoallInit(*comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count,
                               side.type, optionsOf(algorithm));
      ASSERT_TRUE(plan.isOk());
      ASSERT_NO_FATAL_FAILURE(testing::checkTimedOutWaitResumes(env, *plan, "receive from rank 1"));
      EXPECT_EQ(buffers.check(), "");
    });
  }
}

// Rank 0 exchanges int32s, every other rank the same bytes as raw bytes:
// Bruck forwards blocks through other ranks, so every rank must fail (the
// ones next to rank 0 on the signature, the others on the poison that
// follows), none may hang, and at least one names the signature.
TEST(BruckThreadsErrors, MismatchedSignatureFailsEveryRank) {
  for (const Algorithm& algorithm : kAlgorithms) {
    for (int64_t ints : {0, 4, 20000}) {  // empty blocks, eager, rendezvous-sized rounds
      SCOPED_TRACE(std::string(algorithm.name) + " " + std::to_string(ints) + " ints");
      std::atomic<int> namedSignature{0};
      runRanks(5, {}, [&](RankEnv& env) {
        auto comm = world(env);
        ASSERT_NE(comm, nullptr);
        Side side = env.rank == 0 ? testing::denseSide(Datatype::of<int32_t>(), ints == 0 ? 1 : ints)
                                  : spacedBytes(ints * 4, 0);
        AlltoallBuffers buffers(side, side, comm->size(), comm->rank());
        Status status = alltoall(*comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count,
                                 side.type, optionsOf(algorithm), messaging::testing::soon());
        ASSERT_FALSE(status.isOk()) << algorithm.name << " " << ints << " ints: rank " << env.rank;
        // SCOPED_TRACE does not reach the rank threads: name the case here.
        EXPECT_NE(status.code(), Code::kTimeout) << ints << " ints: " << status.toString();
        EXPECT_NE(status.toString().find(algorithm.name), std::string::npos) << status.toString();
        if (status.toString().find("signature") != std::string::npos ||
            status.code() == Code::kTruncated) {
          ++namedSignature;
        }
      });
      EXPECT_GT(namedSignature.load(), 0);
    }
  }
}

TEST(BruckOptions, AlgorithmAndRadixKnobs) {
  {
    test::ScopedEnv algorithm("IBDT_ALLTOALL_ALGORITHM", "bruck-zero-copy");
    test::ScopedEnv radix("IBDT_ALLTOALL_RADIX", "5");
    auto options = alltoallOptionsFromEnvironment();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    EXPECT_EQ(options->algorithm, AlltoallAlgorithm::kBruckZeroCopy);
    EXPECT_EQ(options->radix, 5);
  }
  for (auto [knob, bad] : {std::pair{"IBDT_ALLTOALL_ALGORITHM", "bruck"}, std::pair{"IBDT_ALLTOALL_RADIX", "1"}}) {
    test::ScopedEnv env(knob, bad);
    auto options = alltoallOptionsFromEnvironment();
    ASSERT_FALSE(options.isOk()) << knob;
    EXPECT_NE(options.status().toString().find(knob), std::string::npos) << options.status().toString();
  }
  auto defaults = alltoallOptionsFromEnvironment();
  ASSERT_TRUE(defaults.isOk());
  EXPECT_EQ(defaults->algorithm, AlltoallAlgorithm::kAuto);
  EXPECT_EQ(defaults->radix, AlltoallOptions{}.radix);
  for (const char* name : {"auto", "pairwise", "bruck-basic", "bruck-modified", "bruck-zero-copy", "bruck-radix"}) {
    auto parsed = parseAlltoallAlgorithm(name);
    ASSERT_TRUE(parsed.isOk()) << name;
    EXPECT_EQ(alltoallAlgorithmName(*parsed), name);
  }
  EXPECT_FALSE(parseAlltoallAlgorithm("bruck").isOk());
}

// The names Plan::algorithm() prints read back into options: plain names, and a radix-r plan's.
TEST(BruckThreadsErrors, AlgorithmNamesWithARadixReadBack) {
  AlltoallOptions base;
  base.throttle = 3;
  auto radix5 = withAlltoallAlgorithm(base, "bruck-radix-5");
  ASSERT_TRUE(radix5.isOk()) << radix5.status().toString();
  EXPECT_EQ(radix5->algorithm, AlltoallAlgorithm::kBruckRadix);
  EXPECT_EQ(radix5->radix, 5);
  EXPECT_EQ(radix5->throttle, 3);
  auto pairwise = withAlltoallAlgorithm(base, "pairwise");
  ASSERT_TRUE(pairwise.isOk());
  EXPECT_EQ(pairwise->algorithm, AlltoallAlgorithm::kPairwise);
  EXPECT_EQ(pairwise->radix, base.radix);
  EXPECT_TRUE(withAlltoallAlgorithm(base, "bruck-radix-4095").isOk());
  for (const char* bad : {"bruck-radix-", "bruck-radix-1", "bruck-radix-05", "bruck-radix-4096", "bruck-radix-4x",
                          "bruck-radix--3", "bruck-radix-99999999999999999999", "bruck"}) {
    auto parsed = withAlltoallAlgorithm(base, bad);
    ASSERT_FALSE(parsed.isOk()) << bad;
    EXPECT_NE(parsed.status().toString().find(bad), std::string::npos) << parsed.status().toString();
  }
}

TEST(BruckThreadsErrors, RadixBelowTwoIsRefused) {
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    uint8_t a[2] = {}, b[2] = {};
    AlltoallOptions options;
    options.algorithm = AlltoallAlgorithm::kBruckRadix;
    options.radix = 1;
    auto plan = alltoallInit(*comm, a, 1, Datatype::basic(datatype::BasicKind::kByte), b, 1,
                             Datatype::basic(datatype::BasicKind::kByte), options);
    ASSERT_FALSE(plan.isOk());
    EXPECT_NE(plan.status().toString().find("radix"), std::string::npos) << plan.status().toString();
  });
}

}  // namespace
}  // namespace ibdt::collectives
