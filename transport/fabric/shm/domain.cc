#include "transport/fabric/shm/domain.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/config.h"
#include "base/fastest.h"
#include "base/log.h"
#include "transport/fabric/providers.h"
#include "transport/fabric/shm/calibration.h"
#include "transport/fabric/shm/completion_queue.h"
#include "transport/fabric/shm/endpoint.h"
#include "transport/fabric/shm/listener.h"
#include "transport/fabric/shm/remote_copy.h"

namespace ibdt::fabric::shm {
namespace {

constexpr uint32_t kAllAccess = kLocalWrite | kRemoteWrite | kRemoteRead;

Caps makeCaps() {
  Caps caps;
  caps.provider = "shm";
  caps.device = "shm";
  caps.maxSendSge = kMaxSge;
  caps.maxRecvSge = kMaxSge;
  caps.maxInline = 1024;
  caps.maxMessageSize = uint64_t{1} << 31;
  caps.maxSendQueueDepth = 16384;
  caps.maxRecvQueueDepth = 16384;
  caps.maxCompletionQueueDepth = 1u << 20;
  caps.maxReadsInFlight = 16;
  caps.rdmaRead = true;
  caps.writeWithImm = true;
  caps.pageSize = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  caps.cheapSubRegistration = true;  // a table slot, no pinning (registerMemory below)
  return caps;
}

class ShmMemoryRegion final : public MemoryRegion {
 public:
  ShmMemoryRegion(std::shared_ptr<DomainState> state, void* address, size_t length, uint32_t index, uint32_t access,
                  SharedRegion segment = SharedRegion())
      : MemoryRegion(address, length, makeLkey(index, state->table().generation(index)),
                     makeRkey(index, state->table().generation(index)), access),
        state_(std::move(state)),
        index_(index),
        segment_(std::move(segment)) {}
  // Deregisters first so that no peer can reach the memory once it is freed.
  ~ShmMemoryRegion() override {
    state_->table().remove(index_);
    if (segment_.valid()) state_->removeSegment(reinterpret_cast<uintptr_t>(segment_.data()));
  }

 private:
  std::shared_ptr<DomainState> state_;
  uint32_t index_;
  SharedRegion segment_;
};

// Like ibv_reg_mr, refuse ranges with unmapped pages: mincore() fails with
// ENOMEM exactly then (optimistic group registration relies on it).
Status checkMapped(const void* address, size_t length, size_t page) {
  if (length == 0) return Status::ok();
  auto start = reinterpret_cast<uintptr_t>(address);
  uintptr_t first = start / page * page;
  size_t span = roundUp(start + length - first, page);
  // In pieces: a span across distant mappings (a struct type over separate
  // buffers) can be terabytes, and one residency byte per page of it was
  // gigabytes of memory before mincore could say "unmapped".
  constexpr size_t kPagesPerCheck = 4096;
  unsigned char residency[kPagesPerCheck];
  int error = 0;
  for (size_t done = 0; done < span && error == 0;) {
    const size_t piece = std::min(span - done, kPagesPerCheck * page);
    if (mincore(reinterpret_cast<void*>(first + done), piece, residency) != 0) error = errno;
    done += piece;
  }
  if (error == 0) return Status::ok();
  if (error == ENOMEM) {
    return makeError(Code::kInvalidArgument, "memory registration of ", address, " (", length,
                     " bytes): the range contains unmapped pages");
  }
  return makeError(Code::kSystem, "memory registration of ", address, " (", length, " bytes): mincore: ",
                   std::strerror(error));
}

// Measures what registering costs here (best of a few rounds of register +
// deregister over `memory`, 1 and 256 pages) for the cost model.
RegistrationCost calibrateRegistration(RegistrationTable& table, const uint8_t* memory, size_t page) {
  auto best = [&](size_t pages) {
    return fastestNs(5, [&] {
      if (checkMapped(memory, pages * page, page).isOk()) {
        auto index = table.add(reinterpret_cast<uintptr_t>(memory), pages * page, kLocalWrite);
        if (index.isOk()) table.remove(*index);
      }
    });
  };
  double one = best(1);
  double many = best(256);
  return {one, std::max(0.0, (many - one) / 255)};
}

Status checkAccessFlags(uint32_t access) {
  if ((access & ~kAllAccess) != 0) {
    return makeError(Code::kInvalidArgument, "memory registration: unknown access flags 0x", std::hex, access);
  }
  if ((access & kRemoteWrite) != 0 && (access & kLocalWrite) == 0) {
    return makeError(Code::kInvalidArgument, "memory registration: remote write requires local write (as ibv_reg_mr)");
  }
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<DomainState>> DomainState::create(const DomainOptions& options) {
  IBDT_ASSIGN_OR_RETURN(int64_t livenessMs, config::getInt("IBDT_SHM_LIVENESS_MS", 1, 60'000));
  std::shared_ptr<DomainState> state(new DomainState());
  state->caps_ = makeCaps();
  state->jobTag_ = options.jobTag.empty() ? strCat("pid", getpid()) : options.jobTag;
  state->pid_ = getpid();
  state->livenessInterval_ = std::chrono::milliseconds(livenessMs);
  IBDT_ASSIGN_OR_RETURN(int cma, config::getChoice("IBDT_SHM_CMA", {"auto", "off"}));
  state->crossMemoryAttach_ = cma == 0 && crossMemoryAttachAvailable();
  // ptrace permission only where cross-memory attach is used (issue 17).
  if (state->crossMemoryAttach_) letPeersAttach();
  if (cma == 1) {
    log::once(log::Level::kInfo, "shm-cma-off",
              "shm: IBDT_SHM_CMA=off: one-sided access to user memory takes the bounce path");
  }

  size_t regionsOffset = roundUp(sizeof(DomainHeader), kCacheLine);
  size_t doorbellsOffset = roundUp(regionsOffset + sizeof(RegionEntry) * kMaxRegions, kCacheLine);
  size_t activityOffset = roundUp(doorbellsOffset + sizeof(Doorbell) * kMaxCompletionQueues, kCacheLine);
  size_t total = activityOffset + sizeof(uint64_t) * (kMaxActivitySlots / 64);
  IBDT_ASSIGN_OR_RETURN(state->segment_, SharedRegion::create(strCat(state->jobTag_, "-domain"), total));
  auto* header = reinterpret_cast<DomainHeader*>(state->segment_.data());
  header->magic = kDomainMagic;
  header->version = kLayoutVersion;
  header->pid = static_cast<uint32_t>(state->pid_);
  header->regionCapacity = kMaxRegions;
  header->doorbellCapacity = kMaxCompletionQueues;
  header->regionsOffset = regionsOffset;
  header->doorbellsOffset = doorbellsOffset;
  header->activityCapacity = kMaxActivitySlots;
  header->activityOffset = activityOffset;
  // The segment is zero-filled: every region slot starts free (even sequence).
  state->table_ = RegistrationTable(reinterpret_cast<RegionEntry*>(state->segment_.data() + regionsOffset), kMaxRegions);
  state->doorbells_ = reinterpret_cast<Doorbell*>(state->segment_.data() + doorbellsOffset);
  state->activity_.bind(reinterpret_cast<std::atomic<uint64_t>*>(state->segment_.data() + activityOffset),
                        kMaxActivitySlots);
  state->caps_.registration = calibrateRegistration(state->table_, state->segment_.data(), state->caps_.pageSize);
  state->caps_.transfer = calibrateTransfer(state->caps_.pageSize, state->crossMemoryAttach_);
  for (uint32_t i = kMaxCompletionQueues; i > 0; --i) state->freeDoorbells_.push_back(i - 1);
  return state;
}

namespace {

bool insideRegion(const Sge& sge, const RegionSnapshot& region) {
  return sge.address >= region.address && sge.address - region.address <= region.length &&
         sge.length <= region.length - (sge.address - region.address);
}

}  // namespace

bool DomainState::checkLocal(const Sge& sge, uint32_t access, uint32_t* regionIndex) const {
  RegionSnapshot region;
  uint32_t index = lkeyIndex(sge.lkey);
  if (!readRegion(table_.ownEntries(), table_.capacity(), index, region)) return false;
  if ((region.generation & 0xffffu) != lkeyGeneration(sge.lkey)) return false;
  if ((region.access & access) != access) return false;
  if (!insideRegion(sge, region)) return false;
  if (regionIndex != nullptr) *regionIndex = index;
  return true;
}

bool DomainState::checkLocal(std::span<const Sge> sges, uint32_t access) const {
  // A gather list from one user buffer has one lkey: its region is read
  // once, every entry's range is still checked.
  RegionSnapshot region;
  bool haveRegion = false;
  uint32_t lkey = 0;
  for (const Sge& sge : sges) {
    if (sge.length == 0) continue;
    if (!haveRegion || sge.lkey != lkey) {
      lkey = sge.lkey;
      haveRegion = readRegion(table_.ownEntries(), table_.capacity(), lkeyIndex(lkey), region) &&
                   (region.generation & 0xffffu) == lkeyGeneration(lkey) && (region.access & access) == access;
      if (!haveRegion) return false;
    }
    if (!insideRegion(sge, region)) return false;
  }
  return true;
}

bool DomainState::checkOwnRegion(uint64_t rkey, uint64_t address, uint64_t length, uint32_t access) const {
  RegionSnapshot region;
  if (!readRegion(table_.ownEntries(), table_.capacity(), rkeyIndex(rkey), region)) return false;
  return region.generation == rkeyGeneration(rkey) && (region.access & access) == access &&
         address >= region.address && address - region.address <= region.length &&
         length <= region.length - (address - region.address);
}

Result<uint32_t> DomainState::allocateDoorbell() {
  if (freeDoorbells_.empty()) {
    return makeError(Code::kResource, "shm: more than ", kMaxCompletionQueues, " completion queues in one domain");
  }
  uint32_t index = freeDoorbells_.back();
  freeDoorbells_.pop_back();
  return index;
}

void DomainState::releaseDoorbell(uint32_t index) { freeDoorbells_.push_back(index); }

std::optional<SegmentPlace> DomainState::placeInSegment(uintptr_t address, size_t length) const {
  auto after = segments_.upper_bound(address);
  if (after == segments_.begin()) return std::nullopt;
  const auto& [base, segment] = *std::prev(after);
  uint64_t offset = address - base;
  if (offset > segment.length || length > segment.length - offset) return std::nullopt;
  return SegmentPlace{segment.fd, segment.inode, offset, segment.entry};
}

Result<std::shared_ptr<PeerDomain>> DomainState::peer(pid_t pid, int domainFd, uint64_t domainInode) {
  auto key = std::make_pair(pid, domainInode);
  auto found = peers_.find(key);
  if (found != peers_.end()) {
    if (auto existing = found->second.lock()) return existing;
  }
  IBDT_ASSIGN_OR_RETURN(std::unique_ptr<PeerDomain> attached, PeerDomain::attach(pid, domainFd, domainInode));
  std::shared_ptr<PeerDomain> shared(std::move(attached));
  peers_[key] = shared;
  return shared;
}

Result<std::unique_ptr<MemoryRegion>> ShmDomain::registerMemory(void* address, size_t length, uint32_t access) {
  IBDT_RETURN_IF_ERROR(checkAccessFlags(access));
  auto start = reinterpret_cast<uintptr_t>(address);
  if (start + length < start) {
    return makeError(Code::kOverflow, "memory registration: range at ", address, " of ", length, " bytes wraps");
  }
  // Part of our own allocation (a pool buffer): mapped by construction, and
  // its entry names the segment so that peers copy through their mapping.
  std::optional<SegmentPlace> place = state_->placeInSegment(start, length);
  if (!place) IBDT_RETURN_IF_ERROR(checkMapped(address, length, state_->caps().pageSize));
  IBDT_ASSIGN_OR_RETURN(uint32_t index, state_->table().add(start, length, access, place.value_or(SegmentPlace())));
  return std::unique_ptr<MemoryRegion>(new ShmMemoryRegion(state_, address, length, index, access));
}

Result<std::unique_ptr<MemoryRegion>> ShmDomain::allocateMemory(size_t length, uint32_t access) {
  IBDT_RETURN_IF_ERROR(checkAccessFlags(access));
  IBDT_ASSIGN_OR_RETURN(SharedRegion segment, SharedRegion::create(strCat(state_->jobTag(), "-memory"), length));
  uint8_t* data = segment.data();
  IBDT_ASSIGN_OR_RETURN(uint32_t index, state_->table().add(reinterpret_cast<uintptr_t>(data), length, access,
                                                             SegmentPlace{segment.fd(), segment.inode()}));
  state_->addSegment(reinterpret_cast<uintptr_t>(data), {segment.length(), segment.fd(), segment.inode(), index});
  return std::unique_ptr<MemoryRegion>(new ShmMemoryRegion(state_, data, length, index, access, std::move(segment)));
}

Result<std::unique_ptr<CompletionQueue>> ShmDomain::createCompletionQueue(uint32_t depth) {
  if (depth == 0 || depth > state_->caps().maxCompletionQueueDepth) {
    return makeError(Code::kInvalidArgument, "completion queue depth ", depth, " outside [1, ",
                     state_->caps().maxCompletionQueueDepth, "]");
  }
  IBDT_ASSIGN_OR_RETURN(uint32_t doorbell, state_->allocateDoorbell());
  return std::unique_ptr<CompletionQueue>(new ShmCompletionQueue(state_, doorbell, depth));
}

Result<std::unique_ptr<Endpoint>> ShmDomain::createEndpoint(CompletionQueue& sendQueue, CompletionQueue& recvQueue,
                                                           const EndpointOptions& options) {
  auto* send = dynamic_cast<ShmCompletionQueue*>(&sendQueue);
  auto* recv = dynamic_cast<ShmCompletionQueue*>(&recvQueue);
  if (send == nullptr || recv == nullptr || send->state() != state_.get() || recv->state() != state_.get()) {
    return makeError(Code::kInvalidArgument, "shm endpoint: completion queues must come from the same shm domain");
  }
  return ShmEndpoint::create(state_, *send, *recv, options);
}

Result<std::unique_ptr<Listener>> ShmDomain::createListener() { return ShmListener::create(state_); }

ProviderInfo probe() {
  ProviderInfo info;
  info.name = "shm";
  info.available = true;
  info.detail = crossMemoryAttachAvailable()
                    ? "processes of this host; cross-memory attach available"
                    : "processes of this host; cross-memory attach not permitted (bounce path for user memory)";
  return info;
}

Result<std::unique_ptr<Domain>> open(const DomainOptions& options) {
  IBDT_ASSIGN_OR_RETURN(std::shared_ptr<DomainState> state, DomainState::create(options));
  return std::unique_ptr<Domain>(new ShmDomain(std::move(state)));
}

}  // namespace ibdt::fabric::shm
