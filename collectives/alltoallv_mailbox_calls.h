// collectives/alltoallv_mailbox_calls.h — the blocking alltoallv() of one
// node's ranks through the communicator's mailbox (alltoallv_mailbox.h):
// no plan, vote or message per call, whatever counts, types and buffers each
// rank passes.
//
// The communicator's first blocking alltoallv with kAuto and no pinned tag
// makes the mailbox (collective: every rank of a correct program makes that
// call as its first), with rows of options.inplaceBytes / 2 of data. A call
// whose blocks do not fit some rank's row, or a mailbox that could not be
// made, runs the per-call plan as before, alike on every rank. The prepared
// call is kept while the next call's arguments repeat it.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "collectives/alltoallv_mailbox.h"
#include "ibdt/collectives.h"

namespace ibdt::collectives {

struct Communicator::AlltoallvCalls {
  bool tried = false;
  std::unique_ptr<AlltoallvMailbox> mailbox;
  // The call last prepared and what it was prepared for (its types are
  // held by `call`, so the identities below stay theirs).
  std::unique_ptr<MailboxCall> call;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  const void* sendtype = nullptr;
  const void* recvtype = nullptr;
  std::vector<int64_t> sendcounts, sdispls, recvcounts, rdispls;
};

// The communicator's mailbox: made by the first call (collective; rows of
// `shareBytes` / 2, counted as an alltoallv "mailbox"), or null alike on
// every rank when it could not be made. Shared by the blocking
// alltoallv() and the MPI bridge's MPI_Alltoallv.
AlltoallvMailbox* communicatorMailbox(Communicator& comm, int64_t shareBytes, Deadline deadline);

// True: the call ran through the mailbox and `outcome` is its result. False
// on every rank alike: run it another way. An error: the mailbox broke.
Result<bool> alltoallvThroughMailbox(Communicator& comm, const void* sendbuf, std::span<const int64_t> sendcounts,
                                     std::span<const int64_t> sdispls, const datatype::Datatype& sendtype,
                                     void* recvbuf, std::span<const int64_t> recvcounts,
                                     std::span<const int64_t> rdispls, const datatype::Datatype& recvtype,
                                     const AlltoallvOptions& options, Deadline deadline, Status& outcome);

}  // namespace ibdt::collectives
