// tests/collectives/alltoall_data.h — alltoall buffers whose every byte is
// known: each side is a type, a count and the byte offset of every packed
// byte of one block (from the independent datatype reference), so the
// expected receive buffer, gaps and guard bytes included, is computed
// without the engine under test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datatype/reference.h"
#include "ibdt/collectives.h"
#include "ibdt/datatype.h"

namespace ibdt::collectives::testing {

using datatype::Datatype;

// One side of the exchange: count x type per peer.
struct Side {
  Datatype type;
  int64_t count = 0;
  std::vector<int64_t> offsets;  // of every packed byte of one block, from the block's base
  int64_t stride() const { return count * type.extent(); }
  int64_t bytes() const { return static_cast<int64_t>(offsets.size()); }
};

// A side from a reference model and its engine type.
Side sideOf(const Datatype& type, const datatype::testing::Ref& ref, int64_t count);
// count contiguous bytes.
Side byteSide(int64_t count);
// count x vector(4, 3, 5, int32): the strided send type of the benchmark's shape.
Side vectorSide(int64_t count);
// Dense: the same basic-type sequence as count x `type`, with no gaps
// (struct of the type map's kinds back to back, resized to its size).
Side denseSide(const Datatype& type, int64_t count);

// The value written at packed byte k of the block rank `from` sends to rank
// `to` (a send type whose map overlaps itself reads the last one written).
inline uint8_t pattern(int from, int to, int64_t k) {
  return static_cast<uint8_t>((from + 1) * 37 + (to + 1) * 101 + k * 13 + (k >> 8) * 7);
}
inline constexpr uint8_t kGuard = 0xA5;
inline constexpr uint8_t kSendGap = 0x5A;
inline constexpr int64_t kGuardBytes = 64;

// Options forcing the hierarchical alltoall with `leaders` per node and the
// leaders' exchange.
inline AlltoallOptions hierarchical(int leaders, LeaderExchange exchange = LeaderExchange::kAuto,
                                    int64_t throttle = 8) {
  AlltoallOptions options;
  options.algorithm = AlltoallAlgorithm::kHierarchical;
  options.leaders = leaders;
  options.leaderExchange = exchange;
  options.throttle = throttle;
  return options;
}

// One rank's send and receive buffers, guard bytes around both.
class AlltoallBuffers {
 public:
  AlltoallBuffers(Side send, Side recv, int size, int rank);
  const void* sendbuf() const { return send_.data() + sendBase_; }
  void* recvbuf() { return recv_.data() + recvBase_; }
  const Side& sendSide() const { return sendSide_; }
  const Side& recvSide() const { return recvSide_; }
  // "" when the receive buffer holds exactly every peer's block (skipping
  // the blocks of ranks in `skip`) and nothing else changed, and the send
  // buffer is as filled; else the first wrong byte.
  std::string check(const std::vector<int>& skip = {}) const;
  // Overwrites the receive buffer with guard bytes again.
  void clearReceive();
  // Refills the send buffer in place (a persistent plan keeps its address)
  // with the pattern of run `run`: every run sends different bytes.
  void refill(int run);
  // For kInPlace: puts this rank's send blocks into the receive buffer's
  // blocks (gaps stay guard bytes); the two sides must have one layout.
  void loadInPlace();

 private:
  std::vector<uint8_t> sendImage(int rank) const;  // rank's send buffer as filled
  static int64_t lowest(const Side& side);
  static int64_t span(const Side& side, int size);
  Side sendSide_, recvSide_;
  int size_, rank_;
  int run_ = 0;
  std::vector<uint8_t> send_, sendExpected_, recv_;
  int64_t sendBase_ = 0, recvBase_ = 0;
};

// One run of a persistent plan over `buffers` with the data of run `run`:
// refills the send buffer, clears the receive buffer, starts, waits and
// checks every byte. "" on success, else what failed (status or first
// wrong byte).
std::string runChecked(Plan& plan, AlltoallBuffers& buffers, int run, Deadline deadline);
// The same for a plan moved (Plan::rebind) before the run to buffers of
// two sets chosen on `rank`'s own schedule: its send buffer changes every
// run, its receive buffer every two (shifted by rank / 2), so ranks move
// at different runs without telling each other.
std::string runRebound(Plan& plan, AlltoallBuffers (&sets)[2], int rank, int run, Deadline deadline);
// The same for a plan built in place (kInPlace) over buffers.recvbuf():
// the run's send blocks are loaded into the receive buffer first.
std::string runInPlaceChecked(Plan& plan, AlltoallBuffers& buffers, int run, Deadline deadline);

}  // namespace ibdt::collectives::testing
