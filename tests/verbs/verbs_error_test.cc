// Failures arrive as completions with translated statuses, move the endpoint
// to the error state, flush what follows, corrupt nothing, and the endpoint
// can be torn down and re-created.
#include <unistd.h>

#include <cstdlib>

#include "tests/verbs/verbs_test_util.h"

namespace ibdt::fabric::testing {
namespace {

struct Fixture {
  std::unique_ptr<Domain> domain;
  Pair pair;
  std::unique_ptr<MemoryRegion> source, target;
};

// Posts one signalled WRITE of `bytes` from the source and returns its completion.
Completion writeOnce(Fixture& f, uint64_t remoteAddress, uint64_t rkey, uint32_t bytes = 256, uint64_t id = 1) {
  Sge sge = sgeOf(*f.source, 0, bytes);
  SendRequest write{.id = id, .opcode = Opcode::kWrite, .sgList = &sge, .numSge = 1, .remoteAddress = remoteAddress,
                    .rkey = rkey};
  Status status = f.pair.a->postSend(write);
  EXPECT_TRUE(status.isOk()) << status.toString();
  auto done = collect(*f.pair.cqA, 1);
  return done.empty() ? Completion{.status = CompletionStatus::kFatal} : done[0];
}

// After a failure: the endpoint reports it, and the next request is flushed.
void expectFailedAndFlushing(Fixture& f) {
  EXPECT_EQ(f.pair.a->state(), EndpointState::kError);
  Sge sge = sgeOf(*f.source, 0, 8);
  SendRequest write{.id = 55, .opcode = Opcode::kWrite, .sgList = &sge, .numSge = 1,
                    .remoteAddress = f.target->remoteKey().address, .rkey = f.target->rkey()};
  Status status = f.pair.a->postSend(write);
  ASSERT_TRUE(status.isOk()) << status.toString();
  auto done = collect(*f.pair.cqA, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, 55u);
  EXPECT_EQ(done[0].status, CompletionStatus::kFlushed);
  for (size_t i = 0; i < f.target->length(); ++i) ASSERT_EQ(bytesOf(*f.target)[i], 0) << "target corrupted at " << i;
  // A receive posted now is flushed too, not left waiting.
  ASSERT_TRUE(f.pair.a->postRecv(RecvRequest{.id = 56}).isOk());
  auto flushed = collect(*f.pair.cqA, 1);
  ASSERT_EQ(flushed.size(), 1u);
  EXPECT_EQ(flushed[0].id, 56u);
  EXPECT_EQ(flushed[0].opcode, Opcode::kRecv);
  EXPECT_EQ(flushed[0].status, CompletionStatus::kFlushed);
  EXPECT_EQ(flushed[0].endpointId, f.pair.a->id());
}

#define IBDT_FIXTURE_OR_SKIP(f, targetAccess)                                   \
  Fixture f;                                                                    \
  {                                                                             \
    IBDT_OPEN_VERBS_OR_SKIP(opened);                                            \
    f.domain = std::move(opened);                                               \
  }                                                                             \
  f.pair = connectPair(*f.domain);                                              \
  ASSERT_TRUE(f.pair.a && f.pair.b);                                            \
  {                                                                             \
    auto regions = sourceAndTarget(*f.domain, 8192, 12, targetAccess);          \
    f.source = std::move(regions.source);                                       \
    f.target = std::move(regions.target);                                       \
  }                                                                             \
  ASSERT_TRUE(f.source && f.target)

TEST(VerbsErrors, WrongRkeyIsARemoteAccessError) {
  IBDT_FIXTURE_OR_SKIP(f, kLocalWrite | kRemoteWrite);
  Completion c = writeOnce(f, f.target->remoteKey().address, f.target->rkey() ^ 0x5a5a00);
  EXPECT_EQ(c.status, CompletionStatus::kRemoteAccess) << completionStatusCode(c);
  EXPECT_EQ(c.opcode, Opcode::kWrite);
  EXPECT_EQ(c.endpointId, f.pair.a->id());
  expectFailedAndFlushing(f);
}

TEST(VerbsErrors, OutOfRangeIsARemoteAccessError) {
  IBDT_FIXTURE_OR_SKIP(f, kLocalWrite | kRemoteWrite);
  // Starts inside, ends 1 byte past the region.
  Completion c = writeOnce(f, f.target->remoteKey().address + f.target->length() - 255, f.target->rkey(), 256);
  EXPECT_EQ(c.status, CompletionStatus::kRemoteAccess) << completionStatusCode(c);
  expectFailedAndFlushing(f);
}

TEST(VerbsErrors, MissingRemoteWriteAccessIsARemoteAccessError) {
  IBDT_FIXTURE_OR_SKIP(f, kLocalWrite | kRemoteRead);
  Completion c = writeOnce(f, f.target->remoteKey().address, f.target->rkey());
  EXPECT_EQ(c.status, CompletionStatus::kRemoteAccess) << completionStatusCode(c);
  expectFailedAndFlushing(f);
}

TEST(VerbsErrors, MissingRemoteReadAccessIsARemoteAccessError) {
  IBDT_FIXTURE_OR_SKIP(f, kLocalWrite | kRemoteWrite);
  auto local = allocate(*f.domain, 4096);
  std::memset(bytesOf(*local), 0x11, 4096);
  Sge sge = sgeOf(*local, 0, 128);
  SendRequest read{.id = 8, .opcode = Opcode::kRead, .sgList = &sge, .numSge = 1,
                   .remoteAddress = f.target->remoteKey().address, .rkey = f.target->rkey()};
  ASSERT_TRUE(f.pair.a->postSend(read).isOk());
  auto done = collect(*f.pair.cqA, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, CompletionStatus::kRemoteAccess) << completionStatusCode(done[0]);
  EXPECT_EQ(done[0].opcode, Opcode::kRead);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(bytesOf(*local)[i], 0x11) << "read target changed at " << i;
  expectFailedAndFlushing(f);
}

TEST(VerbsErrors, DeregisteredRkeyStopsWorkingAtOnce) {
  IBDT_FIXTURE_OR_SKIP(f, kLocalWrite | kRemoteWrite);
  std::vector<uint8_t> stale(8192, 0);
  auto region = f.domain->registerMemory(stale.data(), stale.size(), kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(region.isOk());
  RemoteKey key = (*region)->remoteKey();
  Completion ok = writeOnce(f, key.address, key.rkey, 64, 1);
  ASSERT_EQ(ok.status, CompletionStatus::kSuccess);
  ASSERT_EQ(std::memcmp(stale.data(), bytesOf(*f.source), 64), 0);
  std::memset(stale.data(), 0, stale.size());
  region->reset();
  Completion c = writeOnce(f, key.address, key.rkey, 64, 2);
  EXPECT_EQ(c.status, CompletionStatus::kRemoteAccess) << completionStatusCode(c);
  for (size_t i = 0; i < stale.size(); ++i) ASSERT_EQ(stale[i], 0) << "written through a stale rkey at " << i;
  expectFailedAndFlushing(f);
}

TEST(VerbsErrors, LocalSgeOutsideItsRegionIsALocalProtectionError) {
  IBDT_FIXTURE_OR_SKIP(f, kLocalWrite | kRemoteWrite);
  Sge sge = sgeOf(*f.source, f.source->length() - 100, 200);  // runs 100 bytes past the region
  SendRequest write{.id = 9, .opcode = Opcode::kWrite, .sgList = &sge, .numSge = 1,
                    .remoteAddress = f.target->remoteKey().address, .rkey = f.target->rkey()};
  ASSERT_TRUE(f.pair.a->postSend(write).isOk());
  auto done = collect(*f.pair.cqA, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, CompletionStatus::kLocalProtection) << completionStatusCode(done[0]);
  expectFailedAndFlushing(f);
}

TEST(VerbsErrors, ReceiveTooSmallFailsAtTheReceiverAndTheSender) {
  IBDT_FIXTURE_OR_SKIP(f, kLocalWrite | kRemoteWrite);
  Sge small = sgeOf(*f.target, 0, 16);
  ASSERT_TRUE(f.pair.b->postRecv(RecvRequest{.id = 21, .sgList = &small, .numSge = 1}).isOk());
  Sge sge = sgeOf(*f.source, 0, 64);
  ASSERT_TRUE(f.pair.a->postSend(SendRequest{.id = 22, .sgList = &sge, .numSge = 1}).isOk());
  auto received = collect(*f.pair.cqB, 1);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].id, 21u);
  // Real HCAs report IBV_WC_LOC_LEN_ERR; rdma_rxe reports IBV_WC_LOC_QP_OP_ERR for this
  // (README, "Where rxe differs from real HCAs").
  bool rxe = f.domain->caps().device.rfind("rxe", 0) == 0;
  if (rxe && received[0].status == CompletionStatus::kLocalOperation) {
    std::printf("rxe: too-small receive completed as local QP operation error\n");
  } else {
    EXPECT_EQ(received[0].status, CompletionStatus::kLocalLength) << completionStatusCode(received[0]);
  }
  auto sent = collect(*f.pair.cqA, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_NE(sent[0].status, CompletionStatus::kSuccess);
  std::printf("sender saw status %s for a too-long send\n", completionStatusCode(sent[0]).c_str());
  EXPECT_EQ(f.pair.b->state(), EndpointState::kError);
}

TEST(VerbsErrors, FailedEndpointsAreReplacedOnTheSameQueues) {
  IBDT_FIXTURE_OR_SKIP(f, kLocalWrite | kRemoteWrite);
  // Leave unretired unsignalled work and a failure behind.
  Sge sge = sgeOf(*f.source, 0, 32);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(f.pair.a->postSend(SendRequest{.id = uint64_t(100 + i), .opcode = Opcode::kWrite, .flags = 0,
                                               .sgList = &sge, .numSge = 1,
                                               .remoteAddress = f.target->remoteKey().address, .rkey = f.target->rkey()})
                    .isOk());
  }
  Completion c = writeOnce(f, f.target->remoteKey().address, f.target->rkey() + 1);
  EXPECT_EQ(c.status, CompletionStatus::kRemoteAccess);
  EXPECT_EQ(f.pair.a->state(), EndpointState::kError);
  ASSERT_TRUE(f.pair.b->postRecv(RecvRequest{.id = 7}).isOk());  // left behind on purpose

  f.pair.a.reset();
  f.pair.b.reset();
  auto a = f.domain->createEndpoint(*f.pair.cqA, *f.pair.cqA, EndpointOptions{});
  auto b = f.domain->createEndpoint(*f.pair.cqB, *f.pair.cqB, EndpointOptions{});
  ASSERT_TRUE(a.isOk() && b.isOk());
  f.pair.a = std::move(a).value();
  f.pair.b = std::move(b).value();
  ASSERT_TRUE(f.pair.a->connect(f.pair.b->address()).isOk());
  ASSERT_TRUE(f.pair.b->connect(f.pair.a->address()).isOk());
  EXPECT_EQ(f.pair.a->state(), EndpointState::kConnected);
  std::memset(bytesOf(*f.target), 0, f.target->length());
  ASSERT_TRUE(f.pair.b->postRecv(RecvRequest{.id = 8}).isOk());
  Sge all = sgeOf(*f.source, 0, 4096);
  ASSERT_TRUE(f.pair.a->postSend(SendRequest{.id = 9, .opcode = Opcode::kWriteWithImm, .sgList = &all, .numSge = 1,
                                             .immData = 99, .remoteAddress = f.target->remoteKey().address,
                                             .rkey = f.target->rkey()})
                  .isOk());
  auto received = collect(*f.pair.cqB, 1);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].id, 8u) << "a completion of the destroyed endpoint leaked into the new one";
  EXPECT_EQ(received[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ(received[0].immData, 99u);
  EXPECT_EQ(std::memcmp(bytesOf(*f.target), bytesOf(*f.source), 4096), 0);
  auto sent = collect(*f.pair.cqA, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].id, 9u);
  EXPECT_EQ(pollAll(*f.pair.cqA) + pollAll(*f.pair.cqB), 0u);
}

TEST(VerbsErrors, DestroyingBusyEndpointsGivesTheirQueueEntriesBack) {
  IBDT_OPEN_VERBS_OR_SKIP(domain);
  const uint32_t kDepth = 8;
  auto cqA = domain->createCompletionQueue(kDepth);
  auto cqB = domain->createCompletionQueue(kDepth);
  ASSERT_TRUE(cqA.isOk() && cqB.isOk());
  auto [source, target] = sourceAndTarget(*domain, 4096, 14);
  auto connected = [&] {
    Pair pair;
    auto a = domain->createEndpoint(**cqA, **cqA, EndpointOptions{});
    auto b = domain->createEndpoint(**cqB, **cqB, EndpointOptions{});
    EXPECT_TRUE(a.isOk() && b.isOk());
    pair.a = std::move(a).value();
    pair.b = std::move(b).value();
    EXPECT_TRUE(pair.a->connect(pair.b->address()).isOk());
    EXPECT_TRUE(pair.b->connect(pair.a->address()).isOk());
    return pair;
  };
  Sge sge = sgeOf(*source, 0, 64);
  for (int round = 0; round < 4; ++round) {
    Pair busy = connected();
    // Receives, and a failing write whose error and the flushes of the five
    // unsignalled writes behind it land in the CQ unpolled ...
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(busy.b->postRecv(RecvRequest{.id = uint64_t(i)}).isOk());
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(busy.a->postSend(SendRequest{.id = uint64_t(i), .opcode = Opcode::kWrite,
                                               .flags = i == 0 ? kSignaled : 0u, .sgList = &sge, .numSge = 1,
                                               .remoteAddress = target->remoteKey().address,
                                               .rkey = target->rkey() + (i == 0 ? 1 : 0)})
                      .isOk());
    }
    Deadline failed = Deadline::after(std::chrono::seconds(30));
    while (busy.a->state() != EndpointState::kError && !failed.expired()) usleep(1000);
  }  // ... and destroyed like that: four rounds would overfill the 8-entry CQs
  Pair pair = connected();
  std::vector<SendRequest> writes(kDepth);
  for (uint32_t i = 0; i < kDepth; ++i) {
    writes[i] = {.id = 100 + i, .opcode = Opcode::kWrite, .sgList = &sge, .numSge = 1,
                 .remoteAddress = target->remoteKey().address + 64 * i, .rkey = target->rkey(),
                 .next = i + 1 < kDepth ? &writes[i + 1] : nullptr};
  }
  const SendRequest* bad = nullptr;
  Status status = pair.a->postSend(writes[0], &bad);
  ASSERT_TRUE(status.isOk()) << "entries of destroyed endpoints were not given back: " << status.toString();
  auto done = collect(**cqA, kDepth);
  ASSERT_EQ(done.size(), kDepth);
  for (uint32_t i = 0; i < kDepth; ++i) {
    EXPECT_EQ(done[i].id, 100 + i);
    EXPECT_EQ(done[i].status, CompletionStatus::kSuccess);
  }
  EXPECT_EQ(pollAll(**cqA) + pollAll(**cqB), 0u) << "a destroyed endpoint's entry surfaced";
  pair = Pair{};
}

TEST(VerbsErrors, SharedReceiveQueueFeedsEveryEndpointOfItsQueue) {
  setenv("IBDT_VERBS_SRQ", "1", 1);
  std::string why;
  auto domain = openVerbs(&why);
  unsetenv("IBDT_VERBS_SRQ");
  if (!domain) {
    if (insideRxeVm()) FAIL() << why;
    GTEST_SKIP() << why;
  }
  auto sendCq = domain->createCompletionQueue(64);
  auto recvCq = domain->createCompletionQueue(64);
  ASSERT_TRUE(sendCq.isOk() && recvCq.isOk());
  std::unique_ptr<Endpoint> senders[2], receivers[2];
  for (int i = 0; i < 2; ++i) {
    auto s = domain->createEndpoint(**sendCq, **sendCq, EndpointOptions{});
    auto r = domain->createEndpoint(**sendCq, **recvCq, EndpointOptions{});
    ASSERT_TRUE(s.isOk() && r.isOk()) << s.status().toString() << r.status().toString();
    senders[i] = std::move(s).value();
    receivers[i] = std::move(r).value();
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(senders[i]->connect(receivers[i]->address()).isOk());
    ASSERT_TRUE(receivers[i]->connect(senders[i]->address()).isOk());
  }
  auto buffers = allocate(*domain, 4 * 256);
  auto source = allocate(*domain, 4 * 256);
  std::memset(bytesOf(*buffers), 0, 4 * 256);
  fillPattern(bytesOf(*source), 4 * 256, 13);
  // All four receives go through receiver 0 ...
  std::vector<Sge> recvSges(4);
  std::vector<RecvRequest> recvs(4);
  for (int i = 0; i < 4; ++i) {
    recvSges[i] = sgeOf(*buffers, size_t(i) * 256, 256);
    recvs[i] = {.id = uint64_t(i), .sgList = &recvSges[i], .numSge = 1, .next = i < 3 ? &recvs[i + 1] : nullptr};
  }
  ASSERT_TRUE(receivers[0]->postRecv(recvs[0]).isOk());
  // ... and messages arrive on both.
  std::vector<Sge> sendSges(4);
  for (int i = 0; i < 4; ++i) {
    sendSges[i] = sgeOf(*source, size_t(i) * 256, 200);
    SendRequest send{.id = uint64_t(10 + i), .opcode = Opcode::kSendWithImm, .sgList = &sendSges[i], .numSge = 1,
                     .immData = uint32_t(i)};
    ASSERT_TRUE(senders[i % 2]->postSend(send).isOk());
    ASSERT_EQ(collect(**sendCq, 1).size(), 1u);  // one at a time: the SRQ hands out receives in order
  }
  auto received = collect(**recvCq, 4);
  ASSERT_EQ(received.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(received[i].status, CompletionStatus::kSuccess);
    EXPECT_EQ(received[i].id, uint64_t(i));
    EXPECT_EQ(received[i].immData, uint32_t(i));
    EXPECT_EQ(received[i].endpointId, receivers[i % 2]->id());
    EXPECT_EQ(received[i].byteLength, 200u);
    EXPECT_EQ(std::memcmp(bytesOf(*buffers) + i * 256, bytesOf(*source) + i * 256, 200), 0);
  }
  for (auto& e : senders) e.reset();
  for (auto& e : receivers) e.reset();
}

}  // namespace
}  // namespace ibdt::fabric::testing
