// tests/fuzz/store_client_fuzzer.cc — the client side of the Store
// (bootstrap/launcher_store.cc) reading arbitrary bytes from its server:
// a fake server answers the hello with the input and closes. Connecting
// and then a get must end within their deadlines with a result or an error
// of a known code, never crash; a placement the client accepts must be
// possible (rank < size, localRank < localSize, nodeId < numNodes).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "bootstrap/fd_io.h"
#include "bootstrap/launcher_store.h"
#include "bootstrap/store_wire.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/store_fuzz_common.h"

namespace ibdt::bootstrap::fuzz {
namespace {

using namespace std::chrono_literals;

bool knownCode(Code code) { return static_cast<uint8_t>(code) <= static_cast<uint8_t>(Code::kInternal); }

// Accepts one connection per input, reads its hello frame, sends the input.
class FakeServer {
 public:
  FakeServer() {
    listenFd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::string path = directory_.path();
    path.copy(address.sun_path, sizeof(address.sun_path) - 1);
    if (::bind(listenFd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(listenFd_, 4) != 0) {
      ::abort();
    }
  }
  ~FakeServer() { ::close(listenFd_); }
  std::string path() const { return directory_.path(); }

  // Serves `answer` to the next connection, on a thread.
  std::thread serve(std::string answer) {
    return std::thread([this, answer = std::move(answer)] {
      int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      char header[4];
      if (readExact(fd, header, 4, Deadline::after(10s), "fake server").isOk()) {
        std::string hello(wire::frameLength(header) > 4096 ? 0 : wire::frameLength(header), '\0');
        (void)readExact(fd, hello.data(), hello.size(), Deadline::after(10s), "fake server");
        (void)writeAll(fd, answer, Deadline::after(10s), "fake server");
      }
      ::close(fd);
    });
  }

 private:
  SocketDirectory directory_;
  int listenFd_ = -1;
};

void checkPlacement(const Store& store) {
  IBDT_FUZZ_CHECK(store.size() >= 1 && store.rank() < store.size(), "rank %d of %d", store.rank(), store.size());
  IBDT_FUZZ_CHECK(store.localSize() >= 1 && store.localSize() <= store.size() && store.localRank() >= 0 &&
                      store.localRank() < store.localSize(),
                  "local rank %d of %d", store.localRank(), store.localSize());
  IBDT_FUZZ_CHECK(store.numNodes() >= 1 && store.numNodes() <= store.size() && store.nodeId() >= 0 &&
                      store.nodeId() < store.numNodes(),
                  "node %d of %d", store.nodeId(), store.numNodes());
}

}  // namespace
}  // namespace ibdt::bootstrap::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ibdt;
  using namespace ibdt::bootstrap;
  using namespace ibdt::bootstrap::fuzz;
  static FakeServer server;
  std::thread answering = server.serve(std::string(reinterpret_cast<const char*>(data), size));
  auto store = LauncherStore::connect(server.path(), kToken, 0, Deadline::after(std::chrono::seconds(10)));
  if (!store.isOk()) {
    IBDT_FUZZ_CHECK(knownCode(store.status().code()) && store.status().code() != Code::kOk,
                    "connect failed with code %d", int(store.status().code()));
  } else {
    checkPlacement(**store);
    auto value = (*store)->get(0, "key", Deadline::after(std::chrono::seconds(2)));
    if (!value.isOk()) {
      IBDT_FUZZ_CHECK(knownCode(value.status().code()), "get failed with code %d", int(value.status().code()));
    }
  }
  answering.join();
  return 0;
}
