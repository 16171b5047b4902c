// ibdt-sim's platforms (sim_platform.h).
#include "tools/sim/sim_platform.h"

#include <simgrid/s4u.hpp>

#include <sstream>

namespace ibdt::sim {
namespace {

namespace sg4 = simgrid::s4u;

Result<std::vector<unsigned int>> parseList(const std::string& text) {
  std::vector<unsigned int> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      const long value = std::stol(item);
      if (value < 1 || value > 1 << 20) return makeError(Code::kInvalidArgument, "fat tree: ", value, " out of range");
      values.push_back(static_cast<unsigned int>(value));
    } catch (...) {
      return makeError(Code::kInvalidArgument, "fat tree: \"", item, "\" is not a number");
    }
  }
  return values;
}

struct FatTree {
  unsigned int levels = 0;
  std::vector<unsigned int> down, up, links;
  int64_t leaves() const {
    int64_t n = 1;
    for (unsigned int d : down) n *= d;
    return n;
  }
};

Result<FatTree> parseFatTree(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ';')) parts.push_back(part);
  if (parts.size() != 4) return makeError(Code::kInvalidArgument, "fat tree \"", text, "\": want levels;down;up;links");
  FatTree tree;
  IBDT_ASSIGN_OR_RETURN(std::vector<unsigned int> levels, parseList(parts[0]));
  IBDT_ASSIGN_OR_RETURN(tree.down, parseList(parts[1]));
  IBDT_ASSIGN_OR_RETURN(tree.up, parseList(parts[2]));
  IBDT_ASSIGN_OR_RETURN(tree.links, parseList(parts[3]));
  if (levels.size() != 1 || tree.down.size() != levels[0] || tree.up.size() != levels[0] ||
      tree.links.size() != levels[0]) {
    return makeError(Code::kInvalidArgument, "fat tree \"", text, "\": one count per level");
  }
  tree.levels = levels[0];
  return tree;
}

}  // namespace

std::string fatTreeDescription(const PlatformSpec& spec) {
  if (!spec.fatTree.empty()) return spec.fatTree;
  if (spec.nodes <= 1) return "1;1;1;1";
  // Leaves of `radix` nodes under `radix` top switches: full bisection.
  const int radix = std::max(1, std::min(spec.leafRadix, spec.nodes));
  const int leaves = (spec.nodes + radix - 1) / radix;
  if (leaves == 1) return "1;" + std::to_string(radix) + ";1;1";
  return "2;" + std::to_string(radix) + "," + std::to_string(leaves) + ";1," + std::to_string(radix) + ";1,1";
}

Status buildPlatform(const PlatformSpec& spec) {
  if (spec.nodes < 1 || spec.coresPerNode < 1 || spec.ibBandwidth <= 0 || spec.intraBandwidth <= 0 ||
      spec.ibLatency < 0 || spec.intraLatency < 0) {
    return makeError(Code::kInvalidArgument, "platform: ", spec.nodes, " nodes of ", spec.coresPerNode,
                     " cores; bandwidths must be > 0, latencies >= 0");
  }
  IBDT_ASSIGN_OR_RETURN(FatTree tree, parseFatTree(fatTreeDescription(spec)));
  if (tree.leaves() < spec.nodes) {
    return makeError(Code::kInvalidArgument, "fat tree \"", fatTreeDescription(spec), "\" has ", tree.leaves(),
                     " leaves for ", spec.nodes, " nodes");
  }
  sg4::Engine::set_config("network/model:" + spec.networkModel);
  auto netpoint = [&spec](sg4::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
    sg4::Host* host = zone->create_host("node-" + std::to_string(id), 1e9);  // 1 flop = 1 ns of on-node cost
    host->set_core_count(spec.coresPerNode)->seal();
    return std::make_pair(host->get_netpoint(), static_cast<simgrid::kernel::routing::NetPoint*>(nullptr));
  };
  auto loopback = [&spec](sg4::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
    return zone->create_link("intra-" + std::to_string(id), spec.intraBandwidth)
        ->set_latency(spec.intraLatency)
        ->seal();
  };
  sg4::NetZone* zone = sg4::create_fatTree_zone("fat-tree", nullptr,
                                                sg4::FatTreeParams(tree.levels, tree.down, tree.up, tree.links),
                                                sg4::ClusterCallbacks(netpoint, loopback, {}), spec.ibBandwidth,
                                                spec.ibLatency, sg4::Link::SharingPolicy::SPLITDUPLEX);
  zone->seal();
  return Status::ok();
}

}  // namespace ibdt::sim
