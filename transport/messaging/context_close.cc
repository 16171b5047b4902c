// Closing a Context: each rank tells each peer "nothing more" once quiet
// toward it, and waits for theirs; receives still posted are cancelled.
#include "base/backoff.h"
#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {

bool ContextImpl::quietToward(const Peer& peer) const {
  return peer.control().empty() && peer.sendsOutstanding() == 0 && !sender_.involves(peer.rank()) &&
         !receiver_.involves(peer.rank());
}

Status ContextImpl::sendClose(Peer& peer) {
  IBDT_ASSIGN_OR_RETURN(bool sent, control_.sendReserved(peer, wire::Kind::kClose));
  if (sent) connections_.markCloseSent(peer.rank());  // else next round
  return Status::ok();
}

Status ContextImpl::handleClose(Peer& peer) {
  // A peer closes once quiet toward us (quietToward): no part of a message
  // or of a transfer it takes part in may still be owed. (A send of ours it
  // never answered is its application's error, not the protocol's.)
  if (peer.inbound().active()) {
    return makeError(Code::kProtocol, "rank ", peer.rank(), " closed at byte ", peer.inbound().received(), " of its ",
                     peer.inbound().bytes(), "-byte pipelined message");
  }
  IBDT_RETURN_IF_ERROR(receiver_.checkPeerClosed(peer.rank()));
  IBDT_RETURN_IF_ERROR(sender_.checkPeerClosed(peer.rank()));
  connections_.markCloseReceived(peer.rank());
  return Status::ok();
}

// One round of close(): says "nothing more" to each peer we are quiet
// toward; true once every live link has exchanged both.
bool ContextImpl::closeRound() {
  bool done = true;
  for (Peer& peer : peers_) {
    const Link& link = connections_.link(peer.rank());
    if (peer.failed() || link.state == LinkState::kIdle) continue;
    if (peer.self()) {
      done = done && quietToward(peer);
      continue;
    }
    if (!link.closeSent && link.ready() && quietToward(peer)) {
      Status status = sendClose(peer);
      if (!status.isOk()) failPeer(peer, status);
    }
    // Our "nothing more" has left (its send completed) and theirs arrived.
    bool finished = link.closeSent && peer.sendsOutstanding() == 0 && link.closeReceived;
    done = done && (finished || peer.failed());
  }
  return done;
}

Status ContextImpl::close(Deadline deadline) {
  if (closed_) return Status::ok();
  Backoff backoff(spins_);
  for (;;) {
    uint64_t before = events_;
    IBDT_RETURN_IF_ERROR(progress());
    if (closeRound()) break;
    if (deadline.expired()) {
      int waiting = 0;
      for (const Peer& peer : peers_) {
        const Link& link = connections_.link(peer.rank());
        if (!peer.self() && !peer.failed() && link.state != LinkState::kIdle && !link.closeReceived) {
          waiting = peer.rank();
          break;
        }
      }
      return makeError(Code::kTimeout, "close: rank ", rank_, " is still exchanging with its peers (e.g. rank ",
                       waiting, ")");
    }
    if (events_ != before) backoff.reset();
    else backoff.pause();
  }
  // Receives no message will match any more.
  for (auto& left : matching_.unpostAll([](const Operation&) { return true; })) {
    complete(*left, makeError(Code::kCancelled, "receive still posted when the context closed"));
  }
  closed_ = true;
  return Status::ok();
}

}  // namespace ibdt::messaging
