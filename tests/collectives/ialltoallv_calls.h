// tests/collectives/ialltoallv_calls.h — alltoallv calls through the call
// mailbox (collectives/ialltoallv_mailbox_run.h) for the thread-rank tests:
// a call's buffers, its fallback by messages, prepared as the MPI bridge
// prepares them (lending dense blocks from the mailbox's single-copy size).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <vector>

#include "collectives/alltoall_data.h"
#include "collectives/alltoall_direct_write.h"
#include "collectives/alltoallv_args.h"
#include "collectives/alltoallv_data.h"
#include "collectives/ialltoall_mailbox.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives::testing {

// What every rank runs when some rank's blocks do not fit: ibdt's pairwise
// alltoallv of the same buffers on a reserved tag of the ticket's.
class PairwiseFallback final : public AlltoallvFallback {
 public:
  PairwiseFallback(Communicator& comm, AlltoallvBuffers& buffers, Side send, Side recv)
      : comm_(comm), buffers_(buffers), send_(std::move(send)), recv_(std::move(recv)) {}

  Result<std::shared_ptr<Plan>> plan(uint64_t ticket) override {
    ++built_;
    if (failBuild_) return makeError(Code::kResource, "the test's fallback fails here");
    AlltoallvOptions options;
    options.algorithm = AlltoallvAlgorithm::kPairwise;
    comm_.pinPlanTag(Communicator::kFirstReservedPlanTag + static_cast<int32_t>(ticket % 16));
    auto plan = alltoallvInit(comm_, buffers_.sendbuf(), buffers_.sendcounts(), buffers_.sdispls(), send_.type,
                              buffers_.recvbuf(), buffers_.recvcounts(), buffers_.rdispls(), recv_.type, options);
    comm_.unpinPlanTag();
    IBDT_RETURN_IF_ERROR(plan.status());
    return std::make_shared<Plan>(std::move(*plan));
  }
  int built() const { return built_; }
  void failBuild() { failBuild_ = true; }

 private:
  Communicator& comm_;
  AlltoallvBuffers& buffers_;
  Side send_, recv_;
  int built_ = 0;
  bool failBuild_ = false;
};

// One alltoallv call: its buffers, its fallback and its plan once started.
struct VCall {
  std::unique_ptr<AlltoallvBuffers> buffers;
  std::shared_ptr<PairwiseFallback> fallback;
  bool expectFallback = false;
  Plan* plan = nullptr;
};

// A call of `counts` x one element of `bytes` on `comm`, not started.
inline VCall bytesCall(Communicator& comm, const CountMatrix& counts, int rank, uint64_t seed) {
  const Side bytes = byteSide(1);
  VCall call;
  call.buffers = std::make_unique<AlltoallvBuffers>(counts, bytes, bytes, rank, seed);
  call.fallback = std::make_shared<PairwiseFallback>(comm, *call.buffers, bytes, bytes);
  return call;
}

// Prepared as the bridge prepares it: dense blocks from the mailbox's
// single-copy size up are lent.
inline Result<Plan*> startV(IalltoallMailbox& box, VCall& call, const Side& send, const Side& recv, uint64_t ticket,
                            std::span<const int64_t> sendcounts) {
  AlltoallvBuffers& b = *call.buffers;
  auto prepared = std::make_shared<const MailboxCall>(
      MailboxCall::prepare(checkAlltoallvArgs(box.comm(), b.sendbuf(), sendcounts, b.sdispls(), send.type,
                                              b.recvbuf(), b.recvcounts(), b.rdispls(), recv.type),
                           box.singleCopy().fromBytes(), box.lendBeyondBytes()));
  IBDT_ASSIGN_OR_RETURN(Plan * plan, box.nextV(std::move(prepared), call.fallback, ticket));
  IBDT_RETURN_IF_ERROR(plan->start());
  return plan;
}

// A call of `counts` x one element of `send` / `recv`, started.
inline VCall startV(IalltoallMailbox& box, const CountMatrix& counts, const Side& send, const Side& recv, int rank,
                    uint64_t seed) {
  VCall call;
  call.buffers = std::make_unique<AlltoallvBuffers>(counts, send, recv, rank, seed);
  call.fallback = std::make_shared<PairwiseFallback>(box.comm(), *call.buffers, send, recv);
  // A row has room for the pair views beside the capacity (a small
  // segment); lent blocks take none, and blocks are lent only by a rank
  // whose blocks would not fit otherwise (IalltoallMailbox::lendBeyondBytes).
  const bool lends = box.singleCopy().fromBytes() > 0 && denseBlocks(send.type);
  for (const std::vector<int64_t>& row : counts) {
    int64_t all = 0, kept = 0;
    for (int64_t count : row) {
      const int64_t block = count * send.bytes();
      all += block;
      if (!lends || block < box.singleCopy().fromBytes()) kept += block;
    }
    const int64_t inRow = all > box.lendBeyondBytes() ? kept : all;
    call.expectFallback = call.expectFallback || inRow > box.capacity();
  }
  auto plan = startV(box, call, send, recv, seed, call.buffers->sendcounts());
  EXPECT_TRUE(plan.isOk()) << plan.status().toString();
  call.plan = plan.isOk() ? *plan : nullptr;
  return call;
}

// After a failed call, an agreed one on the same mailbox runs, every byte right.
inline void expectNextCallRuns(IalltoallMailbox& box, int rank, uint64_t seed) {
  const Side bytes = byteSide(1);
  VCall next = startV(box, countMatrix(Spread::kRandom, box.comm().size(), seed, 10), bytes, bytes, rank, seed);
  ASSERT_NE(next.plan, nullptr);
  ASSERT_TRUE(next.plan->wait(messaging::testing::soon()).isOk()) << "rank " << rank;
  EXPECT_EQ(next.buffers->check(), "") << "rank " << rank;
}


}  // namespace ibdt::collectives::testing
