// transport/fabric/verbs/verbs_work_id.h — what ibdt puts in ibv wr_id.
//
// The caller's request ids stay in tables beside the queues; wr_id carries
// which queue (send or receive), the epoch of the endpoint that posted it and
// an index into that table. The epoch lets a completion queue drop entries
// of a destroyed endpoint whose QP number was handed to a new one.
#pragma once

#include <cstdint>

namespace ibdt::fabric::verbs {

enum class WorkKind : uint8_t { kSend = 0, kRecv = 1 };

// Receives posted to a shared receive queue carry epoch 0; endpoints use 1..65535.
inline constexpr uint16_t kSharedQueueEpoch = 0;

struct WorkId {
  WorkKind kind;
  uint16_t epoch;
  uint64_t index;  // 47 bits: send sequence number or receive slot

  uint64_t encode() const { return (index << 17) | (uint64_t{epoch} << 1) | static_cast<uint64_t>(kind); }
  static WorkId decode(uint64_t wrId) {
    return {static_cast<WorkKind>(wrId & 1), static_cast<uint16_t>(wrId >> 1), wrId >> 17};
  }
};

}  // namespace ibdt::fabric::verbs
