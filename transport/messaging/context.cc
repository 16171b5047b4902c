// The public Context: argument checks, starting operations, waiting.
#include <algorithm>

#include "base/config.h"
#include "ibdt/store.h"
#include "transport/messaging/context_impl.h"
#include "transport/messaging/operation_pool.h"

namespace ibdt::messaging {
namespace {

Status checkBuffer(const void* buf, int64_t count, const datatype::Datatype& type, std::string_view what) {
  if (!type.valid() || type.freed()) return makeError(Code::kInvalidArgument, what, ": invalid datatype");
  if (!type.committed()) return makeError(Code::kInvalidArgument, what, ": datatype is not committed");
  if (count < 0) return makeError(Code::kInvalidArgument, what, ": negative count ", count);
  if (buf == nullptr && count > 0 && type.size() > 0) {
    return makeError(Code::kInvalidArgument, what, ": null buffer for ", count, " elements");
  }
  return Status::ok();
}

Result<std::shared_ptr<Operation>> newOperation(int64_t count, const datatype::Datatype& type, TypeCache& types) {
  // Every member of Operation has an initialiser; make_shared<Operation>()
  // would value-initialise, zeroing all ~300 bytes first (a rep stos, the
  // largest item of this function's profile) and then running them. The
  // memory comes from the freed operations (operation_pool.h).
  auto op = std::allocate_shared_for_overwrite<Operation>(OperationAllocator<Operation>{});
  op->count = count;
  op->type = type;
  IBDT_ASSIGN_OR_RETURN(op->segment, types.segment(type, count));
  op->bytes = op->segment->size();
  return op;
}

}  // namespace

Result<std::shared_ptr<Operation>> ContextImpl::prepareSend(const void* buf, int64_t count,
                                                            const datatype::Datatype& type, int dest, int tag,
                                                            uint32_t communicator) {
  IBDT_RETURN_IF_ERROR(checkBuffer(buf, count, type, "isend"));
  if (dest < 0 || dest >= size_) return makeError(Code::kInvalidArgument, "isend: no rank ", dest, " in ", size_);
  if (tag < 0) return makeError(Code::kInvalidArgument, "isend: negative tag ", tag);
  IBDT_ASSIGN_OR_RETURN(auto op, newOperation(count, type, types_));
  op->isSend = true;
  op->sendBuffer = buf;
  op->peer = dest;
  op->tag = tag;
  op->communicator = communicator;
  return op;
}

Status ContextImpl::postSend(const std::shared_ptr<Operation>& op) {
  Peer& peer = this->peer(op->peer);
  if (peer.failed()) return Status(peer.failure()).withContext(strCat("isend to rank ", op->peer));
  SendPath path = selector_.sendPath(*op, types_);
  if (path == SendPath::kEager) {
    ++counters_.schemeCount[static_cast<int>(Scheme::kEager)];
    if (peer.control().empty() && control_.canPostNow(peer)) {
      // Nothing ahead of it and room now: posted at once, in order all the
      // same (the queue's push, visit and pop cost a small message more
      // than the post itself).
      activePeers_.mark(peer.rank());
      return EagerSend(op).post(control_, peer.rank());
    }
    peer.control().push(EagerSend(op));
  } else if (path == SendPath::kPipelined) {
    ++counters_.schemeCount[static_cast<int>(Scheme::kPipelined)];
    peer.control().push(std::make_shared<PipelinedSend>(op));
  } else {
    IBDT_RETURN_IF_ERROR(op->ensureStats(types_));
    IBDT_ASSIGN_OR_RETURN(auto rts, sender_.start(op));
    peer.control().push(ControlMessage(std::move(rts)));
  }
  activePeers_.mark(peer.rank());
  return connectAndFlush(peer);
}

Status ContextImpl::connectAndFlush(Peer& peer) {
  if (connections_.ready(peer.rank())) return control_.flush(peer);
  return connections_.request(peer.rank());  // queued until the link is up
}

Result<std::shared_ptr<Operation>> ContextImpl::prepareRecv(void* buf, int64_t count, const datatype::Datatype& type,
                                                            int source, int tag, uint32_t communicator) {
  IBDT_RETURN_IF_ERROR(checkBuffer(buf, count, type, "irecv"));
  if (source != kAnySource && (source < 0 || source >= size_)) {
    return makeError(Code::kInvalidArgument, "irecv: no rank ", source, " in ", size_);
  }
  if (tag < 0 && tag != kAnyTag) return makeError(Code::kInvalidArgument, "irecv: negative tag ", tag);
  IBDT_ASSIGN_OR_RETURN(auto op, newOperation(count, type, types_));
  if (auto signature = types_.signature(type, count); signature.isOk()) op->signature = *signature;
  op->recvBuffer = buf;
  op->spec = MatchSpec{source, tag, communicator};
  return op;
}

Status ContextImpl::postRecv(const std::shared_ptr<Operation>& op) {
  const int source = op->spec.source;
  if (source != kAnySource && peer(source).failed()) {
    return Status(peer(source).failure()).withContext(strCat("irecv from rank ", source));
  }
  Matching::Taken owned = matching_.takeUnexpected(op->spec);
  if (!owned) {
    matching_.post(op);
    return Status::ok();
  }
  bool arriving = owned->kind == wire::Kind::kPipelined &&
                  static_cast<int64_t>(owned->payload.size()) < owned->wireEnvelope.bytes;
  if (arriving) {
    arrivals_.adoptInbound(op, *owned);  // its remaining fragments go straight to this receive
  } else if (owned->kind != wire::Kind::kRts) {
    Scheme scheme = owned->kind == wire::Kind::kEager ? Scheme::kEager : Scheme::kPipelined;
    deliverEager(*op, types_, owned->peer, owned->wireEnvelope, owned->payload, scheme);
  } else {
    Status status = receiver_.accept(op, owned->peer, owned->wireEnvelope, owned->rts);
    // The CTS goes out now: a refused receive completes at once, and its
    // caller may not progress again before the sender needs the reply.
    if (status.isOk()) status = connectAndFlush(peer(owned->peer));
    if (!status.isOk()) failPeer(peer(owned->peer), status);
  }
  return Status::ok();
}

Result<std::shared_ptr<Operation>> ContextImpl::rearm(std::shared_ptr<Operation> op) {
  if (op.use_count() > 1) {
    // A protocol still holds the last run's operation (it may outlive the
    // completion briefly): run the next one on a copy of the arguments.
    auto copy = op->isSend ? prepareSend(op->sendBuffer, op->count, op->type, op->peer, op->tag, op->communicator)
                           : prepareRecv(op->recvBuffer, op->count, op->type, op->spec.source, op->spec.tag,
                                         op->spec.communicator);
    if (copy.isOk()) (*copy)->oneSided = op->oneSided;  // a put's or exposure's registration and key
    return copy;
  }
  op->done = false;
  op->status = Status();
  op->info = RecvInfo{};
  if (!op->isSend) op->peer = 0;
  IBDT_RETURN_IF_ERROR(op->segment->seek(0));
  return op;
}

Status ContextImpl::cancel(Operation& op) {
  if (op.isSend) return makeError(Code::kState, "cancel: sends are not cancelled");
  std::shared_ptr<Operation> owner = matching_.unpost(op);
  if (!owner) return makeError(Code::kState, "cancel: the receive is already matched");
  complete(op, makeError(Code::kCancelled, "receive cancelled"));
  return Status::ok();
}

// --- Context ---

Result<std::unique_ptr<Context>> Context::create(fabric::Domain& domain, const Bootstrap& bootstrap,
                                                 const Options& options) {
  config::warnAboutUnknownVariables();  // a misspelled knob would otherwise be ignored silently
  auto impl = std::make_unique<ContextImpl>(domain, options);
  IBDT_RETURN_IF_ERROR(impl->init(bootstrap).withContext("creating the messaging context"));
  return std::unique_ptr<Context>(new Context(std::move(impl)));
}

Result<std::unique_ptr<Context>> Context::create(fabric::Domain& domain, bootstrap::Store& store,
                                                 const Options& options, Deadline deadline) {
  Bootstrap bootstrap;
  bootstrap.rank = store.rank();
  bootstrap.size = store.size();
  bootstrap.localSize = store.localSize();
  bootstrap.allgather = [&store, deadline](std::span<const uint8_t> value) { return store.allgather(value, deadline); };
  return create(domain, bootstrap, options);
}

Context::Context(std::unique_ptr<ContextImpl> impl) : impl_(std::move(impl)) {}

Context::~Context() = default;

int Context::rank() const { return impl_->rank(); }
int Context::size() const { return impl_->size(); }
const Counters& Context::counters() const { return impl_->counters(); }
double Context::packBelowBlock() const { return impl_->packBelow(); }
double Context::unpackBelowBlock() const { return impl_->unpackBelow(); }
bool Context::exchangeSingleCopy(uint32_t communicator, int64_t bytes) const {
  return impl_->exchangeSingleCopy(communicator, bytes);
}
int64_t Context::singleCopyReadMin() const { return impl_->singleCopyReadMin(); }
const std::string& Context::tuningNote() const { return impl_->tuningNote(); }
const Tuning* Context::tuning() const { return impl_->tuning(); }

Result<Request> Context::isend(const void* buf, int64_t count, const datatype::Datatype& type, int dest, int tag,
                               uint32_t communicator) {
  if (impl_->closed()) return makeError(Code::kState, "isend: the context is closed");
  IBDT_ASSIGN_OR_RETURN(auto op, impl_->prepareSend(buf, count, type, dest, tag, communicator));
  IBDT_RETURN_IF_ERROR(impl_->postSend(op));
  return Request(std::move(op), false);
}

Result<Request> Context::irecv(void* buf, int64_t count, const datatype::Datatype& type, int source, int tag,
                               uint32_t communicator) {
  if (impl_->closed()) return makeError(Code::kState, "irecv: the context is closed");
  IBDT_ASSIGN_OR_RETURN(auto op, impl_->prepareRecv(buf, count, type, source, tag, communicator));
  IBDT_RETURN_IF_ERROR(impl_->postRecv(op));
  return Request(std::move(op), false);
}

// A persistent request starts inactive: done, with nothing to report.
Result<Request> Context::sendInit(const void* buf, int64_t count, const datatype::Datatype& type, int dest, int tag,
                                  uint32_t communicator) {
  IBDT_ASSIGN_OR_RETURN(auto op, impl_->prepareSend(buf, count, type, dest, tag, communicator));
  op->done = true;
  return Request(std::move(op), true);
}

Result<Request> Context::recvInit(void* buf, int64_t count, const datatype::Datatype& type, int source, int tag,
                                  uint32_t communicator) {
  IBDT_ASSIGN_OR_RETURN(auto op, impl_->prepareRecv(buf, count, type, source, tag, communicator));
  op->done = true;
  return Request(std::move(op), true);
}

Result<Request> Context::exposeInit(void* buf, int64_t bytes, int origin, int tag, uint32_t communicator,
                                   Deadline deadline) {
  if (impl_->closed()) return makeError(Code::kState, "exposeInit: the context is closed");
  IBDT_ASSIGN_OR_RETURN(auto op, impl_->oneSided().expose(buf, bytes, origin, tag, communicator, deadline));
  return Request(std::move(op), true);
}

Result<Request> Context::putInit(const void* buf, int64_t bytes, int target, int tag, uint32_t communicator,
                                 Deadline deadline) {
  if (impl_->closed()) return makeError(Code::kState, "putInit: the context is closed");
  IBDT_ASSIGN_OR_RETURN(auto op, impl_->oneSided().put(buf, bytes, target, tag, communicator, deadline));
  return Request(std::move(op), true);
}

Result<Context::OneSidedKey> Context::rebindOneSided(Request& request, const void* buf) {
  if (!request.valid() || !request.op_->oneSided) return makeError(Code::kInvalidArgument, "rebindOneSided: not a put or exposure");
  if (!request.op_->done) return makeError(Code::kState, "rebindOneSided: the request is running");
  return impl_->oneSided().rebind(*request.op_, buf);
}

Status Context::retargetPut(Request& put, std::span<const uint8_t> key) {
  if (!put.valid() || !put.op_->oneSided || !put.op_->isSend) return makeError(Code::kInvalidArgument, "retargetPut: not a put");
  if (!put.op_->done) return makeError(Code::kState, "retargetPut: the put is running");
  return impl_->oneSided().retarget(*put.op_, key);
}

Status Context::start(Request& request) {
  if (!request.valid()) return makeError(Code::kInvalidArgument, "start: empty request");
  if (!request.persistent_) return makeError(Code::kInvalidArgument, "start: not a persistent request");
  if (!request.op_->done) return makeError(Code::kState, "start: the request's previous run is still active");
  if (impl_->closed()) return makeError(Code::kState, "start: the context is closed");
  IBDT_ASSIGN_OR_RETURN(request.op_, impl_->rearm(std::move(request.op_)));
  Operation& op = *request.op_;
  Status posted = op.oneSided && op.isSend ? impl_->oneSided().start(request.op_)
                  : op.isSend               ? impl_->postSend(request.op_)
                                            : impl_->postRecv(request.op_);
  // Not posted (a dead peer): the request stays inactive, reporting why.
  if (!posted.isOk()) impl_->complete(op, posted);
  return posted;
}

Status Context::progress() { return impl_->progress(); }
Status Context::close(Deadline deadline) { return impl_->close(deadline); }
bool Context::closed() const { return impl_->closed(); }
Status Context::peerStatus(int rank) const {
  if (rank < 0 || rank >= impl_->size()) return makeError(Code::kInvalidArgument, "peerStatus: no rank ", rank);
  return impl_->peerStatus(rank);
}
uint32_t Context::waitSpins() const { return impl_->spins(); }

Result<bool> Context::test(Request& request, RecvInfo* info) {
  if (!request.valid()) return makeError(Code::kInvalidArgument, "test: empty request");
  if (!request.op_->done) IBDT_RETURN_IF_ERROR(impl_->progress());
  if (!request.op_->done) return false;
  if (info != nullptr) *info = request.op_->info;
  return true;
}

Status Context::wait(Request& request, RecvInfo* info, Deadline deadline) {
  if (!request.valid()) return makeError(Code::kInvalidArgument, "wait: empty request");
  IBDT_RETURN_IF_ERROR(impl_->progressUntilDone(*request.op_, deadline, "wait: the request"));
  if (info != nullptr) *info = request.op_->info;
  Status status = request.op_->status;
  if (!request.persistent_) request.op_.reset();
  return status;
}

Status Context::waitAll(std::span<Request> requests, Deadline deadline) {
  Status first;
  for (Request& request : requests) {
    if (!request.valid()) continue;
    Status status = wait(request, nullptr, deadline);
    if (first.isOk() && !status.isOk()) first = std::move(status);
  }
  return first;
}

Status Context::cancel(Request& request) {
  if (!request.valid()) return makeError(Code::kInvalidArgument, "cancel: empty request");
  if (request.op_->done) return makeError(Code::kState, "cancel: the request already completed");
  return impl_->cancel(*request.op_);
}

Status Context::send(const void* buf, int64_t count, const datatype::Datatype& type, int dest, int tag,
                     uint32_t communicator) {
  IBDT_ASSIGN_OR_RETURN(Request request, isend(buf, count, type, dest, tag, communicator));
  return wait(request);
}

Status Context::recv(void* buf, int64_t count, const datatype::Datatype& type, int source, int tag,
                     uint32_t communicator, RecvInfo* info) {
  IBDT_ASSIGN_OR_RETURN(Request request, irecv(buf, count, type, source, tag, communicator));
  return wait(request, info);
}

}  // namespace ibdt::messaging
