// Malformed requests and misuse get a clear error and post nothing after the
// bad request; back-pressure (full send queue, no room in the completion
// queue) is kAgain with *badRequest at the first request not posted.
#include "tests/verbs/verbs_test_util.h"

namespace ibdt::fabric::testing {
namespace {

void expectInvalid(Endpoint& endpoint, const SendRequest& request, const char* fragment) {
  const SendRequest* bad = nullptr;
  Status status = endpoint.postSend(request, &bad);
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << fragment << ": " << status.toString();
  EXPECT_EQ(bad, &request) << fragment;
  EXPECT_NE(status.message().find(fragment), std::string_view::npos) << status.toString();
}

TEST(VerbsRequests, MalformedSendsAreRejected) {
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair);
  auto buffer = allocate(*domain, 1 << 20);
  uint32_t maxSge = domain->caps().maxSendSge;
  std::vector<Sge> sges(maxSge + 1, sgeOf(*buffer, 0, 8));
  expectInvalid(*pair.a, SendRequest{.sgList = sges.data(), .numSge = maxSge + 1}, "SGEs exceed the limit");
  expectInvalid(*pair.a, SendRequest{.sgList = nullptr, .numSge = 1}, "null sgList");
  expectInvalid(*pair.a, SendRequest{.opcode = Opcode::kRecv}, "not a send-queue opcode");
  expectInvalid(*pair.a, SendRequest{.flags = 1u << 7}, "unknown flags");
  Sge big = sgeOf(*buffer, 0, domain->caps().maxInline + 1);
  expectInvalid(*pair.a, SendRequest{.flags = kInline, .sgList = &big, .numSge = 1}, "inline limit");
  expectInvalid(*pair.a, SendRequest{.opcode = Opcode::kRead, .flags = kInline, .sgList = &big, .numSge = 1},
                "cannot be inline");
  expectInvalid(*pair.a, SendRequest{.opcode = Opcode::kWrite, .sgList = &big, .numSge = 1, .rkey = 1ull << 40},
                "32 bits");
  uint64_t maxMessage = domain->caps().maxMessageSize;
  if (maxMessage < (1ull << 32) - (1 << 20)) {
    std::vector<Sge> huge(std::min<uint32_t>(maxSge, 8), sgeOf(*buffer, 0, 1 << 20));
    if (huge.size() * (1ull << 20) > maxMessage) {
      expectInvalid(*pair.a, SendRequest{.sgList = huge.data(), .numSge = uint32_t(huge.size())}, "maximum message");
    }
  }
  // Nothing was posted: no completion on either side.
  EXPECT_EQ(pollAll(*pair.cqA), 0u);
  EXPECT_EQ(pair.a->state(), EndpointState::kConnected);

  RecvRequest badRecv{.sgList = nullptr, .numSge = 2};
  const RecvRequest* badAt = nullptr;
  Status recv = pair.b->postRecv(badRecv, &badAt);
  EXPECT_EQ(recv.code(), Code::kInvalidArgument) << recv.toString();
  EXPECT_EQ(badAt, &badRecv);
}

TEST(VerbsRequests, ListStopsAtTheMalformedRequest) {
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair);
  auto [source, target] = sourceAndTarget(*domain, 4096, 8);
  Sge sge = sgeOf(*source, 0, 100);
  SendRequest third{.id = 3, .opcode = Opcode::kWrite, .sgList = &sge, .numSge = 1,
                    .remoteAddress = target->remoteKey().address + 200, .rkey = target->rkey()};
  SendRequest second{.id = 2, .opcode = Opcode::kRecv, .next = &third};
  SendRequest first{.id = 1, .opcode = Opcode::kWrite, .sgList = &sge, .numSge = 1,
                    .remoteAddress = target->remoteKey().address, .rkey = target->rkey(), .next = &second};
  const SendRequest* bad = nullptr;
  Status status = pair.a->postSend(first, &bad);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ(bad, &second);
  auto done = collect(*pair.cqA, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, 1u);
  EXPECT_EQ(done[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ(std::memcmp(bytesOf(*target), bytesOf(*source), 100), 0);
  for (int i = 200; i < 300; ++i) EXPECT_EQ(bytesOf(*target)[i], 0) << "the request after the bad one ran";
}

TEST(VerbsRequests, FullCompletionQueueIsBackPressureNotOverflow) {
  EndpointOptions options;
  options.sendQueueDepth = 64;
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair, options, 8);  // a CQ far smaller than the send queue
  const int kCount = 20;
  auto [source, target] = sourceAndTarget(*domain, kCount * 64, 2);
  std::vector<Sge> sges(kCount);
  std::vector<SendRequest> requests(kCount);
  for (int i = 0; i < kCount; ++i) {
    sges[i] = sgeOf(*source, size_t(i) * 64, 64);
    requests[i] = {.id = uint64_t(i), .opcode = Opcode::kWrite, .sgList = &sges[i], .numSge = 1,
                   .remoteAddress = target->remoteKey().address + size_t(i) * 64, .rkey = target->rkey(),
                   .next = i + 1 < kCount ? &requests[i + 1] : nullptr};
  }
  std::vector<uint64_t> ids;
  const SendRequest* next = &requests[0];
  Deadline deadline = Deadline::after(std::chrono::seconds(60));
  int rounds = 0;
  while (next != nullptr && !deadline.expired()) {
    const SendRequest* bad = nullptr;
    Status status = pair.a->postSend(*next, &bad);
    if (status.isOk()) {
      EXPECT_EQ(bad, nullptr);
    } else {
      ASSERT_EQ(status.code(), Code::kAgain) << status.toString();
      ASSERT_NE(bad, nullptr);
      if (rounds == 0) {
        EXPECT_EQ(bad, &requests[8]) << "a depth-8 queue must take exactly 8";
      }
    }
    ++rounds;
    next = bad;
    for (const Completion& c : collect(*pair.cqA, 1)) {
      EXPECT_EQ(c.status, CompletionStatus::kSuccess);
      ids.push_back(c.id);
    }
  }
  while (ids.size() < kCount) {
    auto more = collect(*pair.cqA, 1);
    if (more.empty()) break;
    ids.push_back(more[0].id);
  }
  ASSERT_EQ(ids.size(), size_t(kCount));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(ids[i], uint64_t(i)) << "completions out of order";
  EXPECT_EQ(std::memcmp(bytesOf(*target), bytesOf(*source), kCount * 64), 0);
  EXPECT_GT(rounds, 1);
}

TEST(VerbsRequests, ReceiveQueueFullIsBackPressure) {
  EndpointOptions options;
  options.recvQueueDepth = 4;
  IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair, options, 1024);
  std::vector<RecvRequest> recvs(64);
  for (size_t i = 0; i < recvs.size(); ++i) recvs[i] = {.id = i, .next = i + 1 < recvs.size() ? &recvs[i + 1] : nullptr};
  const RecvRequest* bad = nullptr;
  Status status = pair.b->postRecv(recvs[0], &bad);
  ASSERT_EQ(status.code(), Code::kAgain) << status.toString();
  ASSERT_NE(bad, nullptr);
  size_t accepted = static_cast<size_t>(bad - recvs.data());
  EXPECT_GE(accepted, 4u);
  // Each accepted receive is consumed by one message.
  for (size_t i = 0; i < accepted; ++i) {
    ASSERT_TRUE(pair.a->postSend(SendRequest{.id = 100 + i, .flags = 0}).isOk());
  }
  auto received = collect(*pair.cqB, accepted);
  ASSERT_EQ(received.size(), accepted);
  for (size_t i = 0; i < accepted; ++i) {
    EXPECT_EQ(received[i].id, i);
    EXPECT_EQ(received[i].byteLength, 0u);
  }
  // The consumed receives made room for the rest.
  const RecvRequest* stillBad = nullptr;
  Status rest = pair.b->postRecv(*bad, &stillBad);
  EXPECT_TRUE(rest.isOk() || rest.code() == Code::kAgain) << rest.toString();
  EXPECT_NE(stillBad, bad);
}

TEST(VerbsRequests, MisuseOfTheEndpointLifecycle) {
  IBDT_OPEN_VERBS_OR_SKIP(domain);
  auto cq = domain->createCompletionQueue(16);
  ASSERT_TRUE(cq.isOk());
  auto endpoint = domain->createEndpoint(**cq, **cq, EndpointOptions{});
  ASSERT_TRUE(endpoint.isOk()) << endpoint.status().toString();
  EXPECT_EQ((*endpoint)->state(), EndpointState::kCreated);
  Status early = (*endpoint)->postSend(SendRequest{});
  EXPECT_EQ(early.code(), Code::kState) << early.toString();
  // Receives may be posted before connect (the QP is in INIT).
  EXPECT_TRUE((*endpoint)->postRecv(RecvRequest{.id = 1}).isOk());

  std::vector<uint8_t> garbage(36, 0xab);
  Status bad = (*endpoint)->connect(garbage);
  EXPECT_EQ(bad.code(), Code::kProtocol) << bad.toString();
  EXPECT_EQ((*endpoint)->state(), EndpointState::kCreated);

  auto other = domain->createEndpoint(**cq, **cq, EndpointOptions{});
  ASSERT_TRUE(other.isOk());
  ASSERT_TRUE((*endpoint)->connect((*other)->address()).isOk());
  Status twice = (*endpoint)->connect((*other)->address());
  EXPECT_EQ(twice.code(), Code::kState) << twice.toString();

  EndpointOptions tooDeep;
  tooDeep.sendQueueDepth = domain->caps().maxSendQueueDepth + 1;
  auto deep = domain->createEndpoint(**cq, **cq, tooDeep);
  ASSERT_FALSE(deep.isOk());
  EXPECT_EQ(deep.status().code(), Code::kInvalidArgument);
  EndpointOptions tooManySge;
  tooManySge.maxSendSge = domain->caps().maxSendSge + 1;
  EXPECT_EQ(domain->createEndpoint(**cq, **cq, tooManySge).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(domain->createCompletionQueue(0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(domain->createCompletionQueue(domain->caps().maxCompletionQueueDepth + 1).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace ibdt::fabric::testing
