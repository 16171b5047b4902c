// Pairwise alltoall among real processes (ibdt-run, 2/4/8 ranks) over the
// default provider: contiguous, strided and random derived send types,
// throttles 1, 8 and unlimited, eager to rendezvous sizes, a persistent plan
// started repeatedly, a signature mismatch that must fail, not hang, and
// alltoallv (pairwise, the shared segment, in place both ways).
// Every byte of every receive buffer is checked, gaps and guards included.
#include <gtest/gtest.h>

#include "collectives/alltoall_data.h"
#include "collectives/alltoallv_data.h"
#include "collectives/collectives_mp.h"
#include "ibdt/collectives.h"
#include "ibdt/messaging.h"
#include "ibdt/store.h"
#include "support/mp_test.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using test::mpDeadline;
using test::mpStore;
using testing::AlltoallBuffers;
using testing::Side;

class AlltoallMp : public testing::CollectivesMp {
 protected:
  void exchange(const Side& send, const Side& recv, int64_t throttle) {
    AlltoallBuffers buffers(send, recv, comm_->size(), comm_->rank());
    Status status = alltoall(*comm_, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), recv.count,
                             recv.type, {AlltoallAlgorithm::kPairwise, throttle}, mpDeadline());
    ASSERT_TRUE(status.isOk()) << status.toString();
    EXPECT_EQ(buffers.check(), "");
  }
};

TEST_F(AlltoallMp, NodeMapComesFromTheStore) {
  EXPECT_EQ(comm_->size(), mpStore().size());
  EXPECT_EQ(comm_->node(comm_->rank()).nodeId, mpStore().nodeId());
  EXPECT_EQ(comm_->node(comm_->rank()).localRank, mpStore().localRank());
  EXPECT_EQ(comm_->nodeCount(), mpStore().numNodes());
  EXPECT_EQ(comm_->localSize(), mpStore().localSize());
}

TEST_F(AlltoallMp, ContiguousAndStridedEveryThrottle) {
  for (int64_t throttle : {1, 8, 0}) {
    for (int64_t bytes : {8, 1024, 65536}) {
      exchange(testing::byteSide(bytes), testing::byteSide(bytes), throttle);
      const int64_t vectors = bytes / 48 + 1;  // 48 data bytes per vector(4, 3, 5, int32)
      Side strided = testing::vectorSide(vectors);
      exchange(strided, testing::denseSide(strided.type, vectors), throttle);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(AlltoallMp, RandomDerivedSendTypes) {
  datatype::testing::TypeGenerator generator(4242);  // the same types on every rank
  int tried = 0;
  for (int round = 0; tried < 6 && round < 200; ++round) {
    auto random = generator.make(3, 500);
    if (!random.type.valid() || !random.type.commit().isOk()) continue;
    SCOPED_TRACE(random.description);
    const int64_t count = 1 + round % 4;
    exchange(testing::sideOf(random.type, random.ref, count), testing::denseSide(random.type, count), round % 3);
    if (HasFatalFailure()) return;
    ++tried;
  }
  EXPECT_EQ(tried, 6);
}

TEST_F(AlltoallMp, PersistentPlanStartedRepeatedly) {
  Side send = testing::vectorSide(300), recv = testing::denseSide(send.type, 300);
  AlltoallBuffers buffers(send, recv, comm_->size(), comm_->rank());
  auto plan = alltoallInit(*comm_, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), recv.count,
                           recv.type, {AlltoallAlgorithm::kPairwise, 2});
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  for (int run = 0; run < 4; ++run) {
    buffers.clearReceive();
    ASSERT_TRUE(plan->start().isOk());
    Status status = plan->wait(mpDeadline());
    ASSERT_TRUE(status.isOk()) << status.toString();
    EXPECT_EQ(buffers.check(), "") << "run " << run;
    ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());  // peers' runs end before the buffer is cleared
  }
}

// Direct writes between processes (one-sided puts into the peers' receive
// buffers, docs/alltoall-direct-writes.md): a persistent plan restarted with
// new data and no barrier between runs, from 1 B to 1 MiB blocks.
TEST_F(AlltoallMp, DirectWritePersistentWithChangingData) {
  for (int64_t bytes : {int64_t{0}, int64_t{13}, int64_t{80000}, int64_t{1} << 20}) {
    // 1 MiB blocks up to 4 processes: 8 of them on 2 cores take minutes under ASan.
    if (bytes > 80000 && comm_->size() > 4) continue;
    Side side = testing::byteSide(bytes);
    AlltoallBuffers buffers(side, side, comm_->size(), comm_->rank());
    AlltoallOptions options;
    options.algorithm = AlltoallAlgorithm::kDirectWrite;
    auto plan = alltoallInit(*comm_, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count,
                             side.type, options);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_EQ(plan->algorithm(), "direct-write");
    for (int run = 0; run < 3; ++run) {
      ASSERT_EQ(testing::runChecked(*plan, buffers, run, mpDeadline()), "") << bytes << " B, run " << run;
    }
    ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());  // no peer still writes before the buffers go
  }
}

// Plan::rebind between processes: each rank moves its send and receive
// buffers between two sets on its own schedule, telling nobody; the peers
// write where its next ready's key says (on verbs: a new registration's rkey).
TEST_F(AlltoallMp, DirectWriteRebindEachRankAlone) {
  const Side side = testing::byteSide(80000);
  const int me = comm_->rank();
  AlltoallBuffers sets[2] = {AlltoallBuffers(side, side, comm_->size(), me),
                             AlltoallBuffers(side, side, comm_->size(), me)};
  AlltoallOptions options;
  options.algorithm = AlltoallAlgorithm::kDirectWrite;
  auto plan = alltoallInit(*comm_, sets[0].sendbuf(), side.count, side.type, sets[0].recvbuf(), side.count, side.type,
                           options);
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  ASSERT_EQ(plan->algorithm(), "direct-write");
  for (int run = 0; run < 6; ++run) {
    ASSERT_EQ(testing::runRebound(*plan, sets, me, run, mpDeadline()), "") << "rank " << me << " run " << run;
  }
  ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());  // no peer still writes before the buffers go
}

TEST_F(AlltoallMp, MismatchedSignatureFailsWithoutHanging) {
  const int me = comm_->rank();
  for (int64_t ints : {4, 100000}) {  // eager and rendezvous
    Side side = me == 0 ? testing::denseSide(Datatype::of<int32_t>(), ints) : testing::byteSide(ints * 4);
    AlltoallBuffers buffers(side, side, comm_->size(), me);
    // Pairwise: its contract is that every other pair still exchanges (the
    // Bruck family relays blocks, so a failed pair poisons later rounds;
    // docs/alltoall-bruck.md, "Errors"); kAuto may choose Bruck at p = 8.
    Status status = alltoall(*comm_, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count,
                             side.type, {AlltoallAlgorithm::kPairwise}, mpDeadline());
    ASSERT_FALSE(status.isOk());
    EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
    EXPECT_NE(status.toString().find("signature"), std::string::npos) << status.toString();
    std::vector<int> others;
    for (int r = 0; r < comm_->size(); ++r) {
      if (r != me) others.push_back(r);
    }
    EXPECT_EQ(buffers.check(me == 0 ? others : std::vector<int>{0}), "");
    ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());
  }
}

// alltoallv, pairwise and through the shared segment (strided -> dense)
// and in place with 1 % auxiliary memory, over random counts with zeros;
// persistent plans run twice, in place through the segment (auto, the
// default budget) too.
TEST_F(AlltoallMp, AlltoallvDirectSharedAndInPlace) {
  const int size = comm_->size(), me = comm_->rank();
  const auto counts = testing::countMatrix(testing::Spread::kRandom, size, 51, 3000);
  const Side strided = testing::vectorSide(1), dense = testing::denseSide(strided.type, 1);
  for (AlltoallvAlgorithm algorithm : {AlltoallvAlgorithm::kPairwise, AlltoallvAlgorithm::kSharedMemory}) {
    testing::AlltoallvBuffers buffers(counts, strided, dense, me, 51);
    AlltoallvOptions forced;
    forced.algorithm = algorithm;
    auto plan = alltoallvInit(*comm_, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), strided.type,
                              buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), dense.type, forced);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    for (int run = 0; run < 2; ++run) {
      buffers.clearReceive();
      ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());
      ASSERT_TRUE(plan->start().isOk());
      Status status = plan->wait(mpDeadline());
      ASSERT_TRUE(status.isOk()) << plan->algorithm() << ": " << status.toString();
      EXPECT_EQ(buffers.check(), "") << plan->algorithm() << " run " << run;
    }
  }
  testing::InPlaceBuffer viaSegment(counts, 8, me, 52);
  auto inPlace = alltoallvInit(*comm_, kInPlace, viaSegment.sendcounts(), viaSegment.sdispls(), Datatype(),
                               viaSegment.buffer(), viaSegment.recvcounts(), viaSegment.rdispls(),
                               Datatype::of<double>());
  ASSERT_TRUE(inPlace.isOk()) << inPlace.status().toString();
  EXPECT_EQ(inPlace->algorithm(), "shared-memory");
  for (int run = 0; run < 2; ++run) {
    viaSegment.refill();
    ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());
    ASSERT_TRUE(inPlace->start().isOk());
    Status status = inPlace->wait(mpDeadline());
    ASSERT_TRUE(status.isOk()) << status.toString();
    EXPECT_EQ(viaSegment.check(), "") << "run " << run;
  }
  testing::InPlaceBuffer single(counts, 8, me, 51);
  AlltoallvOptions options;
  options.inplaceBytes = std::max<int64_t>(8, single.receiveBytes() / 100);
  Status status = alltoallv(*comm_, kInPlace, single.sendcounts(), single.sdispls(), Datatype(), single.buffer(),
                            single.recvcounts(), single.rdispls(), Datatype::of<double>(), options, mpDeadline());
  ASSERT_TRUE(status.isOk()) << status.toString();
  EXPECT_EQ(single.check(), "");
}

}  // namespace
}  // namespace ibdt::collectives
