// transport/fabric/shm/segment.h — a shared-memory segment backed by a memfd.
//
// memfd segments have no name in /dev/shm, so nothing is left behind even
// when a job is killed: the memory goes away with the last process that maps
// it. A peer maps one by reopening /proc/<pid>/fd/<fd> of the owner (allowed
// for processes of the same user) and confirms the inode.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ibdt/status.h"

namespace ibdt::fabric::shm {

class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Creates and maps a zero-filled segment of `length` bytes (rounded up to pages).
  static Result<Segment> create(std::string_view name, size_t length);
  // Maps the segment that process `pid` holds open as `fd` with inode `inode`.
  static Result<Segment> openPeer(pid_t pid, int fd, uint64_t inode);

  uint8_t* data() const { return data_; }
  size_t length() const { return length_; }
  int fd() const { return fd_; }  // -1 for a peer's segment (closed after mapping)
  uint64_t inode() const { return inode_; }
  bool valid() const { return data_ != nullptr; }

 private:
  void reset();

  uint8_t* data_ = nullptr;
  size_t length_ = 0;
  int fd_ = -1;
  uint64_t inode_ = 0;
};

}  // namespace ibdt::fabric::shm
