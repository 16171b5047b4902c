// tests/collectives/call_mailbox_ranks.h — a rank's communicator and call
// mailbox (collectives/ialltoall_mailbox.h) for the thread-rank tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "collectives/alltoall_args.h"
#include "collectives/alltoall_data.h"
#include "collectives/ialltoall_mailbox.h"
#include "collectives/world.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives::testing {

// Rows of 4 KiB: small enough that large calls are easy to make.
inline constexpr int64_t kMailboxCapacity = 4096;

// Contexts whose call mailbox lends dense blocks from `from` bytes up
// (single copy; 0: never, every block through the rows), whatever this
// machine's measured crossover: tests take one path or the other on purpose.
inline messaging::Options singleCopyFrom(int64_t from) {
  messaging::Options options;
  options.singleCopyReadMin = from;
  return options;
}

// `lendFittingCalls`: single copy also for calls that fit the rows.
inline std::shared_ptr<IalltoallMailbox> mailboxOf(Communicator& comm, int64_t capacity = kMailboxCapacity,
                                                   bool lendFittingCalls = false) {
  auto box = IalltoallMailbox::create(comm, capacity, messaging::testing::soon(), lendFittingCalls);
  EXPECT_TRUE(box.isOk()) << box.status().toString();
  return box.isOk() ? *box : nullptr;
}

// A rank's communicator and its mailbox (null, with a test failure, if
// either could not be made).
struct RankMailbox {
  std::unique_ptr<Communicator> comm;
  std::shared_ptr<IalltoallMailbox> box;
};

inline RankMailbox rankMailbox(messaging::testing::RankEnv& env, bool lendFittingCalls = false) {
  RankMailbox made{world(env), nullptr};
  if (made.comm) made.box = mailboxOf(*made.comm, kMailboxCapacity, lendFittingCalls);
  return made;
}

// Rank `rank` of `ranks` dies (runRanksThatMayDie): its mailbox and
// communicator go, then its fabric fails and its Context goes.
inline void dieHere(messaging::testing::Ranks& ranks, int rank, std::unique_ptr<Communicator>& comm,
                    std::shared_ptr<IalltoallMailbox>& box) {
  box.reset();
  comm.reset();
  messaging::testing::killLoopbackDomain(*ranks.domains[static_cast<size_t>(rank)]);
  ranks.contexts[static_cast<size_t>(rank)].reset();
}

// One alltoall call of the mailbox over `buffers` (in place: over its
// receive side), started.
inline Result<Plan*> startCall(IalltoallMailbox& box, AlltoallBuffers& buffers, bool inPlace = false) {
  const Side& send = buffers.sendSide();
  const Side& recv = buffers.recvSide();
  auto checked = inPlace
                     ? checkAlltoallArgs(box.comm(), kInPlace, 0, recv.type, buffers.recvbuf(), recv.count, recv.type)
                     : checkAlltoallArgs(box.comm(), buffers.sendbuf(), send.count, send.type, buffers.recvbuf(),
                                         recv.count, recv.type);
  IBDT_ASSIGN_OR_RETURN(Plan * plan, box.next(checked));
  IBDT_RETURN_IF_ERROR(plan->start());
  return plan;
}

}  // namespace ibdt::collectives::testing
