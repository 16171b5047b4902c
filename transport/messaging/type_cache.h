// transport/messaging/type_cache.h — what the context derives from a
// (type, count) pair, kept for the pairs used recently.
//
// Every message needs count x type as a Segment (a compiled program built
// and allocated per call) and, eager ones on both sides, its signature
// (O(log count) modular multiplications, up to a few hundred ns), and a
// message above the eager limit its block statistics. An
// application sends the same few pairs again and again. A type's
// (id, version) never names another layout (a recycled id gets a new
// version), so what is remembered stays right.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "ibdt/datatype.h"

namespace ibdt::messaging {

class TypeCache {
 public:
  // count x type as a packed stream: a fresh position over a shared program.
  Result<datatype::Segment> segment(const datatype::Datatype& type, int64_t count) {
    Entry& entry = entryFor(type, count);
    if (!entry.segment) {
      IBDT_ASSIGN_OR_RETURN(auto made, datatype::Segment::create(type, count));
      entry.segment = std::move(made);
    }
    return *entry.segment;
  }

  // Block statistics (the senders' and receivers' scheme decisions).
  Result<datatype::Stats> stats(const datatype::Datatype& type, int64_t count) {
    Entry& entry = entryFor(type, count);
    if (!entry.stats) {
      IBDT_ASSIGN_OR_RETURN(auto made, datatype::stats(type, count));
      entry.stats = made;
    }
    return *entry.stats;
  }

  Result<datatype::Signature> signature(const datatype::Datatype& type, int64_t count) {
    Entry& entry = entryFor(type, count);
    if (!entry.signature) {
      IBDT_ASSIGN_OR_RETURN(auto made, datatype::signature(type, count));
      entry.signature = made;
    }
    return *entry.signature;
  }

 private:
  // Direct-mapped: a collision only costs a recomputation. An entry keeps
  // its type's compiled program alive until it is replaced.
  static constexpr int kSlotBits = 6;
  static constexpr size_t kEntries = size_t{1} << kSlotBits;

  struct Entry {
    bool used = false;
    uint32_t id = 0;
    uint32_t version = 0;
    int64_t count = 0;
    std::optional<datatype::Segment> segment;
    std::optional<datatype::Signature> signature;
    std::optional<datatype::Stats> stats;
  };

  Entry& entryFor(const datatype::Datatype& type, int64_t count) {
    const uint32_t id = type.id();
    const uint32_t version = type.version();
    uint64_t mixed = (uint64_t{id} << 32 ^ static_cast<uint64_t>(count)) * 0x9e3779b97f4a7c15ULL;
    Entry& entry = entries_[static_cast<size_t>(mixed >> (64 - kSlotBits))];
    if (!entry.used || entry.id != id || entry.version != version || entry.count != count) {
      entry = Entry{true, id, version, count, std::nullopt, std::nullopt, std::nullopt};
    }
    return entry;
  }

  std::array<Entry, kEntries> entries_{};
};

}  // namespace ibdt::messaging
