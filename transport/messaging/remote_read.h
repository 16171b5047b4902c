// transport/messaging/remote_read.h — P-RRS on the receiver: the sender
// offered its packed message (wire::Packed) and we READ it into the
// zero-copy receive, scattered by the receive's layout, within the send
// queue and the provider's reads in flight. The receiver then sends Fin.
#pragma once

#include <cstdint>

#include "transport/messaging/operation.h"
#include "transport/messaging/rendezvous_services.h"

namespace ibdt::messaging {

class RemoteRead {
 public:
  // Transfer `transferId` reads `bytes` packed bytes from what `packed` offers.
  RemoteRead(uint32_t transferId, const wire::Packed& packed, int64_t bytes)
      : transferId_(transferId), packed_(packed), bytes_(bytes) {}

  // Posts the reads `rank` has room for, into `op`'s buffer (`registration`).
  Status advance(RendezvousServices& services, int rank, const Operation& op, const UserRegistration& registration);
  bool allPosted() const { return next_ == bytes_; }
  // One read completed; true once every read did.
  bool readCompleted() {
    ++completed_;
    return next_ == bytes_ && completed_ == posted_;
  }

 private:
  uint32_t transferId_;
  wire::Packed packed_;
  int64_t bytes_;
  int64_t next_ = 0;  // next packed byte to read
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
};

}  // namespace ibdt::messaging
