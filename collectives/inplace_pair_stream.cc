// A streamed pair of the in-place alltoallv (see inplace_pair_stream.h).
#include "collectives/inplace_pair_stream.h"

#include <algorithm>

namespace ibdt::collectives {

InPlacePairStream::InPlacePairStream(Where where, const InPlaceElements* elements, std::byte* block, int64_t count,
                                     int64_t chunk, std::byte* slice)
    : where_(where), elements_(elements), block_(block), count_(count), chunk_(std::max<int64_t>(1, chunk)),
      slice_(slice) {}

Status InPlacePairStream::start() {
  at_ = 0;
  done_ = count_ == 0;
  return done_ ? Status::ok() : post();
}

// The send first: when it completes at once (an eager send), this rank's
// chunk has left and the partner's chunk is received straight into its
// slots, one copy less; otherwise the receive goes through the slice.
// Neither waits for anything, so chunk k still needs only the partner to
// post chunk k.
Status InPlacePairStream::post() {
  const int64_t items = std::min(chunk_, count_ - at_);
  messaging::Context& ctx = *where_.ctx;
  std::byte* slots = elements_->at(block_, at_);
  IBDT_ASSIGN_OR_RETURN(send_, ctx.isend(slots, items, elements_->type(), where_.target, where_.tag,
                                         where_.contextId));
  IBDT_ASSIGN_OR_RETURN(sendDone_, ctx.test(send_));
  if (sendDone_) IBDT_RETURN_IF_ERROR(ctx.wait(send_));
  direct_ = sendDone_;
  IBDT_ASSIGN_OR_RETURN(recv_, direct_ ? ctx.irecv(slots, items, elements_->type(), where_.target, where_.tag,
                                                   where_.contextId)
                                       : ctx.irecv(slice_, items, elements_->packed(), where_.target, where_.tag,
                                                   where_.contextId));
  recvDone_ = false;
  return Status::ok();
}

Result<bool> InPlacePairStream::progress() {
  messaging::Context& ctx = *where_.ctx;
  while (!done_) {
    for (auto [request, finished] : {std::pair{&send_, &sendDone_}, std::pair{&recv_, &recvDone_}}) {
      if (*finished) continue;
      IBDT_ASSIGN_OR_RETURN(bool complete, ctx.test(*request));
      if (!complete) continue;
      IBDT_RETURN_IF_ERROR(ctx.wait(*request));
      *finished = true;
    }
    if (!sendDone_ || !recvDone_) return false;
    // This rank's chunk left: the partner's takes its slots.
    const int64_t items = std::min(chunk_, count_ - at_);
    if (!direct_) elements_->copy(slice_, true, elements_->at(block_, at_), false, items);
    at_ += items;
    if (at_ == count_) {
      done_ = true;
    } else {
      IBDT_RETURN_IF_ERROR(post());
    }
  }
  return true;
}

Status InPlacePairStream::block(Deadline deadline) {
  for (auto [request, finished] : {std::pair{&send_, &sendDone_}, std::pair{&recv_, &recvDone_}}) {
    if (done_ || *finished) continue;
    IBDT_RETURN_IF_ERROR(where_.ctx->wait(*request, nullptr, deadline));
    if (request->valid()) return makeError(Code::kTimeout, "alltoallv (in place): a streamed chunk did not complete");
    *finished = true;
    return Status::ok();
  }
  return Status::ok();
}

void InPlacePairStream::cancel() {
  if (!done_ && !recvDone_ && recv_.valid()) (void)where_.ctx->cancel(recv_);
  done_ = true;
}

void InPlacePairStreams::add(InPlacePairStream::Where where, const InPlaceElements* elements, std::byte* block,
                             int64_t count, int64_t chunk, std::byte* slice) {
  streams_.emplace_back(where, elements, block, count, chunk, slice);
  Status started = streams_.back().start();
  if (!started.isOk()) failed(streams_.back(), where.peer, started);
}

bool InPlacePairStreams::progress() {
  bool all = true;
  for (InPlacePairStream& stream : streams_) {
    if (stream.done()) continue;
    Result<bool> progressed = stream.progress();
    if (!progressed.isOk()) failed(stream, stream.peer(), progressed.status());
    else all = all && *progressed;
  }
  return all;
}

Status InPlacePairStreams::block(Deadline deadline) {
  for (InPlacePairStream& stream : streams_) {
    if (stream.done()) continue;
    Status status = stream.block(deadline);
    if (status.code() == Code::kTimeout) return status;
    if (!status.isOk()) failed(stream, stream.peer(), status);
    return Status::ok();
  }
  return Status::ok();
}

void InPlacePairStreams::cancel() {
  for (InPlacePairStream& stream : streams_) stream.cancel();
}

void InPlacePairStreams::failed(InPlacePairStream& stream, int peer, const Status& status) {
  stream.cancel();
  if (outcome_.isOk()) {
    outcome_ = makeError(status.code(), "alltoallv (in place): the pair streamed with rank ", peer, ": ",
                         status.message());
  }
}

}  // namespace ibdt::collectives
