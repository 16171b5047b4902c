// transport/fabric/shm/listener.h — the shm provider's connection inbox: a
// bounded multi-producer single-consumer ring of datagrams in a memfd
// segment that every peer maps (Vyukov's bounded queue: a producer claims a
// cell by compare-and-swap on the enqueue index, fills it and publishes it
// through the cell's sequence word; the owner alone dequeues).
//
// Nothing is lost between live processes; a full ring answers kAgain. A
// peer that exited is reported by send() as kPeerFailed (its pidfd). A
// producer killed between claiming a cell and publishing it would stall the
// ring: the owner's peers then see their requests unanswered and time out.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/fabric/shm/layout.h"
#include "transport/fabric/shm/peer.h"
#include "base/shared_region.h"

namespace ibdt::fabric::shm {

class DomainState;

constexpr uint32_t kListenerMagic = 0x4942444c;  // "IBDL"
constexpr uint32_t kListenerCells = 64;
constexpr uint32_t kMaxDatagram = 240;

struct ListenerCell {
  std::atomic<uint64_t> sequence{0};  // == index: free for the producer of that index; index + 1: published
  uint32_t length = 0;
  uint32_t reserved = 0;
  uint8_t data[kMaxDatagram];
};

struct ListenerHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t pid;
  uint32_t cells;
  uint32_t cellSize;
  uint32_t reserved;
  alignas(kCacheLine) std::atomic<uint64_t> enqueue{0};  // claimed by producers (CAS)
  alignas(kCacheLine) std::atomic<uint64_t> dequeue{0};  // advanced by the owner
};

class ShmListener final : public Listener {
 public:
  static Result<std::unique_ptr<Listener>> create(std::shared_ptr<DomainState> state);

  std::vector<uint8_t> address() const override;
  size_t maxDatagram() const override { return kMaxDatagram; }
  Result<uint32_t> addPeer(std::span<const uint8_t> peerAddress) override;
  Status send(uint32_t handle, std::span<const uint8_t> datagram) override;
  Result<bool> receive(std::vector<uint8_t>& datagram) override;

 private:
  struct PeerInbox {
    std::shared_ptr<PeerDomain> domain;  // liveness (pidfd)
    SharedRegion segment;
    ListenerHeader* header = nullptr;
    ListenerCell* cells = nullptr;
  };

  explicit ShmListener(std::shared_ptr<DomainState> state) : domain_(std::move(state)) {}

  std::shared_ptr<DomainState> domain_;
  SharedRegion segment_;
  ListenerHeader* header_ = nullptr;
  ListenerCell* cells_ = nullptr;
  std::vector<PeerInbox> peers_;
};

}  // namespace ibdt::fabric::shm
