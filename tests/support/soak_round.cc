#include "support/soak_round.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "datatype/reference.h"

namespace ibdt::collectives::testing {
namespace {

using datatype::Datatype;
using datatype::testing::TypeGenerator;

constexpr int kTag = 11;
constexpr uint8_t kUntouched = 0xEE;  // guard and receive-buffer fill

// What rank `from` means byte `index` of its round-`round` data for `to` to be.
uint8_t meant(int from, int to, uint64_t round, int64_t index) {
  uint64_t x = (uint64_t(from) * 131 + uint64_t(to) * 7 + round * 977 + uint64_t(index) * 2654435761u) >> 3;
  return static_cast<uint8_t>(x ^ (x >> 11));
}

// A message of `count` x a random type from every rank to rank + shift,
// received with the same type (the signatures must match): each byte the
// type map names must arrive where the sender had it, and no other byte of
// the receive buffer (guards around it included) may change.
void pointToPoint(messaging::Context& context, int rank, int size, uint64_t round, TypeGenerator& gen,
                  Deadline deadline, SoakTally& tally) {
  constexpr int64_t kGuard = 16;
  auto random = gen.make(3, 512);
  if (Status committed = random.type.commit(); !committed.isOk()) {
    tally.wrong = strCat("round ", round, ": commit of ", random.description, " failed: ", committed.toString());
    return;
  }
  int64_t count = gen.uniform(1, 3);
  int shift = static_cast<int>(gen.uniform(1, size - 1));
  std::vector<int64_t> offsets = datatype::testing::refByteOffsets(random.ref, count);
  int64_t low = 0, high = 0;
  for (int64_t o : offsets) low = std::min(low, o), high = std::max(high, o + 1);
  auto memoryFor = [&](int from, int to) {
    std::vector<uint8_t> memory(static_cast<size_t>(high - low));
    for (int64_t i = 0; i < high - low; ++i) memory[static_cast<size_t>(i)] = meant(from, to, round, i);
    return memory;
  };
  int to = (rank + shift) % size, from = (rank - shift + size) % size;
  std::vector<uint8_t> out = memoryFor(rank, to);
  std::vector<uint8_t> in(static_cast<size_t>(high - low + 2 * kGuard), kUntouched);
  auto recv = context.irecv(in.data() + kGuard - low, count, random.type, from, kTag);
  if (!recv.isOk()) return void(tally.status = recv.status());
  auto send = context.isend(out.data() - low, count, random.type, to, kTag);
  if (!send.isOk()) return void(tally.status = send.status());
  Status sent = context.wait(*send, nullptr, deadline);
  messaging::RecvInfo info;
  Status received = context.wait(*recv, &info, deadline);
  tally.status = !sent.isOk() ? sent : received;
  if (!tally.status.isOk()) return;
  if (info.bytes != static_cast<int64_t>(offsets.size())) {
    tally.wrong = strCat("round ", round, ": received ", info.bytes, " bytes of ", random.description, ", meant ",
                         offsets.size());
    return;
  }
  std::vector<uint8_t> theirs = memoryFor(from, rank);
  std::vector<uint8_t> expected(in.size(), kUntouched);
  for (int64_t o : offsets) expected[static_cast<size_t>(kGuard + o - low)] = theirs[static_cast<size_t>(o - low)];
  auto differs = std::mismatch(in.begin(), in.end(), expected.begin());
  if (differs.first != in.end()) {
    tally.wrong = strCat("round ", round, ": buffer byte ", differs.first - in.begin(), " from rank ", from, " of ",
                         random.description);
  }
  tally.bytesChecked += static_cast<int64_t>(in.size());
}

// Per peer: how many bytes, at which displacement, and the total.
std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t> layout(
    const std::vector<std::vector<int64_t>>& counts, int rank, bool sending) {
  const size_t size = counts.size();
  std::vector<int64_t> n(size), displ(size);
  int64_t at = 0;
  for (size_t p = 0; p < size; ++p) {
    n[p] = sending ? counts[size_t(rank)][p] : counts[p][size_t(rank)];
    displ[p] = at;
    at += n[p];
  }
  return {n, displ, at};
}

// alltoallv with random counts (0 included); alltoall when `regular`.
void allToAll(Communicator& comm, uint64_t round, TypeGenerator& gen, bool regular, Deadline deadline,
              SoakTally& tally) {
  const int rank = comm.rank(), size = comm.size();
  std::vector<std::vector<int64_t>> counts(static_cast<size_t>(size), std::vector<int64_t>(static_cast<size_t>(size)));
  int64_t block = gen.uniform(0, 3000);
  for (auto& row : counts) {
    for (auto& c : row) c = regular ? block : gen.small(2000);
  }
  auto [sendCounts, sendDispls, sendTotal] = layout(counts, rank, true);
  auto [recvCounts, recvDispls, recvTotal] = layout(counts, rank, false);
  constexpr int64_t kGuard = 16;
  std::vector<uint8_t> out(static_cast<size_t>(sendTotal)), in(static_cast<size_t>(recvTotal + kGuard), kUntouched);
  for (int p = 0; p < size; ++p) {
    for (int64_t j = 0; j < sendCounts[size_t(p)]; ++j)
      out[size_t(sendDispls[size_t(p)] + j)] = meant(rank, p, round, j);
  }
  Datatype bytes = Datatype::of<uint8_t>();
  tally.status = regular ? alltoall(comm, out.data(), block, bytes, in.data(), block, bytes, {}, deadline)
                         : alltoallv(comm, out.data(), sendCounts, sendDispls, bytes, in.data(), recvCounts,
                                     recvDispls, bytes, {}, deadline);
  if (!tally.status.isOk()) return;
  const char* what = regular ? "alltoall" : "alltoallv";
  for (int p = 0; p < size && tally.wrong.empty(); ++p) {
    for (int64_t j = 0; j < recvCounts[size_t(p)]; ++j) {
      if (in[size_t(recvDispls[size_t(p)] + j)] == meant(p, rank, round, j)) continue;
      tally.wrong = strCat("round ", round, " ", what, ": byte ", j, " from rank ", p);
      break;
    }
  }
  for (size_t i = size_t(recvTotal); i < in.size() && tally.wrong.empty(); ++i) {
    if (in[i] != kUntouched) tally.wrong = strCat("round ", round, " ", what, ": written past the message");
  }
  tally.bytesChecked += static_cast<int64_t>(in.size());
}

}  // namespace

messaging::Options soakOptions() {
  messaging::Options options;
  options.eagerLimit = 256;
  options.eagerCredits = 4;
  options.segmentSize = 1000;
  return options;
}

void soakRound(messaging::Context& context, Communicator& comm, uint64_t round, uint64_t seed, Deadline deadline,
               SoakTally& tally) {
  TypeGenerator gen(seed + round);
  const int size = comm.size();
  switch (gen.uniform(0, 3)) {
    case 0:
      if (size > 1) pointToPoint(context, comm.rank(), size, round, gen, deadline, tally);
      break;
    case 1:
      allToAll(comm, round, gen, true, deadline, tally);
      break;
    case 2:
      allToAll(comm, round, gen, false, deadline, tally);
      break;
    default:
      tally.status = barrier(comm, deadline);
  }
  if (!tally.failed()) ++tally.rounds;
}

SoakTally soakUntil(messaging::Context& context, Communicator& comm, std::chrono::steady_clock::time_point until,
                    uint64_t seed, std::chrono::milliseconds roundBound) {
  SoakTally tally;
  for (uint64_t round = 0; !tally.failed(); ++round) {
    const Deadline deadline = Deadline::after(roundBound);
    int64_t go = comm.rank() == 0 && std::chrono::steady_clock::now() < until ? 1 : 0;
    tally.status = broadcast(comm, &go, 1, 0, deadline);
    if (!tally.status.isOk() || go == 0) break;
    soakRound(context, comm, round, seed, deadline, tally);
  }
  return tally;
}

SoakTally soakUntilFailure(messaging::Context& context, Communicator& comm, uint64_t maxRounds, uint64_t seed,
                           std::chrono::milliseconds roundBound) {
  SoakTally tally;
  for (uint64_t round = 0; round < maxRounds && !tally.failed(); ++round) {
    soakRound(context, comm, round, seed, Deadline::after(roundBound), tally);
  }
  return tally;
}

}  // namespace ibdt::collectives::testing
