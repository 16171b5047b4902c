// Zero-copy Bruck's block placement as interval colouring. At one rank,
// block j (relative to the rank) arrives in each round whose bit is set in j
// and leaves in the next such round: a hop occupies a place over the rounds
// [arrive, depart]. Its last hop lands in receive block j and stays. Two
// hops may share a place when their rounds do not overlap (a round never
// receives where it sends from), and a receive block may hold hops that
// leave before its own block arrives.
//
// Placing the hops by decreasing departure, any place free over the hop is
// as good as any other for the hops still to come (they leave no later, so
// every place free now stays free for them), so taking receive blocks first
// opens the fewest intermediate slots: the count is the largest overlap the
// receive blocks cannot absorb, e.g. p = 8: 3 slots (the paper's rule needs
// 8, its slots reused 4), 1024: 511, and fewer than ⌊p/2⌋ for every p ≥ 3
// (tests/collectives/bruck_zero_copy_placement_test.cc checks p ≤ 4096).
#include "collectives/bruck_zero_copy_placement.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

#include "collectives/bruck_rounds.h"

namespace ibdt::collectives {
namespace {

struct Hop {
  int arrive, depart, block;
};

// Places keyed by `Key`, each free up to (not including) a round; takes one
// whose key admits the hop and records that it is now busy from `arrive`.
template <typename Key>
class FreePlaces {
 public:
  void add(Key key, int64_t place) { free_[key].push_back(place); }

  // `fits(place)`: the place is large enough (always, for equal blocks).
  template <typename Admits, typename Rekey, typename Fits>
  bool take(Admits admits, Rekey rekey, Fits fits, int64_t& place) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (!admits(it->first)) continue;
      auto& places = it->second;
      for (auto candidate = places.rbegin(); candidate != places.rend(); ++candidate) {
        if (!fits(*candidate)) continue;
        place = *candidate;
        places.erase(std::next(candidate).base());
        const Key next = rekey(it->first);
        if (places.empty()) free_.erase(it);
        free_[next].push_back(place);
        return true;
      }
    }
    return false;
  }

 private:
  std::map<Key, std::vector<int64_t>> free_;
};

}  // namespace

BruckPlacement placeZeroCopyBruck(int size) {
  return placeZeroCopyBruck(size, [](int, int, int64_t) { return true; });
}

BruckPlacement placeZeroCopyBruck(int size, const BlockFits& fits) {
  const int rounds = bruckRounds(size);
  BruckPlacement placement;
  placement.receiveInto.assign(static_cast<size_t>(rounds), std::vector<BruckPlace>(static_cast<size_t>(size)));
  placement.sendFrom = placement.receiveInto;

  std::vector<Hop> hops;
  // Receive blocks by (round their own block arrives, free before round).
  FreePlaces<std::pair<int, int>> receiveBlocks;
  for (int j = 1; j < size; ++j) {
    int previous = -1;
    for (int round = 0; round < rounds; ++round) {
      if (((j >> round) & 1) == 0) continue;
      if (previous < 0) {
        placement.sendFrom[static_cast<size_t>(round)][static_cast<size_t>(j)] = {BruckPlace::Buffer::kSend, 0};
      } else {
        hops.push_back({previous, round, j});
      }
      previous = round;
    }
    placement.receiveInto[static_cast<size_t>(previous)][static_cast<size_t>(j)] = {BruckPlace::Buffer::kReceive, j};
    receiveBlocks.add({previous, rounds}, j);
  }
  std::stable_sort(hops.begin(), hops.end(), [](const Hop& a, const Hop& b) { return a.depart > b.depart; });

  FreePlaces<int> slots;  // intermediate slots by "free before round"
  for (const Hop& hop : hops) {
    BruckPlace place{BruckPlace::Buffer::kReceive, 0};
    const bool inReceiveBlock = receiveBlocks.take(
        [&](const std::pair<int, int>& key) { return key.first > hop.depart && key.second > hop.depart; },
        [&](const std::pair<int, int>& key) { return std::pair<int, int>{key.first, hop.arrive}; },
        [&](int64_t receiveBlock) { return fits(hop.block, hop.arrive, receiveBlock); }, place.index);
    if (!inReceiveBlock) {
      place.buffer = BruckPlace::Buffer::kIntermediate;
      if (!slots.take([&](int freeBefore) { return freeBefore > hop.depart; }, [&](int) { return hop.arrive; },
                      [](int64_t) { return true; }, place.index)) {
        place.index = placement.intermediateSlots++;
        slots.add(hop.arrive, place.index);
      }
    }
    placement.receiveInto[static_cast<size_t>(hop.arrive)][static_cast<size_t>(hop.block)] = place;
    placement.sendFrom[static_cast<size_t>(hop.depart)][static_cast<size_t>(hop.block)] = place;
  }
  return placement;
}

}  // namespace ibdt::collectives
