#include "messaging/hostile_world.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <thread>

#include "base/backoff.h"
#include "support/thread_ranks.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;

constexpr auto kWait = std::chrono::seconds(60);
constexpr int64_t kEagerBytes = 1000;
constexpr int64_t kPipelinedBytes = 12000;  // between the eager and the pipeline limit
constexpr int64_t kLargeBytes = 256 << 10;
// The victim's noncontiguous rendezvous send: 1024 blocks of 48 bytes, stride 96.
constexpr int64_t kBlocks = 1024, kBlockBytes = 48, kStride = 96;

Datatype bytes() { return Datatype::of<uint8_t>(); }

Datatype strided() {
  auto type = Datatype::vector(kBlocks, kBlockBytes, kStride, bytes());
  EXPECT_TRUE(type.isOk() && type->commit().isOk());
  return *type;
}

}  // namespace

Guarded::Guarded(size_t bytes, uint8_t fill) : storage_(bytes + 2 * kGuardBytes, kGuard) {
  std::fill(data(), data() + bytes, fill);
}

long Guarded::firstDamagedGuard() const {
  for (size_t i = 0; i < storage_.size(); ++i) {
    bool guard = i < kGuardBytes || i >= storage_.size() - kGuardBytes;
    if (guard && storage_[i] != kGuard) return static_cast<long>(i);
  }
  return -1;
}

wire::Envelope rogueEnvelope(int64_t count) {
  auto signature = datatype::signature(bytes(), count);
  EXPECT_TRUE(signature.isOk());
  return wire::Envelope{kRogue, kRogueTag, 0, 0, count, signature->hash, signature->elements};
}

wire::Rts contiguousRts(uint32_t transfer, int64_t bytes, Scheme forced) {
  wire::Rts rts{};
  rts.senderTransfer = transfer;
  rts.senderContiguous = 1;
  rts.forcedScheme = static_cast<uint8_t>(forced);
  rts.blockCount = 1;
  rts.meanBlock = rts.medianBlock = static_cast<double>(bytes);
  return rts;
}

Crafted rogueEager(std::span<const uint8_t> payload, int64_t claimedBytes, int32_t claimedSource) {
  wire::Envelope envelope = rogueEnvelope(static_cast<int64_t>(payload.size()));
  envelope.bytes = claimedBytes;
  envelope.source = claimedSource;
  return eagerMessage(envelope, payload);
}

// The victim <-> honest traffic: each side sends an eager, a pipelined and
// a rendezvous message (the victim's noncontiguous), every byte checked.
struct HostileWorld::Exchange {
  std::vector<uint8_t> victimEager = pattern(kEagerBytes, 1), honestEager = pattern(kEagerBytes, 2);
  std::vector<uint8_t> victimPipelined = pattern(kPipelinedBytes, 5);
  std::vector<uint8_t> honestPipelined = pattern(kPipelinedBytes, 6);
  std::vector<uint8_t> honestLarge = pattern(kLargeBytes, 3);
  std::vector<uint8_t> victimStrided = pattern(kBlocks * kStride, 4);
  Guarded victimGotEager{kEagerBytes}, victimGotPipelined{kPipelinedBytes}, victimGotLarge{kLargeBytes};
  Guarded honestGotEager{kEagerBytes}, honestGotPipelined{kPipelinedBytes}, honestGotStrided{kBlocks * kBlockBytes};
  std::vector<std::pair<Context*, Request>> requests;
};

HostileWorld::HostileWorld() = default;
HostileWorld::~HostileWorld() = default;

void HostileWorld::SetUp() {
  options_.eagerLimit = 4096;
  options_.eagerCredits = 8;
  options_.pipelineLimit = 16384;  // 4 KiB .. 16 KiB pipelined, above that rendezvous
  options_.connect = Connect::kEager;
  static std::atomic<int> worlds{0};
  std::string tag = "hostile-" + std::to_string(getpid()) + "-" + std::to_string(worlds++);
  for (int rank = 0; rank < 3; ++rank) {
    auto domain = fabric::openDomain("shm", {tag, ""});
    ASSERT_TRUE(domain.isOk()) << domain.status().toString();
    domains_.push_back(std::move(domain).value());
  }
  // Creation is collective: one thread per rank.
  ThreadExchange exchange(3);
  std::unique_ptr<Context> contexts[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      auto allgather = [&exchange, rank](std::span<const uint8_t> value) { return exchange.allgather(rank, value); };
      fabric::Domain& domain = *domains_[static_cast<size_t>(rank)];
      if (rank == kRogue) {
        auto rogue = RoguePeer::create(domain, rank, 3, allgather, options_);
        ASSERT_TRUE(rogue.isOk()) << rogue.status().toString();
        rogue_ = std::move(rogue).value();
        return;
      }
      auto context = Context::create(domain, Bootstrap{rank, 3, allgather}, options_);
      ASSERT_TRUE(context.isOk()) << context.status().toString();
      contexts[rank] = std::move(context).value();
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(rogue_ && contexts[kVictim] && contexts[kHonest]);
  victim_ = std::move(contexts[kVictim]);
  honest_ = std::move(contexts[kHonest]);
  rogue_->pump = [this] {
    (void)victim_->progress();
    (void)honest_->progress();
  };
  startHonestTraffic();
}

void HostileWorld::startHonestTraffic() {
  honestTraffic_ = std::make_unique<Exchange>();
  Exchange& x = *honestTraffic_;
  auto start = [&](Context& context, Result<Request> request) {
    ASSERT_TRUE(request.isOk()) << request.status().toString();
    x.requests.emplace_back(&context, std::move(request).value());
  };
  start(*victim_, victim_->irecv(x.victimGotEager.data(), kEagerBytes, bytes(), kHonest, 10));
  start(*victim_, victim_->irecv(x.victimGotLarge.data(), kLargeBytes, bytes(), kHonest, 11));
  start(*victim_, victim_->irecv(x.victimGotPipelined.data(), kPipelinedBytes, bytes(), kHonest, 13));
  start(*honest_, honest_->irecv(x.honestGotPipelined.data(), kPipelinedBytes, bytes(), kVictim, 13));
  start(*honest_, honest_->irecv(x.honestGotEager.data(), kEagerBytes, bytes(), kVictim, 10));
  start(*honest_, honest_->irecv(x.honestGotStrided.data(), kBlocks * kBlockBytes, bytes(), kVictim, 12));
  start(*honest_, honest_->isend(x.honestEager.data(), kEagerBytes, bytes(), kVictim, 10));
  start(*honest_, honest_->isend(x.honestLarge.data(), kLargeBytes, bytes(), kVictim, 11));
  start(*victim_, victim_->isend(x.victimEager.data(), kEagerBytes, bytes(), kHonest, 10));
  start(*victim_, victim_->isend(x.victimStrided.data(), 1, strided(), kHonest, 12));
  start(*honest_, honest_->isend(x.honestPipelined.data(), kPipelinedBytes, bytes(), kVictim, 13));
  start(*victim_, victim_->isend(x.victimPipelined.data(), kPipelinedBytes, bytes(), kHonest, 13));
}

void HostileWorld::finishHonestTraffic() {
  Exchange& x = *honestTraffic_;
  std::vector<bool> done(x.requests.size(), false);
  Backoff backoff;
  for (auto deadline = Deadline::after(kWait); !std::all_of(done.begin(), done.end(), [](bool d) { return d; });) {
    ASSERT_FALSE(deadline.expired()) << "the victim's traffic with the honest peer did not complete";
    for (size_t i = 0; i < x.requests.size(); ++i) {
      if (done[i]) continue;
      auto tested = x.requests[i].first->test(x.requests[i].second);
      ASSERT_TRUE(tested.isOk()) << tested.status().toString();
      done[i] = *tested;
    }
    backoff.pause();
  }
  for (auto& [context, request] : x.requests) {
    Status status = context->wait(request);
    EXPECT_TRUE(status.isOk()) << status.toString();
  }
  auto same = [](const Guarded& got, const uint8_t* expected) {
    return std::equal(got.data(), got.data() + got.size(), expected);
  };
  EXPECT_TRUE(same(x.victimGotEager, x.honestEager.data()));
  EXPECT_TRUE(same(x.victimGotLarge, x.honestLarge.data()));
  EXPECT_TRUE(same(x.honestGotEager, x.victimEager.data()));
  EXPECT_TRUE(same(x.victimGotPipelined, x.honestPipelined.data()));
  EXPECT_TRUE(same(x.honestGotPipelined, x.victimPipelined.data()));
  std::vector<uint8_t> packed;
  for (int64_t b = 0; b < kBlocks; ++b) {
    auto block = x.victimStrided.begin() + b * kStride;
    packed.insert(packed.end(), block, block + kBlockBytes);
  }
  EXPECT_TRUE(same(x.honestGotStrided, packed.data()));
  for (const Guarded* buffer : {&x.victimGotEager, &x.victimGotPipelined, &x.victimGotLarge, &x.honestGotEager,
                                &x.honestGotPipelined, &x.honestGotStrided}) {
    EXPECT_EQ(buffer->firstDamagedGuard(), -1) << "written outside a receive buffer";
  }
}

void HostileWorld::closeAll() {
  // A rogue the victim still trusts says "nothing more", as the honest peer needs too.
  if (!rogueFailed_) (void)rogue_->send(kVictim, message(wire::Kind::kClose));
  (void)rogue_->send(kHonest, message(wire::Kind::kClose));
  Status victimClosed;
  std::thread victimThread([&] { victimClosed = victim_->close(Deadline::after(kWait)); });
  Status honestClosed = honest_->close(Deadline::after(kWait));
  victimThread.join();
  EXPECT_TRUE(victimClosed.isOk()) << victimClosed.toString();
  EXPECT_TRUE(honestClosed.isOk()) << honestClosed.toString();
}

void HostileWorld::TearDown() {
  if (!victim_ || !honest_ || !rogue_) return;  // SetUp failed and said why
  finishHonestTraffic();
  EXPECT_EQ(fromRogue_.firstDamagedGuard(), -1) << "written outside the receive from the rogue";
  if (!fromRogueWritten_) {
    EXPECT_TRUE(std::all_of(fromRogue_.data(), fromRogue_.data() + fromRogue_.size(), [](uint8_t b) { return b == 0; }))
        << "the rogue's bytes reached the receive buffer";
  }
  closeAll();
}

Request HostileWorld::postRecvFromRogue(int64_t count) {
  auto request = victim_->irecv(fromRogue_.data(), std::min(count, kRogueRecvBytes), bytes(), kRogue, kRogueTag);
  EXPECT_TRUE(request.isOk()) << request.status().toString();
  return request.isOk() ? std::move(request).value() : Request();
}

HostileWorld::Started HostileWorld::victimSendsToRogue(int64_t count, const datatype::Datatype& type) {
  Started started{};
  auto request = victim_->isend(toRogue_.data(), count, type, kRogue, kRogueTag);
  EXPECT_TRUE(request.isOk()) << request.status().toString();
  if (request.isOk()) started.request = std::move(request).value();
  RogueMessage rts = nextFromVictim();
  auto header = wire::read<wire::Header>(rts.bytes, 0);
  EXPECT_TRUE(header.isOk() && header->kind == wire::Kind::kRts) << "the victim sent no RTS";
  auto envelope = wire::read<wire::Envelope>(rts.bytes, sizeof(wire::Header));
  auto fields = wire::read<wire::Rts>(rts.bytes, sizeof(wire::Header) + sizeof(wire::Envelope));
  EXPECT_TRUE(envelope.isOk() && fields.isOk());
  if (envelope.isOk()) started.envelope = *envelope;
  if (fields.isOk()) started.rts = *fields;
  return started;
}

RogueMessage HostileWorld::nextFromVictim() {
  for (;;) {
    auto got = rogue_->receive(kVictim);
    EXPECT_TRUE(got.isOk()) << got.status().toString();
    if (!got.isOk()) return {};
    auto header = wire::read<wire::Header>(got->bytes, 0);
    if (got->writeWithImm || !header.isOk() || header->kind != wire::Kind::kCredit) return std::move(got).value();
  }
}

wire::Cts HostileWorld::rogueAsks(const wire::Rts& rts, int64_t bytes) {
  rogueSends(message(wire::Kind::kRts).add(rogueEnvelope(bytes)).add(rts));
  RogueMessage reply = nextFromVictim();
  auto cts = wire::read<wire::Cts>(reply.bytes, sizeof(wire::Header));
  EXPECT_TRUE(cts.isOk()) << "the victim did not reply to the RTS";
  return cts.isOk() ? *cts : wire::Cts{};
}

void HostileWorld::rogueSends(std::span<const uint8_t> bytes) {
  Status sent = rogue_->send(kVictim, bytes);
  EXPECT_TRUE(sent.isOk()) << sent.toString();
}

void HostileWorld::expectRogueFailed(Request& request, Code code, const std::vector<std::string>& needles) {
  rogueFailed_ = true;
  Status status = victim_->wait(request, nullptr, Deadline::after(kWait));
  EXPECT_EQ(status.code(), code) << status.toString();
  for (const std::string& needle : needles) {
    EXPECT_NE(status.message().find(needle), std::string_view::npos)
        << "'" << needle << "' not in: " << status.toString();
  }
  auto again = victim_->isend(toRogue_.data(), 10, bytes(), kRogue, kRogueTag);
  ASSERT_FALSE(again.isOk()) << "the victim still sends to the rogue";
  EXPECT_EQ(again.status().code(), code) << again.status().toString();
  EXPECT_NE(again.status().message().find(needles.front()), std::string_view::npos) << again.status().toString();
}

wire::Cts HostileWorld::ctsFor(const Started& started, wire::ReplyMode mode) {
  wire::Cts cts{};
  cts.senderTransfer = started.rts.senderTransfer;
  cts.receiverTransfer = 4242;
  cts.bytes = started.envelope.bytes;
  cts.mode = mode;
  cts.receiverContiguous = 1;
  cts.remoteAddress = reinterpret_cast<uint64_t>(rogue_->memory().address());
  cts.remoteLength = rogue_->memory().length();
  cts.rkey = rogue_->memory().rkey();
  cts.segmentSize = 4096;
  return cts;
}

void HostileWorld::rogueReplies(const wire::Cts& cts, std::span<const uint8_t> layout) {
  rogueSends(message(wire::Kind::kCts).add(cts).add(layout));
}

}  // namespace ibdt::messaging::testing
