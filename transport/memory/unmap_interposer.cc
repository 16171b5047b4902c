// transport/memory/unmap_interposer.cc — ibdt's definitions of the calls that
// unmap memory: report the range to the registration caches, then forward to
// the next definition in the lookup order (libc's, or a sanitizer's
// interceptor, which forwards to libc in turn).
//
// The next definitions are looked up with dlsym(RTLD_NEXT) on first use.
// dlsym may itself allocate; a call made while the lookup is in progress
// (on any thread) goes straight to the kernel with syscall().
#include <dlfcn.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "transport/memory/unmap_events.h"

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

namespace {

using MunmapFn = int (*)(void*, size_t);
using MremapFn = void* (*)(void*, size_t, size_t, int, ...);
using MadviseFn = int (*)(void*, size_t, int);
using MmapFn = void* (*)(void*, size_t, int, int, int, off_t);
using BrkFn = int (*)(void*);
using SbrkFn = void* (*)(intptr_t);

struct NextDefinitions {
  MunmapFn munmap = nullptr;
  MremapFn mremap = nullptr;
  MadviseFn madvise = nullptr;
  MmapFn mmap = nullptr;
  MmapFn mmap64 = nullptr;
  BrkFn brk = nullptr;
  SbrkFn sbrk = nullptr;
};

NextDefinitions gNext;
// 0: not looked up, 1: lookup in progress, 2: done.
std::atomic<int> gState{0};

// Returns the next definitions, or nullptr while the lookup is in progress.
const NextDefinitions* next() {
  int state = gState.load(std::memory_order_acquire);
  if (state == 2) return &gNext;
  int expected = 0;
  if (state == 1 || !gState.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    return gState.load(std::memory_order_acquire) == 2 ? &gNext : nullptr;
  }
  gNext.munmap = reinterpret_cast<MunmapFn>(dlsym(RTLD_NEXT, "munmap"));
  gNext.mremap = reinterpret_cast<MremapFn>(dlsym(RTLD_NEXT, "mremap"));
  gNext.madvise = reinterpret_cast<MadviseFn>(dlsym(RTLD_NEXT, "madvise"));
  gNext.mmap = reinterpret_cast<MmapFn>(dlsym(RTLD_NEXT, "mmap"));
  gNext.mmap64 = reinterpret_cast<MmapFn>(dlsym(RTLD_NEXT, "mmap64"));
  gNext.brk = reinterpret_cast<BrkFn>(dlsym(RTLD_NEXT, "brk"));
  gNext.sbrk = reinterpret_cast<SbrkFn>(dlsym(RTLD_NEXT, "sbrk"));
  gState.store(2, std::memory_order_release);
  return &gNext;
}

bool discardsPages(int advice) {
  return advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE || advice == MADV_DONTNEED_LOCKED;
}

void* rawMmap(void* address, size_t length, int protection, int flags, int fd, off_t offset) {
  long result = syscall(SYS_mmap, address, length, protection, flags, fd, offset);
  return reinterpret_cast<void*>(result);
}

void* forwardMmap(MmapFn nextMmap, void* address, size_t length, int protection, int flags, int fd,
                  off_t offset) {
  // MAP_FIXED replaces whatever was mapped there (MAP_FIXED_NOREPLACE fails instead).
  if ((flags & MAP_FIXED) != 0) ibdt::memory::notifyUnmap(address, length);
  if (nextMmap == nullptr) return rawMmap(address, length, protection, flags, fd, offset);
  return nextMmap(address, length, protection, flags, fd, offset);
}

}  // namespace

extern "C" {

// munmap is an alias of this hidden definition, so unmapInterceptionActive()
// can compare the process-wide binding with this library's own code.
__attribute__((visibility("hidden"))) int ibdtMunmap(void* address, size_t length) noexcept {
  ibdt::memory::notifyUnmap(address, length);
  const NextDefinitions* fns = next();
  if (fns == nullptr || fns->munmap == nullptr) return static_cast<int>(syscall(SYS_munmap, address, length));
  return fns->munmap(address, length);
}

int munmap(void* address, size_t length) noexcept __attribute__((alias("ibdtMunmap")));

void* mremap(void* oldAddress, size_t oldLength, size_t newLength, int flags, ...) noexcept {
  void* newAddress = nullptr;
  if ((flags & MREMAP_FIXED) != 0) {
    va_list args;
    va_start(args, flags);
    newAddress = va_arg(args, void*);
    va_end(args);
    ibdt::memory::notifyUnmap(newAddress, newLength);
  }
  // Even an in-place resize may move the pages behind the old range.
  ibdt::memory::notifyUnmap(oldAddress, oldLength);
  const NextDefinitions* fns = next();
  if (fns == nullptr || fns->mremap == nullptr) {
    return reinterpret_cast<void*>(syscall(SYS_mremap, oldAddress, oldLength, newLength, flags, newAddress));
  }
  return fns->mremap(oldAddress, oldLength, newLength, flags, newAddress);
}

int madvise(void* address, size_t length, int advice) noexcept {
  if (discardsPages(advice)) ibdt::memory::notifyUnmap(address, length);
  const NextDefinitions* fns = next();
  if (fns == nullptr || fns->madvise == nullptr) return static_cast<int>(syscall(SYS_madvise, address, length, advice));
  return fns->madvise(address, length, advice);
}

void* mmap(void* address, size_t length, int protection, int flags, int fd, off_t offset) noexcept {
  const NextDefinitions* fns = next();
  return forwardMmap(fns == nullptr ? nullptr : fns->mmap, address, length, protection, flags, fd, offset);
}

void* mmap64(void* address, size_t length, int protection, int flags, int fd, off64_t offset) noexcept {
  const NextDefinitions* fns = next();
  return forwardMmap(fns == nullptr ? nullptr : fns->mmap64, address, length, protection, flags, fd, offset);
}

int brk(void* address) noexcept {
  const NextDefinitions* fns = next();
  if (fns == nullptr || fns->brk == nullptr || fns->sbrk == nullptr) return static_cast<int>(syscall(SYS_brk, address));
  auto current = reinterpret_cast<uintptr_t>(fns->sbrk(0));
  auto wanted = reinterpret_cast<uintptr_t>(address);
  if (wanted < current) ibdt::memory::notifyUnmap(address, current - wanted);
  return fns->brk(address);
}

void* sbrk(intptr_t increment) noexcept {
  const NextDefinitions* fns = next();
  if (fns == nullptr || fns->sbrk == nullptr) {
    errno = ENOMEM;
    return reinterpret_cast<void*>(-1);
  }
  if (increment < 0) {
    auto current = reinterpret_cast<uintptr_t>(fns->sbrk(0));
    ibdt::memory::notifyUnmap(reinterpret_cast<void*>(current - static_cast<uintptr_t>(-increment)),
                              static_cast<size_t>(-increment));
  }
  return fns->sbrk(increment);
}

}  // extern "C"

namespace ibdt::memory {

bool unmapInterceptionActive() {
  // The definition the process resolves `munmap` to, seen from anywhere.
  void* resolved = dlsym(RTLD_DEFAULT, "munmap");
  return resolved == reinterpret_cast<void*>(&ibdtMunmap);
}

}  // namespace ibdt::memory
