#include "ibdt/store.h"

namespace ibdt::bootstrap {

Status Store::put(std::string_view key, std::span<const uint8_t> value) {
  if (key.empty()) return makeError(Code::kInvalidArgument, "store put: empty key");
  return doPut(key, value);
}

Status Store::put(std::string_view key, std::string_view value) {
  return put(key, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
}

Result<Bytes> Store::get(int rank, std::string_view key, Deadline deadline) {
  if (rank < 0 || rank >= size()) {
    return makeError(Code::kInvalidArgument, "store get: rank ", rank, " is outside the job [0, ", size(), ")");
  }
  if (key.empty()) return makeError(Code::kInvalidArgument, "store get: empty key");
  return doGet(rank, key, deadline);
}

Result<std::vector<Bytes>> Store::allgather(std::span<const uint8_t> value, Deadline deadline) {
  // Every rank calls allgather in the same order, so the round number names
  // the same key everywhere.
  std::string key = strCat("ibdt.allgather.", allgatherRound_.fetch_add(1));
  IBDT_RETURN_IF_ERROR(put(key, value));
  IBDT_RETURN_IF_ERROR(commit());
  IBDT_RETURN_IF_ERROR(fence(deadline));
  std::vector<Bytes> all;
  all.reserve(static_cast<size_t>(size()));
  for (int peer = 0; peer < size(); ++peer) {
    IBDT_ASSIGN_OR_RETURN(Bytes bytes, get(peer, key, deadline));
    all.push_back(std::move(bytes));
  }
  return all;
}

}  // namespace ibdt::bootstrap
