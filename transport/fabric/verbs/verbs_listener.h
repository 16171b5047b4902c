// transport/fabric/verbs/verbs_listener.h — the verbs connection inbox: a
// UD queue pair, as MVAPICH's on-demand connection manager uses one.
//
// One UD QP with its own completion queue and a registered buffer of
// receive and send slots; a peer's address (LID or GID, QP number, Q_Key)
// becomes an address handle once (addPeer). Datagrams are at most one
// slot; UD may drop them (no receive posted, congestion): the protocol
// above repeats its requests. Receives land 40 bytes in (the GRH).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/fabric/verbs/verbs_device.h"

namespace ibdt::fabric::verbs {

class VerbsListener final : public Listener {
 public:
  static Result<std::unique_ptr<Listener>> create(const SelectedPort& port, ibv_pd* pd, const std::string& device);
  ~VerbsListener() override;

  std::vector<uint8_t> address() const override;
  size_t maxDatagram() const override { return kSlot - kGrh; }
  Result<uint32_t> addPeer(std::span<const uint8_t> peerAddress) override;
  Status send(uint32_t handle, std::span<const uint8_t> datagram) override;
  Result<bool> receive(std::vector<uint8_t>& datagram) override;

 private:
  static constexpr uint32_t kRecvSlots = 128;
  static constexpr uint32_t kSendSlots = 32;
  static constexpr size_t kGrh = 40;
  static constexpr size_t kSlot = 296;  // GRH + 256 bytes of datagram

  struct PeerHandle {
    ibv_ah* ah = nullptr;
    uint32_t qpNumber = 0;
    uint32_t qkey = 0;
  };

  VerbsListener(const SelectedPort& port, std::string device) : port_(port), device_(std::move(device)) {}
  Status postReceive(uint32_t slot);
  // Takes what the completion queue holds: frees send slots, queues datagrams.
  Status drain();
  uint8_t* slot(uint32_t index) const;

  const SelectedPort& port_;
  std::string device_;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::unique_ptr<MemoryRegion> buffer_;  // kRecvSlots receive slots, then kSendSlots send slots
  uint32_t maxInline_ = 0;
  std::vector<uint32_t> freeSendSlots_;
  std::vector<PeerHandle> peers_;
  std::deque<std::vector<uint8_t>> arrived_;
};

}  // namespace ibdt::fabric::verbs
