// Poison: see poison.h.
#include "collectives/poison.h"

namespace ibdt::collectives {

using datatype::Datatype;

Result<messaging::Request> Poison::sendInit(messaging::Context& ctx, int contextRank, int32_t tag,
                                            uint32_t communicator) {
  if (!type_.valid()) {
    const int64_t blocklens[] = {1, 1, 1};
    const int64_t displs[] = {0, 16, 32};
    const Datatype kinds[] = {Datatype::of<bool>(), Datatype::of<long double>(), Datatype::of<bool>()};
    IBDT_ASSIGN_OR_RETURN(Datatype type, Datatype::structType(blocklens, displs, kinds));
    IBDT_RETURN_IF_ERROR(type.commit());
    type_ = std::move(type);
  }
  return ctx.sendInit(payload_, 1, type_, contextRank, tag, communicator);
}

Status receivedAll(const messaging::RecvInfo& info, int64_t due, int from) {
  if (info.bytes == due) return Status::ok();
  return makeError(Code::kPeerFailed, "rank ", from, " sent ", info.bytes, " of ", due,
                   " bytes: its run had failed in an earlier round");
}

}  // namespace ibdt::collectives
