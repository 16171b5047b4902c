// collectives/checked_alltoallv.h — a pairwise alltoallv for a caller whose
// ranks build and reuse plans independently, with no agreement per call
// (the MPI bridge's blocking MPI_Alltoallv, docs/mpi.md).
//
// Its data runs on the communicator's pinned tag (Communicator::pinPlanTag),
// like the bridge's blocking alltoall: runs complete one at a time, so one
// rank may start a cached plan while a peer builds a new one and the
// messages still pair up. The pair check (pair_signature_check.h) runs on a
// tag of its own, only in a plan's first run and only with the peers whose
// pair signatures (what this rank sends to and expects from that peer)
// differ from the last ones checked with it (PairCheckHistory). In a
// correct program a pair's signatures change on both of its ranks together,
// so both check or neither does; a later run, or a rank that only moved its
// buffers or displacements, exchanges data alone.
//
// A program whose pair changed on one rank only is erroneous; it must fail
// with an error, not hang. So the first run posts its data with its check
// (not after it): the data receives are checked by messaging on arrival
// (signature and size, every run), and once every data message arrived, a
// peer whose check message did not is a peer that did not check — a peer's
// messages reach matching in the order it posted them (one connection), and
// it posts its check first — so that receive is cancelled and the pair
// reported. Pairs that fail are never left out of later runs (their peer
// may not know): each run exchanges every block and reports the error.
//
// Such a check message nobody received stays queued at its peer, and a
// later check of that pair would match it. So every check message carries
// the caller's call number (the same on every rank: the calls are ordered
// collectives): a message from an earlier call is dropped and the next one
// received instead; one from a later call (the peer went on to its next
// call and checked there before this rank gave up waiting) means the peer
// did not check in this call, and is kept for this rank's check in that
// later call (PairCheckHistory).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "collectives/pair_signature_check.h"
#include "ibdt/collectives.h"
#include "ibdt/datatype.h"

namespace ibdt::collectives {

struct AlltoallvArgs;

// Per peer, the pair signatures this rank last checked with it.
class PairCheckHistory {
 public:
  struct Pair {
    datatype::Signature send, recv;
    bool operator==(const Pair&) const = default;
  };
  // Which peers `args` must be checked with (their pairs changed, or were
  // never checked); records `args`' pairs as the checked ones.
  std::vector<uint8_t> admit(const AlltoallvArgs& args, int self);
  // A pair whose check failed: checked again by the next plan.
  void forget(int peer) { pairs_[static_cast<size_t>(peer)].reset(); }
  // The pair last checked with `peer` (none: never, or it failed).
  std::optional<Pair> checked(int peer) const {
    return static_cast<size_t>(peer) < pairs_.size() ? pairs_[static_cast<size_t>(peer)] : std::nullopt;
  }
  // A pair the peer did not check: it still has the pair checked before
  // (`before`), so this rank keeps that one too, and a later call back to
  // it needs no check that the peer would not answer.
  void restore(int peer, std::optional<Pair> before) { pairs_[static_cast<size_t>(peer)] = std::move(before); }

  using Message = std::array<int64_t, PairSignatureCheck::kMessageWords>;  // its last word: the call
  // A check message `peer` sent in a later call than the one that received it.
  void keepEarly(int peer, const int64_t* words);
  // The message kept from `peer` for `call`, if any; drops older ones.
  std::optional<Message> takeEarly(int peer, int64_t call);

 private:
  std::vector<std::optional<Pair>> pairs_;
  std::vector<std::optional<Message>> early_;  // by peer
};

// alltoallvInit's pairwise plan (not in place) with the checks above; its
// data takes the pinned tag, its check `checkTag` (a reserved tag no other
// plan uses). `history` outlives the plan's first run; `call` numbers the
// caller's calls alike on every rank, and the first run is call `call`.
Result<Plan> checkedAlltoallvInit(Communicator& comm, int32_t checkTag, int64_t call,
                                  std::shared_ptr<PairCheckHistory> history,
                                  const void* sendbuf, std::span<const int64_t> sendcounts,
                                  std::span<const int64_t> sdispls, const datatype::Datatype& sendtype,
                                  void* recvbuf, std::span<const int64_t> recvcounts,
                                  std::span<const int64_t> rdispls, const datatype::Datatype& recvtype,
                                  int64_t throttle);

}  // namespace ibdt::collectives
