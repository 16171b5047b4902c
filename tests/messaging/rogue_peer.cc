#include "messaging/rogue_peer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/backoff.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging::testing {
namespace {

constexpr uint32_t kSlots = 64;           // receive buffers per peer
constexpr size_t kSendBytes = 1 << 20;    // largest crafted message or write
constexpr size_t kMemoryBytes = 4 << 20;  // offered to the victim's writes
constexpr auto kWait = std::chrono::seconds(30);

fabric::EndpointOptions endpointOptions() {
  fabric::EndpointOptions options;
  options.sendQueueDepth = 64;
  options.recvQueueDepth = kSlots;
  return options;
}

uint64_t recvId(int peer, uint32_t slot) { return (uint64_t{static_cast<uint32_t>(peer)} << 32) | slot; }

}  // namespace

RoguePeer::RoguePeer(fabric::Domain& domain, int size, const Options& options)
    : domain_(domain),
      slotSize_(sizeof(wire::Header) + sizeof(wire::Envelope) + static_cast<size_t>(options.eagerLimit)),
      slots_(kSlots),
      endpoints_(static_cast<size_t>(size)),
      recvSlots_(static_cast<size_t>(size)),
      arrived_(static_cast<size_t>(size)) {}

RoguePeer::~RoguePeer() = default;

Status RoguePeer::createQueues(int size) {
  IBDT_ASSIGN_OR_RETURN(sendQueue_, domain_.createCompletionQueue(static_cast<uint32_t>(size) * 64));
  IBDT_ASSIGN_OR_RETURN(recvQueue_, domain_.createCompletionQueue(static_cast<uint32_t>(size) * kSlots));
  IBDT_ASSIGN_OR_RETURN(sendBuffer_, domain_.allocateMemory(kSendBytes, fabric::kLocalWrite));
  IBDT_ASSIGN_OR_RETURN(memory_, domain_.allocateMemory(kMemoryBytes, fabric::kLocalWrite | fabric::kRemoteWrite |
                                                                         fabric::kRemoteRead));
  return Status::ok();
}

// As a Context does: every receive buffer posted before the address leaves.
Status RoguePeer::prepare(fabric::Endpoint& endpoint, int peer) {
  IBDT_ASSIGN_OR_RETURN(recvSlots_[static_cast<size_t>(peer)],
                        domain_.allocateMemory(slots_ * slotSize_, fabric::kLocalWrite));
  for (uint32_t slot = 0; slot < slots_; ++slot) IBDT_RETURN_IF_ERROR(postSlot(endpoint, peer, slot));
  return Status::ok();
}

Result<std::unique_ptr<RoguePeer>> RoguePeer::create(fabric::Domain& domain, int rank, int size,
                                                     const fabric::Allgather& allgather, const Options& options) {
  std::unique_ptr<RoguePeer> rogue(new RoguePeer(domain, size, options));
  IBDT_RETURN_IF_ERROR(rogue->createQueues(size));
  fabric::MeshOptions mesh;
  mesh.endpoint = endpointOptions();
  RoguePeer* self = rogue.get();
  mesh.prepare = [self](fabric::Endpoint& endpoint, int peer) { return self->prepare(endpoint, peer); };
  IBDT_ASSIGN_OR_RETURN(rogue->endpoints_, fabric::connectMesh(domain, *rogue->sendQueue_, *rogue->recvQueue_, rank,
                                                               size, allgather, mesh));
  return rogue;
}

Result<std::unique_ptr<RoguePeer>> RoguePeer::createLazy(fabric::Domain& domain, int rank, int size,
                                                         const fabric::Allgather& allgather, const Options& options) {
  std::unique_ptr<RoguePeer> rogue(new RoguePeer(domain, size, options));
  IBDT_RETURN_IF_ERROR(rogue->createQueues(size));
  IBDT_ASSIGN_OR_RETURN(rogue->listener_, domain.createListener());
  // What a lazy Context publishes: its nonce and datagram key (rank 0's are
  // the job's), then its listener's address.
  uint64_t nonce = 0x526f677565ull ^ static_cast<uint64_t>(rank);
  auto key = connection::datagramKeyBytes(connection::newDatagramKey());
  auto address = rogue->listener_->address();
  std::vector<uint8_t> mine(sizeof nonce + key.size() + address.size());
  std::memcpy(mine.data(), &nonce, sizeof nonce);
  std::copy(key.begin(), key.end(), mine.begin() + sizeof nonce);
  std::copy(address.begin(), address.end(), mine.begin() + static_cast<long>(sizeof nonce + key.size()));
  IBDT_ASSIGN_OR_RETURN(auto all, allgather(mine));
  if (all.size() != static_cast<size_t>(size) || all[0].size() < sizeof nonce) {
    return makeError(Code::kProtocol, "rogue: the listener exchange returned ", all.size(), " entries");
  }
  constexpr size_t kHead = sizeof nonce + connection::DatagramKey::kBytes;
  if (all[0].size() < kHead) return makeError(Code::kProtocol, "rogue: rank 0 published no datagram key");
  std::memcpy(&rogue->job_, all[0].data(), sizeof rogue->job_);
  rogue->key_ = connection::datagramKeyFrom(std::span(all[0]).subspan<sizeof nonce, connection::DatagramKey::kBytes>());
  for (auto& entry : all) rogue->listenerAddresses_.emplace_back(entry.begin() + kHead, entry.end());
  rogue->listenerHandles_.resize(static_cast<size_t>(size));
  return rogue;
}

Status RoguePeer::sendDatagram(int peer, std::span<const uint8_t> datagram) {
  // Junk too long to carry a tag goes as it is: it is dropped either way.
  if (datagram.size() + connection::kTagBytes > listener_->maxDatagram()) return sendRawDatagram(peer, datagram);
  std::vector<uint8_t> sealed(datagram.begin(), datagram.end());
  connection::seal(sealed, key_);
  return sendRawDatagram(peer, sealed);
}

Status RoguePeer::sendRawDatagram(int peer, std::span<const uint8_t> datagram) {
  auto& handle = listenerHandles_[static_cast<size_t>(peer)];
  if (!handle) {
    IBDT_ASSIGN_OR_RETURN(handle, listener_->addPeer(listenerAddresses_[static_cast<size_t>(peer)]));
  }
  return listener_->send(*handle, datagram);
}

Result<std::vector<uint8_t>> RoguePeer::awaitDatagram() {
  std::vector<uint8_t> datagram;
  Backoff backoff;
  for (auto deadline = Deadline::after(kWait);;) {
    IBDT_ASSIGN_OR_RETURN(bool got, listener_->receive(datagram));
    if (got) {
      IBDT_ASSIGN_OR_RETURN(auto body, connection::unseal(datagram, key_));
      return std::vector<uint8_t>(body.begin(), body.end());
    }
    if (deadline.expired()) return makeError(Code::kTimeout, "rogue: no datagram arrived");
    pump();
    backoff.pause();
  }
}

Result<std::vector<uint8_t>> RoguePeer::endpointAddress(int peer) {
  auto& endpoint = endpoints_[static_cast<size_t>(peer)];
  if (!endpoint) {
    IBDT_ASSIGN_OR_RETURN(endpoint, domain_.createEndpoint(*sendQueue_, *recvQueue_, endpointOptions()));
    IBDT_RETURN_IF_ERROR(prepare(*endpoint, peer));
  }
  return endpoint->address();
}

Status RoguePeer::connect(int peer, std::span<const uint8_t> address) {
  IBDT_RETURN_IF_ERROR(endpointAddress(peer).status());
  return endpoints_[static_cast<size_t>(peer)]->connect(address);
}

Status RoguePeer::postSlot(fabric::Endpoint& endpoint, int peer, uint32_t slot) {
  auto& slots = recvSlots_[static_cast<size_t>(peer)];
  fabric::Sge sge{reinterpret_cast<uint64_t>(slots->address()) + slot * slotSize_, static_cast<uint32_t>(slotSize_),
                  slots->lkey()};
  fabric::RecvRequest request;
  request.id = recvId(peer, slot);
  request.sgList = &sge;
  request.numSge = 1;
  return endpoint.postRecv(request);
}

void RoguePeer::poll() {
  fabric::Completion batch[16];
  size_t got = recvQueue_->poll(batch);
  for (size_t i = 0; i < got; ++i) {
    const fabric::Completion& completion = batch[i];
    if (completion.status != fabric::CompletionStatus::kSuccess) continue;  // flushed at teardown
    int peer = static_cast<int>(completion.id >> 32);
    auto slot = static_cast<uint32_t>(completion.id);
    RogueMessage message;
    if (completion.opcode == fabric::Opcode::kRecvWriteWithImm) {
      message.writeWithImm = true;
      message.immData = completion.immData;
    } else {
      const auto* data =
          static_cast<const uint8_t*>(recvSlots_[static_cast<size_t>(peer)]->address()) + slot * slotSize_;
      message.bytes.assign(data, data + completion.byteLength);
    }
    arrived_[static_cast<size_t>(peer)].push_back(std::move(message));
    Status reposted = postSlot(*endpoints_[static_cast<size_t>(peer)], peer, slot);
    if (!reposted.isOk() && sendFailure_.isOk()) sendFailure_ = reposted;
  }
  got = sendQueue_->poll(batch);
  for (size_t i = 0; i < got; ++i) {
    ++sendsCompleted_;
    if (batch[i].status != fabric::CompletionStatus::kSuccess && sendFailure_.isOk()) {
      sendFailure_ = fabric::completionError(batch[i], "the victim");
    }
  }
}

Status RoguePeer::waitSend() {
  uint64_t target = sendsCompleted_ + 1;
  Backoff backoff;
  for (auto deadline = Deadline::after(kWait); sendsCompleted_ < target;) {
    if (deadline.expired()) return makeError(Code::kTimeout, "rogue: a send did not complete");
    poll();
    pump();
    backoff.pause();
  }
  Status failure = std::move(sendFailure_);
  sendFailure_ = Status::ok();
  return failure;
}

Status RoguePeer::post(int peer, std::span<const uint8_t> bytes, fabric::SendRequest request) {
  if (bytes.size() > kSendBytes)
    return makeError(Code::kInvalidArgument, "rogue: ", bytes.size(), " bytes is too long");
  std::copy(bytes.begin(), bytes.end(), static_cast<uint8_t*>(sendBuffer_->address()));
  fabric::Sge sge{reinterpret_cast<uint64_t>(sendBuffer_->address()), static_cast<uint32_t>(bytes.size()),
                  sendBuffer_->lkey()};
  request.sgList = &sge;
  request.numSge = 1;
  IBDT_RETURN_IF_ERROR(endpoints_[static_cast<size_t>(peer)]->postSend(request));
  return waitSend();
}

Status RoguePeer::send(int peer, std::span<const uint8_t> bytes) {
  fabric::SendRequest request;
  request.opcode = fabric::Opcode::kSend;
  return post(peer, bytes, request);
}

Status RoguePeer::writeWithImm(int peer, std::span<const uint8_t> bytes, uint64_t address, uint64_t rkey,
                               uint32_t imm) {
  fabric::SendRequest request;
  request.opcode = fabric::Opcode::kWriteWithImm;
  request.remoteAddress = address;
  request.rkey = rkey;
  request.immData = imm;
  return post(peer, bytes, request);
}

Result<RogueMessage> RoguePeer::receive(int peer) {
  auto& queue = arrived_[static_cast<size_t>(peer)];
  Backoff backoff;
  for (auto deadline = Deadline::after(kWait); queue.empty();) {
    if (deadline.expired()) return makeError(Code::kTimeout, "rogue: nothing arrived from rank ", peer);
    poll();
    pump();
    backoff.pause();
  }
  RogueMessage message = std::move(queue.front());
  queue.pop_front();
  return message;
}

}  // namespace ibdt::messaging::testing
