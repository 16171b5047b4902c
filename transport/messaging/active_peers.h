// transport/messaging/active_peers.h — the peers progress() has work for.
//
// A rank of a large job talks to few peers at any moment, so progress()
// must cost O(peers with work), not O(peers) (docs/many-ranks.md).
// Wherever work is added for a peer — a control message queued, a transfer
// with data left to post, a receive buffer reposted (a credit that may fall
// due) — the peer is marked; progress() walks only the marked ones and marks
// again those that still have work after its visit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ibdt::messaging {

class ActivePeers {
 public:
  void init(int ranks) { marked_.assign(static_cast<size_t>(ranks), 0); }

  // `rank` has work for progress(); marking a marked rank does nothing.
  void mark(int rank) {
    uint8_t& marked = marked_[static_cast<size_t>(rank)];
    if (marked) return;
    marked = 1;
    list_.push_back(rank);
  }

  // Takes the marked ranks for one walk and unmarks them: a rank given work
  // during the walk (or that keeps some) is marked again and visited by the
  // next walk. The span stays valid until the next takeForWalk().
  std::span<const int> takeForWalk() {
    walking_.swap(list_);
    list_.clear();
    for (int rank : walking_) marked_[static_cast<size_t>(rank)] = 0;
    visits_ += walking_.size();
    return walking_;
  }

  // Peers handed to walks so far (what a test asserts an idle progress does
  // not grow with the number of connected peers).
  uint64_t visits() const { return visits_; }

 private:
  std::vector<uint8_t> marked_;  // by rank: on list_
  std::vector<int> list_;
  std::vector<int> walking_;
  uint64_t visits_ = 0;
};

}  // namespace ibdt::messaging
