// transport/fabric/shm/peer.h — what this process knows about one peer
// process: its mapped domain segment (registration table and doorbells),
// the provider-allocated segments of it mapped so far, and a pidfd that
// tells when it died.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>

#include "ibdt/fabric.h"
#include "transport/fabric/shm/layout.h"
#include "transport/fabric/shm/registration_table.h"
#include "transport/fabric/shm/remote_copy.h"
#include "base/shared_region.h"

namespace ibdt::fabric::shm {

class PeerDomain {
 public:
  ~PeerDomain();
  PeerDomain(const PeerDomain&) = delete;
  PeerDomain& operator=(const PeerDomain&) = delete;

  static Result<std::unique_ptr<PeerDomain>> attach(pid_t pid, int domainFd, uint64_t domainInode);

  pid_t pid() const { return pid_; }
  uint64_t domainInode() const { return domainInode_; }

  // Checks a one-sided access against the peer's registration table: the
  // rkey exists, its generation is current, [address, address+length) lies
  // inside the region and the region grants `access`. On success fills
  // `piece` (mapped when the region is a shared segment).
  CompletionStatus checkAccess(uint64_t rkey, uint64_t address, uint64_t length, uint32_t access, RemotePiece& piece);
  // Resolves a piece of a receive buffer the peer posted (checked at post).
  CompletionStatus resolveReceive(uint32_t regionIndex, uint64_t address, uint64_t length, RemotePiece& piece);

  // Wakes the peer's completion queue with doorbell `index`.
  void ring(uint32_t index);
  // Sets the peer endpoint's bit in its activity summary (after pushing a
  // notification to it; transport/fabric/shm/activity.h).
  void markActive(uint32_t slot);

  // False once the process has exited (checked through its pidfd).
  bool alive() const;

  // Set once cross-memory attach to this peer failed with EPERM: from then
  // on one-sided access to its user memory takes the bounce path.
  void denyCrossMemoryAttach() { crossMemoryAttachDenied_ = true; }
  bool crossMemoryAttachDenied() const { return crossMemoryAttachDenied_; }

 private:
  PeerDomain() = default;
  // Address in this process of peer memory inside a shared segment.
  uint8_t* mapSegment(const RegionSnapshot& region, uint64_t address, uint64_t length);

  pid_t pid_ = 0;
  int pidfd_ = -1;
  bool crossMemoryAttachDenied_ = false;
  uint64_t domainInode_ = 0;
  SharedRegion domain_;
  const RegionEntry* regions_ = nullptr;
  Doorbell* doorbells_ = nullptr;
  std::atomic<uint64_t>* activity_ = nullptr;
  // Validated at attach and kept here: the peer can rewrite its header at
  // any time, so a capacity read from it later could reach past the mapping.
  uint32_t activityCapacity_ = 0;
  uint32_t regionCapacity_ = 0;
  uint32_t doorbellCapacity_ = 0;
  struct Mapped {
    SharedRegion segment;
    uint32_t regionIndex;
  };
  std::map<uint64_t, Mapped> segments_;  // by inode
};

// Called after publishing work: bumps the doorbell and wakes its sleepers
// (a futex shared between processes) when there are any.
void ringDoorbell(Doorbell& doorbell);
// Sleeps until `doorbell` moves past `seen` or `timeout` passes.
void sleepOnDoorbell(Doorbell& doorbell, uint32_t seen, std::chrono::nanoseconds timeout);

}  // namespace ibdt::fabric::shm
