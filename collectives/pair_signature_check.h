// collectives/pair_signature_check.h — before the first run of an
// alltoallv, every pair tells each other what it will send and what it
// expects (two signatures and, for the in-place
// algorithm, the two counts: six int64 per peer, by the pairwise rounds), so
// that a pair whose counts or types differ fails on BOTH ranks with an error
// naming the peer, and neither posts a message the other will not take
// (a receiver would otherwise see only truncation and the sender nothing).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/alltoallv_args.h"
#include "collectives/pairwise_rounds.h"

namespace ibdt::collectives {

class PairSignatureCheck {
 public:
  // The words one rank tells `peer` about their pair (see the .cc).
  static constexpr size_t kWords = 6;
  static void pairWords(const AlltoallvArgs& args, size_t peer, int64_t* words);
  // Whether the pair matches, given this rank's words for `peer` and the
  // peer's for this rank: ok, or an error naming the peer. Symmetric: both
  // ranks of a pair reach the same verdict. `dataStillExchanged`: the
  // caller exchanges the blocks anyway (the error says so).
  static Status comparePair(int rank, int peer, bool inPlace, const int64_t* mine, const int64_t* theirs,
                            bool dataStillExchanged);
  // `call`: sent with the words (one more word), for a caller that must
  // tell a stale check message from the current one (checked_alltoallv.h).
  static Result<std::unique_ptr<PairSignatureCheck>> create(Communicator& comm, const AlltoallvArgs& args,
                                                            int64_t throttle, int64_t call = 0);
  // A message: the pair's words and the caller's call number.
  static constexpr size_t kMessageWords = kWords + 1;
  // The exchange, run as a plan phase.
  PairwiseRounds& rounds() { return *rounds_; }
  // Leaves `peer` out of the exchange and of the verdict (a caller that
  // knows the pair is unchanged since its last check).
  void skipPeer(int peer);
  // The message received from `peer` (kMessageWords; its last word is the
  // sender's call), to look at or replace before the verdict.
  int64_t* received(int peer) { return theirs_.data() + static_cast<size_t>(peer) * kMessageWords; }
  // `peer`'s message is already known (`words`): it is not received.
  void useKnown(int peer, const int64_t* words);
  // `peer` sent no signatures for this call (a caller found that out; what
  // was received from it is dropped): the verdict names it with `why`
  // instead of "no signatures".
  void noteSilent(int peer, Status why);
  // The caller exchanges the data of a failed pair anyway (checked on
  // arrival by messaging): the verdict says so.
  void dataStillExchanged() { dataStillExchanged_ = true; }
  // After the rounds completed: which peers this rank may send to and
  // receive from, and the first problem found (ok when every pair matches).
  Status verdict(std::vector<uint8_t>& sendOk, std::vector<uint8_t>& recvOk) const;
  // The scratch it holds.
  int64_t bytes() const { return static_cast<int64_t>((mine_.size() + theirs_.size()) * sizeof(int64_t)); }

 private:
  PairSignatureCheck(const Communicator& comm, const AlltoallvArgs& args);
  int rank_;
  const AlltoallvArgs& args_;
  std::vector<int64_t> mine_, theirs_;  // six words per peer (see the .cc)
  std::vector<uint8_t> skipped_;
  bool dataStillExchanged_ = false;
  std::vector<Status> silent_;  // by peer: ok unless noteSilent
  std::unique_ptr<PairwiseRounds> rounds_;
};

}  // namespace ibdt::collectives
