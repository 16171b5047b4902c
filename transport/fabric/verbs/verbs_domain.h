// transport/fabric/verbs/verbs_domain.h — a protection domain on one port.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <random>

#include "ibdt/fabric.h"
#include "transport/fabric/shared_receives.h"
#include "transport/fabric/verbs/verbs_device.h"
#include "transport/fabric/verbs/verbs_endpoint.h"
#include "transport/fabric/verbs/verbs_memory_window.h"

namespace ibdt::fabric::verbs {

class VerbsDomain final : public Domain, public SharedReceiveDomain {
 public:
  static Result<std::unique_ptr<Domain>> open(const DomainOptions& options);
  ~VerbsDomain() override;

  const Caps& caps() const override { return caps_; }
  Result<std::unique_ptr<MemoryRegion>> registerMemory(void* address, size_t length, uint32_t access) override;
  Result<std::unique_ptr<MemoryRegion>> allocateMemory(size_t length, uint32_t access) override;
  Result<std::unique_ptr<CompletionQueue>> createCompletionQueue(uint32_t depth) override;
  Result<std::unique_ptr<Endpoint>> createEndpoint(CompletionQueue& sendQueue, CompletionQueue& recvQueue,
                                                  const EndpointOptions& options) override;
  Result<std::unique_ptr<MemoryRegion>> bindWindow(const MemoryRegion& region, void* address, size_t length,
                                                   uint32_t access, Endpoint& peer) override;
  Result<std::unique_ptr<Listener>> createListener() override;
  // SharedReceiveDomain; IBDT_VERBS_SRQ=1 shares every receive CQ's, from
  // its first endpoint on.
  SharedReceiveSupport sharedReceiveSupport() const override {
    return {.available = true, .always = settings_.sharedReceiveQueue, .maxDepth = settings_.maxSharedQueueDepth};
  }
  Status shareReceives(CompletionQueue& recvQueue, uint32_t depth) override;

 private:
  explicit VerbsDomain(SelectedPort port);

  SelectedPort port_;
  std::string label_;
  ibv_pd* pd_ = nullptr;
  Caps caps_;
  EndpointSettings settings_;
  uint16_t nextEpoch_ = 1;
  std::mt19937 random_;
  std::unique_ptr<WindowCache> windows_;  // where caps_.memoryWindows
};

}  // namespace ibdt::fabric::verbs
