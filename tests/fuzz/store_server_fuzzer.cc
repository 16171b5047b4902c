// tests/fuzz/store_server_fuzzer.cc — ibdt-run's Store server
// (bootstrap/launcher/store_server.cc) fed arbitrary bytes on a connection,
// as a stranger (first input byte odd: nothing before the input) or as a
// rank that said hello with the job token (even). The server must answer
// only with well-formed reply frames, close the connection when the client
// does, never crash, spin or allocate without bound, and keep serving
// honest clients (checked every 16 inputs).
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "bootstrap/fd_io.h"
#include "bootstrap/launcher/store_server.h"
#include "bootstrap/launcher_store.h"
#include "bootstrap/node_map.h"
#include "bootstrap/store_wire.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/store_fuzz_common.h"

namespace ibdt::bootstrap::fuzz {
namespace {

using namespace std::chrono_literals;

struct Server {
  SocketDirectory directory;
  StoreServer store{kToken, blockNodeMap(1, 1)};
  Server() {
    if (!store.listen(directory.path()).isOk()) ::abort();
    store.serve();
  }
};

Server& server() {
  static Server instance;
  return instance;
}

// Everything the server sends until it closes the connection.
std::string readUntilClosed(int fd) {
  std::string received;
  Deadline deadline = Deadline::after(20s);
  for (;;) {
    Status readable = waitReadable(fd, deadline, "fuzz client");
    IBDT_FUZZ_CHECK(readable.isOk(), "the server kept the connection open: %s", readable.toString().c_str());
    char chunk[4096];
    ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
    if (got <= 0) return received;
    received.append(chunk, static_cast<size_t>(got));
  }
}

// The server's output must be whole reply frames; returns the first code.
int checkReplies(std::string_view stream) {
  int first = -1;
  while (!stream.empty()) {
    IBDT_FUZZ_CHECK(stream.size() >= 4, "a truncated frame header");
    uint32_t length = wire::frameLength(stream.data());
    IBDT_FUZZ_CHECK(stream.size() - 4 >= length, "a truncated frame");
    wire::Reader in(stream.substr(4, length));
    IBDT_FUZZ_CHECK(static_cast<wire::Op>(in.u8()) == wire::Op::kReply, "a frame that is not a reply");
    in.u64();
    int code = in.u8();
    in.blob();
    in.rest();
    IBDT_FUZZ_CHECK(in.finish("reply").isOk(), "a malformed reply");
    if (first < 0) first = code;
    stream.remove_prefix(4 + length);
  }
  return first;
}

void checkHonestClient() {
  auto store = LauncherStore::connect(server().directory.path(), kToken, 0, Deadline::after(10s));
  IBDT_FUZZ_CHECK(store.isOk(), "an honest rank cannot connect: %s", store.status().toString().c_str());
  IBDT_FUZZ_CHECK((*store)->put("honest", "value").isOk() && (*store)->commit().isOk(), "commit failed");
  auto value = (*store)->get(0, "honest", Deadline::after(10s));
  IBDT_FUZZ_CHECK(value.isOk() && value->size() == 5, "get failed");
}

}  // namespace
}  // namespace ibdt::bootstrap::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ibdt::bootstrap;
  using namespace ibdt::bootstrap::fuzz;
  static uint64_t inputs = 0;
  if (size == 0) return 0;
  bool asRank = (data[0] & 1) == 0;
  auto fd = connectUnix(server().directory.path());
  IBDT_FUZZ_CHECK(fd.isOk(), "connect: %s", fd.status().toString().c_str());
  std::string stream;
  if (asRank) stream = wire::Writer(wire::Op::kHello, 1).u32(wire::kVersion).blob(kToken).u32(0).frame();
  stream.append(reinterpret_cast<const char*>(data + 1), size - 1);
  (void)writeAll(*fd, stream, ibdt::Deadline::after(std::chrono::seconds(20)), "fuzz client");  // may be refused midway
  ::shutdown(*fd, SHUT_WR);
  int firstCode = checkReplies(readUntilClosed(*fd));
  ::close(*fd);
  if (asRank) IBDT_FUZZ_CHECK(firstCode == 0, "the honest hello was refused (code %d)", firstCode);
  if (++inputs % 16 == 0) checkHonestClient();
  return 0;
}
