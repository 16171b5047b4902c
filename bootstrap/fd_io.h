// bootstrap/fd_io.h — blocking socket I/O bounded by a Deadline.
//
// Used by the store clients (ibdt-run's protocol, PMI-1's text protocol):
// each call waits with poll() so a silent peer costs a timeout, not a hang,
// and EINTR is retried.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ibdt/deadline.h"
#include "ibdt/status.h"

namespace ibdt::bootstrap {

// Writes all of `data`; `what` names the peer in errors ("ibdt-run store").
Status writeAll(int fd, std::string_view data, Deadline deadline, std::string_view what);
// Reads exactly `size` bytes into `out`. kPeerFailed on EOF.
Status readExact(int fd, void* out, size_t size, Deadline deadline, std::string_view what);
// Reads up to and including the next '\n' (the newline is not returned).
// `buffer` carries bytes read past the line to the next call.
Result<std::string> readLine(int fd, std::string& buffer, Deadline deadline, std::string_view what);
// Waits until `fd` is readable. kTimeout when the deadline passes first.
Status waitReadable(int fd, Deadline deadline, std::string_view what);
// Connects a blocking Unix-domain stream socket to `path` (CLOEXEC).
Result<int> connectUnix(const std::string& path);

}  // namespace ibdt::bootstrap
