// transport/messaging/matching.h — MPI matching for one Context: the posted
// receives and the unexpected messages, each in order, and the
// unexpected-message budget (Options::unexpectedMaxBytes). Bytes an
// unexpected message holds are counted as they arrive and given back when a
// receive (or a failure) takes it; over the budget, CreditFlow withholds
// buffers consumed from other ranks (ContextImpl::mayWithhold) until it is
// met again (docs/design.md, messaging).
#pragma once

#include <memory>
#include <vector>

#include "ibdt/messaging.h"
#include "transport/messaging/match_list.h"
#include "transport/messaging/operation.h"

namespace ibdt::messaging {

class Matching {
 public:
  Matching(const Options& options, Counters& counters) : options_(options), counters_(counters) {}
  ~Matching();
  Matching(const Matching&) = delete;
  Matching& operator=(const Matching&) = delete;

  // Entries handed out go back through recycle(): the next unexpected
  // message reuses one (and a small payload's capacity), so a stream of
  // small unexpected messages allocates nothing.
  struct Recycler {
    Matching* matching;
    void operator()(Unexpected* unexpected) const { matching->recycle(unexpected); }
  };
  using Taken = std::unique_ptr<Unexpected, Recycler>;
  // A receive being posted: the first unexpected message it accepts, its
  // held bytes given back, or null.
  Taken takeUnexpected(const MatchSpec& spec);
  // Posts the receive: it owns itself until matched, cancelled or failed.
  void post(std::shared_ptr<Operation> op);
  // Takes `op` off the posted list; returns its owner, null if it was not posted.
  std::shared_ptr<Operation> unpost(Operation& op);
  // Takes every posted receive `select` accepts off the list (to complete them).
  template <typename Select>
  std::vector<std::shared_ptr<Operation>> unpostAll(Select&& select);
  // A message arriving from `rank`: the posted receive it matches (in
  // `*op`), or the unexpected entry now queued for it. A lying envelope is
  // that rank's protocol error.
  Result<Unexpected*> match(int rank, const wire::Envelope& envelope, std::shared_ptr<Operation>* op);

  // Counts `bytes` more held by `unexpected`.
  void hold(Unexpected& unexpected, size_t bytes);
  // Part of a message from a failed peer: no receive may take it.
  void discard(Unexpected* unexpected);
  bool overBudget() const { return heldBytes_ > static_cast<uint64_t>(options_.unexpectedMaxBytes); }
  bool receivePostedFrom(int rank) const;
  uint64_t heldBytes() const { return heldBytes_; }

 private:
  static constexpr size_t kSpares = 32;               // entries kept for reuse
  static constexpr size_t kSparePayloadBytes = 512;  // payload capacity kept with one
  Unexpected* fresh();
  void recycle(Unexpected* unexpected);
  void release(Unexpected& unexpected) {
    heldBytes_ -= unexpected.heldBytes;
    unexpected.heldBytes = 0;
  }

  const Options& options_;
  Counters& counters_;
  MatchList<Operation> posted_;
  MatchList<Unexpected> unexpected_;
  uint64_t heldBytes_ = 0;
  std::vector<std::unique_ptr<Unexpected>> spares_;
};

template <typename Select>
std::vector<std::shared_ptr<Operation>> Matching::unpostAll(Select&& select) {
  std::vector<Operation*> found;
  posted_.forEach([&](Operation& op) {
    if (select(op)) found.push_back(&op);
  });
  std::vector<std::shared_ptr<Operation>> owners;
  owners.reserve(found.size());
  for (Operation* op : found) owners.push_back(unpost(*op));
  return owners;
}

}  // namespace ibdt::messaging
