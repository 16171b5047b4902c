// transport/fabric/mesh.h — connecting every rank of a job to every other
// through the bootstrap Store: one endpoint per peer, addresses exchanged
// with one commit + fence, connected, then a barrier so that no rank sends
// before its peers are connected.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "ibdt/deadline.h"
#include "ibdt/fabric.h"
#include "ibdt/store.h"

namespace ibdt::fabric {

struct MeshOptions {
  EndpointOptions endpoint;
  // Distinguishes several meshes of one job (e.g. one per communicator).
  std::string tag = "world";
  // Also connect an endpoint of this rank to itself (loopback traffic).
  bool loopback = false;
  // Runs on each new endpoint before its address is published, e.g. to post
  // receives so that no early send finds none.
  std::function<Status(Endpoint& endpoint, int peer)> prepare;
};

// Endpoints by peer rank (null for this rank unless options.loopback).
// Collective over all ranks of `store`.
Result<std::vector<std::unique_ptr<Endpoint>>> connectMesh(Domain& domain, CompletionQueue& sendQueue,
                                                           CompletionQueue& recvQueue, bootstrap::Store& store,
                                                           const MeshOptions& options, Deadline deadline);

}  // namespace ibdt::fabric
