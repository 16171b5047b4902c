#include "bootstrap/fd_io.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace ibdt::bootstrap {
namespace {

int pollTimeoutMs(Deadline deadline) {
  if (deadline.isNever()) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline.remaining()).count();
  return static_cast<int>(std::min<long long>(left, INT_MAX));
}

Status waitFor(int fd, short events, Deadline deadline, std::string_view what) {
  for (;;) {
    pollfd entry{fd, events, 0};
    int ready = ::poll(&entry, 1, pollTimeoutMs(deadline));
    if (ready > 0) return Status::ok();
    if (ready == 0) return makeError(Code::kTimeout, what, ": no answer before the deadline");
    if (errno != EINTR) return makeError(Code::kSystem, what, ": poll: ", std::strerror(errno));
  }
}

}  // namespace

Status waitReadable(int fd, Deadline deadline, std::string_view what) { return waitFor(fd, POLLIN, deadline, what); }

Status writeAll(int fd, std::string_view data, Deadline deadline, std::string_view what) {
  while (!data.empty()) {
    ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      data.remove_prefix(static_cast<size_t>(sent));
    } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      IBDT_RETURN_IF_ERROR(waitFor(fd, POLLOUT, deadline, what));
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else if (sent < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return makeError(Code::kPeerFailed, what, ": connection closed by the peer (", std::strerror(errno), ")");
    } else {
      return makeError(Code::kSystem, what, ": send: ", std::strerror(errno));
    }
  }
  return Status::ok();
}

Status readExact(int fd, void* out, size_t size, Deadline deadline, std::string_view what) {
  auto* bytes = static_cast<char*>(out);
  size_t done = 0;
  while (done < size) {
    ssize_t got = ::recv(fd, bytes + done, size - done, MSG_DONTWAIT);
    if (got > 0) {
      done += static_cast<size_t>(got);
    } else if (got == 0) {
      return makeError(Code::kPeerFailed, what, ": connection closed by the peer");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      IBDT_RETURN_IF_ERROR(waitFor(fd, POLLIN, deadline, what));
    } else if (errno != EINTR) {
      return makeError(errno == ECONNRESET ? Code::kPeerFailed : Code::kSystem, what, ": recv: ",
                       std::strerror(errno));
    }
  }
  return Status::ok();
}

Result<std::string> readLine(int fd, std::string& buffer, Deadline deadline, std::string_view what) {
  for (;;) {
    size_t newline = buffer.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer.substr(0, newline);
      buffer.erase(0, newline + 1);
      return line;
    }
    char chunk[4096];
    ssize_t got = ::recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (got > 0) {
      buffer.append(chunk, static_cast<size_t>(got));
    } else if (got == 0) {
      return makeError(Code::kPeerFailed, what, ": connection closed by the peer");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      IBDT_RETURN_IF_ERROR(waitFor(fd, POLLIN, deadline, what));
    } else if (errno != EINTR) {
      return makeError(Code::kSystem, what, ": recv: ", std::strerror(errno));
    }
  }
}

Result<int> connectUnix(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return makeError(Code::kInvalidArgument, "socket path '", path, "' is longer than ", sizeof(address.sun_path) - 1,
                     " bytes");
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return makeError(Code::kSystem, "socket(AF_UNIX): ", std::strerror(errno));
  while (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    if (errno == EINTR) continue;
    int error = errno;
    ::close(fd);
    return makeError(Code::kSystem, "connect to '", path, "': ", std::strerror(error));
  }
  return fd;
}

}  // namespace ibdt::bootstrap
