// transport/messaging/connection_auth.h — a MAC over every lazy-connection
// datagram (connection.h), keyed by a per-job secret.
//
// Rank 0 draws a 128-bit key at create() and it reaches the other ranks
// through the bootstrap allgather (the Store, which answers only processes
// that present the job token); it never travels in a datagram. Each datagram
// carries an 8-byte SipHash-2-4 tag of all its bytes, and a datagram whose
// tag does not match is dropped before it is parsed. So a process that can
// reach a listener but is not part of the job cannot forge a request, an
// accept or a ready, even after it saw earlier datagrams (they hold the
// nonce and the tokens, never the key).
//
// Why SipHash-2-4 and not HMAC-SHA256: the library links no crypto library
// (OpenSSL would be a new dependency of every user's job for 40-byte
// messages), and SipHash is a keyed PRF designed as a MAC for short inputs
// (Aumasson and Bernstein, 2012): ~50 lines, no allocation, a few hundred
// nanoseconds per datagram. A 64-bit tag bounds an online forger to one
// success in 2^64 datagrams sent, each of which the receiver must be handed
// through the provider's listener. Keys are per job, not per pair: a member
// of the job can still forge datagrams claiming another rank (docs/security.md).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::messaging::connection {

struct DatagramKey {
  std::array<uint64_t, 2> words{};
  static constexpr size_t kBytes = 16;
};

// A fresh key from the system's random source.
DatagramKey newDatagramKey();
DatagramKey datagramKeyFrom(std::span<const uint8_t, DatagramKey::kBytes> bytes);
std::array<uint8_t, DatagramKey::kBytes> datagramKeyBytes(const DatagramKey& key);

inline constexpr size_t kTagBytes = 8;

// SipHash-2-4 of `bytes` under `key`.
uint64_t sipHash24(const DatagramKey& key, std::span<const uint8_t> bytes);
// Appends the tag of `datagram` to it.
void seal(std::vector<uint8_t>& datagram, const DatagramKey& key);
// The datagram without its tag; kProtocol when it is too short to carry a
// tag or the tag does not match (compared in constant time).
Result<std::span<const uint8_t>> unseal(std::span<const uint8_t> sealed, const DatagramKey& key);

}  // namespace ibdt::messaging::connection
