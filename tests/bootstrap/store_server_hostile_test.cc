// The ibdt-run store server against hostile or careless clients (issue 17):
// frames whose counts lie, a second connection claiming a connected rank,
// connections that never say hello. Each must be refused with an error to
// that client only, at once, while the job goes on.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "bootstrap/fd_io.h"
#include "bootstrap/store_server_fixture.h"
#include "bootstrap/store_test_util.h"
#include "bootstrap/store_wire.h"

namespace ibdt::bootstrap {
namespace {

using test::toString;

// A raw connection speaking the wire protocol by hand.
class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    auto fd = connectUnix(path);
    EXPECT_TRUE(fd.isOk()) << fd.status().toString();
    fd_ = fd.isOk() ? *fd : -1;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status send(const std::string& frame) { return writeAll(fd_, frame, Deadline::after(10s), "test client"); }
  // The next reply's code and message (fields after them are dropped); an
  // I/O failure is returned as such.
  Status reply() {
    char header[4];
    IBDT_RETURN_IF_ERROR(readExact(fd_, header, sizeof(header), Deadline::after(10s), "test client"));
    std::string payload(wire::frameLength(header), '\0');
    IBDT_RETURN_IF_ERROR(readExact(fd_, payload.data(), payload.size(), Deadline::after(10s), "test client"));
    wire::Reader in(payload);
    in.u8();
    in.u64();
    auto code = static_cast<Code>(in.u8());
    std::string message(in.blob());
    if (code == Code::kOk) return Status::ok();
    return Status(code, message);
  }
  Status hello(int rank) {
    IBDT_RETURN_IF_ERROR(send(wire::Writer(wire::Op::kHello, 1).u32(wire::kVersion).blob(kToken).u32(rank).frame()));
    return reply();
  }
  // True when the server closed the connection (EOF) before the deadline.
  bool closedByServer() {
    if (!waitReadable(fd_, Deadline::after(10s), "test client").isOk()) return false;
    char byte;
    return ::recv(fd_, &byte, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
};

void expectTheJobStillWorks(StoreServerTest& test, int writer, int reader) {
  auto a = test.connect(writer);
  auto b = test.connect(reader);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->put("k", "v").isOk());
  ASSERT_TRUE(a->commit().isOk());
  auto value = b->get(writer, "k", Deadline::after(10s));
  ASSERT_TRUE(value.isOk()) << value.status().toString();
  EXPECT_EQ(toString(*value), "v");
}

using StoreServerHostileTest = StoreServerTest;

// Regression: the commit loop ran 2^32 times after its reader failed,
// spinning and allocating until bad_alloc.
TEST_F(StoreServerHostileTest, CommitCountBeyondTheFrameIsRefusedAtOnce) {
  start(3);
  RawClient liar(path_);
  ASSERT_TRUE(liar.hello(0).isOk());
  ASSERT_TRUE(liar.send(wire::Writer(wire::Op::kCommit, 2).u32(0xffffffffu).frame()).isOk());
  Status answer = liar.reply();
  EXPECT_EQ(answer.code(), Code::kProtocol);
  EXPECT_NE(answer.message().find("claims 4294967295 entries but carries 0 bytes"), std::string_view::npos)
      << answer.toString();
  EXPECT_TRUE(liar.closedByServer());
  expectTheJobStillWorks(*this, 1, 2);
}

TEST_F(StoreServerHostileTest, CommitWithTruncatedEntriesIsRefused) {
  start(2);
  RawClient liar(path_);
  ASSERT_TRUE(liar.hello(0).isOk());
  // Two entries promised, one and a half present.
  std::string frame = wire::Writer(wire::Op::kCommit, 2).u32(2).blob("key").blob("value").u32(100).u32(0).frame();
  ASSERT_TRUE(liar.send(frame).isOk());
  Status answer = liar.reply();
  EXPECT_EQ(answer.code(), Code::kProtocol);
  EXPECT_NE(answer.message().find("truncated or malformed"), std::string_view::npos) << answer.toString();
  // Nothing of the bad commit was stored: the first entry is not visible.
  auto reader = connect(1);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->get(0, "key", Deadline::after(100ms)).status().code(), Code::kTimeout);
}

// The hello of a connected rank from another process, as a forked child
// sees it: the error message, or "ok".
std::string helloFromAnotherProcess(const std::string& path, int rank) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    auto store = LauncherStore::connect(path, kToken, rank, Deadline::after(10s));
    std::string answer = store.isOk() ? "ok" : store.status().toString();
    ssize_t ignored = ::write(fds[1], answer.data(), answer.size());  // a pipe: no send()
    (void)ignored;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string answer;
  char chunk[256];
  for (ssize_t got; (got = ::read(fds[0], chunk, sizeof(chunk))) > 0;) answer.append(chunk, static_cast<size_t>(got));
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  return answer;
}

// Regression: a second hello as a connected rank was accepted, caught only
// at the next fence. (The rank's own process may open a second Store.)
TEST_F(StoreServerHostileTest, SecondHelloForAConnectedRankIsRefused) {
  start(2);
  auto first = connect(0);
  ASSERT_TRUE(first);
  std::string answer = helloFromAnotherProcess(path_, 0);
  EXPECT_NE(answer.find("protocol: "), std::string::npos) << answer;
  EXPECT_NE(answer.find("rank 0 is already connected from another process"), std::string::npos) << answer;
  EXPECT_EQ(server_->rejectedConnections(), 1);
  auto sameProcess = connect(0);  // a second Store of the rank's own process
  EXPECT_TRUE(sameProcess);
  // The first connection is untouched.
  auto other = connect(1);
  ASSERT_TRUE(other);
  ASSERT_TRUE(first->put("mine", "first").isOk());
  ASSERT_TRUE(first->commit().isOk());
  auto value = other->get(0, "mine", Deadline::after(10s));
  ASSERT_TRUE(value.isOk()) << value.status().toString();
  EXPECT_EQ(toString(*value), "first");
}

// Regression: connections that never said hello were kept forever.
TEST_F(StoreServerHostileTest, ConnectionWithoutHelloIsDroppedAfterTheDeadline) {
  start(2, 1, 200ms);
  RawClient silent(path_);
  EXPECT_TRUE(silent.closedByServer());
  EXPECT_EQ(server_->rejectedConnections(), 1);
  expectTheJobStillWorks(*this, 0, 1);
}

TEST_F(StoreServerHostileTest, HelloDeadlineDoesNotTouchRanksThatSaidHello) {
  start(2, 1, 100ms);
  auto first = connect(0);
  ASSERT_TRUE(first);
  std::this_thread::sleep_for(300ms);  // well past the hello deadline
  auto second = connect(1);
  ASSERT_TRUE(second);
  ASSERT_TRUE(first->put("still", "here").isOk());
  ASSERT_TRUE(first->commit().isOk());
  auto value = second->get(0, "still", Deadline::after(10s));
  ASSERT_TRUE(value.isOk()) << value.status().toString();
  EXPECT_EQ(toString(*value), "here");
  EXPECT_EQ(server_->rejectedConnections(), 0);
}

}  // namespace
}  // namespace ibdt::bootstrap
