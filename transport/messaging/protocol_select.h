// transport/messaging/protocol_select.h — the one place a message's protocol
// is chosen, on either side (as ucp's protocol selection, in our own terms):
//   * sender: eager, pipelined eager or rendezvous, by size and, with a
//     tuning file in force, by the file's fits (tuned_select.h);
//   * rendezvous sender: pack (BC-SPUP) or gather (RWG-UP), its wish in the RTS;
//   * receiver: an unpack-buffer or zero-copy reply (scheme_select.h, Table 1
//     costed by cost_model.h or by the tuning file), and its protocol object
//     (recv_protocol.h);
//   * both: the final scheme by Table 1 once the reply is known; the sender
//     gets that scheme's protocol object (send_protocol.h).
// It owns what those decisions read: the measured cost model, the tuning
// file, the per-block thresholds, and the options they override.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "transport/messaging/cost_model.h"
#include "transport/messaging/operation.h"
#include "transport/messaging/recv_protocol.h"
#include "transport/messaging/scheme_select.h"
#include "transport/messaging/send_protocol.h"
#include "transport/messaging/tuning.h"

namespace ibdt::messaging {

enum class SendPath : uint8_t { kEager, kPipelined, kRendezvous };

// A rendezvous sender's scheme and the protocol object that carries it out.
struct SendChoice {
  Scheme scheme = Scheme::kAuto;
  std::unique_ptr<SendProtocol> protocol;
};

class ProtocolSelector {
 public:
  // `options` is the Context's: a tuning file in force moves its pipeline
  // limit and exchange threshold (init).
  explicit ProtocolSelector(Options& options) : options_(options) {}

  // Measures the cost model for a provider with these limits and loads the
  // tuning file. `listLength`: the writes one post may chain.
  Status init(const fabric::Caps& caps, uint32_t maxSge, uint32_t listLength);

  // The sender's path for `op` (its statistics are computed only when the
  // decision needs them).
  SendPath sendPath(Operation& op, TypeCache& types) const;
  // A rendezvous sender packs its message (BC-SPUP) rather than gathering it.
  bool rendezvousPacks(const datatype::Stats& stats) const;
  // The scheme a rendezvous sender asks for in its RTS: the user's forced
  // one, else Generic when the tuning file prices it cheapest (the receiver
  // then follows it as if forced), else kAuto.
  Scheme requestedScheme(const datatype::Stats& stats) const;
  // A pipelined eager sender gathers its fragments from the user blocks.
  bool fragmentsGather(const datatype::Stats& stats) const { return !senderWantsPack(stats, packBelow_); }
  // The segments of an unpack reply to a rendezvous of `bytes`.
  int64_t replySegmentSize(int64_t bytes) const { return segmentSizeFor(bytes, options_.segmentSize); }
  // The fragments of a pipelined eager message of `bytes`.
  int64_t fragmentSize(int64_t bytes) const;
  // The receiver's reply to an RTS: unpack buffer (true) or zero-copy.
  // `segmentSize`: of an unpack reply; `bytes`: what the receive takes.
  bool replyUnpacks(const wire::Envelope& envelope, const wire::Rts& rts, const datatype::Stats& receiver,
                    Scheme forced, int64_t bytes, int64_t segmentSize) const;
  // Table 1 once the reply is known (scheme_select.h).
  Scheme finalScheme(Scheme forced, bool senderWantsPack, bool senderContiguous, bool receiverUnpacks,
                     Scheme receiverHint, bool receiverContiguous) const {
    return messaging::finalScheme(forced, senderWantsPack, senderContiguous, receiverUnpacks, receiverHint,
                                  receiverContiguous, cost_.rdmaRead);
  }
  // The rendezvous sender's scheme once the reply `cts` arrived, and its
  // protocol object. `senderWantsPack`: what its RTS said.
  SendChoice sendProtocol(bool senderWantsPack, const datatype::Stats& sender, const wire::Cts& cts) const;
  // The scheme forced on a reply: this side's, else the one the sender was told to use.
  Scheme forcedReply(const wire::Rts& rts) const {
    return options_.forcedScheme != Scheme::kAuto ? options_.forcedScheme : static_cast<Scheme>(rts.forcedScheme);
  }
  // The reply's protocol objects: zero-copy, and unpacking (also what a
  // zero-copy reply that cannot be made falls back to).
  std::unique_ptr<RecvProtocol> zeroCopyReply() const { return makeZeroCopyReceive(); }
  std::unique_ptr<RecvProtocol> unpackReply() const { return makeUnpackReceive(options_.ringSegments); }
  // Exchange traffic large enough for the single-copy path when both sides
  // are contiguous (messaging.h, kFirstExchangeCommunicator).
  bool exchangeSingleCopy(uint32_t communicator, int64_t bytes) const {
    return communicator >= kFirstExchangeCommunicator && options_.exchangeZeroCopyMin > 0 &&
           bytes >= options_.exchangeZeroCopyMin;
  }

  // Options::singleCopyReadMin, or (auto) the model's crossover (cost_model.h).
  int64_t singleCopyReadMin() const { return singleCopyReadMin_; }
  double packBelow() const { return packBelow_; }
  double unpackBelow() const { return unpackBelow_; }
  const std::string& tuningNote() const { return tuning_.note; }
  const Tuning* tuning() const { return tuning_.tuning ? &*tuning_.tuning : nullptr; }

 private:
  void loadTuning(const fabric::Caps& caps);
  bool usePipelined(Operation& op, TypeCache& types) const;

  Options& options_;
  CostModel cost_;
  double packBelow_ = 0;
  double unpackBelow_ = 0;
  int64_t singleCopyReadMin_ = 0;
  LoadedTuning tuning_;
  bool tunedPipeline_ = false;  // pipelined vs rendezvous per message (IBDT_MSG_PIPELINE_LIMIT unset)
  bool tunedPack_ = false;      // BC-SPUP vs RWG-UP per message (IBDT_MSG_PACK_BELOW auto)
};

}  // namespace ibdt::messaging
