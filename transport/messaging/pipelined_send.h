// transport/messaging/pipelined_send.h — pipelined eager, the sender: a
// mid-size message (eagerLimit < bytes <= pipelineLimit) leaves as
// fragments in the peer's eager receive buffers, back to back and with no
// handshake, so the receiver (pipelined_inbound.h) unpacks one fragment
// while we fill the next. A rendezvous would spend a round trip before the
// first byte moves, and on shared memory its zero-copy paths cost more per
// page than the copies they save at these sizes.
//
// A sender whose blocks are large enough to use in place (the rendezvous
// sender's rule, ProtocolSelector::fragmentsGather) gathers each fragment
// straight from the user buffer: SGE 0 is the header in a send slot, the
// rest are user blocks of the fragment (at most max_sge - 1, which may cut
// it short). The shm provider copies those into the peer's buffer, a NIC
// reads them: either way nothing is packed. Small blocks are packed into
// the buffer, as eager does.
//
// Fragments share the eager credits and buffers; each one is a credit. The
// message holds the head of its peer's control queue until its last
// fragment left, so nothing that starts another message comes between them.
#pragma once

#include <memory>

#include "transport/messaging/eager_services.h"

namespace ibdt::messaging {

class PipelinedSend : public std::enable_shared_from_this<PipelinedSend> {
 public:
  explicit PipelinedSend(std::shared_ptr<Operation> op) : op_(std::move(op)) {}
  // Posts the next fragment (the first also chooses gather or pack). true:
  // nothing more to post (all fragments left, or the send failed before
  // any did and is complete). A Status is the peer's: after the first
  // fragment it would wait for the rest forever.
  Result<bool> postNext(EagerServices& services, int rank);
  // A fragment that gathered from the user blocks completed.
  void fragmentSent(Status status);
  // The peer failed: the send completes with `failure`.
  void fail(const Status& failure) { finish(failure); }
  // The Context is going: let go of the user buffer's registration (its
  // cache goes with the Context).
  void releaseRegistration() { gathered_ = UserRegistration(); }
  Operation& operation() const { return *op_; }

 private:
  // The first fragment's work: the envelope, and gather or pack. false: the
  // send failed before anything left (it is complete with its error).
  bool begin(EagerServices& services, int rank);
  Result<bool> postPacked(EagerServices& services, int rank, const wire::Header& header, int64_t q, Status& failed);
  // A fragment whose SGEs point at the user blocks of [next_, q); cuts q
  // to what max_sge entries cover. false: listing failed (`failed`).
  Result<bool> postGathered(EagerServices& services, int rank, const wire::Header& header, int64_t& q, Status& failed);
  void finish(Status status) {
    completeOperation(*op_, std::move(status));
    gathered_ = UserRegistration();  // the pin on the user buffer
  }

  std::shared_ptr<Operation> op_;
  wire::Envelope envelope_{};  // the first fragment's
  bool gather_ = false;        // fragments gather the user blocks (no pack)
  int64_t next_ = 0;           // packed bytes already sent
  UserRegistration gathered_;  // what gathered fragments read through
  uint32_t inFlight_ = 0;      // gathered fragments the provider still reads
  bool allPosted_ = false;
};

}  // namespace ibdt::messaging
