// MPI matching and the unexpected-message budget (matching.h).
#include "transport/messaging/matching.h"

#include <algorithm>

namespace ibdt::messaging {

Matching::~Matching() {
  while (Unexpected* left = unexpected_.takeFirst([](const Unexpected&) { return true; })) delete left;
  // Receives still posted own themselves: break that cycle.
  while (Operation* left = posted_.takeFirst([](const Operation&) { return true; })) {
    std::shared_ptr<Operation> owner = std::move(left->postedSelf);
  }
}

Matching::Taken Matching::takeUnexpected(const MatchSpec& spec) {
  Unexpected* arrived = unexpected_.takeFirst([&](const Unexpected& u) { return spec.accepts(u.envelope); });
  if (arrived != nullptr) release(*arrived);  // its bytes go to the receive (or away with it)
  return Taken(arrived, Recycler{this});
}

Unexpected* Matching::fresh() {
  if (spares_.empty()) return new Unexpected;
  Unexpected* reused = spares_.back().release();
  spares_.pop_back();
  return reused;
}

void Matching::recycle(Unexpected* unexpected) {
  if (unexpected == nullptr) return;
  if (spares_.size() >= kSpares) {
    delete unexpected;
    return;
  }
  std::vector<uint8_t> payload = std::move(unexpected->payload);
  payload.clear();
  if (payload.capacity() > kSparePayloadBytes) payload = {};
  unexpected->envelope = {};
  unexpected->peer = 0;
  unexpected->wireEnvelope = {};
  unexpected->kind = wire::Kind::kEager;
  unexpected->payload = std::move(payload);
  unexpected->rts = {};
  unexpected->heldBytes = 0;
  spares_.emplace_back(unexpected);
}

void Matching::post(std::shared_ptr<Operation> op) {
  posted_.pushBack(op.get());
  op->postedSelf = std::move(op);
}

std::shared_ptr<Operation> Matching::unpost(Operation& op) {
  if (!posted_.remove(&op)) return nullptr;
  return std::move(op.postedSelf);
}

Result<Unexpected*> Matching::match(int rank, const wire::Envelope& envelope, std::shared_ptr<Operation>* op) {
  if (envelope.source != rank) {
    return makeError(Code::kProtocol, "rank ", rank, " sent a message claiming source ", envelope.source);
  }
  if (envelope.tag < 0) {  // no send has one; kAnyTag would then match as a tag
    return makeError(Code::kProtocol, "rank ", rank, " sent a message with negative tag ", envelope.tag);
  }
  Envelope key{envelope.source, envelope.tag, envelope.communicator};
  Operation* found = posted_.takeFirst([&](const Operation& candidate) { return candidate.spec.accepts(key); });
  if (found != nullptr) {
    *op = std::move(found->postedSelf);
    return nullptr;
  }
  Unexpected* unexpected = fresh();
  unexpected->envelope = key;
  unexpected->peer = rank;
  unexpected->wireEnvelope = envelope;
  unexpected_.pushBack(unexpected);
  ++counters_.unexpected;
  hold(*unexpected, sizeof(Unexpected));
  return unexpected;
}

void Matching::hold(Unexpected& unexpected, size_t bytes) {
  unexpected.heldBytes += bytes;
  heldBytes_ += bytes;
  counters_.unexpectedBytesPeak = std::max(counters_.unexpectedBytesPeak, heldBytes_);
}

void Matching::discard(Unexpected* unexpected) {
  if (unexpected == nullptr || !unexpected_.remove(unexpected)) return;
  release(*unexpected);
  recycle(unexpected);
}

bool Matching::receivePostedFrom(int rank) const {
  bool found = false;
  posted_.forEach(
      [&](const Operation& op) { found = found || op.spec.source == kAnySource || op.spec.source == rank; });
  return found;
}

}  // namespace ibdt::messaging
