// collectives/alltoall_rounds.h — the plan every Bruck variant compiles to:
// local copies, then rounds of messages, each round's received blocks moved
// into place before the next round starts, then local copies again.
//
// A builder (alltoall_bruck_*.cc) describes the rounds once at init: every
// message is a persistent send and receive, every copy a prepared
// TypedCopy, so a started run only starts requests and copies (no type
// construction, allocation or registration).
//
// Errors reach every rank. Bruck forwards blocks through other ranks, so
// once a rank's run has an error it sends every later message as a poison
// instead of data (collectives/poison.h). Every block's path reaches its destination through later rounds, so every
// rank downstream of the failure fails too, naming the peer.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/alltoall_args.h"
#include "collectives/plan_impl.h"
#include "collectives/plan_trace.h"
#include "collectives/poison.h"
#include "ibdt/collectives.h"

namespace ibdt::collectives {

// A prepared typed copy of packed bytes [first, last) from src to dst.
struct LocalCopy {
  datatype::TypedCopy copy;
  const std::byte* src;
  std::byte* dst;
  int64_t first, last;
};

// One message each way: a send to `to`, a receive from `from`.
struct Exchange {
  int to = 0, from = 0;  // communicator ranks
  messaging::Request send, recv, poison;  // persistent
  int64_t sendBytes = 0, recvBytes = 0;   // packed bytes the send carries, the receive expects
  bool sendPending = false, recvPending = false;
  bool poisoned = false;  // this run sent the poison
};

class RoundsPlan final : public PlanImpl {
 public:
  struct Round {
    std::vector<Exchange> exchanges;  // all in flight at once
    std::vector<LocalCopy> unpacks;   // once every exchange of the round completed
  };

  // Takes the plan's tag from `comm`; `name` is what algorithm() returns.
  RoundsPlan(Communicator& comm, std::string name);

  // Building (init only).
  Round& addRound() { return rounds_.emplace_back(); }
  // Adds to `round` a send of count x type at buf to `to` and a receive into
  // count x type at buf from `from`, and the poison that replaces the send
  // once the run failed.
  Status addExchange(Round& round, int to, const void* sendbuf, int64_t sendcount, const datatype::Datatype& sendtype,
                     int from, void* recvbuf, int64_t recvcount, const datatype::Datatype& recvtype);
  // The same with empty messages (blocks of zero bytes still travel, so a
  // peer expecting bytes fails rather than waits).
  Status addEmptyExchange(Round& round, int to, int from);
  std::vector<LocalCopy>& prologue() { return prologue_; }
  std::vector<LocalCopy>& epilogue() { return epilogue_; }
  // Memory the builder's types point into (kept for the plan's lifetime).
  std::vector<std::byte>& scratch() { return scratch_; }

  Status start() override;
  Status startPoisoned(Status cause) override;
  Result<PollResult> poll() override;
  Status block(Deadline deadline) override;
  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }
  void abandon() override;
  std::string_view algorithm() const override { return name_; }
  int64_t peakExtraBytes() const override { return static_cast<int64_t>(scratch_.size()); }

 private:
  Status startRun(Status outcome);
  void postRound();
  Result<bool> collect(Exchange& exchange);
  void runCopies(const std::vector<LocalCopy>& copies, const char* what);
  // The first error of a run, naming the peer; a success costs nothing (no
  // string is built per message).
  void note(Status status, const char* what, int peer = -1);

  messaging::Context& ctx_;
  const Communicator& comm_;
  uint32_t contextId_;
  int32_t tag_;
  int rank_;
  std::string name_;
  std::vector<LocalCopy> prologue_, epilogue_;
  std::vector<Round> rounds_;
  std::vector<std::byte> scratch_;
  Poison poison_;
  size_t round_ = 0;  // the round in flight
  bool active_ = false;
  Status outcome_;
  PlanTracer tracer_;
};

// The basic-type sequence of one element of `type`, laid out densely
// (extent = size): the type of a block staged in an intermediate buffer
// that keeps its signature (Träff's "signature type").
Result<datatype::Datatype> packedType(const datatype::Datatype& type);

// The pieces of one round's struct type over several buffers (zero-copy
// Bruck), displacements relative to `base`; pieces of no elements are left out.
struct StructPieces {
  std::vector<int64_t> counts, displs;
  std::vector<datatype::Datatype> types;

  void add(int64_t count, const void* at, const void* base, const datatype::Datatype& type);
  bool empty() const { return counts.empty(); }
  // The committed struct type.
  Result<datatype::Datatype> build() const;
};

// Prepares a LocalCopy of `bytes` packed bytes from count x srcType at src
// to count x dstType at dst.
Result<LocalCopy> makeCopy(const datatype::Datatype& srcType, int64_t srcCount, const std::byte* src,
                           const datatype::Datatype& dstType, int64_t dstCount, std::byte* dst, int64_t first,
                           int64_t last);

// hindexedBlock of `count` elements of `type` at block indices `blocks`
// (displacement blocks[b] * stride bytes): a permutation of whole blocks.
Result<datatype::Datatype> blockList(const std::vector<int64_t>& blocks, int64_t stride, int64_t count,
                                     const datatype::Datatype& type);

// Swaps receive-buffer blocks pairs[n].first <-> pairs[n].second (all
// distinct) through `stage`, room for pairs.size() packed blocks: the firsts
// packed out, the seconds copied over them, the firsts unpacked into the
// seconds (1.5 block copies per block moved).
using BlockPairs = std::vector<std::pair<int64_t, int64_t>>;
Status addBlockSwaps(std::vector<LocalCopy>& copies, const AlltoallArgs& args, const datatype::Datatype& packed,
                     std::byte* stage, const BlockPairs& pairs);
// The pairs that reverse blocks [first, last).
BlockPairs reversalPairs(int64_t first, int64_t last);

}  // namespace ibdt::collectives
