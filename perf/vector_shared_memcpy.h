// perf/vector_shared_memcpy.h — the "shared memcpy" row of `ibdt-bench vector`:
// what the experiment costs with one memory copy and a spinning flag. It is
// not a lower bound: for small x it shows the cost of handing a cache line
// from one core to the other (a transport whose waiter yields may hand over
// on one core and beat it), and for large x a pipelined copy through a
// shared buffer keeps both cores copying at once and can beat one core's
// single copy of data the other core wrote last.
//
// Two processes share both 128 x 4096 arrays. The sender copies its x
// columns row by row straight into the peer's array (one copy in all, as a
// kernel-assisted or XPMEM single copy would, with no registration, no
// matching and no handshake) and hands over by a flag the peer spins on.
// The ping-pong therefore also pays what the machine charges for moving
// data the other core wrote last, as every transport does here.
#pragma once

#include <cstdint>

#include "ibdt/status.h"
#include "perf/report.h"

namespace ibdt::perf {

struct SharedMemcpy {
  Summary roundTrip;  // seconds per round trip
  Summary window;     // seconds per window of kVectorWindow messages plus the ack
};

// Forks the peer, measures with the vector rows' repetition counts, checks
// the columns of one transfer each way.
Result<SharedMemcpy> measureSharedMemcpy(int64_t x, int warmup, int reps, int pingPongsPerRep);

}  // namespace ibdt::perf
