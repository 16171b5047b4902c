#include "fabric_harness.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

namespace ibdt::fabric::testing {

std::vector<std::string> providersUnderTest() {
  const char* forced = std::getenv("IBDT_PROVIDER");
  std::vector<std::string> names;
  for (const ProviderInfo& info : probeProviders()) {
    if (!info.available) continue;
    if (forced != nullptr && std::strcmp(forced, "auto") != 0 && info.name != forced) continue;
    names.push_back(info.name);
  }
  return names;
}

Node Node::open(const std::string& provider, uint32_t queueDepth) {
  Node node;
  auto domain = openDomain(provider, DomainOptions{"fabric-test", ""});
  EXPECT_TRUE(domain.isOk()) << domain.status().toString();
  if (!domain.isOk()) return node;
  node.domain = std::move(domain).value();
  auto send = node.domain->createCompletionQueue(queueDepth);
  auto recv = node.domain->createCompletionQueue(queueDepth);
  EXPECT_TRUE(send.isOk() && recv.isOk());
  if (send.isOk()) node.sendQueue = std::move(send).value();
  if (recv.isOk()) node.recvQueue = std::move(recv).value();
  return node;
}

std::unique_ptr<Endpoint> Node::endpoint(const EndpointOptions& options) {
  auto endpoint = domain->createEndpoint(*sendQueue, *recvQueue, options);
  EXPECT_TRUE(endpoint.isOk()) << endpoint.status().toString();
  return endpoint.isOk() ? std::move(endpoint).value() : nullptr;
}

std::unique_ptr<MemoryRegion> Node::registered(std::vector<uint8_t>& buffer, uint32_t access) {
  auto region = domain->registerMemory(buffer.data(), buffer.size(), access);
  EXPECT_TRUE(region.isOk()) << region.status().toString();
  return region.isOk() ? std::move(region).value() : nullptr;
}

std::unique_ptr<MemoryRegion> Node::allocated(size_t length, uint32_t access) {
  auto region = domain->allocateMemory(length, access);
  EXPECT_TRUE(region.isOk()) << region.status().toString();
  return region.isOk() ? std::move(region).value() : nullptr;
}

Completion nextCompletion(CompletionQueue& queue) {
  Deadline deadline = Deadline::after(std::chrono::seconds(30));
  Completion completion;
  for (;;) {
    if (queue.poll(std::span(&completion, 1)) == 1) return completion;
    Status status = queue.wait(deadline);
    if (status.code() == Code::kTimeout) {
      ADD_FAILURE() << "no completion within 30 s";
      completion.status = CompletionStatus::kFatal;
      return completion;
    }
  }
}

Completion expectSuccess(CompletionQueue& queue) {
  Completion completion = nextCompletion(queue);
  EXPECT_EQ(completion.status, CompletionStatus::kSuccess)
      << completionError(completion, "peer").toString();
  return completion;
}

bool staysEmpty(CompletionQueue& queue, int millis) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(millis);
  Completion completion;
  while (std::chrono::steady_clock::now() < until) {
    if (queue.poll(std::span(&completion, 1)) == 1) {
      ADD_FAILURE() << "unexpected completion id " << completion.id << " status "
                    << completionStatusName(completion.status);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

int64_t firstMismatch(const uint8_t* data, size_t length, uint32_t seed) {
  for (size_t i = 0; i < length; ++i) {
    if (data[i] != patternByte(i, seed)) return static_cast<int64_t>(i);
  }
  return -1;
}

std::vector<Sge> splitSges(const MemoryRegion& region, const uint8_t* data, size_t length, uint32_t count) {
  std::vector<Sge> sges;
  size_t pieces = std::min<size_t>(count, length);
  size_t offset = 0;
  for (size_t i = 0; i < pieces; ++i) {
    size_t piece = length / pieces + (i < length % pieces ? 1 : 0);
    sges.push_back(Sge{reinterpret_cast<uint64_t>(data + offset), static_cast<uint32_t>(piece), region.lkey()});
    offset += piece;
  }
  return sges;
}

void postReceive(Endpoint& endpoint, uint64_t id, const std::vector<Sge>& sges) {
  RecvRequest request;
  request.id = id;
  request.sgList = sges.data();
  request.numSge = static_cast<uint32_t>(sges.size());
  Status status = endpoint.postRecv(request);
  EXPECT_TRUE(status.isOk()) << status.toString();
}

Status postOne(Endpoint& endpoint, Opcode opcode, uint64_t id, const std::vector<Sge>& sges, uint64_t remoteAddress,
               uint64_t rkey, uint32_t immData, uint32_t flags) {
  SendRequest request;
  request.id = id;
  request.opcode = opcode;
  request.flags = flags;
  request.sgList = sges.data();
  request.numSge = static_cast<uint32_t>(sges.size());
  request.remoteAddress = remoteAddress;
  request.rkey = rkey;
  request.immData = immData;
  return endpoint.postSend(request);
}

void connectPair(Endpoint& a, Endpoint& b) {
  std::vector<uint8_t> addressA = a.address();
  std::vector<uint8_t> addressB = b.address();
  ASSERT_TRUE(a.connect(addressB).isOk());
  ASSERT_TRUE(b.connect(addressA).isOk());
}

namespace {

bool writeAll(int fd, const void* data, size_t length) {
  auto* at = static_cast<const uint8_t*>(data);
  while (length > 0) {
    ssize_t done = write(fd, at, length);
    if (done <= 0) return false;
    at += done;
    length -= static_cast<size_t>(done);
  }
  return true;
}

bool readAll(int fd, void* data, size_t length) {
  auto* at = static_cast<uint8_t*>(data);
  while (length > 0) {
    ssize_t done = read(fd, at, length);
    if (done <= 0) return false;
    at += done;
    length -= static_cast<size_t>(done);
  }
  return true;
}

}  // namespace

std::vector<uint8_t> Mesh::swap(int peer, const std::vector<uint8_t>& bytes) {
  int fd = sockets_.at(static_cast<size_t>(peer));
  uint64_t length = bytes.size();
  std::vector<uint8_t> received;
  if (!writeAll(fd, &length, sizeof length) || !writeAll(fd, bytes.data(), bytes.size())) {
    ADD_FAILURE() << "rank " << rank_ << ": lost rank " << peer;
    return received;
  }
  if (!readAll(fd, &length, sizeof length)) {
    ADD_FAILURE() << "rank " << rank_ << ": lost rank " << peer;
    return received;
  }
  received.resize(length);
  if (!readAll(fd, received.data(), length)) ADD_FAILURE() << "rank " << rank_ << ": lost rank " << peer;
  return received;
}

void Mesh::barrier() {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) swap(peer, {1});
  }
}

std::vector<uint8_t> word(uint64_t value) {
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), &value, 8);
  return bytes;
}

uint64_t unword(const std::vector<uint8_t>& bytes) {
  uint64_t value = 0;
  if (bytes.size() == 8) std::memcpy(&value, bytes.data(), 8);
  return value;
}

ConnectedNode connectToPeer(Mesh& mesh, const std::string& provider) {
  ConnectedNode connected{Node::open(provider), nullptr};
  if (!connected.node.domain) return connected;
  auto endpoint = connected.node.endpoint();
  EXPECT_TRUE(endpoint);
  if (!endpoint) return connected;
  Status status = endpoint->connect(mesh.swap(1 - mesh.rank(), endpoint->address()));
  EXPECT_TRUE(status.isOk()) << status.toString();
  if (status.isOk()) connected.endpoint = std::move(endpoint);
  return connected;
}

std::vector<int> runForked(int size, const std::function<void(Mesh&)>& body,
                           const std::function<void(const std::vector<pid_t>&)>& beforeWait) {
  std::vector<std::vector<int>> sockets(size, std::vector<int>(size, -1));
  for (int i = 0; i < size; ++i) {
    for (int j = i + 1; j < size; ++j) {
      int pair[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        ADD_FAILURE() << "socketpair: " << std::strerror(errno);
        return {};
      }
      sockets[i][j] = pair[0];
      sockets[j][i] = pair[1];
    }
  }
  std::fflush(nullptr);
  std::vector<pid_t> children;
  for (int rank = 0; rank < size; ++rank) {
    pid_t child = fork();
    if (child == 0) {
      for (int i = 0; i < size; ++i) {
        for (int j = 0; j < size; ++j) {
          if (i != rank && sockets[i][j] >= 0) close(sockets[i][j]);
        }
      }
      Mesh mesh(rank, size, sockets[rank]);
      body(mesh);
      std::fflush(nullptr);
      _exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    children.push_back(child);
  }
  for (auto& row : sockets) {
    for (int fd : row) {
      if (fd >= 0) close(fd);
    }
  }
  if (beforeWait) beforeWait(children);
  // Bounded: a rank that hangs is killed after 90 s and reported.
  std::vector<int> statuses(children.size(), -1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  size_t left = children.size();
  while (left > 0) {
    for (size_t i = 0; i < children.size(); ++i) {
      if (statuses[i] != -1) continue;
      int status = 0;
      if (waitpid(children[i], &status, WNOHANG) == children[i]) {
        statuses[i] = status;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < children.size(); ++i) {
        if (statuses[i] == -1) {
          ADD_FAILURE() << "rank " << i << " hung; killing it";
          kill(children[i], SIGKILL);
        }
      }
      deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return statuses;
}

void expectAllPassed(const std::vector<int>& statuses) {
  for (size_t rank = 0; rank < statuses.size(); ++rank) {
    EXPECT_TRUE(WIFEXITED(statuses[rank]) && WEXITSTATUS(statuses[rank]) == 0)
        << "rank " << rank << " failed (wait status " << statuses[rank] << ")";
  }
}

std::vector<std::string> ibdtShmFiles() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    std::string name = entry.path().filename().string();
    if (name.find("ibdt") != std::string::npos) names.push_back(name);
  }
  return names;
}

std::vector<uint8_t> keyBytes(const RemoteKey& key) {
  std::vector<uint8_t> bytes(RemoteKey::kWireSize);
  key.serialize(std::span<uint8_t, RemoteKey::kWireSize>(bytes.data(), RemoteKey::kWireSize));
  return bytes;
}

}  // namespace ibdt::fabric::testing
