// tests/collectives/alltoallv_data.h — alltoallv problems whose every byte
// is known: a count matrix from a seed (the same on every rank), blocks
// placed in a seeded order with gaps, and buffers filled with the alltoall
// pattern, so the expected receive buffer (gaps and guards included) is
// computed without the engine under test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/alltoall_data.h"

namespace ibdt::collectives::testing {

// How the counts spread over the pairs.
enum class Spread { kRandom, kOneHugePeer, kAllToOne, kOneToAll, kFewPeers, kAllEqual };
inline constexpr Spread kSpreads[] = {Spread::kRandom,   Spread::kOneHugePeer, Spread::kAllToOne,
                                      Spread::kOneToAll, Spread::kFewPeers,    Spread::kAllEqual};
const char* spreadName(Spread spread);

// counts[i][j]: elements rank i sends to rank j, up to about `scale` (one
// huge peer: 20 x scale); random spreads include zeros.
using CountMatrix = std::vector<std::vector<int64_t>>;
CountMatrix countMatrix(Spread spread, int size, uint64_t seed, int64_t scale);

// Displacements (in elements) of blocks of `counts`, laid out in a seeded
// order with 0..3-element gaps; `total` gets the elements spanned.
std::vector<int64_t> placeBlocks(const std::vector<int64_t>& counts, uint64_t seed, int64_t& total);

// One rank's out-of-place buffers: `send` and `recv` describe ONE element
// (Side with count 1) of the send and receive types.
class AlltoallvBuffers {
 public:
  AlltoallvBuffers(const CountMatrix& counts, Side send, Side recv, int rank, uint64_t seed);
  const void* sendbuf() const { return send_.data() + kGuardBytes; }
  void* recvbuf() { return recv_.data() + kGuardBytes; }
  const std::vector<int64_t>& sendcounts() const { return sendcounts_; }
  const std::vector<int64_t>& sdispls() const { return sdispls_; }
  const std::vector<int64_t>& recvcounts() const { return recvcounts_; }
  const std::vector<int64_t>& rdispls() const { return rdispls_; }
  // "" when every received byte is what its sender meant and nothing else
  // changed (blocks from ranks in `skip` not checked); else the first wrong byte.
  std::string check(const std::vector<int>& skip = {}) const;
  void clearReceive();

 private:
  Side send_side_, recv_side_;
  int size_, rank_;
  std::vector<int64_t> sendcounts_, sdispls_, recvcounts_, rdispls_;
  std::vector<uint8_t> send_, sendExpected_, recv_;
};

// The most packed bytes any rank receives (every rank picks a from it).
int64_t largestIncoming(const CountMatrix& counts, int64_t elementBytes);

// counts[i][j] = counts[j][i] (MPI's rule for in place): the lower triangle mirrored.
CountMatrix symmetric(CountMatrix counts);

// Where an in-place buffer's incoming blocks lie: independent of the
// outgoing ones (they overlap arbitrarily), or each where the outgoing
// block to the same peer lies (MPI's in-place rule; needs symmetric counts).
enum class Placement { kIndependent, kSame };

// One rank's single buffer for the in-place alltoallv. Elements are dense
// `itemSize` bytes, or one element of `element`'s type (count 1; holes
// inside it must stay untouched).
class InPlaceBuffer {
 public:
  InPlaceBuffer(const CountMatrix& counts, int64_t itemSize, int rank, uint64_t seed);
  InPlaceBuffer(const CountMatrix& counts, const Side& element, int rank, uint64_t seed,
                Placement placement = Placement::kIndependent);
  void* buffer() { return buffer_.data() + kGuardBytes; }
  const std::vector<int64_t>& sendcounts() const { return sendcounts_; }
  const std::vector<int64_t>& sdispls() const { return sdispls_; }
  const std::vector<int64_t>& recvcounts() const { return recvcounts_; }
  const std::vector<int64_t>& rdispls() const { return rdispls_; }
  // Bytes the incoming blocks hold (the "100 %" of auxiliary memory).
  int64_t receiveBytes() const;
  // "" when every incoming block holds what its sender meant and every byte
  // outside all blocks is untouched (outgoing bytes outside incoming blocks
  // are undefined afterwards, as in MPI).
  std::string check(const std::vector<int>& skip = {}) const;
  void refill();
  // Every byte, guards included (to see that nothing was written).
  const std::vector<uint8_t>& raw() const { return buffer_; }

 private:
  template <typename Visit>
  void forEachByte(int64_t displ, int64_t count, Visit visit) const;

  Side element_;
  int size_, rank_;
  std::vector<int64_t> sendcounts_, sdispls_, recvcounts_, rdispls_;
  std::vector<uint8_t> buffer_;
};

}  // namespace ibdt::collectives::testing
