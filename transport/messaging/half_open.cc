// A deadline on half-open links (connection.h): a link we accepted stays
// half open until the requester says kReady or sends anything. A requester
// that never does (it died after asking, or it was a forged request from a
// member of the job) would otherwise hold what we queue for it until
// close() times out; after IBDT_MSG_CONNECT_TIMEOUT_MS that rank fails with
// an error that says so, as a requester fails a rank that does not answer.
#include "transport/messaging/connections.h"

namespace ibdt::messaging {

namespace {
// Half-open links are rare and their deadline is seconds away: look a few
// times a second, not on every progress call.
constexpr auto kHalfOpenCheckInterval = std::chrono::milliseconds(50);
}  // namespace

void Connections::expireHalfOpenLinks() {
  auto now = std::chrono::steady_clock::now();
  if (now < nextHalfOpenCheck_) return;
  nextHalfOpenCheck_ = now + kHalfOpenCheckInterval;
  for (int rank = 0; rank < size_; ++rank) {
    const Link& link = at(rank);
    if (rank == rank_ || link.state != LinkState::kConnected || link.remoteReady || host_.peerFailed(rank) ||
        !link.deadline.expired()) {
      continue;
    }
    host_.failPeer(rank, makeError(Code::kPeerFailed, "rank ", rank,
                                   " requested a connection and did not complete it within ", connectTimeoutMs_,
                                   " ms (half-open link; IBDT_MSG_CONNECT_TIMEOUT_MS)",
                                   link.dropped.empty() ? "" : "; dropped from it: ", link.dropped));
  }
}

}  // namespace ibdt::messaging
