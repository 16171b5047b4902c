// transport/fabric/shm/domain.h — the shm provider's Domain: a protection
// domain whose registration table and doorbells live in a shared segment
// that peers map.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/fabric/shm/activity.h"
#include "transport/fabric/shm/layout.h"
#include "transport/fabric/shm/peer.h"
#include "transport/fabric/shm/registration_table.h"
#include "base/shared_region.h"

namespace ibdt::fabric::shm {

// State shared by the domain and every object it created (regions, queues
// and endpoints keep it alive, so destruction order is free).
class DomainState {
 public:
  static Result<std::shared_ptr<DomainState>> create(const DomainOptions& options);

  const Caps& caps() const { return caps_; }
  const std::string& jobTag() const { return jobTag_; }
  pid_t pid() const { return pid_; }
  int segmentFd() const { return segment_.fd(); }
  uint64_t segmentInode() const { return segment_.inode(); }
  std::chrono::nanoseconds livenessInterval() const { return livenessInterval_; }

  RegistrationTable& table() { return table_; }
  // Checks a local SGE: the lkey is live, the range inside, `access` granted.
  bool checkLocal(const Sge& sge, uint32_t access, uint32_t* regionIndex = nullptr) const;
  // The same for a gather list, reading each run of one lkey's region once.
  bool checkLocal(std::span<const Sge> sges, uint32_t access) const;
  // Checks a peer's access to our memory under `rkey` (bounce path).
  bool checkOwnRegion(uint64_t rkey, uint64_t address, uint64_t length, uint32_t access) const;
  // Whether one-sided access to peers' user memory uses cross-memory attach
  // (else the bounce path): permitted here and not disabled by IBDT_SHM_CMA.
  bool crossMemoryAttach() const { return crossMemoryAttach_; }

  Result<uint32_t> allocateDoorbell();
  void releaseDoorbell(uint32_t index);
  Doorbell& doorbell(uint32_t index) { return doorbells_[index]; }
  ActivityBoard& activity() { return activity_; }

  // Memory from allocateMemory, by start address: a registration of part of
  // it names the segment and its offset, so peers reach exactly that part
  // through their mapping (per-buffer pool keys, Caps::cheapSubRegistration).
  struct OwnedSegment {
    size_t length = 0;
    int32_t fd = -1;
    uint64_t inode = 0;
    uint32_t entry = 0;  // the allocation's own registration
  };
  void addSegment(uintptr_t address, const OwnedSegment& segment) { segments_[address] = segment; }
  void removeSegment(uintptr_t address) { segments_.erase(address); }
  // Where [address, address + length) lies in an allocation of ours, if it does.
  std::optional<SegmentPlace> placeInSegment(uintptr_t address, size_t length) const;

  // The peer process that owns domain segment (fd, inode), attached once.
  Result<std::shared_ptr<PeerDomain>> peer(pid_t pid, int domainFd, uint64_t domainInode);
  uint32_t nextEndpointId() { return nextEndpointId_++; }

 private:
  DomainState() : table_(nullptr, 0) {}

  Caps caps_;
  std::string jobTag_;
  pid_t pid_ = 0;
  std::chrono::nanoseconds livenessInterval_{};
  bool crossMemoryAttach_ = true;
  SharedRegion segment_;
  RegistrationTable table_;
  Doorbell* doorbells_ = nullptr;
  ActivityBoard activity_;
  std::vector<uint32_t> freeDoorbells_;
  std::map<std::pair<pid_t, uint64_t>, std::weak_ptr<PeerDomain>> peers_;
  std::map<uintptr_t, OwnedSegment> segments_;
  uint32_t nextEndpointId_ = 1;
};

class ShmDomain final : public Domain {
 public:
  explicit ShmDomain(std::shared_ptr<DomainState> state) : state_(std::move(state)) {}

  const Caps& caps() const override { return state_->caps(); }
  Result<std::unique_ptr<MemoryRegion>> registerMemory(void* address, size_t length, uint32_t access) override;
  Result<std::unique_ptr<MemoryRegion>> allocateMemory(size_t length, uint32_t access) override;
  Result<std::unique_ptr<CompletionQueue>> createCompletionQueue(uint32_t depth) override;
  Result<std::unique_ptr<Endpoint>> createEndpoint(CompletionQueue& sendQueue, CompletionQueue& recvQueue,
                                                  const EndpointOptions& options) override;
  Result<std::unique_ptr<Listener>> createListener() override;

 private:
  std::shared_ptr<DomainState> state_;
};

}  // namespace ibdt::fabric::shm
