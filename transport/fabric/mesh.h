// transport/fabric/mesh.h — connecting every rank of a job to every other:
// one endpoint per peer, every rank's addresses exchanged in one allgather,
// connected, then an empty allgather as a barrier so that no rank sends
// before its peers are connected. The bootstrap Store provides the
// allgather; the messaging layer may pass its own (ranks as threads in tests).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "ibdt/deadline.h"
#include "ibdt/fabric.h"
#include "ibdt/store.h"

namespace ibdt::fabric {

// Collective: every rank contributes bytes, all receive all, by rank.
using Allgather = std::function<Result<std::vector<std::vector<uint8_t>>>(std::span<const uint8_t>)>;

struct MeshOptions {
  EndpointOptions endpoint;
  // Also connect an endpoint of this rank to itself (loopback traffic).
  bool loopback = false;
  // Runs on each new endpoint before its address is published, e.g. to post
  // receives so that no early send finds none.
  std::function<Status(Endpoint& endpoint, int peer)> prepare;
};

// Endpoints by peer rank (null for this rank unless options.loopback).
// Collective over all `size` ranks. Each rank receives every rank's list
// of addresses (O(size^2) bytes): for large jobs connect on demand instead.
Result<std::vector<std::unique_ptr<Endpoint>>> connectMesh(Domain& domain, CompletionQueue& sendQueue,
                                                           CompletionQueue& recvQueue, int rank, int size,
                                                           const Allgather& allgather, const MeshOptions& options);
// The same through the bootstrap Store (waits until `deadline`).
Result<std::vector<std::unique_ptr<Endpoint>>> connectMesh(Domain& domain, CompletionQueue& sendQueue,
                                                           CompletionQueue& recvQueue, bootstrap::Store& store,
                                                           const MeshOptions& options, Deadline deadline);

}  // namespace ibdt::fabric
