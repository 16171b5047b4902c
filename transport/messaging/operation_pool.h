// transport/messaging/operation_pool.h — the memory of operations, reused.
//
// Every isend and irecv makes one Operation (with its shared_ptr control
// block, one allocation of ~400 bytes) and frees it when the last Request
// goes. A window of 100 sends overflows glibc's per-thread cache (7 chunks
// per size), so each allocation took malloc's slow path: about 150
// instructions to allocate and as many to free, on every message. Freed
// blocks now wait in a per-thread list for the next operation. A block
// freed on another thread joins that thread's list; the lists are bounded,
// so a thread that only frees returns the rest to the heap.
//
// Under AddressSanitizer the blocks go straight back to the heap, so that a
// use after free is still caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define IBDT_OPERATION_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IBDT_OPERATION_POOL 0
#endif
#endif
#ifndef IBDT_OPERATION_POOL
#define IBDT_OPERATION_POOL 1
#endif

namespace ibdt::messaging {

class OperationBlocks {
 public:
  static constexpr size_t kMaxKept = 256;
  static constexpr size_t kRetired = ~size_t{0};

  void* take(size_t bytes) {
    ++made_;
    if (bytes == blockBytes_ && kept_ > 0) return blocks_[--kept_];
    return ::operator new(bytes);
  }
  // Blocks handed out on this thread so far (tests count operations made).
  uint64_t made() const { return made_; }
  size_t kept() const { return kept_; }
  void give(void* block, [[maybe_unused]] size_t bytes) {
#if IBDT_OPERATION_POOL
    if (blockBytes_ == 0) blockBytes_ = bytes;  // the one size pooled: Operation's
    if (bytes == blockBytes_ && kept_ < kMaxKept) {
      blocks_[kept_++] = block;
      return;
    }
#endif
    ::operator delete(block);  // unsized: clang enables sized deallocation only on request
  }
  // At thread exit: the blocks go back, and an operation freed later on
  // this thread (a static Context closing at process exit) goes straight
  // to the heap (no size matches the retired one).
  ~OperationBlocks() {
    while (kept_ > 0) ::operator delete(blocks_[--kept_]);
    blockBytes_ = kRetired;
  }

 private:
  size_t blockBytes_ = 0;
  size_t kept_ = 0;
  uint64_t made_ = 0;
  void* blocks_[kMaxKept];
};

inline OperationBlocks& operationBlocks() {
  static thread_local OperationBlocks blocks;
  return blocks;
}

// An allocator for std::allocate_shared: one block per operation, from the
// calling thread's list.
template <typename T>
struct OperationAllocator {
  using value_type = T;
  OperationAllocator() = default;
  template <typename U>
  OperationAllocator(const OperationAllocator<U>&) {}  // NOLINT(google-explicit-constructor): rebinding
  T* allocate(size_t n) { return static_cast<T*>(operationBlocks().take(n * sizeof(T))); }
  void deallocate(T* block, size_t n) { operationBlocks().give(block, n * sizeof(T)); }
  template <typename U>
  bool operator==(const OperationAllocator<U>&) const {
    return true;
  }
};

}  // namespace ibdt::messaging
