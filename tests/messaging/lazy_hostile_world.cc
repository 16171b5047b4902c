#include "messaging/lazy_hostile_world.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>

#include "base/backoff.h"
#include "support/thread_ranks.h"

namespace ibdt::messaging::testing {
namespace {

using namespace std::chrono_literals;

constexpr auto kWait = 60s;
constexpr int64_t kConnectTimeoutMs = 5000;  // a rank that never answers sensibly fails after this
constexpr int64_t kEagerBytes = 1000;
constexpr int64_t kLargeBytes = 64 << 10;  // above the pipeline limit: rendezvous

datatype::Datatype bytes() { return datatype::Datatype::of<uint8_t>(); }

}  // namespace

struct Traffic::Message {
  Message(int64_t size, uint32_t seed) : bytes(pattern(static_cast<size_t>(size), seed)), got(bytes.size()) {}
  std::vector<uint8_t> bytes;
  Guarded got;
  Context* sender = nullptr;
  Context* receiver = nullptr;
  int dest = 0, source = 0, tag = 0;
  Request send, recv;
};

Traffic::Traffic(Context& victim, Context& honest, int honestRank) {
  for (int i = 0; i < 4; ++i) {
    bool fromVictim = i < 2;
    auto message =
        std::make_unique<Message>(i % 2 == 0 ? kEagerBytes : kLargeBytes, static_cast<uint32_t>(honestRank * 10 + i));
    message->sender = fromVictim ? &victim : &honest;
    message->receiver = fromVictim ? &honest : &victim;
    message->dest = fromVictim ? honestRank : kTarget;
    message->source = fromVictim ? kTarget : honestRank;
    message->tag = 20 + i;
    messages_.push_back(std::move(message));
  }
}

Traffic::~Traffic() = default;

void Traffic::send() {
  for (auto& m : messages_) {
    auto request = m->sender->isend(m->bytes.data(), static_cast<int64_t>(m->bytes.size()), bytes(), m->dest, m->tag);
    ASSERT_TRUE(request.isOk()) << request.status().toString();
    m->send = std::move(request).value();
  }
}

void Traffic::receive() {
  for (auto& m : messages_) {
    auto request = m->receiver->irecv(m->got.data(), static_cast<int64_t>(m->got.size()), bytes(), m->source, m->tag);
    ASSERT_TRUE(request.isOk()) << request.status().toString();
    m->recv = std::move(request).value();
  }
}

void Traffic::finish(const std::function<void()>& pump) {
  auto deadline = Deadline::after(kWait);
  for (auto& m : messages_) {
    for (Request* request : {&m->send, &m->recv}) {
      Context& context = request == &m->send ? *m->sender : *m->receiver;
      Backoff backoff;
      for (;;) {
        auto done = context.test(*request);
        ASSERT_TRUE(done.isOk()) << "tag " << m->tag << ": " << done.status().toString();
        if (*done) break;
        ASSERT_FALSE(deadline.expired()) << "tag " << m->tag << " did not complete";
        pump();
        backoff.pause();
      }
      Status status = context.wait(*request);
      ASSERT_TRUE(status.isOk()) << "tag " << m->tag << ": " << status.toString();
    }
    EXPECT_TRUE(std::equal(m->bytes.begin(), m->bytes.end(), m->got.data())) << "tag " << m->tag << " corrupted";
    EXPECT_EQ(m->got.firstDamagedGuard(), -1) << "tag " << m->tag << " wrote outside its buffer";
  }
}

void LazyHostileWorld::SetUp() {
  options_.eagerLimit = 4096;
  options_.eagerCredits = 8;
  options_.pipelineLimit = 16384;
  options_.connect = Connect::kLazy;
  options_.connectTimeoutMs = kConnectTimeoutMs;
  static std::atomic<int> worlds{0};
  std::string tag = "hostile-connect-" + std::to_string(getpid()) + "-" + std::to_string(worlds++);
  for (int rank = 0; rank < kLazyRanks; ++rank) {
    auto domain = fabric::openDomain("shm", {tag, ""});
    ASSERT_TRUE(domain.isOk()) << domain.status().toString();
    domains_.push_back(std::move(domain).value());
  }
  // Creation is collective: one thread per rank.
  ThreadExchange exchange(kLazyRanks);
  contexts_.resize(kLazyRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kLazyRanks; ++rank) {
    threads.emplace_back([&, rank] {
      auto allgather = [&exchange, rank](std::span<const uint8_t> value) { return exchange.allgather(rank, value); };
      fabric::Domain& domain = *domains_[static_cast<size_t>(rank)];
      if (rank == kRogue) {
        auto rogue = RoguePeer::createLazy(domain, rank, kLazyRanks, allgather, options_);
        ASSERT_TRUE(rogue.isOk()) << rogue.status().toString();
        rogue_ = std::move(rogue).value();
        return;
      }
      auto context = Context::create(domain, Bootstrap{rank, kLazyRanks, allgather}, options_);
      ASSERT_TRUE(context.isOk()) << context.status().toString();
      contexts_[static_cast<size_t>(rank)] = std::move(context).value();
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(rogue_ && contexts_[kEarly] && contexts_[kTarget] && contexts_[kLate]);
  rogue_->pump = [this] { pumpAll(); };
  auto address = rogue_->endpointAddress(kTarget);
  ASSERT_TRUE(address.isOk()) << address.status().toString();
  rogueAddress_ = std::move(address).value();
}

void LazyHostileWorld::TearDown() {
  if (!rogue_ || !contexts_[kEarly] || !contexts_[kTarget] || !contexts_[kLate]) return;  // SetUp said why
  // The victim handles what the rogue sent before the late rank asks;
  // besides, datagrams are handled in order, so once the late rank is
  // connected every datagram the rogue sent before it was handled.
  for (int round = 0; round < 4; ++round) EXPECT_TRUE(target().progress().isOk());
  if (!late_) startLate();
  late_->receive();
  late_->finish([this] { pumpAll(); });
  EXPECT_EQ(target().counters().connections, expectedConnections_ + 1)
      << "the victim connected for a datagram it should have dropped";
  std::vector<uint8_t> answer;
  auto answered = rogue_->listener().receive(answer);
  ASSERT_TRUE(answered.isOk()) << answered.status().toString();
  if (!rogueAnswered_) {
    EXPECT_FALSE(*answered) << "the victim answered a datagram it should have dropped";
  }
  if (!rogueFailed_) {
    // A receive from a failed rank is refused at once.
    uint8_t byte = 0;
    auto probe = target().irecv(&byte, 1, bytes(), kRogue, 99);
    ASSERT_TRUE(probe.isOk()) << "the victim failed the rogue: " << probe.status().toString();
    EXPECT_TRUE(target().cancel(*probe).isOk());
    EXPECT_EQ(target().wait(*probe).code(), Code::kCancelled);
  }
  closeAll();
}

void LazyHostileWorld::pumpAll() {
  for (auto& context : contexts_) {
    if (context) (void)context->progress();
  }
}

void LazyHostileWorld::toTarget(std::span<const uint8_t> bytes, bool sealed) {
  Backoff backoff;
  for (auto deadline = Deadline::after(kWait);;) {
    Status sent = sealed ? rogue_->sendDatagram(kTarget, bytes) : rogue_->sendRawDatagram(kTarget, bytes);
    if (sent.isOk()) return;
    ASSERT_EQ(sent.code(), Code::kAgain) << sent.toString();
    ASSERT_FALSE(deadline.expired()) << "the victim's inbox stayed full";
    pumpAll();
    backoff.pause();
  }
}

void LazyHostileWorld::startEarlyInFlight() {
  early_ = std::make_unique<Traffic>(target(), early(), kEarly);
  early_->send();
  Backoff backoff;
  for (auto deadline = Deadline::after(kWait);
       target().counters().unexpected < 2 || early().counters().unexpected < 2;) {
    ASSERT_FALSE(deadline.expired()) << "the early rank's messages did not arrive";
    pumpAll();
    backoff.pause();
  }
  expectedConnections_ = 1;
}

void LazyHostileWorld::finishEarly() {
  early_->receive();
  early_->finish([this] { pumpAll(); });
}

void LazyHostileWorld::startLate() {
  late_ = std::make_unique<Traffic>(target(), late(), kLate);
  late_->send();
}

std::vector<std::vector<uint8_t>> LazyHostileWorld::badAddresses() const {
  std::vector<uint8_t> shortened(rogueAddress_.begin(), rogueAddress_.end() - 1);
  std::vector<uint8_t> longer = rogueAddress_;
  longer.push_back(0);
  std::vector<uint8_t> flipped = rogueAddress_;
  for (size_t i = 0; i < 4 && i < flipped.size(); ++i) flipped[i] ^= 0xff;
  size_t most = rogue_->listener().maxDatagram() - connection::encode({connection::Kind::kReady}).size();
  return {{}, {0x42}, shortened, longer, flipped, std::vector<uint8_t>(most, 0xff)};
}

void LazyHostileWorld::closeAll() {
  if (rogueLinked_) {
    EXPECT_TRUE(rogue_->send(kTarget, message(wire::Kind::kClose)).isOk());
  }
  Status closed[kLazyRanks];
  std::vector<std::thread> threads;
  for (int rank : {kEarly, kTarget, kLate}) {
    threads.emplace_back([&, rank] { closed[rank] = contexts_[static_cast<size_t>(rank)]->close(Deadline::after(kWait)); });
  }
  for (auto& thread : threads) thread.join();
  for (int rank : {kEarly, kTarget, kLate}) EXPECT_TRUE(closed[rank].isOk()) << closed[rank].toString();
}

}  // namespace ibdt::messaging::testing
