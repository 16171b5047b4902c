// transport/memory/peer_span.h — how much memory one key handed to a peer
// may span beyond the data it is for.
//
// A zero-copy receive gives its peer one rkey over the receive type's whole
// span (docs/design.md, Messaging: what the checks cannot bound). For a struct type over separately
// allocated buffers that span holds memory that belongs to nothing of the
// receive — in a release build the heap keeps the buffers close, so the
// registration succeeds and the peer could write anything in between
// (issue 17: keys grant exactly the bytes of the registration). A span much
// larger than the data it carries is therefore refused; the caller takes a
// path whose key covers only staging memory (the unpack reply).
#pragma once

#include <cstdint>

#include "ibdt/status.h"

namespace ibdt::memory {

// The slack a span may always carry beyond its data: small types with a few
// holes (alignment padding, a vector of a few strides) stay zero-copy.
inline constexpr int64_t kPeerSpanSlackBytes = int64_t{64} << 10;
// Beyond the slack, a span may hold at most this many times its data.
inline constexpr int64_t kPeerSpanDataFactor = 4;

// The largest span a key to `dataBytes` of a peer's data may cover:
// max(4 x data, data + 64 KiB).
int64_t maxPeerSpan(int64_t dataBytes);

// OK when a single region of `spanBytes` covering `dataBytes` of data may be
// handed to a peer; otherwise kUnsupported naming both sizes and the bound.
Status checkPeerSpan(int64_t spanBytes, int64_t dataBytes);

}  // namespace ibdt::memory
