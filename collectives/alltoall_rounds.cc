// RoundsPlan: runs the rounds a Bruck builder described (see the header).
#include "collectives/alltoall_rounds.h"

#include <algorithm>
#include <cstdint>

namespace ibdt::collectives {

using datatype::Datatype;
using messaging::Request;

RoundsPlan::RoundsPlan(Communicator& comm, std::string name)
    : ctx_(comm.context()), comm_(comm), contextId_(comm.contextId()), tag_(comm.takePlanTag()), rank_(comm.rank()),
      name_(std::move(name)) {}

Status RoundsPlan::addExchange(Round& round, int to, const void* sendbuf, int64_t sendcount, const Datatype& sendtype,
                               int from, void* recvbuf, int64_t recvcount, const Datatype& recvtype) {
  Exchange exchange;
  exchange.to = to;
  exchange.from = from;
  exchange.sendBytes = sendcount * sendtype.size();
  exchange.recvBytes = recvcount * recvtype.size();
  IBDT_ASSIGN_OR_RETURN(exchange.recv,
                        ctx_.recvInit(recvbuf, recvcount, recvtype, comm_.contextRank(from), tag_, contextId_));
  IBDT_ASSIGN_OR_RETURN(exchange.send,
                        ctx_.sendInit(sendbuf, sendcount, sendtype, comm_.contextRank(to), tag_, contextId_));
  IBDT_ASSIGN_OR_RETURN(exchange.poison, poison_.sendInit(ctx_, comm_.contextRank(to), tag_, contextId_));
  round.exchanges.push_back(std::move(exchange));
  return Status::ok();
}

Status RoundsPlan::addEmptyExchange(Round& round, int to, int from) {
  const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
  return addExchange(round, to, nullptr, 0, byte, from, nullptr, 0, byte);
}

Status RoundsPlan::start() { return startRun(Status::ok()); }

Status RoundsPlan::startPoisoned(Status cause) { return startRun(std::move(cause)); }

// A run whose outcome is already an error sends only poisons.
Status RoundsPlan::startRun(Status outcome) {
  outcome_ = std::move(outcome);
  round_ = 0;
  active_ = true;
  runCopies(prologue_, "local copy");
  postRound();
  return Status::ok();
}

// Starts the current round's receives and sends (poisons once failed); with
// no round left, finishes the run.
void RoundsPlan::postRound() {
  if (round_ == rounds_.size()) {
    runCopies(epilogue_, "final permutation");
    active_ = false;
    return;
  }
  for (Exchange& exchange : rounds_[round_].exchanges) {
    Status recv = ctx_.start(exchange.recv);
    exchange.recvPending = recv.isOk();
    note(std::move(recv), "receive from", exchange.from);
    tracer_.record(static_cast<int>(round_), false, exchange.from, exchange.recvBytes);
    exchange.poisoned = !outcome_.isOk();
    Status send = ctx_.start(exchange.poisoned ? exchange.poison : exchange.send);
    tracer_.record(static_cast<int>(round_), true, exchange.to,
                   exchange.poisoned ? poison_.bytes() : exchange.sendBytes);
    exchange.sendPending = send.isOk();
    note(std::move(send), "send to", exchange.to);
  }
}

// Collects the exchange's receive, then its send; true when both are done.
// A receive that got fewer bytes than due met a peer's poison.
Result<bool> RoundsPlan::collect(Exchange& exchange) {
  if (exchange.recvPending) {
    messaging::RecvInfo info;
    Status status;
    IBDT_ASSIGN_OR_RETURN(bool done, collectRequest(ctx_, exchange.recv, exchange.recvPending, status, &info));
    if (!done) return false;
    if (status.isOk()) status = receivedAll(info, exchange.recvBytes, exchange.from);
    note(std::move(status), "receive from", exchange.from);
  }
  if (exchange.sendPending) {
    Status status;
    IBDT_ASSIGN_OR_RETURN(bool sent, collectRequest(ctx_, exchange.poisoned ? exchange.poison : exchange.send,
                                                    exchange.sendPending, status));
    if (!sent) return false;
    note(std::move(status), "send to", exchange.to);
  }
  return true;
}

Result<PollResult> RoundsPlan::poll() {
  PollResult result;
  while (active_) {
    for (Exchange& exchange : rounds_[round_].exchanges) {
      IBDT_ASSIGN_OR_RETURN(bool done, collect(exchange));
      if (!done) return result;  // one progress drive per poll
    }
    if (outcome_.isOk()) runCopies(rounds_[round_].unpacks, "unpack");
    ++round_;
    result.progressed = true;
    postRound();
  }
  result.done = true;
  return result;
}

Status RoundsPlan::block(Deadline deadline) {
  if (!active_) return Status::ok();
  for (Exchange& exchange : rounds_[round_].exchanges) {
    if (!exchange.recvPending && !exchange.sendPending) continue;
    const bool receive = exchange.recvPending;
    Request& request = receive ? exchange.recv : (exchange.poisoned ? exchange.poison : exchange.send);
    Status ignored;  // collected by the next poll
    IBDT_ASSIGN_OR_RETURN(bool done, waitRequest(ctx_, request, deadline, ignored));
    if (!done) {  // the wait gave up: the run stays active
      return makeError(Code::kTimeout, "alltoall (", name_, ") rank ", rank_, ": round ", round_,
                       " did not complete in time (", receive ? "receive from" : "send to", " rank ",
                       receive ? exchange.from : exchange.to, ")");
    }
    return Status::ok();
  }
  return Status::ok();
}

void RoundsPlan::abandon() {
  if (active_) {
    for (Exchange& exchange : rounds_[round_].exchanges) {
      if (exchange.recvPending) (void)ctx_.cancel(exchange.recv);
      exchange.recvPending = exchange.sendPending = false;
    }
  }
  active_ = false;
}

void RoundsPlan::runCopies(const std::vector<LocalCopy>& copies, const char* what) {
  for (const LocalCopy& copy : copies) {
    if (!outcome_.isOk()) return;  // the data is wrong already: leave the buffer as it is
    note(copy.copy.run(copy.src, copy.dst, copy.first, copy.last), what);
  }
}

void RoundsPlan::note(Status status, const char* what, int peer) {
  if (status.isOk() || !outcome_.isOk()) return;
  const std::string whom = peer < 0 ? std::string() : strCat(" rank ", peer);
  outcome_ = makeError(status.code(), "alltoall (", name_, ") rank ", rank_, ", round ", round_, ", ", what, whom, ": ",
                       status.message());
}

void StructPieces::add(int64_t count, const void* at, const void* base, const Datatype& type) {
  if (count == 0) return;
  counts.push_back(count);
  displs.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(at) - reinterpret_cast<uintptr_t>(base)));
  types.push_back(type);
}

Result<Datatype> StructPieces::build() const {
  IBDT_ASSIGN_OR_RETURN(Datatype type, Datatype::structType(counts, displs, types));
  IBDT_RETURN_IF_ERROR(type.commit());
  return type;
}

Result<Datatype> packedType(const Datatype& type) {
  if (type.contiguous() && type.trueLb() == 0 && type.extent() == type.size() && type.lb() == 0) return type;
  IBDT_ASSIGN_OR_RETURN(std::vector<datatype::TypeMapEntry> map, datatype::typeMap(type, int64_t{1} << 20));
  std::vector<int64_t> blocklens, displs;
  std::vector<Datatype> kinds;
  int64_t at = 0;
  for (size_t e = 0; e < map.size(); ++e) {
    const datatype::TypeMapEntry& entry = map[e];
    if (e > 0 && map[e - 1].kind == entry.kind) {
      ++blocklens.back();  // runs of one kind: one block
    } else {
      blocklens.push_back(1);
      displs.push_back(at);
      kinds.push_back(Datatype::basic(entry.kind));
    }
    at += datatype::basicSize(entry.kind);
  }
  IBDT_ASSIGN_OR_RETURN(Datatype packed, Datatype::structType(blocklens, displs, kinds));
  IBDT_ASSIGN_OR_RETURN(Datatype dense, Datatype::resized(packed, 0, at));
  IBDT_RETURN_IF_ERROR(dense.commit());
  return dense;
}

Result<LocalCopy> makeCopy(const Datatype& srcType, int64_t srcCount, const std::byte* src, const Datatype& dstType,
                           int64_t dstCount, std::byte* dst, int64_t first, int64_t last) {
  IBDT_ASSIGN_OR_RETURN(datatype::TypedCopy copy, datatype::TypedCopy::create(srcType, srcCount, dstType, dstCount));
  return LocalCopy{std::move(copy), src, dst, first, last};
}

Result<Datatype> blockList(const std::vector<int64_t>& blocks, int64_t stride, int64_t count, const Datatype& type) {
  std::vector<int64_t> displs;
  displs.reserve(blocks.size());
  for (int64_t block : blocks) displs.push_back(block * stride);
  IBDT_ASSIGN_OR_RETURN(Datatype list, Datatype::hindexedBlock(count, displs, type));
  IBDT_RETURN_IF_ERROR(list.commit());
  return list;
}

Status addBlockSwaps(std::vector<LocalCopy>& copies, const AlltoallArgs& args, const Datatype& packed,
                     std::byte* stage, const BlockPairs& pairs) {
  if (pairs.empty()) return Status::ok();
  std::vector<int64_t> firsts, seconds;
  for (const auto& [first, second] : pairs) {
    firsts.push_back(first);
    seconds.push_back(second);
  }
  const int64_t count = args.recvcount, n = static_cast<int64_t>(pairs.size()), bytes = n * args.bytes;
  IBDT_ASSIGN_OR_RETURN(Datatype first, blockList(firsts, args.recvStride, count, args.recvtype));
  IBDT_ASSIGN_OR_RETURN(Datatype second, blockList(seconds, args.recvStride, count, args.recvtype));
  IBDT_ASSIGN_OR_RETURN(LocalCopy out, makeCopy(first, 1, args.recvbuf, packed, n * count, stage, 0, bytes));
  copies.push_back(std::move(out));
  IBDT_ASSIGN_OR_RETURN(LocalCopy over, makeCopy(second, 1, args.recvbuf, first, 1, args.recvbuf, 0, bytes));
  copies.push_back(std::move(over));
  IBDT_ASSIGN_OR_RETURN(LocalCopy in, makeCopy(packed, n * count, stage, second, 1, args.recvbuf, 0, bytes));
  copies.push_back(std::move(in));
  return Status::ok();
}

BlockPairs reversalPairs(int64_t first, int64_t last) {
  BlockPairs pairs;
  for (int64_t a = first, b = last - 1; a < b; ++a, --b) pairs.emplace_back(a, b);
  return pairs;
}

}  // namespace ibdt::collectives
