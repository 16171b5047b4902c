// P-RRS reads (remote_read.h).
#include "transport/messaging/remote_read.h"

#include <algorithm>
#include <vector>

namespace ibdt::messaging {

Status RemoteRead::advance(RendezvousServices& services, int rank, const Operation& op,
                           const UserRegistration& registration) {
  const uint32_t maxSge = services.maxSgePerRequest();
  const auto maxBytes = static_cast<int64_t>(services.maxWriteBytes());
  std::vector<datatype::Iovec> iovecs(maxSge);
  std::vector<fabric::Sge> sges(maxSge);
  while (next_ < bytes_ && services.readRoom(rank)) {
    int64_t last = std::min<int64_t>(bytes_, next_ + maxBytes);
    IBDT_ASSIGN_OR_RETURN(
        auto fill, op.segment->iovecs(reinterpret_cast<uint64_t>(op.recvBuffer), next_, last, iovecs.data(), maxSge));
    for (size_t i = 0; i < fill.entries; ++i) {
      sges[i] = {iovecs[i].address, static_cast<uint32_t>(iovecs[i].length),
                 registration.lkey(iovecs[i].address, iovecs[i].length)};
    }
    fabric::SendRequest request;
    request.id = wrId(WrKind::kRead, transferId_);
    request.opcode = fabric::Opcode::kRead;
    request.sgList = sges.data();
    request.numSge = static_cast<uint32_t>(fill.entries);
    request.remoteAddress = packed_.address + static_cast<uint64_t>(next_);
    request.rkey = packed_.rkey;
    IBDT_RETURN_IF_ERROR(services.postRead(rank, request));
    ++posted_;
    next_ += fill.bytes;
  }
  return Status::ok();
}

}  // namespace ibdt::messaging
