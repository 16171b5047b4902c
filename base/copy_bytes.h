// base/copy_bytes.h — memcpy for the library's large contiguous copies, except
// at the distances where this CPU's memcpy is measured slow
// (base/slow_distances.h): there a vector loop (base/vector_copy.h), 3 against
// 23 µs per 64 KiB on the EPYC VM.
#pragma once

#include <cstddef>

#include "base/slow_distances.h"

namespace ibdt {

void copyBytes(void* destination, const void* source, size_t bytes);

// memcpy's slow distances in this process: measured on the first copy that
// could be slow (a fraction of a millisecond, once).
SlowDistances memcpySlowDistances();
// For tests: replace them.
void setMemcpySlowDistancesForTesting(SlowDistances distances);

}  // namespace ibdt
