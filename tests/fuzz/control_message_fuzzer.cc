// tests/fuzz/control_message_fuzzer.cc — control messages (wire.h) as a
// hostile rank may send them into a real Context's eager receive buffers.
//
// Each input builds a two-rank job over the shm provider: a victim Context
// with a receive posted from the rogue (tests/messaging/rogue_peer.h) and a
// rendezvous send started to it, whose RTS the rogue has read. The input is
// then up to kMaxMessages records, each [flags][length: 2 bytes LE][bytes],
// sent as SENDs. Flags let the fuzzer get past checks it cannot guess:
//   bit 0: bytes 8..11 become the victim's sender transfer id (Cts, Fin, Release);
//   bit 1: a Cts's remote address, length and rkey name the rogue's memory;
//   bit 2: an Envelope at byte 8 gets the honest signature of its byte count.
// Invariants: the victim's progress() never fails (a bad peer fails that
// peer's requests, never the Context); no request fails with kInternal or
// an empty message; nothing lands outside the receive buffer, the send
// buffer is untouched, and a completed receive names the rogue and fits.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "ibdt/datatype.h"
#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "messaging/rogue_peer.h"
#include "support/thread_exchange.h"
#include "transport/messaging/wire.h"

namespace {

using namespace ibdt;
using namespace ibdt::messaging;
using ibdt::messaging::testing::RoguePeer;
using ibdt::messaging::testing::ThreadExchange;

constexpr int kVictim = 0, kRogue = 1;
constexpr int32_t kTag = 7;
constexpr size_t kMaxMessages = 6;  // below the victim's 8 eager credits: a rogue send never waits for a repost
constexpr int64_t kRecvBytes = 8192;
constexpr int64_t kSendBytes = 64 << 10;  // above the pipeline limit: rendezvous
constexpr size_t kGuard = 256;
constexpr uint8_t kGuardByte = 0xA5;

Options victimOptions() {
  Options options;
  options.eagerLimit = 4096;
  options.eagerCredits = 8;
  options.pipelineLimit = 16384;
  options.connect = Connect::kEager;
  return options;
}

struct Job {
  std::vector<std::unique_ptr<fabric::Domain>> domains;
  std::unique_ptr<Context> victim;
  std::unique_ptr<RoguePeer> rogue;
};

// Creation is collective: one thread per rank, as in the hostile suites.
std::unique_ptr<Job> createJob() {
  static int jobs = 0;
  auto job = std::make_unique<Job>();
  std::string tag = "fuzz-control-" + std::to_string(getpid()) + "-" + std::to_string(jobs++);
  for (int rank = 0; rank < 2; ++rank) {
    auto domain = fabric::openDomain("shm", {tag, ""});
    IBDT_FUZZ_CHECK(domain.isOk(), "shm domain: %s", domain.status().toString().c_str());
    job->domains.push_back(std::move(domain).value());
  }
  ThreadExchange exchange(2);
  Status victimStatus, rogueStatus;
  std::thread rogueThread([&] {
    auto allgather = [&](std::span<const uint8_t> value) { return exchange.allgather(kRogue, value); };
    auto rogue = RoguePeer::create(*job->domains[kRogue], kRogue, 2, allgather, victimOptions());
    rogueStatus = rogue.status();
    if (rogue.isOk()) job->rogue = std::move(rogue).value();
  });
  auto allgather = [&](std::span<const uint8_t> value) { return exchange.allgather(kVictim, value); };
  auto victim = Context::create(*job->domains[kVictim], Bootstrap{kVictim, 2, allgather}, victimOptions());
  rogueThread.join();
  IBDT_FUZZ_CHECK(victim.isOk() && rogueStatus.isOk(), "job: %s %s", victim.status().toString().c_str(),
                  rogueStatus.toString().c_str());
  job->victim = std::move(victim).value();
  Context* context = job->victim.get();
  job->rogue->pump = [context] { (void)context->progress(); };
  return job;
}

template <typename T>
void patch(std::vector<uint8_t>& bytes, size_t offset, const T& value) {
  if (bytes.size() >= offset + sizeof(T)) std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// Applies the record's flags (see the file comment).
void applyFlags(std::vector<uint8_t>& bytes, uint8_t flags, uint32_t senderTransfer, fabric::MemoryRegion& memory) {
  constexpr size_t kBody = sizeof(wire::Header);
  if (flags & 1) patch(bytes, kBody, senderTransfer);
  if ((flags & 2) && bytes.size() >= kBody + sizeof(wire::Cts)) {
    patch(bytes, kBody + offsetof(wire::Cts, remoteAddress), reinterpret_cast<uint64_t>(memory.address()));
    patch(bytes, kBody + offsetof(wire::Cts, remoteLength), static_cast<uint64_t>(memory.length()));
    patch(bytes, kBody + offsetof(wire::Cts, rkey), memory.rkey());
  }
  if ((flags & 4) && bytes.size() >= kBody + sizeof(wire::Envelope)) {
    wire::Envelope envelope;
    std::memcpy(&envelope, bytes.data() + kBody, sizeof envelope);
    auto signature = datatype::signature(datatype::Datatype::of<uint8_t>(), std::clamp<int64_t>(envelope.bytes, 0, 1 << 20));
    if (signature.isOk()) {
      envelope.signatureHash = signature->hash;
      envelope.signatureElements = signature->elements;
      std::memcpy(bytes.data() + kBody, &envelope, sizeof envelope);
    }
  }
}

// Whether `request` completed successfully; a failure must say why.
bool completedOk(Context& victim, Request& request, const char* what, RecvInfo* info) {
  auto done = victim.test(request);
  IBDT_FUZZ_CHECK(done.isOk(), "test(%s): %s", what, done.status().toString().c_str());
  if (!*done) return false;
  Status status = victim.wait(request, info);  // complete: returns its outcome at once
  IBDT_FUZZ_CHECK(status.code() != Code::kInternal && (status.isOk() || !status.message().empty()),
                  "%s failed with %s", what, status.toString().c_str());
  return status.isOk();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto job = createJob();
  Context& victim = *job->victim;
  std::vector<uint8_t> received(kRecvBytes + 2 * kGuard, kGuardByte);
  std::vector<uint8_t> toSend(kSendBytes);
  for (size_t i = 0; i < toSend.size(); ++i) toSend[i] = static_cast<uint8_t>(i * 7 + 3);
  const std::vector<uint8_t> sendCopy = toSend;
  auto type = datatype::Datatype::of<uint8_t>();
  std::fill(received.begin() + kGuard, received.end() - kGuard, 0);
  auto recv = victim.irecv(received.data() + kGuard, kRecvBytes, type, kRogue, kTag);
  auto send = victim.isend(toSend.data(), kSendBytes, type, kRogue, kTag);
  IBDT_FUZZ_CHECK(recv.isOk() && send.isOk(), "posting failed");
  auto rts = job->rogue->receive(kVictim);
  IBDT_FUZZ_CHECK(rts.isOk(), "no RTS: %s", rts.status().toString().c_str());
  auto fields = wire::read<wire::Rts>(rts->bytes, sizeof(wire::Header) + sizeof(wire::Envelope));
  uint32_t senderTransfer = fields.isOk() ? fields->senderTransfer : 0;

  const size_t maxMessage = sizeof(wire::Header) + sizeof(wire::Envelope) + 4096;
  size_t at = 0;
  for (size_t sent = 0; sent < kMaxMessages && at + 3 <= size; ++sent) {
    uint8_t flags = data[at];
    size_t length = std::min<size_t>({size_t{data[at + 1]} | size_t{data[at + 2]} << 8, size - at - 3, maxMessage});
    std::vector<uint8_t> bytes(data + at + 3, data + at + 3 + length);
    at += 3 + length;
    applyFlags(bytes, flags, senderTransfer, job->rogue->memory());
    if (!job->rogue->send(kVictim, bytes).isOk()) break;  // the victim failed the rogue and closed its side
    for (int i = 0; i < 4; ++i) IBDT_FUZZ_CHECK(victim.progress().isOk(), "progress failed after message %zu", sent);
  }
  for (int i = 0; i < 64; ++i) IBDT_FUZZ_CHECK(victim.progress().isOk(), "progress failed");

  RecvInfo info;
  (void)completedOk(victim, *send, "the send", nullptr);
  if (completedOk(victim, *recv, "the receive", &info)) {
    IBDT_FUZZ_CHECK(info.source == kRogue && info.bytes >= 0 && info.bytes <= kRecvBytes, "receive info %d %lld",
                    info.source, static_cast<long long>(info.bytes));
  }
  for (size_t i = 0; i < kGuard; ++i) {
    IBDT_FUZZ_CHECK(received[i] == kGuardByte && received[received.size() - 1 - i] == kGuardByte,
                    "written outside the receive buffer");
  }
  IBDT_FUZZ_CHECK(toSend == sendCopy, "the send buffer changed");
  return 0;
}
