// ibdt/memory.h — what applications need to know about ibdt's memory layer.
//
// ibdt caches memory registrations (pinned pages) so that repeated transfers
// from the same buffer do not pay for registration again. It drops a cached
// registration as soon as the memory under it is unmapped: it sees munmap,
// mremap, madvise(DONTNEED/FREE/REMOVE), mmap(MAP_FIXED), brk and sbrk made
// through the dynamic linker, and it keeps glibc malloc from returning freed
// memory to the kernel by other means (see README "Memory").
//
// An allocator that releases memory in a way ibdt cannot see (raw system
// calls, a statically linked libc, a device allocator) must report it.
#pragma once

#include <cstddef>

namespace ibdt::memory {

// Tells every registration cache in the process that [address, address +
// length) no longer holds the pages it had (it was unmapped, discarded or
// replaced). Cached registrations overlapping it are never handed out again
// and are deregistered once no transfer uses them. Thread-safe, async-signal
// unsafe, does not allocate.
void invalidateRegistrations(const void* address, size_t length);

}  // namespace ibdt::memory
