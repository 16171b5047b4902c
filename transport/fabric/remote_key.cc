// RemoteKey wire format: three little-endian uint64 values (address, length,
// rkey), 24 bytes, identical on every provider and host.
#include <cstring>

#include "ibdt/fabric.h"

namespace ibdt::fabric {
namespace {

void putLe64(uint8_t* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t getLe64(const uint8_t* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

}  // namespace

void RemoteKey::serialize(std::span<uint8_t, kWireSize> out) const {
  putLe64(out.data(), address);
  putLe64(out.data() + 8, length);
  putLe64(out.data() + 16, rkey);
}

Result<RemoteKey> RemoteKey::parse(std::span<const uint8_t> bytes) {
  if (bytes.size() != kWireSize) {
    return makeError(Code::kProtocol, "remote key: expected ", kWireSize, " bytes, got ", bytes.size());
  }
  RemoteKey key;
  key.address = getLe64(bytes.data());
  key.length = getLe64(bytes.data() + 8);
  key.rkey = getLe64(bytes.data() + 16);
  if (key.address + key.length < key.address) {
    return makeError(Code::kProtocol, "remote key: address 0x", std::hex, key.address, " + length 0x", key.length,
                     " wraps around");
  }
  return key;
}

}  // namespace ibdt::fabric
