// The per-pair statements of the segment alltoallvs (see the header).
#include "collectives/alltoallv_pair_view.h"

namespace ibdt::collectives {

void fillPairView(const AlltoallvArgs& args, int peer, int64_t sendAt, int64_t* view) {
  const auto at = static_cast<size_t>(peer);
  view[kSendAt] = sendAt;
  view[kSendBytes] = args.sendcounts[at] * args.sendtype.size();
  view[kSendHash] = static_cast<int64_t>(args.sendSignatures[at].hash);
  view[kSendElements] = args.sendSignatures[at].elements;
  view[kRecvBytes] = args.recvcounts[at] * args.recvtype.size();
  view[kRecvHash] = static_cast<int64_t>(args.recvSignatures[at].hash);
  view[kRecvElements] = args.recvSignatures[at].elements;
  view[kSendAddress] = 0;
}

Status pairMismatch(std::string_view what, int from, int to, const int64_t* send, const int64_t* recv) {
  if (send[kSendBytes] == recv[kRecvBytes] && send[kSendHash] == recv[kRecvHash] &&
      send[kSendElements] == recv[kRecvElements]) {
    return Status::ok();
  }
  return makeError(Code::kInvalidArgument, what, ": rank ", from, " sends rank ", to, " ", send[kSendBytes],
                   " bytes (", send[kSendElements], " elements), rank ", to, " receives ", recv[kRecvBytes],
                   " bytes (", recv[kRecvElements], " elements) of another signature or length");
}

}  // namespace ibdt::collectives
