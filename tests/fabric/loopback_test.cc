// Every operation between two domains in one process, over every provider:
// SEND/RECV, WRITE, WRITE_WITH_IMM, READ with 1 and max_sge entries, sizes
// from 0 bytes up, on registered user memory and on provider-allocated
// memory; list post; inline; back-pressure. Every byte is checked, and so
// are the bytes around the target range.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/resource.h>

#include <cstring>

#include "fabric_harness.h"

namespace ibdt::fabric::testing {
namespace {

constexpr size_t kSizes[] = {0, 1, 7, 64, 4096, 65537, (1u << 20) + 3};
constexpr size_t kGuard = 64;  // bytes checked around each target range

class Loopback : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    a_ = Node::open(GetParam());
    b_ = Node::open(GetParam());
    ASSERT_TRUE(a_.domain && b_.domain);
    epA_ = a_.endpoint();
    epB_ = b_.endpoint();
    ASSERT_TRUE(epA_ && epB_);
    connectPair(*epA_, *epB_);
    caps_ = a_.domain->caps();
  }
  uint32_t maxSge() const { return std::min(caps_.maxSendSge, caps_.maxRecvSge); }
  // Replaces the connected pair with one made with `options`.
  void reconnect(const EndpointOptions& options) {
    epA_.reset();
    epB_.reset();
    epA_ = a_.endpoint(options);
    epB_ = b_.endpoint(options);
    connectPair(*epA_, *epB_);
  }

  Node a_, b_;
  std::unique_ptr<Endpoint> epA_, epB_;
  Caps caps_;
};

// Target buffer: zero, with `kGuard` bytes before and after the checked range.
void expectDelivered(const uint8_t* target, size_t length, uint32_t seed, const char* what) {
  EXPECT_EQ(firstMismatch(target + kGuard, length, seed), -1) << what << " of " << length << " bytes";
  for (size_t i = 0; i < kGuard; ++i) {
    ASSERT_EQ(target[i], 0) << what << ": wrote before the target range";
    ASSERT_EQ(target[kGuard + length + i], 0) << what << ": wrote past the target range";
  }
}

TEST_P(Loopback, SendRecvEverySizeWithOneAndMaxSge) {
  std::vector<uint8_t> source(kSizes[6] + 2 * kGuard), target(source.size());
  auto sourceRegion = a_.registered(source);
  auto targetRegion = b_.registered(target);
  uint32_t seed = 1;
  for (uint32_t sgeCount : {1u, maxSge()}) {
    for (size_t size : kSizes) {
      std::fill(target.begin(), target.end(), 0);
      fillPattern(source.data(), size, ++seed);
      postReceive(*epB_, seed, splitSges(*targetRegion, target.data() + kGuard, size + kGuard, sgeCount));
      ASSERT_TRUE(postOne(*epA_, Opcode::kSend, seed, splitSges(*sourceRegion, source.data(), size, sgeCount)).isOk());
      Completion sent = expectSuccess(*a_.sendQueue);
      EXPECT_EQ(sent.id, seed);
      EXPECT_EQ(sent.opcode, Opcode::kSend);
      Completion received = expectSuccess(*b_.recvQueue);
      EXPECT_EQ(received.id, seed);
      EXPECT_EQ(received.opcode, Opcode::kRecv);
      EXPECT_EQ(received.byteLength, size);
      EXPECT_FALSE(received.hasImm);
      EXPECT_EQ(received.endpointId, epB_->id());
      expectDelivered(target.data(), size, seed, "send");
    }
  }
}

TEST_P(Loopback, SendWithImmDeliversTheImmediate) {
  std::vector<uint8_t> source(256), target(256 + 2 * kGuard);
  auto sourceRegion = a_.registered(source);
  auto targetRegion = b_.registered(target);
  fillPattern(source.data(), 256, 9);
  postReceive(*epB_, 5, splitSges(*targetRegion, target.data() + kGuard, 256, 1));
  ASSERT_TRUE(postOne(*epA_, Opcode::kSendWithImm, 6, splitSges(*sourceRegion, source.data(), 256, 1), 0, 0,
                      0xC0FFEE).isOk());
  expectSuccess(*a_.sendQueue);
  Completion received = expectSuccess(*b_.recvQueue);
  EXPECT_TRUE(received.hasImm);
  EXPECT_EQ(received.immData, 0xC0FFEEu);
  EXPECT_EQ(received.byteLength, 256u);
  expectDelivered(target.data(), 256, 9, "send-with-imm");
}

TEST_P(Loopback, WriteAndReadEverySizeOnUserAndAllocatedMemory) {
  size_t span = kSizes[6] + 2 * kGuard;
  std::vector<uint8_t> local(span), remoteUser(span);
  auto localRegion = a_.registered(local);
  auto userRegion = b_.registered(remoteUser);
  auto allocatedRegion = b_.allocated(span);
  ASSERT_TRUE(localRegion && userRegion && allocatedRegion);
  uint32_t seed = 100;
  for (MemoryRegion* remote : {userRegion.get(), allocatedRegion.get()}) {
    auto* remoteBytes = static_cast<uint8_t*>(remote->address());
    for (uint32_t sgeCount : {1u, caps_.maxSendSge}) {
      for (size_t size : kSizes) {
        std::memset(remoteBytes, 0, span);
        fillPattern(local.data(), size, ++seed);
        auto sges = splitSges(*localRegion, local.data(), size, sgeCount);
        ASSERT_TRUE(postOne(*epA_, Opcode::kWrite, seed, sges, remote->remoteKey().address + kGuard,
                            remote->rkey()).isOk());
        EXPECT_EQ(expectSuccess(*a_.sendQueue).opcode, Opcode::kWrite);
        expectDelivered(remoteBytes, size, seed, "write");
        if (!caps_.rdmaRead) continue;
        // Read it back (scattered) into a cleared local buffer.
        std::fill(local.begin(), local.end(), 0);
        auto scatter = splitSges(*localRegion, local.data() + kGuard, size, caps_.maxSendSge);
        ASSERT_TRUE(postOne(*epA_, Opcode::kRead, seed + 7, sgeCount == 1 ? splitSges(*localRegion, local.data() + kGuard, size, 1) : scatter,
                            remote->remoteKey().address + kGuard, remote->rkey()).isOk());
        Completion read = expectSuccess(*a_.sendQueue);
        EXPECT_EQ(read.opcode, Opcode::kRead);
        expectDelivered(local.data(), size, seed, "read");
      }
    }
  }
}

TEST_P(Loopback, WriteWithImmConsumesAReceiveAndDeliversTheImmediate) {
  if (!caps_.writeWithImm) GTEST_SKIP() << "provider lacks WRITE_WITH_IMM";
  std::vector<uint8_t> source(4096 + 17), target(source.size() + 2 * kGuard);
  auto sourceRegion = a_.registered(source);
  auto targetRegion = b_.registered(target);
  for (size_t size : {size_t{0}, size_t{4096 + 17}}) {
    std::fill(target.begin(), target.end(), 0);
    fillPattern(source.data(), size, 77);
    postReceive(*epB_, 40 + size, {});
    ASSERT_TRUE(postOne(*epA_, Opcode::kWriteWithImm, 41, splitSges(*sourceRegion, source.data(), size, maxSge()),
                        reinterpret_cast<uint64_t>(target.data()) + kGuard, targetRegion->rkey(), 0xAB12CD34)
                    .isOk());
    expectSuccess(*a_.sendQueue);
    Completion received = expectSuccess(*b_.recvQueue);
    EXPECT_EQ(received.id, 40 + size);
    EXPECT_EQ(received.opcode, Opcode::kRecvWriteWithImm);
    EXPECT_TRUE(received.hasImm);
    EXPECT_EQ(received.immData, 0xAB12CD34u);
    EXPECT_EQ(received.byteLength, size);
    expectDelivered(target.data(), size, 77, "write-with-imm");
  }
}

TEST_P(Loopback, SendIntoProviderAllocatedMemory) {
  auto source = a_.allocated(70000);
  auto target = b_.allocated(70000 + 2 * kGuard);
  ASSERT_TRUE(source && target);
  auto* src = static_cast<uint8_t*>(source->address());
  auto* dst = static_cast<uint8_t*>(target->address());
  fillPattern(src, 70000, 3);
  postReceive(*epB_, 1, splitSges(*target, dst + kGuard, 70000, maxSge()));
  ASSERT_TRUE(postOne(*epA_, Opcode::kSend, 2, splitSges(*source, src, 70000, 3)).isOk());
  expectSuccess(*a_.sendQueue);
  EXPECT_EQ(expectSuccess(*b_.recvQueue).byteLength, 70000u);
  expectDelivered(dst, 70000, 3, "send into allocated memory");
}

TEST_P(Loopback, ListPostExecutesInOrderAndOnlySignalledRequestsComplete) {
  constexpr int kWrites = 16;
  constexpr size_t kBlock = 1000;
  std::vector<uint8_t> source(kWrites * kBlock + 8), target(kWrites * kBlock), flag(8);
  auto sourceRegion = a_.registered(source);
  auto targetRegion = b_.registered(target);
  auto flagRegion = b_.registered(flag);
  fillPattern(source.data(), kWrites * kBlock, 5);
  postReceive(*epB_, 99, splitSges(*flagRegion, flag.data(), 8, 1));
  std::vector<Sge> sges(kWrites + 1);
  std::vector<SendRequest> chain(kWrites + 1);
  for (int i = 0; i < kWrites; ++i) {
    sges[i] = Sge{reinterpret_cast<uint64_t>(source.data() + i * kBlock), kBlock, sourceRegion->lkey()};
    chain[i].id = 1000 + i;
    chain[i].opcode = Opcode::kWrite;
    chain[i].flags = 0;  // unsignalled
    chain[i].sgList = &sges[i];
    chain[i].numSge = 1;
    chain[i].remoteAddress = reinterpret_cast<uint64_t>(target.data() + i * kBlock);
    chain[i].rkey = targetRegion->rkey();
    chain[i].next = &chain[i + 1];
  }
  sges[kWrites] = Sge{reinterpret_cast<uint64_t>(source.data() + kWrites * kBlock), 8, sourceRegion->lkey()};
  chain[kWrites].id = 2000;
  chain[kWrites].opcode = Opcode::kSend;
  chain[kWrites].sgList = &sges[kWrites];
  chain[kWrites].numSge = 1;
  const SendRequest* bad = nullptr;
  ASSERT_TRUE(epA_->postSend(chain[0], &bad).isOk());
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(expectSuccess(*a_.sendQueue).id, 2000u);  // the unsignalled writes produce nothing
  EXPECT_EQ(expectSuccess(*b_.recvQueue).id, 99u);
  // The send was posted after the writes, so they are all visible now.
  EXPECT_EQ(firstMismatch(target.data(), target.size(), 5), -1);
  EXPECT_TRUE(staysEmpty(*a_.sendQueue, 20));
}

TEST_P(Loopback, InlineSendOwnsItsPayloadAtPostTime) {
  if (caps_.maxInline < 64) GTEST_SKIP() << "provider has maxInline " << caps_.maxInline;
  EndpointOptions options;
  options.maxInline = 64;
  reconnect(options);
  std::vector<uint8_t> source(64), target(64 + 2 * kGuard);
  auto sourceRegion = a_.registered(source);
  auto targetRegion = b_.registered(target);
  fillPattern(source.data(), 64, 21);
  // Posted before any receive exists, then the source is scribbled over.
  ASSERT_TRUE(postOne(*epA_, Opcode::kSend, 1, splitSges(*sourceRegion, source.data(), 64, 1), 0, 0, 0,
                      kSignaled | kInline).isOk());
  std::fill(source.begin(), source.end(), 0xEE);
  postReceive(*epB_, 2, splitSges(*targetRegion, target.data() + kGuard, 64, 1));
  expectSuccess(*a_.sendQueue);
  expectSuccess(*b_.recvQueue);
  expectDelivered(target.data(), 64, 21, "inline send");
  // Inline data needs no registration (the lkey is ignored).
  std::vector<uint8_t> unregistered(48);
  fillPattern(unregistered.data(), 48, 22);
  std::fill(target.begin(), target.end(), 0);
  postReceive(*epB_, 3, splitSges(*targetRegion, target.data() + kGuard, 64, 1));
  std::vector<Sge> loose{Sge{reinterpret_cast<uint64_t>(unregistered.data()), 48, 0}};
  ASSERT_TRUE(postOne(*epA_, Opcode::kSend, 4, loose, 0, 0, 0, kSignaled | kInline).isOk());
  expectSuccess(*a_.sendQueue);
  EXPECT_EQ(expectSuccess(*b_.recvQueue).byteLength, 48u);
  expectDelivered(target.data(), 48, 22, "inline send from unregistered memory");
}

TEST_P(Loopback, FullSendQueueIsBackPressureAndEverythingArrivesInOrder) {
  EndpointOptions options;
  options.sendQueueDepth = 8;
  options.recvQueueDepth = 64;
  reconnect(options);
  constexpr size_t kMessage = 512;
  std::vector<uint8_t> source(64 * kMessage), target(64 * kMessage);
  auto sourceRegion = a_.registered(source);
  auto targetRegion = b_.registered(target);
  fillPattern(source.data(), source.size(), 8);
  // No receive is posted yet, so sends cannot complete: the queue fills.
  uint32_t posted = 0;
  Status status;
  while (posted < 64) {
    status = postOne(*epA_, Opcode::kSend, posted,
                     splitSges(*sourceRegion, source.data() + posted * kMessage, kMessage, 1));
    if (!status.isOk()) break;
    ++posted;
  }
  ASSERT_EQ(status.code(), Code::kAgain) << status.toString();
  EXPECT_FALSE(status.isError());
  EXPECT_GE(posted, 8u);
  for (uint32_t i = 0; i < posted; ++i) {
    postReceive(*epB_, i, splitSges(*targetRegion, target.data() + i * kMessage, kMessage, 1));
  }
  for (uint32_t i = 0; i < posted; ++i) {
    EXPECT_EQ(expectSuccess(*a_.sendQueue).id, i);
    Completion received = expectSuccess(*b_.recvQueue);
    EXPECT_EQ(received.id, i);  // in order
  }
  EXPECT_EQ(firstMismatch(target.data(), posted * kMessage, 8), -1);
  // Room again.
  postReceive(*epB_, 500, splitSges(*targetRegion, target.data(), kMessage, 1));
  EXPECT_TRUE(postOne(*epA_, Opcode::kSend, 500, splitSges(*sourceRegion, source.data(), kMessage, 1)).isOk());
  expectSuccess(*a_.sendQueue);
  expectSuccess(*b_.recvQueue);
}

// A sender that has used up the receives it saw must look again when new
// ones are posted, one at a time or several at once, across many laps of
// the receive and notification rings; every message lands whole, in order.
TEST_P(Loopback, SendsWaitingForReceivesPostedInTricklesArriveInOrder) {
  EndpointOptions options;
  options.sendQueueDepth = 64;
  options.recvQueueDepth = 3;
  reconnect(options);
  constexpr uint32_t kMessages = 48;
  constexpr size_t kMessage = 200;
  std::vector<uint8_t> source(kMessages * kMessage), target(kMessages * (kMessage + 2 * kGuard));
  auto sourceRegion = a_.registered(source);
  auto targetRegion = b_.registered(target);
  for (uint32_t i = 0; i < kMessages; ++i) fillPattern(source.data() + i * kMessage, kMessage, 100 + i);
  for (uint32_t i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(
        postOne(*epA_, Opcode::kSend, i, splitSges(*sourceRegion, source.data() + i * kMessage, kMessage, 1)).isOk());
  }
  uint8_t* slots = target.data();
  uint32_t next = 0;
  for (uint32_t burst = 1; next < kMessages; burst = burst % 3 + 1) {  // 1, 2, 3, 1, ... receives at a time
    uint32_t end = std::min(kMessages, next + burst);
    for (uint32_t i = next; i < end; ++i) {
      postReceive(*epB_, i, splitSges(*targetRegion, slots + i * (kMessage + 2 * kGuard) + kGuard, kMessage, 1));
    }
    for (uint32_t i = next; i < end; ++i) {
      EXPECT_EQ(expectSuccess(*a_.sendQueue).id, i);  // polling the initiator retries its waiting sends
      Completion received = expectSuccess(*b_.recvQueue);
      ASSERT_EQ(received.id, i);
      EXPECT_EQ(received.byteLength, kMessage);
      expectDelivered(slots + i * (kMessage + 2 * kGuard), kMessage, 100 + i, "send");
    }
    next = end;
  }
}

TEST_P(Loopback, FullReceiveQueueIsBackPressure) {
  epB_.reset();
  EndpointOptions options;
  options.recvQueueDepth = 4;
  epB_ = b_.endpoint(options);
  std::vector<uint8_t> target(64);
  auto targetRegion = b_.registered(target);
  auto sges = splitSges(*targetRegion, target.data(), 64, 1);
  RecvRequest request;
  request.sgList = sges.data();
  request.numSge = 1;
  Status status;
  int posted = 0;
  while (posted < 64 && (status = epB_->postRecv(request)).isOk()) ++posted;
  EXPECT_EQ(status.code(), Code::kAgain) << status.toString();
  EXPECT_GE(posted, 4);
}

double threadCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + 1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

TEST_P(Loopback, CompletionWaitSleepsUntilTheDeadline) {
  auto before = std::chrono::steady_clock::now();
  double cpuBefore = threadCpuSeconds();
  Status status = a_.recvQueue->wait(Deadline::after(std::chrono::milliseconds(200)));
  double cpu = threadCpuSeconds() - cpuBefore;
  EXPECT_EQ(status.code(), Code::kTimeout) << status.toString();
  EXPECT_GE(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(200));
  // Sleeping, not spinning: a spin would burn the whole 200 ms of CPU.
  EXPECT_LT(cpu, 0.1) << "wait() used " << cpu << " s of CPU in 200 ms";
}

TEST_P(Loopback, MalformedRequestsAreRejectedAtPost) {
  std::vector<uint8_t> buffer(64);
  auto region = a_.registered(buffer);
  std::vector<Sge> tooMany(caps_.maxSendSge + 1, Sge{reinterpret_cast<uint64_t>(buffer.data()), 1, region->lkey()});
  SendRequest good;
  good.opcode = Opcode::kWrite;
  SendRequest bad;
  bad.opcode = Opcode::kSend;
  bad.sgList = tooMany.data();
  bad.numSge = static_cast<uint32_t>(tooMany.size());
  good.next = &bad;
  const SendRequest* badRequest = nullptr;
  Status status = epA_->postSend(good, &badRequest);
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.toString();
  EXPECT_EQ(badRequest, &bad);
  expectSuccess(*a_.sendQueue);  // the zero-length write before it was posted
  SendRequest receiveOpcode;
  receiveOpcode.opcode = Opcode::kRecv;
  EXPECT_EQ(epA_->postSend(receiveOpcode).code(), Code::kInvalidArgument);
  // Garbage peer address.
  auto fresh = a_.endpoint();
  std::vector<uint8_t> garbage(7, 0x5a);
  EXPECT_TRUE(fresh->connect(garbage).isError());
  EXPECT_TRUE(epA_->connect(epB_->address()).isError()) << "second connect must fail";
}

TEST_P(Loopback, RegisteringUnmappedMemoryFails) {
  size_t page = caps_.pageSize;
  void* mapping = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapping, MAP_FAILED);
  auto* bytes = static_cast<uint8_t*>(mapping);
  ASSERT_EQ(munmap(bytes + page, page), 0);
  auto spanning = a_.domain->registerMemory(bytes, 3 * page, kLocalWrite);
  EXPECT_TRUE(spanning.status().isError()) << "a range with an unmapped page must not register";
  auto first = a_.domain->registerMemory(bytes, page, kLocalWrite);
  EXPECT_TRUE(first.isOk()) << first.status().toString();
  auto last = a_.domain->registerMemory(bytes + 2 * page + 100, page - 100, kLocalWrite | kRemoteWrite);
  EXPECT_TRUE(last.isOk()) << last.status().toString();
  munmap(bytes, page);
  munmap(bytes + 2 * page, page);
}

TEST_P(Loopback, InvalidAccessFlagsAreRejected) {
  std::vector<uint8_t> buffer(64);
  EXPECT_EQ(a_.domain->registerMemory(buffer.data(), buffer.size(), 1u << 20).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(a_.domain->registerMemory(buffer.data(), buffer.size(), kRemoteWrite).status().code(),
            Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Providers, Loopback, ::testing::ValuesIn(providersUnderTest()),
                         [](const auto& param) { return param.param; });

}  // namespace
}  // namespace ibdt::fabric::testing
