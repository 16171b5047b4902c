// transport/messaging/layout_cache.h — the layout caches with one peer
// (paper Section 4.4.2): a zero-copy reply to a noncontiguous receive
// carries the receiver's layout only the first time a (type id, version)
// goes to that peer. Each side keeps its half: the layouts the peer sent
// us, and which version of each of our types the peer holds.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>

#include "ibdt/datatype.h"

namespace ibdt::messaging {

class LayoutCache {
 public:
  // Sender: the layout (id, version) the peer sent earlier; null if it never did.
  const datatype::Datatype* received(uint32_t id, uint32_t version) const {
    auto found = received_.find(id);
    return found != received_.end() && found->second.first == version ? &found->second.second : nullptr;
  }
  // Sender: a reply carried layout (id, version); it replaces an older version.
  const datatype::Datatype& store(uint32_t id, uint32_t version, datatype::Datatype type) {
    auto& entry = received_[id];
    entry = {version, std::move(type)};
    return entry.second;
  }

  // Receiver: whether the peer holds this version of `type`.
  bool peerHolds(const datatype::Datatype& type) const {
    auto found = sent_.find(type.id());
    return found != sent_.end() && found->second == type.version();
  }
  // Receiver: a reply now carries `type` to the peer.
  void sentToPeer(const datatype::Datatype& type) { sent_[type.id()] = type.version(); }

 private:
  std::unordered_map<uint32_t, std::pair<uint32_t, datatype::Datatype>> received_;  // id -> (version, type)
  std::unordered_map<uint32_t, uint32_t> sent_;                                     // id -> version
};

}  // namespace ibdt::messaging
