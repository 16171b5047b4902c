// Jobs taking turns through pipes (see the header).
#include "perf/job_turns.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace ibdt::perf {
namespace {

Status writeAll(int fd, const void* data, size_t bytes) {
  const auto* at = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t wrote = write(fd, at, bytes);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return makeError(Code::kSystem, "job turns: write: ", std::strerror(errno));
    at += wrote;
    bytes -= static_cast<size_t>(wrote);
  }
  return Status::ok();
}

Status readAll(int fd, void* data, size_t bytes) {
  auto* at = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t got = read(fd, at, bytes);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) return makeError(Code::kPeerFailed, "job turns: the other side closed its pipe");
    if (got < 0) return makeError(Code::kSystem, "job turns: read: ", std::strerror(errno));
    at += got;
    bytes -= static_cast<size_t>(got);
  }
  return Status::ok();
}

constexpr int kRead = 0, kWrite = 1;

}  // namespace

Result<JobTurns> JobTurns::create(int jobs, int turnRanks) {
  JobTurns turns(jobs, turnRanks);
  turns.fds_.assign(static_cast<size_t>(jobs * (turnRanks + 1) * 2), -1);
  for (int job = 0; job < jobs; ++job) {
    for (int pipe = 0; pipe <= turnRanks; ++pipe) {
      int ends[2];
      if (::pipe2(ends, O_CLOEXEC) != 0) return makeError(Code::kSystem, "job turns: pipe: ", std::strerror(errno));
      turns.fd(job, pipe, kRead) = ends[0];
      turns.fd(job, pipe, kWrite) = ends[1];
    }
  }
  return turns;
}

JobTurns::~JobTurns() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

void JobTurns::keepOnly(int job, int rank) {
  for (int j = 0; j < jobs_; ++j) {
    for (int pipe = 0; pipe <= turnRanks_; ++pipe) {
      for (int end : {kRead, kWrite}) {
        const bool mine = j == job && ((pipe == rank && end == kRead) || (pipe == turnRanks_ && rank == 0 && end == kWrite));
        int& each = fd(j, pipe, end);
        if (!mine && each >= 0) {
          close(each);
          each = -1;
        }
      }
    }
  }
}

void JobTurns::keepParentEnds() {
  for (int j = 0; j < jobs_; ++j) {
    for (int pipe = 0; pipe <= turnRanks_; ++pipe) {
      int& ranks = fd(j, pipe, pipe == turnRanks_ ? kWrite : kRead);
      if (ranks >= 0) close(ranks);
      ranks = -1;
    }
  }
}

Status JobTurns::awaitTurn(int job, int rank) {
  char turn = 0;
  return readAll(fd(job, rank, kRead), &turn, 1);
}

Status JobTurns::answer(int job, std::span<const double> values) {
  const auto count = static_cast<int64_t>(values.size());
  IBDT_RETURN_IF_ERROR(writeAll(fd(job, turnRanks_, kWrite), &count, sizeof count));
  return writeAll(fd(job, turnRanks_, kWrite), values.data(), values.size_bytes());
}

Status JobTurns::giveTurn(int job, int rank) {
  const char turn = 't';
  return writeAll(fd(job, rank, kWrite), &turn, 1);
}

Result<std::vector<double>> JobTurns::awaitAnswer(int job) {
  int64_t count = 0;
  IBDT_RETURN_IF_ERROR(readAll(fd(job, turnRanks_, kRead), &count, sizeof count));
  if (count < 0 || count > (int64_t{1} << 24)) return makeError(Code::kProtocol, "job turns: an answer of ", count, " values");
  std::vector<double> values(static_cast<size_t>(count));
  IBDT_RETURN_IF_ERROR(readAll(fd(job, turnRanks_, kRead), values.data(), values.size() * sizeof(double)));
  return values;
}

}  // namespace ibdt::perf
