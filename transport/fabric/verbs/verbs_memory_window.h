// transport/fabric/verbs/verbs_memory_window.h — type-2 memory windows as
// the keys of Domain::bindWindow (docs/security.md, "Pool buffers").
//
// A window is bound by an IBV_WR_BIND_MW on the queue pair of the peer the
// key is for, over a region registered for window binding that covers
// exactly [address, address + length) (VerbsMemoryRegion::windowTarget), so
// the device accepts its rkey only on that QP and only inside that range;
// binding waits until the device carried it out. Destroying it posts an
// IBV_WR_LOCAL_INV behind the bind and waits until the device carried it
// out, so the key is dead before the memory is reused; the ibv_mw then goes
// back to a per-domain cache for the next bind (ibv_alloc_mw is a system
// call, a post is not on an HCA). Where anything fails the ibv_mw is
// deallocated instead, which revokes it at once.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ibdt/fabric.h"

namespace ibdt::fabric::verbs {

class VerbsEndpoint;

// Whether the device binds type-2 windows (2A or 2B): from ibv_query_device_ex.
bool deviceHasMemoryWindows(ibv_context* context);

// Free, unbound ibv_mw objects of one protection domain. Not thread-safe
// (the domain is not).
class WindowCache {
 public:
  WindowCache(ibv_pd* pd, std::string device) : pd_(pd), device_(std::move(device)) {}
  ~WindowCache();
  WindowCache(const WindowCache&) = delete;
  WindowCache& operator=(const WindowCache&) = delete;

  Result<ibv_mw*> take();
  void giveBack(ibv_mw* window) { free_.push_back(window); }
  // Revokes at once whatever `window` grants, and frees it.
  void destroy(ibv_mw* window);
  const std::string& device() const { return device_; }

 private:
  ibv_pd* pd_;
  std::string device_;
  std::vector<ibv_mw*> free_;
};

class VerbsMemoryWindow final : public MemoryRegion {
 public:
  // Binds a window of `cache` over all of `target` (registered for window
  // binding) with the remote bits of `access`, on `endpoint`'s QP; `lkey`:
  // what local requests use for the same bytes.
  static Result<std::unique_ptr<MemoryRegion>> bind(WindowCache& cache, ibv_mr* target, uint32_t lkey,
                                                    uint32_t access, VerbsEndpoint& endpoint);
  ~VerbsMemoryWindow() override;

  // Called by the endpoint before its QP is destroyed: the window is
  // deallocated now and its destructor does nothing more.
  void revokeWithEndpoint();

 private:
  VerbsMemoryWindow(WindowCache& cache, ibv_mw* window, void* address, size_t length, uint32_t lkey, uint32_t rkey,
                    uint32_t access, VerbsEndpoint& endpoint);

  WindowCache& cache_;
  ibv_mw* window_;
  VerbsEndpoint* endpoint_;  // null once revoked with it
};

}  // namespace ibdt::fabric::verbs
