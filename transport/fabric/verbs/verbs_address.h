// transport/fabric/verbs/verbs_address.h — the address blob of an RC endpoint.
//
// What a peer needs to move its queue pair to RTR/RTS: LID (InfiniBand) or GID
// (RoCE), QP number, starting PSN and path MTU. Encoded little-endian with a
// magic and a version so a blob from another provider, another version or a
// corrupted exchange is rejected with a clear error instead of connecting a
// queue pair to garbage.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::fabric::verbs {

struct VerbsAddress {
  bool ethernet = false;  // RoCE: routed by gid; InfiniBand: by lid
  uint8_t mtu = 0;        // enum ibv_mtu (1 = 256 ... 5 = 4096)
  uint16_t lid = 0;
  uint32_t qpNumber = 0;  // 24 bits
  uint32_t psn = 0;       // 24 bits
  std::array<uint8_t, 16> gid{};
};

inline constexpr size_t kVerbsAddressSize = 36;

std::vector<uint8_t> encodeAddress(const VerbsAddress& address);
// kProtocol when the blob is not a valid verbs address.
Result<VerbsAddress> decodeAddress(std::span<const uint8_t> bytes);

// The address of a connection listener (a UD queue pair): the same fields
// but the PSN and MTU, plus the Q_Key; its own magic.
struct ListenerAddress {
  bool ethernet = false;
  uint16_t lid = 0;
  uint32_t qpNumber = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, 16> gid{};
};
inline constexpr size_t kListenerAddressSize = 36;

std::vector<uint8_t> encodeListenerAddress(const ListenerAddress& address);
Result<ListenerAddress> decodeListenerAddress(std::span<const uint8_t> bytes);

}  // namespace ibdt::fabric::verbs
