// transport/fabric/verbs/verbs_device.h — picking an RDMA device, port and GID.
//
// A port is chosen by name ("mlx5_0:1", or "rxe0" for its first active port)
// or, with an empty selector, as the first active port of any device. On
// RoCE (Ethernet link layer) the GID is the RoCE v2 IPv4-mapped entry when
// there is one, else another RoCE v2, else RoCE v1; IBDT_VERBS_GID_INDEX
// overrides it. On InfiniBand the LID addresses the port.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::fabric::verbs {

struct ContextCloser {
  void operator()(ibv_context* context) const { ibv_close_device(context); }
};
using ContextHandle = std::unique_ptr<ibv_context, ContextCloser>;

struct SelectedPort {
  ContextHandle context;
  std::string deviceName;
  uint8_t portNumber = 1;
  ibv_port_attr attr{};
  bool roce = false;       // Ethernet link layer: routed by GID
  uint8_t gidIndex = 0;
  ibv_gid gid{};
  std::string gidType;     // "IB", "RoCE v1" or "RoCE v2"

  std::string label() const;  // "rxe0:1"
};

// kAuto picks the GID as described above; otherwise the given index is used.
inline constexpr int kAutoGidIndex = -1;

// Opens the device and port named by `selector` (see above). Fails with
// kNotFound naming what was looked for and what exists.
Result<SelectedPort> openPort(std::string_view selector, int gidIndex);

// One line per device port, e.g. "rxe0:1 active Ethernet mtu 1024".
struct PortSummary {
  std::string text;
  bool active = false;
};
// Fails (kNotFound/kSystem) when rdma-core finds no device at all.
Result<std::vector<PortSummary>> listPorts();

// Bytes of an ibv_mtu value (IBV_MTU_1024 -> 1024); 0 for an invalid value.
uint32_t mtuBytes(int mtu);

}  // namespace ibdt::fabric::verbs
