// tools/sim/sim_platform.h — the SimGrid platforms ibdt-sim runs on
// (docs/simulator.md), generated in code rather than read from XML.
//
// A node is one SimGrid host with a core per rank (its CPU runs the on-node
// costs, 1 flop = 1 ns) and a loopback link for the messages between its
// ranks (the intra-node link, shared by them). Nodes hang off a fat tree of
// IB links. The one-node platform is the same tree with one leaf: the
// machine of the validation runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::sim {

struct PlatformSpec {
  int nodes = 1;
  int coresPerNode = 1;
  // SimGrid's fat-tree description "levels;down,...;up,...;links,..."; empty:
  // a two-level tree of full bisection with leaves of `leafRadix` nodes.
  std::string fatTree;
  int leafRadix = 16;
  double ibBandwidth = 25e9;  // bytes/s per link and direction (HDR 200 Gb/s)
  double ibLatency = 250e-9;  // seconds per link hop
  double intraBandwidth = 1e11;  // well above IB: the on-node cost already holds the copies
  double intraLatency = 0;
  // SimGrid's network/model: LV08 (its default), CM02, or IB (crashes in
  // SimGrid 3.32's max-min solver on these platforms beyond a few nodes:
  // docs/simulator.md).
  std::string networkModel = "LV08";
};

// The fat-tree description of `spec` (its own, or the generated one for spec.nodes).
std::string fatTreeDescription(const PlatformSpec& spec);

// Creates the platform in the current SimGrid engine (call once, before
// run). Hosts are named "node-<i>", i = 0 .. nodes - 1.
Status buildPlatform(const PlatformSpec& spec);

}  // namespace ibdt::sim
