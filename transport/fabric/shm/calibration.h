// transport/fabric/shm/calibration.h — what the shm provider's operations
// cost on this machine, measured once when a domain opens (a millisecond at
// most) and published in caps() for the cost models above the fabric.
// (Registration is calibrated beside registerMemory, in domain.cc.)
#pragma once

#include <cstddef>

#include "ibdt/fabric.h"

namespace ibdt::fabric::shm {

// One-sided transfers. With cross-memory attach, user-memory targets are
// timed with process_vm_writev into this process (the same kernel path a
// peer takes): one 8-byte call, 64 one-line pieces on distinct pages, 64
// local pieces into one page, and 4 MiB in one piece. Targets in
// provider-allocated memory are a plain memcpy. Without cross-memory attach
// (the bounce path) user-memory transfers cost a round trip to the target
// per 64 KiB chunk, which cannot be timed without a peer: a nominal 10 µs
// per chunk is used.
TransferCost calibrateTransfer(size_t page, bool crossMemoryAttach);

}  // namespace ibdt::fabric::shm
