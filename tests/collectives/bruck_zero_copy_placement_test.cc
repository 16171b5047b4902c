// Zero-copy Bruck's placement (collectives/bruck_zero_copy_placement.cc),
// replayed round by round at one rank: every send takes the block from where
// it is, every receive lands in an empty place not sent from in the same
// round, each block ends in its own receive block, and the intermediate
// buffer holds fewer than ⌊p/2⌋ blocks (the paper's open problem).
#include "collectives/bruck_zero_copy_placement.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ibdt::collectives {
namespace {

using Buffer = BruckPlace::Buffer;

// Replays the placement; returns the first violation, or "".
std::string replay(int size, const BruckPlacement& placement) {
  const int64_t slots = placement.intermediateSlots;
  // What each place holds: the block j, or -1.
  std::vector<int> receiveBlock(static_cast<size_t>(size), -1), slot(static_cast<size_t>(slots), -1);
  auto holder = [&](const BruckPlace& place) -> int* {
    if (place.buffer == Buffer::kReceive && place.index >= 0 && place.index < size) {
      return &receiveBlock[static_cast<size_t>(place.index)];
    }
    if (place.buffer == Buffer::kIntermediate && place.index >= 0 && place.index < slots) {
      return &slot[static_cast<size_t>(place.index)];
    }
    return nullptr;
  };
  const int rounds = static_cast<int>(placement.sendFrom.size());
  for (int round = 0; round < rounds; ++round) {
    const std::string at = " at p = " + std::to_string(size) + ", round " + std::to_string(round);
    std::set<int*> sentFrom;
    std::vector<std::pair<int*, int>> arrivals;
    for (int j = 1; j < size; ++j) {
      if (((j >> round) & 1) == 0) continue;
      const BruckPlace from = placement.sendFrom[static_cast<size_t>(round)][static_cast<size_t>(j)];
      const bool fresh = (j & ((1 << round) - 1)) == 0;
      if (fresh != (from.buffer == Buffer::kSend)) return "block " + std::to_string(j) + " sent from the wrong buffer" + at;
      if (!fresh) {
        int* place = holder(from);
        if (place == nullptr || *place != j) return "block " + std::to_string(j) + " is not where it is sent from" + at;
        sentFrom.insert(place);
      }
      const BruckPlace into = placement.receiveInto[static_cast<size_t>(round)][static_cast<size_t>(j)];
      const bool last = (j >> (round + 1)) == 0;
      if (last && !(into.buffer == Buffer::kReceive && into.index == j)) {
        return "block " + std::to_string(j) + "'s last hop misses its receive block" + at;
      }
      int* place = holder(into);
      if (place == nullptr || into.buffer == Buffer::kSend) return "block " + std::to_string(j) + " received nowhere" + at;
      arrivals.emplace_back(place, j);
    }
    for (int* place : sentFrom) *place = -1;  // sends and receives of one round overlap:
    std::set<int*> taken;                     // a place sent from is not free yet
    for (auto [place, j] : arrivals) {
      const bool busy = sentFrom.count(place) != 0 || !taken.insert(place).second;
      if (busy || *place != -1) return "block " + std::to_string(j) + " received into a busy place" + at;
    }
    for (auto [place, j] : arrivals) *place = j;
  }
  for (int j = 1; j < size; ++j) {
    if (receiveBlock[static_cast<size_t>(j)] != j) return "block " + std::to_string(j) + " did not arrive";
  }
  for (int held : slot) {
    if (held != -1) return "an intermediate slot still holds block " + std::to_string(held);
  }
  return "";
}

void expectValidAndSmall(int size) {
  const BruckPlacement placement = placeZeroCopyBruck(size);
  ASSERT_EQ(replay(size, placement), "");
  if (size >= 3) {
    EXPECT_LT(placement.intermediateSlots, size / 2) << "p = " << size;
  } else {
    EXPECT_EQ(placement.intermediateSlots, 0) << "p = " << size;
  }
}

TEST(BruckZeroCopyPlacement, EveryRankCountUpTo600) {
  for (int size = 1; size <= 600; ++size) expectValidAndSmall(size);
}

TEST(BruckZeroCopyPlacement, LargeAndAwkwardRankCounts) {
  for (int size : {1023, 1024, 1025, 1531, 2047, 2048, 3000, 4095, 4096}) expectValidAndSmall(size);
}

// The counts docs/alltoall-bruck.md quotes (the paper allocates p blocks);
// for p a power of two, p/2 - 1 is the minimum.
TEST(BruckZeroCopyPlacement, QuotedSlotCounts) {
  EXPECT_EQ(placeZeroCopyBruck(8).intermediateSlots, 3);
  EXPECT_EQ(placeZeroCopyBruck(13).intermediateSlots, 4);
  EXPECT_EQ(placeZeroCopyBruck(100).intermediateSlots, 42);
  EXPECT_EQ(placeZeroCopyBruck(1024).intermediateSlots, 511);
  for (int size = 4; size <= 4096; size *= 2) EXPECT_EQ(placeZeroCopyBruck(size).intermediateSlots, size / 2 - 1);
}

// A placement that breaks the rules is caught by the replay (the checker
// itself can fail).
TEST(BruckZeroCopyPlacement, ReplayCatchesABrokenPlacement) {
  BruckPlacement placement = placeZeroCopyBruck(8);
  // Block 3 arrives in round 0 and leaves in round 1: make it leave from a
  // place it is not in.
  BruckPlace& from = placement.sendFrom[1][3];
  from.index = from.buffer == Buffer::kIntermediate ? (from.index + 1) % 3 : (from.index % 7) + 1;
  EXPECT_NE(replay(8, placement), "");
}

}  // namespace
}  // namespace ibdt::collectives
