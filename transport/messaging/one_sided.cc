// Persistent one-sided puts: registration and key exchange at init, WRITEs
// and a zero-byte notification per run (one_sided.h).
#include "transport/messaging/one_sided.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {
namespace {

const datatype::Datatype& byteType() {
  static const datatype::Datatype type = datatype::Datatype::of<std::byte>();
  return type;
}

Status checkRange(const void* buf, int64_t bytes, int peer, int size, std::string_view what) {
  if (bytes < 0) return makeError(Code::kInvalidArgument, what, ": negative length ", bytes);
  if (buf == nullptr && bytes > 0) return makeError(Code::kInvalidArgument, what, ": null buffer of ", bytes, " bytes");
  if (peer < 0 || peer >= size) return makeError(Code::kInvalidArgument, what, ": no rank ", peer, " in ", size);
  return Status::ok();
}

// The key of a target's buffer (none registered for 0 bytes: an empty key).
fabric::RemoteKey keyOf(const OneSidedChannel& channel) {
  if (!channel.region) return {};
  return {reinterpret_cast<uint64_t>(channel.local), static_cast<uint64_t>(channel.bytes), channel.region.rkey()};
}

}  // namespace

OneSided::~OneSided() {
  for (auto& [id, weak] : channels_) {
    if (auto channel = weak.lock()) {
      channel->region.reset();
      channel->running.reset();
    }
  }
}

Result<std::shared_ptr<OneSidedChannel>> OneSided::newChannel(const void* buf, int64_t bytes, int peer,
                                                              uint32_t access) {
  auto channel = std::make_shared<OneSidedChannel>();
  channel->id = nextId_++;
  channel->local = static_cast<const std::byte*>(buf);
  channel->bytes = bytes;
  channel->peer = peer;
  if (bytes > 0) {
    IBDT_ASSIGN_OR_RETURN(channel->region, host_.acquireRegion(buf, static_cast<size_t>(bytes), access));
  }
  // Channels of requests the caller dropped leave the map here, not on the hot path.
  std::erase_if(channels_, [](const auto& entry) { return entry.second.expired(); });
  channels_[channel->id] = channel;
  return channel;
}

static_assert(Context::kOneSidedKeyBytes == fabric::RemoteKey::kWireSize, "the public key size is the fabric's");

Result<Context::OneSidedKey> OneSided::rebind(Operation& op, const void* buf) {
  OneSidedChannel& channel = *op.oneSided;
  if (buf != channel.local) {
    if (buf == nullptr && channel.bytes > 0) return makeError(Code::kInvalidArgument, "rebindOneSided: null buffer");
    memory::RegionRef region;
    if (channel.bytes > 0) {
      const uint32_t access = op.isSend ? fabric::kLocalWrite : fabric::kLocalWrite | fabric::kRemoteWrite;
      IBDT_ASSIGN_OR_RETURN(region, host_.acquireRegion(buf, static_cast<size_t>(channel.bytes), access));
    }
    channel.region = std::move(region);
    channel.local = static_cast<const std::byte*>(buf);
  }
  Context::OneSidedKey wire{};
  keyOf(channel).serialize(wire);
  return wire;
}

Status OneSided::retarget(Operation& op, std::span<const uint8_t> wire) {
  OneSidedChannel& channel = *op.oneSided;
  IBDT_ASSIGN_OR_RETURN(fabric::RemoteKey key, fabric::RemoteKey::parse(wire));
  if (key.length != static_cast<uint64_t>(channel.bytes)) {
    return makeError(Code::kInvalidArgument, "retargetPut: ", channel.bytes, " bytes for rank ", channel.peer,
                     ", whose exposed buffer has ", key.length);
  }
  channel.remote = key;
  return Status::ok();
}

Result<std::shared_ptr<Operation>> OneSided::expose(void* buf, int64_t bytes, int origin, int tag,
                                                    uint32_t communicator, Deadline deadline) {
  IBDT_RETURN_IF_ERROR(checkRange(buf, bytes, origin, context_.size(), "exposeInit"));
  IBDT_ASSIGN_OR_RETURN(auto channel, newChannel(buf, bytes, origin, fabric::kLocalWrite | fabric::kRemoteWrite));
  keyOf(*channel).serialize(channel->keyWire);
  IBDT_ASSIGN_OR_RETURN(channel->keySend,
                        context_.prepareSend(channel->keyWire.data(), static_cast<int64_t>(channel->keyWire.size()),
                                             byteType(), origin, tag, communicator));
  IBDT_RETURN_IF_ERROR(context_.postSend(channel->keySend).withContext("exposeInit: sending the key"));
  // The key leaves before we return: over a lazy connection it would
  // otherwise wait for our next progress call, while the origin blocks in
  // putInit for it and we may block elsewhere (a barrier, say).
  Status sent = context_.progressUntilDone(*channel->keySend, deadline, "exposeInit: sending the key");
  if (!sent.isOk()) {
    unsentKeys_.push_back(channel);  // the send still reads keyWire
    return sent;
  }
  IBDT_RETURN_IF_ERROR(channel->keySend->status);
  IBDT_ASSIGN_OR_RETURN(auto notification, context_.prepareRecv(nullptr, 0, byteType(), origin, tag, communicator));
  notification->oneSided = std::move(channel);
  notification->done = true;  // persistent: inactive until started
  return notification;
}

Result<std::shared_ptr<Operation>> OneSided::put(const void* buf, int64_t bytes, int target, int tag,
                                                 uint32_t communicator, Deadline deadline) {
  IBDT_RETURN_IF_ERROR(checkRange(buf, bytes, target, context_.size(), "putInit"));
  IBDT_ASSIGN_OR_RETURN(auto channel, newChannel(buf, bytes, target, fabric::kLocalWrite));
  std::array<uint8_t, fabric::RemoteKey::kWireSize> wire{};
  IBDT_ASSIGN_OR_RETURN(auto keyRecv, context_.prepareRecv(wire.data(), static_cast<int64_t>(wire.size()), byteType(),
                                                           target, tag, communicator));
  IBDT_RETURN_IF_ERROR(context_.postRecv(keyRecv));
  Status waited = context_.progressUntilDone(*keyRecv, deadline, "putInit");
  if (waited.code() == Code::kTimeout) {
    (void)context_.cancel(*keyRecv);
    return makeError(Code::kTimeout, "putInit: rank ", target, " sent no key in time");
  }
  IBDT_RETURN_IF_ERROR(waited);
  IBDT_RETURN_IF_ERROR(Status(keyRecv->status).withContext(strCat("putInit: the key of rank ", target)));
  IBDT_ASSIGN_OR_RETURN(channel->remote, fabric::RemoteKey::parse(wire));
  if (channel->remote.length != static_cast<uint64_t>(bytes)) {
    return makeError(Code::kInvalidArgument, "putInit: ", bytes, " bytes for rank ", target,
                     ", whose exposed buffer has ", channel->remote.length);
  }
  IBDT_ASSIGN_OR_RETURN(auto op, context_.prepareSend(nullptr, 0, byteType(), target, tag, communicator));
  op->oneSided = std::move(channel);
  op->done = true;
  return op;
}

Status OneSided::start(const std::shared_ptr<Operation>& op) {
  OneSidedChannel& channel = *op->oneSided;
  const Status& failure = host_.peerFailure(channel.peer);
  if (!failure.isOk()) return Status(failure).withContext(strCat("put to rank ", channel.peer));
  channel.failure = Status();
  if (channel.bytes == 0) {
    channel.running = op;
    finishWrites(channel);
    return Status::ok();
  }
  IBDT_ASSIGN_OR_RETURN(bool posted, postWrites(channel));
  channel.running = op;
  if (!posted) waiting_.push_back(op->oneSided);
  return Status::ok();
}

Result<bool> OneSided::postWrites(OneSidedChannel& channel) {
  uint64_t most = std::min<uint64_t>(host_.maxWriteBytes() > 0 ? host_.maxWriteBytes() : UINT32_MAX, UINT32_MAX);
  auto bytes = static_cast<uint64_t>(channel.bytes);
  auto writes = static_cast<uint32_t>((bytes + most - 1) / most);
  uint32_t depth = host_.sendQueueDepth();
  if (writes > depth) {
    // Beyond the whole queue: such a put is not worth a second, split path.
    return makeError(Code::kResource, "put of ", bytes, " bytes needs ", writes, " writes, the send queue holds ",
                     depth);
  }
  requests_.clear();
  sges_.clear();
  sges_.reserve(writes);  // the requests point into it
  for (uint64_t offset = 0; offset < bytes; offset += most) {
    uint64_t length = std::min(most, bytes - offset);
    sges_.push_back(
        {reinterpret_cast<uint64_t>(channel.local) + offset, static_cast<uint32_t>(length), channel.region.lkey()});
    fabric::SendRequest request;
    request.id = wrId(WrKind::kOneSided, channel.id);
    request.opcode = fabric::Opcode::kWrite;
    request.sgList = &sges_.back();
    request.numSge = 1;
    request.remoteAddress = channel.remote.address + offset;
    request.rkey = channel.remote.rkey;
    requests_.push_back(request);
  }
  IBDT_ASSIGN_OR_RETURN(bool posted, host_.postAllOrNone(channel.peer, requests_));
  if (posted) channel.writesLeft = writes;
  return posted;
}

void OneSided::writeCompleted(uint32_t id, Status status) {
  auto found = channels_.find(id);
  if (found == channels_.end()) return;
  auto channel = found->second.lock();
  if (!channel || channel->writesLeft == 0) return;
  if (channel->failure.isOk() && !status.isOk()) channel->failure = std::move(status);
  if (--channel->writesLeft == 0) finishWrites(*channel);
}

void OneSided::finishWrites(OneSidedChannel& channel) {
  std::shared_ptr<Operation> op = std::move(channel.running);
  if (!op) return;
  Status status = channel.failure;
  // The data is in the target's memory: tell it (a zero-byte eager message
  // behind which nothing of this run remains).
  if (status.isOk()) status = context_.postSend(op);
  if (!status.isOk()) context_.complete(*op, std::move(status));
}

Status OneSided::advance() {
  for (size_t i = 0; i < waiting_.size();) {
    auto channel = waiting_[i].lock();
    if (!channel || !channel->running) {
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    const Status& failure = host_.peerFailure(channel->peer);
    bool done = false;
    if (!failure.isOk()) {
      channel->failure = Status(failure).withContext(strCat("put to rank ", channel->peer));
      finishWrites(*channel);
      done = true;
    } else {
      IBDT_ASSIGN_OR_RETURN(done, postWrites(*channel));
    }
    if (done) {
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return Status::ok();
}

}  // namespace ibdt::messaging
