#include "transport/fabric/shm/listener.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "transport/fabric/shm/domain.h"

namespace ibdt::fabric::shm {
namespace {

// What a peer needs to map the inbox (same host, native byte order).
struct ListenerAddress {
  uint32_t magic;
  uint32_t version;
  uint32_t pid;
  int32_t domainFd;
  int32_t listenerFd;
  uint32_t reserved;
  uint64_t domainInode;
  uint64_t listenerInode;
};

size_t cellsOffset() { return roundUp(sizeof(ListenerHeader), kCacheLine); }

}  // namespace

Result<std::unique_ptr<Listener>> ShmListener::create(std::shared_ptr<DomainState> state) {
  std::unique_ptr<ShmListener> listener(new ShmListener(std::move(state)));
  size_t total = cellsOffset() + sizeof(ListenerCell) * kListenerCells;
  IBDT_ASSIGN_OR_RETURN(listener->segment_,
                        SharedRegion::create(strCat(listener->domain_->jobTag(), "-listener"), total));
  auto* header = new (listener->segment_.data()) ListenerHeader();
  header->magic = kListenerMagic;
  header->version = kLayoutVersion;
  header->pid = static_cast<uint32_t>(getpid());
  header->cells = kListenerCells;
  header->cellSize = sizeof(ListenerCell);
  auto* cells = reinterpret_cast<ListenerCell*>(listener->segment_.data() + cellsOffset());
  for (uint32_t i = 0; i < kListenerCells; ++i) new (&cells[i]) ListenerCell();
  for (uint32_t i = 0; i < kListenerCells; ++i) cells[i].sequence.store(i, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  listener->header_ = header;
  listener->cells_ = cells;
  return std::unique_ptr<Listener>(std::move(listener));
}

std::vector<uint8_t> ShmListener::address() const {
  ListenerAddress blob{kListenerMagic,        kLayoutVersion,         static_cast<uint32_t>(domain_->pid()),
                       domain_->segmentFd(),  segment_.fd(),          0,
                       domain_->segmentInode(), segment_.inode()};
  std::vector<uint8_t> bytes(sizeof blob);
  std::memcpy(bytes.data(), &blob, sizeof blob);
  return bytes;
}

Result<uint32_t> ShmListener::addPeer(std::span<const uint8_t> peerAddress) {
  ListenerAddress blob{};
  if (peerAddress.size() != sizeof blob) {
    return makeError(Code::kProtocol, "shm listener: peer address of ", peerAddress.size(), " bytes, expected ",
                     sizeof blob, " (not an shm listener address?)");
  }
  std::memcpy(&blob, peerAddress.data(), sizeof blob);
  if (blob.magic != kListenerMagic || blob.version != kLayoutVersion) {
    return makeError(Code::kProtocol, "shm listener: peer address has magic 0x", std::hex, blob.magic, " version ",
                     std::dec, blob.version, " (expected an shm listener of layout version ", kLayoutVersion, ")");
  }
  PeerInbox inbox;
  auto pid = static_cast<pid_t>(blob.pid);
  IBDT_ASSIGN_OR_RETURN(inbox.domain, domain_->peer(pid, blob.domainFd, blob.domainInode));
  auto segment = SharedRegion::openPeer(pid, blob.listenerFd, blob.listenerInode);
  if (!segment.isOk()) {
    return std::move(segment).takeStatus().withContext(strCat("mapping the listener of process ", pid));
  }
  inbox.segment = std::move(segment).value();
  auto* header = reinterpret_cast<ListenerHeader*>(inbox.segment.data());
  bool sane = inbox.segment.length() >= cellsOffset() + sizeof(ListenerCell) * kListenerCells &&
              header->magic == kListenerMagic && header->version == kLayoutVersion &&
              header->cells == kListenerCells && header->cellSize == sizeof(ListenerCell);
  if (!sane) return makeError(Code::kProtocol, "shm listener of process ", pid, " has an unexpected layout");
  inbox.header = header;
  inbox.cells = reinterpret_cast<ListenerCell*>(inbox.segment.data() + cellsOffset());
  peers_.push_back(std::move(inbox));
  return static_cast<uint32_t>(peers_.size() - 1);
}

Status ShmListener::send(uint32_t handle, std::span<const uint8_t> datagram) {
  if (handle >= peers_.size()) return makeError(Code::kInvalidArgument, "shm listener: unknown peer handle ", handle);
  if (datagram.empty() || datagram.size() > kMaxDatagram) {
    return makeError(Code::kInvalidArgument, "shm listener: datagram of ", datagram.size(), " bytes (1 to ",
                     kMaxDatagram, " allowed)");
  }
  PeerInbox& peer = peers_[handle];
  if (!peer.domain->alive()) {
    return makeError(Code::kPeerFailed, "shm listener: process ", peer.domain->pid(), " has exited");
  }
  uint64_t position = peer.header->enqueue.load(std::memory_order_relaxed);
  for (;;) {
    ListenerCell& cell = peer.cells[position % kListenerCells];
    uint64_t sequence = cell.sequence.load(std::memory_order_acquire);
    auto lag = static_cast<int64_t>(sequence - position);
    if (lag < 0) return makeError(Code::kAgain, "shm listener: the inbox of process ", peer.domain->pid(), " is full");
    if (lag > 0) {
      position = peer.header->enqueue.load(std::memory_order_relaxed);  // another producer took it
      continue;
    }
    if (!peer.header->enqueue.compare_exchange_weak(position, position + 1, std::memory_order_relaxed)) continue;
    cell.length = static_cast<uint32_t>(datagram.size());
    std::memcpy(cell.data, datagram.data(), datagram.size());
    cell.sequence.store(position + 1, std::memory_order_release);
    return Status::ok();
  }
}

Result<bool> ShmListener::receive(std::vector<uint8_t>& datagram) {
  uint64_t position = header_->dequeue.load(std::memory_order_relaxed);
  ListenerCell& cell = cells_[position % kListenerCells];
  if (cell.sequence.load(std::memory_order_acquire) != position + 1) return false;
  // Peers write this memory: never trust the length beyond the cell.
  uint32_t length = std::min<uint32_t>(cell.length, kMaxDatagram);
  datagram.assign(cell.data, cell.data + length);
  cell.sequence.store(position + kListenerCells, std::memory_order_release);
  header_->dequeue.store(position + 1, std::memory_order_relaxed);
  return true;
}

}  // namespace ibdt::fabric::shm
