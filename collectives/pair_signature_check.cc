// The alltoallv pair check (see pair_signature_check.h).
#include "collectives/pair_signature_check.h"

#include <algorithm>

namespace ibdt::collectives {
namespace {

constexpr int64_t kNothing = -1;  // a header slot no message filled (the peer failed)

}  // namespace

PairSignatureCheck::PairSignatureCheck(const Communicator& comm, const AlltoallvArgs& args)
    : rank_(comm.rank()), args_(args) {
  const size_t size = static_cast<size_t>(comm.size());
  mine_.resize(size * kMessageWords);
  theirs_.assign(size * kMessageWords, kNothing);
  skipped_.assign(size, 0);
  silent_.resize(size);
  for (size_t peer = 0; peer < size; ++peer) pairWords(args, peer, mine_.data() + peer * kMessageWords);
}

void PairSignatureCheck::pairWords(const AlltoallvArgs& args, size_t peer, int64_t* words) {
  words[0] = static_cast<int64_t>(args.sendSignatures[peer].hash);
  words[1] = args.sendSignatures[peer].elements;
  words[2] = static_cast<int64_t>(args.recvSignatures[peer].hash);
  words[3] = args.recvSignatures[peer].elements;
  words[4] = args.sendcounts[peer];
  words[5] = args.recvcounts[peer];
}

Status PairSignatureCheck::comparePair(int rank, int peer, bool inPlace, const int64_t* mine, const int64_t* theirs,
                                       bool dataStillExchanged) {
  if (inPlace && (theirs[4] != mine[5] || theirs[5] != mine[4])) {  // in place, items are counted alike
    return makeError(Code::kInvalidArgument, "alltoallv (in place) rank ", rank, ": rank ", peer, " sends ",
                     theirs[4], " elements where this rank expects ", mine[5], ", and expects ", theirs[5],
                     " where this rank sends ", mine[4], " (in place, every rank must use the same recvtype;",
                     " the signatures must match)");
  }
  // What the peer sends me against what I expect, and what it expects against what I send.
  const bool recvOk = theirs[0] == mine[2] && theirs[1] == mine[3];
  const bool sendOk = theirs[2] == mine[0] && theirs[3] == mine[1];
  if (recvOk && sendOk) return Status::ok();
  return makeError(Code::kInvalidArgument, "alltoallv rank ", rank, ": the signatures with rank ", peer,
                   " differ (it sends ", theirs[1], " basic elements, this rank expects ", mine[3], "; it expects ",
                   theirs[3], ", this rank sends ", mine[1], "; equal numbers: the basic types differ); ",
                   dataStillExchanged ? "the blocks were exchanged and checked on arrival"
                                      : "neither direction is exchanged");
}

Result<std::unique_ptr<PairSignatureCheck>> PairSignatureCheck::create(Communicator& comm,
                                                                       const AlltoallvArgs& args, int64_t throttle,
                                                                       int64_t call) {
  std::unique_ptr<PairSignatureCheck> check(new PairSignatureCheck(comm, args));
  for (size_t peer = 0; peer < static_cast<size_t>(comm.size()); ++peer) {
    check->mine_[peer * kMessageWords + kWords] = call;
  }
  const datatype::Datatype word = datatype::Datatype::of<int64_t>();
  PairwiseLayout layout{word, word, {}};
  for (int peer = 0; peer < comm.size(); ++peer) {
    const bool self = peer == comm.rank();  // its own pair was checked at init
    const size_t at = static_cast<size_t>(peer) * kMessageWords;
    const int64_t words = self ? 0 : int64_t{kMessageWords};
    layout.peers.push_back({reinterpret_cast<const std::byte*>(check->mine_.data() + at), words,
                            reinterpret_cast<std::byte*>(check->theirs_.data() + at), words});
  }
  IBDT_ASSIGN_OR_RETURN(check->rounds_, PairwiseRounds::create(comm, std::move(layout), throttle,
                                                               "alltoallv (pair check)", "pair check"));
  return check;
}

void PairSignatureCheck::skipPeer(int peer) {
  skipped_[static_cast<size_t>(peer)] = 1;
  rounds_->skipPeer(peer, true, true);
}

void PairSignatureCheck::useKnown(int peer, const int64_t* words) {
  std::copy_n(words, kMessageWords, received(peer));
  rounds_->skipPeer(peer, false, true);
}

void PairSignatureCheck::noteSilent(int peer, Status why) {
  std::fill_n(received(peer), kMessageWords, kNothing);
  silent_[static_cast<size_t>(peer)] = std::move(why);
}

Status PairSignatureCheck::verdict(std::vector<uint8_t>& sendOk, std::vector<uint8_t>& recvOk) const {
  const size_t size = args_.sendcounts.size();
  sendOk.assign(size, 1);
  recvOk.assign(size, 1);
  Status first = rounds_->outcome();
  for (size_t peer = 0; peer < size; ++peer) {
    if (static_cast<int>(peer) == rank_ || skipped_[peer]) continue;
    const int64_t* theirs = theirs_.data() + peer * kMessageWords;
    const int64_t* mine = mine_.data() + peer * kMessageWords;
    if (theirs[1] == kNothing) {  // no header from the peer: it failed, or the header did
      sendOk[peer] = recvOk[peer] = 0;
      if (first.isOk()) {
        first = !silent_[peer].isOk()
                    ? silent_[peer]
                    : makeError(Code::kPeerFailed, "alltoallv rank ", rank_, ": no signatures from rank ", peer);
      }
      continue;
    }
    Status pair = comparePair(rank_, static_cast<int>(peer), args_.inPlace, mine, theirs, dataStillExchanged_);
    if (pair.isOk()) continue;
    sendOk[peer] = recvOk[peer] = 0;  // both ways: the pair is out
    if (first.isOk()) first = std::move(pair);
  }
  return first;
}

}  // namespace ibdt::collectives
