// transport/messaging/signature_cache.h — type signatures of recently used
// (type, count) pairs.
//
// Every eager message carries its sender's signature and the receiver checks
// it against its own. One costs O(log count) modular multiplications (up to
// a few hundred ns), paid on both sides of every message; an application
// sends the same few (type, count) pairs again and again. A type's
// (id, version) never names another layout (a recycled id gets a new
// version), so a remembered signature stays right.
#pragma once

#include <array>
#include <cstdint>

#include "ibdt/datatype.h"

namespace ibdt::messaging {

class SignatureCache {
 public:
  Result<datatype::Signature> get(const datatype::Datatype& type, int64_t count) {
    const uint32_t id = type.id();
    const uint32_t version = type.version();
    Entry& entry = entries_[slotOf(id, count)];
    if (entry.used && entry.id == id && entry.version == version && entry.count == count) return entry.signature;
    IBDT_ASSIGN_OR_RETURN(datatype::Signature signature, datatype::signature(type, count));
    entry = Entry{true, id, version, count, signature};
    return signature;
  }

 private:
  // Direct-mapped: a collision only costs a recomputation.
  static constexpr int kSlotBits = 6;
  static constexpr size_t kEntries = size_t{1} << kSlotBits;
  struct Entry {
    bool used = false;
    uint32_t id = 0;
    uint32_t version = 0;
    int64_t count = 0;
    datatype::Signature signature;
  };

  static size_t slotOf(uint32_t id, int64_t count) {
    uint64_t mixed = (uint64_t{id} << 32 ^ static_cast<uint64_t>(count)) * 0x9e3779b97f4a7c15ULL;
    return static_cast<size_t>(mixed >> (64 - kSlotBits));
  }

  std::array<Entry, kEntries> entries_{};
};

}  // namespace ibdt::messaging
