#include "transport/fabric/verbs/verbs_domain.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/config.h"
#include "base/log.h"
#include "transport/fabric/verbs/verbs_calibration.h"
#include "transport/fabric/verbs/verbs_completion_queue.h"
#include "transport/fabric/verbs/verbs_fork.h"
#include "transport/fabric/verbs/verbs_listener.h"
#include "transport/fabric/verbs/verbs_memory_region.h"
#include "transport/fabric/verbs/verbs_receive_queue.h"
#include "transport/fabric/verbs/verbs_status.h"
#include "transport/fabric/verbs/verbs_work_id.h"

namespace ibdt::fabric::verbs {
namespace {

struct Knobs {
  std::string device;
  int gidIndex = kAutoGidIndex;
  uint8_t ackTimeout = 14;
  uint8_t retryCount = 6;
  uint8_t rnrRetry = 7;
  bool sharedReceiveQueue = false;
};

Result<Knobs> readKnobs(const DomainOptions& options) {
  Knobs knobs;
  IBDT_ASSIGN_OR_RETURN(knobs.device, config::getString("IBDT_VERBS_DEVICE"));
  if (!options.device.empty()) knobs.device = options.device;
  IBDT_ASSIGN_OR_RETURN(int64_t gid, config::getInt("IBDT_VERBS_GID_INDEX", -1, 255));
  IBDT_ASSIGN_OR_RETURN(int64_t timeout, config::getInt("IBDT_VERBS_TIMEOUT", 1, 31));
  IBDT_ASSIGN_OR_RETURN(int64_t retry, config::getInt("IBDT_VERBS_RETRY_COUNT", 0, 7));
  IBDT_ASSIGN_OR_RETURN(int64_t rnr, config::getInt("IBDT_VERBS_RNR_RETRY", 0, 7));
  IBDT_ASSIGN_OR_RETURN(knobs.sharedReceiveQueue, config::getBool("IBDT_VERBS_SRQ"));
  knobs.gidIndex = static_cast<int>(gid);
  knobs.ackTimeout = static_cast<uint8_t>(timeout);
  knobs.retryCount = static_cast<uint8_t>(retry);
  knobs.rnrRetry = static_cast<uint8_t>(rnr);
  return knobs;
}

// Send-queue entries per endpoint beyond the caller's depth for window binds
// and invalidations not yet retired.
constexpr uint32_t kWindowReserve = 64;

uint32_t clampToU32(int64_t value) {
  return static_cast<uint32_t>(std::clamp<int64_t>(value, 0, std::numeric_limits<uint32_t>::max()));
}

}  // namespace

VerbsDomain::VerbsDomain(SelectedPort port)
    : port_(std::move(port)), label_(port_.label()), random_(std::random_device{}()) {}

VerbsDomain::~VerbsDomain() {
  windows_.reset();  // its windows belong to the protection domain
  if (pd_ != nullptr) {
    if (int rc = ibv_dealloc_pd(pd_); rc != 0) {
      IBDT_LOG(kError, label_, ": ibv_dealloc_pd failed: ", std::strerror(rc),
               " (memory regions or endpoints outlive their domain)");
    }
  }
}

Result<std::unique_ptr<Domain>> VerbsDomain::open(const DomainOptions& options) {
  ensureForkSafety();
  IBDT_ASSIGN_OR_RETURN(Knobs knobs, readKnobs(options));
  IBDT_ASSIGN_OR_RETURN(SelectedPort port, openPort(knobs.device, knobs.gidIndex));
  std::unique_ptr<VerbsDomain> domain(new VerbsDomain(std::move(port)));
  ibv_context* context = domain->port_.context.get();
  const std::string& label = domain->label_;

  ibv_device_attr device{};
  if (int rc = ibv_query_device(context, &device); rc != 0) return verbsCallError("ibv_query_device", rc, label);
  domain->pd_ = ibv_alloc_pd(context);
  if (domain->pd_ == nullptr) return verbsCallError("ibv_alloc_pd", errno, label);

  Caps& caps = domain->caps_;
  caps.provider = "verbs";
  caps.device = label;
  uint32_t readSge = device.max_sge_rd > 0 ? static_cast<uint32_t>(device.max_sge_rd) : clampToU32(device.max_sge);
  caps.maxSendSge = std::min(clampToU32(device.max_sge), readSge);
  caps.maxRecvSge = clampToU32(knobs.sharedReceiveQueue ? std::min(device.max_sge, device.max_srq_sge) : device.max_sge);
  caps.maxInline = probeMaxInline(context, domain->pd_);
  caps.maxMessageSize = domain->port_.attr.max_msg_sz;
  caps.maxSendQueueDepth = clampToU32(device.max_qp_wr);
  caps.maxRecvQueueDepth = clampToU32(knobs.sharedReceiveQueue ? device.max_srq_wr : device.max_qp_wr);
  caps.maxCompletionQueueDepth = clampToU32(device.max_cqe);
  caps.maxReadsInFlight = clampToU32(std::min(device.max_qp_rd_atom, device.max_qp_init_rd_atom));
  caps.rdmaRead = true;
  caps.writeWithImm = true;
  caps.pageSize = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  caps.registration = measureRegistrationCost(domain->pd_, caps.pageSize);
  caps.transfer = nominalTransferCost(domain->port_.attr);
  caps.memoryWindows = deviceHasMemoryWindows(context);
  if (caps.memoryWindows) domain->windows_ = std::make_unique<WindowCache>(domain->pd_, label);

  EndpointSettings& settings = domain->settings_;
  settings.port = &domain->port_;
  settings.pd = domain->pd_;
  settings.maxSendSge = caps.maxSendSge;
  settings.maxReadSge = readSge;
  settings.maxRecvSge = caps.maxRecvSge;
  settings.maxInline = caps.maxInline;
  settings.maxSendQueueDepth = caps.maxSendQueueDepth;
  settings.maxRecvQueueDepth = caps.maxRecvQueueDepth;
  settings.maxMessageSize = caps.maxMessageSize;
  settings.readsInFlight = static_cast<uint8_t>(std::min<uint32_t>(caps.maxReadsInFlight, 255));
  settings.ackTimeout = knobs.ackTimeout;
  settings.retryCount = knobs.retryCount;
  settings.rnrRetry = knobs.rnrRetry;
  settings.sharedReceiveQueue = knobs.sharedReceiveQueue;
  settings.maxSharedQueueDepth = clampToU32(device.max_srq_wr);
  settings.maxSharedSge = clampToU32(std::min(device.max_sge, device.max_srq_sge));
  // Window binds and invalidations share the send queue with the caller's
  // requests; they are signalled, so they retire at the next poll.
  settings.internalReserve = caps.memoryWindows ? kWindowReserve : 0;

  IBDT_LOG(kInfo, label, ": opened (", domain->port_.gidType, domain->port_.roce ? strCat(" GID index ", int(domain->port_.gidIndex)) : strCat(" LID ", domain->port_.attr.lid),
           ", mtu ", mtuBytes(domain->port_.attr.active_mtu), ", max_sge ", caps.maxSendSge, ", inline ", caps.maxInline,
           ", registration ", caps.registration.fixedNs, " ns + ", caps.registration.perPageNs, " ns/page, ",
           caps.memoryWindows ? "type-2 memory windows: pool buffer keys per peer and buffer"
                              : "no type-2 memory windows: a pool buffer's key reaches its chunk", ")");
  return std::unique_ptr<Domain>(std::move(domain));
}

Result<std::unique_ptr<MemoryRegion>> VerbsDomain::registerMemory(void* address, size_t length, uint32_t access) {
  return VerbsMemoryRegion::create(pd_, label_, address, length, access, false);
}

Result<std::unique_ptr<MemoryRegion>> VerbsDomain::allocateMemory(size_t length, uint32_t access) {
  return allocateRegistered(pd_, label_, length, access, caps_.memoryWindows);
}

Result<std::unique_ptr<MemoryRegion>> VerbsDomain::bindWindow(const MemoryRegion& region, void* address,
                                                              size_t length, uint32_t access, Endpoint& peer) {
  if (!windows_) return Domain::bindWindow(region, address, length, access, peer);
  auto* parent = dynamic_cast<const VerbsMemoryRegion*>(&region);
  auto* endpoint = dynamic_cast<VerbsEndpoint*>(&peer);
  if (parent == nullptr || endpoint == nullptr || parent->handle()->pd != pd_) {
    return makeError(Code::kInvalidArgument, label_, ": bindWindow: region or endpoint of another domain");
  }
  auto* begin = static_cast<uint8_t*>(address);
  auto* regionBegin = static_cast<uint8_t*>(region.address());
  if (length == 0 || begin < regionBegin || begin + length > regionBegin + region.length()) {
    return makeError(Code::kInvalidArgument, label_, ": bindWindow: [", address, ", +", length,
                     ") is not inside the region [", region.address(), ", +", region.length(), ")");
  }
  IBDT_ASSIGN_OR_RETURN(ibv_mr * target, parent->windowTarget(address, length, label_));
  return VerbsMemoryWindow::bind(*windows_, target, region.lkey(), access, *endpoint);
}

Result<std::unique_ptr<CompletionQueue>> VerbsDomain::createCompletionQueue(uint32_t depth) {
  if (depth > caps_.maxCompletionQueueDepth) {
    return makeError(Code::kInvalidArgument, label_, ": createCompletionQueue: depth ", depth,
                     " exceeds the device limit ", caps_.maxCompletionQueueDepth);
  }
  IBDT_ASSIGN_OR_RETURN(auto cq, VerbsCompletionQueue::create(port_.context.get(), depth, label_));
  return std::unique_ptr<CompletionQueue>(std::move(cq));
}

Result<std::unique_ptr<Endpoint>> VerbsDomain::createEndpoint(CompletionQueue& sendQueue, CompletionQueue& recvQueue,
                                                             const EndpointOptions& options) {
  auto* sendCq = dynamic_cast<VerbsCompletionQueue*>(&sendQueue);
  auto* recvCq = dynamic_cast<VerbsCompletionQueue*>(&recvQueue);
  if (sendCq == nullptr || recvCq == nullptr || sendCq->context() != port_.context.get() ||
      recvCq->context() != port_.context.get()) {
    return makeError(Code::kInvalidArgument, label_, ": createEndpoint: completion queues of another domain");
  }
  uint16_t epoch = nextEpoch_;
  nextEpoch_ = nextEpoch_ == UINT16_MAX ? 1 : static_cast<uint16_t>(nextEpoch_ + 1);
  uint32_t psn = std::uniform_int_distribution<uint32_t>(0, (1u << 24) - 1)(random_);
  IBDT_ASSIGN_OR_RETURN(auto endpoint, VerbsEndpoint::create(settings_, *sendCq, *recvCq, options, epoch, psn));
  return std::unique_ptr<Endpoint>(std::move(endpoint));
}

Status VerbsDomain::shareReceives(CompletionQueue& recvQueue, uint32_t depth) {
  auto* cq = dynamic_cast<VerbsCompletionQueue*>(&recvQueue);
  if (cq == nullptr || cq->context() != port_.context.get()) {
    return makeError(Code::kInvalidArgument, label_, ": shareReceives: a completion queue of another domain");
  }
  if (cq->sharedReceiveQueue() != nullptr) {
    return makeError(Code::kInvalidArgument, label_,
                     ": shareReceives: the completion queue already has a shared receive queue");
  }
  if (depth == 0 || depth > settings_.maxSharedQueueDepth) {
    return makeError(Code::kInvalidArgument, label_, ": shareReceives: depth ", depth, " outside 1..max_srq_wr ",
                     settings_.maxSharedQueueDepth);
  }
  IBDT_ASSIGN_OR_RETURN(auto shared, VerbsReceiveQueue::createShared(pd_, *cq, depth, settings_.maxSharedSge, label_));
  cq->setSharedReceiveQueue(std::move(shared));
  return Status::ok();
}

Result<std::unique_ptr<Listener>> VerbsDomain::createListener() { return VerbsListener::create(port_, pd_, label_); }

}  // namespace ibdt::fabric::verbs
