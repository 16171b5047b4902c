// base/shared_region.h — a shared-memory region backed by a memfd (the shm
// provider's segments, and the node-local all-to-all's mailbox)
//
// memfd segments have no name in /dev/shm, so nothing is left behind even
// when a job is killed: the memory goes away with the last process that maps
// it. A peer maps one by reopening /proc/<pid>/fd/<fd> of the owner (allowed
// for processes of the same user) and confirms the inode.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ibdt/status.h"

namespace ibdt {

class SharedRegion {
 public:
  SharedRegion() = default;
  ~SharedRegion();
  SharedRegion(SharedRegion&& other) noexcept;
  SharedRegion& operator=(SharedRegion&& other) noexcept;
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  // Creates and maps a zero-filled segment of `length` bytes (rounded up to pages).
  static Result<SharedRegion> create(std::string_view name, size_t length);
  // Maps the segment that process `pid` holds open as `fd` with inode `inode`:
  // through /proc/<pid>/fd/<fd>, or, where /proc hides other processes'
  // descriptors (hidepid), by duplicating it with pidfd_getfd().
  static Result<SharedRegion> openPeer(pid_t pid, int fd, uint64_t inode);
  // The pidfd_getfd() route alone (tests use it directly).
  static Result<SharedRegion> openPeerByPidfd(pid_t pid, int fd, uint64_t inode);

  uint8_t* data() const { return data_; }
  size_t length() const { return length_; }
  int fd() const { return fd_; }  // -1 for a peer's segment (closed after mapping)
  uint64_t inode() const { return inode_; }
  bool valid() const { return data_ != nullptr; }

 private:
  void reset();
  // Maps `local` (our own descriptor of the peer's segment), checking the inode.
  static Result<SharedRegion> mapDescriptor(int local, uint64_t inode, const std::string& what);

  uint8_t* data_ = nullptr;
  size_t length_ = 0;
  int fd_ = -1;
  uint64_t inode_ = 0;
};

}  // namespace ibdt
