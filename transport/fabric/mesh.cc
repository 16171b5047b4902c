#include "transport/fabric/mesh.h"

#include <cstring>

namespace ibdt::fabric {
namespace {

// One rank's contribution: the address of its endpoint to each rank, in
// rank order, each prefixed by its 32-bit length (empty: none).
std::vector<uint8_t> encodeAddresses(const std::vector<std::vector<uint8_t>>& addresses) {
  std::vector<uint8_t> out;
  for (const auto& address : addresses) {
    auto length = static_cast<uint32_t>(address.size());
    const auto* raw = reinterpret_cast<const uint8_t*>(&length);
    out.insert(out.end(), raw, raw + sizeof(length));
    out.insert(out.end(), address.begin(), address.end());
  }
  return out;
}

// The address rank `from` published for its endpoint towards rank `index`.
Result<std::span<const uint8_t>> addressFor(std::span<const uint8_t> blob, int index, int from) {
  size_t offset = 0;
  for (int i = 0;; ++i) {
    uint32_t length = 0;
    if (blob.size() - offset < sizeof(length)) {
      return makeError(Code::kProtocol, "endpoint addresses of rank ", from, " end before rank ", index);
    }
    std::memcpy(&length, blob.data() + offset, sizeof(length));
    offset += sizeof(length);
    if (blob.size() - offset < length) {
      return makeError(Code::kProtocol, "endpoint addresses of rank ", from, " are truncated");
    }
    if (i == index) return blob.subspan(offset, length);
    offset += length;
  }
}

}  // namespace

Result<std::vector<std::unique_ptr<Endpoint>>> connectMesh(Domain& domain, CompletionQueue& sendQueue,
                                                           CompletionQueue& recvQueue, int rank, int size,
                                                           const Allgather& allgather, const MeshOptions& options) {
  if (size < 1 || rank < 0 || rank >= size || !allgather) {
    return makeError(Code::kInvalidArgument, "connectMesh: rank ", rank, " of ", size,
                     allgather ? "" : " without an allgather");
  }
  std::vector<std::unique_ptr<Endpoint>> endpoints(static_cast<size_t>(size));
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(size));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank && !options.loopback) continue;
    auto endpoint = domain.createEndpoint(sendQueue, recvQueue, options.endpoint);
    if (!endpoint.isOk()) return std::move(endpoint).takeStatus().withContext(strCat("endpoint to rank ", peer));
    (*endpoint)->setPeerLabel(strCat("rank ", peer));
    if (options.prepare) IBDT_RETURN_IF_ERROR(options.prepare(**endpoint, peer));
    addresses[static_cast<size_t>(peer)] = (*endpoint)->address();
    endpoints[static_cast<size_t>(peer)] = std::move(endpoint).value();
  }
  auto all = allgather(encodeAddresses(addresses));
  if (!all.isOk()) return std::move(all).takeStatus().withContext("exchanging the fabric mesh's addresses");
  if (all->size() != static_cast<size_t>(size)) {
    return makeError(Code::kProtocol, "mesh address exchange returned ", all->size(), " entries for ", size, " ranks");
  }
  for (int peer = 0; peer < size; ++peer) {
    Endpoint* endpoint = endpoints[static_cast<size_t>(peer)].get();
    if (endpoint == nullptr) continue;
    IBDT_ASSIGN_OR_RETURN(auto address, addressFor((*all)[static_cast<size_t>(peer)], rank, peer));
    Status connected = endpoint->connect(address);
    if (!connected.isOk()) return connected.withContext(strCat("connecting to rank ", peer));
  }
  auto barrier = allgather({});
  if (!barrier.isOk()) return std::move(barrier).takeStatus().withContext("the barrier after connecting the mesh");
  return endpoints;
}

Result<std::vector<std::unique_ptr<Endpoint>>> connectMesh(Domain& domain, CompletionQueue& sendQueue,
                                                           CompletionQueue& recvQueue, bootstrap::Store& store,
                                                           const MeshOptions& options, Deadline deadline) {
  Allgather allgather = [&store, deadline](std::span<const uint8_t> value) { return store.allgather(value, deadline); };
  return connectMesh(domain, sendQueue, recvQueue, store.rank(), store.size(), allgather, options);
}

}  // namespace ibdt::fabric
