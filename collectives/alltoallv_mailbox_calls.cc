// The blocking alltoallv through the communicator's mailbox (see the header).
#include "collectives/alltoallv_mailbox_calls.h"

#include <algorithm>

#include "base/log.h"

namespace ibdt::collectives {
namespace {

bool same(const std::vector<int64_t>& kept, std::span<const int64_t> values) {
  return std::equal(kept.begin(), kept.end(), values.begin(), values.end());
}

std::vector<int64_t> copied(std::span<const int64_t> values) { return {values.begin(), values.end()}; }

}  // namespace

AlltoallvMailbox* communicatorMailbox(Communicator& comm, int64_t shareBytes, Deadline deadline) {
  std::unique_ptr<Communicator::AlltoallvCalls>& calls = comm.alltoallvCalls();
  if (!calls) calls = std::make_unique<Communicator::AlltoallvCalls>();
  if (!calls->tried) {
    calls->tried = true;
    // Every rank gets the same verdict; without a mailbox every call runs its plan.
    auto made = AlltoallvMailbox::create(comm, shareBytes, deadline);
    if (made.isOk()) {
      calls->mailbox = std::move(*made);
      if (calls->mailbox) comm.countAlgorithm("alltoallv", "mailbox", true);
    } else {
      IBDT_LOG(kDebug, "alltoallv: no mailbox: ", made.status().toString());
    }
  }
  return calls->mailbox.get();
}

Result<bool> alltoallvThroughMailbox(Communicator& comm, const void* sendbuf, std::span<const int64_t> sendcounts,
                                     std::span<const int64_t> sdispls, const datatype::Datatype& sendtype,
                                     void* recvbuf, std::span<const int64_t> recvcounts,
                                     std::span<const int64_t> rdispls, const datatype::Datatype& recvtype,
                                     const AlltoallvOptions& options, Deadline deadline, Status& outcome) {
  AlltoallvMailbox* mailbox = communicatorMailbox(comm, options.inplaceBytes, deadline);
  if (mailbox == nullptr) return false;
  std::unique_ptr<Communicator::AlltoallvCalls>& calls = comm.alltoallvCalls();
  const bool inPlace = sendbuf == kInPlace;
  const void* sendIdentity = inPlace ? nullptr : sendtype.impl();
  const bool repeats = calls->call && calls->sendbuf == sendbuf && calls->recvbuf == recvbuf &&
                       calls->sendtype == sendIdentity && calls->recvtype == recvtype.impl() &&
                       same(calls->sendcounts, sendcounts) && same(calls->sdispls, sdispls) &&
                       same(calls->recvcounts, recvcounts) && same(calls->rdispls, rdispls);
  if (!repeats) {
    calls->call = std::make_unique<MailboxCall>(MailboxCall::prepare(checkAlltoallvArgs(
        comm, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype)));
    calls->sendbuf = sendbuf;
    calls->recvbuf = recvbuf;
    calls->sendtype = sendIdentity;
    calls->recvtype = recvtype.impl();
    calls->sendcounts = copied(sendcounts);
    calls->sdispls = copied(sdispls);
    calls->recvcounts = copied(recvcounts);
    calls->rdispls = copied(rdispls);
  }
  return mailbox->run(*calls->call, deadline, outcome);
}

}  // namespace ibdt::collectives
