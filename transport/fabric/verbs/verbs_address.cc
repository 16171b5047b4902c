#include "transport/fabric/verbs/verbs_address.h"

#include <algorithm>

namespace ibdt::fabric::verbs {
namespace {

constexpr uint32_t kMagic = 0x41564249;          // "IBVA" little-endian
constexpr uint32_t kListenerMagic = 0x4c564249;  // "IBVL"
constexpr uint8_t kVersion = 1;
constexpr uint32_t kMax24Bits = (1u << 24) - 1;

void put16(uint8_t* out, uint16_t value) {
  out[0] = static_cast<uint8_t>(value);
  out[1] = static_cast<uint8_t>(value >> 8);
}
void put32(uint8_t* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
uint16_t get16(const uint8_t* in) { return static_cast<uint16_t>(in[0] | (in[1] << 8)); }
uint32_t get32(const uint8_t* in) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | in[i];
  return value;
}

// Layout: magic(4) version(1) ethernet(1) mtu(1) zero(1) lid(2) zero(2) qpn(4) psn(4) gid(16).
// A listener's: the same with the Q_Key in place of the PSN, and mtu zero.
enum Offset : size_t { kMagicAt = 0, kVersionAt = 4, kEthernetAt = 5, kMtuAt = 6, kLidAt = 8,
                       kQpnAt = 12, kPsnAt = 16, kQkeyAt = 16, kGidAt = 20 };

bool zeroGid(const std::array<uint8_t, 16>& gid) {
  return std::all_of(gid.begin(), gid.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

std::vector<uint8_t> encodeAddress(const VerbsAddress& address) {
  std::vector<uint8_t> out(kVerbsAddressSize, 0);
  put32(&out[kMagicAt], kMagic);
  out[kVersionAt] = kVersion;
  out[kEthernetAt] = address.ethernet ? 1 : 0;
  out[kMtuAt] = address.mtu;
  put16(&out[kLidAt], address.lid);
  put32(&out[kQpnAt], address.qpNumber);
  put32(&out[kPsnAt], address.psn);
  std::copy(address.gid.begin(), address.gid.end(), out.begin() + kGidAt);
  return out;
}

Result<VerbsAddress> decodeAddress(std::span<const uint8_t> bytes) {
  auto bad = [&](const auto&... why) {
    return makeError(Code::kProtocol, "verbs address blob (", bytes.size(), " bytes) rejected: ", why...);
  };
  if (bytes.size() != kVerbsAddressSize) return bad("expected ", kVerbsAddressSize, " bytes");
  if (get32(&bytes[kMagicAt]) != kMagic) return bad("bad magic (not a verbs endpoint address)");
  if (bytes[kVersionAt] != kVersion) return bad("version ", int(bytes[kVersionAt]), ", expected ", int(kVersion));
  if (bytes[kEthernetAt] > 1) return bad("bad link-layer flag ", int(bytes[kEthernetAt]));
  VerbsAddress address;
  address.ethernet = bytes[kEthernetAt] == 1;
  address.mtu = bytes[kMtuAt];
  address.lid = get16(&bytes[kLidAt]);
  address.qpNumber = get32(&bytes[kQpnAt]);
  address.psn = get32(&bytes[kPsnAt]);
  std::copy_n(bytes.begin() + kGidAt, address.gid.size(), address.gid.begin());
  if (address.mtu < 1 || address.mtu > 5) return bad("path MTU code ", int(address.mtu), " outside [1, 5]");
  if (address.qpNumber == 0 || address.qpNumber > kMax24Bits) return bad("QP number ", address.qpNumber, " invalid");
  if (address.psn > kMax24Bits) return bad("PSN ", address.psn, " exceeds 24 bits");
  if (address.ethernet && zeroGid(address.gid)) return bad("RoCE address without a GID");
  if (!address.ethernet && address.lid == 0) return bad("InfiniBand address with LID 0");
  return address;
}

std::vector<uint8_t> encodeListenerAddress(const ListenerAddress& address) {
  std::vector<uint8_t> out(kListenerAddressSize, 0);
  put32(&out[kMagicAt], kListenerMagic);
  out[kVersionAt] = kVersion;
  out[kEthernetAt] = address.ethernet ? 1 : 0;
  put16(&out[kLidAt], address.lid);
  put32(&out[kQpnAt], address.qpNumber);
  put32(&out[kQkeyAt], address.qkey);
  std::copy(address.gid.begin(), address.gid.end(), out.begin() + kGidAt);
  return out;
}

Result<ListenerAddress> decodeListenerAddress(std::span<const uint8_t> bytes) {
  auto bad = [&](const auto&... why) {
    return makeError(Code::kProtocol, "verbs listener address (", bytes.size(), " bytes) rejected: ", why...);
  };
  if (bytes.size() != kListenerAddressSize) return bad("expected ", kListenerAddressSize, " bytes");
  if (get32(&bytes[kMagicAt]) != kListenerMagic) return bad("bad magic (not a verbs listener address)");
  if (bytes[kVersionAt] != kVersion) return bad("version ", int(bytes[kVersionAt]), ", expected ", int(kVersion));
  if (bytes[kEthernetAt] > 1) return bad("bad link-layer flag ", int(bytes[kEthernetAt]));
  ListenerAddress address;
  address.ethernet = bytes[kEthernetAt] == 1;
  address.lid = get16(&bytes[kLidAt]);
  address.qpNumber = get32(&bytes[kQpnAt]);
  address.qkey = get32(&bytes[kQkeyAt]);
  std::copy_n(bytes.begin() + kGidAt, address.gid.size(), address.gid.begin());
  if (address.qpNumber == 0 || address.qpNumber > kMax24Bits) return bad("QP number ", address.qpNumber, " invalid");
  if (address.ethernet && zeroGid(address.gid)) return bad("RoCE address without a GID");
  if (!address.ethernet && address.lid == 0) return bad("InfiniBand address with LID 0");
  return address;
}

}  // namespace ibdt::fabric::verbs
