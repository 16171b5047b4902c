// ibdt-bench fabric — the fabric provider between two processes (the bench
// forks its peer): ping-pong latency of WRITE_WITH_IMM and SEND/RECV (half
// round trip), streamed one-sided write bandwidth, gather writes with 1, 4,
// 16 and max_sge entries, and chained lists of 128 small writes to distinct
// remote pages (the Multi-W pattern). Each row sits beside a plain memcpy
// of the same bytes measured in the same run and beside the provider's
// published cost model (caps().transfer), which the bench thereby validates.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/backoff.h"
#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "perf/benchmarks.h"
#include "perf/forked_ranks.h"

namespace ibdt::perf {
namespace {

using namespace ibdt::fabric;

constexpr size_t kMaxBytes = size_t{4} << 20;
constexpr int kRecvsPosted = 16;

struct FabricOptions {
  std::string provider = "shm";
};

// One side of the two-process run.
class Side {
 public:
  explicit Side(messaging::Bootstrap& bootstrap) : bootstrap_(bootstrap) {}

  Status open(const std::string& provider) {
    IBDT_ASSIGN_OR_RETURN(domain_, openDomain(provider, DomainOptions{"bench", ""}));
    IBDT_ASSIGN_OR_RETURN(sendQueue_, domain_->createCompletionQueue(4096));
    IBDT_ASSIGN_OR_RETURN(recvQueue_, domain_->createCompletionQueue(4096));
    EndpointOptions options;
    options.sendQueueDepth = 512;
    IBDT_ASSIGN_OR_RETURN(endpoint_, domain_->createEndpoint(*sendQueue_, *recvQueue_, options));
    user_.assign(kMaxBytes, 0);
    uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead;
    IBDT_ASSIGN_OR_RETURN(userRegion_, domain_->registerMemory(user_.data(), user_.size(), access));
    IBDT_ASSIGN_OR_RETURN(sharedRegion_, domain_->allocateMemory(kMaxBytes, access));
    scratch_.assign(kMaxBytes, 0);
    IBDT_ASSIGN_OR_RETURN(scratchRegion_, domain_->registerMemory(scratch_.data(), scratch_.size(), access));
    for (int i = 0; i < kRecvsPosted; ++i) IBDT_RETURN_IF_ERROR(postReceive());
    IBDT_ASSIGN_OR_RETURN(auto peerAddress, swap(endpoint_->address()));
    IBDT_RETURN_IF_ERROR(endpoint_->connect(peerAddress));
    IBDT_ASSIGN_OR_RETURN(peerUser_, swapKey(userRegion_->remoteKey()));
    IBDT_ASSIGN_OR_RETURN(peerShared_, swapKey(sharedRegion_->remoteKey()));
    return Status::ok();
  }

  const Caps& caps() const { return domain_->caps(); }
  bool initiator() const { return bootstrap_.rank == 0; }
  uint8_t* user() { return user_.data(); }
  uint8_t* shared() { return static_cast<uint8_t*>(sharedRegion_->address()); }
  uint8_t* scratch() { return scratch_.data(); }
  MemoryRegion& region(bool shared) { return shared ? *sharedRegion_ : *userRegion_; }
  const RemoteKey& peerKey(bool shared) const { return shared ? peerShared_ : peerUser_; }

  // Sends nothing of interest; just keeps both processes at the same case.
  Status sync() { return swap({1}).status(); }

  Status postReceive() {
    Sge sge{reinterpret_cast<uint64_t>(scratch_.data()), static_cast<uint32_t>(kMaxBytes), scratchRegion_->lkey()};
    RecvRequest request;
    request.sgList = &sge;
    request.numSge = 1;
    return endpoint_->postRecv(request);
  }

  Status post(const SendRequest& request) {
    for (;;) {
      Status status = endpoint_->postSend(request);
      if (status.code() != Code::kAgain) return status;
      IBDT_RETURN_IF_ERROR(reap(*sendQueue_, 1).status());
    }
  }

  // Polls `queue` (spin, then yield) until `count` completions arrived.
  Result<Completion> reap(CompletionQueue& queue, int count) {
    Completion completion;
    Backoff backoff;
    while (count > 0) {
      if (queue.poll(std::span(&completion, 1)) == 0) {
        backoff.pause();
        continue;
      }
      backoff.reset();
      if (completion.status != CompletionStatus::kSuccess) return completionError(completion, "bench peer");
      --count;
    }
    return completion;
  }
  CompletionQueue& sendQueue() { return *sendQueue_; }

  // Waits for one inbound message and re-posts its receive.
  Status receiveOne() {
    IBDT_RETURN_IF_ERROR(reap(*recvQueue_, 1).status());
    return postReceive();
  }

 private:
  // Gives the peer `bytes` and returns what it gave (two ranks: the
  // allgather's other entry).
  Result<std::vector<uint8_t>> swap(const std::vector<uint8_t>& bytes) {
    auto all = bootstrap_.allgather(bytes);
    if (!all.isOk()) return std::move(all).takeStatus().withContext("fabric bench: swapping with the peer process");
    return std::move((*all)[static_cast<size_t>(1 - bootstrap_.rank)]);
  }
  Result<RemoteKey> swapKey(const RemoteKey& key) {
    std::vector<uint8_t> bytes(RemoteKey::kWireSize);
    key.serialize(std::span<uint8_t, RemoteKey::kWireSize>(bytes.data(), RemoteKey::kWireSize));
    IBDT_ASSIGN_OR_RETURN(auto theirs, swap(bytes));
    return RemoteKey::parse(theirs);
  }

  messaging::Bootstrap& bootstrap_;
  std::unique_ptr<Domain> domain_;
  std::unique_ptr<CompletionQueue> sendQueue_, recvQueue_;
  std::unique_ptr<Endpoint> endpoint_;
  std::vector<uint8_t> user_, scratch_;
  std::unique_ptr<MemoryRegion> userRegion_, sharedRegion_, scratchRegion_;
  RemoteKey peerUser_, peerShared_;
};

SendRequest makeRequest(Opcode opcode, const Sge* sges, uint32_t count, const RemoteKey& key, uint64_t offset) {
  SendRequest request;
  request.opcode = opcode;
  request.sgList = sges;
  request.numSge = count;
  request.remoteAddress = key.address + offset;
  request.rkey = key.rkey;
  return request;
}

// Transfers are checked, not just timed: the initiator's bytes follow this
// pattern and the target compares what arrived.
uint8_t patternByte(size_t index, size_t seed) { return static_cast<uint8_t>(index * 7 + seed * 13 + 1); }

void fillPattern(uint8_t* data, size_t length, size_t seed) {
  for (size_t i = 0; i < length; ++i) data[i] = patternByte(i, seed);
}

Status checkPattern(const uint8_t* data, size_t length, size_t seed, const std::string& what) {
  for (size_t i = 0; i < length; ++i) {
    if (data[i] != patternByte(i, seed)) {
      return makeError(Code::kInternal, "fabric bench: ", what, " of ", length, " bytes: byte ", i, " is wrong");
    }
  }
  return Status::ok();
}

double modelMicros(const Caps& caps, uint32_t requests, uint32_t sges, uint64_t remotePages, uint64_t bytes,
                   bool sharedTarget) {
  const TransferCost& cost = caps.transfer;
  if (sharedTarget) return (cost.allocatedPerRequestNs * requests + bytes / cost.allocatedBytesPerNs) / 1000.0;
  double ns = cost.perRequestNs * requests + cost.perSgeNs * sges + bytes / cost.bytesPerNs;
  ns += cost.perRemotePageNs * remotePages;
  return ns / 1000.0;
}

double memcpyMicros(const CommonOptions& common, size_t bytes, int inner) {
  static std::vector<uint8_t> from(kMaxBytes, 1), to(kMaxBytes, 0);
  auto samples = measure(common.warmup, common.reps, inner, [&] { std::memcpy(to.data(), from.data(), bytes); });
  return summarize(samples).median * 1e6;
}

int innerFor(size_t bytes, bool quick) {
  int inner = bytes <= 4096 ? 2000 : bytes <= 65536 ? 200 : bytes <= (1u << 20) ? 20 : 5;
  return quick ? std::max(1, inner / 20) : inner;
}

// Both processes run this schedule; the initiator times and reports.
Status runSchedule(Side& side, const CommonOptions& common, Report& report) {
  const Caps& caps = side.caps();
  std::vector<size_t> sizes = common.quick ? std::vector<size_t>{8, 4096, 1u << 20}
                                           : std::vector<size_t>{8, 64, 512, 4096, 32768, 131072, 1u << 20, 4u << 20};
  auto row = [&](const std::string& name, size_t bytes, const Summary& s, double memcpyUs, double modelUs) {
    report.add({{"case", name}, {"bytes", bytes}, {"median_us", s.median * 1e6}, {"min_us", s.min * 1e6},
                {"max_us", s.max * 1e6}, {"MB/s", s.median > 0 ? bytes / s.median / 1e6 : 0.0},
                {"memcpy_us", memcpyUs}, {"model_us", modelUs}});
  };

  // Ping-pong: half round trip of WRITE_WITH_IMM or SEND, user or shared target.
  struct PingPong {
    const char* name;
    Opcode opcode;
    bool shared;
  };
  for (PingPong kind : {PingPong{"pingpong write-imm, user memory", Opcode::kWriteWithImm, false},
                        PingPong{"pingpong write-imm, shm memory", Opcode::kWriteWithImm, true},
                        PingPong{"pingpong send/recv", Opcode::kSend, false}}) {
    for (size_t bytes : sizes) {
      uint8_t* data = kind.shared ? side.shared() : side.user();
      // The responder starts from zeros and only ever bounces back what it got.
      if (side.initiator()) {
        fillPattern(data, bytes, bytes);
      } else {
        std::memset(data, 0, bytes);
        std::memset(side.scratch(), 0, bytes);
      }
      IBDT_RETURN_IF_ERROR(side.sync());
      Sge sge{reinterpret_cast<uint64_t>(data), static_cast<uint32_t>(bytes), side.region(kind.shared).lkey()};
      SendRequest request = makeRequest(kind.opcode, &sge, 1, side.peerKey(kind.shared), 0);
      Status failure;
      auto once = [&] {
        if (!failure.isOk()) return;
        if (side.initiator()) {
          failure = side.post(request);
          if (failure.isOk()) failure = side.reap(side.sendQueue(), 1).status();
          if (failure.isOk()) failure = side.receiveOne();
        } else {
          failure = side.receiveOne();
          if (failure.isOk()) failure = side.post(request);
          if (failure.isOk()) failure = side.reap(side.sendQueue(), 1).status();
        }
      };
      int inner = innerFor(bytes, common.quick) / 4 + 1;
      auto samples = measure(common.warmup, common.reps, inner, once);
      IBDT_RETURN_IF_ERROR(failure);
      if (!side.initiator()) {
        const uint8_t* arrived = kind.opcode == Opcode::kSend ? side.scratch() : data;
        IBDT_RETURN_IF_ERROR(checkPattern(arrived, bytes, bytes, kind.name));
      } else {
        for (double& s : samples) s /= 2;  // half round trip
        row(kind.name, bytes, summarize(samples), memcpyMicros(common, bytes, inner),
            modelMicros(caps, 1, 1, (bytes + caps.pageSize - 1) / caps.pageSize, bytes, kind.shared));
      }
    }
  }

  // Streamed writes: a window of signalled writes kept in flight.
  for (bool shared : {false, true}) {
    for (size_t bytes : sizes) {
      if (side.initiator()) {
        fillPattern(side.user(), bytes, bytes + 1);
      } else {
        std::memset(shared ? side.shared() : side.user(), 0, bytes);
      }
      IBDT_RETURN_IF_ERROR(side.sync());
      if (!side.initiator()) {
        IBDT_RETURN_IF_ERROR(side.sync());  // the initiator has finished this case
        IBDT_RETURN_IF_ERROR(checkPattern(shared ? side.shared() : side.user(), bytes, bytes + 1, "streamed write"));
        continue;
      }
      Sge sge{reinterpret_cast<uint64_t>(side.user()), static_cast<uint32_t>(bytes), side.region(false).lkey()};
      SendRequest request = makeRequest(Opcode::kWrite, &sge, 1, side.peerKey(shared), 0);
      Status failure;
      auto once = [&] {
        if (failure.isOk()) failure = side.post(request);
        if (failure.isOk()) failure = side.reap(side.sendQueue(), 1).status();
      };
      int inner = innerFor(bytes, common.quick);
      auto samples = measure(common.warmup, common.reps, inner, once);
      IBDT_RETURN_IF_ERROR(failure);
      row(shared ? "write, shm memory" : "write, user memory", bytes, summarize(samples),
          memcpyMicros(common, bytes, inner),
          modelMicros(caps, 1, 1, (bytes + caps.pageSize - 1) / caps.pageSize, bytes, shared));
      IBDT_RETURN_IF_ERROR(side.sync());
    }
  }

  // Gather writes: 256 KiB from 1, 4, 16, max_sge local pieces on distinct pages.
  constexpr size_t kGatherBytes = 256 * 1024;
  for (uint32_t count : {1u, 4u, 16u, caps.maxSendSge}) {
    IBDT_RETURN_IF_ERROR(side.sync());
    if (!side.initiator()) continue;
    std::vector<Sge> sges(count);
    size_t piece = kGatherBytes / count;
    size_t stride = (piece + caps.pageSize) / caps.pageSize * caps.pageSize;
    for (uint32_t i = 0; i < count; ++i) {
      sges[i] = Sge{reinterpret_cast<uint64_t>(side.user() + i * stride), static_cast<uint32_t>(piece),
                    side.region(false).lkey()};
    }
    SendRequest request = makeRequest(Opcode::kWrite, sges.data(), count, side.peerKey(false), 0);
    Status failure;
    auto once = [&] {
      if (failure.isOk()) failure = side.post(request);
      if (failure.isOk()) failure = side.reap(side.sendQueue(), 1).status();
    };
    int inner = innerFor(kGatherBytes, common.quick);
    auto samples = measure(common.warmup, common.reps, inner, once);
    IBDT_RETURN_IF_ERROR(failure);
    row(strCat("write gather ", count, " sge"), piece * count, summarize(samples),
        memcpyMicros(common, piece * count, inner),
        modelMicros(caps, 1, count, kGatherBytes / caps.pageSize, piece * count, false));
  }

  // Multi-W: a chained list of 128 writes, each to its own remote page.
  constexpr uint32_t kWrites = 128;
  for (size_t block : {size_t{64}, size_t{1024}, size_t{4096}}) {
    IBDT_RETURN_IF_ERROR(side.sync());
    if (!side.initiator()) continue;
    size_t stride = std::max(block, caps.pageSize);
    std::vector<Sge> sges(kWrites);
    std::vector<SendRequest> chain(kWrites);
    for (uint32_t i = 0; i < kWrites; ++i) {
      sges[i] = Sge{reinterpret_cast<uint64_t>(side.user() + i * block), static_cast<uint32_t>(block),
                    side.region(false).lkey()};
      chain[i] = makeRequest(Opcode::kWrite, &sges[i], 1, side.peerKey(false), i * stride);
      chain[i].flags = i + 1 == kWrites ? uint32_t{kSignaled} : 0u;
      chain[i].next = i + 1 == kWrites ? nullptr : &chain[i + 1];
    }
    Status failure;
    auto once = [&] {
      if (failure.isOk()) failure = side.post(chain[0]);
      if (failure.isOk()) failure = side.reap(side.sendQueue(), 1).status();
    };
    int inner = common.quick ? 2 : 50;
    auto samples = measure(common.warmup, common.reps, inner, once);
    IBDT_RETURN_IF_ERROR(failure);
    row(strCat("multi-write 128 x ", block, " B, distinct pages"), block * kWrites, summarize(samples),
        memcpyMicros(common, block * kWrites, inner), modelMicros(caps, 1, kWrites, kWrites, block * kWrites, false));  // shm runs the chain as one call
  }
  return side.sync();
}

void runFabric(const CommonOptions& common, const FabricOptions& options) {
  Report report(strCat("fabric: ", options.provider, " provider between two processes"),
                {"case", "bytes", "median_us", "min_us", "max_us", "MB/s", "memcpy_us", "model_us"});
  bool ok = runForkedRanks("fabric", 2, [&](messaging::Bootstrap& bootstrap) {
    Side side(bootstrap);
    IBDT_RETURN_IF_ERROR(side.open(options.provider));
    return runSchedule(side, common, report);
  });
  if (!ok) return;
  report.note("reference", "Open MPI 4.1 on-node contiguous ping-pong on this machine: 0.9 us at 512 B, 160 us at 1 MiB");
  report.note("model_us", "caps().transfer prediction: perRequestNs + perSgeNs*sges + perRemotePageNs*pages + bytes/bytesPerNs");
  report.print(common);
}

}  // namespace

void addFabricBenchmark(CLI::App& app, const CommonOptions& common) {
  auto options = std::make_shared<FabricOptions>();
  CLI::App* command = app.add_subcommand("fabric", "fabric provider latency and bandwidth between two processes");
  command->add_option("--provider", options->provider, "provider to measure (shm, verbs)");
  command->callback([options, &common] { runFabric(common, *options); });
}

}  // namespace ibdt::perf
