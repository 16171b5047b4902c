// Every operation of the provider between two endpoints over the device,
// with every byte checked: SEND/RECV (+imm, inline), WRITE with gather lists,
// READ with scatter lists, WRITE_WITH_IMM, chained lists and selective
// signalling.
#include <numeric>

#include "base/backoff.h"

#include "tests/verbs/verbs_test_util.h"

namespace ibdt::fabric::testing {
namespace {

// Splits `total` bytes into `pieces` uneven lengths (1, 2, 3... scaled).
std::vector<uint32_t> unevenLengths(uint32_t total, uint32_t pieces) {
  std::vector<uint32_t> lengths(pieces);
  uint32_t weightSum = pieces * (pieces + 1) / 2;
  uint32_t used = 0;
  for (uint32_t i = 0; i < pieces; ++i) {
    lengths[i] = std::max<uint32_t>(1, total * (i + 1) / weightSum);
    used += lengths[i];
  }
  lengths.back() += total > used ? total - used : 0;
  return lengths;
}

// SGEs over `region` for `lengths`, each piece followed by a gap of `gap` bytes.
std::vector<Sge> gappedSges(const MemoryRegion& region, const std::vector<uint32_t>& lengths, size_t gap) {
  std::vector<Sge> sges;
  size_t offset = 0;
  for (uint32_t length : lengths) {
    sges.push_back(sgeOf(region, offset, length));
    offset += length + gap;
  }
  return sges;
}

TEST(VerbsTransfer, SendRecvGathersAndScattersEveryByte) {
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair);
  const uint32_t total = 20000;
  uint32_t sendPieces = std::min<uint32_t>(domain->caps().maxSendSge, 7);
  uint32_t recvPieces = std::min<uint32_t>(domain->caps().maxRecvSge, 5);
  auto [source, target] = sourceAndTarget(*domain, 64 * 1024, 1);
  auto sendSges = gappedSges(*source, unevenLengths(total, sendPieces), 97);
  auto recvSges = gappedSges(*target, unevenLengths(total, recvPieces), 131);

  RecvRequest recv{.id = 77, .sgList = recvSges.data(), .numSge = recvPieces};
  ASSERT_TRUE(pair.b->postRecv(recv).isOk());
  SendRequest send{.id = 11, .opcode = Opcode::kSendWithImm, .sgList = sendSges.data(), .numSge = sendPieces,
                   .immData = 0xfeedbeef};
  ASSERT_TRUE(pair.a->postSend(send).isOk());

  auto sent = collect(*pair.cqA, 1);
  auto received = collect(*pair.cqB, 1);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(sent[0].id, 11u);
  EXPECT_EQ(sent[0].opcode, Opcode::kSendWithImm);
  EXPECT_EQ(sent[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ(sent[0].endpointId, pair.a->id());
  EXPECT_EQ(received[0].id, 77u);
  EXPECT_EQ(received[0].opcode, Opcode::kRecv);
  EXPECT_EQ(received[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ(received[0].byteLength, total);
  EXPECT_TRUE(received[0].hasImm);
  EXPECT_EQ(received[0].immData, 0xfeedbeefu);
  EXPECT_EQ(received[0].endpointId, pair.b->id());

  // The gathered stream, scattered: compare piece by piece.
  std::vector<uint8_t> stream;
  for (const Sge& sge : sendSges) {
    auto* p = reinterpret_cast<const uint8_t*>(sge.address);
    stream.insert(stream.end(), p, p + sge.length);
  }
  size_t at = 0;
  for (const Sge& sge : recvSges) {
    auto* p = reinterpret_cast<const uint8_t*>(sge.address);
    ASSERT_EQ(std::memcmp(p, stream.data() + at, sge.length), 0) << "piece at stream offset " << at;
    at += sge.length;
  }
  // The gaps between receive pieces are untouched.
  for (size_t i = 0; i + 1 < recvSges.size(); ++i) {
    auto* gap = reinterpret_cast<const uint8_t*>(recvSges[i].address + recvSges[i].length);
    for (size_t g = 0; g < 131; ++g) ASSERT_EQ(gap[g], 0) << "gap " << i << " byte " << g;
  }
}

TEST(VerbsTransfer, InlineSendCopiesAtPostTime) {
  IBDT_OPEN_VERBS_OR_SKIP(domain);
  uint32_t inlineBytes = domain->caps().maxInline;
  if (inlineBytes == 0) GTEST_SKIP() << "device offers no inline data";
  Pair pair = connectPair(*domain);
  ASSERT_TRUE(pair.a && pair.b);
  auto target = allocate(*domain, 4096);
  std::memset(bytesOf(*target), 0, 4096);
  // Unregistered memory: inline data needs no lkey.
  std::vector<uint8_t> source(inlineBytes);
  fillPattern(source.data(), source.size(), 9);
  Sge sge{reinterpret_cast<uint64_t>(source.data()), inlineBytes, 0};
  Sge recvSge = sgeOf(*target, 0, 4096);
  ASSERT_TRUE(pair.b->postRecv(RecvRequest{.id = 1, .sgList = &recvSge, .numSge = 1}).isOk());
  ASSERT_TRUE(pair.a->postSend(SendRequest{.id = 2, .flags = kSignaled | kInline, .sgList = &sge, .numSge = 1}).isOk());
  std::memset(source.data(), 0xee, source.size());  // after the post: must not be what arrives
  auto received = collect(*pair.cqB, 1);
  ASSERT_EQ(received.size(), 1u);
  ASSERT_EQ(received[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ(received[0].byteLength, inlineBytes);
  for (uint32_t i = 0; i < inlineBytes; ++i) ASSERT_EQ(bytesOf(*target)[i], patternByte(i, 9)) << i;
  EXPECT_EQ(collect(*pair.cqA, 1).size(), 1u);
}

TEST(VerbsTransfer, WriteGathersUpToMaxSge) {
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair);
  uint32_t pieces = domain->caps().maxSendSge;
  const uint32_t total = 100000;
  auto [source, target] = sourceAndTarget(*domain, 256 * 1024, 3);
  auto sges = gappedSges(*source, unevenLengths(total, pieces), 33);
  const size_t remoteOffset = 4096 + 17;
  RemoteKey key = target->remoteKey();
  SendRequest write{.id = 5, .opcode = Opcode::kWrite, .sgList = sges.data(), .numSge = pieces,
                    .remoteAddress = key.address + remoteOffset, .rkey = key.rkey};
  ASSERT_TRUE(pair.a->postSend(write).isOk());
  auto done = collect(*pair.cqA, 1);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(done[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ(done[0].opcode, Opcode::kWrite);
  EXPECT_EQ(done[0].byteLength, total);
  size_t at = remoteOffset;
  for (const Sge& sge : sges) {
    ASSERT_EQ(std::memcmp(bytesOf(*target) + at, reinterpret_cast<const void*>(sge.address), sge.length), 0);
    at += sge.length;
  }
  for (size_t i = 0; i < remoteOffset; ++i) ASSERT_EQ(bytesOf(*target)[i], 0) << "before the target range";
  for (size_t i = at; i < target->length(); ++i) ASSERT_EQ(bytesOf(*target)[i], 0) << "after the target range";
  EXPECT_EQ(pollAll(*pair.cqB), 0u);  // a plain WRITE is invisible to the target
}

TEST(VerbsTransfer, ReadScattersUpToMaxSge) {
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair);
  uint32_t pieces = domain->caps().maxSendSge;
  const uint32_t total = 70001;
  auto remote = allocate(*domain, 128 * 1024, kLocalWrite | kRemoteRead);
  auto local = allocate(*domain, 256 * 1024);
  fillPattern(bytesOf(*remote), remote->length(), 4);
  std::memset(bytesOf(*local), 0, local->length());
  auto sges = gappedSges(*local, unevenLengths(total, pieces), 50);
  RemoteKey key = remote->remoteKey();
  SendRequest read{.id = 6, .opcode = Opcode::kRead, .sgList = sges.data(), .numSge = pieces,
                   .remoteAddress = key.address + 999, .rkey = key.rkey};
  ASSERT_TRUE(pair.a->postSend(read).isOk());
  auto done = collect(*pair.cqA, 1);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(done[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ(done[0].opcode, Opcode::kRead);
  size_t at = 999;
  for (const Sge& sge : sges) {
    auto* p = reinterpret_cast<const uint8_t*>(sge.address);
    for (uint32_t i = 0; i < sge.length; ++i) ASSERT_EQ(p[i], patternByte(at + i, 4)) << "remote offset " << at + i;
    ASSERT_EQ(p[sge.length], 0) << "byte after a piece";
    at += sge.length;
  }
}

TEST(VerbsTransfer, WriteWithImmConsumesAReceive) {
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair);
  auto [source, target] = sourceAndTarget(*domain, 8192, 5);
  ASSERT_TRUE(pair.b->postRecv(RecvRequest{.id = 40}).isOk());  // no SGE: the data goes by RDMA
  Sge sge = sgeOf(*source, 0, 5000);
  SendRequest write{.id = 41, .opcode = Opcode::kWriteWithImm, .sgList = &sge, .numSge = 1, .immData = 1234567,
                    .remoteAddress = target->remoteKey().address + 100, .rkey = target->rkey()};
  ASSERT_TRUE(pair.a->postSend(write).isOk());
  auto received = collect(*pair.cqB, 1);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].id, 40u);
  EXPECT_EQ(received[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ(received[0].opcode, Opcode::kRecvWriteWithImm);
  EXPECT_TRUE(received[0].hasImm);
  EXPECT_EQ(received[0].immData, 1234567u);
  EXPECT_EQ(received[0].byteLength, 5000u);
  EXPECT_EQ(std::memcmp(bytesOf(*target) + 100, bytesOf(*source), 5000), 0);
  auto sent = collect(*pair.cqA, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].opcode, Opcode::kWriteWithImm);
}

TEST(VerbsTransfer, ChainedListWithOneSignalPostsAndCompletesInOrder) {
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair);
  const int kCount = 64;
  const uint32_t kBlock = 1000;
  auto [source, target] = sourceAndTarget(*domain, kCount * kBlock, 6);
  auto readBack = allocate(*domain, kCount * kBlock);
  std::vector<Sge> sges(kCount);
  std::vector<SendRequest> requests(kCount + 1);
  for (int i = 0; i < kCount; ++i) {
    sges[i] = sgeOf(*source, size_t(i) * kBlock, kBlock);
    // Reverse placement, so order mistakes show up in the data.
    requests[i] = {.id = uint64_t(i), .opcode = Opcode::kWrite, .flags = 0, .sgList = &sges[i], .numSge = 1,
                   .remoteAddress = target->remoteKey().address + size_t(kCount - 1 - i) * kBlock,
                   .rkey = target->rkey(), .next = &requests[i + 1]};
  }
  // The last one reads everything back behind a fence: it completes after the writes landed.
  Sge all = sgeOf(*readBack, 0, kCount * kBlock);
  requests[kCount] = {.id = 999, .opcode = Opcode::kRead, .flags = kSignaled | kFence, .sgList = &all, .numSge = 1,
                      .remoteAddress = target->remoteKey().address, .rkey = target->rkey()};
  const SendRequest* bad = &requests[0];
  ASSERT_TRUE(pair.a->postSend(requests[0], &bad).isOk());
  EXPECT_EQ(bad, nullptr);
  auto done = collect(*pair.cqA, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, 999u);
  EXPECT_EQ(done[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ(pollAll(*pair.cqA), 0u) << "unsignalled writes produced completions";
  for (int i = 0; i < kCount; ++i) {
    size_t place = size_t(kCount - 1 - i) * kBlock;
    ASSERT_EQ(std::memcmp(bytesOf(*target) + place, bytesOf(*source) + size_t(i) * kBlock, kBlock), 0) << i;
  }
  EXPECT_EQ(std::memcmp(bytesOf(*readBack), bytesOf(*target), kCount * kBlock), 0);
}

TEST(VerbsTransfer, UnsignalledStreamNeverStallsTheSendQueue) {
  EndpointOptions options;
  options.sendQueueDepth = 16;
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair, options, 32);
  const int kWrites = 1000;
  auto source = allocate(*domain, kWrites * 8);
  auto target = allocate(*domain, kWrites * 8);
  std::memset(bytesOf(*target), 0, target->length());
  for (int i = 0; i < kWrites; ++i) std::memcpy(bytesOf(*source) + i * 8, &i, sizeof(i));
  int again = 0;
  Backoff backoff;
  for (int i = 0; i < kWrites; ++i) {
    Sge sge = sgeOf(*source, size_t(i) * 8, 8);
    SendRequest write{.id = uint64_t(i), .opcode = Opcode::kWrite, .flags = i + 1 == kWrites ? kSignaled : 0u,
                      .sgList = &sge, .numSge = 1, .remoteAddress = target->remoteKey().address + size_t(i) * 8,
                      .rkey = target->rkey()};
    Status status;
    Deadline deadline = Deadline::after(std::chrono::seconds(60));
    while ((status = pair.a->postSend(write)).code() == Code::kAgain && !deadline.expired()) {
      ++again;
      // Nothing the caller asked to see, but polling retires the provider's own signals.
      backoff.pause();
      Completion none[4];
      EXPECT_EQ(pair.cqA->poll(none), 0u) << "an unsignalled write surfaced";
    }
    ASSERT_TRUE(status.isOk()) << "write " << i << ": " << status.toString();
  }
  auto done = collect(*pair.cqA, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, uint64_t(kWrites - 1));
  EXPECT_GT(again, 0) << "a 16-deep queue took 1000 writes without back-pressure";
  for (int i = 0; i < kWrites; ++i) {
    int value = -1;
    std::memcpy(&value, bytesOf(*target) + i * 8, sizeof(value));
    ASSERT_EQ(value, i);
  }
}

TEST(VerbsTransfer, SendWaitsForTheReceiverToPostAReceive) {
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair);
  auto [source, target] = sourceAndTarget(*domain, 8192, 15);
  Sge sge = sgeOf(*source, 0, 5000);
  ASSERT_TRUE(pair.a->postSend(SendRequest{.id = 1, .sgList = &sge, .numSge = 1}).isOk());
  // No receive yet: the target answers receiver-not-ready and the sender retries.
  Status idle = pair.cqA->wait(Deadline::after(std::chrono::milliseconds(300)));
  EXPECT_EQ(pollAll(*pair.cqA), 0u) << idle.toString();
  Sge recvSge = sgeOf(*target, 0, 8192);
  ASSERT_TRUE(pair.b->postRecv(RecvRequest{.id = 2, .sgList = &recvSge, .numSge = 1}).isOk());
  auto received = collect(*pair.cqB, 1);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ(received[0].byteLength, 5000u);
  EXPECT_EQ(std::memcmp(bytesOf(*target), bytesOf(*source), 5000), 0);
  auto sent = collect(*pair.cqA, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, CompletionStatus::kSuccess);
}

TEST(VerbsTransfer, CompletionChannelWakesAWaiter) {
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair);
  Status idle = pair.cqB->wait(Deadline::after(std::chrono::milliseconds(20)));
  EXPECT_EQ(idle.code(), Code::kTimeout) << idle.toString();
  EXPECT_NE(idle.message().find(domain->caps().device), std::string_view::npos);
  auto buffer = allocate(*domain, 64);
  Sge sge = sgeOf(*buffer, 0, 64);
  ASSERT_TRUE(pair.b->postRecv(RecvRequest{.id = 3, .sgList = &sge, .numSge = 1}).isOk());
  ASSERT_TRUE(pair.a->postSend(SendRequest{.id = 4, .sgList = &sge, .numSge = 1}).isOk());
  Completion completion;
  size_t got = 0;
  Deadline deadline = Deadline::after(std::chrono::seconds(60));
  while (got == 0 && !deadline.expired()) {
    Status status = pair.cqB->wait(deadline);
    ASSERT_TRUE(status.isOk()) << status.toString();
    got = pair.cqB->poll(std::span<Completion>(&completion, 1));
  }
  ASSERT_EQ(got, 1u);
  EXPECT_EQ(completion.id, 3u);
  EXPECT_EQ(completion.byteLength, 64u);
}

}  // namespace
}  // namespace ibdt::fabric::testing
