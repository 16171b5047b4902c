// transport/memory/unmap_events.h — telling registration caches that memory
// went away.
//
// A registration pins the pages that were mapped when it was made. Once the
// process unmaps (or discards, or remaps) those pages, a new buffer placed at
// the same address is backed by different pages, and a cached registration of
// that address would make the NIC read and write the old ones. Every cache
// therefore listens for unmap events:
//   * ibdt defines munmap, mremap, madvise (DONTNEED/FREE/REMOVE), mmap with
//     MAP_FIXED, brk and sbrk, forwarding to the next definition
//     (dlsym(RTLD_NEXT), so ASan's interceptors still run), and reports the
//     affected range first (unmap_interposer.cc). This sees every call made
//     through the PLT: the application's, its libraries', a custom
//     allocator's — but not glibc's internal calls from free()/realloc(),
//     which is what retainHeapMemory() is for;
//   * custom allocators that return memory by other means call
//     ibdt::memory::invalidateRegistrations() (include/ibdt/memory.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ibdt/status.h"

namespace ibdt::memory {

class UnmapListener {
 public:
  virtual ~UnmapListener() = default;
  // [begin, end) is about to stop being backed by the pages it has now. May run
  // inside munmap() on any thread: it must not call back into munmap and must
  // not block on anything an unmapping thread might hold.
  virtual void onUnmap(uintptr_t begin, uintptr_t end) noexcept = 0;
};

// Listeners are kept in a fixed table (no allocation on the unmap path).
// Fails with kResource when the table is full.
Status addUnmapListener(UnmapListener* listener);
void removeUnmapListener(UnmapListener* listener);

// Reports [address, address + length) to every listener. Re-entrant calls on
// the same thread (an unmap made by a listener) are not reported again.
void notifyUnmap(const void* address, size_t length) noexcept;

// True when this process's munmap is ibdt's forwarding definition, i.e. the
// events above are actually seen (false when another library's definition
// comes first, or the symbol was bound before ibdt was loaded).
bool unmapInterceptionActive();

// Keeps glibc malloc from handing memory back to the kernel behind the
// interposers' back (the calls free() makes are internal, not via the PLT):
// mallopt(M_MMAP_MAX, 0) serves large blocks from the heap instead of private
// mappings, mallopt(M_TRIM_THRESHOLD, -1) never trims the heap top and
// mallopt(M_ARENA_MAX, 1) keeps threads off per-thread arenas, whose heaps
// are deleted with internal munmap. Done once per process; returns false when
// malloc did not accept the settings (another allocator, or a sanitizer's).
bool retainHeapMemory();

}  // namespace ibdt::memory
