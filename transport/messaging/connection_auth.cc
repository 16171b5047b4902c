// SipHash-2-4 (reference: Aumasson and Bernstein, "SipHash: a fast
// short-input PRF", 2012) and the datagram seal built on it.
#include "transport/messaging/connection_auth.h"

#include <bit>
#include <cstring>
#include <random>

namespace ibdt::messaging::connection {
namespace {

uint64_t loadLittle(const uint8_t* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

struct SipState {
  uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = std::rotl(v1, 13);
    v1 ^= v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = std::rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = std::rotl(v1, 17);
    v1 ^= v2;
    v2 = std::rotl(v2, 32);
  }
  void absorb(uint64_t word) {
    v3 ^= word;
    round();
    round();
    v0 ^= word;
  }
};

}  // namespace

DatagramKey newDatagramKey() {
  std::random_device random;
  DatagramKey key;
  for (uint64_t& word : key.words) word = (uint64_t{random()} << 32) ^ random();
  return key;
}

DatagramKey datagramKeyFrom(std::span<const uint8_t, DatagramKey::kBytes> bytes) {
  return DatagramKey{{loadLittle(bytes.data()), loadLittle(bytes.data() + 8)}};
}

std::array<uint8_t, DatagramKey::kBytes> datagramKeyBytes(const DatagramKey& key) {
  std::array<uint8_t, DatagramKey::kBytes> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(key.words[i / 8] >> (8 * (i % 8)));
  return out;
}

uint64_t sipHash24(const DatagramKey& key, std::span<const uint8_t> bytes) {
  SipState s{key.words[0] ^ 0x736f6d6570736575ull, key.words[1] ^ 0x646f72616e646f6dull,
             key.words[0] ^ 0x6c7967656e657261ull, key.words[1] ^ 0x7465646279746573ull};
  size_t whole = bytes.size() / 8 * 8;
  for (size_t i = 0; i < whole; i += 8) s.absorb(loadLittle(bytes.data() + i));
  uint64_t last = uint64_t{bytes.size() & 0xff} << 56;
  for (size_t i = whole; i < bytes.size(); ++i) last |= uint64_t{bytes[i]} << (8 * (i - whole));
  s.absorb(last);
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

void seal(std::vector<uint8_t>& datagram, const DatagramKey& key) {
  uint64_t tag = sipHash24(key, datagram);
  for (size_t i = 0; i < kTagBytes; ++i) datagram.push_back(static_cast<uint8_t>(tag >> (8 * i)));
}

Result<std::span<const uint8_t>> unseal(std::span<const uint8_t> sealed, const DatagramKey& key) {
  if (sealed.size() < kTagBytes) {
    return makeError(Code::kProtocol, "connection datagram of ", sealed.size(), " bytes cannot carry its ", kTagBytes,
                     "-byte tag");
  }
  auto body = sealed.first(sealed.size() - kTagBytes);
  uint64_t expected = sipHash24(key, body);
  uint64_t difference = expected ^ loadLittle(sealed.data() + body.size());  // constant time: one comparison
  if (difference != 0) {
    return makeError(Code::kProtocol, "connection datagram of ", sealed.size(),
                     " bytes has a wrong tag (not sealed with this job's key)");
  }
  return body;
}

}  // namespace ibdt::messaging::connection
