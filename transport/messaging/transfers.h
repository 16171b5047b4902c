// transport/messaging/transfers.h — the state of one rendezvous, on each
// side, and the walk over a peer's transfers with work left.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "transport/messaging/operation.h"
#include "transport/messaging/recv_protocol.h"
#include "transport/messaging/remote_read.h"
#include "transport/messaging/send_protocol.h"
#include "transport/messaging/staging.h"

namespace ibdt::messaging {

// Sender side of one rendezvous.
struct SendTransfer {
  uint32_t id = 0;
  std::shared_ptr<Operation> op;
  bool wantsPack = false;
  bool replied = false;
  wire::Cts cts{};
  std::unique_ptr<SendProtocol> protocol;  // the scheme's data phase, once the reply arrived
  int64_t next = 0;                        // next packed byte to post
  uint64_t posted = 0;
  uint64_t completed = 0;
  uint64_t released = 0;  // ring segments the receiver freed
  bool waitingForFin = false;
  std::deque<std::pair<uint64_t, Staging>> inFlight;  // staging freed after `first` completions
};

// Receiver side of one rendezvous.
struct RecvTransfer {
  uint32_t id = 0;
  std::shared_ptr<Operation> op;
  uint32_t senderTransfer = 0;
  int64_t bytes = 0;  // packed bytes that will arrive
  int64_t messageBytes = 0;
  std::unique_ptr<RecvProtocol> protocol;  // unpack or zero-copy, by the reply
  // P-RRS: the sender offered its packed data; we read it into the zero-copy receive.
  std::optional<RemoteRead> read;
};

// Advances each transfer listed in `ids` once; drops the ids whose requests
// are all posted (or whose transfer is gone).
template <typename Transfers, typename Advance, typename AllPosted>
Status advanceListed(std::deque<uint32_t>& ids, Transfers& transfers, Advance&& advance, AllPosted&& allPosted) {
  Status status;
  for (size_t i = 0; status.isOk() && i < ids.size();) {
    auto found = transfers.find(ids[i]);
    bool drop = found == transfers.end();
    if (!drop) {
      status = advance(*found->second);
      drop = allPosted(*found->second);
    }
    if (drop)
      ids.erase(ids.begin() + static_cast<long>(i));
    else
      ++i;
  }
  return status;
}

}  // namespace ibdt::messaging
