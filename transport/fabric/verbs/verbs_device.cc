#include "transport/fabric/verbs/verbs_device.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/parse_integer.h"

namespace ibdt::fabric::verbs {
namespace {

struct DeviceListFree {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};

struct DeviceList {
  std::unique_ptr<ibv_device*, DeviceListFree> list;
  int count = 0;
};

Result<DeviceList> getDevices() {
  DeviceList devices;
  errno = 0;
  devices.list.reset(ibv_get_device_list(&devices.count));
  if (!devices.list) {
    return makeError(Code::kSystem, "ibv_get_device_list failed: ", std::strerror(errno),
                     " (is the kernel's ib_uverbs module loaded?)");
  }
  if (devices.count == 0) return makeError(Code::kNotFound, "no RDMA device (rdma-core lists none)");
  return devices;
}

const char* linkLayerName(uint8_t linkLayer) {
  switch (linkLayer) {
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
    default: return "unspecified";
  }
}

bool isIpv4Mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid.raw[i] != 0) return false;
  }
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

const char* gidTypeName(uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    default: return "unknown";
  }
}

// Higher is better; RoCE v2 over IPv4 is routable and what rdma_cm picks.
int gidRank(const ibv_gid_entry& entry) {
  if (entry.gid_type == IBV_GID_TYPE_ROCE_V2) return isIpv4Mapped(entry.gid) ? 3 : 2;
  if (entry.gid_type == IBV_GID_TYPE_ROCE_V1) return 1;
  return 0;
}

Status chooseGid(SelectedPort& port, int gidIndex, int portCount) {
  // The table covers every port of the device; this port's entries are kept.
  std::vector<ibv_gid_entry> entries(static_cast<size_t>(std::max(port.attr.gid_tbl_len, 1)) * portCount);
  ssize_t count = ibv_query_gid_table(port.context.get(), entries.data(), entries.size(), 0);
  if (count < 0) {
    return makeError(Code::kSystem, port.label(), ": ibv_query_gid_table failed: ", std::strerror(static_cast<int>(-count)));
  }
  const ibv_gid_entry* best = nullptr;
  std::string valid;
  for (ssize_t i = 0; i < count; ++i) {
    const ibv_gid_entry& entry = entries[static_cast<size_t>(i)];
    if (entry.port_num != port.portNumber) continue;
    valid += strCat(valid.empty() ? "" : ", ", entry.gid_index, " (", gidTypeName(entry.gid_type), ")");
    if (gidIndex >= 0) {
      if (entry.gid_index == static_cast<uint32_t>(gidIndex)) best = &entry;
    } else if (port.roce && (best == nullptr || gidRank(entry) > gidRank(*best))) {
      best = &entry;
    } else if (!port.roce && best == nullptr) {
      best = &entry;
    }
  }
  if (best == nullptr) {
    if (gidIndex >= 0) {
      return makeError(Code::kNotFound, port.label(), ": GID index ", gidIndex,
                       " (IBDT_VERBS_GID_INDEX) is not a valid entry; valid: ", valid.empty() ? "none" : valid);
    }
    if (port.roce) return makeError(Code::kNotFound, port.label(), ": RoCE port has no valid GID (no IP address?)");
    return Status::ok();  // InfiniBand without a GID table entry: LID routing only
  }
  if (best->gid_index > 255) {
    return makeError(Code::kNotFound, port.label(), ": GID index ", best->gid_index, " does not fit ibv_ah_attr");
  }
  port.gidIndex = static_cast<uint8_t>(best->gid_index);
  port.gid = best->gid;
  port.gidType = gidTypeName(best->gid_type);
  return Status::ok();
}

struct Selector {
  std::string device;  // empty: any
  int port = 0;        // 0: first active
};

Result<Selector> parseSelector(std::string_view text) {
  Selector selector;
  size_t colon = text.rfind(':');
  selector.device = std::string(text.substr(0, colon));
  if (colon != std::string_view::npos) {
    const std::optional<int> port = parseInteger<int>(text.substr(colon + 1));
    selector.port = port.value_or(0);
    if (selector.port < 1 || selector.port > 255) {
      return makeError(Code::kInvalidArgument, "device '", text, "': expected NAME or NAME:PORT with PORT in [1, 255]");
    }
  }
  return selector;
}

}  // namespace

std::string SelectedPort::label() const { return strCat(deviceName, ":", static_cast<int>(portNumber)); }

uint32_t mtuBytes(int mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
    default: return 0;
  }
}

Result<SelectedPort> openPort(std::string_view selectorText, int gidIndex) {
  IBDT_ASSIGN_OR_RETURN(Selector selector, parseSelector(selectorText));
  IBDT_ASSIGN_OR_RETURN(DeviceList devices, getDevices());
  std::string seen;
  for (int d = 0; d < devices.count; ++d) {
    ibv_device* device = devices.list.get()[d];
    std::string name = ibv_get_device_name(device);
    if (!selector.device.empty() && name != selector.device) {
      seen += strCat(seen.empty() ? "" : ", ", name);
      continue;
    }
    ContextHandle context(ibv_open_device(device));
    if (!context) {
      return makeError(Code::kSystem, "ibv_open_device(", name, ") failed: ", std::strerror(errno));
    }
    ibv_device_attr deviceAttr{};
    if (int rc = ibv_query_device(context.get(), &deviceAttr); rc != 0) {
      return makeError(Code::kSystem, "ibv_query_device(", name, ") failed: ", std::strerror(rc));
    }
    for (int p = 1; p <= deviceAttr.phys_port_cnt; ++p) {
      if (selector.port != 0 && p != selector.port) continue;
      ibv_port_attr attr{};
      if (int rc = ibv_query_port(context.get(), static_cast<uint8_t>(p), &attr); rc != 0) {
        return makeError(Code::kSystem, "ibv_query_port(", name, ":", p, ") failed: ", std::strerror(rc));
      }
      seen += strCat(seen.empty() ? "" : ", ", name, ":", p, attr.state == IBV_PORT_ACTIVE ? " active" : " down");
      if (attr.state != IBV_PORT_ACTIVE) continue;
      SelectedPort port;
      port.deviceName = name;
      port.portNumber = static_cast<uint8_t>(p);
      port.attr = attr;
      port.roce = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
      port.context = std::move(context);
      if (!port.roce && attr.lid == 0) {
        return makeError(Code::kNotFound, port.label(), ": InfiniBand port has no LID (is a subnet manager running?)");
      }
      IBDT_RETURN_IF_ERROR(chooseGid(port, gidIndex, deviceAttr.phys_port_cnt));
      if (port.gidType.empty()) port.gidType = "IB";
      return port;
    }
  }
  return makeError(Code::kNotFound, "no active RDMA port",
                   selectorText.empty() ? std::string() : strCat(" matching '", selectorText, "'"),
                   "; found: ", seen.empty() ? "nothing" : seen);
}

Result<std::vector<PortSummary>> listPorts() {
  IBDT_ASSIGN_OR_RETURN(DeviceList devices, getDevices());
  std::vector<PortSummary> ports;
  for (int d = 0; d < devices.count; ++d) {
    ibv_device* device = devices.list.get()[d];
    std::string name = ibv_get_device_name(device);
    ContextHandle context(ibv_open_device(device));
    ibv_device_attr deviceAttr{};
    if (!context || ibv_query_device(context.get(), &deviceAttr) != 0) {
      ports.push_back({strCat(name, ": cannot be opened: ", std::strerror(errno)), false});
      continue;
    }
    for (int p = 1; p <= deviceAttr.phys_port_cnt; ++p) {
      ibv_port_attr attr{};
      if (ibv_query_port(context.get(), static_cast<uint8_t>(p), &attr) != 0) continue;
      bool active = attr.state == IBV_PORT_ACTIVE;
      ports.push_back({strCat(name, ":", p, " ", active ? "active" : "down", " ", linkLayerName(attr.link_layer),
                              " mtu ", mtuBytes(attr.active_mtu)),
                       active});
    }
  }
  return ports;
}

}  // namespace ibdt::fabric::verbs
