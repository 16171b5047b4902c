#include "collectives/alltoallv_data.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

namespace ibdt::collectives::testing {
namespace {

// Bytes one side spans for `total` elements (offsets are within [0, extent)
// for the sides the tests use, plus any trailing bytes of the last element).
int64_t spanBytes(const Side& element, int64_t total) {
  int64_t highest = 0;
  for (int64_t offset : element.offsets) highest = std::max(highest, offset + 1);
  return std::max<int64_t>(0, total - 1) * element.type.extent() + highest;
}

// Calls visit(at, k) for every packed byte k of `count` elements placed at
// element displacement `displ`.
template <typename Visit>
void forEachByte(const Side& element, int64_t displ, int64_t count, Visit visit) {
  const int64_t bytes = element.bytes();
  for (int64_t e = 0; e < count; ++e) {
    for (int64_t b = 0; b < bytes; ++b) {
      visit((displ + e) * element.type.extent() + element.offsets[static_cast<size_t>(b)], e * bytes + b);
    }
  }
}

std::string wrongByte(int rank, int64_t at, uint8_t got, uint8_t want) {
  return "rank " + std::to_string(rank) + ": byte " + std::to_string(at) + " (from the base) is " +
         std::to_string(got) + ", expected " + std::to_string(want) +
         (want == kGuard ? " (outside every block: must be untouched)" : "");
}

}  // namespace

const char* spreadName(Spread spread) {
  switch (spread) {
    case Spread::kRandom: return "random";
    case Spread::kOneHugePeer: return "one_huge_peer";
    case Spread::kAllToOne: return "all_to_one";
    case Spread::kOneToAll: return "one_to_all";
    case Spread::kFewPeers: return "few_peers";
    case Spread::kAllEqual: return "all_equal";
  }
  return "?";
}

CountMatrix countMatrix(Spread spread, int size, uint64_t seed, int64_t scale) {
  std::mt19937_64 random(seed);
  CountMatrix counts(static_cast<size_t>(size), std::vector<int64_t>(static_cast<size_t>(size), 0));
  const int hot = static_cast<int>(seed % static_cast<uint64_t>(size));
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < size; ++j) {
      int64_t& count = counts[static_cast<size_t>(i)][static_cast<size_t>(j)];
      const int64_t some = static_cast<int64_t>(random() % static_cast<uint64_t>(scale + 1));
      switch (spread) {
        case Spread::kRandom: count = random() % 4 == 0 ? 0 : some; break;
        case Spread::kOneHugePeer: count = j == hot ? 20 * scale : some % 8; break;
        case Spread::kAllToOne: count = j == hot ? some : 0; break;
        case Spread::kOneToAll: count = i == hot ? some : 0; break;
        case Spread::kFewPeers: count = (i + 2 * j) % 5 == 0 ? some : 0; break;
        case Spread::kAllEqual: count = scale; break;
      }
    }
  }
  return counts;
}

std::vector<int64_t> placeBlocks(const std::vector<int64_t>& counts, uint64_t seed, int64_t& total) {
  std::mt19937_64 random(seed);
  std::vector<size_t> order(counts.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), random);
  std::vector<int64_t> displs(counts.size(), 0);
  total = 0;
  for (size_t peer : order) {
    total += static_cast<int64_t>(random() % 4);
    displs[peer] = total;
    total += counts[peer];
  }
  return displs;
}

AlltoallvBuffers::AlltoallvBuffers(const CountMatrix& counts, Side send, Side recv, int rank, uint64_t seed)
    : send_side_(std::move(send)), recv_side_(std::move(recv)), size_(static_cast<int>(counts.size())), rank_(rank) {
  for (int peer = 0; peer < size_; ++peer) {
    sendcounts_.push_back(counts[static_cast<size_t>(rank)][static_cast<size_t>(peer)]);
    recvcounts_.push_back(counts[static_cast<size_t>(peer)][static_cast<size_t>(rank)]);
  }
  int64_t sendTotal = 0, recvTotal = 0;
  sdispls_ = placeBlocks(sendcounts_, seed * 31 + static_cast<uint64_t>(rank), sendTotal);
  rdispls_ = placeBlocks(recvcounts_, seed * 37 + static_cast<uint64_t>(rank), recvTotal);
  send_.assign(static_cast<size_t>(spanBytes(send_side_, sendTotal) + 2 * kGuardBytes), kSendGap);
  for (int to = 0; to < size_; ++to) {
    forEachByte(send_side_, sdispls_[static_cast<size_t>(to)], sendcounts_[static_cast<size_t>(to)],
                [&](int64_t at, int64_t k) { send_[static_cast<size_t>(kGuardBytes + at)] = pattern(rank, to, k); });
  }
  sendExpected_ = send_;
  recv_.assign(static_cast<size_t>(spanBytes(recv_side_, recvTotal) + 2 * kGuardBytes), kGuard);
}

void AlltoallvBuffers::clearReceive() { std::fill(recv_.begin(), recv_.end(), kGuard); }

std::string AlltoallvBuffers::check(const std::vector<int>& skip) const {
  if (send_ != sendExpected_) return "rank " + std::to_string(rank_) + ": the send buffer changed";
  std::vector<uint8_t> expected(recv_.size(), kGuard);
  std::vector<bool> skipped(recv_.size(), false);
  for (int from = 0; from < size_; ++from) {
    const bool skipThis = std::find(skip.begin(), skip.end(), from) != skip.end();
    forEachByte(recv_side_, rdispls_[static_cast<size_t>(from)], recvcounts_[static_cast<size_t>(from)],
                [&](int64_t at, int64_t k) {
                  expected[static_cast<size_t>(kGuardBytes + at)] = pattern(from, rank_, k);
                  skipped[static_cast<size_t>(kGuardBytes + at)] = skipThis;
                });
  }
  for (size_t i = 0; i < recv_.size(); ++i) {
    if (skipped[i] || recv_[i] == expected[i]) continue;
    return wrongByte(rank_, static_cast<int64_t>(i) - kGuardBytes, recv_[i], expected[i]);
  }
  return "";
}

namespace {

// count 1 of `itemSize` contiguous bytes.
Side denseBytes(int64_t itemSize) {
  auto type = Datatype::contiguous(itemSize, Datatype::basic(datatype::BasicKind::kByte));
  if (!type.isOk() || !type->commit().isOk()) throw std::runtime_error("contiguous bytes failed");
  std::vector<int64_t> offsets(static_cast<size_t>(itemSize));
  std::iota(offsets.begin(), offsets.end(), int64_t{0});
  return Side{*type, 1, offsets};
}

}  // namespace

InPlaceBuffer::InPlaceBuffer(const CountMatrix& counts, int64_t itemSize, int rank, uint64_t seed)
    : InPlaceBuffer(counts, denseBytes(itemSize), rank, seed) {}

int64_t largestIncoming(const CountMatrix& counts, int64_t elementBytes) {
  int64_t largest = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    int64_t total = 0;
    for (const auto& row : counts) total += row[r] * elementBytes;
    largest = std::max(largest, total);
  }
  return largest;
}

CountMatrix symmetric(CountMatrix counts) {
  for (size_t i = 0; i < counts.size(); ++i) {
    for (size_t j = 0; j < i; ++j) counts[j][i] = counts[i][j];
  }
  return counts;
}

InPlaceBuffer::InPlaceBuffer(const CountMatrix& counts, const Side& element, int rank, uint64_t seed,
                             Placement placement)
    : element_(element), size_(static_cast<int>(counts.size())), rank_(rank) {
  for (int peer = 0; peer < size_; ++peer) {
    sendcounts_.push_back(counts[static_cast<size_t>(rank)][static_cast<size_t>(peer)]);
    recvcounts_.push_back(counts[static_cast<size_t>(peer)][static_cast<size_t>(rank)]);
  }
  int64_t sendTotal = 0, recvTotal = 0;
  sdispls_ = placeBlocks(sendcounts_, seed * 41 + static_cast<uint64_t>(rank), sendTotal);
  rdispls_ = placeBlocks(recvcounts_, seed * 43 + static_cast<uint64_t>(rank), recvTotal);
  if (placement == Placement::kSame) {
    if (sendcounts_ != recvcounts_) throw std::runtime_error("Placement::kSame needs symmetric counts");
    rdispls_ = sdispls_;
    recvTotal = sendTotal;
  }
  buffer_.resize(static_cast<size_t>(spanBytes(element_, std::max(sendTotal, recvTotal)) + 2 * kGuardBytes));
  refill();
}

template <typename Visit>
void InPlaceBuffer::forEachByte(int64_t displ, int64_t count, Visit visit) const {
  testing::forEachByte(element_, displ, count, [&](int64_t at, int64_t k) { visit(kGuardBytes + at, k); });
}

int64_t InPlaceBuffer::receiveBytes() const {
  return std::accumulate(recvcounts_.begin(), recvcounts_.end(), int64_t{0}) * element_.bytes();
}

void InPlaceBuffer::refill() {
  std::fill(buffer_.begin(), buffer_.end(), kGuard);
  for (int to = 0; to < size_; ++to) {
    forEachByte(sdispls_[static_cast<size_t>(to)], sendcounts_[static_cast<size_t>(to)],
                [&](int64_t at, int64_t k) { buffer_[static_cast<size_t>(at)] = pattern(rank_, to, k); });
  }
}

std::string InPlaceBuffer::check(const std::vector<int>& skip) const {
  std::vector<int> expected(buffer_.size(), kGuard);  // -1: undefined (an outgoing byte)
  for (int to = 0; to < size_; ++to) {
    forEachByte(sdispls_[static_cast<size_t>(to)], sendcounts_[static_cast<size_t>(to)],
                [&](int64_t at, int64_t) { expected[static_cast<size_t>(at)] = -1; });
  }
  for (int from = 0; from < size_; ++from) {
    const bool skipThis = std::find(skip.begin(), skip.end(), from) != skip.end();
    forEachByte(rdispls_[static_cast<size_t>(from)], recvcounts_[static_cast<size_t>(from)],
                [&](int64_t at, int64_t k) { expected[static_cast<size_t>(at)] = skipThis ? -1 : pattern(from, rank_, k); });
  }
  for (size_t i = 0; i < buffer_.size(); ++i) {
    if (expected[i] < 0 || buffer_[i] == expected[i]) continue;
    return wrongByte(rank_, static_cast<int64_t>(i) - kGuardBytes, buffer_[i], static_cast<uint8_t>(expected[i]));
  }
  return "";
}

}  // namespace ibdt::collectives::testing
