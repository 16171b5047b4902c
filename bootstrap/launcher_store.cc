#include "bootstrap/launcher_store.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "bootstrap/fd_io.h"
#include "bootstrap/store_wire.h"

namespace ibdt::bootstrap {
namespace {

constexpr std::string_view kPeerName = "ibdt-run store";
// How long past an operation's own deadline we wait for the server to report
// its timeout before declaring the server unresponsive.
constexpr auto kServerGrace = std::chrono::seconds(5);

Result<std::string> readFrame(int fd, Deadline deadline) {
  char header[4];
  IBDT_RETURN_IF_ERROR(readExact(fd, header, sizeof(header), deadline, kPeerName));
  uint32_t length = wire::frameLength(header);
  if (length > wire::kMaxFrame) return makeError(Code::kProtocol, kPeerName, ": frame of ", length, " bytes");
  std::string payload(length, '\0');
  IBDT_RETURN_IF_ERROR(readExact(fd, payload.data(), length, deadline, kPeerName));
  return payload;
}

// The server's word on where we sit; a placement no job can have would
// break every index computed from it later.
Status checkPlacement(const Placement& p) {
  bool possible = p.size >= 1 && p.rank >= 0 && p.rank < p.size && p.localSize >= 1 && p.localSize <= p.size &&
                  p.localRank >= 0 && p.localRank < p.localSize && p.numNodes >= 1 && p.numNodes <= p.size &&
                  p.nodeId >= 0 && p.nodeId < p.numNodes;
  if (possible) return Status::ok();
  return makeError(Code::kProtocol, kPeerName, " placed rank ", p.rank, " impossibly: size ", p.size, ", local rank ",
                   p.localRank, " of ", p.localSize, ", node ", p.nodeId, " of ", p.numNodes);
}

}  // namespace

uint64_t timeoutMillis(Deadline deadline) {
  if (deadline.isNever()) return wire::kNoTimeout;
  return static_cast<uint64_t>(std::chrono::ceil<std::chrono::milliseconds>(deadline.remaining()).count());
}

Deadline LauncherStore::replyDeadline(Deadline operation) {
  if (operation.isNever()) return operation;
  return Deadline::at(operation.when() + kServerGrace);
}

Result<std::unique_ptr<Store>> LauncherStore::connect(const std::string& socketPath, std::string_view token, int rank,
                                                      Deadline deadline) {
  IBDT_ASSIGN_OR_RETURN(int fd, connectUnix(socketPath));
  auto fail = [fd](Status status) {
    ::close(fd);
    return status.withContext("connecting to ibdt-run's store");
  };
  std::string hello = wire::Writer(wire::Op::kHello, 0).u32(wire::kVersion).blob(token).u32(static_cast<uint32_t>(rank)).frame();
  if (Status s = writeAll(fd, hello, deadline, kPeerName); !s.isOk()) return fail(std::move(s));
  auto payload = readFrame(fd, deadline);
  if (!payload.isOk()) return fail(payload.status());
  wire::Reader in(*payload);
  in.u8();
  in.u64();
  Code code = wire::replyCode(in.u8());
  std::string message(in.blob());
  if (code != Code::kOk) return fail(Status(code, message));
  Placement placement;
  placement.rank = rank;
  placement.size = static_cast<int>(in.u32());
  placement.localRank = static_cast<int>(in.u32());
  placement.localSize = static_cast<int>(in.u32());
  placement.nodeId = static_cast<int>(in.u32());
  placement.numNodes = static_cast<int>(in.u32());
  if (Status s = in.finish("hello reply"); !s.isOk()) return fail(std::move(s));
  if (Status s = checkPlacement(placement); !s.isOk()) return fail(std::move(s));
  // The job is named after ibdt-run's private directory, not the token.
  std::filesystem::path directory = std::filesystem::path(socketPath).parent_path();
  return std::unique_ptr<Store>(new LauncherStore(placement, directory.filename().string(), fd));
}

LauncherStore::~LauncherStore() { ::close(fd_); }

Status LauncherStore::doPut(std::string_view key, std::span<const uint8_t> value) {
  staged_.put(key, value);
  return Status::ok();
}

Status LauncherStore::doCommit() {
  StagedValues::Batch batch = staged_.take();
  uint64_t id = newRequestId();
  wire::Writer request(wire::Op::kCommit, id);
  request.u32(static_cast<uint32_t>(batch.size()));
  for (const auto& [key, value] : batch) {
    request.blob(key).blob(std::string_view(reinterpret_cast<const char*>(value.data()), value.size()));
  }
  std::string frame = request.frame();
  if (frame.size() - 4 > wire::kMaxFrame) {
    return makeError(Code::kInvalidArgument, "store commit of ", frame.size(), " bytes exceeds ibdt-run's limit of ",
                     wire::kMaxFrame, " bytes per commit");
  }
  IBDT_ASSIGN_OR_RETURN(Reply reply, call(id, std::move(frame), Deadline::never()));
  if (reply.code != Code::kOk) return Status(reply.code, reply.message);
  return Status::ok();
}

Status LauncherStore::doFence(Deadline deadline) {
  uint64_t id = newRequestId();
  std::string frame = wire::Writer(wire::Op::kFence, id).u64(timeoutMillis(deadline)).frame();
  IBDT_ASSIGN_OR_RETURN(Reply reply, call(id, std::move(frame), replyDeadline(deadline)));
  if (reply.code != Code::kOk) return Status(reply.code, reply.message);
  return Status::ok();
}

Result<Bytes> LauncherStore::doGet(int rank, std::string_view key, Deadline deadline) {
  uint64_t id = newRequestId();
  std::string frame =
      wire::Writer(wire::Op::kGet, id).u32(static_cast<uint32_t>(rank)).blob(key).u64(timeoutMillis(deadline)).frame();
  IBDT_ASSIGN_OR_RETURN(Reply reply, call(id, std::move(frame), replyDeadline(deadline)));
  if (reply.code != Code::kOk) return Status(reply.code, reply.message);
  wire::Reader in(reply.body);
  std::string_view value = in.blob();
  IBDT_RETURN_IF_ERROR(in.finish("get reply"));
  return Bytes(value.begin(), value.end());
}

Result<LauncherStore::Reply> LauncherStore::call(uint64_t id, std::string frame, Deadline deadline) {
  {
    std::lock_guard lock(mutex_);
    if (!broken_.isOk()) return broken_;
    waiting_.insert(id);
  }
  Status sent;
  {
    std::lock_guard lock(writeMutex_);
    sent = writeAll(fd_, frame, Deadline::after(kServerGrace), kPeerName);
  }
  std::unique_lock lock(mutex_);
  if (!sent.isOk() && broken_.isOk()) broken_ = sent;
  for (;;) {
    if (auto found = replies_.find(id); found != replies_.end()) {
      Reply reply = std::move(found->second);
      replies_.erase(found);
      waiting_.erase(id);
      return reply;
    }
    if (!broken_.isOk()) {
      waiting_.erase(id);
      return broken_;
    }
    if (deadline.expired()) {
      waiting_.erase(id);
      return makeError(Code::kTimeout, kPeerName, ": no reply to request ", id, " (is ibdt-run stuck?)");
    }
    if (!reading_) {
      reading_ = true;
      lock.unlock();
      Status read = readOneReply(deadline);
      lock.lock();
      reading_ = false;
      if (!read.isOk() && read.code() != Code::kTimeout && broken_.isOk()) broken_ = read;
      replied_.notify_all();
    } else if (deadline.isNever()) {
      replied_.wait(lock);
    } else {
      replied_.wait_until(lock, deadline.when());
    }
  }
}

Status LauncherStore::readOneReply(Deadline deadline) {
  IBDT_RETURN_IF_ERROR(waitReadable(fd_, deadline, kPeerName));
  // A frame has started: read all of it, or the stream is lost.
  IBDT_ASSIGN_OR_RETURN(std::string payload, readFrame(fd_, Deadline::after(kServerGrace)));
  wire::Reader in(payload);
  auto op = static_cast<wire::Op>(in.u8());
  uint64_t id = in.u64();
  Reply reply;
  reply.code = wire::replyCode(in.u8());
  reply.message = std::string(in.blob());
  reply.body = std::string(in.rest());
  IBDT_RETURN_IF_ERROR(in.finish("reply"));
  if (op != wire::Op::kReply) return makeError(Code::kProtocol, kPeerName, ": expected a reply, got op ", int(op));
  std::lock_guard lock(mutex_);
  if (waiting_.count(id) != 0) replies_.emplace(id, std::move(reply));
  return Status::ok();
}

}  // namespace ibdt::bootstrap
