// The core's RendezvousServices (core_services.h): control messages,
// staging buffers and user-buffer registrations; the layout caches and
// READs are each peer's (peer.h).
#include <cstdlib>
#include <cstring>

#include "transport/messaging/core_services.h"
#include "transport/messaging/cost_model.h"
#include "transport/messaging/eager_send.h"

namespace ibdt::messaging {

void CoreServices::queueControl(int rank, std::vector<uint8_t> bytes) {
  peer(rank).control().push(ControlMessage(std::move(bytes)));
  parts_.activePeers.mark(rank);
}

Status CoreServices::createBuffers() {
  const fabric::Caps& caps = domain_.caps();
  IBDT_ASSIGN_OR_RETURN(auto poolOptions, memory::PoolOptions::fromEnvironment());
  IBDT_ASSIGN_OR_RETURN(pool_, memory::BufferPool::create(domain_, poolOptions));
  IBDT_ASSIGN_OR_RETURN(auto cacheOptions, memory::CacheOptions::fromEnvironment());
  IBDT_ASSIGN_OR_RETURN(cache_, memory::RegistrationCache::create(domain_, cacheOptions));
  groupPlan_.cost = caps.registration;
  groupPlan_.pageSize = caps.pageSize;
  // Pre-register a few segment buffers so the first rendezvous finds them.
  std::vector<memory::PoolBuffer> warm;
  for (int i = 0; i < 4; ++i) {
    IBDT_ASSIGN_OR_RETURN(auto buffer,
                          pool_->get(static_cast<size_t>(segmentSizeFor(1 << 30, parts_.options.segmentSize))));
    warm.push_back(std::move(buffer));
  }
  return Status::ok();
}

Result<Staging> CoreServices::pooledBuffer(size_t bytes, int keyForRank) {
  // The rank's requests arrive at its receiving endpoint (the same one both
  // ways, except for a rank's link to itself).
  fabric::Endpoint* keyFor = keyForRank >= 0 ? peer(keyForRank).recvEndpoint() : nullptr;
  Staging staging;
  IBDT_ASSIGN_OR_RETURN(staging.pooled, pool_->get(bytes, keyFor));
  return staging;
}

Result<Staging> CoreServices::dedicatedBuffer(size_t bytes) {
  // The paper's generic scheme: memory allocated for this message and
  // registered (not cached), as an application would malloc a pack buffer.
  Staging staging;
  size_t page = domain_.caps().pageSize;
  size_t rounded = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  staging.memory.reset(static_cast<uint8_t*>(std::aligned_alloc(page, rounded)));
  if (!staging.memory) return makeError(Code::kResource, "allocating a ", bytes, "-byte staging buffer");
  std::memset(staging.memory.get(), 0, rounded);  // registration wants mapped pages
  auto region = domain_.registerMemory(staging.memory.get(), rounded, memory::PoolOptions().access);
  if (!region.isOk()) {
    return std::move(region).takeStatus().withContext(strCat("registering a ", bytes, "-byte staging buffer"));
  }
  staging.dedicated = std::move(region).value();
  return staging;
}

Result<UserRegistration> CoreServices::registerUser(const Operation& op, int64_t bytes, uint32_t access, bool single) {
  const void* base = op.isSend ? op.sendBuffer : op.recvBuffer;
  auto registration = UserRegistration::create(*cache_, groupPlan_, *op.segment, op.type, op.count, op.stats, base,
                                               bytes, access, single);
  if (!registration.isOk()) {
    return std::move(registration)
        .takeStatus()
        .withContext(strCat("registering the user buffer of a ", bytes, "-byte message with rank ", op.peer));
  }
  return registration;
}

}  // namespace ibdt::messaging
