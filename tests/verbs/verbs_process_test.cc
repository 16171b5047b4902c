// Processes that each open their own domain, exchange address blobs and
// remote keys over socketpairs (standing in for the bootstrap store), and
// talk over the device: ping-pong, a 4-process mesh, and a peer that dies.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <functional>
#include <type_traits>

#include "tests/verbs/verbs_test_util.h"

namespace ibdt::fabric::testing {
namespace {

// Moves all `bytes` through `fd` (write or read), or fails.
template <typename Io, typename Pointer>
bool transferAll(Io io, int fd, Pointer data, size_t bytes) {
  auto* p = reinterpret_cast<std::conditional_t<std::is_const_v<std::remove_pointer_t<Pointer>>, const uint8_t*, uint8_t*>>(data);
  while (bytes > 0) {
    ssize_t n = io(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}
bool writeAll(int fd, const void* data, size_t bytes) { return transferAll(::write, fd, data, bytes); }
bool readAll(int fd, void* data, size_t bytes) { return transferAll(::read, fd, data, bytes); }

// What one side tells the other: its endpoint address and a buffer's key.
struct Introduction {
  std::vector<uint8_t> address;
  RemoteKey key;
};

bool exchange(int fd, const Introduction& mine, Introduction& theirs) {
  uint32_t size = static_cast<uint32_t>(mine.address.size());
  if (!writeAll(fd, &size, sizeof(size)) || !writeAll(fd, mine.address.data(), size) ||
      !writeAll(fd, &mine.key, sizeof(mine.key))) {
    return false;
  }
  if (!readAll(fd, &size, sizeof(size)) || size > 4096) return false;
  theirs.address.resize(size);
  return readAll(fd, theirs.address.data(), size) && readAll(fd, &theirs.key, sizeof(theirs.key));
}

// Runs `body` in a child process; its return value is the exit status (0 = success).
pid_t spawn(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    int status = 1;
    try {
      status = body();
    } catch (...) {
      status = 3;
    }
    _exit(status);
  }
  return pid;
}

// Waits for a child, killing it after `limit` so a hang cannot stall the suite.
int reap(pid_t pid, std::chrono::seconds limit = std::chrono::seconds(90)) {
  Deadline deadline = Deadline::after(limit);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (deadline.expired()) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(10000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// One process's side of a connection: its own domain, queues and buffer.
struct Side {
  std::unique_ptr<Domain> domain;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::unique_ptr<MemoryRegion> buffer;
  std::string error;

  bool open(size_t bufferBytes) {
    auto opened = openVerbsDomain(DomainOptions{});
    if (!opened.isOk()) return fail(opened.status().toString());
    domain = std::move(opened).value();
    auto queue = domain->createCompletionQueue(1024);
    if (!queue.isOk()) return fail(queue.status().toString());
    cq = std::move(queue).value();
    auto region = domain->allocateMemory(bufferBytes, kLocalWrite | kRemoteWrite | kRemoteRead);
    if (!region.isOk()) return fail(region.status().toString());
    buffer = std::move(region).value();
    return true;
  }
  // Creates an endpoint and connects it through `fd`; returns the peer's key.
  bool connect(int fd, const std::string& label, RemoteKey& peerKey) {
    auto endpoint = domain->createEndpoint(*cq, *cq, EndpointOptions{});
    if (!endpoint.isOk()) return fail(endpoint.status().toString());
    (*endpoint)->setPeerLabel(label);
    Introduction theirs;
    if (!exchange(fd, {(*endpoint)->address(), buffer->remoteKey()}, theirs)) return fail("exchange failed");
    Status status = (*endpoint)->connect(theirs.address);
    if (!status.isOk()) return fail(status.toString());
    peerKey = theirs.key;
    endpoints.push_back(std::move(endpoint).value());
    return true;
  }
  bool fail(std::string why) {
    error = std::move(why);
    std::fprintf(stderr, "[pid %d] %s\n", getpid(), error.c_str());
    return false;
  }
  // Blocks (in wait()) for one completion.
  bool next(Completion& completion) {
    Deadline deadline = Deadline::after(std::chrono::seconds(60));
    while (!deadline.expired()) {
      if (cq->poll(std::span<Completion>(&completion, 1)) == 1) return true;
      Status status = cq->wait(Deadline::after(std::chrono::milliseconds(200)));
      if (status.isError() && status.code() != Code::kTimeout) return fail(status.toString());
    }
    return fail("no completion within 60 s");
  }
};

bool syncByte(int fd) {
  char byte = 'x';
  return writeAll(fd, &byte, 1) && readAll(fd, &byte, 1);
}

// Ping-pong: the initiator SENDs n bytes, the responder answers with an RDMA
// WRITE_WITH_IMM of the same bytes transformed; both check every byte.
int pingPongSide(int fd, bool initiator, int rounds) {
  Side side;
  constexpr size_t kBytes = 3000;
  if (!side.open(4 * kBytes)) return 10;
  RemoteKey peer;
  if (!side.connect(fd, initiator ? "responder" : "initiator", peer)) return 11;
  Endpoint& ep = *side.endpoints[0];
  uint8_t* base = bytesOf(*side.buffer);
  uint32_t lkey = side.buffer->lkey();
  // Pre-post the first receive before telling the peer to start.
  Sge inbox{reinterpret_cast<uint64_t>(base), kBytes, lkey};
  if (!ep.postRecv(RecvRequest{.id = 0, .sgList = initiator ? nullptr : &inbox, .numSge = initiator ? 0u : 1u}).isOk()) return 12;
  if (!syncByte(fd)) return 13;
  for (int round = 0; round < rounds; ++round) {
    Completion c;
    if (initiator) {
      fillPattern(base + kBytes, kBytes, uint32_t(round));
      Sge out{reinterpret_cast<uint64_t>(base + kBytes), kBytes, lkey};
      if (!ep.postSend(SendRequest{.id = uint64_t(round), .flags = 0, .sgList = &out, .numSge = 1}).isOk()) return 14;
      // The reply is written into our inbox (offset 0) with the round number as immediate.
      if (!side.next(c) || c.status != CompletionStatus::kSuccess || c.opcode != Opcode::kRecvWriteWithImm ||
          c.immData != uint32_t(round) || c.byteLength != kBytes) {
        return side.fail(strCat("round ", round, ": bad reply ", completionStatusCode(c))), 15;
      }
      for (size_t i = 0; i < kBytes; ++i) {
        if (base[i] != uint8_t(patternByte(i, uint32_t(round)) ^ 0xff)) return 16;
      }
      if (!ep.postRecv(RecvRequest{.id = uint64_t(round + 1)}).isOk()) return 17;
    } else {
      if (!side.next(c) || c.status != CompletionStatus::kSuccess || c.opcode != Opcode::kRecv ||
          c.byteLength != kBytes || c.id != uint64_t(round)) {
        return side.fail(strCat("round ", round, ": bad message ", completionStatusCode(c))), 18;
      }
      for (size_t i = 0; i < kBytes; ++i) {
        if (base[i] != patternByte(i, uint32_t(round))) return 19;
        base[2 * kBytes + i] = base[i] ^ 0xff;
      }
      if (!ep.postRecv(RecvRequest{.id = uint64_t(round + 1), .sgList = &inbox, .numSge = 1}).isOk()) return 20;
      Sge reply{reinterpret_cast<uint64_t>(base + 2 * kBytes), kBytes, lkey};
      if (!ep.postSend(SendRequest{.id = uint64_t(round), .opcode = Opcode::kWriteWithImm, .flags = 0, .sgList = &reply,
                                   .numSge = 1, .immData = uint32_t(round), .remoteAddress = peer.address,
                                   .rkey = peer.rkey})
               .isOk()) {
        return 21;
      }
    }
  }
  // Nobody destroys the endpoint before the peer has everything.
  return syncByte(fd) ? 0 : 22;
}

TEST(VerbsProcesses, TwoProcessPingPongChecksEveryByte) {
  {
    IBDT_OPEN_VERBS_OR_SKIP(probe);
  }
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  pid_t responder = spawn([&] { close(fds[0]); return pingPongSide(fds[1], false, 200); });
  pid_t initiator = spawn([&] { close(fds[1]); return pingPongSide(fds[0], true, 200); });
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(reap(initiator), 0);
  EXPECT_EQ(reap(responder), 0);
}

// Every process connects to every other and writes its rank's pattern into
// its slot of each peer's buffer with WRITE_WITH_IMM; each checks all slots.
int meshMember(int rank, int size, const std::vector<std::array<int, 2>>& links) {
  constexpr size_t kSlot = 10000;
  Side side;
  if (!side.open(2 * kSlot * size)) return 30;
  std::vector<int> fdOf(size, -1);
  for (int peer = 0, link = 0; peer < size; ++peer) {
    for (int other = peer + 1; other < size; ++other, ++link) {
      if (peer == rank) fdOf[other] = links[link][0];
      if (other == rank) fdOf[peer] = links[link][1];
    }
  }
  std::vector<RemoteKey> keys(size);
  std::vector<Endpoint*> endpointOf(size, nullptr);
  for (int peer = 0; peer < size; ++peer) {  // same order everywhere: no deadlock
    if (peer == rank) continue;
    if (!side.connect(fdOf[peer], strCat("rank ", peer), keys[peer])) return 31;
    endpointOf[peer] = side.endpoints.back().get();
    if (!endpointOf[peer]->postRecv(RecvRequest{.id = uint64_t(peer)}).isOk()) return 32;
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank && !syncByte(fdOf[peer])) return 33;
  }
  uint8_t* base = bytesOf(*side.buffer);
  uint8_t* outgoing = base + kSlot * size;
  fillPattern(outgoing, kSlot, uint32_t(100 + rank));
  Sge sge{reinterpret_cast<uint64_t>(outgoing), kSlot, side.buffer->lkey()};
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    SendRequest write{.id = uint64_t(1000 + peer), .opcode = Opcode::kWriteWithImm, .sgList = &sge, .numSge = 1,
                      .immData = uint32_t(rank), .remoteAddress = keys[peer].address + kSlot * rank,
                      .rkey = keys[peer].rkey};
    if (!endpointOf[peer]->postSend(write).isOk()) return 34;
  }
  int sends = 0, receives = 0;
  while (sends + receives < 2 * (size - 1)) {
    Completion c;
    if (!side.next(c) || c.status != CompletionStatus::kSuccess) return side.fail(completionStatusCode(c)), 35;
    if (c.opcode == Opcode::kRecvWriteWithImm) {
      ++receives;
      int from = int(c.immData);
      if (from == rank || from >= size || c.id != uint64_t(from) || c.endpointId != endpointOf[from]->id()) return 36;
      for (size_t i = 0; i < kSlot; ++i) {
        if (base[kSlot * from + i] != patternByte(i, uint32_t(100 + from))) return 37;
      }
    } else {
      ++sends;
    }
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank && !syncByte(fdOf[peer])) return 38;
  }
  return 0;
}

void runMesh(int size) {
  std::vector<std::array<int, 2>> links;
  for (int i = 0; i < size * (size - 1) / 2; ++i) {
    std::array<int, 2> fds{};
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds.data()), 0);
    links.push_back(fds);
  }
  std::vector<pid_t> children;
  for (int rank = 0; rank < size; ++rank) children.push_back(spawn([&, rank] { return meshMember(rank, size, links); }));
  for (auto& fds : links) {
    close(fds[0]);
    close(fds[1]);
  }
  for (int rank = 0; rank < size; ++rank) EXPECT_EQ(reap(children[rank]), 0) << "rank " << rank;
}

TEST(VerbsProcesses, TwoProcessMesh) {
  {
    IBDT_OPEN_VERBS_OR_SKIP(probe);
  }
  runMesh(2);
}

TEST(VerbsProcesses, FourProcessMesh) {
  {
    IBDT_OPEN_VERBS_OR_SKIP(probe);
  }
  runMesh(4);
}

// A peer that connects over fds[1], then kills itself (SIGKILL, no cleanup)
// when a byte arrives.
pid_t spawnVictim(const int fds[2]) {
  return spawn([fds] {
    close(fds[0]);
    Side side;
    RemoteKey key;
    if (!side.open(4096) || !side.connect(fds[1], "survivor", key)) return 40;
    char byte = 0;
    readAll(fds[1], &byte, 1);
    raise(SIGKILL);
    return 41;
  });
}

// Runs `survivor` (given its socket to a victim from spawnVictim()) in its own
// process, with short transport timeouts: 4.096 us * 2^12 = 17 ms per try, 2 retries.
void runAgainstVictim(const std::function<int(int fd)>& survivor) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  pid_t victim = spawnVictim(fds);
  close(fds[1]);
  pid_t child = spawn([&] {
    setenv("IBDT_VERBS_TIMEOUT", "12", 1);
    setenv("IBDT_VERBS_RETRY_COUNT", "2", 1);
    return survivor(fds[0]);
  });
  close(fds[0]);
  EXPECT_EQ(reap(child), 0);
  EXPECT_EQ(reap(victim), 128 + SIGKILL);
}

// The peer exits without a word after connecting: the survivor's requests
// fail with retry-exceeded within the configured time and never hang.
TEST(VerbsProcesses, KilledPeerFailsRequestsWithRetryExceeded) {
  {
    IBDT_OPEN_VERBS_OR_SKIP(probe);
  }
  runAgainstVictim([](int fd) {
    Side side;
    RemoteKey key;
    if (!side.open(4096) || !side.connect(fd, "victim", key)) return 50;
    Endpoint& ep = *side.endpoints[0];
    Sge sge{reinterpret_cast<uint64_t>(side.buffer->address()), 64, side.buffer->lkey()};
    SendRequest write{.id = 1, .opcode = Opcode::kWrite, .sgList = &sge, .numSge = 1, .remoteAddress = key.address,
                      .rkey = key.rkey};
    if (!ep.postSend(write).isOk()) return 51;
    Completion c;
    if (!side.next(c) || c.status != CompletionStatus::kSuccess) return 52;  // alive: works
    char byte = 'k';
    writeAll(fd, &byte, 1);
    readAll(fd, &byte, 1);  // EOF: the victim is dying (its QP may outlive its socket briefly)
    // Keep writing until the death shows; it must show as retry-exceeded.
    for (write.id = 2; write.id < 500; ++write.id) {
      if (!ep.postSend(write).isOk()) return 53;
      if (!side.next(c) || c.id != write.id) return 54;
      if (c.status != CompletionStatus::kSuccess) break;
      usleep(10000);
    }
    if (c.status != CompletionStatus::kRetryExceeded) {
      return side.fail(strCat("expected retry-exceeded, got id ", c.id, " ", completionStatusCode(c))), 55;
    }
    if (ep.state() != EndpointState::kError) return 56;
    return 0;
  });
}

// The peer dies while a SEND waits for it to post a receive (RNR retries).
TEST(VerbsProcesses, PeerKilledDuringReceiverNotReadyRetries) {
  {
    IBDT_OPEN_VERBS_OR_SKIP(probe);
  }
  runAgainstVictim([](int fd) {
    Side side;
    RemoteKey key;
    if (!side.open(65536) || !side.connect(fd, "victim", key)) return 50;
    Sge sge{reinterpret_cast<uint64_t>(side.buffer->address()), 4096, side.buffer->lkey()};
    if (!side.endpoints[0]->postSend(SendRequest{.id = 1, .sgList = &sge, .numSge = 1}).isOk()) return 51;
    usleep(200000);  // receiver-not-ready retries are under way
    char byte = 'k';
    writeAll(fd, &byte, 1);
    Completion c;
    if (!side.next(c)) return 52;
    if (c.id != 1 || c.status != CompletionStatus::kRetryExceeded) {
      return side.fail(strCat("expected retry-exceeded, got id ", c.id, " ", completionStatusCode(c))), 53;
    }
    return 0;
  });
}

}  // namespace
}  // namespace ibdt::fabric::testing
