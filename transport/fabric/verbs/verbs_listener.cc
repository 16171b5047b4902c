#include "transport/fabric/verbs/verbs_listener.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "transport/fabric/verbs/verbs_address.h"
#include "transport/fabric/verbs/verbs_memory_region.h"
#include "transport/fabric/verbs/verbs_status.h"

namespace ibdt::fabric::verbs {
namespace {

constexpr uint32_t kQkey = 0x1bd70c0d;  // high bit clear: not a controlled Q_Key
constexpr uint8_t kHopLimit = 64;
constexpr uint64_t kSendFlag = uint64_t{1} << 32;  // wr_id: send slot, else receive slot

}  // namespace

Result<std::unique_ptr<Listener>> VerbsListener::create(const SelectedPort& port, ibv_pd* pd,
                                                        const std::string& device) {
  std::unique_ptr<VerbsListener> listener(new VerbsListener(port, device));
  ibv_context* context = port.context.get();
  listener->cq_ = ibv_create_cq(context, static_cast<int>(kRecvSlots + kSendSlots), nullptr, nullptr, 0);
  if (listener->cq_ == nullptr) return verbsCallError("ibv_create_cq (listener)", errno, device);
  ibv_qp_init_attr init{};
  init.send_cq = listener->cq_;
  init.recv_cq = listener->cq_;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = kSendSlots;
  init.cap.max_recv_wr = kRecvSlots;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = 64;
  listener->qp_ = ibv_create_qp(pd, &init);
  if (listener->qp_ == nullptr) {
    init.cap.max_inline_data = 0;  // some devices have no inline on UD
    listener->qp_ = ibv_create_qp(pd, &init);
  }
  if (listener->qp_ == nullptr) return verbsCallError("ibv_create_qp(UD listener)", errno, device);
  listener->maxInline_ = init.cap.max_inline_data;

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = port.portNumber;
  attr.qkey = kQkey;
  if (int rc = ibv_modify_qp(listener->qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
    return verbsCallError("ibv_modify_qp(UD RESET->INIT)", rc, device);
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTR;
  if (int rc = ibv_modify_qp(listener->qp_, &attr, IBV_QP_STATE)) {
    return verbsCallError("ibv_modify_qp(UD INIT->RTR)", rc, device);
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  if (int rc = ibv_modify_qp(listener->qp_, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN)) {
    return verbsCallError("ibv_modify_qp(UD RTR->RTS)", rc, device);
  }
  IBDT_ASSIGN_OR_RETURN(listener->buffer_,
                        allocateRegistered(pd, device, (kRecvSlots + kSendSlots) * kSlot, kLocalWrite, false));
  for (uint32_t slot = 0; slot < kRecvSlots; ++slot) IBDT_RETURN_IF_ERROR(listener->postReceive(slot));
  for (uint32_t slot = kSendSlots; slot-- > 0;) listener->freeSendSlots_.push_back(kRecvSlots + slot);
  return std::unique_ptr<Listener>(std::move(listener));
}

VerbsListener::~VerbsListener() {
  // The QP first: it flushes into the CQ, which goes with it.
  if (qp_ != nullptr) {
    if (int rc = ibv_destroy_qp(qp_)) IBDT_LOG(kWarn, device_, ": ibv_destroy_qp (listener): ", std::strerror(rc));
  }
  for (PeerHandle& peer : peers_) ibv_destroy_ah(peer.ah);
  if (cq_ != nullptr) {
    if (int rc = ibv_destroy_cq(cq_)) IBDT_LOG(kWarn, device_, ": ibv_destroy_cq (listener): ", std::strerror(rc));
  }
}

uint8_t* VerbsListener::slot(uint32_t index) const {
  return static_cast<uint8_t*>(buffer_->address()) + size_t{index} * kSlot;
}

std::vector<uint8_t> VerbsListener::address() const {
  ListenerAddress address;
  address.ethernet = port_.roce;
  address.lid = port_.attr.lid;
  address.qpNumber = qp_->qp_num;
  address.qkey = kQkey;
  std::copy(std::begin(port_.gid.raw), std::end(port_.gid.raw), address.gid.begin());
  return encodeListenerAddress(address);
}

Result<uint32_t> VerbsListener::addPeer(std::span<const uint8_t> peerAddress) {
  IBDT_ASSIGN_OR_RETURN(ListenerAddress peer, decodeListenerAddress(peerAddress));
  if (peer.ethernet != port_.roce) {
    return makeError(Code::kProtocol, device_, ": listener of a peer on ", peer.ethernet ? "RoCE" : "InfiniBand",
                     ", this port is ", port_.roce ? "RoCE" : "InfiniBand");
  }
  ibv_ah_attr attr{};
  attr.port_num = port_.portNumber;
  if (port_.roce) {
    attr.is_global = 1;
    std::copy(peer.gid.begin(), peer.gid.end(), attr.grh.dgid.raw);
    attr.grh.sgid_index = port_.gidIndex;
    attr.grh.hop_limit = kHopLimit;
  } else {
    attr.dlid = peer.lid;
  }
  ibv_ah* ah = ibv_create_ah(qp_->pd, &attr);
  if (ah == nullptr) return verbsCallError(strCat("ibv_create_ah (listener QP ", peer.qpNumber, ")"), errno, device_);
  peers_.push_back(PeerHandle{ah, peer.qpNumber, peer.qkey});
  return static_cast<uint32_t>(peers_.size() - 1);
}

Status VerbsListener::postReceive(uint32_t index) {
  ibv_sge sge{reinterpret_cast<uint64_t>(slot(index)), static_cast<uint32_t>(kSlot), buffer_->lkey()};
  ibv_recv_wr wr{};
  wr.wr_id = index;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad)) return verbsCallError("ibv_post_recv (listener)", rc, device_);
  return Status::ok();
}

Status VerbsListener::drain() {
  ibv_wc completions[16];
  for (;;) {
    int got = ibv_poll_cq(cq_, 16, completions);
    if (got < 0) return makeError(Code::kSystem, device_, ": ibv_poll_cq (listener) failed");
    for (int i = 0; i < got; ++i) {
      const ibv_wc& wc = completions[i];
      if ((wc.wr_id & kSendFlag) != 0) {
        // A failed datagram is lost like a dropped one; the protocol repeats it.
        if (wc.status != IBV_WC_SUCCESS) {
          IBDT_LOG(kDebug, device_, ": listener send failed: ", ibv_wc_status_str(wc.status));
        }
        freeSendSlots_.push_back(static_cast<uint32_t>(wc.wr_id & ~kSendFlag));
        continue;
      }
      auto index = static_cast<uint32_t>(wc.wr_id);
      if (index >= kRecvSlots) return makeError(Code::kInternal, device_, ": listener completion for slot ", index);
      if (wc.status == IBV_WC_SUCCESS && wc.byte_len > kGrh && wc.byte_len <= kSlot) {
        const uint8_t* data = slot(index) + kGrh;
        arrived_.emplace_back(data, data + (wc.byte_len - kGrh));
      } else if (wc.status != IBV_WC_SUCCESS) {
        IBDT_LOG(kDebug, device_, ": listener receive failed: ", ibv_wc_status_str(wc.status));
        if (wc.status == IBV_WC_WR_FLUSH_ERR) continue;  // the QP is going away
      }
      IBDT_RETURN_IF_ERROR(postReceive(index));
    }
    if (got < 16) return Status::ok();
  }
}

Status VerbsListener::send(uint32_t handle, std::span<const uint8_t> datagram) {
  if (handle >= peers_.size()) return makeError(Code::kInvalidArgument, device_, ": listener: unknown peer ", handle);
  if (datagram.empty() || datagram.size() > maxDatagram()) {
    return makeError(Code::kInvalidArgument, device_, ": listener: datagram of ", datagram.size(), " bytes (1 to ",
                     maxDatagram(), " allowed)");
  }
  if (freeSendSlots_.empty()) IBDT_RETURN_IF_ERROR(drain());
  if (freeSendSlots_.empty()) return makeError(Code::kAgain, device_, ": listener: every send slot is in flight");
  uint32_t index = freeSendSlots_.back();
  uint8_t* data = slot(index);
  std::memcpy(data, datagram.data(), datagram.size());
  const PeerHandle& peer = peers_[handle];
  ibv_sge sge{reinterpret_cast<uint64_t>(data), static_cast<uint32_t>(datagram.size()), buffer_->lkey()};
  ibv_send_wr wr{};
  wr.wr_id = kSendFlag | index;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | (datagram.size() <= maxInline_ ? IBV_SEND_INLINE : 0);
  wr.wr.ud.ah = peer.ah;
  wr.wr.ud.remote_qpn = peer.qpNumber;
  wr.wr.ud.remote_qkey = peer.qkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad)) return verbsCallError("ibv_post_send (listener)", rc, device_);
  freeSendSlots_.pop_back();
  return Status::ok();
}

Result<bool> VerbsListener::receive(std::vector<uint8_t>& datagram) {
  if (arrived_.empty()) IBDT_RETURN_IF_ERROR(drain());
  if (arrived_.empty()) return false;
  datagram = std::move(arrived_.front());
  arrived_.pop_front();
  return true;
}

}  // namespace ibdt::fabric::verbs
