// bootstrap/pmi1/pmi1_codec.h — fitting Store values into PMI-1's KVS.
//
// PMI-1 values are short text without spaces or '=' (Hydra: vallen_max 1024)
// and keys are shared by the whole job (keylen_max 64). So keys get the
// owner's rank in front (hashed when too long), and values are base64url
// encoded behind a tag: "v<data>" inline, or "c<chunks>.<bytes>" naming
// chunk keys "<key>#<i>" that hold the encoded pieces.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::bootstrap::pmi1 {

// Unpadded base64url (RFC 4648 section 5): safe inside a PMI-1 message.
std::string encodeBase64(std::span<const uint8_t> bytes);
Result<std::vector<uint8_t>> decodeBase64(std::string_view text);

// The job-wide KVS key for `rank`'s `key`, at most `maxLength` characters
// (room for a "#<chunk>" suffix is kept).
std::string kvsKey(int rank, std::string_view key, size_t maxLength);

// A value split into KVS entries: the head value stored under the key, and
// the chunk values stored under "<key>#<i>".
struct EncodedValue {
  std::string head;
  std::vector<std::string> chunks;
};
EncodedValue encodeValue(std::span<const uint8_t> bytes, size_t maxValueLength);
// Parses a head value: the inline bytes, or how many chunks and bytes follow.
struct Head {
  bool isInline = false;
  std::vector<uint8_t> inlineBytes;
  size_t chunks = 0;
  size_t bytes = 0;
};
Result<Head> decodeHead(std::string_view head);

// Decodes MPICH's PMI_process_mapping, e.g. "(vector,(0,2,4))" = from node 0,
// 2 nodes with 4 ranks each, into the node id of every one of `size` ranks
// (ids renumbered densely from 0 in order of first appearance).
Result<std::vector<int>> decodeProcessMapping(std::string_view mapping, int size);

}  // namespace ibdt::bootstrap::pmi1
