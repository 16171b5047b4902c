// tests/fabric/fabric_harness.h — helpers for the provider test suite:
// which providers to test, one-process "nodes" (domain + queues), waiting
// for completions, byte patterns, and forked multi-process runs whose ranks
// swap endpoint addresses over socketpairs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ibdt/fabric.h"
#include "support/pattern.h"

namespace ibdt::fabric::testing {

// Providers available here; IBDT_PROVIDER (when set and not "auto") limits it to one.
std::vector<std::string> providersUnderTest();

// A domain with one send and one receive completion queue.
struct Node {
  std::unique_ptr<Domain> domain;
  std::unique_ptr<CompletionQueue> sendQueue;
  std::unique_ptr<CompletionQueue> recvQueue;

  static Node open(const std::string& provider, uint32_t queueDepth = 4096);
  std::unique_ptr<Endpoint> endpoint(const EndpointOptions& options = {});
  std::unique_ptr<MemoryRegion> registered(std::vector<uint8_t>& buffer,
                                           uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead);
  std::unique_ptr<MemoryRegion> allocated(size_t length, uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead);
};

// Polls (sleeping in wait()) until one completion arrives; fails the test
// and returns a kFatal completion after 30 s.
Completion nextCompletion(CompletionQueue& queue);
// As nextCompletion, expecting success; returns it.
Completion expectSuccess(CompletionQueue& queue);
// True when no completion arrives within `millis` (polling).
bool staysEmpty(CompletionQueue& queue, int millis);

// Deterministic content: byte i of buffer `seed` (tests/support/pattern.h).
using ibdt::test::fillPattern;
using ibdt::test::patternByte;
// Index of the first byte that differs from the pattern, or -1.
int64_t firstMismatch(const uint8_t* data, size_t length, uint32_t seed);

// Splits [data, data+length) of `region` into `count` scatter/gather
// entries of similar size (fewer when length < count; none for 0 bytes).
std::vector<Sge> splitSges(const MemoryRegion& region, const uint8_t* data, size_t length, uint32_t count);

// Posts a receive of `sges` with `id`.
void postReceive(Endpoint& endpoint, uint64_t id, const std::vector<Sge>& sges);
// Posts one send request (signalled) and returns the post status.
Status postOne(Endpoint& endpoint, Opcode opcode, uint64_t id, const std::vector<Sge>& sges,
               uint64_t remoteAddress = 0, uint64_t rkey = 0, uint32_t immData = 0, uint32_t flags = kSignaled);

// Connects two endpoints in this process.
void connectPair(Endpoint& a, Endpoint& b);

// The wire bytes of a remote key, to hand to a peer.
std::vector<uint8_t> keyBytes(const RemoteKey& key);

// The peers of a forked run talk over socketpairs.
class Mesh {
 public:
  Mesh(int rank, int size, std::vector<int> sockets) : rank_(rank), size_(size), sockets_(std::move(sockets)) {}
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Sends `bytes` to `peer` and returns what `peer` sent us.
  std::vector<uint8_t> swap(int peer, const std::vector<uint8_t>& bytes);
  void barrier();

 private:
  int rank_;
  int size_;
  std::vector<int> sockets_;  // by peer rank; -1 for ourselves
};

// A 64-bit value as the bytes a Mesh carries, and back (0 for anything
// but 8 bytes).
std::vector<uint8_t> word(uint64_t value);
uint64_t unword(const std::vector<uint8_t>& bytes);

// This rank's node of a forked pair and one endpoint connected to the other
// rank's; failures are recorded on the test and the endpoint is null.
struct ConnectedNode {
  Node node;
  std::unique_ptr<Endpoint> endpoint;
};
ConnectedNode connectToPeer(Mesh& mesh, const std::string& provider);

// Forks `size` processes running body(mesh); each exits with status 0 when
// its part of the test passed. Returns the exit statuses (as from waitpid).
// `beforeWait` runs in the parent after forking (e.g. to kill a rank).
std::vector<int> runForked(int size, const std::function<void(Mesh&)>& body,
                           const std::function<void(const std::vector<pid_t>&)>& beforeWait = {});
// Asserts every rank exited with status 0.
void expectAllPassed(const std::vector<int>& statuses);

// Names of files in /dev/shm that contain "ibdt".
std::vector<std::string> ibdtShmFiles();

}  // namespace ibdt::fabric::testing
