#include "base/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace ibdt {
namespace {

// Segments up to this size are faulted in when mapped: pool chunks hold eager
// buffers that a peer writes into, and a first write to each page costs a
// page fault on both sides (a 2-rank alltoall of 16 KiB blocks ran about 4x
// slower for its first few dozen calls, one new page per eager buffer).
// Larger segments are user-sized allocations, touched where they are used.
constexpr size_t kPopulateLimit = size_t{4} << 20;

int mapFlagsFor(size_t length) { return MAP_SHARED | (length <= kPopulateLimit ? MAP_POPULATE : 0); }

}  // namespace

SharedRegion::~SharedRegion() { reset(); }

SharedRegion::SharedRegion(SharedRegion&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      length_(std::exchange(other.length_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      inode_(std::exchange(other.inode_, 0)) {}

SharedRegion& SharedRegion::operator=(SharedRegion&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    length_ = std::exchange(other.length_, 0);
    fd_ = std::exchange(other.fd_, -1);
    inode_ = std::exchange(other.inode_, 0);
  }
  return *this;
}

void SharedRegion::reset() {
  if (data_ != nullptr) munmap(data_, length_);
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  length_ = 0;
  fd_ = -1;
  inode_ = 0;
}

Result<SharedRegion> SharedRegion::create(std::string_view name, size_t length) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t rounded = (length == 0 ? page : (length + page - 1) / page * page);
  std::string label = strCat("ibdt-", name);
  SharedRegion segment;
  segment.fd_ = memfd_create(label.c_str(), MFD_CLOEXEC);
  if (segment.fd_ < 0) {
    return makeError(Code::kSystem, "memfd_create(", label, "): ", std::strerror(errno));
  }
  if (ftruncate(segment.fd_, static_cast<off_t>(rounded)) != 0) {
    return makeError(Code::kResource, "ftruncate(", label, ", ", rounded, "): ", std::strerror(errno));
  }
  void* data = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, mapFlagsFor(rounded), segment.fd_, 0);
  if (data == MAP_FAILED) {
    return makeError(Code::kResource, "mmap of shared segment ", label, " (", rounded, " bytes): ", std::strerror(errno));
  }
  segment.data_ = static_cast<uint8_t*>(data);
  segment.length_ = rounded;
  struct stat info {};
  if (fstat(segment.fd_, &info) != 0) {
    return makeError(Code::kSystem, "fstat(", label, "): ", std::strerror(errno));
  }
  segment.inode_ = info.st_ino;
  return segment;
}

Result<SharedRegion> SharedRegion::openPeer(pid_t pid, int fd, uint64_t inode) {
  std::string path = strCat("/proc/", pid, "/fd/", fd);
  int local = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (local >= 0) return mapDescriptor(local, inode, path);
  int error = errno;
  if (error == EACCES || error == EPERM || error == ENOENT) {
    // /proc may hide the descriptors (hidepid) while the process lives.
    auto duplicated = openPeerByPidfd(pid, fd, inode);
    if (duplicated.isOk() || duplicated.status().code() != Code::kSystem) return duplicated;
  }
  Code code = (error == ENOENT || error == ESRCH) ? Code::kPeerFailed : Code::kSystem;
  return makeError(code, "open(", path, ") to map a segment of process ", pid, ": ", std::strerror(error),
                   error == EACCES || error == EPERM ? " (peers must run as the same user)" : "");
}

Result<SharedRegion> SharedRegion::openPeerByPidfd(pid_t pid, int fd, uint64_t inode) {
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    int error = errno;
    return makeError(error == ESRCH ? Code::kPeerFailed : Code::kSystem, "pidfd_open(", pid, "): ",
                     std::strerror(error));
  }
  int local = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
  int error = errno;
  close(pidfd);
  if (local < 0) {
    return makeError(error == ESRCH ? Code::kPeerFailed : Code::kSystem, "pidfd_getfd(process ", pid, ", fd ", fd,
                     "): ", std::strerror(error));
  }
  return mapDescriptor(local, inode, strCat("fd ", fd, " of process ", pid));
}

Result<SharedRegion> SharedRegion::mapDescriptor(int local, uint64_t inode, const std::string& what) {
  SharedRegion segment;
  segment.fd_ = local;  // closed by the segment on every error path
  struct stat info {};
  if (fstat(local, &info) != 0) {
    return makeError(Code::kSystem, "fstat(", what, "): ", std::strerror(errno));
  }
  if (info.st_ino != inode) {
    return makeError(Code::kProtocol, what, " is inode ", info.st_ino, ", expected ", inode,
                     " (the peer closed the segment)");
  }
  size_t length = static_cast<size_t>(info.st_size);
  void* data = mmap(nullptr, length, PROT_READ | PROT_WRITE, mapFlagsFor(length), local, 0);
  if (data == MAP_FAILED) {
    return makeError(Code::kResource, "mmap of ", what, " (", length, " bytes): ", std::strerror(errno));
  }
  close(local);
  segment.fd_ = -1;
  segment.data_ = static_cast<uint8_t*>(data);
  segment.length_ = length;
  segment.inode_ = inode;
  return segment;
}

}  // namespace ibdt
