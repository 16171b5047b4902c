// transport/fabric/shm/copy_distance.h — the distances (destination − source
// mod 4096) at which this CPU's cross-memory copy (process_vm_writev/readv)
// is slow (base/slow_distances.h), measured when the first shm domain opens.
// remote_copy.cc sends such pieces through a staging buffer.
#pragma once

#include "base/slow_distances.h"

namespace ibdt::fabric::shm {

// Measures the first time (later calls return at once); none without
// cross-memory attach.
void measureCrossMemorySlowDistances();
// The distances measured so far (none before the measurement).
SlowDistances crossMemorySlowDistances();
// For tests: replace them.
void setCrossMemorySlowDistancesForTesting(SlowDistances distances);

}  // namespace ibdt::fabric::shm
