#include "transport/fabric/verbs/verbs_memory_window.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/log.h"
#include "transport/fabric/verbs/verbs_endpoint.h"
#include "transport/fabric/verbs/verbs_memory_region.h"
#include "transport/fabric/verbs/verbs_status.h"

namespace ibdt::fabric::verbs {
namespace {
// A bind or invalidation queued behind at most a send queue of transfers;
// beyond this the window is deallocated instead (which revokes it at once).
constexpr auto kInvalidateWait = std::chrono::seconds(2);
constexpr auto kBindWait = std::chrono::seconds(2);
}  // namespace

bool deviceHasMemoryWindows(ibv_context* context) {
  ibv_device_attr_ex attr{};
  if (ibv_query_device_ex(context, nullptr, &attr) != 0) return false;
  uint64_t flags = attr.orig_attr.device_cap_flags;
  return attr.orig_attr.max_mw > 0 &&
         (flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0;
}

WindowCache::~WindowCache() {
  for (ibv_mw* window : free_) destroy(window);
}

Result<ibv_mw*> WindowCache::take() {
  if (!free_.empty()) {
    ibv_mw* window = free_.back();
    free_.pop_back();
    return window;
  }
  ibv_mw* window = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  if (window == nullptr) return verbsCallError("ibv_alloc_mw(IBV_MW_TYPE_2)", errno, device_);
  return window;
}

void WindowCache::destroy(ibv_mw* window) {
  if (int rc = ibv_dealloc_mw(window); rc != 0) {
    IBDT_LOG(kWarn, device_, ": ibv_dealloc_mw(rkey 0x", std::hex, window->rkey, ") failed: ", std::strerror(rc));
  }
}

Result<std::unique_ptr<MemoryRegion>> VerbsMemoryWindow::bind(WindowCache& cache, ibv_mr* target, uint32_t lkey,
                                                              uint32_t access, VerbsEndpoint& endpoint) {
  void* address = target->addr;
  size_t length = target->length;
  uint32_t remote = access & (kRemoteWrite | kRemoteRead);
  if (remote == 0 || remote != access) {
    return makeError(Code::kInvalidArgument, cache.device(), ": bindWindow: access 0x", std::hex, access,
                     " must be remote read and/or write only");
  }
  IBDT_ASSIGN_OR_RETURN(ibv_mw * window, cache.take());
  uint32_t rkey = ibv_inc_rkey(window->rkey);  // a fresh key tag: earlier binds' keys stay dead
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_BIND_MW;
  wr.bind_mw.mw = window;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = target;
  wr.bind_mw.bind_info.addr = reinterpret_cast<uint64_t>(address);
  wr.bind_mw.bind_info.length = length;
  wr.bind_mw.bind_info.mw_access_flags = static_cast<unsigned>(toIbvAccess(remote));
  auto posted = endpoint.postInternal(wr, "memory window bind");
  if (!posted.isOk()) {
    cache.giveBack(window);  // never bound
    return std::move(posted).takeStatus();
  }
  // Later binds name the window by its current key (as ibv_bind_mw keeps it for type 1).
  window->rkey = rkey;
  // The key works once this returns, whichever QP carries it to the peer
  // (a rank's link to itself sends on another QP than the bound one).
  if (!endpoint.awaitInternal(*posted, Deadline::after(kBindWait))) {
    cache.destroy(window);
    return makeError(endpoint.state() == EndpointState::kError ? Code::kPeerFailed : Code::kTimeout, cache.device(),
                     ": memory window bind for ", endpoint.peerLabel(), " was not carried out",
                     endpoint.state() == EndpointState::kError ? " (the endpoint failed)" : " in time");
  }
  auto* made = new VerbsMemoryWindow(cache, window, address, length, lkey, rkey, remote, endpoint);
  endpoint.attachWindow(made);
  return std::unique_ptr<MemoryRegion>(made);
}

VerbsMemoryWindow::VerbsMemoryWindow(WindowCache& cache, ibv_mw* window, void* address, size_t length, uint32_t lkey,
                                     uint32_t rkey, uint32_t access, VerbsEndpoint& endpoint)
    : MemoryRegion(address, length, lkey, rkey, access), cache_(cache), window_(window), endpoint_(&endpoint) {}

void VerbsMemoryWindow::revokeWithEndpoint() {
  cache_.destroy(window_);
  endpoint_ = nullptr;
}

VerbsMemoryWindow::~VerbsMemoryWindow() {
  if (endpoint_ == nullptr) return;
  endpoint_->detachWindow(this);
  // The invalidation runs behind the bind on the same send queue, so it
  // never overtakes it. A failed QP accepts no remote access any more, but
  // its window cannot be bound again: deallocate it.
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.invalidate_rkey = static_cast<uint32_t>(rkey());
  bool invalidated = false;
  if (endpoint_->state() != EndpointState::kError) {
    auto posted = endpoint_->postInternal(wr, "memory window invalidation");
    invalidated = posted.isOk() && endpoint_->awaitInternal(*posted, Deadline::after(kInvalidateWait));
  }
  if (invalidated) {
    cache_.giveBack(window_);
  } else {
    cache_.destroy(window_);
  }
}

}  // namespace ibdt::fabric::verbs
