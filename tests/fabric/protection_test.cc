// Protection and the error state, over every provider: a bad rkey, a stale
// rkey after deregistration, an out-of-range access and a missing access
// flag each complete with a remote-access error at the initiator, move its
// endpoint to the error state, and leave the target memory untouched; after
// that everything outstanding and everything posted later completes flushed.
#include <gtest/gtest.h>

#include "fabric_harness.h"

namespace ibdt::fabric::testing {
namespace {

enum class Violation { kWrongRkey, kStaleRkey, kOutOfRange, kBelowRange, kMissingWriteFlag, kMissingReadFlag };

struct Case {
  std::string provider;
  Violation violation;
};

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  static const char* const kNames[] = {"WrongRkey", "StaleRkey", "OutOfRange", "BelowRange", "MissingWriteFlag",
                                       "MissingReadFlag"};
  return info.param.provider + "_" + kNames[static_cast<int>(info.param.violation)];
}

class Protection : public ::testing::TestWithParam<Case> {};

TEST_P(Protection, ViolationIsRemoteAccessErrorAndTargetIsUnchanged) {
  const Case& test = GetParam();
  Node a = Node::open(test.provider);
  Node b = Node::open(test.provider);
  ASSERT_TRUE(a.domain && b.domain);
  if (test.violation == Violation::kMissingReadFlag && !a.domain->caps().rdmaRead) GTEST_SKIP() << "no RDMA READ";
  auto epA = a.endpoint();
  auto epB = b.endpoint();
  connectPair(*epA, *epB);

  std::vector<uint8_t> local(4096), target(4096);
  fillPattern(local.data(), local.size(), 1);
  fillPattern(target.data(), target.size(), 2);
  auto localRegion = a.registered(local);
  uint32_t targetAccess = kLocalWrite | kRemoteWrite | kRemoteRead;
  if (test.violation == Violation::kMissingWriteFlag) targetAccess = kLocalWrite | kRemoteRead;
  if (test.violation == Violation::kMissingReadFlag) targetAccess = kLocalWrite | kRemoteWrite;
  auto targetRegion = b.registered(target, targetAccess);
  RemoteKey key = targetRegion->remoteKey();
  // Receives posted before the failure must be flushed by it.
  std::vector<uint8_t> inbox(64);
  auto inboxRegion = a.registered(inbox);
  postReceive(*epA, 501, splitSges(*inboxRegion, inbox.data(), 64, 1));
  postReceive(*epA, 502, splitSges(*inboxRegion, inbox.data(), 64, 1));

  Opcode opcode = test.violation == Violation::kMissingReadFlag ? Opcode::kRead : Opcode::kWrite;
  uint64_t address = key.address;
  uint64_t length = 256;
  switch (test.violation) {
    case Violation::kWrongRkey: key.rkey ^= 0x5a5a5a5aull; break;
    case Violation::kStaleRkey: {
      targetRegion.reset();  // deregistered: the key must stop working at once
      auto again = b.registered(target);  // the same memory registered anew gets a new key
      ASSERT_NE(again->rkey(), key.rkey);
      targetRegion = std::move(again);
      break;
    }
    case Violation::kOutOfRange: address = key.address + key.length - 100; break;
    case Violation::kBelowRange: address = key.address - 8; break;
    case Violation::kMissingWriteFlag:
    case Violation::kMissingReadFlag: break;
  }
  ASSERT_TRUE(postOne(*epA, opcode, 7, splitSges(*localRegion, local.data(), length, 1), address, key.rkey).isOk());
  Completion failed = nextCompletion(*a.sendQueue);
  EXPECT_EQ(failed.id, 7u);
  EXPECT_EQ(failed.status, CompletionStatus::kRemoteAccess) << completionStatusName(failed.status);
  EXPECT_EQ(completionError(failed, "rank 1").code(), Code::kRemoteAccess);
  EXPECT_EQ(firstMismatch(target.data(), target.size(), 2), -1) << "target memory changed";
  EXPECT_EQ(firstMismatch(local.data(), local.size(), 1), -1) << "local memory changed";
  EXPECT_EQ(epA->state(), EndpointState::kError);

  // Outstanding receives flush; later requests complete flushed, never execute.
  for (uint64_t id : {501u, 502u}) {
    Completion flushed = nextCompletion(*a.recvQueue);
    EXPECT_EQ(flushed.id, id);
    EXPECT_EQ(flushed.status, CompletionStatus::kFlushed);
  }
  RemoteKey good = targetRegion->remoteKey();
  ASSERT_TRUE(postOne(*epA, Opcode::kWrite, 8, splitSges(*localRegion, local.data(), 64, 1), good.address, good.rkey)
                  .isOk());
  Completion later = nextCompletion(*a.sendQueue);
  EXPECT_EQ(later.id, 8u);
  EXPECT_EQ(later.status, CompletionStatus::kFlushed);
  EXPECT_EQ(completionError(later, "rank 1").code(), Code::kFlushed);
  EXPECT_EQ(firstMismatch(target.data(), target.size(), 2), -1) << "a flushed write reached the target";
  postReceive(*epA, 503, splitSges(*inboxRegion, inbox.data(), 64, 1));
  EXPECT_EQ(nextCompletion(*a.recvQueue).status, CompletionStatus::kFlushed);
}

// Other request failures, once per provider.
// Two nodes of the provider under test joined by one connected endpoint pair.
class RequestErrors : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    a = Node::open(GetParam());
    b = Node::open(GetParam());
    epA = a.endpoint();
    epB = b.endpoint();
    connectPair(*epA, *epB);
  }

  // Declared in this order so the endpoints go before their domains.
  Node a;
  Node b;
  std::unique_ptr<Endpoint> epA;
  std::unique_ptr<Endpoint> epB;
};

TEST_P(RequestErrors, ReceiveTooSmallFailsBothSides) {
  std::vector<uint8_t> source(128), target(128);
  fillPattern(source.data(), 128, 4);
  auto sourceRegion = a.registered(source);
  auto targetRegion = b.registered(target);
  postReceive(*epB, 1, splitSges(*targetRegion, target.data(), 16, 1));
  ASSERT_TRUE(postOne(*epA, Opcode::kSend, 2, splitSges(*sourceRegion, source.data(), 128, 1)).isOk());
  Completion receiver = nextCompletion(*b.recvQueue);
  EXPECT_EQ(receiver.status, CompletionStatus::kLocalLength) << completionStatusName(receiver.status);
  Completion sender = nextCompletion(*a.sendQueue);
  EXPECT_EQ(sender.status, CompletionStatus::kRemoteInvalidRequest) << completionStatusName(sender.status);
  EXPECT_EQ(completionError(sender, "rank 1").code(), Code::kTruncated);
  EXPECT_EQ(epA->state(), EndpointState::kError);
}

TEST_P(RequestErrors, LocalKeyOutsideItsRegionIsLocalProtectionError) {
  std::vector<uint8_t> source(128), target(128);
  auto sourceRegion = a.registered(source);
  auto targetRegion = b.registered(target);
  fillPattern(target.data(), 128, 6);
  std::vector<Sge> beyond{Sge{reinterpret_cast<uint64_t>(source.data()) + 64, 128, sourceRegion->lkey()}};
  ASSERT_TRUE(postOne(*epA, Opcode::kWrite, 3, beyond, reinterpret_cast<uint64_t>(target.data()),
                      targetRegion->rkey()).isOk());
  Completion failed = nextCompletion(*a.sendQueue);
  EXPECT_EQ(failed.status, CompletionStatus::kLocalProtection) << completionStatusName(failed.status);
  EXPECT_EQ(firstMismatch(target.data(), 128, 6), -1);
}

TEST_P(RequestErrors, FailureInsideAListStopsThereAndNamesTheRequest) {
  constexpr int kWrites = 6;
  constexpr int kBad = 3;
  constexpr size_t kBlock = 4096;
  std::vector<uint8_t> source(kWrites * kBlock), target(kWrites * kBlock);
  fillPattern(source.data(), source.size(), 12);
  auto sourceRegion = a.registered(source);
  auto targetRegion = b.registered(target);
  std::vector<Sge> sges(kWrites);
  std::vector<SendRequest> chain(kWrites);
  for (int i = 0; i < kWrites; ++i) {
    sges[i] = Sge{reinterpret_cast<uint64_t>(source.data() + i * kBlock), kBlock, sourceRegion->lkey()};
    chain[i].id = 10 + i;
    chain[i].opcode = Opcode::kWrite;
    chain[i].sgList = &sges[i];
    chain[i].numSge = 1;
    chain[i].remoteAddress = reinterpret_cast<uint64_t>(target.data() + i * kBlock);
    chain[i].rkey = i == kBad ? targetRegion->rkey() ^ 0x77ull : targetRegion->rkey();
    chain[i].next = i + 1 < kWrites ? &chain[i + 1] : nullptr;
  }
  ASSERT_TRUE(epA->postSend(chain[0]).isOk());
  for (int i = 0; i < kWrites; ++i) {
    Completion completion = nextCompletion(*a.sendQueue);
    EXPECT_EQ(completion.id, 10u + i);
    CompletionStatus expected = i < kBad    ? CompletionStatus::kSuccess
                                : i == kBad ? CompletionStatus::kRemoteAccess
                                            : CompletionStatus::kFlushed;
    EXPECT_EQ(completion.status, expected) << "request " << i << ": " << completionStatusName(completion.status);
  }
  EXPECT_EQ(firstMismatch(target.data(), kBad * kBlock, 12), -1) << "writes before the failure must land";
  for (size_t i = kBad * kBlock; i < target.size(); ++i) ASSERT_EQ(target[i], 0) << "write at or after the failure landed";
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (const std::string& provider : providersUnderTest()) {
    for (Violation violation : {Violation::kWrongRkey, Violation::kStaleRkey, Violation::kOutOfRange,
                                Violation::kBelowRange, Violation::kMissingWriteFlag, Violation::kMissingReadFlag}) {
      cases.push_back({provider, violation});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Providers, Protection, ::testing::ValuesIn(allCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Providers, RequestErrors, ::testing::ValuesIn(providersUnderTest()),
                         [](const auto& param) { return param.param; });

}  // namespace
}  // namespace ibdt::fabric::testing
