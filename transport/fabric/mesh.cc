#include "transport/fabric/mesh.h"

#include <string>

namespace ibdt::fabric {
namespace {

// The address rank `from` published for its endpoint towards rank `to`.
std::string addressKey(std::string_view tag, int to) { return strCat("ibdt.fabric.", tag, ".to.", to); }

}  // namespace

Result<std::vector<std::unique_ptr<Endpoint>>> connectMesh(Domain& domain, CompletionQueue& sendQueue,
                                                           CompletionQueue& recvQueue, bootstrap::Store& store,
                                                           const MeshOptions& options, Deadline deadline) {
  const int me = store.rank();
  std::vector<std::unique_ptr<Endpoint>> endpoints(static_cast<size_t>(store.size()));
  for (int peer = 0; peer < store.size(); ++peer) {
    if (peer == me && !options.loopback) continue;
    auto endpoint = domain.createEndpoint(sendQueue, recvQueue, options.endpoint);
    if (!endpoint.isOk()) return std::move(endpoint).takeStatus().withContext(strCat("endpoint to rank ", peer));
    (*endpoint)->setPeerLabel(strCat("rank ", peer));
    if (options.prepare) IBDT_RETURN_IF_ERROR(options.prepare(**endpoint, peer));
    IBDT_RETURN_IF_ERROR(store.put(addressKey(options.tag, peer), (*endpoint)->address()));
    endpoints[static_cast<size_t>(peer)] = std::move(endpoint).value();
  }
  IBDT_RETURN_IF_ERROR(store.commit());
  IBDT_RETURN_IF_ERROR(store.fence(deadline));
  for (int peer = 0; peer < store.size(); ++peer) {
    Endpoint* endpoint = endpoints[static_cast<size_t>(peer)].get();
    if (endpoint == nullptr) continue;
    auto address = store.get(peer, addressKey(options.tag, me), deadline);
    if (!address.isOk()) return std::move(address).takeStatus().withContext("connecting the fabric mesh");
    Status connected = endpoint->connect(*address);
    if (!connected.isOk()) return connected.withContext(strCat("connecting to rank ", peer));
  }
  IBDT_RETURN_IF_ERROR(store.barrier(deadline));
  return endpoints;
}

}  // namespace ibdt::fabric
